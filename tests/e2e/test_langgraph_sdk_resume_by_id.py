"""``Command(resume={interrupt_id: value})`` answers the interrupt it names, or is refused (issue 12).

The ``parallel_approvals`` graph pauses on two interrupts at once (one per branch). The
gate asks them oldest id first; a resume map naming the other one, an answered one, or
several at once is refused with a stable code, and nothing is decided.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.timeout(180)


def sdk(stack: Stack, role: str) -> Any:
    """The SDK's async client with only the URL and key changed."""
    return get_client(url=stack.base_url, api_key=stack.tokens[role])


async def test_a_resume_map_answers_the_interrupt_it_names(stack: Stack):
    client, reviewer = sdk(stack, "submitter"), sdk(stack, "reviewer")
    tid = (await client.threads.create())["thread_id"]
    paused = await client.runs.wait(tid, "parallel_approvals", input={"topic": "a b"})
    ids = sorted(i["id"] for i in paused["__interrupt__"])
    assert len(ids) == 2
    items = {i["id"]: i["value"]["item"] for i in paused["__interrupt__"]}
    current, other = ids

    with pytest.raises(httpx.HTTPStatusError) as several:
        await reviewer.runs.wait(tid, "parallel_approvals",
                                 command={"resume": {i: {"decision": "x"} for i in ids}})
    assert several.value.response.status_code == 422
    assert several.value.response.json()["code"] == "resume_one_interrupt_at_a_time"
    with pytest.raises(httpx.HTTPStatusError) as not_asked:  # pending, but not the one the gate asks
        await reviewer.runs.wait(tid, "parallel_approvals",
                                 command={"resume": {other: {"decision": "x"}}})
    assert not_asked.value.response.status_code == 409
    assert not_asked.value.response.json()["code"] == "not_awaiting_approval"

    nxt = await reviewer.runs.wait(tid, "parallel_approvals",
                                   command={"resume": {current: {"decision": "yes"}}})
    assert [i["id"] for i in nxt["__interrupt__"]] == [other]
    with pytest.raises(httpx.HTTPStatusError) as stale:  # already answered
        await reviewer.runs.wait(tid, "parallel_approvals",
                                 command={"resume": {current: {"decision": "again"}}})
    assert stale.value.response.status_code == 409
    assert stale.value.response.json()["code"] == "not_awaiting_approval"
    done = await reviewer.runs.wait(tid, "parallel_approvals",
                                    command={"resume": {other: {"decision": "no"}}})
    assert done["summary"] == ",".join(sorted([f"{items[current]}=yes:", f"{items[other]}=no:"]))
    statuses = [r["status"] for r in await client.runs.list(tid)]
    assert statuses == ["success", "interrupted", "interrupted"]
