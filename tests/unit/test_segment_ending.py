"""A run's ending as the workflow and the last segment both compute it (overseer.runtime.segment_ending)."""

from __future__ import annotations

from overseer.runtime.segment_ending import ending_snapshot, run_ending
from overseer.store.events import RUN_COMPLETED, RUN_FAILED


def test_the_graph_names_its_own_status_else_the_last_decision_does():
    assert (run_ending({"status": "rejected", "outcome": "duplicate"}, "approve", None).status,
            run_ending({"status": "rejected", "outcome": "duplicate"}, "approve", None).outcome) \
        == ("rejected", "duplicate")
    assert run_ending({"x": 1}, "approve", None).outcome == "approved"
    assert run_ending({"x": 1}, "escalate", None).outcome == "escalate"
    plain = run_ending({"x": 1}, None, None)
    assert (plain.status, plain.outcome) == ("completed", "completed")
    assert plain.data == {"status": "completed", "outcome": "completed",
                          "snapshot": {"output": {"x": 1}, "outcome": "completed"}}


def test_the_result_hook_names_the_outcome_and_is_the_snapshot():
    ending = run_ending({"total": 3}, "approve", lambda v: {"outcome": "priced", "total": v["total"]})
    assert (ending.status, ending.outcome) == ("completed", "priced")
    assert ending.data["snapshot"] == {"outcome": "priced", "total": 3}
    assert ending.result == {"outcome": "priced", "total": 3}


def test_a_run_denied_at_its_budget_is_rejected():
    ending = run_ending({"x": 1}, "approve", None, denied=True)
    assert (ending.status, ending.outcome) == ("rejected", "budget_denied")
    assert ending.data["snapshot"] == {"output": {"x": 1}, "outcome": "budget_denied"}


def test_the_thread_is_handed_its_state_with_the_end_marked_and_counted():
    state = {"values": {"x": 1}, "status": "running", "published": 4,
             "marks": [{"offset": 1, "event": "interrupt"}], "decided": True,
             "decision_note": None}
    snap = ending_snapshot(state, RUN_COMPLETED)
    assert snap["marks"] == [{"offset": 1, "event": "interrupt"}, {"offset": 4, "event": "end"}]
    assert (snap["published"], snap["closed"], snap["cancelled"]) == (5, True, False)
    assert snap["values"] == {"x": 1} and state["published"] == 4  # the state is not changed
    assert ending_snapshot(state, RUN_FAILED)["marks"][-1] == {"offset": 4, "event": "error"}
