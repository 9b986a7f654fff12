"""The names a run store's events and trajectory reasons are written under, in one place.

Writers (the emulator, the driver, replay) and readers (reporting, export, doctor) agree on
these strings through this module, so a reader never imports the writer to learn a name.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "AGENTS_READY_EVENT",
    "AGENT_BROKEN_EVENT",
    "AGENT_EXIT_EVENT",
    "AGENT_START_EVENT",
    "CHAOS_EVENT",
    "CONNECTION_EVENT",
    "CREATED_REASON",
    "DIVERGENCE_EVENT",
    "DRIVER_ERROR_EVENT",
    "FAILED_REASON",
    "INVOCATION_EVENT",
    "JOB_FAILURE_EVENT",
    "JOB_INTERRUPT_EVENT",
    "JOB_RESUMED_EVENT",
    "LENIENT_OPEN_EVENT",
    "LIMIT_REASON",
    "MEMORY_LIMIT_EVENT",
    "NO_REWARD_REASON",
    "NO_SAMPLE_REASON",
    "POLICY_ERROR_EVENT",
    "REFUSED_REASON",
    "REPORT_ERROR_EVENT",
    "RESUMED_REASON",
    "RETRY_EVENT",
    "ROLLOUT_DONE_EVENT",
    "STATE_EVENT",
    "STOPPED_REASON",
    "TRAIN_EVAL_EVENT",
    "TRAIN_STEP_EVENT",
    "TRAIN_TOKENS_EVENT",
    "TURN_DISCARDED_EVENT",
    "TURN_LIMIT_EVENT",
]

#: A trajectory moved to a state (detail: state, reason); the store writes it with the move.
STATE_EVENT: Final = "state"
#: What the agent answered to an invocation (status, HTTP status, body, error).
INVOCATION_EVENT: Final = "invocation"
#: One injected fault (``agent-kit run --chaos``).
CHAOS_EVENT: Final = "chaos"
#: A policy call that came on another connection than the trajectory's last.
CONNECTION_EVENT: Final = "policy_connection"
#: A failure of the whole job, in the service's words (detail: reason, trajectory, slot).
JOB_FAILURE_EVENT: Final = "job_failure"
#: One rollout slot finished (rewarded or given up); resume keeps such slots.
ROLLOUT_DONE_EVENT: Final = "rollout_done"
#: report.html could not be rendered at the end of a run (summary.json is still written).
REPORT_ERROR_EVENT: Final = "report_error"
#: An agent process (with all it started) went over ``--agent-memory`` and was killed.
MEMORY_LIMIT_EVENT: Final = "agent_memory"
#: A replayed rollout diverged from its recording.
DIVERGENCE_EVENT: Final = "replay_divergence"
#: The emulator refused a policy call because the trajectory reached its turn cap (first time).
TURN_LIMIT_EVENT: Final = "turn_limit"

#: A rollout attempt that will be retried (detail: reason, attempt, invoke status).
RETRY_EVENT: Final = "rollout_retry"
#: A fault of agent_kit itself stopped the job (detail: error); the run stays resumable.
DRIVER_ERROR_EVENT: Final = "driver_error"
#: A run was resumed (detail: stale trajectories expired, advertise URL).
JOB_RESUMED_EVENT: Final = "job_resumed"
#: A graceful stop began (detail: grace seconds, rollouts in flight).
JOB_INTERRUPT_EVENT: Final = "job_interrupt"
#: Every agent worker answered its health check: the cold start ends here (detail: workers).
AGENTS_READY_EVENT: Final = "agents_ready"
#: An agent worker process started (detail: worker, pid, start count).
AGENT_START_EVENT: Final = "agent_start"
#: An agent worker process exited unexpectedly (detail: worker, return code, log tail).
AGENT_EXIT_EVENT: Final = "agent_exit"
#: An agent worker could not be restarted (detail: worker, error).
AGENT_BROKEN_EVENT: Final = "agent_broken"
#: The emulator opened a trajectory it did not know under ``--lenient`` (detail: job ARN).
LENIENT_OPEN_EVENT: Final = "lenient_open"
#: A policy call the backend could not answer (detail: error, turn, route).
POLICY_ERROR_EVENT: Final = "policy_error"
#: A turn answered but not kept: the trajectory was sealed meanwhile.
TURN_DISCARDED_EVENT: Final = "turn_discarded"

#: The tokens one policy turn of a training run sampled (``agent-kit train``; detail: turn,
#: prompt_ids, completion_ids, logprobs).
TRAIN_TOKENS_EVENT: Final = "train_tokens"
#: One training step's update (``agent-kit train``; detail: step, the trainer's metrics).
TRAIN_STEP_EVENT: Final = "train_step"
#: One holdout evaluation of a training run (``agent-kit train --eval``; detail: label ``base``
#: or ``adapter``, mean, se, prompts, rollouts, status and the ``eval/reward/*`` figures).
TRAIN_EVAL_EVENT: Final = "train_eval"

#: The reason of the ``state`` event a trajectory is created with.
CREATED_REASON: Final = "created"
#: An agent completed a rollout with ``Status: failed`` (docs/contract.md §1).
FAILED_REASON: Final = "The agent signaled that the trajectory failed"
#: The invocation ended with no policy call recorded.
NO_SAMPLE_REASON: Final = "No sampling requests were received for this rollout"
#: READY, but no reward within the grace period.
NO_REWARD_REASON: Final = "The rollout completed but no reward was received in time"
#: Prefix of the reason of a rollout that ended on a deterministic limit (final, not retried).
LIMIT_REASON: Final = "limit"
#: The agent refused the rollout with an HTTP 4xx answer after policy calls (final, not retried).
REFUSED_REASON: Final = "The agent refused the rollout"
#: A trajectory left OPEN/READY by a dead run, expired when the run is resumed.
RESUMED_REASON: Final = "resumed"
#: Prefix of the reason given to rollouts cut short when a job stops (not a retry on resume).
STOPPED_REASON: Final = "job stopped"
