"""Test support for the LLM layer: settings swaps, fake models, a local OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import cycle
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from activities import llm, runtime
from overseer.settings import Settings


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
