"""The official JavaScript client against the real stack (issue 26: "tests with real clients").

``tests/e2e/js/client.mjs`` drives ``@langchain/langgraph-sdk`` (npm, pinned in
``tests/e2e/js/package-lock.json``, installed by ``make setup``) with only the URL and
the key changed, through every Agent Server feature a UI built on it uses: an interrupt
and its resume, live tokens, live ``custom`` writes, subgraph streaming, a run's config,
context and breakpoints, a resume map answering parallel interrupts, the store (with
semantic search), crons and assistants. It prints what it saw; this test checks it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.timeout(300)

JS = Path(__file__).resolve().parent / "js"


def run_script(stack: Stack, script: str, packages: tuple[str, ...], *,
               timeout: float = 240) -> dict[str, Any]:
    """Run ``js/<script>`` with Node against the stack (admin key); the JSON it printed last.

    Fails the test with the install command when Node or one of ``packages`` is missing.
    """
    node = shutil.which("node")
    if node is None:
        pytest.fail(f"Node.js 20+ is needed for {script}: apt-get install nodejs npm, "
                    "then make setup")
    for package in packages:
        if not (JS / "node_modules" / package).is_dir():
            pytest.fail(f"{package} is not installed: run make setup (npm ci in {JS})")
    done = subprocess.run(
        [node, str(JS / script)], cwd=JS, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "OVERSEER_URL": stack.base_url, "OVERSEER_KEY": stack.tokens["admin"]},
        check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run_client(stack: Stack) -> dict[str, Any]:
    """``js/client.mjs``: the official JS client through every Agent Server feature."""
    return run_script(stack, "client.mjs", ("@langchain/langgraph-sdk",))


def test_the_javascript_client_works_unchanged(stack: Stack):
    seen = run_client(stack)
    errors = {k: v["error"] for k, v in seen.items() if isinstance(v, dict) and "error" in v}
    assert not errors, errors

    assert {"approvals", "chatty", "greeter"} <= set(seen["info"]["graphs"])  # type: ignore[index]
    hitl = seen["interrupt_and_resume"]
    assert hitl == {"question": "publish?", "summary": "yes then sure", "status": "idle",
                    "next": [], "history": hitl["history"]}  # type: ignore[index]
    assert hitl["history"] > 2  # type: ignore[index,operator]

    tokens = seen["tokens"]
    talk = [c for c in tokens["chunks"] if c["node"] == "talk"]  # type: ignore[index]
    assert len(talk) > 5  # token by token, as the model streamed
    assert "".join(c["content"] for c in talk) == \
        "Tokens arrive one by one while the node is still running"
    assert tokens["talk_update_at"] - talk[0]["at"] > 1000  # type: ignore[index,operator]

    live = seen["custom_and_subgraphs"]
    assert live["custom"] == [1, 2, 3]  # type: ignore[index]
    assert "updates|sub" in live["subgraph_events"]  # type: ignore[index,operator]

    options = seen["config_context_breakpoints"]
    assert options == {"greeted": "hello Js in es [user:js]",
                       "stopped": ["hello nobody in ? []"], "paused": "interrupted",
                       "rest": ["hello nobody in ? []", "middle after 1", "bye"]}

    parallel = seen["parallel_resume_map"]
    assert parallel["pending"] == 2 and parallel["summary"] == "x=js-x:,y=js-y:"  # type: ignore[index]
    assert parallel["left"] == [True]  # the newer answered first, the older still asks  # type: ignore[index]
    assert parallel["one_by_one"] == parallel["expected"]  # type: ignore[index]

    events = seen["events_mode"]  # LangChain's callback events, tokens among them
    assert events == {"first": "on_chain_start", "last": "on_chain_end",
                      "tokens": "Tokens arrive one by one while the node is still running",
                      "chat_model": True}

    store = seen["store"]
    assert store["value"] == {"text": "green tea with jasmine"}  # type: ignore[index]
    assert store["first"] == "tea" and store["gone"] is None  # type: ignore[index]
    assert ["alice", "js"] in store["spaces"]  # type: ignore[index,operator]

    crons = seen["crons"]
    assert crons["schedule"] == "0 9 * * 1" and crons["next_run_date"]  # type: ignore[index]
    assert crons["listed"] and crons["count"] >= 1 and crons["deleted"]  # type: ignore[index]

    assert seen["assistants"] == {"greeted": "hello Anke in nl []", "version": 2,
                                  "again": "hello Bram in nl []", "versions": [2, 1]}

    joined = seen["thread_stream"]
    assert joined["run_done"] and "values" in joined["events"]  # type: ignore[index,operator]

    assert seen["subgraph_state_time_travel"] == {  # a pause inside a subgraph; an edited past
        "task_ns": "editor_desk", "nested_next": ["review_post"],
        "inner_values": {"topic": "tides", "draft": "post about tides"},
        "picked": {"values": {"draft": "post about tides"}, "next": ["editor_desk"]},
        "seen_tail": [4, 9, 10, 11]}
