"""``agent-kit dev``: the inner loop — play, replay and audit the agent on every save.

- :mod:`~agent_kit.dev.loop`: the loop (:func:`~agent_kit.dev.loop.run_dev`): an iteration at
  the start and one per batch of saves (watchfiles), until a signal; ``--once``: one;
- :mod:`~agent_kit.dev.session`: one iteration — load (the agent processes restarted only when
  their code changed, the policy reloaded only when its own did), play a small grid through
  the driver, replay the baseline through the replay engine, audit with the doctor's fast
  checks — and what the loop keeps between iterations;
- :mod:`~agent_kit.dev.verdict`: the verdict, its text and its exit code;
- :mod:`~agent_kit.dev.compare` (the paired difference, the terms and rollouts that moved),
  :mod:`~agent_kit.dev.audit` (the findings that changed), :mod:`~agent_kit.dev.loadcheck` (why
  a file does not load, in one line), :mod:`~agent_kit.dev.sources` (the watched files),
  :mod:`~agent_kit.dev.agents` (the agent processes kept across iterations),
  :mod:`~agent_kit.dev.runs` (the numbered iteration directories), :mod:`~agent_kit.dev.options`.

docs/dev.md is the user's guide.
"""

from __future__ import annotations

from agent_kit.dev.loop import DevOutcome, dev_loop, run_dev
from agent_kit.dev.options import DevOptions
from agent_kit.dev.verdict import Verdict

__all__ = ["DevOptions", "DevOutcome", "Verdict", "dev_loop", "run_dev"]
