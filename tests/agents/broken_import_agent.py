"""Test agent whose import fails: the invoker must report the traceback tail."""

raise RuntimeError("this entrypoint is broken on purpose")
