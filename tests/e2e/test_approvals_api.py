"""The approval queue over HTTP: claims fence other reviewers, filters, stable refusal codes."""

from __future__ import annotations

import pytest

from tests import corpus
from tests.e2e.conftest import Stack
from tests.e2e.test_api import submit, wait_for_status

pytestmark = pytest.mark.e2e


def test_claim_release_reassign_and_decide_over_http(stack: Stack):
    sub, rita, sam = stack.client("submitter"), stack.client("reviewer"), stack.client("reviewer2")
    res = submit(sub, "f.txt", corpus.render_text([corpus.make_entry(111, drop=["grade"])]),
                 "text/plain")
    run_id = res.json()["run_id"]
    wait_for_status(sub, run_id, {"awaiting_approval"})

    unclaimed = rita.get("/v1/admin/approvals", params={"assignee": "none"}).json()
    assert run_id in {a["run_id"] for a in unclaimed}
    claimed = rita.post(f"/v1/admin/approvals/{run_id}/claim")
    assert claimed.status_code == 200, claimed.text
    assert claimed.json()["assigned_to"] == "rita"
    assert run_id in {a["run_id"] for a in
                      rita.get("/v1/admin/approvals", params={"assignee": "rita"}).json()}

    for path, body in (("claim", None), ("decision", {"decision": "reject"})):
        refused = sam.post(f"/v1/admin/approvals/{run_id}/{path}", json=body)
        assert refused.status_code == 409, refused.text
        assert refused.json()["code"] == "claimed_by_other"

    moved = rita.post(f"/v1/admin/approvals/{run_id}/reassign", json={"assignee": "sam"})
    assert moved.json()["assigned_to"] == "sam"
    assert rita.post(f"/v1/admin/approvals/{run_id}/reassign", json={}).status_code == 409
    released = sam.post(f"/v1/admin/approvals/{run_id}/release")
    assert released.json()["assigned_to"] is None

    one = rita.get(f"/v1/admin/approvals/{run_id}").json()
    assert one["status"] == "pending" and one["escalation_level"] == 0
    assert one["age_seconds"] >= 0

    ok = sam.post(f"/v1/admin/approvals/{run_id}/decision",
                  json={"decision": "approve", "updates": {"grade": "12"}})
    assert ok.status_code == 200, ok.text
    assert sam.post(f"/v1/admin/approvals/{run_id}/claim").json()["code"] == "not_awaiting_approval"
    decided = rita.get("/v1/admin/approvals", params={"status": "decided"}).json()
    mine = next(a for a in decided if a["run_id"] == run_id)
    assert mine["decided_by"] == "sam"
