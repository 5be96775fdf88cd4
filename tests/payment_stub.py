"""A payment API for the chat scenarios, in a process of its own.

Run as ``python -m tests.payment_stub <port>``.

``POST /<anything>`` with an ``Idempotency-Key`` header records ``(path, key)`` and answers
200; ``GET /posts`` answers every recorded ``[path, key]`` in order, as JSON. The other side
keeps one charge per key, as Stripe does: :meth:`PaymentStub.charges` counts distinct keys.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from services.local.managed import free_port


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # 50 chats POST at once
    daemon_threads = True


def serve(port: int) -> None:
    """Serve on ``127.0.0.1:port`` until killed."""
    posts: list[list[str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            posts.append([self.path, self.headers.get("Idempotency-Key") or ""])
            self.send_response(200)
            self.end_headers()

        def do_GET(self) -> None:  # noqa: N802
            body = json.dumps(posts).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    _Server(("127.0.0.1", port), Handler).serve_forever()


class PaymentStub:
    """The stub's process; each chat POSTs to a path of its own (``url_for``)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.payment_stub",
                                      str(self.port)])
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{self.base}/posts", timeout=1)
                return
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def url_for(self, chat: int) -> str:
        """The charge URL of chat ``chat``."""
        return f"{self.base}/charges/{chat}"

    def posts(self) -> list[tuple[str, str]]:
        """Every POST's ``(url, key)``, in order (a node that runs again POSTs again)."""
        return [(self.base + path, key)
                for path, key in httpx.get(f"{self.base}/posts", timeout=10).json()]

    def stop(self) -> None:
        """Stop the process."""
        self.proc.kill()
        self.proc.wait(10)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
