"""OpenTelemetry tracer providers for API and worker; OTLP export only when configured.

The provider is Temporal's replay-safe one (``create_tracer_provider``) so that spans
made inside workflows by ``OpenTelemetryPlugin`` are not duplicated on replay. One
trace runs from the API request through StartWorkflow, RunWorkflow and every node
activity, and its id is written on each event row.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SynchronousMultiSpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from temporalio.contrib.opentelemetry import OpenTelemetryPlugin, create_tracer_provider

_provider: Any = None
_processors: Any = None
_when_recording: list[Callable[[], None]] = []


def setup_tracing(service_name: str) -> Any:
    """Install the process's tracer provider named ``service_name`` (idempotent).

    Spans are exported over OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set. Otherwise
    they are not recorded (:class:`RecordWhenExported`): trace ids still propagate and reach
    the event log, but no span's attributes are built for nobody (about a tenth of the
    worker's CPU per step, docs/performance-history.md). A span processor added later (a test's
    in-memory exporter) turns recording on; ``OTEL_TRACES_SAMPLER`` (the OpenTelemetry
    standard variable, e.g. ``always_on``) overrides the rule.
    """
    global _provider, _processors
    if _provider is not None:
        return _provider
    processors = _processors = _CountingSpanProcessor()
    sampler = None if os.environ.get("OTEL_TRACES_SAMPLER") else RecordWhenExported(processors)
    provider = create_tracer_provider(resource=service_resource(service_name), sampler=sampler,
                                      active_span_processor=processors)
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _provider = provider
    if records():
        _install_pending()
    return provider


def records() -> bool:
    """Whether this process records spans (:func:`setup_tracing`).

    True once its provider has a span processor, or when ``OTEL_TRACES_SAMPLER`` says to.
    """
    if _provider is None:
        return False
    return bool(os.environ.get("OTEL_TRACES_SAMPLER")) or bool(_processors.count)


def when_recording(install: Callable[[], None]) -> None:
    """Run ``install`` once this process records spans: now, or when a span processor is added.

    For instrumentation whose every span would be dropped unrecorded while nothing exports
    (asyncpg's client spans, LangChain's callback handler): installed anyway, it costs each
    SQL statement and each model token a span or a handler call for nobody (measured with
    the other cuts of docs/performance.md, "What changed"). Trace context does not depend on
    them: it propagates through the request's, the workflow's and the activity's spans.
    """
    if records():
        install()
    else:
        _when_recording.append(install)


def _install_pending() -> None:
    while _when_recording:
        _when_recording.pop(0)()


class _CountingSpanProcessor(SynchronousMultiSpanProcessor):
    """The provider's span processor list, which knows whether anything consumes spans."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # the SDK's __init__ is unannotated
        self.count = 0

    def add_span_processor(self, span_processor: Any) -> None:
        super().add_span_processor(span_processor)
        self.count += 1
        if self is _processors and _provider is not None:
            _install_pending()


class RecordWhenExported(Sampler):
    """Record (and sample) spans only while the provider has a span processor.

    Without one a recorded span is built and dropped; a non-recording span still carries
    a valid trace id, so trace context propagates through Temporal headers and onto event
    rows either way. The parent's sampled flag is not consulted: each process records
    when it exports.
    """

    def __init__(self, processors: _CountingSpanProcessor) -> None:
        self._processors = processors

    def should_sample(self, parent_context: Any, trace_id: int, name: str, kind: Any = None,
                      attributes: Any = None, links: Any = None,
                      trace_state: Any = None) -> SamplingResult:
        """``RECORD_AND_SAMPLE`` when a processor is installed, else ``DROP``."""
        if self._processors.count:
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, trace_state)
        return SamplingResult(Decision.DROP, None, trace_state)

    def get_description(self) -> str:
        """The sampler's name, as OpenTelemetry reports it."""
        return "RecordWhenExported"


def service_resource(service_name: str) -> Resource:
    """Resource attributes of this process: service name/namespace/version/instance, environment.

    ``OTEL_RESOURCE_ATTRIBUTES`` adds further attributes (``Resource.create`` merges it in;
    the ones set here win where both name the same key).
    """
    import socket

    return Resource.create({
        "service.name": service_name,
        "service.namespace": "overseer",
        "service.version": "0.1.0",
        "service.instance.id": f"{socket.gethostname()}-{os.getpid()}",
        "deployment.environment.name": os.environ.get("OVERSEER_ENVIRONMENT", "development"),
    })


def instrument_asyncpg() -> None:
    """Install asyncpg client spans once spans are recorded (:func:`when_recording`).

    SQL text only, never parameters (they may hold document data).
    """
    when_recording(_instrument_asyncpg)


def _instrument_asyncpg() -> None:
    from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor

    # the instrumentor's __init__ is unannotated
    instrumentor = AsyncPGInstrumentor(capture_parameters=False)  # type: ignore[no-untyped-call]
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument()


def temporal_tracing_plugin() -> OpenTelemetryPlugin:
    """The Temporal client/worker plugin that nests workflow and activity spans.

    ``add_temporal_spans`` makes the StartWorkflow, RunWorkflow, StartActivity and
    RunActivity spans that turn one run into one readable tree (without it only the
    context is propagated).
    """
    return OpenTelemetryPlugin(add_temporal_spans=True)


def tracer(name: str = "overseer") -> trace.Tracer:
    """A tracer from the installed provider."""
    return trace.get_tracer(name)


def current_trace_id() -> str | None:
    """The 32-hex trace id of the current span, or None outside a recorded span."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return format(ctx.trace_id, "032x")
