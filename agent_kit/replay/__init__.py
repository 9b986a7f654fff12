"""Record and replay (tooling half): re-run recorded episodes and report the first divergence.

``cassette`` reads and writes recordings (run stores and cassette files), ``policy`` is the
``replay:`` policy backend that answers from a recording, ``engine`` replays runs (through the
emulator or in-process), ``verdicts`` renders the outcome, ``helpers`` are the regression-test
helpers re-exported by :mod:`agent_kit.testing`.
"""
