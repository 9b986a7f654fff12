"""What the AWS-facing commands (``package``, ``deploy``, ``job``) share: the region a command
talks to, how ``--plan`` and ``--json`` print requests and answers, and their two consoles.

Every command that talks to AWS accepts ``--plan``: it prints each request it would send (as
JSON) and sends nothing. AWS endpoints follow the usual boto3 configuration, including
``AWS_ENDPOINT_URL_<SERVICE>`` overrides.
"""

from __future__ import annotations

import json
import os
from typing import Any

from rich.console import Console

from agent_kit.deploy.agentcore import Call
from agent_kit.errors import UsageError

__all__ = ["ERR", "OUT", "aws_region", "print_calls", "print_json"]

#: Where the AWS-facing commands print their results, and their progress and warnings.
OUT = Console(highlight=False, soft_wrap=True)
ERR = Console(stderr=True, highlight=False, soft_wrap=True)


def aws_region(region: str | None) -> str:
    """``--region``, else the configured AWS region; UsageError when there is none."""
    found = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not found:
        try:
            import boto3

            found = boto3.session.Session().region_name
        except Exception:  # noqa: BLE001 - any failure means "no configured region"
            found = None
    if not found:
        raise UsageError("no AWS region: pass --region or set AWS_REGION")
    return found


def print_json(data: Any) -> None:
    """``data`` as highlighted JSON on stdout."""
    OUT.print_json(json.dumps(data, default=str))


def print_calls(calls: list[Call]) -> None:
    """The requests ``--plan`` would send, one numbered JSON block each; nothing is sent."""
    OUT.print(f"plan: {len(calls)} request(s); nothing is sent")
    for i, call in enumerate(calls, 1):
        note = f"  # {call.note}" if call.note else ""
        OUT.print(f"[bold]{i}. {call.service} {call.operation}[/]{note}")
        print_json(call.to_dict()["params"])
