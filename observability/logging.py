"""JSON-lines logs with trace and span ids, run id and pipeline; no document text at INFO.

:func:`setup_logging` makes every record one JSON object on stderr::

    {"ts": "2026-05-01T12:00:00.123Z", "level": "info", "logger": "overseer.worker",
     "message": "stage completed", "service": "overseer-worker",
     "trace_id": "…32 hex…", "span_id": "…16 hex…", "run_id": "…", "pipeline": "my_graph",
     "stage": "run_pipeline", "duration_ms": 812}

- ``trace_id``/``span_id`` come from the current OpenTelemetry span, so a log line and
  its trace are one click apart.
- ``run_id``/``pipeline``/``stage`` come from :func:`log_context` (the worker's activity
  interceptor sets it for every activity) or from the ``extra`` of the call, or from the
  ``temporal_workflow``/``temporal_activity`` info Temporal's loggers attach.
- **Redaction** (seed 002 R2.4, R10.5): values of ``extra`` keys that name content
  (``text``, ``content``, ``essay``, ``document_text``, ``prompt``, ``snippet``, …) are
  replaced by ``"[redacted <n> chars>]"``, and any string value is cut to
  ``OVERSEER_LOG_MAX_FIELD_CHARS`` (200), for every record at INFO or above. Messages at
  DEBUG keep them only when ``OVERSEER_LOG_SENSITIVE_DATA=1`` (an explicit opt-in).
  Code must still never put document text into a log *message*: nothing can tell a
  sentence of an essay from a sentence of ours.

``OVERSEER_LOG_FORMAT=text`` switches to one human-readable line per record for local work.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from observability.metrics import pipeline_of, run_id_of

SENSITIVE_KEYS = frozenset({
    "text", "content", "contents", "essay", "essay_text", "document_text", "page_text",
    "raw_text", "body", "prompt", "prompts", "messages", "completion", "reply", "snippet",
    "snippets", "pages", "record", "values", "current_values", "proposed_updates", "updates",
    "evidence", "input", "output", "payload",
})
"""``extra`` keys whose values may hold document text or personal fields: redacted at INFO+."""

_STANDARD_ATTRS = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime",
                                                                        "taskName"}
_context: ContextVar[dict[str, Any] | None] = ContextVar("overseer_log_context", default=None)
_service = "overseer"


@contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Add ``fields`` (``run_id``, ``pipeline``, ``stage``, …) to every record logged inside.

    Nested contexts merge; None values are dropped.
    """
    current = dict(_context.get() or {})
    current.update({k: v for k, v in fields.items() if v is not None})
    token = _context.set(current)
    try:
        yield
    finally:
        _context.reset(token)


def current_log_context() -> dict[str, Any]:
    """The fields :func:`log_context` added for the current task (a copy)."""
    return dict(_context.get() or {})


class JSONFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring for the fields and redaction).

    Args:
        service: the ``service`` field (``overseer-api``, ``overseer-worker``).
        max_field_chars: longest string value kept at INFO and above.
        allow_sensitive_debug: keep sensitive ``extra`` values in DEBUG records.
    """

    def __init__(self, service: str = "overseer", *, max_field_chars: int = 200,
                 allow_sensitive_debug: bool = False) -> None:
        super().__init__()
        self.service = service
        self.max_field_chars = max_field_chars
        self.allow_sensitive_debug = allow_sensitive_debug

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as one JSON line."""
        return json.dumps(self.fields(record), default=str, ensure_ascii=False)

    def fields(self, record: logging.LogRecord) -> dict[str, Any]:
        """The record as a dict, redacted for its level."""
        keep_sensitive = record.levelno < logging.INFO and self.allow_sensitive_debug
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
                  .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "service": self.service,
        }
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            out["trace_id"] = format(ctx.trace_id, "032x")
            out["span_id"] = format(ctx.span_id, "016x")
        out.update(_temporal_fields(record))
        out.update(current_log_context())
        for key, value in vars(record).items():
            if key in _STANDARD_ATTRS or key.startswith("_") or key in (
                    "temporal_workflow", "temporal_activity"):
                continue
            out[key] = value
        if not keep_sensitive:
            for key in list(out):
                if key in SENSITIVE_KEYS:
                    out[key] = _redacted(out[key])
                else:
                    out[key] = _cut(out[key], self.max_field_chars)
            out["message"] = _cut(out["message"], max(self.max_field_chars, 500))
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
            if not keep_sensitive:
                out["exception"] = _cut_traceback(out["exception"], 4000)
        return out


class TextFormatter(JSONFormatter):
    """``ts level logger message key=value …`` (same fields and redaction as JSON)."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as one readable line."""
        fields = self.fields(record)
        head = f"{fields.pop('ts')} {fields.pop('level'):<7} {fields.pop('logger')}: " \
               f"{fields.pop('message')}"
        fields.pop("service", None)
        exc = fields.pop("exception", None)
        tail = " ".join(f"{k}={v}" for k, v in fields.items())
        return f"{head} {tail}".rstrip() + (f"\n{exc}" if exc else "")


def setup_logging(service: str, *, level: str | int | None = None, fmt: str | None = None,
                  stream: Any = None) -> logging.Handler:
    """Send the root logger's records to ``stream`` (stderr) as JSON lines (idempotent per process).

    Args:
        service: the ``service`` field.
        level: root level; default ``OVERSEER_LOG_LEVEL`` or INFO.
        fmt: ``json`` (default, ``OVERSEER_LOG_FORMAT``) or ``text``.
        stream: where to write (default stderr).

    Returns:
        The installed handler.
    """
    global _service
    _service = service
    level = level or os.environ.get("OVERSEER_LOG_LEVEL", "INFO")
    fmt = (fmt or os.environ.get("OVERSEER_LOG_FORMAT", "json")).lower()
    max_chars = int(os.environ.get("OVERSEER_LOG_MAX_FIELD_CHARS", "200"))
    sensitive = os.environ.get("OVERSEER_LOG_SENSITIVE_DATA", "").lower() in ("1", "true", "yes")
    formatter_cls = TextFormatter if fmt == "text" else JSONFormatter
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter_cls(service, max_field_chars=max_chars,
                                       allow_sensitive_debug=sensitive))
    handler.set_name("overseer")
    root = logging.getLogger()
    for existing in list(root.handlers):
        if existing.get_name() == "overseer" or isinstance(existing.formatter, JSONFormatter):
            root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level if isinstance(level, int) else str(level).upper())
    # Access logs carry only method, path and status; keep them, in the same format.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers = []
        logger.propagate = True
    # httpx logs every request line at INFO (URLs only) — chatty for LLM and Temporal calls.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # Temporal's loggers append their info dict to the message; the formatter reads the same
    # info from the record's extra and writes run_id/pipeline/stage fields instead.
    from temporalio import activity, workflow

    workflow.logger.workflow_info_on_message = False
    activity.logger.activity_info_on_message = False
    return handler


def _temporal_fields(record: logging.LogRecord) -> dict[str, Any]:
    """run_id/pipeline/stage from the info Temporal's workflow/activity loggers attach."""
    info: Mapping[str, Any] | None = getattr(record, "temporal_activity", None) or getattr(
        record, "temporal_workflow", None)
    if not isinstance(info, Mapping):
        return {}
    workflow_id = info.get("workflow_id")
    out: dict[str, Any] = {}
    run_id = run_id_of(workflow_id)
    if run_id:
        out["run_id"] = run_id
        out["pipeline"] = pipeline_of(workflow_id)
    if info.get("activity_type"):
        out["stage"] = str(info["activity_type"]).rpartition(".")[2]
    if info.get("attempt"):
        out["attempt"] = info["attempt"]
    return out


def _redacted(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    return f"[redacted {len(str(value))} chars]"


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"…[{len(value) - limit} more chars]"
    if isinstance(value, dict | list | tuple):
        text = json.dumps(value, default=str, ensure_ascii=False)
        if len(text) > limit:
            return text[:limit] + f"…[{len(text) - limit} more chars]"
    return value


def _cut_traceback(text: str, limit: int) -> str:
    """Shorten a formatted traceback to about ``limit`` chars by cutting its *middle*.

    The head (``Traceback (most recent call last):`` and the outermost frame) says where
    the call came from; the tail (the innermost frames and the exception type and message)
    says what failed and why, so it gets three quarters of the budget. Cuts fall on line
    boundaries; one marker line says how much was left out.
    """
    if len(text) <= limit:
        return text
    head_budget = limit // 4
    tail_budget = limit - head_budget
    lines = text.splitlines(keepends=True)
    head: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) > head_budget:
            break
        head.append(line)
        used += len(line)
    tail: list[str] = []
    used = 0
    for line in reversed(lines[len(head):]):
        if used + len(line) > tail_budget:
            break
        tail.append(line)
        used += len(line)
    tail.reverse()
    if not tail:
        # One enormous last line (a long exception message): keep its end.
        last = lines[-1]
        tail = ["…" + last[-(tail_budget - 1):]]
    omitted = len(text) - sum(map(len, head)) - sum(map(len, tail))
    marker = f"  …[{omitted} chars of traceback cut]\n"
    return "".join(head) + marker + "".join(tail)
