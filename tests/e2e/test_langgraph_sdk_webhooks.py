"""A run's ``webhook``: POSTed once when the run ends, retried by Temporal, signed (issue 26 item 5).

A receiver in the test process records every POST. The ``approvals`` user graph asks two
questions: its start run and its first resume each end at an interrupt (status
``interrupted``), the last resume ends the graph (``success``, with the thread's values).
Each run's webhook arrives once, with the Agent Server's body (the run, its values) and
``X-Overseer-Signature`` (HMAC-SHA256 of the body with the stack's secret).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import UnprocessableEntityError

from tests.e2e.conftest import WEBHOOK_SECRET, Stack

pytestmark = pytest.mark.timeout(180)


class Receiver:
    """What the webhook endpoint received: ``(headers, raw body)`` per POST."""

    def __init__(self) -> None:
        self.posts: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()

    def bodies(self) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(body) for _, body in self.posts]


@pytest.fixture
def receiver() -> Iterator[tuple[str, Receiver]]:
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            with got.lock:
                got.posts.append((dict(self.headers), body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", got
    finally:
        server.shutdown()


async def _arrived(got: Receiver, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while len(got.bodies()) < count:
        assert time.monotonic() < deadline, got.bodies()
        await asyncio.sleep(0.2)
    return got.bodies()


async def test_each_run_posts_its_webhook_once_signed(stack: Stack,
                                                       receiver: tuple[str, Receiver]):
    url, got = receiver
    client = get_client(url=stack.base_url, api_key=stack.tokens["admin"])
    tid = (await client.threads.create())["thread_id"]
    paused = await client.runs.wait(tid, "approvals", input={"topic": "launch"}, webhook=url)
    assert paused["__interrupt__"]
    (first,) = await _arrived(got, 1)
    start_run = (await client.runs.list(tid))[0]
    assert first["run_id"] == start_run["run_id"] and first["status"] == "interrupted"
    assert first["thread_id"] == tid and first["values"]["topic"] == "launch"

    await client.runs.wait(tid, "approvals", command={"resume": {"decision": "yes"}},
                           webhook=url)
    done = await client.runs.wait(tid, "approvals", command={"resume": {"decision": "sure"}},
                                  webhook=url)
    assert done["summary"] == "yes then sure"
    bodies = await _arrived(got, 3)
    runs = {r["run_id"]: r["status"] for r in await client.runs.list(tid)}
    assert [b["status"] for b in bodies] == ["interrupted", "interrupted", "success"]
    assert len({b["run_id"] for b in bodies}) == 3 and set(runs) == {b["run_id"] for b in bodies}
    assert bodies[-1]["values"]["summary"] == "yes then sure"
    assert bodies[-1]["kwargs"]["webhook"] == url and "webhook_claim" not in bodies[-1]["kwargs"]
    for headers, body in got.posts:
        mac = hmac.new(WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert headers["X-Overseer-Signature"] == f"sha256={mac}"
        assert headers["X-Overseer-Delivery"] == json.loads(body)["run_id"]
    await asyncio.sleep(1.5)
    assert len(got.posts) == 3  # nothing twice


async def test_a_failed_run_posts_its_error_and_a_bad_url_is_refused(
        stack: Stack, receiver: tuple[str, Receiver]):
    url, got = receiver
    client = get_client(url=stack.base_url, api_key=stack.tokens["admin"])
    tid = (await client.threads.create())["thread_id"]
    failed = await client.runs.wait(tid, "poison", input={"topic": "x"}, webhook=url,
                                    raise_error=False)
    assert "__error__" in failed
    (body,) = await _arrived(got, 1)
    assert body["status"] == "error" and body["error"]["error"] == failed["__error__"]["error"]
    with pytest.raises(UnprocessableEntityError):
        await client.runs.create(tid, "approvals", input={"topic": "y"}, webhook="ftp://x/y")
