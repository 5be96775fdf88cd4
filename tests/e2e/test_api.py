"""Over HTTP against the embedded stack: the README's examples and the API's error contract."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests import corpus
from tests.e2e.conftest import EXAMPLES, Stack

pytestmark = pytest.mark.e2e


def wait_for_status(client: httpx.Client, run_id: str, statuses: set[str],
                    timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(f"/v1/runs/{run_id}").json()
        if body.get("status") in statuses:
            return body
        assert time.monotonic() < deadline, f"run {run_id} stuck in {body.get('status')}"
        time.sleep(0.2)


def submit(client: httpx.Client, name: str, data: bytes, content_type: str,
           **headers: str) -> httpx.Response:
    return client.post("/v1/submissions", files={"file": (name, data, content_type)},
                       headers=headers)


def test_clean_typed_form_completes_with_correct_fields(stack: Stack):
    sub = stack.client("submitter")
    data = (EXAMPLES / "clean_typed_form.pdf").read_bytes()
    res = submit(sub, "clean_typed_form.pdf", data, "application/pdf")
    assert res.status_code == 202, res.text
    body = res.json()
    assert body["pipeline"] == "document_intake" and body["status"] == "running"
    run = wait_for_status(sub, body["run_id"], {"completed", "awaiting_approval", "failed"})
    assert run["status"] == "completed", run
    result = run["result"]
    assert result["outcome"] == "completed"
    assert result["strategy"] == "rules"
    assert result["text_source"] == "text_layer"
    assert not result["missing_fields"]
    for key in ("record", "confidence", "review_reason_codes", "tools_used", "tries",
                "ocr_confidence_avg"):
        assert key in result
    events = sub.get(f"/v1/runs/{body['run_id']}/events").json()["items"]
    assert [e["type"] for e in events][0] == "run.submitted"
    assert events[-1]["type"] == "run.completed"
    assert len({e["event_id"] for e in events}) == len(events)
    trace_ids = {e["trace_id"] for e in events}
    assert len(trace_ids) == 1, trace_ids  # one trace per run, API → workflow → activities
    assert run["trace_id"] in trace_ids and run["trace_id"] is not None


def test_degraded_scan_waits_for_approval_and_approving_completes(stack: Stack):
    sub, rev = stack.client("submitter"), stack.client("reviewer")
    data = (EXAMPLES / "degraded_scan_missing_grade.png").read_bytes()
    res = submit(sub, "scan.png", data, "image/png")
    assert res.status_code == 202, res.text
    run_id = res.json()["run_id"]
    run = wait_for_status(sub, run_id, {"awaiting_approval", "completed", "failed"}, timeout=180)
    assert run["status"] == "awaiting_approval", run
    pending = run["pending_approval"]
    assert "grade" in pending["payload"]["missing_fields"]
    queue = rev.get("/v1/admin/approvals", params={"status": "pending"}).json()
    assert run_id in {a["run_id"] for a in queue}

    refused = rev.post(f"/v1/admin/approvals/{run_id}/decision",
                       json={"decision": "approve", "updates": {"grade": "seventeen-ish"}})
    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_field_edits"

    ok = rev.post(f"/v1/admin/approvals/{run_id}/decision",
                  json={"decision": "approve", "updates": {"grade": "8"}, "note": "confirmed"})
    assert ok.status_code == 200, ok.text
    assert ok.json()["status"] == "completed"
    run = sub.get(f"/v1/runs/{run_id}").json()
    assert run["status"] == "completed"
    assert run["result"]["record"]["grade"] == "8"
    assert run["result"]["outcome"] == "approved"

    again = rev.post(f"/v1/admin/approvals/{run_id}/decision", json={"decision": "reject"})
    assert again.status_code == 409
    assert again.json()["code"] == "not_awaiting_approval"
    types = [e["type"] for e in sub.get(f"/v1/runs/{run_id}/events").json()["items"]]
    assert "approval.requested" in types and "approval.decided" in types


def test_corrupt_file_gets_422(stack: Stack):
    res = submit(stack.client("submitter"), "corrupt.pdf",
                 (EXAMPLES / "corrupt.pdf").read_bytes(), "application/pdf")
    assert res.status_code == 422
    body = res.json()
    assert body["code"] == "unreadable_document"
    assert set(body) == {"code", "message", "details"}


# Latin-1 text is decoded, and a real PNG named .pdf is read by its magic bytes: both are accepted.
ACCEPTED_SAMPLES = {"non_utf8_text", "png_named_pdf"}


@pytest.mark.parametrize("name", sorted(set(corpus.corrupt_samples()) - ACCEPTED_SAMPLES))
def test_hostile_samples_are_refused_with_a_clear_4xx(stack: Stack, name: str):
    data, filename = corpus.corrupt_samples()[name]
    res = submit(stack.client("submitter"), filename, data, "application/octet-stream")
    assert res.status_code in (415, 422), (name, res.status_code, res.text)
    assert res.json()["code"] in ("unsupported_media_type", "unreadable_document")


def test_latin1_text_is_accepted(stack: Stack):
    data, filename = corpus.corrupt_samples()["non_utf8_text"]
    res = submit(stack.client("submitter"), filename, data, "text/plain")
    assert res.status_code == 202, res.text


def test_idempotency_key_returns_the_same_run(stack: Stack):
    sub = stack.client("submitter")
    data = corpus.render_text([corpus.make_entry(61)])
    first = submit(sub, "a.txt", data, "text/plain", **{"Idempotency-Key": "k-61"})
    second = submit(sub, "a.txt", data, "text/plain", **{"Idempotency-Key": "k-61"})
    assert first.status_code == second.status_code == 202
    assert first.json()["run_id"] == second.json()["run_id"]
    other = submit(sub, "b.txt", corpus.render_text([corpus.make_entry(62)]), "text/plain",
                   **{"Idempotency-Key": "k-61"})
    assert other.status_code == 409


def test_auth_and_roles(stack: Stack):
    anon = httpx.Client(base_url=stack.base_url)
    assert anon.get("/v1/runs").status_code == 401
    assert anon.get("/v1/runs").json()["code"] == "unauthenticated"
    bad = httpx.Client(base_url=stack.base_url, headers={"Authorization": "Bearer nope"})
    assert bad.get("/v1/pipelines").status_code == 401
    sub = stack.client("submitter")
    res = submit(sub, "c.txt", corpus.render_text([corpus.make_entry(63)]), "text/plain")
    run_id = res.json()["run_id"]
    assert stack.client("other").get(f"/v1/runs/{run_id}").status_code == 404
    decided = sub.post(f"/v1/admin/approvals/{run_id}/decision", json={"decision": "approve"})
    assert decided.status_code == 403
    assert decided.json()["code"] == "forbidden"
    assert stack.client("reviewer").get(f"/v1/runs/{run_id}").status_code == 200


def test_errors_are_json_with_stable_codes(stack: Stack):
    admin = stack.client("admin")
    missing = admin.get("/v1/runs/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    assert admin.get("/v1/runs/not-a-uuid").json()["code"] == "not_found"
    gif = submit(stack.client("submitter"), "x.gif", b"GIF89a" + b"\0" * 64, "image/gif")
    assert gif.status_code == 415 and gif.json()["code"] == "unsupported_media_type"
    bad = admin.post("/v1/admin/approvals/00000000-0000-0000-0000-000000000000/decision",
                     json={"decision": "maybe"})
    assert bad.status_code == 422 and bad.json()["code"] == "invalid_request"
    big = httpx.Client(base_url=stack.base_url, timeout=30,
                       headers={"Authorization": f"Bearer {stack.tokens['submitter']}"})
    too_large = submit(big, "big.txt", b"a" * (20 * 1024 * 1024 + 10), "text/plain")
    assert too_large.status_code == 413 and too_large.json()["code"] == "payload_too_large"
    assert admin.get("/v1/pipelines").json()[0]["name"] == "document_intake"
    assert admin.get("/healthz").json()["status"] == "ok"
    assert admin.get("/readyz").json()["checks"] == {"postgres": "ok", "temporal": "ok"}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["linn.png", "c03-29.pdf"])
def test_real_scans_that_are_not_forms_never_auto_complete(stack: Stack, name: str):
    from tests.real_scans import real_scan_paths

    path = real_scan_paths()[name]
    sub = stack.client("submitter")
    kind = "application/pdf" if name.endswith(".pdf") else "image/png"
    res = submit(sub, name, path.read_bytes(), kind)
    assert res.status_code == 202, res.text
    run = wait_for_status(sub, res.json()["run_id"], {"completed", "awaiting_approval", "failed"},
                          timeout=240)
    assert run["status"] == "awaiting_approval", run["status"]
    payload = run["pending_approval"]["payload"]
    assert payload["missing_fields"]
    assert run["result"]["text_source"] in ("ocr", "text_layer", "mixed")
