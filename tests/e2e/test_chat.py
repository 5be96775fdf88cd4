"""The pricing chat over HTTP against the embedded stack: fast path, SSE, approvals, resume, restart."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.e2e

COMPOSITE = "Propose Q1 pricing updates ensuring hierarchy; summarize"
README = Path(__file__).resolve().parents[2] / "README.md"


def parse_sse(text: str) -> list[dict[str, Any]]:
    """SSE text → ``[{"id": int | None, "data": dict}]`` (comments dropped)."""
    out = []
    for block in text.split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith(":")]
        if not lines:
            continue
        fields = dict(ln.split(": ", 1) for ln in lines)
        out.append({"id": int(fields["id"]) if "id" in fields else None,
                    "data": json.loads(fields["data"]), "raw": block})
    return out


def read_until(client: httpx.Client, method: str, url: str, stop, **kwargs: Any
               ) -> tuple[list[dict[str, Any]], list[tuple[float, str]]]:
    """Stream an SSE response until ``stop(event)``; events and every raw line with its time."""
    events: list[dict[str, Any]] = []
    lines: list[tuple[float, str]] = []
    buffer = ""
    with client.stream(method, url, **kwargs) as res:
        assert res.status_code == 200, res.read()
        assert res.headers["content-type"].startswith("text/event-stream")
        for chunk in res.iter_text():
            buffer += chunk
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                lines.append((time.monotonic(), block))
                parsed = parse_sse(block + "\n\n")
                if parsed:
                    events.extend(parsed)
                    if stop(parsed[-1]["data"]):
                        return events, lines
    return events, lines


def test_health_tools_and_models(stack: Stack):
    health = httpx.get(f"{stack.base_url}/api/v1/chat/health")
    assert health.status_code == 200
    body = health.json()
    assert set(body) == {"status", "model", "tools_count", "time"}
    assert body["status"] == "ok" and body["model"] == "rules" and body["tools_count"] == 6
    tools = stack.client("submitter").get("/api/v1/chat/tools").json()
    assert {t["name"] for t in tools} >= {"optimize_price", "check_policy", "explain_decision",
                                          "sensitivity_analysis", "compose_report"}
    assert all(set(t) == {"name", "description"} for t in tools)
    models = stack.client("submitter").get("/api/v1/chat/models").json()
    assert models["default"] == "rules" and models["llm_enabled"] is False
    assert httpx.get(f"{stack.base_url}/api/v1/chat/tools").status_code == 401


def test_pricing_runs_start_at_the_chat_route_which_the_catalogue_names(stack: Stack):
    with stack.client("submitter") as http:
        refused = http.post("/v1/pipelines/pricing/runs", json={"input": {"message": "hi"}})
        listed = {p["name"]: p for p in http.get("/v1/pipelines").json()}
    assert refused.status_code == 422
    assert refused.json()["details"]["submit_path"] == "/api/v1/chat"
    assert "/api/v1/chat" in str(listed["pricing"])


def test_simple_ask_takes_the_fast_path_in_well_under_a_second(stack: Stack):
    sub = stack.client("submitter")
    sub.post("/api/v1/chat", json={"message": "What is the optimal price for ASTR 4?"})  # warm-up
    started = time.monotonic()
    res = sub.post("/api/v1/chat", json={"message": "What is the optimal price for TB006-campus?"})
    elapsed = time.monotonic() - started
    assert res.status_code == 200, res.text
    final = res.json()
    assert elapsed < 0.5, elapsed
    assert final["done"] is True and final["tools_used"] == ["optimize_price"]
    assert final["model"] == "rules" and final["strategy"] == "rules"
    assert "TB006-campus" in final["message"] and "$" in final["message"]
    assert "thread_id" not in final  # no workflow was started
    runs = sub.get("/v1/runs", params={"pipeline": "pricing"}).json()["items"]
    fast = [r for r in runs if r["result"] and r["result"].get("path") == "single_agent"]
    assert fast and fast[0]["status"] == "completed"
    run_id = fast[0]["run_id"]
    assert stack.client("reviewer").post(f"/v1/admin/approvals/{run_id}/decision",
                                         json={"decision": "approve"}).status_code == 409
    assert sub.get(f"/api/v1/chat/threads/{run_id}/stream").status_code == 404


def test_fast_path_sse_matches_the_golden_shape(stack: Stack):
    res = stack.client("submitter").post("/api/v1/chat", params={"stream": "true"},
                                         json={"message": "What is the optimal price for TB006-campus?"})
    assert res.status_code == 200
    events = parse_sse(res.text)
    assert events[0]["raw"] == 'id: 1\ndata: {"tool_call":"optimize_price","done":false,"seq":1}'
    assert re.fullmatch(r'id: 2\ndata: \{"token":"The ","done":false,"seq":2\}', events[1]["raw"])
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))
    final = events[-1]["data"]
    assert list(final)[:3] == ["message", "tools_used", "done"]
    assert final["message"] == "".join(e["data"]["token"] for e in events[1:-1])
    assert all(list(e["data"]) == ["token", "done", "seq"] for e in events[1:-1])


def test_a_session_follow_up_explains_the_previous_answer(stack: Stack):
    sub = stack.client("submitter")
    session = f"s-{time.monotonic_ns()}"
    first = sub.post("/api/v1/chat", json={"message": "What is the optimal price for TB006-campus?",
                                           "session_id": session}).json()
    assert "TB006-campus" in first["message"]
    follow = sub.post("/api/v1/chat", json={"message": "Why was that price recommended?",
                                            "session_id": session})
    assert follow.status_code == 200, follow.text
    body = follow.json()
    assert body["tools_used"] == ["explain_decision", "compose_report"]
    assert "TB006-campus" in body["message"] and "segment demand response" in body["message"]
    idem = {"Idempotency-Key": f"k-{session}"}
    one = sub.post("/api/v1/chat", json={"message": "Why was that price recommended?",
                                         "session_id": session}, headers=idem).json()
    two = sub.post("/api/v1/chat", json={"message": "Why was that price recommended?",
                                         "session_id": session}, headers=idem).json()
    assert one["thread_id"] == two["thread_id"] and one == two
    clash = sub.post("/api/v1/chat", json={"message": "Something else entirely, explain"},
                     headers=idem)
    assert clash.status_code == 409 and clash.json()["code"] == "conflict"


def test_composite_ask_streams_pauses_approves_and_resumes_without_duplicates(stack: Stack):
    sub, rev = stack.client("submitter"), stack.client("reviewer")
    first, _ = read_until(sub, "POST", "/api/v1/chat", lambda e: e.get("awaiting_approval"),
                          params={"stream": "true"}, json={"message": COMPOSITE})
    head = first[0]["data"]
    thread = head["thread_id"]
    assert head["node"] == "router" and head["plan"] == [
        "optimizer", "policy", "explainer", "sensitivity", "reporter", "approval"]
    calls = [e["data"]["tool_call"] for e in first if "tool_call" in e["data"]]
    assert calls == ["optimize_price", "check_policy", "explain_decision", "sensitivity_analysis",
                     "compose_report", "request_approval"]
    policy = next(e["data"] for e in first if e["data"].get("node") == "policy_checker_worker"
                  and "violations" in e["data"])
    assert policy["violations_total"] >= 10
    violation = policy["violations"][0]
    assert {"type", "item", "current", "suggest"} <= set(violation)
    assert violation["type"] in ("hierarchy_inversion", "tier_gap_below_threshold")
    lower = next(iter(violation["suggest"]))
    assert violation["suggest"][lower] < violation["current"][lower]
    assert [e["id"] for e in first] == list(range(1, len(first) + 1))

    assert sub.post("/api/v1/chat/approve", json={"thread_id": thread}).status_code == 403
    final = rev.post("/api/v1/chat/approve", json={"thread_id": thread, "note": "ok for Q1"})
    assert final.status_code == 200, final.text
    body = final.json()
    assert body["done"] is True and body["thread_id"] == thread
    assert body["tools_used"][-1] == "request_approval" and "Approved by rita" in body["message"]

    again = rev.post("/api/v1/chat/approve", json={"thread_id": thread})
    assert again.status_code == 409 and again.json()["code"] == "not_awaiting_approval"

    last_seen = first[-1]["id"]
    rest, _ = read_until(sub, "GET", f"/api/v1/chat/threads/{thread}/stream",
                         lambda e: e.get("done"), headers={"Last-Event-ID": str(last_seen)})
    assert rest[0]["id"] == last_seen + 1
    assert rest[-1]["data"] == {**body}
    everything = first + rest
    assert [e["id"] for e in everything] == list(range(1, len(everything) + 1))
    tokens = "".join(e["data"].get("token", "") for e in everything)
    assert tokens == body["message"]

    run = sub.get(f"/v1/runs/{thread}").json()
    assert run["status"] == "completed" and run["result"]["outcome"] == "approved"
    assert run["result"]["approved_prices"]
    types = [e["type"] for e in sub.get(f"/v1/runs/{thread}/events").json()["items"]]
    assert types[0] == "run.submitted" and types[-1] == "run.completed"
    assert "approval.requested" in types and "approval.decided" in types


def test_admin_api_rejects_and_edits_are_policy_checked(stack: Stack):
    sub, rev = stack.client("submitter"), stack.client("reviewer")
    paused = sub.post("/api/v1/chat", params={"plan": "true"},
                      json={"message": "Propose updates for ASTR 4 black holes"})
    assert paused.status_code == 202, paused.text
    event = paused.json()
    thread = event["thread_id"]
    assert event["awaiting_approval"] is True and event["approval"]["change_count"] >= 1
    queue = rev.get("/v1/admin/approvals", params={"status": "pending", "pipeline": "pricing"})
    item = next(a for a in queue.json() if a["run_id"] == thread)
    proposed = item["payload"]["proposed_prices"]
    item_id = next(iter(proposed))
    broken = rev.post(f"/v1/admin/approvals/{thread}/decision", json={
        "decision": "approve", "updates": {f"{item_id}.usm": str(proposed[item_id]["new"] + 5)}})
    assert broken.status_code == 422 and broken.json()["code"] == "invalid_field_edits"
    assert broken.json()["details"]["violations"][0]["type"] == "hierarchy_inversion"
    unknown = rev.post(f"/v1/admin/approvals/{thread}/decision", json={
        "decision": "approve", "updates": {"NOPE.new": "1"}})
    assert unknown.status_code == 422 and unknown.json()["details"]["errors"] == {
        "NOPE.new": "not_in_proposal"}
    done = rev.post(f"/v1/admin/approvals/{thread}/decision",
                    json={"decision": "reject", "note": "hold until Q2"})
    assert done.status_code == 200 and done.json()["status"] == "rejected"
    events, _ = read_until(sub, "GET", f"/api/v1/chat/threads/{thread}/stream",
                           lambda e: e.get("done"), headers={"Last-Event-ID": str(event["seq"])})
    assert events[-1]["data"]["outcome"] == "rejected"
    assert "Rejected by rita (hold until Q2)" in events[-1]["data"]["message"]


def test_cancel_stops_a_paused_plan(stack: Stack):
    sub = stack.client("submitter")
    paused = sub.post("/api/v1/chat", params={"plan": "true"},
                      json={"message": "Propose updates for budget items"}).json()
    other = stack.client("other").post("/api/v1/chat/cancel", json={"thread_id": paused["thread_id"]})
    assert other.status_code == 404
    res = sub.post("/api/v1/chat/cancel", json={"thread_id": paused["thread_id"]})
    assert res.status_code == 200, res.text
    assert res.json()["outcome"] == "cancelled" and res.json()["done"] is True
    assert sub.get(f"/v1/runs/{paused['thread_id']}").json()["status"] == "cancelled"
    again = sub.post("/api/v1/chat/cancel", json={"thread_id": paused["thread_id"]})
    assert again.status_code == 409


def test_keepalive_comments_only_after_interval_of_silence(stack: Stack):
    sub = stack.client("submitter")
    seen: list[tuple[float, str]] = []
    with sub.stream("POST", "/api/v1/chat", params={"stream": "true", "plan": "true",
                                                     "keepalive": "true", "interval": "0.3"},
                    json={"message": "Propose updates for premium online items"}) as res:
        buffer = ""
        paused_at = None
        for chunk in res.iter_text():
            buffer += chunk
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                seen.append((time.monotonic(), block))
                if '"awaiting_approval":true' in block:
                    paused_at = time.monotonic()
            after_pause = [b for t, b in seen if paused_at and t >= paused_at]
            if after_pause.count(": keepalive") >= 3:
                break
    keepalives = [i for i, (_, b) in enumerate(seen) if b == ": keepalive"]
    approval_index = next(i for i, (_, b) in enumerate(seen) if '"awaiting_approval":true' in b)
    assert sum(1 for i in keepalives if i > approval_index) >= 3  # the human is the slow step
    # Each keepalive follows `interval` of silence (exact timing: the unit test). Measured here
    # at the client, where a frame delayed in transit shortens the gap after it: use the median.
    gaps = sorted(seen[i][0] - seen[i - 1][0] for i in keepalives if i > 0)
    assert gaps[len(gaps) // 2] >= 0.25, gaps
    data = [b for _, b in seen if b != ": keepalive"]
    assert all(b.startswith("id: ") for b in data)
    thread = json.loads(data[0].split("data: ", 1)[1])["thread_id"]
    stack.client("reviewer").post("/api/v1/chat/cancel", json={"thread_id": thread})


@pytest.mark.slow
def test_paused_plan_resumes_by_thread_id_after_a_worker_restart(stack: Stack):
    sub, rev = stack.client("submitter"), stack.client("reviewer")
    paused = sub.post("/api/v1/chat", params={"plan": "true"},
                      json={"message": "Propose updates for TB044-online"}).json()
    assert paused["awaiting_approval"] is True
    stack.replace_workers()
    # The update waits until the new worker has started and replayed the run (slow on a busy box).
    final = rev.post("/api/v1/chat/approve", json={"thread_id": paused["thread_id"]}, timeout=180)
    assert final.status_code == 200, final.text
    assert final.json()["outcome"] == "approved"
    events = sub.get(f"/v1/runs/{paused['thread_id']}/events").json()["items"]
    ids = [e["event_id"] for e in events]
    assert len(ids) == len(set(ids))
    assert [e["type"] for e in events].count("approval.requested") == 1


def test_policy_check_endpoint(stack: Stack):
    sub = stack.client("submitter")
    res = sub.post("/api/v1/policy/check", json={
        "items": [{"item_id": "x", "prices": {"new": 100, "repair": 110}, "segment": "premium"}]})
    assert res.status_code == 200
    body = res.json()
    assert body["ok"] is False
    v = body["violations"][0]
    assert {k: v[k] for k in ("type", "item", "current", "suggest")} == {
        "type": "hierarchy_inversion", "item": "x", "current": {"new": 100.0, "repair": 110.0},
        "suggest": {"repair": 95.0}}
    catalog = sub.post("/api/v1/policy/check", json={"item_ids": ["TB001-online"]}).json()
    assert catalog["counts"]["hierarchy_inversion"] == 3
    bad = sub.post("/api/v1/policy/check", json={"items": [{"item_id": "x", "prices": {"gold": 1}}]})
    assert bad.status_code == 422 and set(bad.json()) == {"code", "message", "details"}


def test_readme_curl_examples_stream(stack: Stack):
    text = README.read_text()
    block = re.search(r"```bash\n(# Pricing.*?)```", text, re.S)
    assert block, "README has no Pricing curl example"
    simple, composite = [line for line in block.group(1).splitlines() if line.startswith("curl -N")][:2]

    def run(command: str, max_time: int) -> list[dict[str, Any]]:
        command = (command.replace("http://127.0.0.1:8000", stack.base_url)
                   .replace("$SUB", stack.tokens["submitter"]))
        out = subprocess.run(["bash", "-c", f"{command} --max-time {max_time}"],
                             capture_output=True, text=True, timeout=60)
        return parse_sse(out.stdout)

    events = run(simple, 30)
    assert events and events[0]["data"].get("tool_call") == "optimize_price"
    assert events[-1]["data"]["done"] is True
    events = run(composite, 4)
    assert events[0]["data"]["node"] == "router"
    assert any(e["data"].get("awaiting_approval") for e in events)
    stack.client("reviewer").post("/api/v1/chat/cancel",
                                  json={"thread_id": events[0]["data"]["thread_id"]})


def test_claimed_sign_off_is_fenced_like_any_approval_and_an_admin_may_override(stack: Stack):
    """Issue 11/17: the pricing sign-off answered 422 where approvals answer 409, and admins
    could not override a claim. One decision path now serves both."""
    sub, rev = stack.client("submitter"), stack.client("reviewer")
    paused = sub.post("/api/v1/chat", params={"plan": "true"},
                      json={"message": "Propose updates for ASTR 4 black holes"}).json()
    thread = paused["thread_id"]
    claimed = stack.client("reviewer2").post(f"/v1/admin/approvals/{thread}/claim")
    assert claimed.status_code == 200, claimed.text
    fenced = rev.post("/api/v1/chat/approve", json={"thread_id": thread})
    assert fenced.status_code == 409 and fenced.json()["code"] == "claimed_by_other"
    final = stack.client("admin").post("/api/v1/chat/approve",
                                       json={"thread_id": thread, "note": "override"})
    assert final.status_code == 200, final.text
    assert final.json()["outcome"] == "approved"
