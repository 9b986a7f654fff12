"""The scripted policy of ``say_agent.py``: say 3, then answer "done"."""


def policy(request):
    if not request.tool_results():
        return {"tool_calls": [{"name": "say", "arguments": {"n": 3}}]}
    return "done"
