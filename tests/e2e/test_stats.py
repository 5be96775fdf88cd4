"""``GET /v1/admin/stats`` over real runs: documents submitted, escalated, claimed and decided over HTTP."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tests import corpus
from tests.e2e.conftest import EXAMPLES, Stack

pytestmark = pytest.mark.e2e


def wait_for(client: httpx.Client, run_id: str, statuses: set[str], timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
        if body.get("status") in statuses:
            return body
        assert time.monotonic() < deadline, f"run {run_id} stuck in {body.get('status')}"
        time.sleep(0.2)


def submit(client: httpx.Client, name: str, data: bytes, content_type: str) -> str:
    res = client.post("/v1/submissions", files={"file": (name, data, content_type)})
    assert res.status_code == 202, res.text
    return str(res.json()["run_id"])


def test_stats_count_real_runs_outcomes_escalations_and_reviewers(stack: Stack):
    since = datetime.now(UTC)
    sub, rev, admin = stack.client("submitter"), stack.client("reviewer"), stack.client("admin")
    clean = submit(sub, "clean.pdf", (EXAMPLES / "clean_typed_form.pdf").read_bytes(), "application/pdf")
    escalated = [submit(sub, f"form{i}.txt", corpus.render_text(corpus.make_entry(60 + i, drop=["grade"])),
                        "text/plain") for i in range(2)]
    refused = sub.post("/v1/submissions", files={"file": ("c.pdf", (EXAMPLES / "corrupt.pdf").read_bytes(),
                                                          "application/pdf")})
    assert refused.status_code == 422  # refused up front: never a run, never in the stats

    assert wait_for(sub, clean, {"completed", "awaiting_approval", "failed"})["status"] == "completed"
    for run_id in escalated:
        assert wait_for(sub, run_id, {"awaiting_approval", "completed", "failed"})["status"] == \
            "awaiting_approval"

    pending = admin.get("/v1/admin/stats", params={"since": since.isoformat()}).json()
    assert pending["totals"] == {"submitted": 3, "in_flight": 2, "finished": 1, "pending_approvals": 2}
    assert pending["approval_ages"][0]["pending"]["count"] == 2
    assert pending["approval_ages"][0]["pending"]["p50_seconds"] >= 0

    claimed = rev.post(f"/v1/admin/approvals/{escalated[0]}/claim")
    assert claimed.status_code == 200, claimed.text
    ok = rev.post(f"/v1/admin/approvals/{escalated[0]}/decision",
                  json={"decision": "approve", "updates": {"grade": "8"}})
    assert ok.status_code == 200, ok.text
    no = admin.post(f"/v1/admin/approvals/{escalated[1]}/decision",
                    json={"decision": "reject", "note": "duplicate entry"})
    assert no.status_code == 200, no.text

    res = rev.get("/v1/admin/stats", params={"since": since.isoformat()})
    assert res.status_code == 200, res.text
    stats = res.json()
    assert stats["totals"] == {"submitted": 3, "in_flight": 0, "finished": 3, "pending_approvals": 0}
    intake = {p["pipeline"]: p for p in stats["pipelines"]}["document_intake"]
    assert intake["outcomes"] == {"approved": 1, "completed": 1, "rejected": 1}

    tools = [len(sub.get(f"/v1/runs/{r}").json()["result"]["tools_used"]) for r in [clean, *escalated]]
    assert intake["runs_with_tools"] == 3
    assert intake["avg_tools_per_submission"] == pytest.approx(sum(tools) / 3, abs=1e-3)
    assert sum(stats["tool_usage"].values()) >= 3 and stats["tool_usage"]["run_pipeline"] == 3

    reasons = {r["reason"]: r["count"] for r in stats["top_escalation_reasons"]}
    assert reasons["missing_grade"] == 2
    assert stats["top_escalation_reasons"][0]["count"] == max(reasons.values())
    assert sum(r["count"] for r in stats["escalation_routes"]) == 2

    ages = stats["approval_ages"][0]
    assert ages["pipeline"] is None
    assert ages["pending"]["count"] == 0 and ages["decided"]["count"] == 2
    assert 0 <= ages["decided"]["p50_seconds"] <= ages["decided"]["max_seconds"] < 120
    assert stats["sla"]["breaches"] == 0 and stats["sla"]["overdue_pending"] == 0

    reviewers = {r["reviewer"]: r for r in stats["reviewers"]}
    events = admin.get(f"/v1/runs/{escalated[0]}/events").json()["items"]
    approver = next(e for e in events if e["type"] == "approval.decided")["data"]["decided_by"]
    events = admin.get(f"/v1/runs/{escalated[1]}/events").json()["items"]
    rejecter = next(e for e in events if e["type"] == "approval.decided")["data"]["decided_by"]
    assert reviewers[approver]["approved"] == 1 and reviewers[approver]["claims"] == 1
    assert reviewers[rejecter]["rejected"] == 1 and reviewers[rejecter]["decisions_last_24h"] == 1

    none = admin.get("/v1/admin/stats", params={"since": since.isoformat(), "pipeline": "pricing"}).json()
    assert none["pipelines"] == [] and none["totals"]["submitted"] == 0


def test_stats_need_a_reviewer_token_and_aware_times(stack: Stack):
    assert httpx.get(f"{stack.base_url}/v1/admin/stats").status_code == 401
    forbidden = stack.client("submitter").get("/v1/admin/stats")
    assert forbidden.status_code == 403 and forbidden.json()["code"] == "forbidden"
    naive = stack.client("admin").get("/v1/admin/stats", params={"since": "2030-01-01T00:00:00"})
    assert naive.status_code == 422 and naive.json()["code"] == "invalid_request"
    bad = stack.client("admin").get("/v1/admin/stats", params={"since": "yesterday"})
    assert bad.status_code == 422
