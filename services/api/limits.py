"""Refuse oversized request bodies while they stream in, before they are parsed or spooled.

Starlette parses a whole multipart body (spooling it to disk) before a route runs, so a
size check in the route comes too late for a 2 GB upload. This ASGI middleware answers
413 as soon as ``Content-Length`` announces too much, or as soon as a chunked body has
streamed past the limit.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

MULTIPART_OVERHEAD_BYTES = 64 * 1024
"""Room for multipart boundaries, headers and the ``metadata`` field around the file."""


class BodySizeLimit:
    """413 ``payload_too_large`` for request bodies over ``max_body_bytes``."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, counting its body; answer 413 once it is over the limit."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await _too_large(send, self.max_body_bytes)
            return
        seen = 0
        exceeded = False
        answered = False

        async def counting_receive() -> Message:
            nonlocal seen, exceeded
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    exceeded = True
                    raise _BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            # Body parsers may turn our interruption into their own 400: answer 413 instead.
            nonlocal answered
            if exceeded:
                if not answered:
                    answered = True
                    await _too_large(send, self.max_body_bytes)
                return
            answered = answered or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except _BodyTooLarge:
            if not answered:
                answered = True
                await _too_large(send, self.max_body_bytes)


class _BodyTooLarge(Exception):
    pass


async def _too_large(send: Send, limit: int) -> None:
    body: dict[str, Any] = {"code": "payload_too_large",
                            "message": f"request body larger than {limit} bytes",
                            "details": {"max_body_bytes": limit}}
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(payload)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": payload})
