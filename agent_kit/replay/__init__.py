"""Record and replay (tooling half): re-run recorded episodes and report the first divergence.

``cassette`` reads and writes recordings (run stores and cassette files), ``recording`` is the
in-memory :class:`Recording` and the run-store reader, ``policy`` is the ``replay:`` policy
backend that answers from a recording, ``engine`` replays runs through the emulator,
``inprocess`` replays them in-process, ``verdicts`` renders the outcome, ``helpers`` are the
regression-test helpers re-exported by :mod:`agent_kit.testing`.

This face exports the Python API (``from agent_kit.replay import replay_run, ReplayReport``);
the names load on first use, so importing the package loads none of the emulator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_kit import lazy_face

if TYPE_CHECKING:
    from agent_kit.replay.cassette import load_recording, read_cassette, write_cassette
    from agent_kit.replay.divergence import Divergence, Normalization
    from agent_kit.replay.engine import replay_run
    from agent_kit.replay.inprocess import replay_in_process
    from agent_kit.replay.policy import ReplayBackend
    from agent_kit.replay.recording import Recording
    from agent_kit.replay.verdicts import EpisodeReport, ReplayReport

#: Public name → the module that defines it.
_HOMES = {
    "Divergence": "divergence",
    "EpisodeReport": "verdicts",
    "Normalization": "divergence",
    "Recording": "recording",
    "ReplayBackend": "policy",
    "ReplayReport": "verdicts",
    "load_recording": "cassette",
    "read_cassette": "cassette",
    "replay_in_process": "inprocess",
    "replay_run": "engine",
    "write_cassette": "cassette",
}

__all__ = [
    "Divergence",
    "EpisodeReport",
    "Normalization",
    "Recording",
    "ReplayBackend",
    "ReplayReport",
    "load_recording",
    "read_cassette",
    "replay_in_process",
    "replay_run",
    "write_cassette",
]


__getattr__ = lazy_face(__name__, _HOMES)
