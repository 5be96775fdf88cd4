"""The same interrupt gets the same answer from the admin API and from the official client (issue 26 item 0).

Through the real API and worker: LangGraph's prebuilt ReAct agent asks for a refund in
its tool and reads ``response["approved"]``. Approved with ``"resume": {"approved": true}``
through ``POST /v1/admin/approvals/{run_id}/decision`` it refunds; the same value sent
with ``Command(resume=...)`` from ``langgraph-sdk`` ends the same way; a reviewer who
approves with ``{"approved": false}`` gets a refusal, because the graph reads the value,
not the decision's kind.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.e2e.conftest import Stack
from tests.e2e.test_user_graph_api import wait_for

pytestmark = pytest.mark.timeout(180)

REFUND_INPUT = {"messages": [{"role": "user", "content": "please refund order 7"}]}


def last_message(output: dict[str, Any]) -> str:
    return str(output["messages"][-1]["content"])


def decide_through_admin_api(stack: Stack, resume: Any) -> dict[str, Any]:
    sub, rev = stack.client("submitter"), stack.client("reviewer")
    started = sub.post("/v1/pipelines/refund_agent/runs", json={"input": REFUND_INPUT})
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    run = wait_for(sub, run_id, {"awaiting_approval"})
    assert run["pending_approval"]["payload"]["action"] == "refund"
    decided = rev.post(f"/v1/admin/approvals/{run_id}/decision",
                       json={"decision": "approve", "resume": resume})
    assert decided.status_code == 200, decided.text
    run = wait_for(sub, run_id, {"completed", "failed"})
    assert run["status"] == "completed", run
    output: dict[str, Any] = run["result"]["output"]
    return output


async def test_admin_api_and_sdk_resume_give_interrupt_the_same_value(stack: Stack):
    approved = decide_through_admin_api(stack, {"approved": True})
    assert last_message(approved) == "Done: refund of 40 for order 7 approved"
    refused = decide_through_admin_api(stack, {"approved": False})
    assert last_message(refused) == "Done: refund of 40 for order 7 refused"

    sub = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    rev = get_client(url=stack.base_url, api_key=stack.tokens["reviewer"])
    thread = await sub.threads.create()
    paused = await sub.runs.wait(thread["thread_id"], "refund_agent", input=REFUND_INPUT)
    assert paused["__interrupt__"][0]["value"]["action"] == "refund"
    done = await rev.runs.wait(thread["thread_id"], "refund_agent",
                               command={"resume": {"approved": True}})
    assert [m["content"] for m in done["messages"]] == [
        m["content"] for m in approved["messages"]]
