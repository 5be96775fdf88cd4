"""Spans are recorded only when something exports them; trace ids propagate either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import json
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from observability.tracing import current_trace_id, setup_tracing

provider = setup_tracing("probe")
tracer = trace.get_tracer("probe")
out = {}
with tracer.start_as_current_span("before") as span:
    out["before"] = [span.is_recording(), current_trace_id()]
exporter = InMemorySpanExporter()
provider.add_span_processor(SimpleSpanProcessor(exporter))
with tracer.start_as_current_span("after") as span:
    out["after"] = [span.is_recording(), current_trace_id()]
out["exported"] = [s.name for s in exporter.get_finished_spans()]
print(json.dumps(out))
"""


def _probe(**env: str) -> dict:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("OTEL_TRACES_SAMPLER", "OTEL_EXPORTER_OTLP_ENDPOINT")}
    done = subprocess.run([sys.executable, "-c", PROBE], env={**environ, **env}, check=True,
                          capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_spans_are_recorded_only_once_a_processor_consumes_them() -> None:
    out = _probe()
    recording, trace_id = out["before"]
    assert recording is False
    assert trace_id and len(trace_id) == 32  # the id still reaches event rows and headers
    assert out["after"][0] is True
    assert out["exported"] == ["after"]


def test_the_standard_sampler_variable_overrides_the_rule() -> None:
    out = _probe(OTEL_TRACES_SAMPLER="always_on")
    assert out["before"][0] is True


DEFERRED = """
import json
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from langchain_core.callbacks.manager import CallbackManager
from observability.genai import OpenTelemetryCallbackHandler, instrument_langchain
from observability.tracing import instrument_asyncpg, setup_tracing
import asyncpg

def state():
    handlers = CallbackManager.configure(inheritable_callbacks=None).handlers
    return [any(isinstance(h, OpenTelemetryCallbackHandler) for h in handlers),
            hasattr(asyncpg.connection.Connection.execute, "__wrapped__")]

provider = setup_tracing("probe")
instrument_langchain()
instrument_asyncpg()
out = {"before": state()}
provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
out["after"] = state()
print(json.dumps(out))
"""


def test_span_only_instrumentation_joins_once_spans_are_recorded() -> None:
    """asyncpg's and LangChain's spans cost a call per statement / token: none while unrecorded."""
    environ = {k: v for k, v in os.environ.items()
               if k not in ("OTEL_TRACES_SAMPLER", "OTEL_EXPORTER_OTLP_ENDPOINT")}
    done = subprocess.run([sys.executable, "-c", DEFERRED], env=environ, check=True,
                          capture_output=True, text=True, timeout=60)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"before": [False, False], "after": [True, True]}
