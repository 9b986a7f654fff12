"""``agent-kit doctor``: catch a broken reward or policy endpoint before the job pays for it.

- :func:`~agent_kit.doctor.reward.audit_reward` reads a recorded run (optionally re-scoring it
  with the entrypoint's reward) and returns :class:`~agent_kit.doctor.findings.Finding` s:
  declared reward orderings, zero-variance groups, hacking signals, the cost projection.
- :func:`~agent_kit.doctor.endpoint.probe_endpoint` probes an OpenAI-compatible server the way
  MTRL's policy is called and returns one :class:`~agent_kit.doctor.probing.Probe` per
  check.

The declaration API for orderings is plain data in the entrypoint module (so a deployed agent
imports nothing of this package): see :mod:`agent_kit.doctor.invariants`. docs/doctor.md is the
user's guide.
"""

from __future__ import annotations

from agent_kit.doctor.endpoint import EndpointReport, probe_endpoint
from agent_kit.doctor.findings import EXIT_FINDINGS, Finding, Severity
from agent_kit.doctor.invariants import EpisodeView, Ordering, check_orderings, load_orderings
from agent_kit.doctor.probing import Probe
from agent_kit.doctor.reward import RewardAudit, audit_reward

__all__ = [
    "EXIT_FINDINGS",
    "EndpointReport",
    "EpisodeView",
    "Finding",
    "Ordering",
    "Probe",
    "RewardAudit",
    "Severity",
    "audit_reward",
    "check_orderings",
    "load_orderings",
    "probe_endpoint",
]
