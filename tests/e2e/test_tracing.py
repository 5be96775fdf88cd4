"""One trace per run, in memory: API request → StartWorkflow → RunWorkflow → node activities → LLM.

API (the FastAPI app with its lifespan) and worker run in this process on the session's
dev server and Postgres, with an in-memory span exporter on the process's tracer
provider, so the test sees every span that the real code makes. The model is the only
fake (langchain-core's ``GenericFakeChatModel`` through the LLM layer's factory hook).
A decision sent later runs in its own trace and carries a span link to the run's trace.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import httpx
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.testing import WorkflowEnvironment

from observability.genai import instrument_langchain
from observability.tracing import setup_tracing
from overseer.runtime import llm
from overseer.settings import Settings
from services.api.main import create_app
from services.worker.main import build_worker
from tests import corpus
from tests.helpers import assert_eventually

pytestmark = pytest.mark.e2e

TOKENS = {"trace-submitter-token-0000000000001": {"role": "submitter", "subject": "tess"},
          "trace-reviewer-token-00000000000001": {"role": "reviewer", "subject": "rex"}}
SUBMITTER, REVIEWER = list(TOKENS)


class NamedFakeChatModel(GenericFakeChatModel):
    """The fake model under a real model name (so spans and the price table see one)."""

    model: str = "gpt-4o-mini"


def _reply() -> AIMessage:
    return AIMessage(
        content=json.dumps({"grade": {"value": "8", "quote": "a quote not in the document"}}),
        usage_metadata={"input_tokens": 250, "output_tokens": 30, "total_tokens": 280},
        response_metadata={"finish_reason": "stop", "model_name": "gpt-4o-mini-2024-07-18"},
    )


@dataclass
class Traced:
    client: httpx.AsyncClient
    spans: InMemorySpanExporter

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())


@pytest.fixture
async def traced(dev_server: WorkflowEnvironment, pg_url: str, pool: Any, task_queue: str,
                 tmp_path: Any) -> AsyncIterator[Traced]:
    provider = setup_tracing("overseer-test")
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument_langchain()
    settings = Settings(
        environment="test", database_url=pg_url, data_dir=tmp_path,
        temporal_address=dev_server.client.service_client.config.target_host,
        task_queue=task_queue, api_tokens=TOKENS,
    )
    llm.set_chat_model_factory(lambda _settings, _model=None: NamedFakeChatModel(
        messages=repeat(_reply())))
    app = create_app(settings)
    try:
        async with app.router.lifespan_context(app):
            worker = build_worker(app.state.temporal, task_queue=task_queue)
            async with worker, httpx.AsyncClient(
                    transport=httpx.ASGITransport(app=app), base_url="http://overseer") as client:
                yield Traced(client=client, spans=exporter)
    finally:
        llm.set_chat_model_factory(None)
        exporter.shutdown()


def _form_missing_grade() -> bytes:
    return corpus.render_text([corpus.make_entry(4242, drop={"grade"})])


async def _wait_status(client: httpx.AsyncClient, run_id: str, *statuses: str) -> dict[str, Any]:
    async def check() -> dict[str, Any]:
        body = (await client.get(f"/v1/runs/{run_id}",
                                 headers={"Authorization": f"Bearer {SUBMITTER}"})).json()
        assert body["status"] in statuses, body["status"]
        return body  # type: ignore[no-any-return]

    return await assert_eventually(check, timeout=90)


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def _one(spans: list[ReadableSpan], prefix: str) -> ReadableSpan:
    found = [s for s in spans if s.name.startswith(prefix)]
    assert found, f"no span named {prefix}…: {sorted({s.name for s in spans})}"
    return found[0]


def _ancestor_spans(spans: list[ReadableSpan], span: ReadableSpan) -> list[ReadableSpan]:
    by_id = {s.context.span_id: s for s in spans}
    out = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        out.append(span)
    return out


def _ancestors(spans: list[ReadableSpan], span: ReadableSpan) -> list[str]:
    return [s.name for s in _ancestor_spans(spans, span)]


def _node_span(spans: list[ReadableSpan], node: str) -> ReadableSpan:
    """The ``node <name>`` span a segment records for one graph node."""
    found = [s for s in spans if s.name == f"node {node}"
             and (s.attributes or {}).get("langgraph.node") == node]
    assert found, f"no span for node {node}: {sorted({s.name for s in spans})}"
    return found[0]


async def test_a_run_is_one_trace_from_the_request_to_the_llm_call_and_a_decision_links_to_it(
        traced: Traced):
    res = await traced.client.post(
        "/v1/submissions", files={"file": ("form.txt", _form_missing_grade(), "text/plain")},
        headers={"Authorization": f"Bearer {SUBMITTER}"})
    assert res.status_code == 202, res.text
    run_id = res.json()["run_id"]
    run = await _wait_status(traced.client, run_id, "awaiting_approval")
    decided = await traced.client.post(
        f"/v1/admin/approvals/{run_id}/decision", json={"decision": "approve",
                                                         "updates": {"grade": "8"}},
        headers={"Authorization": f"Bearer {REVIEWER}"})
    assert decided.status_code == 200, decided.text

    async def run_workflow_finished() -> list[ReadableSpan]:
        spans = traced.finished()
        assert any(s.name == "RunWorkflow:SegmentRunWorkflow"
                   and format(s.context.trace_id, "032x") == run["trace_id"] for s in spans)
        return spans

    spans = await assert_eventually(run_workflow_finished, timeout=30)
    request = _one(spans, "POST /v1/submissions")
    trace_id = request.context.trace_id
    assert format(trace_id, "032x") == run["trace_id"]
    in_trace = [s for s in spans if s.context.trace_id == trace_id]
    assert request.parent is None  # the request is the root of the run's trace

    start = _one(in_trace, "StartWorkflow:SegmentRunWorkflow")
    assert request.name in _ancestors(in_trace, start)
    for node in ("run_pipeline", "review_agent"):
        span = _node_span(in_trace, node)
        assert span.attributes["overseer.run_id"] == run_id
        assert span.attributes["overseer.pipeline"] == "document_intake"
        assert "RunActivity:run_segment" in _ancestors(in_trace, span)
        assert "RunWorkflow:SegmentRunWorkflow" in _ancestors(in_trace, span)
        assert start.name in _ancestors(in_trace, span)
    inner = {s.attributes.get("langgraph.node") for s in in_trace if s.name.startswith("langgraph.node")}
    assert {"read_text", "extract_record", "validate_and_score", "infer_fields"} <= inner

    chat = _one(in_trace, "chat gpt-4o-mini")
    attrs = chat.attributes
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == "gpt-4o-mini"
    assert attrs["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert attrs["gen_ai.usage.input_tokens"] == 250
    assert attrs["gen_ai.usage.output_tokens"] == 30
    assert tuple(attrs["gen_ai.response.finish_reasons"]) == ("stop",)
    assert "langgraph.node infer_fields" in _ancestors(in_trace, chat)
    assert "langgraph.node review_agent" in _ancestors(in_trace, chat)
    assert "RunActivity:run_segment" in _ancestors(in_trace, chat)
    # no document text in any attribute of any span of the run
    essay_line = corpus.make_entry(4242).essay.split("\n")[0][:40]
    for span in in_trace:
        for value in (span.attributes or {}).values():
            assert essay_line not in str(value), (span.name, value)

    decision = _one(spans, "approval decision")
    assert decision.context.trace_id != trace_id  # the decision is a request of its own …
    assert decision.attributes["overseer.run_trace_id"] == run["trace_id"]
    assert [link.context.trace_id for link in decision.links] == [trace_id]  # … linked to the run
    assert decision.links[0].context.span_id == start.context.span_id
    assert "POST /v1/admin/approvals/{run_id}/decision" in _ancestors(spans, decision)
