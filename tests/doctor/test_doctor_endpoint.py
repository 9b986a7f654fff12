"""``agent-kit doctor endpoint``: probes against the emulator and against a planted fake server.

The fake is a stdlib ``ThreadingHTTPServer`` on 127.0.0.1 speaking just enough of the OpenAI
chat-completions API; each defect flag plants one fault a real server has (tool calls written as
text, no usage chunk in streams, ``reasoning_effort`` rejected, ``max_tokens`` ignored, 5xx under
load). No mocks: every probe is a real HTTP request over loopback.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent_kit.cli import main
from agent_kit.doctor.endpoint import probe_endpoint
from agent_kit.doctor.findings import EXIT_FINDINGS
from agent_kit.testing import run_emulator

pytestmark = pytest.mark.e2e

SIGV4 = (
    "AWS4-HMAC-SHA256 Credential=AKIDTEST/20261202/us-west-2/sagemaker/aws4_request, "
    "SignedHeaders=host;x-amz-date, Signature=abc"
)


@dataclass
class Defects:
    """Which faults the fake server plants."""

    text_tool_calls: bool = False
    no_usage_chunk: bool = False
    reject_reasoning: bool = False
    ignore_max_tokens: bool = False
    fail_every: int = 0
    seen: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _completion(body: dict[str, Any], defects: Defects) -> dict[str, Any]:
    tools = body.get("tools") or []
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if tools:
        calls = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": t["function"]["name"], "arguments": '{"city": "Paris"}'},
            }
            for i, t in enumerate(tools)
        ]
        if defects.text_tool_calls:
            message["content"] = (
                "<tool_call>"
                + json.dumps({"name": calls[0]["function"]["name"], "arguments": {"city": "Paris"}})
                + "</tool_call>"
            )
        else:
            message["tool_calls"] = calls
        finish, completion = "tool_calls", 12
    else:
        words = ["blue"] + ["and so on"] * 40
        cap = body.get("max_tokens")
        completion = len(words)
        if isinstance(cap, int) and not defects.ignore_max_tokens:
            completion = min(cap, completion)
        message["content"] = " ".join(words[:completion])
        finish = "length" if completion < len(words) else "stop"
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": body.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": 20,
            "completion_tokens": completion,
            "total_tokens": 20 + completion,
        },
    }


def _handler(defects: Defects) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            del format, args  # quiet

        def _json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                self._json(200, {"data": [{"id": "fake-model", "max_model_len": 4096}]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            with defects.lock:
                defects.seen.append(body)
                count = len(defects.seen)
            if defects.fail_every and count % defects.fail_every == 0:
                self._json(503, {"error": {"message": "overloaded"}})
                return
            if defects.reject_reasoning and "reasoning_effort" in body:
                self._json(
                    400,
                    {"error": {"message": "Unrecognized request argument: reasoning_effort"}},
                )
                return
            completion = _completion(body, defects)
            if not body.get("stream"):
                self._json(200, completion)
                return
            message = completion["choices"][0]["message"]
            chunks = [
                {
                    "choices": [
                        {"index": 0, "delta": {"role": "assistant", "content": message["content"]}}
                    ]
                },
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            ]
            wants_usage = (body.get("stream_options") or {}).get("include_usage")
            if wants_usage and not defects.no_usage_chunk:
                chunks.append({"choices": [], "usage": completion["usage"]})
            data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            raw = data.encode()
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


@pytest.fixture
def fake_server() -> Iterator[tuple[str, Defects]]:
    """A fake OpenAI-compatible server on loopback; tests set its ``Defects`` before probing."""
    defects = Defects()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(defects))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", defects
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_healthy_fake_server_passes_every_probe(fake_server: tuple[str, Defects]) -> None:
    """A server without defects passes all checks, and the probes sent what MTRL sends."""
    url, defects = fake_server
    report = probe_endpoint(url, burst=4)
    assert report.ok
    assert {p.name: p.status for p in report.probes} == dict.fromkeys(
        [
            "models",
            "tool_calls",
            "parallel_calls",
            "stream_usage",
            "reasoning",
            "max_tokens",
            "temperature",
            "latency",
        ],
        "pass",
    )
    assert report.model == "fake-model"
    assert report.probe("models").evidence["context_length"] == 4096
    assert any(b.get("stream_options") == {"include_usage": True} for b in defects.seen)
    assert any(b.get("reasoning_effort") == "low" for b in defects.seen)
    assert all(b["model"] == "fake-model" for b in defects.seen)


@pytest.mark.parametrize(
    ("defect", "probe", "evidence_key", "evidence_value", "detail"),
    [
        ("text_tool_calls", "tool_calls", "tool_calls", None, "came back as text"),
        ("no_usage_chunk", "stream_usage", "usage", None, "no usage chunk"),
        ("reject_reasoning", "reasoning", "status", 400, "reasoning_effort rejected"),
        ("ignore_max_tokens", "max_tokens", "completion_tokens", 41, "ignored"),
    ],
)
def test_each_planted_defect_is_a_failed_probe_with_evidence(
    fake_server: tuple[str, Defects],
    defect: str,
    probe: str,
    evidence_key: str,
    evidence_value: Any,
    detail: str,
) -> None:
    """Each planted fault fails exactly its probe, with the figure that shows it."""
    url, defects = fake_server
    setattr(defects, defect, True)
    report = probe_endpoint(url, burst=2)
    found = report.probe(probe)
    assert found.status == "fail", found
    assert detail in found.detail
    assert found.evidence[evidence_key] == evidence_value
    assert found.hint
    others = [p for p in report.probes if p.name != probe and p.status == "fail"]
    assert others == []
    assert not report.ok


def test_text_tool_call_evidence_quotes_the_content(fake_server: tuple[str, Defects]) -> None:
    """The tool-call failure shows the text the server put in content."""
    url, defects = fake_server
    defects.text_tool_calls = True
    found = probe_endpoint(url, burst=1).probe("tool_calls")
    assert "<tool_call>" in found.evidence["content"]
    assert "get_weather" in found.detail


def test_server_errors_under_the_burst_fail_latency(fake_server: tuple[str, Defects]) -> None:
    """5xx answers in the concurrent burst fail the latency probe and are counted."""
    url, defects = fake_server
    report = probe_endpoint(url, burst=8)
    assert report.probe("latency").status == "pass"
    defects.seen.clear()
    defects.fail_every = 3
    latency = probe_endpoint(url, burst=8).probe("latency")
    assert latency.status == "fail"
    assert latency.evidence["statuses"].get("503", 0) >= 1


def test_emulator_endpoint_has_no_failed_probe() -> None:
    """The emulator's own /v1/chat/completions (random policy) passes every must-have check."""
    with run_emulator("random") as emu:
        tid = emu.emulator.open_trajectory(emu.job_arn, '{"prompt": "p"}').id
        headers = {
            "authorization": SIGV4,
            "x-amzn-sagemaker-job-arn": emu.job_arn,
            "x-amzn-sagemaker-trajectory-id": tid,
        }
        report = probe_endpoint(emu.url, headers=headers, burst=4)
    statuses = {p.name: p.status for p in report.probes}
    assert report.ok, statuses
    for name in ("tool_calls", "stream_usage", "reasoning", "max_tokens", "temperature"):
        assert statuses[name] == "pass", report.probe(name)
    assert report.probe("stream_usage").evidence["usage"]["completion_tokens"] > 0


def test_cli_exit_codes_and_json(
    fake_server: tuple[str, Defects], capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI prints JSON, exits 0 on a healthy server and 13 when a probe fails."""
    url, defects = fake_server
    assert main(["doctor", "endpoint", url, "--json", "--burst", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True
    assert data["schema"] == "agent_kit.doctor.endpoint/1"
    defects.no_usage_chunk = True
    assert main(["doctor", "endpoint", url, "--burst", "2"]) == EXIT_FINDINGS
    out = capsys.readouterr().out
    assert "stream_usage" in out
    assert "fail" in out


def test_cli_rejects_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    """A URL without a scheme or a malformed header is a one-line usage error (exit 2)."""
    assert main(["doctor", "endpoint", "localhost:8000"]) == 2
    assert "error: endpoint URL must start with http://" in capsys.readouterr().err
    assert main(["doctor", "endpoint", "http://127.0.0.1:9", "-H", "novalue"]) == 2
    assert "--header must be NAME=VALUE" in capsys.readouterr().err
