"""The chat SSE endpoint in process over a real run: keepalives during a slow (LLM) step."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from langchain_core.messages import AIMessage, AIMessageChunk
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from overseer.runtime import llm
from overseer.settings import Settings
from services.api.main import create_app

TOKEN = "stream-api-test-token-000000000001"


class SlowModel:
    """A fake chat model whose streamed answer starts only after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.model_name = "slow-fake"

    async def ainvoke(self, messages: Any) -> AIMessage:
        return AIMessage(content='{"intents": []}')

    async def astream(self, messages: Any) -> AsyncIterator[AIMessageChunk]:
        await asyncio.sleep(self.delay)
        for word in ("Hold ", "prices."):
            yield AIMessageChunk(content=word)


async def test_keepalives_fill_a_slow_reporter_step(dev_server: WorkflowEnvironment,
                                                    worker: Worker, db, task_queue: str):
    settings = Settings(environment="test", task_queue=task_queue, search_attributes_enabled=True,
                        api_tokens={TOKEN: {"role": "submitter", "subject": "sam"}})
    app = create_app(settings)
    app.state.settings, app.state.pool, app.state.temporal = settings, db, dev_server.client
    app.state.grants = settings.load_token_grants()
    llm.set_chat_model_factory(lambda s, m: SlowModel(1.2))  # type: ignore[arg-type,return-value]
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), timeout=60,
                                     base_url="http://test",
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            res = await client.post("/api/v1/chat", params={
                "stream": "true", "plan": "true", "keepalive": "true", "interval": "0.1"},
                json={"message": "Check policy violations for TB001-online"})
    finally:
        llm.set_chat_model_factory(None)
    assert res.status_code == 200
    blocks = [b for b in res.text.split("\n\n") if b]
    reporter = next(i for i, b in enumerate(blocks) if '"tool_call":"compose_report"' in b)
    first_token = next(i for i, b in enumerate(blocks) if i > reporter and '"token"' in b)
    slow = blocks[reporter + 1:first_token]
    # 1.2 s of silence at a 0.1 s interval: ~11 keepalives alone, at least 3 on a loaded machine
    assert slow.count(": keepalive") >= 3, slow
    final = json.loads(blocks[-1].split("data: ", 1)[1])
    assert final["done"] is True and final["message"] == "Hold prices."
    assert final["strategy"] == "llm:gpt-4o-mini" and final["model"] == "gpt-4o-mini"
    data = [json.loads(b.split("data: ", 1)[1]) for b in blocks if b != ": keepalive"]
    assert [e["seq"] for e in data] == list(range(1, len(data) + 1))
