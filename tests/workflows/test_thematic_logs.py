"""Thematic analysis never logs review text at INFO or above (seed 002 R2.4, R10.5), through the stack.

A run on the real worker (in this process, so every logger's records reach ``caplog``:
Overseer's, the LLM layer's, Temporal's activity and workflow loggers, LangGraph's) with a
fake chat model that succeeds for some coders, times out for one, and for one theme coder
answers prose that *quotes a review* (re-asked, then replaced by the rules theme coder): the
failure and fallback paths are where text would leak (an error message, a traceback, a
logged reply). No sentence of the window may appear in any
record at INFO or above, while the seed's fields (analysis_id, stage, duration_ms) do.
"""

from __future__ import annotations

import logging

from tests.workflows.test_thematic_stack import (
    example_corpus,
    identity_prompt,
    model_reply,
    run_answered,
)

FORMATTER = logging.Formatter()


def record_text(record: logging.LogRecord) -> str:
    """Everything a handler could write for ``record``: message, args, extras, traceback."""
    parts = [record.getMessage(), repr(record.args)]
    parts += [f"{k}={v!r}" for k, v in record.__dict__.items()
              if k not in ("msg", "args", "exc_info", "exc_text")]
    if record.exc_info:
        parts.append(FORMATTER.formatException(record.exc_info))
    if record.exc_text:
        parts.append(record.exc_text)
    return "\n".join(parts)


async def test_info_logs_of_a_run_hold_no_review_text(dev_server, worker, db, task_queue, caplog):
    corpus = example_corpus()
    sentences = [s for s in corpus.text.values() if len(s.split()) >= 4]
    quoted = sentences[0]
    reply = model_reply()
    timing_out = identity_prompt("outcomes", "coder")
    prose = identity_prompt("experience", "theme_coder")

    def answer(system: str) -> str:
        if timing_out in system:
            raise TimeoutError("model timed out")
        if prose in system:
            return f'I would group these around this review: "{quoted}"'
        return reply

    caplog.set_level(logging.INFO)
    run_id, result = await run_answered(db, dev_server.client, task_queue, answer)
    assert result["status"] == "completed"
    assert result["output"]["errors"] == []
    # the timed-out coder used the rules after its attempts; the theme coder's prose
    # (quoting a review) is re-asked, then its rules stand in: logged fallbacks, the other
    # path where review text could leak
    assert {(f["node"], f["identity_id"]) for f in result["output"]["fallbacks"]} == {
        ("coder", "outcomes"), ("theme_coder", "experience")}

    records = [r for r in caplog.records if r.levelno >= logging.INFO]
    # the capture works and holds the run's own records, with the seed's fields
    ours = [r for r in records if getattr(r, "analysis_id", None) == run_id]
    stages = {getattr(r, "stage", None) for r in ours}
    assert {"started", "load_dataset", "coder", "code_aggregator", "reviewer",
            "theme_aggregator"} <= stages
    assert all(hasattr(r, "duration_ms") for r in ours if r.getMessage() == "stage completed")
    assert any(r.levelno >= logging.WARNING and r.name.startswith("temporalio")
               for r in records)  # the retried coder's failures were logged by Temporal too
    logged = "\n".join(record_text(r) for r in records)
    leaked = [s for s in sentences if s in logged or s[:40] in logged]
    assert leaked == []
