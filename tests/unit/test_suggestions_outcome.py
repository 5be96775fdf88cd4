"""Review suggestions (document_intake's own table and route) are readable, and a reviewer
who approves another value than the proposed one is recorded as ``overridden``, not ``approved``."""

from __future__ import annotations

import uuid

import pytest

from activities.document_intake.api import list_suggestions as suggestions
from overseer.access import Principal
from overseer.store.events import (
    APPROVAL_DECIDED,
    APPROVAL_REQUESTED,
    REVIEW_SUGGESTED,
    RUN_SUBMITTED,
    NewEvent,
    append_events,
)


async def _suggested_then_decided(pool, decided_updates: dict[str, str], decision: str) -> str:
    run_id = str(uuid.uuid4())
    async with pool.acquire() as conn:
        await append_events(conn, [
            NewEvent(run_id=run_id, key="run.submitted", type=RUN_SUBMITTED,
                     data={"pipeline": "document_intake", "workflow_id": f"d-{run_id}",
                           "submitted_by": "alice"}),
            NewEvent(run_id=run_id, key="review.suggested:1", type=REVIEW_SUGGESTED, data={
                "suggestion_id": str(uuid.uuid5(uuid.UUID(run_id), "s1")),
                "current_values": {"grade": None}, "proposed_updates": {"grade": "9"},
                "evidence": {"grade": {"page": 1, "snippet": "Grade: 9"}}, "strength": 0.7,
                "strategy": "llm:fake", "auto_applied": False, "quote_verified": {"grade": True},
                "suggestions": {"school": "Elm"}, "notes": {"school": "quote not found"}}),
            NewEvent(run_id=run_id, key="approval.requested:1", type=APPROVAL_REQUESTED,
                     data={"pipeline": "document_intake", "payload": {}}),
            NewEvent(run_id=run_id, key="approval.decided:1", type=APPROVAL_DECIDED,
                     data={"decision": decision, "updates": decided_updates,
                           "decided_by": "rita"}),
        ])
    return run_id


@pytest.mark.parametrize(("updates", "decision", "status"), [
    ({"grade": "9"}, "approve", "approved"),
    ({"grade": "10"}, "approve", "overridden"),
    ({}, "reject", "rejected"),
])
async def test_the_suggestion_records_what_the_reviewer_did(db, updates, decision, status):
    run_id = await _suggested_then_decided(db, updates, decision)
    answer = await suggestions(run_id, Principal(subject="root", role="admin"), db)
    [item] = answer["items"]
    assert item["status"] == status
    assert item["proposed_updates"] == {"grade": "9"} and item["resolved_by"] == "rita"
    assert item["suggestions"] == {"school": "Elm"}  # unverified: shown, never applied
    assert item["quote_verified"] == {"grade": True}
