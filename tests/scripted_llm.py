"""A scripted OpenAI-compatible chat-completions endpoint, served in-process for tests.

``POST /v1/chat/completions`` answers non-streaming (one ``chat.completion``) and streaming
requests (Server-Sent Events: ``data: {chunk}`` lines, then ``data: [DONE]``). Each request is
sorted into a *kind* by a function of its body (e.g. which pipeline's prompt it carries), and
answered by the next :class:`Action` of that kind's script; once a script is used up, the
kind's default answers (plain prose unless told otherwise). Every request is logged as a
:class:`Seen`, so a test can count what the endpoint really received and compare it with
the run's ``llm.called`` ledger.

Actions model how real endpoints misbehave: :class:`Fail` (a 429 with ``Retry-After``, a
500), :class:`Slow` (an answer later than the client's time-out), :class:`Text` (prose where
JSON was asked), :class:`Json`, :class:`ToolCall`, :class:`NoStream` (a server that ignores
``stream: true`` and answers one JSON completion) and :class:`Computed` (an answer built from
the request, e.g. one citing an id of the prompt next to an invented one).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

PROSE = "Sure! Here is my analysis: the contract looks fine."
"""What a small local model often answers instead of the JSON or tool call it was asked for."""


@dataclass(frozen=True)
class Fail:
    """An HTTP error answer (``status`` 429 or 5xx), with ``Retry-After`` when given."""

    status: int
    retry_after: float | None = None


@dataclass(frozen=True)
class Text:
    """An answer whose content is ``content`` (streamed in word chunks when asked to stream)."""

    content: str = PROSE


@dataclass(frozen=True)
class Json:
    """An answer whose content is ``json.dumps(value)``."""

    value: Any


@dataclass(frozen=True)
class ToolCall:
    """An answer that calls one tool ``name`` with ``arguments`` (no text content)."""

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Slow:
    """Wait ``seconds`` (longer than the client's time-out), then answer ``then``."""

    seconds: float
    then: Action = field(default_factory=Text)


@dataclass(frozen=True)
class NoStream:
    """Answer ``then`` as one non-streamed completion even when the request asked to stream."""

    then: Action = field(default_factory=Text)


@dataclass(frozen=True)
class Computed:
    """Answer with the action ``make(request body)`` returns (a reply built from the prompt)."""

    make: Callable[[dict[str, Any]], Action]


Action = Fail | Text | Json | ToolCall | Slow | NoStream | Computed


@dataclass
class Seen:
    """One request the endpoint received and how it was answered.

    Attributes:
        kind: the kind the classifier gave it.
        stream: whether it asked for a stream.
        last_user: text of its last user message (a re-ask carries what was wrong there).
        action: the action that answered it.
        at: ``time.monotonic()`` when it arrived.
        body: the request body.
    """

    kind: str
    stream: bool
    last_user: str
    action: Action
    at: float
    body: dict[str, Any]


def message_text(message: Mapping[str, Any]) -> str:
    """The text of one OpenAI chat message (string content, or its text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def system_text(body: Mapping[str, Any]) -> str:
    """The request's system (or developer) messages, joined."""
    return "\n".join(message_text(m) for m in body.get("messages") or []
                     if m.get("role") in ("system", "developer"))


class LocalServer:
    """A local HTTP endpoint on a free port, served from a daemon thread.

    A subclass names its request handler (:meth:`handler`); :meth:`start`, :meth:`stop` and
    :attr:`base_url` (``http://127.0.0.1:<port>/v1``, for ``OVERSEER_LLM_BASE_URL``) are here.
    """

    _server: ThreadingHTTPServer | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class (bound to this endpoint)."""
        raise NotImplementedError

    def start(self) -> Self:
        """Serve on a free local port, in a daemon thread."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, for ``OVERSEER_LLM_BASE_URL``."""
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"


class ScriptedLLM(LocalServer):
    """The endpoint: start it, point ``OVERSEER_LLM_BASE_URL`` at :attr:`base_url`, read :attr:`seen`.

    Args:
        classify: request body → kind.
        scripts: kind → the actions answering its first requests, in order.
        defaults: kind → the action once its script is used up (else :class:`Text`).
    """

    def __init__(self, classify: Callable[[dict[str, Any]], str],
                 scripts: Mapping[str, Sequence[Action]] | None = None,
                 defaults: Mapping[str, Action] | None = None) -> None:
        self.classify = classify
        self.scripts = {k: list(v) for k, v in (scripts or {}).items()}
        self.defaults = dict(defaults or {})
        self.seen: list[Seen] = []
        self.lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler, answering from this endpoint's scripts."""
        owner = self

        class Handler(_Handler):
            llm = owner

        return Handler

    # -- script ----------------------------------------------------------------------------

    def next_action(self, body: dict[str, Any]) -> Seen:
        """Classify a request, take its kind's next action and log it (thread-safe)."""
        kind = self.classify(body)
        users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
        with self.lock:
            script = self.scripts.get(kind) or []
            action = script.pop(0) if script else self.defaults.get(kind, Text())
            seen = Seen(kind=kind, stream=bool(body.get("stream")),
                        last_user=message_text(users[-1]) if users else "", action=action,
                        at=time.monotonic(), body=body)
            self.seen.append(seen)
        return seen

    def requests(self, kind: str | None = None, since: float = 0.0) -> list[Seen]:
        """Requests received (of ``kind``, arrived after ``since``), in order."""
        with self.lock:
            return [s for s in self.seen if (kind is None or s.kind == kind) and s.at > since]


class _Handler(BaseHTTPRequestHandler):
    """Answers ``POST /v1/chat/completions`` as the owning :class:`ScriptedLLM` says."""

    llm: ScriptedLLM

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        seen = self.llm.next_action(body)
        try:
            self._answer(seen.action, body, stream=seen.stream)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its time-out): as a real server's write would fail

    def _answer(self, action: Action, body: dict[str, Any], *, stream: bool) -> None:
        if isinstance(action, Computed):
            self._answer(action.make(body), body, stream=stream)
        elif isinstance(action, Slow):
            time.sleep(action.seconds)
            self._answer(action.then, body, stream=stream)
        elif isinstance(action, NoStream):
            self._answer(action.then, body, stream=False)
        elif isinstance(action, Fail):
            headers = {"retry-after": f"{action.retry_after:g}"} if action.retry_after else {}
            kind = "rate_limit_exceeded" if action.status == 429 else "server_error"
            self._json(action.status, {"error": {"message": f"scripted {action.status}",
                                                 "type": kind, "code": kind}}, headers)
        else:
            message = _message(action)
            if stream:
                self._stream(message, body)
            else:
                self._json(200, {
                    "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
                    "created": int(time.time()), "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if message.get("tool_calls")
                                 else "stop"}],
                    "usage": _usage(body, message)})

    def _stream(self, message: dict[str, Any], body: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        base = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": body.get("model", "scripted")}

        def send(choices: list[dict[str, Any]], **extra: Any) -> None:
            self.wfile.write(f"data: {json.dumps({**base, 'choices': choices, **extra})}\n\n"
                             .encode())

        send([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        text = message.get("content") or ""
        for i in range(0, len(text), 16):
            send([{"index": 0, "delta": {"content": text[i:i + 16]}, "finish_reason": None}])
        send([{"index": 0, "delta": {}, "finish_reason": "stop"}])
        if (body.get("stream_options") or {}).get("include_usage"):
            send([], usage=_usage(body, message))
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _json(self, status: int, payload: dict[str, Any],
              headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        """Quiet: the test reads :attr:`ScriptedLLM.seen` instead of access logs."""


def _message(action: Text | Json | ToolCall) -> dict[str, Any]:
    """The assistant message an answering action stands for."""
    if isinstance(action, ToolCall):
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{uuid.uuid4().hex[:10]}", "type": "function",
            "function": {"name": action.name, "arguments": json.dumps(action.arguments)}}]}
    content = json.dumps(action.value) if isinstance(action, Json) else action.content
    return {"role": "assistant", "content": content}


def _usage(body: Mapping[str, Any], message: Mapping[str, Any]) -> dict[str, int]:
    """Token counts as a real endpoint would bill them (about four characters a token)."""
    prompt = sum(len(message_text(m)) for m in body.get("messages") or []) // 4 + 1
    completion = len(json.dumps(message)) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}
