"""SIGKILL the worker while a due_diligence run is inside clause extraction (issue 13).

The approach of ``tests/e2e/test_crash_recovery.py``: the real API and worker run as child
processes (``stack``); the test watches the run's event log and the workflow's pending
activities until the run's segment is inside clause extraction, kills that worker with
SIGKILL, starts a fresh one and waits for the run to finish. The segment runs again on the
new worker from LangGraph's last checkpoint (the subgraph's own included), so the clause
nodes that had finished do not run again and the rest finish on the second attempt. It then
compares the run with an uninterrupted run of the same agreement on the same stack.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.testing import WorkflowEnvironment

from activities.due_diligence.ingest import ingest_text
from activities.due_diligence.samples import agreement_keys, license_text
from tests.e2e.conftest import Stack
from tests.e2e.test_user_graph_api import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CLAUSE_NODES = ("initial_search", "validate_clauses", "retry_search", "deduplicate",
                "score_confidence")
BUNDLE_CHARS = 1_500_000
"""Size of the test's agreement bundle: large enough that one clause-search activity runs
for a second or more on this machine, so the kill lands inside it, not between nodes."""


@pytest.fixture(scope="module")
def agreement_bundle() -> bytes:
    """Real licence agreements (``licensedcode-data``) as one plain-text document.

    Each agreement is a page (form feed), the longest first, until ``BUNDLE_CHARS``: a
    master agreement with its schedules, as far as the pipeline can tell.
    """
    pytest.importorskip("licensedcode")
    texts = sorted((license_text(k) for k in agreement_keys()), key=len, reverse=True)
    pages: list[str] = []
    for text in texts:
        if sum(map(len, pages)) >= BUNDLE_CHARS:
            break
        pages.append(text.strip())
    return "\f".join(pages).encode("utf-8")


def _start(sub: httpx.Client, data: bytes) -> str:
    res = sub.post("/v1/pipelines/due_diligence/runs",
                   files={"file": ("bundle.txt", data, "text/plain")},
                   data={"metadata": '{"require_signoff": false}'})
    assert res.status_code == 202, res.text
    return str(res.json()["run_id"])


def _events(sub: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    return list(sub.get(f"/v1/runs/{run_id}/events").json()["items"])


def _completed_nodes(events: list[dict[str, Any]]) -> list[str]:
    return [str(e["data"].get("node")) for e in events if e["type"] == "node.completed"]


def _kinds(events: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    return Counter((e["type"], str(e["data"].get("node"))) for e in events)


def _clauses(run: dict[str, Any]) -> list[tuple[Any, ...]]:
    findings = run["result"]["output"]["clauses"]["findings"]
    return sorted((f["clause_type"], f["status"], f.get("start"), f.get("end"), f.get("quote"),
                   f.get("confidence")) for f in findings)


async def test_worker_killed_during_clause_extraction_loses_and_doubles_nothing(
        stack: Stack, dev_server: WorkflowEnvironment, agreement_bundle: bytes) -> None:
    sub = stack.client("submitter")

    reference_id = _start(sub, agreement_bundle)
    reference = wait_for(sub, reference_id, {"completed", "failed"}, timeout=300)
    assert reference["status"] == "completed", reference.get("error")
    reference_events = _events(sub, reference_id)
    reference_nodes = Counter(_completed_nodes(reference_events))
    assert reference_nodes["clause_extraction/initial_search"] == 1

    run_id = _start(sub, agreement_bundle)
    handle = dev_server.client.get_workflow_handle(f"due_diligence-{run_id}")
    deadline = time.monotonic() + 240
    victim_node = None
    while victim_node is None:
        assert time.monotonic() < deadline, "no clause-extraction node was seen running"
        done = _completed_nodes(_events(sub, run_id))
        desc = await handle.describe()
        started = [a for a in desc.raw_description.pending_activities
                   if a.activity_type.name == "run_segment"
                   and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED]
        if "ingestion" in done and "clause_extraction" not in done and started:
            # The node running now is the first clause node not yet completed, in graph order.
            victim_node = next((f"clause_extraction/{n}" for n in CLAUSE_NODES
                                if f"clause_extraction/{n}" not in done), None)
            break
        assert "clause_extraction" not in done, "clause extraction finished before the kill"
        time.sleep(0.05)

    stack.replace_workers()

    run = wait_for(sub, run_id, {"completed", "failed"}, timeout=300)
    assert run["status"] == "completed", run.get("error")
    events = _events(sub, run_id)

    # The kill landed inside clause extraction: one of its nodes needed a second attempt.
    retried = [e["data"]["node"] for e in events if e["type"] == "node.completed"
               and str(e["data"]["node"]).startswith("clause_extraction/")
               and e["data"].get("attempt", 1) >= 2]
    assert retried, f"no clause node was retried (killed during {victim_node})"

    # Event ids are uuid5(run, key): unique ids are unique keys, and the same kinds of event,
    # node for node, as the uninterrupted run (a re-run node would add a node.completed).
    ids = [e["event_id"] for e in events]
    assert len(ids) == len(set(ids))
    assert Counter(_completed_nodes(events)) == reference_nodes
    assert _kinds(events) == _kinds(reference_events)
    assert [e["type"] for e in events].count("run.completed") == 1
    assert run["result"]["progress"]["label"] == "5 of 5 agents complete"

    assert _clauses(run) == _clauses(reference)
    # The ingestion result is claim-checked (megabytes): slice the same ingestion of the text.
    text = ingest_text(agreement_bundle.decode("utf-8"))["text"]
    found = [f for f in run["result"]["output"]["clauses"]["findings"] if f["status"] == "found"]
    assert found and all(text[f["start"]:f["end"]] == f["quote"] for f in found)
