"""The smallest contract entrypoint: a raw BedrockAgentCoreApp that answers reward 1.0."""

from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()


@app.entrypoint
def handle(payload):
    return {"reward": 1.0}


if __name__ == "__main__":
    app.run()
