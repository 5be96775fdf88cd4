"""The review console's HTTP contract without a browser: sessions, CSRF, redirects, page images."""

from __future__ import annotations

import io
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from services.api.console import session as sessions
from tests import corpus
from tests.e2e.conftest import EXAMPLES, Stack

pytestmark = pytest.mark.e2e


def login(stack: Stack, role: str = "reviewer", next_path: str = "/console/queue") -> httpx.Client:
    """An httpx client holding a console session (logged in through the form)."""
    http = httpx.Client(base_url=stack.base_url, timeout=30)
    form = http.get("/console/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
    assert token, form.text
    res = http.post("/console/login", data={"token": stack.tokens[role], "csrf_token": token.group(1),
                                            "next": next_path})
    assert res.status_code == 303, res.text
    return http


def csrf_of(http: httpx.Client, path: str = "/console/queue") -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', http.get(path).text)
    assert match
    return match.group(1)


def wait_for(stack: Stack, run_id: str, statuses: set[str], timeout: float = 120) -> dict[str, Any]:
    client = stack.client("admin")
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
        if body.get("status") in statuses:
            return body
        assert time.monotonic() < deadline, f"run {run_id} stuck in {body.get('status')}"
        time.sleep(0.2)


def submit(stack: Stack, name: str, data: bytes, content_type: str) -> str:
    res = stack.client("submitter").post("/v1/submissions", files={"file": (name, data, content_type)})
    assert res.status_code == 202, res.text
    return str(res.json()["run_id"])


@pytest.fixture(scope="module")
def pdf_run(stack: Stack) -> str:
    """A finished run over a one-page PDF."""
    run_id = submit(stack, "clean.pdf", (EXAMPLES / "clean_typed_form.pdf").read_bytes(), "application/pdf")
    wait_for(stack, run_id, {"completed", "awaiting_approval", "failed"})
    return run_id


def test_pages_carry_security_headers_and_the_session_cookie_its_flags(stack: Stack):
    http = login(stack)
    cookie = next(c for c in http.cookies.jar if c.name == sessions.COOKIE)
    assert cookie.path == "/console" and cookie.has_nonstandard_attr("HttpOnly")
    page = http.get("/console/queue")
    assert page.status_code == 200
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe" not in csp
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-store"
    set_cookie = http.post("/console/login").headers.get("set-cookie", "")  # a fresh login form
    assert "samesite=strict" in set_cookie.lower() and "httponly" in set_cookie.lower()


def test_tampered_or_expired_sessions_go_back_to_login(stack: Stack):
    http = login(stack)
    value = http.cookies.get(sessions.COOKIE, path="/console")
    body, _, mac = value.partition(".")
    payload = json.loads(sessions._unb64(body))
    forged = sessions._b64(json.dumps({**payload, "role": "admin"}).encode()) + "." + mac
    for cookie in (forged, value[:-2] + "xx", "garbage"):
        res = httpx.get(f"{stack.base_url}/console/queue", cookies={sessions.COOKIE: cookie})
        assert res.status_code == 303 and res.headers["location"].startswith("/console/login")
    secret = (Path(stack.env["OVERSEER_DATA_DIR"]) / "console-secret").read_bytes().strip()
    expired = sessions._sign(secret, {**payload, "exp": int(time.time()) - 1})
    res = httpx.get(f"{stack.base_url}/console/queue", cookies={sessions.COOKIE: expired})
    assert res.status_code == 303
    fresh = sessions._sign(secret, {**payload, "exp": int(time.time()) + 60})
    assert httpx.get(f"{stack.base_url}/console/queue", cookies={sessions.COOKIE: fresh}).status_code == 200
    unknown_token = sessions._sign(secret, {**payload, "fp": "0" * 32})
    assert httpx.get(f"{stack.base_url}/console/queue",
                     cookies={sessions.COOKIE: unknown_token}).status_code == 303


def test_login_needs_its_form_token_and_never_redirects_off_site(stack: Stack):
    bare = httpx.post(f"{stack.base_url}/console/login", data={"token": stack.tokens["reviewer"]})
    assert bare.status_code == 403 and sessions.COOKIE not in bare.cookies
    def redirect_after_login(target: str) -> str:
        with httpx.Client(base_url=stack.base_url) as http:
            form = http.get("/console/login")
            token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
            assert token
            res = http.post("/console/login", data={"token": stack.tokens["admin"],
                                                    "csrf_token": token.group(1), "next": target})
            assert res.status_code == 303, res.text
            return str(res.headers["location"])

    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example", "/v1/runs",
                   "/console/login"):
        assert redirect_after_login(target) == "/console/queue", target
    assert redirect_after_login("/console/stats?hours=24") == "/console/stats?hours=24"


def test_logout_and_actions_need_the_csrf_token(stack: Stack):
    run_id = submit(stack, "f.txt", corpus.render_text(corpus.make_entry(70, drop=["grade"])), "text/plain")
    assert wait_for(stack, run_id, {"awaiting_approval", "completed"})["status"] == "awaiting_approval"
    http = login(stack)
    for action in ("claim", "release", "reassign", "decision"):
        res = http.post(f"/console/items/{run_id}/{action}", data={"decision": "reject"})
        assert res.status_code == 403, (action, res.text)
    assert http.post("/console/logout").status_code == 403
    token = csrf_of(http)
    claimed = http.post(f"/console/items/{run_id}/claim",
                        headers={"X-CSRF-Token": token, "HX-Request": "true"})
    assert claimed.status_code == 200 and 'id="claimed-by"' in claimed.text  # htmx gets the panel
    other = login(stack, role="admin")
    reassigned = other.post(f"/console/items/{run_id}/reassign",
                            data={"csrf_token": csrf_of(other), "assignee": "", "group": ""})
    assert reassigned.status_code == 422 and "name a reviewer" in reassigned.text
    assert http.post("/console/logout", data={"csrf_token": token}).status_code == 303
    assert http.get("/console/queue").status_code == 303
    assert wait_for(stack, run_id, {"awaiting_approval"})["status"] == "awaiting_approval"


def test_page_images_are_for_reviewers_and_size_capped(stack: Stack, pdf_run: str):
    url = f"{stack.base_url}/console/items/{pdf_run}/pages/1.png"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"Authorization": f"Bearer {stack.tokens['submitter']}"}).status_code == 403
    res = httpx.get(url, headers={"Authorization": f"Bearer {stack.tokens['reviewer']}"})
    assert res.status_code == 200 and res.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(res.content))
    assert max(image.size) <= 1600 and min(image.size) > 100
    http = login(stack)
    assert http.get(f"/console/items/{pdf_run}/pages/1.png").status_code == 200
    assert http.get(f"/console/items/{pdf_run}/pages/2.png").status_code == 404
    assert http.get(f"/console/items/{uuid.uuid4()}/pages/1.png").status_code == 404

    scan = submit(stack, "scan.png", (EXAMPLES / "degraded_scan_missing_grade.png").read_bytes(), "image/png")
    png = http.get(f"/console/items/{scan}/pages/1.png")
    assert png.status_code == 200 and max(Image.open(io.BytesIO(png.content)).size) <= 1600
    text = submit(stack, "f.txt", corpus.render_text(corpus.make_entry(71)), "text/plain")
    assert http.get(f"/console/items/{text}/pages/1.png").status_code == 415


def test_unknown_items_render_an_html_404(stack: Stack):
    http = login(stack)
    for run_id in (str(uuid.uuid4()), "not-a-uuid"):
        res = http.get(f"/console/items/{run_id}")
        assert res.status_code == 404 and "text/html" in res.headers["content-type"]
        assert 'id="page-error"' in res.text
    assert http.get("/console").headers["location"] == "/console/queue"
    assert stack.client("admin").get(f"/v1/runs/{uuid.uuid4()}").json()["code"] == "not_found"


def test_templates_escape_stored_record_values_proposals_and_evidence():
    from services.api.routes.console.render import templates

    xss = "<script>alert(1)</script>"
    evidence = {"page_number": 1, "snippet": xss, "label": xss, "method": xss, "score": 0.9}
    fields = [{"name": "student_name", "label": xss, "required": True, "current": xss,
               "proposed": xss, "proposed_evidence": evidence, "evidence": evidence,
               "missing": False, "invalid": xss, "value": xss}]
    html = templates.get_template("_fields.html").render(
        fields=fields, payload_kind="review", error_fields={"student_name": xss})
    assert "<script>" not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 9


def test_a_reviewer_answers_an_unknown_interrupt_with_json_and_the_graph_gets_it(stack: Stack):
    """A graph's own interrupt (not a form the console knows) is answered with a JSON ``resume``
    that ``interrupt()`` returns as written (issue 26 item 0); bad JSON is refused inline."""
    started = stack.client("submitter").post("/v1/pipelines/publish_review/runs",
                                             json={"input": {"topic": "console"}})
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    wait_for(stack, run_id, {"awaiting_approval"})
    http = login(stack)
    page = http.get(f"/console/items/{run_id}")
    assert 'name="resume"' in page.text and "publish?" in page.text
    token = csrf_of(http, f"/console/items/{run_id}")
    bad = http.post(f"/console/items/{run_id}/decision",
                    data={"csrf_token": token, "decision": "approve", "resume": "{publish: yes"})
    assert bad.status_code == 422
    assert "the answer is not valid JSON" in bad.text and "{publish: yes" in bad.text
    assert wait_for(stack, run_id, {"awaiting_approval"})["status"] == "awaiting_approval"
    ok = http.post(f"/console/items/{run_id}/decision",
                   data={"csrf_token": token, "decision": "approve", "note": "fine",
                         "resume": '{"publish": true, "note": "from the console"}'})
    assert ok.status_code == 303, ok.text
    run = wait_for(stack, run_id, {"completed", "failed"})
    assert run["status"] == "completed", run
    assert run["result"]["output"]["published"] is True
    assert run["result"]["output"]["reviewer_note"] == "from the console"


def test_parallel_interrupts_are_separate_items_in_the_console(stack: Stack):
    """Each of a run's parallel interrupts is its own queue row and page; claiming and deciding
    one leaves the other as it was, and the next item after a decision is the run's other one."""
    started = stack.client("submitter").post("/v1/pipelines/parallel_approvals/runs",
                                             json={"input": {"topic": "left right"}})
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    deadline = time.monotonic() + 60
    while len(stack.client("admin").get(f"/v1/runs/{run_id}").json()["pending_approvals"]) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    pending = stack.client("admin").get(f"/v1/runs/{run_id}").json()["pending_approvals"]
    ids = {a["payload"]["item"]: a["interrupt_id"] for a in pending}
    http = login(stack)
    queue = http.get("/console/queue", params={"pipeline": "parallel_approvals"}).text
    rows = set(re.findall(rf'data-run-id="{run_id}" data-interrupt-id="([0-9a-f]+)"', queue))
    assert rows == set(ids.values())

    page = http.get(f"/console/items/{run_id}", params={"interrupt": ids["right"]})
    assert page.status_code == 200 and "right" in page.text
    assert f'name="interrupt_id" value="{ids["right"]}"' in page.text
    assert 'id="siblings"' in page.text and f"interrupt={ids['left']}" in page.text
    token = csrf_of(http, f"/console/items/{run_id}?interrupt={ids['right']}")
    claimed = http.post(f"/console/items/{run_id}/claim",
                        data={"csrf_token": token, "interrupt_id": ids["right"]})
    assert claimed.status_code == 303, claimed.text
    views = {a["interrupt_id"]: a for a in
             stack.client("admin").get(f"/v1/runs/{run_id}").json()["pending_approvals"]}
    assert views[ids["right"]]["assigned_to"] == "rita"
    assert views[ids["left"]]["assigned_to"] is None

    decided = http.post(f"/console/items/{run_id}/decision",
                        data={"csrf_token": token, "decision": "approve", "note": "r",
                              "interrupt_id": ids["right"], "status": "pending",
                              "pipeline": "parallel_approvals"})
    assert decided.status_code == 303, decided.text
    assert f"interrupt={ids['left']}" in decided.headers["location"]  # the run's other one
    assert f"/console/items/{run_id}" in decided.headers["location"]
    deadline = time.monotonic() + 60
    while True:
        left = stack.client("admin").get(f"/v1/runs/{run_id}").json()["pending_approvals"]
        if [a["interrupt_id"] for a in left] == [ids["left"]]:
            break
        assert time.monotonic() < deadline, left
        time.sleep(0.2)
    http.post(f"/console/items/{run_id}/decision",
              data={"csrf_token": token, "decision": "reject", "note": "l",
                    "interrupt_id": ids["left"]})
    run = wait_for(stack, run_id, {"completed", "failed"})
    assert run["result"]["output"]["summary"] == "left=reject:l,right=approve:r"
