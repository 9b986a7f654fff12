"""Send the rollout span trees to an OTLP/HTTP collector (Phoenix, Langfuse, Datadog, Jaeger …).

:func:`send_otlp` replays every :class:`~agent_kit.export.spans.RolloutTrace` through a private
OpenTelemetry SDK ``TracerProvider`` (never the global one, so MLflow's own tracing and an
application's are untouched) with the ``opentelemetry-exporter-otlp-proto-http`` exporter: same
span names, attributes and store timestamps as the MLflow traces, the rollout span the root of
its own trace, failed rollouts with status ERROR. The resource says ``service.name =
agent-kit`` and carries the job ARN. Both packages come with the ``mlflow`` extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from agent_kit.errors import UsageError
from agent_kit.export.spans import RolloutTrace, SpanData

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["OTLP_TIMEOUT_S", "send_otlp"]

#: Seconds the exporter waits for the collector per request.
OTLP_TIMEOUT_S: Final = 10.0


def _emit(tracer: Tracer, span: SpanData, parent: object | None) -> None:
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    context = trace.set_span_in_context(parent) if parent is not None else None  # type: ignore[arg-type]
    otel = tracer.start_span(
        span.name,
        context=context,
        kind=trace.SpanKind.INTERNAL,
        attributes=dict(span.attributes),
        start_time=span.start_ns,
    )
    if span.error is not None:
        otel.set_status(Status(StatusCode.ERROR, span.error))
    for child in span.children:
        _emit(tracer, child, otel)
    otel.end(end_time=span.end_ns)


def send_otlp(traces: Sequence[RolloutTrace], endpoint: str, *, job_arn: str) -> int:
    """Export ``traces`` to the OTLP/HTTP traces ``endpoint`` (e.g.
    ``http://127.0.0.1:4318/v1/traces``); return the number of spans sent.

    Raises :class:`UsageError` when the exporter is not installed, the URL is not http(s), or
    the collector did not accept every span.
    """
    if not endpoint.startswith(("http://", "https://")):
        raise UsageError(f"--otlp needs an http:// or https:// URL, got {endpoint!r}")
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )
    except ImportError as exc:
        raise UsageError(
            "--otlp needs opentelemetry-exporter-otlp-proto-http: pip install 'agent_kit[mlflow]'"
        ) from exc

    class _Counting(SpanExporter):
        """The OTLP exporter, counting spans the collector accepted and those it refused."""

        def __init__(self, inner: OTLPSpanExporter) -> None:
            self.inner, self.sent, self.failed = inner, 0, 0

        def export(self, spans: Sequence[object]) -> SpanExportResult:
            result = self.inner.export(spans)  # type: ignore[arg-type]
            if result is SpanExportResult.SUCCESS:
                self.sent += len(spans)
            else:
                self.failed += len(spans)
            return result

        def shutdown(self) -> None:
            self.inner.shutdown()  # type: ignore[no-untyped-call]

    exporter = _Counting(OTLPSpanExporter(endpoint=endpoint, timeout=OTLP_TIMEOUT_S))
    provider = TracerProvider(
        resource=Resource.create({"service.name": "agent-kit", "agent_kit.job_arn": job_arn})
    )
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=512))
    tracer = provider.get_tracer("agent_kit.export")
    try:
        for item in traces:
            _emit(tracer, item.root, None)
        provider.force_flush()
    finally:
        provider.shutdown()
    if exporter.failed:
        raise UsageError(
            f"the OTLP collector at {endpoint} refused {exporter.failed} of "
            f"{exporter.failed + exporter.sent} spans"
        )
    return exporter.sent
