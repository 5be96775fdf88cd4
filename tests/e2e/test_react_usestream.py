"""A page built on the SDK's React ``useStream``, in a real headless Chromium (issue 26).

``tests/e2e/react/`` is a small React app on ``useStream`` from
``@langchain/langgraph-sdk/react`` (npm, pinned in its ``package-lock.json``; ``make setup``
runs ``npm ci`` and ``npm run build`` into ``tests/e2e/react/dist/``). This test serves
``dist/`` from a static server on another port than the API (the browser calls the API
across origins, as a UI deployed on its own does), opens it in Debian's Chromium (as
``test_console.py`` does) with the API's URL, a key and a graph in the query string, types
a message and watches the reply's tokens appear while the node still runs; then starts a
graph that asks twice with ``interrupt()`` and answers both from the page. Screenshots go
to ``test-artifacts/react/``.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from playwright.async_api import Browser, Page, expect

from tests.e2e.browser import chromium, strict_page
from tests.e2e.conftest import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

APP = Path(__file__).resolve().parent / "react"
DIST = APP / "dist"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "react"
CHATTY_REPLY = "Tokens arrive one by one while the node is still running"
"""What ``chatty``'s ``talk`` node streams (``tests/graphs/user_graph/graph.py``)."""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        pass


@pytest.fixture(scope="module")
def page_server() -> Iterator[str]:
    """``dist/`` over HTTP on 127.0.0.1 (a random port) from a thread; its base URL."""
    if not (APP / "node_modules" / "@langchain" / "langgraph-sdk").is_dir():
        pytest.fail(f"the React page's packages are not installed: run make setup (npm ci in {APP})")
    if not (DIST / "index.html").is_file() or not (DIST / "app.js").is_file():
        pytest.fail(f"the React page is not built: run make setup (npm run build in {APP})")
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(_Quiet, directory=str(DIST)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    """Debian's Chromium, headless, launched once for this module (Playwright's async API)."""
    async with chromium(ARTIFACTS) as launched:
        yield launched


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    """A fresh browser context per test; fails the test on any JS dialog or page error."""
    async with strict_page(browser, 900, 700) as p:
        yield p


async def open_chat(page: Page, page_server: str, stack: Stack, assistant: str,
                    **more: str) -> None:
    """The page, pointed at the stack's API with the admin key (``x-api-key``) and a graph."""
    query = urlencode({"apiUrl": stack.base_url, "apiKey": stack.tokens["admin"],
                       "assistantId": assistant, **more})
    await page.goto(f"{page_server}/index.html?{query}")
    await expect(page.locator("#send")).to_be_enabled()


async def send(page: Page, text: str) -> None:
    await page.fill("#message-input", text)
    await page.click("#send")


async def answer(page: Page, value: Any) -> None:
    """Answer the interrupt the page shows: ``Command(resume=value)``."""
    await page.fill("#resume-value", json.dumps(value))
    await page.click("#resume")


async def shot(page: Page, name: str) -> None:
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def test_tokens_appear_while_the_node_runs(page: Page, page_server: str, stack: Stack) -> None:
    await open_chat(page, page_server, stack, "chatty")
    await send(page, "hi")
    await expect(page.locator('[data-type="human"] [data-testid="message-text"]')).to_have_text("hi")

    # the reply on screen while its node still works (1.5 s after its model call), before
    # the next node's message: looked for at every frame, then the screenshot
    await page.wait_for_function(
        """() => {
            const ai = [...document.querySelectorAll('[data-type="ai"] [data-testid="message-text"]')];
            return ai.length === 1 && ai[0].textContent !== ""
                && document.querySelector("#status").dataset.loading === "true";
        }""", polling="raf", timeout=60_000)
    await shot(page, "partial")
    assert not await page.evaluate(  # the shot shows the reply before the node ended
        """() => window.__seen.some((e) => e.kind === "messages" && e.ids.includes("sig-1"))""")

    await expect(page.locator("#status")).to_have_attribute("data-loading", "false", timeout=60_000)
    await expect(page.locator('[data-type="ai"] [data-testid="message-text"]')).to_have_text(
        [CHATTY_REPLY, "signed"])
    await expect(page.locator('[data-type="human"] [data-testid="message-text"]')).to_have_text("hi")
    await shot(page, "final")

    # what the page rendered, in order: the reply grew token by token, well before the
    # node ended (its update) and the next node's message showed
    seen: list[dict[str, Any]] = await page.evaluate("window.__seen")
    assert not [e for e in seen if e["kind"] == "error"], seen
    signed = next(i for i, e in enumerate(seen) if e["kind"] == "messages" and "sig-1" in e["ids"])
    partial = [e for e in seen[:signed] if e["kind"] == "text" and e["text"]]
    texts = [e["text"] for e in partial]
    assert len(set(texts)) >= 2, seen
    assert all(CHATTY_REPLY.startswith(t) for t in texts), texts
    assert texts[-1] == CHATTY_REPLY, texts
    # no flicker: a message once shown stays (the states come in LangGraph's order, each
    # after the tokens of the step it closes)
    lists = [e["ids"] for e in seen if e["kind"] == "messages"]
    for earlier, later in zip(lists, lists[1:], strict=False):
        assert set(earlier) <= set(later), lists
    talk_ended = next(e["at"] for e in seen if e["kind"] == "update" and e["node"] == "talk")
    assert talk_ended - partial[0]["at"] > 1000, seen
    assert seen[signed]["at"] - partial[-1]["at"] > 1000, seen


async def test_interrupts_are_answered_from_the_page(page: Page, page_server: str, stack: Stack) -> None:
    # approvals: its node asks twice with interrupt() and reads each answer's "decision"
    await open_chat(page, page_server, stack, "approvals", inputKey="topic")
    await send(page, "launch")

    asked = page.locator("#interrupt-value")
    await expect(asked).to_be_visible(timeout=60_000)
    assert json.loads(await asked.inner_text()) == {"question": "publish?", "topic": "launch"}
    await shot(page, "interrupt")
    await answer(page, {"decision": "yes"})

    await expect(asked).to_contain_text('"question":"really?"', timeout=60_000)
    assert json.loads(await asked.inner_text()) == {"question": "really?", "first": "yes"}
    await answer(page, {"decision": "sure"})

    await expect(page.locator("#status")).to_have_attribute("data-loading", "false", timeout=60_000)
    await expect(page.locator("#interrupt")).to_have_count(0)
    await expect(page.locator("#values")).to_contain_text('"summary":"yes then sure"')
    await shot(page, "resumed")
    shown = json.loads(await page.locator("#values").inner_text())
    assert {k: shown[k] for k in ("topic", "decisions", "summary")} == {
        "topic": "launch", "decisions": [{"decision": "yes"}, {"decision": "sure"}],
        "summary": "yes then sure"}, shown

    thread_id = await page.locator("#thread-id").inner_text()
    state = stack.client("admin").get(f"/threads/{thread_id}/state").json()
    assert state["next"] == [] and not state.get("interrupts"), state
    assert state["values"]["summary"] == "yes then sure"
    assert state["values"]["decisions"] == [{"decision": "yes"}, {"decision": "sure"}]
    seen: list[dict[str, Any]] = await page.evaluate("window.__seen")
    assert not [e for e in seen if e["kind"] == "error"], seen
