"""A contract agent that prints 10 MB to stdout (and some to stderr) on every rollout."""

import sys

from _contract import good_rollout
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()
LINE = "x" * 1023 + "\n"


@app.entrypoint
def invoke(payload):
    """Print 10 MB, then play one rollout by the contract."""
    for _ in range(10 * 1024):
        sys.stdout.write(LINE)
    sys.stdout.flush()
    print("a warning on stderr", file=sys.stderr, flush=True)
    return good_rollout(payload)


if __name__ == "__main__":
    app.run()
