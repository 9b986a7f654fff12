"""A contract agent that signs with AWS keys of its own instead of the ones the run gave it
(what an agent with hard-coded or stale credentials does)."""

import os

os.environ["AWS_ACCESS_KEY_ID"] = "AKIDSTRAYKEYS"
os.environ["AWS_SECRET_ACCESS_KEY"] = "not-the-run-key"

from _contract import good_rollout  # signs at import, with the keys above
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()


@app.entrypoint
def invoke(payload):
    """Play one rollout by the contract (its policy calls are signed with the wrong keys)."""
    return good_rollout(payload)


if __name__ == "__main__":
    app.run()
