"""Source templates that ``agent-kit package`` copies into deployment artifacts.

``lambda_function.py`` is the Lambda forwarder: standard library only, so the zip needs no
dependencies. It lives here as a real module so it is linted, type-checked and tested like the
rest of agent_kit; :mod:`agent_kit.deploy.package` copies its source verbatim.
"""
