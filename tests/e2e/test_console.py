"""The review console in a real headless Chromium (Debian ``chromium``, driven by Playwright).

A reviewer logs in with a token, opens an escalated scan, sees the page image next to the
fields, makes an edit the workflow refuses (the 422 shows inline), fixes it, approves, and
sees the run complete. Screenshots go to ``test-artifacts/console/``.

The browser is the system one (``/usr/bin/chromium``); ``playwright install`` is never run.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, expect

from tests import corpus
from tests.e2e.browser import CHROMIUM, chromium, strict_page
from tests.e2e.conftest import EXAMPLES, Stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
XSS = "<script>alert(1)</script>"


def item_url(prefix: str) -> re.Pattern[str]:
    """An item page's URL: the run's page, with the interrupt its approval answers when it has one."""
    return re.compile(re.escape(prefix) + r"(\?interrupt=[0-9a-f]+)?$")


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    """Debian's Chromium, headless, launched once for this module.

    Playwright's async API, on the session's event loop: its sync API would hold a running
    loop of its own and break the session's async fixtures (Postgres pool, Temporal).
    """
    async with chromium(ARTIFACTS) as launched:
        yield launched


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    """A fresh browser context (no cookies) per test; fails the test on any JS dialog or error."""
    async with strict_page(browser, 1400, 1000) as p:
        yield p


async def shot(page: Page, name: str) -> None:
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def login(page: Page, stack: Stack, role: str = "reviewer", next_path: str = "") -> str:
    """Log in through the form; return the subject the console shows."""
    await page.goto(f"{stack.base_url}/console/login{next_path}")
    await page.fill("#token", stack.tokens[role])
    await page.click("#login-submit")
    await expect(page.locator("#whoami")).to_be_visible()
    return (await page.locator("#whoami").inner_text()).split(" (")[0].strip()


def submit(stack: Stack, filename: str, data: bytes, content_type: str) -> str:
    res = stack.client("submitter").post("/v1/submissions",
                                         files={"file": (filename, data, content_type)})
    assert res.status_code == 202, res.text
    return str(res.json()["run_id"])


async def wait_for(stack: Stack, run_id: str, statuses: set[str], timeout: float = 180) -> dict[str, Any]:
    client = stack.client("admin")
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
        if body.get("status") in statuses:
            return body
        assert time.monotonic() < deadline, f"run {run_id} stuck in {body.get('status')}"
        await asyncio.sleep(0.2)


async def escalated_text_form(stack: Stack, seed: int, filename: str = "form.txt") -> str:
    data = corpus.render_text(corpus.make_entry(seed, drop=["grade"]))
    run_id = submit(stack, filename, data, "text/plain")
    run = await wait_for(stack, run_id, {"awaiting_approval", "completed", "failed"})
    assert run["status"] == "awaiting_approval", run
    return run_id


async def test_chromium_is_debian_system_browser(browser: Browser):
    assert shutil.which("chromium") == CHROMIUM
    assert browser.version  # launched, not faked


async def test_login_refuses_bad_tokens_and_submitters(page: Page, stack: Stack):
    await page.goto(f"{stack.base_url}/console/queue")
    await expect(page).to_have_url(f"{stack.base_url}/console/login?next=%2Fconsole%2Fqueue")
    await page.fill("#token", "not-a-token")
    await page.click("#login-submit")
    await expect(page.locator("#login-error")).to_have_text("Unknown token.")
    await page.fill("#token", stack.tokens["submitter"])
    await page.click("#login-submit")
    await expect(page.locator("#login-error")).to_contain_text("for reviewers and admins")
    await shot(page, "login-refused")

    await login(page, stack)
    cookie = next(c for c in await page.context.cookies() if c["name"] == "overseer_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/console"
    assert stack.tokens["reviewer"] not in cookie["value"]
    await page.click("#logout")
    await expect(page).to_have_url(f"{stack.base_url}/console/login")
    await page.goto(f"{stack.base_url}/console/queue")
    await expect(page.locator("#token")).to_be_visible()


async def test_forms_without_the_csrf_token_are_refused(page: Page, stack: Stack):
    run_id = await escalated_text_form(stack, 41)
    await login(page, stack)
    cookies = {c["name"]: c["value"] for c in await page.context.cookies()}
    async with httpx.AsyncClient(base_url=stack.base_url, cookies=cookies) as http:
        forged = await http.post(f"/console/items/{run_id}/decision", data={"decision": "reject"})
        assert forged.status_code == 403
        wrong = await http.post(f"/console/items/{run_id}/decision",
                                data={"decision": "reject", "csrf_token": "guess"})
        assert wrong.status_code == 403
    assert (await wait_for(stack, run_id, {"awaiting_approval"}))["status"] == "awaiting_approval"


async def test_reviewer_edits_a_field_approves_and_sees_the_run_complete(page: Page, stack: Stack):
    run_id = submit(stack, "degraded_scan_missing_grade.png",
                    (EXAMPLES / "degraded_scan_missing_grade.png").read_bytes(), "image/png")
    run = await wait_for(stack, run_id, {"awaiting_approval", "completed", "failed"})
    assert run["status"] == "awaiting_approval", run

    reviewer = await login(page, stack, next_path=f"?next=/console/items/{run_id}")
    await expect(page).to_have_url(f"{stack.base_url}/console/items/{run_id}")
    # The page image is rendered from the stored PNG and really loads.
    image = page.locator("#page-1")
    await expect(image).to_be_visible()
    await expect(image).to_have_js_property("complete", True)
    width = await image.evaluate("img => img.naturalWidth")
    assert 0 < width <= 1600
    await expect(page.locator("tr[data-field='grade'] .badge")).to_contain_text("missing")
    await expect(page.locator("#temporal-link")).to_have_attribute(
        "href", f"http://127.0.0.1:8233/namespaces/default/workflows/document_intake-{run_id}")
    await expect(page.locator("#trace-id")).to_have_text(run["trace_id"])
    await expect(page.locator("#timeline li[data-type='approval.requested']")).to_have_count(1)
    await shot(page, "item-escalated-scan")

    # Claim with the keyboard (c), then edit (e) the field that needs attention.
    await page.keyboard.press("c")
    await expect(page.locator("#claimed-by")).to_contain_text(reviewer)
    await expect(page.locator("#claim-toggle")).to_contain_text("Release")
    await page.keyboard.press("e")
    await expect(page.locator("#field-grade")).to_be_focused()
    await page.keyboard.type("seventeen-ish")
    await page.keyboard.press("Escape")
    await page.keyboard.press("a")
    # The workflow's validator refuses the edit; the page says why, next to the field.
    await expect(page.locator("#decision-error")).to_contain_text("invalid_field_edits")
    await expect(page.locator("#error-grade")).to_be_visible()
    await expect(page.locator("#field-grade")).to_have_value("seventeen-ish")
    await expect(page.locator("#run-status")).to_have_text("awaiting_approval")
    await shot(page, "item-invalid-edit")

    await page.fill("#field-grade", "8")
    await page.fill("#approve-note", "checked with the school")
    await page.click("#approve")
    await expect(page.locator("#done")).to_be_visible()
    await expect(page.locator("#done-status")).to_have_text("completed")
    await shot(page, "item-approved")

    final = await wait_for(stack, run_id, {"completed"}, timeout=30)
    assert final["result"]["record"]["grade"] == "8"
    assert final["result"]["outcome"] == "approved"
    events = stack.client("admin").get(f"/v1/runs/{run_id}/events").json()["items"]
    decided = [e for e in events if e["type"] == "approval.decided"]
    assert decided[0]["data"]["decided_by"] == reviewer
    assert decided[0]["data"]["updates"] == {"grade": "8"}
    assert decided[0]["data"]["note"] == "checked with the school"

    await page.goto(f"{stack.base_url}/console/items/{run_id}")
    await expect(page.locator("#run-status")).to_have_text("completed")
    await expect(page.locator("#decision-summary")).to_contain_text("approve")
    await expect(page.locator("#timeline li[data-type='run.completed']")).to_have_count(1)
    await expect(page.locator("#approve")).to_have_count(0)


XSS_FORM = f"""What My Father Means to Me - Official Entry

Student Name: {XSS}          City: Evanston
Grade:                                        School: Roosevelt Middle School
Teacher Name: Ms. Baker                       Phone Number: (773) 555-0164
Father's Name: Carlos Kowalski                E-mail: olivia65@example.com

Your Essay (please type or print)

My father taught me to read. P.S. {XSS} <img src=x onerror=alert(2)>
"""


async def test_user_values_are_escaped(page: Page, stack: Stack):
    filename = "<img src=x onerror=alert(3)>.txt"
    run_id = submit(stack, filename, XSS_FORM.encode(), "text/plain")
    run = await wait_for(stack, run_id, {"awaiting_approval", "completed", "failed"})
    assert run["status"] == "awaiting_approval", run

    await login(page, stack)
    await page.goto(f"{stack.base_url}/console/items/{run_id}")
    # document text, the evidence snippet the City value was read from, the filename
    await expect(page.locator("#doc-text-1")).to_contain_text(XSS)
    await expect(page.locator("tr[data-field='city'] .evidence")).to_contain_text(XSS)
    await expect(page.locator("#doc-meta")).to_contain_text(filename)
    # a field value typed by the reviewer, refused by the workflow and shown again
    await page.fill("#field-student_name", XSS)
    await page.fill("#field-grade", "7")
    await page.click("#approve")
    await expect(page.locator("#decision-error")).to_contain_text("invalid_field_edits")
    await expect(page.locator("#field-student_name")).to_have_value(XSS)
    await expect(page.locator("#error-student_name")).to_be_visible()
    await shot(page, "item-xss-field-value")
    # a note
    await page.fill("#reject-note", f"spam {XSS}")
    await page.keyboard.press("Enter")
    await expect(page.locator("#done")).to_contain_text("reject")
    await page.goto(f"{stack.base_url}/console/items/{run_id}")
    await expect(page.locator("#decision-summary")).to_contain_text(f"spam {XSS}")
    await shot(page, "item-xss-escaped")
    html = await page.content()
    assert XSS not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert await page.locator("script:not([src])").count() == 0
    assert await page.locator("img[src='x']").count() == 0
    await page.goto(f"{stack.base_url}/console/queue?status=decided")
    assert await page.locator("img[src='x']").count() == 0


async def test_queue_filters_and_keyboard_navigation(page: Page, stack: Stack):
    first = await escalated_text_form(stack, 44)
    second = await escalated_text_form(stack, 45)
    reviewer = await login(page, stack)
    await page.goto(f"{stack.base_url}/console/queue")
    rows = page.locator("tr.row")
    await expect(rows.first).to_be_visible()
    ids = [await rows.nth(i).get_attribute("data-run-id") for i in range(await rows.count())]
    assert first in ids and second in ids and ids.index(first) < ids.index(second)  # oldest first
    await shot(page, "queue")

    # Filters swap the table in place (htmx) and keep the URL shareable.
    await page.select_option("#f-pipeline", "pricing")
    await expect(page.locator("#queue-empty")).to_be_visible()
    await expect(page).to_have_url(f"{stack.base_url}/console/queue?status=pending&pipeline=pricing"
                             "&min_age_seconds=&sla_state=&assignee=")
    await page.select_option("#f-pipeline", "document_intake")
    await expect(page.locator(f"tr.row[data-run-id='{first}']")).to_be_visible()
    await page.select_option("#f-sla", "breached")
    await expect(page.locator(f"tr.row[data-run-id='{first}']")).to_have_count(0)
    await page.select_option("#f-sla", "ok")
    await expect(page.locator(f"tr.row[data-run-id='{first}']")).to_be_visible()
    await page.select_option("#f-age", "86400")
    await expect(page.locator(f"tr.row[data-run-id='{first}']")).to_have_count(0)
    await page.select_option("#f-age", "")
    await expect(page.locator(f"tr.row[data-run-id='{first}']")).to_be_visible()

    # Claim the second item, then filter by assignee "me" and "unassigned".
    await page.goto(f"{stack.base_url}/console/items/{second}")
    await page.click("#claim-toggle")
    await expect(page.locator("#claimed-by")).to_contain_text(reviewer)
    await page.goto(f"{stack.base_url}/console/queue?assignee=me")
    await expect(page.locator(f"tr.row[data-run-id='{second}']")).to_be_visible()
    await expect(page.locator(f"tr.row[data-run-id='{first}']")).to_have_count(0)
    mine = page.locator("tr.row")
    for i in range(await mine.count()):  # earlier tests may have left claims of this reviewer
        await expect(mine.nth(i)).to_contain_text(reviewer)
    await shot(page, "queue-assignee-me")
    await page.fill("#f-assignee", "unassigned")
    await page.press("#f-assignee", "Enter")
    await expect(page.locator(f"tr.row[data-run-id='{second}']")).to_have_count(0)
    await expect(page.locator(f"tr.row[data-run-id='{first}']")).to_be_visible()

    # j/k move the selection, Enter opens; j/k on an item page walk the queue.
    await page.goto(f"{stack.base_url}/console/queue")
    await expect(page.locator("tr.row.selected")).to_have_count(1)
    index = ids.index(first)
    for _ in range(index):
        await page.keyboard.press("j")
    await expect(page.locator("tr.row.selected")).to_have_attribute("data-run-id", first)
    await page.keyboard.press("Enter")
    await expect(page).to_have_url(item_url(f"{stack.base_url}/console/items/{first}"))
    await page.keyboard.press("j")
    await expect(page).to_have_url(item_url(f"{stack.base_url}/console/items/{ids[index + 1]}"))
    await page.keyboard.press("k")
    await expect(page).to_have_url(item_url(f"{stack.base_url}/console/items/{first}"))
    await page.keyboard.press("u")
    await expect(page).to_have_url(f"{stack.base_url}/console/queue")


async def test_stats_page_shows_the_event_log_figures(page: Page, stack: Stack):
    await login(page, stack, role="admin")
    await page.goto(f"{stack.base_url}/console/stats")
    api = stack.client("admin").get("/v1/admin/stats").json()
    await expect(page.locator("#t-submitted")).to_have_text(str(api["totals"]["submitted"]))
    await expect(page.locator("#outcomes tr[data-pipeline='document_intake']")).to_be_visible()
    reviewers = [r["reviewer"] for r in api["reviewers"]]
    assert reviewers, api
    await expect(page.locator(f"#reviewers tr[data-reviewer='{reviewers[0]}']")).to_be_visible()
    await expect(page.locator("#reasons tr[data-reason='missing_grade']")).to_be_visible()
    await shot(page, "stats")
