"""A Wordle-like agent written the way the AWS samples write one (not with agent_kit).

``BedrockAgentCoreApp`` + ``@app.entrypoint`` + the official ``@sagemaker_rft_handler`` (it sends
CompleteRollout/UpdateReward) + ``wrap_model(OpenAIModel(client_args=…))``, Strands streaming
on. With ``client_args`` Strands builds a new OpenAI client (and TLS context) for every model
call; ``FOREIGN_MODE=tuned`` passes one client per episode instead (docs/policy-client.md).
The game:
six ``guess`` tool calls, then a text answer (the bench policy plays it).
"""

import json
import os

import openai
from bedrock_agentcore.runtime import BedrockAgentCoreApp
from sagemaker.core.token_generator import generate_token
from sagemaker.train.rft import sagemaker_rft_handler
from sagemaker.train.rft.adapters.strands import wrap_model
from sagemaker.train.rft.headers import make_inference_headers
from strands import Agent, tool
from strands.models.openai import OpenAIModel

app = BedrockAgentCoreApp()
TUNED = os.environ.get("FOREIGN_MODE") == "tuned"


@app.entrypoint
@sagemaker_rft_handler
async def invoke_agent(payload):
    metadata = payload["metadata"]
    task = json.loads(payload["prompt"])
    state = {"guesses": 0}

    @tool
    def guess(word: str) -> str:
        """Guess a word.

        Args:
            word: five letters
        """
        state["guesses"] += 1
        return "correct" if word == task["answer"] else f"wrong ({state['guesses']}/6)"

    client_args = {
        "api_key": generate_token(region=metadata["region"]),
        "base_url": metadata["endpoint"] + "/v1",
    }
    if TUNED:  # one client for the whole episode, carrying the rollout headers itself
        headers = make_inference_headers(metadata)
        client = openai.AsyncOpenAI(**client_args, default_headers=headers)
        model = OpenAIModel(client=client, model_id="default", stream=True)
    else:  # as the samples write it: a new client per model call
        model = OpenAIModel(client_args=client_args, model_id="default", stream=True)
    model = wrap_model(model)
    agent = Agent(model=model, tools=[guess], system_prompt="Play.", callback_handler=None)
    await agent.invoke_async("Guess the five-letter word.")
    return {"reward": 0.1 * state["guesses"]}


if __name__ == "__main__":
    app.run(port=int(os.environ.get("PORT", "8080")))
