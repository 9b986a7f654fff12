"""Ship an agent (tooling half): package, check, stage and deploy it, and submit the real job.

``preflight`` checks an entrypoint, ``staging`` copies it with the runtime half of agent_kit,
``code_zip`` builds the ARM64 code zip, ``package`` assembles every artifact (zip, container
files, Lambda forwarder from ``lambda_template``, AgentCore CLI project), ``agentcore`` deploys
the runtime, ``jobs`` submits and watches MTRL jobs.
"""
