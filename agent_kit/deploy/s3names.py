"""S3 bucket names and ``s3://`` URIs, checked with a message that says what is wrong.

The rules are S3's general-purpose bucket naming rules: 3–63 characters; lowercase letters,
digits, dots and hyphens only; a letter or digit first and last; no two adjacent dots; not
formatted as an IP address; none of the reserved prefixes (``xn--``, ``sthree-``, ``amzn-s3-demo-``)
or suffixes (``-s3alias``, ``--ol-s3``, ``.mrap``, ``--x-s3``, ``--table-s3``).
"""

from __future__ import annotations

import re
from typing import Final

from agent_kit.errors import UsageError

__all__ = ["bucket_name_problem", "check_bucket_name", "check_s3_uri", "s3_uri_problem"]

_ALLOWED: Final = re.compile(r"^[a-z0-9.\-]+$")
_IP_ADDRESS: Final = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
_RESERVED_PREFIXES: Final = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES: Final = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def bucket_name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as an S3 bucket name, or None when it is valid."""
    if not 3 <= len(name) <= 63:
        return f"a bucket name has 3 to 63 characters ({len(name)} given)"
    if not _ALLOWED.match(name):
        bad = sorted({c for c in name if not re.match(r"[a-z0-9.\-]", c)})
        return (
            f"a bucket name has only lowercase letters, digits, '.' and '-' (not {''.join(bad)!r})"
        )
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "a bucket name begins and ends with a letter or a digit"
    if ".." in name:
        return "a bucket name has no two adjacent dots"
    if _IP_ADDRESS.match(name):
        return "a bucket name is not formatted as an IP address"
    for prefix in _RESERVED_PREFIXES:
        if name.startswith(prefix):
            return f"bucket names starting with {prefix!r} are reserved"
    for suffix in _RESERVED_SUFFIXES:
        if name.endswith(suffix):
            return f"bucket names ending with {suffix!r} are reserved"
    return None


def s3_uri_problem(uri: str) -> str | None:
    """What is wrong with ``uri`` as an ``s3://BUCKET[/KEY]`` URI, or None when it is valid."""
    if not uri.startswith("s3://"):
        return "an S3 URI starts with s3:// (s3://BUCKET/PREFIX)"
    bucket = uri[len("s3://") :].split("/", 1)[0]
    if not bucket:
        return "the URI names no bucket (s3://BUCKET/PREFIX)"
    problem = bucket_name_problem(bucket)
    return f"bucket {bucket!r}: {problem}" if problem else None


def check_s3_uri(label: str, uri: str) -> None:
    """Raise :class:`UsageError` naming the flag when ``uri`` is not a valid S3 URI."""
    problem = s3_uri_problem(uri)
    if problem:
        raise UsageError(f"{label} {uri!r}: {problem}")


def check_bucket_name(label: str, name: str) -> None:
    """Raise :class:`UsageError` naming the flag when ``name`` is not a valid bucket name."""
    if name.startswith("s3://"):
        raise UsageError(f"{label} takes a bucket name, not a URI: {name[len('s3://') :]!r}")
    problem = bucket_name_problem(name)
    if problem:
        raise UsageError(f"{label} {name!r}: {problem}")
