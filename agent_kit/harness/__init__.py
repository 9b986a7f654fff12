"""Drive a user's entrypoint in-process: a scripted Strands model and one-episode runs.

See :mod:`agent_kit.harness.inprocess`; the public face of this is :mod:`agent_kit.testing`.
"""
