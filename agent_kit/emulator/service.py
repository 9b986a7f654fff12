"""The emulated service's state: its settings, its jobs and its trajectories outside a turn.

:class:`ServiceState` is the base of :class:`~agent_kit.emulator.core.Emulator`: the settings
(account, region, limits, seed, chaos), the run store and the in-memory
:class:`~agent_kit.emulator.trajectory_table.TrajectoryTable` with its one lock, and the rules
that need nothing of a turn or a report — which jobs exist and who may act on them, opening a
trajectory, reading and waiting for its state, expiring it. The turn path
(:mod:`agent_kit.emulator.turns`) and CompleteRollout/UpdateReward
(:mod:`agent_kit.emulator.core`) build on it.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Collection, Mapping
from typing import Any, Final, Protocol

from agent_kit.contract import JOB_ARN_PATTERN, InferenceParams, RolloutPayload, TrajectoryState
from agent_kit.emulator.chaos import Chaos
from agent_kit.emulator.schemas import PolicyRequest
from agent_kit.emulator.trajectory_table import CachedTrajectory, TrajectoryTable
from agent_kit.errors import AccessDeniedError, NotFoundError, UsageError, ValidationError
from agent_kit.store import JobRow, RunStore, TrajectoryRow

__all__ = ["DEFAULT_ACCOUNT", "PolicyBackendLike", "ServiceState"]

DEFAULT_ACCOUNT: Final = "123456789012"


class PolicyBackendLike(Protocol):
    """What the emulator needs of a policy backend (``agent_kit.emulator.policies``)."""

    name: str

    async def complete(self, request: PolicyRequest) -> Any:
        """Answer one turn with a PolicyResult (``response``, ``usage``, ``chunks``)."""
        ...

    async def aclose(self) -> None:
        """Release connections or processes."""
        ...


class ServiceState:
    """The service's settings, jobs and trajectories; thread-safe (one lock serialises every
    state change, :meth:`wait_state` may be awaited from any event loop).

    ``policy`` is any object with ``name``, ``async complete(request)`` and ``async aclose()``;
    its ``seed`` attribute (if any) seeds the per-turn RNG unless ``seed`` is given.
    ``lenient`` creates an unknown trajectory of a known job on its first turn.
    """

    def __init__(
        self,
        store: RunStore,
        policy: PolicyBackendLike,
        *,
        account_id: str = DEFAULT_ACCOUNT,
        region: str = "us-west-2",
        max_body_bytes: int = 4 << 20,
        max_turns_per_trajectory: int = 256,
        lenient: bool = False,
        seed: int | None = None,
        chaos: Chaos | None = None,
        aux_policy: PolicyBackendLike | None = None,
        max_aux_calls_per_trajectory: int = 256,
    ) -> None:
        if not (len(account_id) == 12 and account_id.isdigit()):
            raise UsageError(f"account id must be 12 digits, got {account_id!r}")
        if min(max_body_bytes, max_turns_per_trajectory, max_aux_calls_per_trajectory) <= 0:
            raise UsageError(
                "max_body_bytes, max_turns_per_trajectory and max_aux_calls_per_trajectory "
                "must be positive"
            )
        self.store = store
        self.policy = policy
        self.account_id = account_id
        self.region = region
        self.max_body_bytes = max_body_bytes
        self.max_turns_per_trajectory = max_turns_per_trajectory
        self.lenient = lenient
        self.seed = int(seed if seed is not None else getattr(policy, "seed", 0) or 0)
        self.default_job_arn: str | None = None
        #: Fault injection (``--chaos``); None answers every call as the contract says.
        self.chaos = chaos
        #: The auxiliary model (``--aux-policy``) that answers judge and simulated-user calls
        #: on ``/aux/v1/chat/completions`` (:mod:`agent_kit.emulator.aux_route`); None: refused.
        self.aux_policy = aux_policy
        #: Auxiliary calls one trajectory may make (the next is refused with a 400).
        self.max_aux_calls_per_trajectory = max_aux_calls_per_trajectory
        self._policy_calls: dict[str, int] = {}
        #: The connection of each trajectory's last policy call (bounded, oldest dropped).
        self._last_peer: OrderedDict[str, str] = OrderedDict()
        self._report_calls: dict[str, int] = {}
        self._jobs: set[str] = set()
        self._table = TrajectoryTable(store)
        #: One lock serialises every state change (the table's, re-entrant).
        self._lock = self._table.lock

    @property
    def table(self) -> TrajectoryTable:
        """The live trajectories (the service's working state) and their one lock: what a
        route beside the service (:mod:`~agent_kit.emulator.aux_route`) reads, and counts
        under that lock; state changes stay this class's."""
        return self._table

    # -- jobs --------------------------------------------------------------------------------

    def job_arn_for(self, name: str, category: str = "AgentRFT") -> str:
        """The ARN this emulator gives a job name."""
        return f"arn:aws:sagemaker:{self.region}:{self.account_id}:job/{category}/{name}"

    def create_job(
        self, name: str, config: dict[str, Any] | None = None, *, arn: str | None = None
    ) -> JobRow:
        """Create (or return) a job; the first job becomes :attr:`default_job_arn`.

        ``arn`` overrides the generated ARN; it must match the contract pattern and this
        emulator's account.
        """
        arn = arn or self.job_arn_for(name)
        match = JOB_ARN_PATTERN.match(arn)
        if not match:
            raise UsageError(f"not a SageMaker job ARN: {arn!r}")
        if match["account"] != self.account_id:
            raise UsageError(f"job ARN {arn} is not in account {self.account_id}")
        job = self.store.create_job(arn, name, config or {})
        with self._lock:
            self._jobs.add(arn)
            if self.default_job_arn is None:
                self.default_job_arn = arn
        return job

    def check_job(self, job_arn: str | None) -> str:
        """Validate a job ARN from the wire: 400 invalid/unknown, 403 another account's job."""
        if not job_arn:
            raise ValidationError("JobArn is required (header X-Amzn-SageMaker-Job-Arn or body)")
        if job_arn in self._jobs:
            return job_arn
        match = JOB_ARN_PATTERN.match(job_arn)
        if not match:
            raise ValidationError(f"Invalid JobArn: {job_arn[:300]!r}")
        if match["account"] != self.account_id:
            raise AccessDeniedError(f"Not authorized to access job {job_arn}")
        if self.store.get_job(job_arn) is None:
            raise ValidationError(f"Could not find job {job_arn}")
        with self._lock:
            self._jobs.add(job_arn)
        return job_arn

    # -- trajectories ------------------------------------------------------------------------

    def open_trajectory(
        self,
        job_arn: str,
        prompt: str,
        *,
        step: int = 0,
        prompt_index: int = 0,
        sample_index: int = 0,
        attempt: int = 0,
        retry_of: str | None = None,
        replay_of: str | None = None,
        trajectory_id: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> TrajectoryRow:
        """Create an OPEN trajectory in a known job (UsageError if the job or id is bad)."""
        if job_arn not in self._jobs and self.store.get_job(job_arn) is None:
            raise UsageError(f"unknown job {job_arn}")
        tid = trajectory_id or f"traj-{uuid.uuid4().hex}"
        if not 1 <= len(tid) <= 256:
            raise UsageError("trajectory id must be 1..256 characters")
        row = self.store.create_trajectory(
            TrajectoryRow(
                id=tid,
                job_arn=job_arn,
                state=TrajectoryState.OPEN.value,
                prompt=prompt,
                payload=payload,
                step=step,
                prompt_index=prompt_index,
                sample_index=sample_index,
                attempt=attempt,
                retry_of=retry_of,
                replay_of=replay_of,
            )
        )
        with self._lock:
            self._jobs.add(job_arn)
        self._table.add(row)
        return row

    def rollout_payload(
        self,
        trajectory: TrajectoryRow,
        endpoint: str,
        inference_params: InferenceParams | Mapping[str, Any] | None = None,
        api_key: str | None = None,
    ) -> dict[str, Any]:
        """The payload the service would send the agent for this trajectory (docs/contract.md
        §2, built by :meth:`RolloutPayload.for_rollout`); with ``api_key`` (a rollout token of
        this trajectory) also ``metadata.apiKey``."""
        return RolloutPayload.for_rollout(
            trajectory.prompt,
            job_arn=trajectory.job_arn,
            trajectory_id=trajectory.id,
            endpoint=endpoint,
            region=self.region,
            inference_params=inference_params,
            api_key=api_key,
        ).wire()

    def _lookup(self, job_arn: str, trajectory_id: str | None) -> CachedTrajectory:
        if not trajectory_id or len(trajectory_id) > 256:
            raise ValidationError("TrajectoryId must be 1..256 characters")
        traj = self._table.get(trajectory_id)
        if traj is None or traj.job_arn != job_arn:
            raise NotFoundError(f"Trajectory {trajectory_id} not found in job {job_arn}")
        return traj

    def state(self, trajectory_id: str) -> TrajectoryState | None:
        """The current state of a trajectory, or None if unknown."""
        traj = self._table.get(trajectory_id)
        return None if traj is None else traj.state

    def turn_count(self, trajectory_id: str) -> int:
        """How many turns the trajectory has recorded (0 if unknown)."""
        traj = self._table.get(trajectory_id)
        return 0 if traj is None else traj.turns

    def limit_reached(self, trajectory_id: str) -> str | None:
        """The deterministic limit the trajectory ran into (its turn cap), or None."""
        traj = self._table.get(trajectory_id)
        return None if traj is None else traj.limit

    async def wait_state(
        self, trajectory_id: str, states: Collection[TrajectoryState], timeout: float
    ) -> TrajectoryState:
        """Wait until the trajectory is in one of ``states``; return its state (current on timeout).

        Raises UsageError for an unknown trajectory. Any thread, any event loop.
        """
        return await self._table.wait_state(trajectory_id, states, timeout)

    def expire(self, trajectory_id: str, reason: str) -> TrajectoryState:
        """OPEN/READY → TIMED_OUT (the driver's rollout_timeout); return the resulting state."""
        with self._lock:
            traj = self._table.get(trajectory_id)
            if traj is None:
                raise UsageError(f"unknown trajectory {trajectory_id}")
            was_open = traj.state is TrajectoryState.OPEN
            if not traj.state.is_finished:
                self._table.transition(trajectory_id, traj, TrajectoryState.TIMED_OUT, reason)
            state = traj.state
        if was_open:
            self.rollout_ended(trajectory_id)
        return state

    def rollout_ended(self, trajectory_id: str) -> None:
        """A trajectory left OPEN (no more policy calls): the policy's optional
        ``end_trajectory(trajectory_id)`` hook lets it drop what it kept for the rollout (the
        ``hf`` policy's key/value cache, a turn still queued). Non-blocking; never raises."""
        hook = getattr(self.policy, "end_trajectory", None)
        if hook is None:
            return
        try:
            hook(trajectory_id)
        except Exception:  # noqa: BLE001 - a policy's bookkeeping never fails a report
            return

    async def aclose(self) -> None:
        """Close the policy backend (the store is the caller's to close)."""
        await self.policy.aclose()
