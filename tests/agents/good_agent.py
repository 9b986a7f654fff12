"""A well-behaved contract agent (raw BedrockAgentCoreApp + httpx): sample, complete, reward."""

from _contract import good_rollout
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()


@app.entrypoint
def invoke(payload):
    """Play one rollout by the contract."""
    return good_rollout(payload)


if __name__ == "__main__":
    app.run()
