"""The console answers LangChain's and Agent Inbox's HITL requests as their graphs expect (issue 26).

``mail_agent`` is LangChain's ``create_agent`` with ``HumanInTheLoopMiddleware`` (its
interrupt lists the tool calls to review, answered with ``{"decisions": [...]}``);
``inbox_reply`` interrupts with Agent Inbox's ``[HumanInterrupt]`` and reads the
``HumanResponse``. A reviewer sees each tool call with the choices its request allows
and answers with radio buttons, edited arguments and a message; the graph gets the answer
in its own shape, so it ends as plain LangGraph ends with the same answer.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from langgraph_sdk import get_client

from tests.e2e.conftest import USER_GRAPHS, Stack
from tests.e2e.test_console_http import csrf_of, login, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
QUESTION = {"messages": [{"role": "user", "content": "Mail Alice the Q3 numbers"}]}


def reference_app(graph: str) -> Any:
    from overseer.registry import builder_of, load_langgraph_json

    return builder_of(load_langgraph_json(USER_GRAPHS)[graph].graph).compile(
        checkpointer=InMemorySaver())


async def test_a_langchain_agents_tool_call_is_edited_in_the_console(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    tid = (await client.threads.create())["thread_id"]
    paused = await client.runs.wait(tid, "mail_agent", input=QUESTION)
    assert paused["__interrupt__"][0]["value"]["action_requests"][0]["name"] == "send_email"
    run_id = (await client.runs.list(tid))[0]["run_id"]

    http = login(stack)
    page = http.get(f"/console/items/{run_id}").text
    assert "send_email" in page and 'name="choice_0"' in page
    assert all(f'value="{kind}"' in page for kind in ("approve", "edit", "reject", "respond"))
    assert 'id="reject-form"' not in page  # Overseer's own reject would not be a decision
    token = csrf_of(http, f"/console/items/{run_id}")
    bad = http.post(f"/console/items/{run_id}/decision", data={
        "csrf_token": token, "decision": "approve", "hitl": "langchain",
        "choice_0": "edit", "args_0": "{to: bob"})
    assert bad.status_code == 422 and "not valid JSON" in bad.text
    edited = '{"to": "bob@example.com", "subject": "Q3"}'
    ok = http.post(f"/console/items/{run_id}/decision", data={
        "csrf_token": token, "decision": "approve", "hitl": "langchain",
        "choice_0": "edit", "args_0": edited, "message_0": ""})
    assert ok.status_code == 303, ok.text
    run = wait_for(stack, run_id, {"completed", "failed"})
    assert run["status"] == "completed", run

    app, ref = reference_app("mail_agent"), {"configurable": {"thread_id": "ref"}}
    await app.ainvoke(QUESTION, ref)
    want = await app.ainvoke(Command(resume={"decisions": [{"type": "edit", "edited_action": {
        "name": "send_email", "args": {"to": "bob@example.com", "subject": "Q3"}}}]}), ref)
    got = (await client.threads.get_state(tid))["values"]["messages"]
    assert [m["type"] for m in got] == [m.type for m in want["messages"]]
    for text in (got[-1]["content"], want["messages"][-1].content):  # the edit ran, noted as such
        assert "a human reviewer replaced this tool call" in text
        assert text.endswith("sent 'Q3' to bob@example.com")


async def test_an_agent_inbox_request_is_answered_with_a_human_response(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "inbox_reply", input={"to": "carol@example.com"})
    run_id = (await client.runs.list(tid))[0]["run_id"]
    http = login(stack)
    page = http.get(f"/console/items/{run_id}").text
    assert "Reply to carol@example.com?" in page and "send_reply" in page
    token = csrf_of(http, f"/console/items/{run_id}")
    ok = http.post(f"/console/items/{run_id}/decision", data={
        "csrf_token": token, "decision": "approve", "hitl": "inbox",
        "choice_0": "response", "message_0": "call her instead"})
    assert ok.status_code == 303, ok.text
    assert wait_for(stack, run_id, {"completed", "failed"})["status"] == "completed"
    state = await client.threads.get_state(tid)
    assert state["values"]["outcome"] == "noted: call her instead"
