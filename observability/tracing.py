"""OpenTelemetry tracer providers for API and worker; OTLP export only when configured."""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

_configured = False


def setup_tracing(service_name: str) -> TracerProvider:
    """Install a tracer provider named ``service_name`` (idempotent per process).

    Spans are exported over OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; otherwise
    they are still created (so trace ids reach the event log) but go nowhere.
    """
    global _configured
    current = trace.get_tracer_provider()
    if _configured and isinstance(current, TracerProvider):
        return current
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _configured = True
    return provider


def current_trace_id() -> str | None:
    """The 32-hex trace id of the current span, or None outside a recorded span."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return format(ctx.trace_id, "032x")
