"""The three seed pipelines on the graph runtime, over HTTP, with real inputs from examples/."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import Stack
from tests.e2e.test_user_graph_api import wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_due_diligence_on_a_real_agreement(stack: Stack):
    sub = stack.client("submitter")
    text = (EXAMPLES / "due_diligence" / "crunchbase_data_license.txt").read_text()
    started = sub.post("/v1/pipelines/due_diligence/runs",
                       files={"file": ("agreement.txt", text.encode(), "text/plain")})
    assert started.status_code == 202, started.text
    run = wait_for(sub, started.json()["run_id"], {"completed", "failed"}, timeout=240)
    assert run["status"] == "completed", run.get("error")
    result = run["result"]
    assert result["progress"]["label"] == "5 of 5 agents complete"
    findings = [f for f in result["output"]["clauses"]["findings"] if f["status"] == "found"]
    assert findings
    ingested = result["output"]["ingestion"]["text"]
    assert all(ingested[f["start"]:f["end"]] == f["quote"] for f in findings)
    assert result["output"]["checklist"] and result["output"]["summary"]
    events = sub.get(f"/v1/runs/{run['run_id']}/events").json()["items"]
    done = [e["data"]["node"] for e in events if e["type"] == "node.completed"]
    assert done.index("ingestion") < done.index("risk_scoring") < done.index("checklist")
    report = sub.get(f"/v1/runs/{run['run_id']}/report.md")
    assert report.status_code == 200 and report.headers["content-type"].startswith("text/markdown")
    assert findings[0]["quote"][:40] in report.text


def test_thematic_analysis_on_the_example_reviews(stack: Stack):
    sub = stack.client("submitter")
    data = (EXAMPLES / "thematic_analysis" / "reviews.csv").read_bytes()
    account = data.decode().splitlines()[1].split(",")[1]
    meta = {"account_id": account, "start_date": "2000-01-01", "end_date": "2100-01-01"}
    started = sub.post("/v1/pipelines/thematic_analysis/runs",
                       files={"file": ("reviews.csv", data, "text/csv")},
                       data={"metadata": json.dumps(meta)})
    assert started.status_code == 202, started.text
    run = wait_for(sub, started.json()["run_id"], {"completed", "failed"}, timeout=240)
    assert run["status"] == "completed", run.get("error")
    events = sub.get(f"/v1/runs/{run['run_id']}/events").json()["items"]
    coders = [e for e in events if e["type"] == "node.completed" and e["data"]["node"] == "coder"]
    assert len(coders) >= 2  # one coder per identity (run together in one step)
    themes = run["result"]["output"]["themes"]
    ids = [q for t in themes for q in t["quote_ids"]][:5]
    assert sub.get(f"/v1/runs/{run['run_id']}/quotes", params={"ids": ",".join(ids)}
                   ).status_code == 403  # quote text is for reviewers
    quotes = stack.client("reviewer").get(f"/v1/runs/{run['run_id']}/quotes",
                                          params={"ids": ",".join(ids)}).json()["quotes"]
    reviews = data.decode()
    assert set(quotes) == set(ids) and all(text in reviews for text in quotes.values())


def test_resume_tailoring_review_revise_approve(stack: Stack):
    sub, rev = stack.client("submitter"), stack.client("reviewer")
    body = json.loads((EXAMPLES / "resume_tailoring" / "request.json").read_text())
    started = sub.post("/v1/pipelines/resume_tailoring/runs", json=body)
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    first = wait_for(sub, run_id, {"awaiting_approval", "failed"}, timeout=240)
    assert first["status"] == "awaiting_approval", first.get("error")
    # the agents' progress shows while the run waits (node.completed snapshots, as segments)
    assert first["result"]["progress"] == {
        "completed": 4, "total": 5, "current": "finalization_agent",
        "label": "4 of 5 agents complete"}, first["result"].get("progress")
    assert first["result"]["ats_score"] == first["result"]["ats_optimization_report"]["score"]
    empty = rev.post(f"/v1/admin/approvals/{run_id}/decision",
                     json={"decision": "revise", "note": "  "})
    assert empty.status_code == 422 and empty.json()["code"] == "feedback_required"
    revised = rev.post(f"/v1/admin/approvals/{run_id}/decision",
                       json={"decision": "revise", "note": "shorter summary, lead with Javascript"})
    assert revised.status_code == 200, revised.text
    second = wait_for(sub, run_id, {"awaiting_approval"}, timeout=240)
    assert second["pending_approval"]["payload"] != first["pending_approval"]["payload"]
    approved = rev.post(f"/v1/admin/approvals/{run_id}/decision", json={"decision": "approve"})
    assert approved.status_code == 200, approved.text
    done = wait_for(sub, run_id, {"completed", "rejected", "failed"}, timeout=240)
    assert done["status"] == "completed", done.get("error")
    from activities.resume_tailoring.honesty import find_violations
    from activities.resume_tailoring.resume import schema_errors

    report = done["result"]["output"]["finalization_report"]
    assert report["human_approved"] is True
    assert schema_errors(report["resume"]) == []
    assert find_violations(report["resume"], body["input"]["base_resume"]) == []
