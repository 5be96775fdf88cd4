"""Turn ``test-artifacts/reliability/*.json`` (and the schemathesis run) into docs/reliability.md.

``python -m tests.reliability.report`` — run by ``make reliability`` after the scenarios.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.reliability.harness import ARTIFACTS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reliability.md"

ABUSE = [
    ("zero-byte, truncated, garbage-after-header, encrypted PDFs; wrong magic; random binary; "
     "decompression-bomb PNG (20000×20000)", "tests/e2e/test_api.py::test_hostile_samples_*", 6,
     "415 `unsupported_media_type` or 422 `unreadable_document` with a reason; nothing stored"),
    ("Latin-1 text, a real PNG named .pdf", "tests/e2e/test_api.py::test_latin1_*", 2,
     "accepted (decoded / read by its magic bytes)"),
    ("page bomb (400-page PDF over the 200-page limit)", "tests/e2e/test_abuse.py", 1,
     "422 `too_many_pages`"),
    ("document corrupted after acceptance (mid-run)",
     "tests/workflows/test_document_intake.py::test_corrupt_document_*", 1,
     "run `failed` with `unreadable_document` after one attempt; no retries"),
    ("filename with path traversal", "tests/e2e/test_abuse.py", 1, "stored as its base name"),
    ("SQL and `<script>` payloads in field values", "tests/e2e/test_abuse.py", 1,
     "kept as data or refused by validation; tables intact"),
    ("oversized upload: declared 2 GB / streamed 64 MB chunked / 20 MB + 10 B",
     "tests/e2e/test_abuse.py, test_api.py", 3,
     "413 `payload_too_large` before parsing; memory bounded"),
    ("slow client trickling a body", "tests/e2e/test_abuse.py", 1, "other requests unaffected"),
    ("8 concurrent submissions with one Idempotency-Key", "tests/e2e/test_abuse.py", 1,
     "one run, one `run.submitted`"),
    ("missing / invalid / expired tokens", "tests/e2e/test_api.py, test_abuse.py", 3,
     "401 `unauthenticated` / `token_expired`, recorded in `security_events`"),
    ("submitter deciding; submitter reading another's run", "tests/e2e/test_api.py, test_abuse.py",
     2, "403 `forbidden` (recorded) / 404"),
    ("reviewer deciding a run another reviewer claimed", "tests/e2e/test_abuse.py", 1,
     "409 `claimed_by_other`, recorded"),
    ("concurrent decisions / claims on one approval", "tests/workflows/test_claims.py", 13,
     "exactly one applies; the rest 409"),
    ("parallel interrupts (one approval each): two reviewers racing on one, and on two "
     "different ones", "tests/workflows/test_parallel_approvals.py", 2,
     "one decision per interrupt applies (the other 409 `not_awaiting_approval`); decisions on "
     "different interrupts both apply; one `approval.decided` per interrupt"),
    ("a stream or wait client that hangs up with `on_disconnect=\"cancel\"`",
     "tests/e2e/test_langgraph_sdk_run_options.py", 2,
     "the run is cancelled (`interrupted`) within about a second; with the default it runs to "
     "its end"),
    ("every worker down (crashed, restarting) while a client reads a thread paused at an "
     "interrupt", "tests/e2e/test_crash_recovery.py", 1,
     "the pause as recorded, within ~3 s (was: 29 s, then 503); the run goes on once a worker "
     "is back"),
    ("a run's workflow terminated from the Temporal Web UI: mid-segment, and with a workflow "
     "task in flight", "tests/e2e/test_langgraph_sdk_run_options.py", 2,
     "run `interrupted`, thread `idle` with LangGraph's latest checkpoint, runs again (was: "
     "every read of it 503 with a task in flight)"),
    ("a run's workflow failed or timed out before its ending", "tests/unit/test_thread_hand_off.py",
     2, "thread `error`, its run `error` (was: thread `busy`)"),
]


MODEL_FAULTS = "model_faults.json"
"""The misbehaving-model scenario's result (``tests/reliability/test_model_faults.py``)."""


def _result(summary: dict[str, Any]) -> str:
    """One run's status and how much it produced, for the model table."""
    status = summary.get("status", "?")
    if summary.get("after_approval"):
        status += f" → {summary['after_approval']}"
    size = summary.get("filled", 0)
    if "codes" in summary:
        size = f"{summary['codes']} codes, {summary['themes']} themes"
    elif summary.get("queue") is not None or summary["case"].startswith("user graph"):
        size = f"queue {summary.get('queue') or '—'}"
    return f"{status}; {size}"


def model_section(result: dict[str, Any] | None) -> list[str]:
    """docs/reliability.md's model section from ``model_faults.json`` (None: not run yet)."""
    lines = [
        "## A model that misbehaves",
        "",
        "`tests/reliability/test_model_faults.py`: one stack runs the README example of each "
        "of the five pipelines and a user graph that asks a chat model "
        "(`tests/reliability/model_graph`: support-ticket triage, keyword rules offline, a "
        "person when no rule matches) twice: offline (no model configured), then against an "
        "OpenAI-compatible endpoint that never answers what was asked "
        "(`tests.workflows.llm_support.MisbehavingModel`): each new prompt is rate limited "
        "once (429, `Retry-After: 1`), every 7th request fails (500), and every other answer "
        "is prose, JSON cut off, a stream (or body) that stops midway, or JSON of the wrong "
        "shape, mixed deterministically. A run passes when it is never `failed`, completes "
        "with `strategy: rules` where the model failed or waits for a person with reason "
        "codes, and gives no less than the offline run of the same input (fields filled, "
        "clauses found verbatim, codes and themes, resume entries, report lines, tickets "
        "routed).",
        "",
    ]
    if result is None:
        return [*lines, "Not run yet: `make reliability` writes it.", ""]
    lines += [
        "| run | offline | misbehaving model | strategy | fell back because / waits for | "
        "model calls (failed) | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in result["runs"]:
        off, bad = row["offline"], row["misbehaving"]
        why = ", ".join(f"`{c}`" for c in dict.fromkeys([*bad.get("fallbacks", []),
                                                          *bad.get("reason_codes", [])])) or "—"
        lines.append(
            f"| {row['case']} | {_result(off)} | {_result(bad)} | "
            f"{bad.get('strategy') or '—'} | {why} | {bad.get('model_calls', 0)} "
            f"({bad.get('failed_calls', 0)}) | "
            f"{'ok' if not row['problems'] else 'FAILED: ' + '; '.join(row['problems'])} |")
    served = ", ".join(f"{k} {v}" for k, v in sorted(result["endpoint"].items()))
    lines += [
        "",
        f"The endpoint answered {result['requests']} requests ({served}); both passes took "
        f"{result['wall_seconds']} s. Model calls are the run's `llm.called` ledger, failed "
        "ones those the endpoint or the client failed (a reply the step could not use counts "
        "as answered; a user graph's calls are metered by the runtime, once per call whatever "
        "its client retried); document intake's clean form needs no model. Every run passed: "
        f"{'yes' if result['ok'] else 'NO'}.",
        "",
    ]
    return lines


def _pct(values: list[float], q: float) -> str:
    """The ``q`` quantile of sorted ``values`` (nearest rank), or a dash."""
    if not values:
        return "—"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]:.1f}"


def chat_section(chats: list[dict[str, Any]]) -> list[str]:
    """The chat scenarios (``tests/reliability/test_chat_faults.py``) as a table."""
    if not chats:
        return []
    lines = [
        "## Chats under faults",
        "",
        "Each scenario: a fresh embedded stack; 50 people chat at once with `chat_charge` (a "
        "reply streamed token by token for ~2.3 s, then a charge POSTed to a local payment "
        "API with the task's `idempotency_key()`, then a whole message), each through the "
        "official SDK (`runs.stream(stream_mode=\"messages-tuple\")`, rejoining with "
        "`Last-Event-ID` when a stream breaks, as a chat UI does); the fault 1.8 s in. A stream "
        "matches when the messages rebuilt from it (`RemoveMessage` honoured, as `useStream` "
        "and `add_messages` do) equal the thread's; a charge is doubled when one chat's charge "
        "reached the payment API under two keys. Recovery: from the fault's end to each "
        "in-flight chat's next token.",
        "",
        "| fault | chats | lost | streams ≠ thread | charges doubled / missing | "
        "client rejoins | recovery p50 / p95 (s) | ok |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in chats:
        st = r["statuses"]
        rejoins = next((n.split(": ")[1] for n in r["notes"]
                        if n.startswith("client rejoins: ")), "—")
        ok = (not r["lost"] and st.get("streams_differ") == 0
              and st.get("charges_doubled") == 0 and st.get("charges_missing") == 0)
        lines.append(
            f"| {r['fault']} | {r['accepted']} | {len(r['lost'])} | "
            f"{st.get('streams_differ', '—')} | {st.get('charges_doubled', '—')} / "
            f"{st.get('charges_missing', '—')} | {rejoins} | "
            f"{_pct(r['recovery_seconds'], 0.5)} / {_pct(r['recovery_seconds'], 0.95)} | "
            f"{'yes' if ok else 'NO'} |")
    stale = next((n for r in chats for n in r["notes"] if n.startswith("writes after")), None)
    lines += [
        "",
        "A dead worker's segment starts again on another once its 6 s heartbeat time-out "
        "passes (Temporal's SDK heartbeats at most every 4.8 s, so 1.2-6 s after the kill) "
        "plus the retry's first 1 s back-off; the new attempt takes back what the dead one "
        "streamed (docs/your-graph.md, \"A reply cut by a crash\").",
        "Client rejoins count the test client's own; the SDK first reconnects a broken "
        "stream by itself (with `Last-Event-ID`), which is all the API kill needed.",
        *([f"The paused worker, once woken: {stale.split(': ', 1)[1]} new rows (checkpoints, "
           "task writes, stream rows, events other than its model calls' ledger)."]
          if stale else []),
        "",
    ]
    return lines


def main() -> None:
    """Write docs/reliability.md from the latest results."""
    found = [json.loads(p.read_text()) for p in sorted(ARTIFACTS.glob("*.json"))
             if p.name != MODEL_FAULTS]
    results = [r for r in found if not r["scenario"].startswith("chat_")]
    chats = [r for r in found if r["scenario"].startswith("chat_")]
    model_path = ARTIFACTS / MODEL_FAULTS
    model = json.loads(model_path.read_text()) if model_path.exists() else None
    lines = [
        "# Reliability: nothing accepted is lost, duplicated or exposed",
        "",
        f"Generated by `make reliability` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on the "
        "2-core development machine (other work was running; times are upper bounds).",
        "",
        "## Faults under load",
        "",
        "Each scenario: a fresh embedded stack with two workers; a mixed load of typed PDFs, "
        "plain text and office scans (some missing a required field, so they wait for a human) "
        "submitted with Idempotency-Keys by retrying clients; the fault; then every waiting run "
        "gets two concurrent approvals. Verdict from the event log: `overseer check` rebuilds "
        "the read models from the log and compares them row by row, and checks one "
        "`run.submitted` per run, at most one terminal event, never more decisions than requests.",
        "",
        "| fault | docs | accepted | settled | lost | duplicated events | decisions (pairs sent → "
        "applied) | double-applied | read models = log | recovery (s) | statuses |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        c = r["consistency"]
        dup = len(c.get("duplicate_submissions", [])) + len(c.get("duplicate_terminal_events", []))
        double = len(c.get("decisions_without_request", [])) + max(
            0, r["decisions_applied"] - r.get("waiting_for_decision", r["decisions_applied"]))
        lines.append(
            f"| {r['fault']} | {r['documents']} | {r['accepted']} | {r['settled']} | "
            f"{len(r['lost'])} | {dup} | {r['decisions_sent'] // 2} → {r['decisions_applied']} | "
            f"{double} | {'yes' if c.get('ok') else 'NO'} | "
            f"{', '.join(str(x) for x in r['recovery_seconds']) or '—'} | "
            f"{', '.join(f'{k} {v}' for k, v in sorted(r['statuses'].items()))} |")
    lines += [
        "",
        "Recovery is the time from the fault ending (a new worker started, the server back) "
        "to the next event appended (for the user-graph rows: from the API answering again "
        "to the last of the runs done); for a killed worker it is bounded by the activity "
        "heartbeat time-out (4 s for document_intake's model-calling nodes and every split, "
        "20 s for due_diligence's clause nodes, 10 s by default for every other node, 6 s for "
        "a segment, document_intake's OCR included) and the sticky-queue time-out (3 s).",
        "",
        *chat_section(chats),
        *model_section(model),
        "## Bad input and abuse",
        "",
        "| class | where | cases | answer |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {c} | `{w}` | {n} | {a} |" for c, w, n, a in ABUSE]
    fuzz = ARTIFACTS.parent / "schemathesis" / "output.txt"
    if fuzz.exists():
        m = re.search(r"(\d+) generated, (\d+) passed", fuzz.read_text())
        if m:
            lines.append(f"| schemathesis over the whole OpenAPI document | "
                         f"`tests/e2e/test_fuzz_api.py` | {m.group(1)} | {m.group(2)} passed: no "
                         "5xx, every response matches the schema |")
    lines += [
        "",
        "## Fixed because of this suite",
        "",
        "- A worker killed mid-reply left the client the dead attempt's cut-off reply and then "
        "the whole reply again under a new id (0 of 10 streams matched their thread): the new "
        "attempt now takes the old message back first (a `RemoveMessage`).",
        "- A worker paused past its heartbeat time-out wrote stream rows (and could write "
        "checkpoints) over its replacement's when it woke, and an attempt Temporal had handed it "
        "while it slept took the segment back: attempts now claim their segment by Temporal's "
        "attempt number, and every write checks the claim in its own statement or transaction "
        "(`overseer.fencing`; a check just before the write still let 2 checkpoints and 3 task "
        "writes of 25 paused runs in).",
        "- Postgres down 30 s under 50 chats: a failed stream write was dropped while LangGraph's "
        "checkpoint of the same reply went in later, so 16 of 50 streams never showed their "
        "reply; then, with segments failing fast, 2 of 50 runs used up their 5 attempts. "
        "Checkpoints now wait for the stream to be written (a failed write runs the node "
        "again), and segments get 10 attempts.",
        "- Node activities had 5 attempts (~15 s of backoff): a 30 s Postgres outage failed "
        "runs. Now 10 attempts (~2.5 min); model errors still stop after 3.",
        "- Postgres or Temporal down made the API answer 500: now 503 "
        "`dependency_unavailable` with `Retry-After`.",
        "- A NUL byte in a query parameter, or an age past Postgres' interval range, gave 500: "
        "now 422 `invalid_request` (found by schemathesis).",
        "- Starlette spooled a whole oversized multipart body before the size check: an ASGI "
        "middleware now answers 413 from `Content-Length`, or as soon as a chunked body "
        "passes the limit.",
        "- Tokens could not expire and refusals were not recorded: grants take `expires_at`; "
        "401/403/409-claim refusals go to the append-only `security_events` table.",
        "- A document_intake run whose local segment try had timed out (so its segment went on "
        "as an activity) failed its next workflow task on nondeterminism once a worker replayed "
        "it, and stayed `running` for good (37 of 200 runs with a worker killed every 5 s): the "
        "replayed time-out arrives as Temporal's `TimeoutError`, the live one as an "
        "`ActivityError`, and the workflow caught only the latter. Every failure path in the "
        "workflow now catches both (`workflows.segment_calls.ACTIVITY_FAILURES`); the recorded "
        "history replays in `tests/workflows/test_replay.py`.",
        "- Against a model that misbehaves (above), thematic analysis failed "
        "(`theme_stage_failed`; a model answering an empty or invented theme list ended "
        "`no_themes`): the coders of a step share its attempts, so a coder whose re-ask was "
        "rate limited met a 500 on the step's last attempt and recorded `llm_unavailable` "
        "without a retry, and a theme list with nothing usable was taken as the answer. Now "
        "a transient failure is retried per call (counted from the ledger, "
        "`overseer.runtime.llm.model_call_retryable`), then that step uses its rules; JSON with "
        "nothing usable is re-asked, then the rules. Resume tailoring failed the same way "
        "(`llm_rate_limited`); pricing's report took truncated JSON or a chatty non-answer as "
        "the summary (now re-asked, then the template).",
        "",
        "Resource limits per document (pages, pixels, OCR seconds per page) are settings "
        "(`OVERSEER_MAX_DOCUMENT_PAGES`, `OVERSEER_MAX_PIXELS_PER_PAGE`, "
        "`OVERSEER_OCR_TIMEOUT_SECONDS`), checked at upload and again inside the activities, "
        "which heartbeat while they OCR.",
        "",
    ]
    DOC.write_text("\n".join(lines))
    print(f"wrote {DOC}")  # noqa: T201


if __name__ == "__main__":
    main()
