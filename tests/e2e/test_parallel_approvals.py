"""Parallel interrupts are parallel approvals: each its own payload, claim and decision (issue 26).

The ``parallel_approvals`` graph pauses on one interrupt per ``Send`` branch. Through
``/v1`` each is its own approval: listed in the queue and in ``GET /v1/runs/{id}``
(``pending_approvals``), claimed by different reviewers side by side, decided one by one
(the run goes on with each answer, as LangGraph does with a resume map naming some of the
interrupts), and the final state equals plain LangGraph's for the same answers.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from tests.e2e.conftest import USER_GRAPHS, Stack
from tests.e2e.test_user_graph_api import wait_for

pytestmark = pytest.mark.timeout(180)


def pending(client: httpx.Client, run_id: str, count: int,
            timeout: float = 60) -> list[dict[str, Any]]:
    """The run's pending approvals once there are ``count`` of them."""
    deadline = time.monotonic() + timeout
    while True:
        run = client.get(f"/v1/runs/{run_id}").json()
        if run["status"] == "awaiting_approval" and len(run["pending_approvals"]) == count:
            return list(run["pending_approvals"])
        assert time.monotonic() < deadline, run
        time.sleep(0.2)


def reference_summary(answers: dict[str, Any]) -> str:
    """Plain LangGraph's summary when each item's interrupt gets ``answers[item]``."""
    from overseer.registry import builder_of, load_langgraph_json

    app = builder_of(load_langgraph_json(USER_GRAPHS)["parallel_approvals"].graph).compile(
        checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "reference"}}
    import asyncio

    async def run() -> str:
        first = await app.ainvoke({"topic": " ".join(sorted(answers))}, config)
        done = await app.ainvoke(Command(resume={
            i.id: answers[i.value["item"]] for i in first["__interrupt__"]}), config)
        return str(done["summary"])
    return asyncio.run(run())


def test_two_reviewers_work_parallel_interrupts_side_by_side(stack: Stack):
    sub, rita, sam = stack.client("submitter"), stack.client("reviewer"), stack.client("reviewer2")
    run_id = sub.post("/v1/pipelines/parallel_approvals/runs",
                      json={"input": {"topic": "a b c"}}).json()["run_id"]
    approvals = pending(sub, run_id, 3)
    by_item = {a["payload"]["item"]: a for a in approvals}
    assert sorted(by_item) == ["a", "b", "c"]
    assert len({a["interrupt_id"] for a in approvals}) == 3
    assert len({a["approval_key"] for a in approvals}) == 3
    queue = [a for a in rita.get("/v1/admin/approvals",
                                 params={"pipeline": "parallel_approvals"}).json()
             if a["run_id"] == run_id]
    assert sorted(a["interrupt_id"] for a in queue) == sorted(by_item[i]["interrupt_id"]
                                                             for i in "abc")

    a_id, b_id, c_id = (by_item[i]["interrupt_id"] for i in "abc")
    claimed = rita.post(f"/v1/admin/approvals/{run_id}/claim", json={"interrupt_id": a_id})
    assert claimed.status_code == 200, claimed.text
    assert claimed.json()["assigned_to"] == "rita" and claimed.json()["interrupt_id"] == a_id
    claimed = sam.post(f"/v1/admin/approvals/{run_id}/claim", json={"interrupt_id": b_id})
    assert claimed.status_code == 200, claimed.text
    assert claimed.json()["assigned_to"] == "sam" and claimed.json()["interrupt_id"] == b_id
    views = {a["interrupt_id"]: a for a in pending(sub, run_id, 3)}
    assert (views[a_id]["assigned_to"], views[b_id]["assigned_to"], views[c_id]["assigned_to"]) \
        == ("rita", "sam", None)

    taken = sam.post(f"/v1/admin/approvals/{run_id}/decision",  # rita holds a
                     json={"decision": "approve", "interrupt_id": a_id})
    assert taken.status_code == 409 and taken.json()["code"] == "claimed_by_other"
    assert taken.json()["details"]["claimed_by"] == "rita"

    ok = sam.post(f"/v1/admin/approvals/{run_id}/decision",
                  json={"decision": "reject", "note": "sb", "interrupt_id": b_id})
    assert ok.status_code == 200, ok.text
    assert ok.json()["status"] == "awaiting_approval"  # a and c still wait
    left = pending(sub, run_id, 2)
    assert sorted(a["interrupt_id"] for a in left) == sorted([a_id, c_id])
    assert {a["interrupt_id"]: a["assigned_to"] for a in left}[a_id] == "rita"  # claim kept
    again = sam.post(f"/v1/admin/approvals/{run_id}/decision",
                     json={"decision": "approve", "interrupt_id": b_id})
    assert again.status_code == 409 and again.json()["code"] == "not_awaiting_approval"
    assert "already answered" in again.json()["message"]

    ok = rita.post(f"/v1/admin/approvals/{run_id}/decision",
                   json={"decision": "approve", "note": "ra", "interrupt_id": a_id})
    assert ok.status_code == 200, ok.text
    pending(sub, run_id, 1)
    ok = rita.post(f"/v1/admin/approvals/{run_id}/decision",  # names none: the one left
                   json={"decision": "approve", "resume": {"decision": "maybe", "note": "as sent"}})
    assert ok.status_code == 200, ok.text
    run = wait_for(sub, run_id, {"completed"})

    want = reference_summary({"a": {"decision": "approve", "note": "ra"},
                              "b": {"decision": "reject", "note": "sb"},
                              "c": {"decision": "maybe", "note": "as sent"}})
    assert run["result"]["output"]["summary"] == want == \
        "a=approve:ra,b=reject:sb,c=maybe:as sent"
    assert run["pending_approvals"] == []

    decided = {a["interrupt_id"]: a for a in rita.get(
        "/v1/admin/approvals", params={"status": "decided", "pipeline": "parallel_approvals",
                                       "limit": 500}).json() if a["run_id"] == run_id}
    assert {i: (d["decision"], d["decided_by"]) for i, d in decided.items()} == {
        a_id: ("approve", "rita"), b_id: ("reject", "sam"), c_id: ("approve", "rita")}
    events = sub.get(f"/v1/runs/{run_id}/events").json()["items"]
    for kind in ("approval.requested", "approval.decided"):
        keys = [e["data"]["approval_key"] for e in events if e["type"] == kind]
        assert sorted(keys) == sorted(a["approval_key"] for a in approvals), kind


def test_claims_name_their_approval_and_an_unnamed_decision_takes_the_oldest(stack: Stack):
    sub, rita = stack.client("submitter"), stack.client("reviewer")
    run_id = sub.post("/v1/pipelines/parallel_approvals/runs",
                      json={"input": {"topic": "x y"}}).json()["run_id"]
    approvals = pending(sub, run_id, 2)
    by_item = {a["payload"]["item"]: a["interrupt_id"] for a in approvals}
    ok = rita.post(f"/v1/admin/approvals/{run_id}/claim", json={"interrupt_id": by_item["y"]})
    assert ok.status_code == 200 and ok.json()["assigned_to"] == "rita", ok.text
    one = rita.get(f"/v1/admin/approvals/{run_id}", params={"interrupt_id": by_item["y"]})
    assert one.json()["assigned_to"] == "rita" and one.json()["payload"]["item"] == "y"
    released = rita.post(f"/v1/admin/approvals/{run_id}/release",
                         json={"interrupt_id": by_item["y"]})
    assert released.status_code == 200 and released.json()["assigned_to"] is None
    unknown = rita.post(f"/v1/admin/approvals/{run_id}/claim", json={"interrupt_id": "f" * 32})
    assert unknown.status_code == 409 and unknown.json()["code"] == "not_awaiting_approval"
    bare = rita.post(f"/v1/admin/approvals/{run_id}/claim")  # no body: the oldest pending
    assert bare.status_code == 200 and bare.json()["interrupt_id"] == approvals[0]["interrupt_id"]

    for n, note in ((1, "first"), (0, "second")):
        ok = rita.post(f"/v1/admin/approvals/{run_id}/decision",
                       json={"decision": "approve", "note": note})
        assert ok.status_code == 200, ok.text
        if n:
            pending(sub, run_id, n)
    run = wait_for(sub, run_id, {"completed"})
    oldest = approvals[0]["payload"]["item"]
    other = ({"x", "y"} - {oldest}).pop()
    assert run["result"]["output"]["summary"] == ",".join(sorted(
        [f"{oldest}=approve:first", f"{other}=approve:second"]))
