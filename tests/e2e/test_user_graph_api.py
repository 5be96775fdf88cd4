"""A user's graph (OVERSEER_GRAPHS) over HTTP, next to the reference pipelines: run, interrupt,
decide from the admin API, finish with the final state as output; a poison node fails named."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.e2e.conftest import Stack


def wait_for(client: httpx.Client, run_id: str, statuses: set[str],
             timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        run = client.get(f"/v1/runs/{run_id}").json()
        if run.get("status") in statuses:
            return run
        assert time.monotonic() < deadline, run
        time.sleep(0.3)


def test_user_graphs_are_listed_next_to_the_reference_pipelines(stack: Stack):
    names = {p["name"] for p in stack.client("submitter").get("/v1/pipelines").json()}
    assert {"document_intake", "pricing", "constructs", "approvals"} <= names


def test_user_graph_runs_interrupts_and_is_approved(stack: Stack):
    sub, rev = stack.client("submitter"), stack.client("reviewer")
    started = sub.post("/v1/pipelines/approvals/runs",
                       json={"input": {"topic": "launch"}, "metadata": {"team": "a"}})
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    run = wait_for(sub, run_id, {"awaiting_approval"})
    assert run["pending_approval"]["payload"]["question"] == "publish?"
    queue = rev.get("/v1/admin/approvals", params={"pipeline": "approvals"}).json()
    assert run_id in {a["run_id"] for a in queue}
    first = rev.post(f"/v1/admin/approvals/{run_id}/decision",
                     json={"decision": "approve", "note": "ship it"})
    assert first.status_code == 200, first.text
    run = wait_for(sub, run_id, {"awaiting_approval"})
    assert run["pending_approval"]["payload"]["question"] == "really?"
    refused = rev.post(f"/v1/admin/approvals/{run_id}/decision", json={"decision": "revise"})
    # "revise" is no decision of this graph's (refused by the API, or by the workflow when
    # another pipeline takes it)
    assert refused.status_code == 422
    assert refused.json()["code"] in ("invalid_decision", "invalid_request")
    rev.post(f"/v1/admin/approvals/{run_id}/decision", json={"decision": "approve"})
    run = wait_for(sub, run_id, {"completed"})
    assert run["result"]["output"]["summary"] == "approve then approve"
    assert run["result"]["output"]["decisions"][0]["note"] == "ship it"
    events = sub.get(f"/v1/runs/{run_id}/events").json()["items"]
    kinds = [e["type"] for e in events]
    assert kinds.count("approval.decided") == 2 and kinds[-1] == "run.completed"
    nodes = [e["data"] for e in events if e["type"] == "node.completed"]
    assert {n["node"] for n in nodes} == {"two_questions", "finish"}
    assert all(n["attempt"] == 1 and n["duration_ms"] >= 0 for n in nodes)


def test_user_graph_constructs_complete_with_final_state(stack: Stack):
    sub = stack.client("submitter")
    run_id = sub.post("/v1/pipelines/constructs/runs",
                      json={"input": {"topic": "one two"}}).json()["run_id"]
    run = wait_for(sub, run_id, {"completed", "failed"})
    assert run["status"] == "completed", run
    assert sorted(set(run["result"]["output"]["results"])) == ["ONE", "TWO"]


def test_poison_node_fails_with_its_name_and_bad_input_is_refused(stack: Stack):
    sub = stack.client("submitter")
    run_id = sub.post("/v1/pipelines/poison/runs", json={"input": {"topic": "x"}}).json()["run_id"]
    run = wait_for(sub, run_id, {"failed"})
    assert run["error"]["code"] == "node_error" and run["error"]["node"] == "buggy"
    not_json = sub.post("/v1/pipelines/constructs/runs", content=b"{",
                        headers={"Content-Type": "application/json"})
    assert not_json.status_code == 422 and not_json.json()["code"] == "invalid_request"
    upload = sub.post("/v1/pipelines/constructs/runs", files={"file": ("a.txt", b"hello")})
    assert upload.status_code == 422 and upload.json()["code"] == "invalid_request"
    unknown = sub.post("/v1/pipelines/nope/runs", json={"input": {}})
    assert unknown.status_code == 404 and unknown.json()["code"] == "not_found"


def test_user_graph_interrupts_are_decided_in_the_console(stack: Stack):
    import re

    from tests.e2e.test_console_http import login

    sub = stack.client("submitter")
    run_id = sub.post("/v1/pipelines/approvals/runs",
                      json={"input": {"topic": "console"}}).json()["run_id"]
    http = login(stack)
    for question in ("publish?", "really?"):
        wait_for(sub, run_id, {"awaiting_approval"})
        page = http.get(f"/console/items/{run_id}")
        assert page.status_code == 200 and question in page.text
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        decided = http.post(f"/console/items/{run_id}/decision",
                            data={"csrf_token": csrf, "decision": "approve", "note": question})
        assert decided.status_code in (200, 303), decided.text
        if question == "publish?":
            deadline = time.monotonic() + 60
            while ((sub.get(f"/v1/runs/{run_id}").json().get("pending_approval") or {})
                   .get("payload") or {}).get("question") == "publish?":
                assert time.monotonic() < deadline
                time.sleep(0.3)
    run = wait_for(sub, run_id, {"completed"})
    assert run["result"]["output"]["summary"] == "approve then approve"
    assert [d["note"] for d in run["result"]["output"]["decisions"]] == ["publish?", "really?"]


def test_a_claim_checked_state_value_is_answered_whole(stack: Stack):
    """State keys over 256 KB travel by reference inside the run; the API answers the values."""
    sub = stack.client("submitter")
    run_id = sub.post("/v1/pipelines/big_state/runs",
                      json={"input": {"topic": "x"}}).json()["run_id"]
    run = wait_for(sub, run_id, {"completed", "failed"})
    assert run["status"] == "completed", run
    items = run["result"]["output"]["items"]
    assert isinstance(items, list) and len(items) == 3000 and items[0] == "x" * 1000
    assert run["result"]["output"]["summary"] == "3000 items, 3000000 chars"


def test_an_admin_decision_may_name_the_interrupt_it_answers(stack: Stack):
    sub, rev = stack.client("submitter"), stack.client("reviewer")
    run_id = sub.post("/v1/pipelines/approvals/runs",
                      json={"input": {"topic": "launch"}}).json()["run_id"]
    run = wait_for(sub, run_id, {"awaiting_approval"})
    first_id = run["pending_approval"]["payload"]["interrupt_id"]
    ok = rev.post(f"/v1/admin/approvals/{run_id}/decision",
                  json={"decision": "approve", "interrupt_id": first_id})
    assert ok.status_code == 200, ok.text
    run = wait_for(sub, run_id, {"awaiting_approval"})
    assert run["pending_approval"]["payload"]["interrupt_id"] != first_id
    stale = rev.post(f"/v1/admin/approvals/{run_id}/decision",
                     json={"decision": "approve", "interrupt_id": first_id})
    assert stale.status_code == 409 and stale.json()["code"] == "not_awaiting_approval"
