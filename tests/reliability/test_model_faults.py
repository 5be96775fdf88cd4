"""A model that misbehaves, behind all five pipelines and a user graph (``make reliability``).

One embedded stack (Postgres, Temporal, a worker, the API) runs the README example of each
pipeline and a user graph that asks a chat model (``tests/reliability/model_graph``) twice:
offline first (no model configured: the rules), then against
:class:`~tests.workflows.llm_support.MisbehavingModel`, an OpenAI-compatible endpoint that
never answers what was asked — every new prompt rate limited once (429, ``Retry-After: 1``),
every 7th request a 500, the rest prose, truncated JSON, a stream (or body) that stops
midway, or JSON of the wrong shape, mixed deterministically.

Verdict per run: never ``failed``; it completes with ``strategy: rules`` where the model
failed, or waits for a person with reason codes; and its result is never smaller than the
offline run's of the same input (fields filled, clauses found, codes and themes, resume
entries, report lines, tickets routed). Results go to
``test-artifacts/reliability/model_faults.json``; ``python -m tests.reliability.report``
turns them into docs/reliability.md's model section.
"""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.local.managed import ManagedStack
from tests.reliability.harness import ARTIFACTS
from tests.workflows.llm_support import MisbehavingModel

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GRAPH_FILE = Path(__file__).resolve().parent / "model_graph" / "langgraph.json"
WAITING = "awaiting_approval"
TICKETS = (
    "I was charged twice for my subscription this month, please refund one payment.",
    "My package arrived three weeks late and the box was crushed.",
    "Who founded your company, and in which year?",
)
"""Two tickets the rules route (billing, delivery) and one that goes to a person."""

Summary = dict[str, Any]


# --- waiting on runs ---------------------------------------------------------------------------


def wait_for(client: httpx.Client, run_id: str, statuses: set[str], *,
             timeout: float = 300.0) -> dict[str, Any]:
    """Poll ``GET /v1/runs/{id}`` until its status is in ``statuses`` or ``failed``."""
    deadline = time.monotonic() + timeout
    while True:
        res = client.get(f"/v1/runs/{run_id}")
        run = res.json() if res.status_code == 200 else {}
        if run.get("status") in statuses | {"failed", "cancelled"}:
            return run
        assert time.monotonic() < deadline, f"{run_id} still {run.get('status')}"
        time.sleep(0.5)


def started(res: httpx.Response) -> str:
    """The run id of a ``202``."""
    assert res.status_code == 202, res.text
    return str(res.json()["run_id"])


def reason_codes(run: dict[str, Any]) -> list[str]:
    """Why a waiting run waits: the approval's reason codes (or its payload's)."""
    pending = run.get("pending_approval") or {}
    payload = pending.get("payload") or {}
    return sorted(set(pending.get("reason_codes") or [])
                  | set(payload.get("review_reason_codes") or []))


def base(name: str, run: dict[str, Any]) -> Summary:
    """What every summary holds: the run, its status, its model calls and how it ended."""
    usage = (run.get("llm_usage") or {}).get("total") or {}
    out: Summary = {"case": name, "run_id": run.get("run_id"), "status": run.get("status"),
                    "model_calls": usage.get("calls", 0), "failed_calls": usage.get("failed", 0)}
    if run.get("status") == WAITING:
        out["reason_codes"] = reason_codes(run)
    if run.get("status") == "failed":
        out["error"] = run.get("error")
    return out


# --- the five pipelines and the user graph, each as a README example ---------------------------


def document_intake(stack: ManagedStack) -> list[Summary]:
    """README examples 1 and 2: a clean typed form and the degraded scan with a blank grade."""
    out = []
    with stack.client("submitter", timeout=60) as sub:
        for name, content_type in (("clean_typed_form.pdf", "application/pdf"),
                                   ("degraded_scan_missing_grade.png", "image/png")):
            run_id = started(sub.post("/v1/submissions", files={"file": (
                name, (EXAMPLES / name).read_bytes(), content_type)}))
            run = wait_for(sub, run_id, {"completed", WAITING, "rejected"})
            result = run.get("result") or {}
            record = result.get("record") or {}
            out.append({**base(f"document_intake: {name}", run),
                        "strategy": result.get("strategy"),
                        "strategies": result.get("strategies"),
                        "filled": sum(1 for v in record.values() if v not in (None, "")),
                        "fallbacks": sorted(set(result.get("review_reason_codes") or [])
                                            & {"llm_malformed_response", "llm_unavailable",
                                               "llm_rate_limited"})})
    return out


def due_diligence(stack: ManagedStack) -> list[Summary]:
    """README: the Crunchbase data licence PDF, without sign-off."""
    pdf = EXAMPLES / "due_diligence" / "crunchbase_data_license.pdf"
    with stack.client("submitter", timeout=60) as sub:
        run_id = started(sub.post("/v1/pipelines/due_diligence/runs",
                                  files={"file": (pdf.name, pdf.read_bytes(), "application/pdf")},
                                  data={"metadata": json.dumps({"require_signoff": False})}))
        run = wait_for(sub, run_id, {"completed", WAITING, "rejected"})
    result = run.get("result") or {}
    output = result.get("output") or {}
    clauses = output.get("clauses") or {}
    text = (output.get("ingestion") or {}).get("text") or ""
    found = [f for f in clauses.get("findings") or [] if f.get("status") == "found"]
    assert all(text[f["start"]:f["end"]] == f["quote"] for f in found)  # verbatim, always
    return [{**base("due_diligence: crunchbase_data_license.pdf", run),
             "strategy": clauses.get("strategy"), "strategies": result.get("strategies"),
             "filled": len(found),
             "fallbacks": sorted({f["code"] for f in result.get("fallbacks") or []})}]


def thematic_analysis(stack: ManagedStack) -> list[Summary]:
    """README: the BrewBox reviews (examples/thematic_analysis/reviews.csv)."""
    data = (EXAMPLES / "thematic_analysis" / "reviews.csv").read_bytes()
    with stack.client("submitter", timeout=60) as sub:
        run_id = started(sub.post(
            "/v1/pipelines/thematic_analysis/runs", files={"file": ("reviews.csv", data, "text/csv")},
            data={"metadata": json.dumps({"account_id": "brewbox", "start_date": "2024-01-01",
                                          "end_date": "2024-12-31"})}))
        run = wait_for(sub, run_id, {"completed", WAITING, "rejected"})
    output = (run.get("result") or {}).get("output") or {}
    return [{**base("thematic_analysis: reviews.csv", run), "outcome": output.get("outcome"),
             "strategy": "rules" if output.get("strategies") == ["rules"] else
             ",".join(output.get("strategies") or []),
             "strategies": output.get("strategies"),
             "filled": len(output.get("codebook") or []) + len(output.get("themes") or []),
             "codes": len(output.get("codebook") or []), "themes": len(output.get("themes") or []),
             "errors": [e.get("code") for e in output.get("errors") or []],
             "fallbacks": sorted({f["code"] for f in output.get("fallbacks") or []})}]


def resume_tailoring(stack: ManagedStack) -> list[Summary]:
    """README: the JSON Resume sample × O*NET Web Developers; approved as drafted."""
    body = json.loads((EXAMPLES / "resume_tailoring" / "request.json").read_text())
    with stack.client("submitter", timeout=60) as sub, stack.client("reviewer", timeout=60) as rev:
        run_id = started(sub.post("/v1/pipelines/resume_tailoring/runs", json=body))
        run = wait_for(sub, run_id, {"completed", WAITING, "rejected"})
        drafted = run.get("result") or {}
        summary = {**base("resume_tailoring: request.json", run),
                   "strategy": drafted.get("strategy"),
                   "fallbacks": sorted({m.group(1) for c in drafted.get("change_log") or []
                                        if c.get("action") == "drafted_by_rules"
                                        for m in [re.search(r"\((\w+)\)", c["detail"])] if m})}
        if run.get("status") == WAITING:
            decided = rev.post(f"/v1/admin/approvals/{run_id}/decision",
                               json={"decision": "approve"})
            assert decided.status_code == 200, decided.text
            run = wait_for(sub, run_id, {"completed", "rejected"})
            summary["after_approval"] = run.get("status")
    report = ((run.get("result") or {}).get("output") or {}).get("finalization_report") or {}
    resume = report.get("resume") or {}
    summary["filled"] = sum(len(v) if isinstance(v, list) else 1
                            for v in resume.values() if v)
    return [summary]


def pricing(stack: ManagedStack) -> list[Summary]:
    """README: the composite ask (propose, check the hierarchy, summarise), approved."""
    with stack.client("submitter", timeout=120) as sub, stack.client("reviewer", timeout=120) as rev:
        paused = sub.post("/api/v1/chat", json={
            "message": "Propose Q1 pricing updates ensuring hierarchy; summarize"})
        assert paused.status_code in (200, 202), paused.text
        thread_id = paused.json()["thread_id"]
        if paused.status_code == 202:
            final = rev.post("/api/v1/chat/approve", json={"thread_id": thread_id})
            assert final.status_code == 200, final.text
        run = wait_for(sub, thread_id, {"completed", WAITING, "rejected"})
    result = run.get("result") or {}
    report = str(result.get("report") or "")
    return [{**base("pricing: composite ask", run), "strategy": result.get("strategy"),
             "strategies": result.get("strategies"),
             "filled": len([line for line in report.splitlines() if line.strip()]),
             "fallbacks": [result["fallback"]["code"]] if result.get("fallback") else []}]


def user_graph(stack: ManagedStack) -> list[Summary]:
    """A user graph that asks a chat model: three support tickets through ``ticket_triage``."""
    out = []
    with stack.client("submitter", timeout=60) as sub:
        for i, ticket in enumerate(TICKETS):
            run_id = started(sub.post("/v1/pipelines/ticket_triage/runs",
                                      json={"input": {"ticket": ticket}}))
            run = wait_for(sub, run_id, {"completed", WAITING, "rejected"}, timeout=180)
            state = ((run.get("result") or {}).get("output") or run.get("values") or {})
            if run.get("status") == WAITING and not state:
                state = (sub.get(f"/v1/runs/{run_id}/state").json() or {}).get("values") or {}
            out.append({**base(f"user graph ticket_triage: ticket {i + 1}", run),
                        "strategy": state.get("strategy"), "queue": state.get("queue"),
                        "filled": 1 if state.get("queue") else 0,
                        "fallbacks": [state["reason"]] if state.get("reason") else []})
    return out


CASES: tuple[Callable[[ManagedStack], list[Summary]], ...] = (
    document_intake, due_diligence, thematic_analysis, resume_tailoring, pricing, user_graph)


def run_all(stack: ManagedStack) -> list[Summary]:
    """Every case once, in order, each summary with its wall time."""
    out = []
    for case in CASES:
        begun = time.monotonic()
        summaries = case(stack)
        for s in summaries:
            s["seconds"] = round((time.monotonic() - begun) / len(summaries), 1)
        out.extend(summaries)
    return out


def verdict(offline: Summary, faulty: Summary) -> list[str]:
    """What is wrong with the misbehaving run of a case (empty: nothing)."""
    problems = []
    if faulty["status"] not in ("completed", WAITING):
        problems.append(f"status {faulty['status']}")
    if faulty["status"] == WAITING and offline["status"] != WAITING and \
            not faulty.get("reason_codes"):
        problems.append("waits for a person without a reason")  # (not its standing review)
    if faulty["status"] == "completed" and "rules" not in str(faulty.get("strategy")):
        problems.append(f"strategy {faulty.get('strategy')!r}, not rules, from a model that "
                        "never answered usably")
    if faulty.get("filled", 0) < offline.get("filled", 0):
        problems.append(f"result smaller than offline ({faulty.get('filled')} < "
                        f"{offline.get('filled')})")
    if faulty.get("errors"):
        problems.append(f"errors {faulty['errors']}")
    return problems


@pytest.mark.reliability
@pytest.mark.timeout(1200)
def test_a_misbehaving_model_costs_no_result(tmp_path: Path):
    started_at = time.monotonic()
    stack = ManagedStack(tmp_path, env_overrides={
        "OVERSEER_GRAPHS": str(GRAPH_FILE), "OVERSEER_LLM_BASE_URL": "", "TRIAGE_LLM_BASE_URL": "",
        "OVERSEER_DRY_RUN": "0"})
    with MisbehavingModel() as model, stack.start(workers=1):
        offline = run_all(stack)
        # the same stack, now pointed at the misbehaving endpoint (worker and API restarted)
        stack.env_overrides.update(OVERSEER_LLM_BASE_URL=model.base_url,
                                   OVERSEER_LLM_API_KEY="misbehaving",
                                   OVERSEER_LLM_TIMEOUT_SECONDS="5",
                                   TRIAGE_LLM_BASE_URL=model.base_url)
        stack.kill_worker(0, signal.SIGTERM)
        stack.start_worker()
        stack.restart_api(sig=signal.SIGTERM)
        faulty = run_all(stack)
        counts = model.counts()

    rows = []
    for before, after in zip(offline, faulty, strict=True):
        assert before["case"] == after["case"]
        rows.append({"case": after["case"], "offline": before, "misbehaving": after,
                     "problems": verdict(before, after)})
    outcome = {"kind": "model_faults", "scenario": "model_faults",
               "fault": "a model that never answers usably: each new prompt 429 once "
                        "(Retry-After 1 s), every 7th request 500, else prose, truncated JSON, "
                        "a stream or body stopped midway, JSON of the wrong shape",
               "endpoint": counts, "requests": sum(counts.values()),
               "wall_seconds": round(time.monotonic() - started_at, 1), "runs": rows,
               "ok": not any(r["problems"] for r in rows)}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "model_faults.json").write_text(json.dumps(outcome, indent=2, default=str))

    # the endpoint misbehaved in every way it can, and the runs met each of them
    assert {"429", "500", "prose", "truncated", "cut", "wrong_shape"} <= set(counts), counts
    assert not [(r["case"], r["problems"]) for r in rows if r["problems"]], rows
    # every pipeline and the user graph asked the model, and each fell back where it failed
    asked: dict[str, int] = {}
    for r in rows:
        group = r["case"].split(":")[0]
        asked[group] = asked.get(group, 0) + len(r["misbehaving"]["fallbacks"])
    assert all(asked.values()) and len(asked) == 6, asked
