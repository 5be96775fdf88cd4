"""Test support for the LLM layer: settings swaps, fake models, a local OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from itertools import cycle
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from overseer import resources as runtime
from overseer.runtime import llm
from overseer.settings import Settings
from tests.scripted_llm import LocalServer


@contextlib.contextmanager
def llm_settings(**overrides: Any) -> Iterator[Settings]:
    """Swap the activity runtime's settings for the test, restoring them afterwards."""
    current = runtime.get_runtime()
    previous = current.settings
    current.settings = previous.model_copy(update=overrides)
    try:
        yield current.settings
    finally:
        current.settings = previous
        llm.set_chat_model_factory(None)


def fake_model(*replies: str, input_tokens: int = 120, output_tokens: int = 30
               ) -> Callable[[Settings, str], GenericFakeChatModel]:
    """A factory of langchain-core fake chat models answering ``replies`` in turn (cycling)."""
    messages = cycle([AIMessage(content=r, usage_metadata={
        "input_tokens": input_tokens, "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens}) for r in replies])

    def factory(settings: Settings, model: str) -> GenericFakeChatModel:
        return GenericFakeChatModel(messages=messages)

    return factory


@dataclass
class Scripted:
    """One scripted answer of the local endpoint."""

    status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_seconds: float = 0.0


def completion(content: str, *, prompt_tokens: int = 200, completion_tokens: int = 40) -> Scripted:
    """A 200 chat completion with usage."""
    return Scripted(body={
        "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
        "model": "local-model",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    })


class LocalOpenAI:
    """An OpenAI-compatible chat-completions endpoint on 127.0.0.1 answering from a script."""

    def __init__(self, script: list[Scripted]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> JSONResponse:
            self.requests.append(await request.json())
            step = self.script.pop(0) if self.script else completion("{}")
            if step.delay_seconds:
                await asyncio.sleep(step.delay_seconds)
            body = step.body or {"error": {"message": "scripted failure", "type": "server_error"}}
            return JSONResponse(body, status_code=step.status, headers=step.headers)

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="error"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def base_url(self) -> str:
        """The ``/v1`` base URL to configure."""
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> LocalOpenAI:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(5)


def llm_answer(**fields: tuple[str | None, str | None]) -> str:
    """The JSON a model answers: ``{field: {"value": v, "quote": q}}``."""
    return json.dumps({k: {"value": v, "quote": q} for k, (v, q) in fields.items()})


# --- a model that misbehaves ------------------------------------------------------------------

MISBEHAVING_PROSE = ("Sure! Having read everything carefully, I think it looks fine overall; "
                     "let me know if you need anything else.")
"""What a small model often answers instead of the JSON or tool call it was asked for."""
MISBEHAVING_TRUNCATED = '{"result": [{"label": "Delivery delays", "definition": "Orders that arri'
"""A JSON answer cut off at the output-token limit."""
MISBEHAVING_WRONG_SHAPE = '{"answer": "The material is mostly positive.", "items": []}'
"""Valid JSON of the wrong shape: none of the keys any step asks for."""
MISBEHAVIOURS = ("prose", "truncated", "cut", "wrong_shape")
"""The unusable answers :class:`MisbehavingModel` cycles through for a prompt it has seen."""


class MisbehavingModel(LocalServer):
    """An OpenAI-compatible endpoint that misbehaves as a small model behind a busy server does.

    ``POST /v1/chat/completions`` (streamed or not) is answered by these deterministic rules,
    checked in order; requests are numbered from 1 in arrival order:

    1. every ``fail_every``-th request: a 500;
    2. a prompt (the whole message list) not seen before: a 429 with ``Retry-After``
       (``retry_after`` seconds), once per prompt — so a re-ask is rate limited too;
    3. otherwise the next of :data:`MISBEHAVIOURS` for that prompt, starting at an offset
       taken from the prompt's hash (so steps get different ones) and cycling:
       ``prose`` (:data:`MISBEHAVING_PROSE`), ``truncated`` (:data:`MISBEHAVING_TRUNCATED`),
       ``cut`` (a stream that stops midway, without a finish reason or ``[DONE]``; a
       non-streamed answer whose body stops midway) and ``wrong_shape``
       (:data:`MISBEHAVING_WRONG_SHAPE`).

    It never answers what was asked. :attr:`seen` logs ``(n, kind, stream)`` per request
    (``kind``: ``500``, ``429`` or a misbehaviour), :meth:`counts` tallies them.
    """

    def __init__(self, *, fail_every: int = 7, retry_after: float = 1.0) -> None:
        self.fail_every = fail_every
        self.retry_after = retry_after
        self.seen: list[tuple[int, str, bool]] = []
        self._prompts: dict[str, int] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> MisbehavingModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler, answering by this endpoint's rules."""
        owner = self

        class Handler(_MisbehavingHandler):
            model = owner

        return Handler

    def decide(self, body: dict[str, Any]) -> str:
        """How the next request with ``body`` is answered (thread-safe; logs it)."""
        key = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()
        with self._lock:
            n = len(self.seen) + 1
            if n % self.fail_every == 0:
                kind = "500"
            elif key not in self._prompts:
                self._prompts[key] = 0
                kind = "429"
            else:
                answered = self._prompts[key]
                self._prompts[key] = answered + 1
                kind = MISBEHAVIOURS[(int(key[:8], 16) + answered) % len(MISBEHAVIOURS)]
            self.seen.append((n, kind, bool(body.get("stream"))))
        return kind

    def counts(self) -> dict[str, int]:
        """How many requests got each kind of answer."""
        with self._lock:
            out: dict[str, int] = {}
            for _, kind, _ in self.seen:
                out[kind] = out.get(kind, 0) + 1
            return dict(sorted(out.items()))


class _MisbehavingHandler(BaseHTTPRequestHandler):
    """Answers as the owning :class:`MisbehavingModel` decides."""

    model: MisbehavingModel

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        kind = self.model.decide(body)
        stream = bool(body.get("stream"))
        try:
            if kind in ("500", "429"):
                status = int(kind)
                code = "rate_limit_exceeded" if status == 429 else "server_error"
                headers = {"retry-after": f"{self.model.retry_after:g}"} if status == 429 else {}
                self._send(status, json.dumps({"error": {"message": f"misbehaving {status}",
                                                         "type": code, "code": code}}).encode(),
                           headers)
            elif kind == "cut":
                self._cut(body, stream=stream)
            else:
                text = MISBEHAVING_PROSE if kind == "prose" else (
                    MISBEHAVING_TRUNCATED if kind == "truncated" else MISBEHAVING_WRONG_SHAPE)
                if stream:
                    self._stream(body, text)
                else:
                    self._send(200, json.dumps(_completion(body, text)).encode())
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up

    def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None,
              *, declared: int | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(declared if declared is not None else len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _chunk(self, body: dict[str, Any], delta: dict[str, Any], finish: str | None) -> bytes:
        chunk = {"id": "chatcmpl-misbehaving", "object": "chat.completion.chunk",
                 "created": int(time.time()), "model": body.get("model", "misbehaving"),
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(chunk)}\n\n".encode()

    def _stream(self, body: dict[str, Any], text: str, *, stop_after: int | None = None) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.write(self._chunk(body, {"role": "assistant", "content": ""}, None))
        pieces = [text[i:i + 12] for i in range(0, len(text), 12)]
        for piece in pieces[:stop_after]:
            self.wfile.write(self._chunk(body, {"content": piece}, None))
        if stop_after is None:
            self.wfile.write(self._chunk(body, {}, "stop"))
            self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _cut(self, body: dict[str, Any], *, stream: bool) -> None:
        """Stop midway: a stream after three chunks; a plain answer after half its body."""
        if stream:
            self._stream(body, '{"result": [{"label": "Delivery", "quotes": ["q1", "q2"]}]}',
                         stop_after=3)
            return
        data = json.dumps(_completion(body, '{"result": [{"label": "Delivery"}]}')).encode()
        self._send(200, data[: len(data) // 2], declared=len(data))
        self.close_connection = True

    def log_message(self, *args: Any) -> None:
        """Quiet: tests read :attr:`MisbehavingModel.seen`."""


def _completion(body: dict[str, Any], text: str) -> dict[str, Any]:
    prompt = sum(len(str(m.get("content") or "")) for m in body.get("messages") or []) // 4 + 1
    out = len(text) // 4 + 1
    return {"id": "chatcmpl-misbehaving", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "misbehaving"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": out,
                      "total_tokens": prompt + out}}
