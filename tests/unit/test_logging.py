"""JSON log lines: trace and span ids, run context, Temporal info, and no document text at INFO."""

from __future__ import annotations

import io
import json
import logging

from opentelemetry.sdk.trace import TracerProvider

from observability.logging import JSONFormatter, TextFormatter, log_context, setup_logging

ESSAY = "My father taught me to fix a bicycle chain on a rainy Saturday in April."


def _record(level: int = logging.INFO, msg: str = "stage completed", **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("overseer.test", level, __file__, 1, msg, (), None)
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def test_a_record_is_one_json_object_with_trace_and_span_ids():
    tracer = TracerProvider().get_tracer("t")
    with tracer.start_as_current_span("work") as span:
        line = JSONFormatter("overseer-worker").format(_record(duration_ms=12))
    out = json.loads(line)
    ctx = span.get_span_context()
    assert out["trace_id"] == format(ctx.trace_id, "032x")
    assert out["span_id"] == format(ctx.span_id, "016x")
    assert out["service"] == "overseer-worker" and out["level"] == "info"
    assert out["duration_ms"] == 12 and out["message"] == "stage completed"
    assert out["ts"].endswith("Z")


def test_log_context_and_temporal_info_give_run_id_pipeline_and_stage():
    rid = "0f5c8a4e-8b0b-4a47-9d3c-1f2e3d4c5b6a"
    with log_context(run_id=rid, pipeline="document_intake", stage="run_pipeline"):
        out = json.loads(JSONFormatter().format(_record()))
    assert (out["run_id"], out["pipeline"], out["stage"]) == (rid, "document_intake", "run_pipeline")
    info = {"workflow_id": f"document_intake-{rid}", "activity_type": "document_intake.review_agent",
            "attempt": 2}
    out = json.loads(JSONFormatter().format(_record(temporal_activity=info)))
    assert (out["run_id"], out["pipeline"], out["stage"], out["attempt"]) == (
        rid, "document_intake", "review_agent", 2)
    assert "temporal_activity" not in out


def test_document_text_in_extra_is_redacted_at_info_and_kept_at_debug_only_on_opt_in():
    record = _record(text=ESSAY, snippet=ESSAY, fields=3, note="x" * 1000)
    out = json.loads(JSONFormatter(max_field_chars=200).format(record))
    assert ESSAY not in json.dumps(out)
    assert out["text"].startswith("[redacted") and out["fields"] == 3
    assert len(out["note"]) < 300
    debug = _record(logging.DEBUG, text=ESSAY)
    assert ESSAY not in JSONFormatter().format(debug)
    assert ESSAY in JSONFormatter(allow_sensitive_debug=True).format(debug)
    assert ESSAY not in JSONFormatter(allow_sensitive_debug=True).format(_record(text=ESSAY))


def test_setup_logging_writes_json_lines_and_text_on_request():
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        setup_logging("overseer-test", stream=stream)
        logging.getLogger("overseer.any").info("hello", extra={"run_id": "r1"})
        line = stream.getvalue().strip().splitlines()[-1]
        assert json.loads(line)["run_id"] == "r1"
        assert isinstance(TextFormatter().format(_record(run_id="r2")), str)
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def _deep(n: int) -> None:
    # Alternates with _deeper so Python does not fold the frames into "repeated N times".
    if n == 0:
        raise ValueError("the innermost frame failed: bad row 17")
    _deeper(n - 1)


def _deeper(n: int) -> None:
    _deep(n)


def test_a_long_traceback_keeps_the_innermost_frames_and_the_message():
    try:
        _deep(80)
    except ValueError:
        import sys

        record = logging.LogRecord("overseer.test", logging.ERROR, __file__, 1, "boom", (),
                                   sys.exc_info())
    out = json.loads(JSONFormatter().format(record))
    exc = out["exception"]
    assert len(exc) < 4200
    assert exc.startswith("Traceback (most recent call last):")
    assert exc.rstrip().endswith("ValueError: the innermost frame failed: bad row 17")
    assert 'raise ValueError("the innermost frame failed' in exc
    assert "chars of traceback cut" in exc
