"""Test doubles that speak real HTTP on loopback (see :mod:`fakes.job_runtime`)."""
