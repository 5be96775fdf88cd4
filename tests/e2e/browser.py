"""Debian's headless Chromium for the browser tests (the console, the React ``useStream`` page).

Driven by Playwright's async API on the session's event loop (its sync API would hold a
running loop of its own and break the session's async fixtures: Postgres pool, Temporal).
The browser is the system one (``/usr/bin/chromium``); ``playwright install`` is never run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@asynccontextmanager
async def chromium(artifacts: Path) -> AsyncIterator[Browser]:
    """The browser, launched once; screenshots go to ``artifacts`` (made here).

    Fails the test with the install command when Chromium is missing.
    """
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (make system-deps does it as root)")
    artifacts.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        await browser.close()


@asynccontextmanager
async def strict_page(browser: Browser, width: int, height: int) -> AsyncIterator[Page]:
    """A page in a fresh context (no cookies); the test fails on any JS dialog or page error."""
    context = await browser.new_context(viewport={"width": width, "height": height})
    page = await context.new_page()
    problems: list[str] = []

    async def on_dialog(dialog) -> None:  # type: ignore[no-untyped-def]
        problems.append(f"dialog: {dialog.message}")
        await dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    yield page
    await context.close()
    assert not problems, problems
