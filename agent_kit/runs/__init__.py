"""A local run, whole: the emulator's job driver plus the outputs a user reads afterwards.

:func:`agent_kit.runs.local.run_local` is what ``agent-kit run`` and the record helpers call:
the driver (:mod:`agent_kit.emulator.driver`) plays the job and returns its result; this layer
adds ``summary.json`` and ``report.html`` (:mod:`agent_kit.reporting`), so neither of those
two halves imports the other.
"""
