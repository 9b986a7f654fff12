"""The one exception tree of agent_kit.

Every error agent_kit raises on purpose derives from :class:`AgentKitError`. Each class knows the
process exit code the CLI uses for it and, where it crosses the wire, the HTTP status and the
contract's error type name (``x-amzn-ErrorType``)::

    AgentKitError                       exit 1
    ├── UsageError                      exit 2   bad CLI arguments or configuration
    │   ├── TemplateError               exit 2   bad template variables / target exists
    │   └── NothingToLearn              exit 2   ``train``'s probe groups all scored alike
    ├── AuxiliaryError                  exit 2   no auxiliary model, or its call failed
    ├── ContractError                   exit 3   a payload or wire body violates docs/contract.md
    ├── JobRuntimeError                 exit 4   an error in the Job Runtime error shape
    │   ├── ValidationError             400 ValidationException
    │   │   ├── BodyError               400 one field of a request body (``param``)
    │   │   └── ReplayDivergenceError   400 a replayed episode left its recording
    │   ├── QuotaExceededError          402 ServiceQuotaExceededException
    │   ├── AccessDeniedError           403 AccessDeniedException
    │   ├── NotFoundError               404 ResourceNotFoundException
    │   ├── ConflictError               409 ConflictException
    │   ├── ThrottlingError             429 ThrottlingException
    │   └── InternalServiceError        500 InternalServiceError
    ├── PolicyError                     exit 5   the policy endpoint failed or answered garbage
    │   └── ScriptedPolicyError         exit 5   a scripted policy raised or returned garbage
    ├── EnvironmentFailure              exit 6   the user's environment raised (``invoke``)
    │   └── SimulatedUserError          exit 6   a simulated user could not answer
    ├── RewardError                     exit 6   the reward function raised or was not finite
    │   └── JudgeError                  exit 6   an LLM judge failed or answered nonsense
    ├── ReportingError                  exit 7   a rollout was not reported (``invoke``)
    ├── InvokerError                    exit 8   the agent could not be started or reached
    ├── JobFailed                       exit 9   the emulated job failed (service semantics)
    ├── ReplayMismatch                  exit 10  a replay diverged or a reward changed
    ├── DeployError                     exit 11  packaging or deployment refused or failed
    ├── RunInUse                        exit 12  another live driver owns the run directory
    ├── RunStoreError                   exit 14  run dir unwritable or gone, or store damaged
    │   └── DamagedRowError             exit 14  one stored value cannot be decoded
    ├── Aborted                         exit 130 a second signal cut a graceful stop short
    └── WarmStartStopped                exit 130 a stop signal ended ``train``'s warm start

(Exit 13 is ``agent-kit doctor``'s "an error finding": a verdict, not an exception.)

An episode's own failures are data, not exceptions: the agent still reports a floor reward and
names the failure in its answer. ``agent-kit invoke`` (one rollout, the debugging view) turns
them into exit codes after printing the transcript: :class:`ReportingError` when the rollout was
not reported (the agent's CompleteRollout/UpdateReward failed after its retries, or the rollout
ended without a reward), else :class:`EnvironmentFailure` / :class:`RewardError` when the
agent's answer names an ``environment`` / ``reward`` failure. The CLI exits 130 on Ctrl-C;
``run`` and ``train`` turn an :class:`Aborted` into 130 (SIGINT) or 143 (SIGTERM), the first
signal's code. :class:`SimulatedUserError` is also a ``RuntimeError``, as it was before it joined
the tree.

Nothing here imports anything outside the standard library.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import ClassVar, Final

__all__ = [
    "JUDGES_EXTRA",
    "Aborted",
    "AccessDeniedError",
    "AgentKitError",
    "AuxiliaryError",
    "BodyError",
    "ConflictError",
    "ContractError",
    "DamagedRowError",
    "DeployError",
    "EnvironmentFailure",
    "InternalServiceError",
    "InvokerError",
    "JobFailed",
    "JobRuntimeError",
    "JudgeError",
    "NotFoundError",
    "NothingToLearn",
    "PolicyError",
    "QuotaExceededError",
    "ReplayDivergenceError",
    "ReplayMismatch",
    "ReportingError",
    "RewardError",
    "RunInUse",
    "RunStoreError",
    "ScriptedPolicyError",
    "SimulatedUserError",
    "TemplateError",
    "ThrottlingError",
    "UsageError",
    "ValidationError",
    "WarmStartStopped",
    "describe_exception",
    "error_for_type",
    "judges_missing",
]

#: How to install strands-agents-evals, which a Judge and a SimulatedUser need.
JUDGES_EXTRA: Final = "pip install 'agent_kit[judges]'"


def judges_missing(exc: ImportError) -> str:
    """The one line a Judge or a SimulatedUser gives when strands-agents-evals is missing."""
    return f"strands-agents-evals is not installed ({JUDGES_EXTRA}): {exc}"


class AgentKitError(Exception):
    """Base of every deliberate agent_kit error; carries a user-facing message and exit code."""

    exit_code: ClassVar[int] = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(AgentKitError):
    """Bad command-line arguments, configuration or specs (policy/invoker strings)."""

    exit_code = 2


class TemplateError(UsageError):
    """Template variables failed validation, or the target directory exists."""


class NothingToLearn(UsageError):
    """The preflight's probe groups all scored alike: training would have no gradient."""


class AuxiliaryError(AgentKitError):
    """No auxiliary model is configured, or an auxiliary call could not be made."""

    exit_code = 2


class ContractError(AgentKitError):
    """A payload or wire body does not follow docs/contract.md (maps to HTTP 400 at the agent)."""

    exit_code = 3


class JobRuntimeError(AgentKitError):
    """An error in the Job Runtime wire shape: HTTP status + ``x-amzn-ErrorType`` + Message."""

    exit_code = 4
    status: ClassVar[int] = 500
    error_type: ClassVar[str] = "InternalServiceError"

    def to_body(self) -> dict[str, str]:
        """The JSON body the service sends for this error."""
        return {"Message": self.message}


class ValidationError(JobRuntimeError):
    """400 ValidationException: the request is malformed or names an unknown job."""

    status = 400
    error_type = "ValidationException"


class BodyError(ValidationError):
    """A 400 ValidationException about one field of a request body (``param``, OpenAI style)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class ReplayDivergenceError(ValidationError):
    """Raised by the replay backend to stop an episode that diverged (served as a 400)."""


class QuotaExceededError(JobRuntimeError):
    """402 ServiceQuotaExceededException."""

    status = 402
    error_type = "ServiceQuotaExceededException"


class AccessDeniedError(JobRuntimeError):
    """403 AccessDeniedException: missing/garbled credentials or another account's job."""

    status = 403
    error_type = "AccessDeniedException"


class NotFoundError(JobRuntimeError):
    """404 ResourceNotFoundException: unknown trajectory (or route)."""

    status = 404
    error_type = "ResourceNotFoundException"


class ConflictError(JobRuntimeError):
    """409 ConflictException: the trajectory is not in a valid status for the call."""

    status = 409
    error_type = "ConflictException"


class ThrottlingError(JobRuntimeError):
    """429 ThrottlingException."""

    status = 429
    error_type = "ThrottlingException"


class InternalServiceError(JobRuntimeError):
    """500 InternalServiceError."""

    status = 500
    error_type = "InternalServiceError"


_BY_TYPE: dict[str, type[JobRuntimeError]] = {
    cls.error_type: cls
    for cls in (
        ValidationError,
        QuotaExceededError,
        AccessDeniedError,
        NotFoundError,
        ConflictError,
        ThrottlingError,
        InternalServiceError,
    )
}


def error_for_type(error_type: str, message: str) -> JobRuntimeError:
    """Build the JobRuntimeError subclass named by a wire ``x-amzn-ErrorType`` value."""
    name = error_type.split(":", 1)[0].strip()
    return _BY_TYPE.get(name, InternalServiceError)(message)


class PolicyError(AgentKitError):
    """The policy endpoint failed (5xx, timeout, transport) or answered something unusable."""

    exit_code = 5


class ScriptedPolicyError(PolicyError):
    """A scripted policy raised, or returned something that is not a reply."""


class EnvironmentFailure(AgentKitError):
    """The user's environment raised during reset or a tool call (the rollout's answer says so)."""

    exit_code = 6


class SimulatedUserError(EnvironmentFailure, RuntimeError):
    """The simulated user could not answer (its model failed or gave no message); still a
    ``RuntimeError``, as it was before it joined the tree."""


class RewardError(AgentKitError):
    """The reward function raised or produced a non-finite value."""

    exit_code = 6


class JudgeError(RewardError):
    """An LLM judge of the reward failed (its model call, its structured answer) or answered
    nonsense (a score outside 0..1): the rollout ends on the floor with reason ``judge: …``."""


class ReportingError(AgentKitError):
    """A rollout was not reported: CompleteRollout or UpdateReward failed after bounded retries,
    or the agent answered without the rollout getting its reward."""

    exit_code = 7


class InvokerError(AgentKitError):
    """The agent could not be started, reached or invoked."""

    exit_code = 8


class JobFailed(AgentKitError):
    """The emulated job failed with one of the service's job-killing reasons."""

    exit_code = 9


class ReplayMismatch(AgentKitError):
    """A replay diverged from its recording, or a reward changed."""

    exit_code = 10


class DeployError(AgentKitError):
    """Packaging, deployment or job submission was refused or failed."""

    exit_code = 11


class RunInUse(AgentKitError):
    """Another live ``agent-kit run``/``--resume`` holds the run directory's lock."""

    exit_code = 12


class RunStoreError(AgentKitError):
    """The run directory cannot be written, or it vanished (was deleted or replaced) mid-run, or
    its store file is empty, damaged or unreadable.

    What the store had recorded stays; a deleted directory's store is gone with it. A damaged
    store is refused before anything is written into it.
    """

    exit_code = 14


class DamagedRowError(RunStoreError, ValueError):
    """A stored value that cannot be decoded: not JSON, or JSON of the wrong shape (still a
    ``ValueError`` for callers that catch one).

    Its message names the table, the column and the row (``turns.request of trajectory t1,
    turn 3 is not valid JSON (…)``); :class:`~agent_kit.store.RunStore` turns it into a
    :class:`RunStoreError` naming the file."""


class Aborted(AgentKitError):
    """A second signal cut the graceful stop short; ``signum`` is the first one received.

    ``agent-kit run``/``train`` exit with that signal's code (130 for SIGINT, 143 for SIGTERM)."""

    exit_code = 130

    def __init__(self, signum: signal.Signals) -> None:
        super().__init__(f"aborted by a second signal after {signum.name}")
        self.signum = signum


class WarmStartStopped(AgentKitError):
    """A stop signal ended ``agent-kit train``'s warm start before its last step; no adapter was
    saved. ``signum`` is the signal, where the caller knows it (``train`` exits 130 for SIGINT,
    143 for SIGTERM); ``run_dir`` the run directory, kept for ``train --resume``."""

    exit_code = 130
    signum: signal.Signals | None = None
    run_dir: Path | None = None


def describe_exception(exc: BaseException, *, limit: int | None = None) -> str:
    """A one-line reason: the message of the innermost agent_kit error in ``exc``'s chain (an
    error wrapped by Strands' EventLoopException is unwrapped), else ``Type: text`` of ``exc``
    itself, cut to ``limit`` characters when given."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, AgentKitError):
            return current.message
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    text = f"{type(exc).__name__}: {str(exc) or repr(exc)}"
    return text if limit is None else text[:limit]
