"""The job driver: play a dataset against an agent the way the MTRL service does.

Rooms inside, in the order a run flows through them:

- :mod:`~agent_kit.driver.config` — ``RunConfig`` and ``JobConfig``: one run's settings as one
  value (what ``agent-kit run`` parses its options into; ``invoke`` and ``replay`` take theirs
  from it too);
- :mod:`~agent_kit.driver.local` — ``run_local``: one whole local run (the job, then
  ``summary.json`` and ``report.html``); ``play_local``: a ``RunConfig`` played under the
  signals' graceful stop, what ``agent-kit run`` calls;
- :mod:`~agent_kit.driver.stop` — SIGINT/SIGTERM: the first stops the run gracefully, a
  second aborts it;
- :mod:`~agent_kit.driver.hooks` — ``JobHooks``: what a caller hooks into a job (progress,
  step boundaries, the finisher, the stop event, a lock it holds);
- :mod:`~agent_kit.driver.job` — ``run_job``: the job's lifecycle (serve, play, stop,
  finalize) and its ``JobResult``;
- :mod:`~agent_kit.driver.job_setup` — a new or resumed run directory, and the slots left;
- :mod:`~agent_kit.driver.dataset` — the dataset file, validated row by row;
- :mod:`~agent_kit.driver.session` — the session every runner has: serve the emulator, create
  the job, make and start the agents, close them (the one place an invoker is made);
- :mod:`~agent_kit.driver.rollouts` — the rollout loop: slots, retries, counters, the graceful
  stop's drain;
- :mod:`~agent_kit.driver.attempt` — one rollout attempt and the outcome table (shared with
  replay);
- :mod:`~agent_kit.driver.invokers` — how a rollout reaches the agent (local process, URL,
  AgentCore, Lambda); :mod:`~agent_kit.driver._serve` is the agent process itself;
- :mod:`~agent_kit.driver.trainer_side` — agentcore-rl-toolkit's contract (``--contract
  rl-toolkit``): its payload and the local S3 its results land in;
- :mod:`~agent_kit.driver.one_rollout` — ``agent-kit invoke``'s single rollout;
- :mod:`~agent_kit.driver.job_stats` — the driver's figures, counted from the store;
- :mod:`~agent_kit.driver.tunnel` — serving a deployed agent through a tunnel;
- :mod:`~agent_kit.driver.inprocess` — an entrypoint played in-process with a scripted model
  (the engine under :mod:`agent_kit.testing`, in-process replay and ``doctor reward``).

This package's own module imports nothing, so an agent process (``python -m
agent_kit.driver._serve``) loads only what it uses.
"""
