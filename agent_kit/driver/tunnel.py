"""Advertising the local emulator at a tunnel's public URL (``agent-kit run --advertise-url``).

A deployed runtime cannot reach the emulator's loopback URL, so the user puts a tunnel
(``ssh -R``, ``cloudflared``, ngrok, SSM port forwarding) in front of it. The emulator cannot
verify the deployed agent's credentials (signed with the agent's own IAM role), so the tunnel is
guarded by a capability URL instead: a random path token per run, the Job Runtime routes served
only under ``/<token>/…`` (:func:`~agent_kit.emulator.server.create_app`'s ``path_prefix``), and
every payload's ``metadata.endpoint`` = ``<advertised URL>/<token>``.

The token is never displayed: the job config records the advertised URL without it, and
:func:`redact` hides it in text meant for people. The store's payloads keep it (the audit
record of what the agent was sent; the token is worthless once the run's emulator stops).
"""

from __future__ import annotations

import secrets
from typing import Final
from urllib.parse import urlsplit

from agent_kit.errors import UsageError

__all__ = [
    "LOOPBACK_HOSTS",
    "REDACTED",
    "advertised_endpoint",
    "new_route_token",
    "redact",
    "validate_advertise_url",
]

#: Hosts for which a plain ``http://`` advertise URL is accepted (local tunnels, tests).
LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})
#: What stands for the route token in displayed text.
REDACTED: Final = "<token>"


def validate_advertise_url(url: str) -> str:
    """``url`` without trailing slashes; UsageError unless it is an http(s) URL with a host.

    ``https`` is required unless the host is loopback; a query or fragment is refused (the
    agent appends paths to the URL).
    """
    text = url.strip()
    try:
        parts = urlsplit(text)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise UsageError(f"--advertise-url {url!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise UsageError(f"--advertise-url {url!r} must be an http(s) URL")
    if not host:
        raise UsageError(f"--advertise-url {url!r} has no host")
    if parts.scheme != "https" and host not in LOOPBACK_HOSTS:
        raise UsageError(
            f"--advertise-url {url!r} must use https (plain http only for a loopback host): "
            "the URL carries the run's access token"
        )
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise UsageError(f"--advertise-url {url!r} must not have a query or fragment")
    return text.rstrip("/")


def new_route_token() -> str:
    """A fresh random path token (URL-safe, 192 bits)."""
    return secrets.token_urlsafe(24)


def advertised_endpoint(url: str, token: str) -> str:
    """``metadata.endpoint`` for an advertised ``url``: ``url`` + ``/`` + ``token``."""
    return url.rstrip("/") + "/" + token


def redact(text: str, token: str | None) -> str:
    """``text`` with every occurrence of ``token`` replaced by :data:`REDACTED`."""
    return text.replace(token, REDACTED) if token else text
