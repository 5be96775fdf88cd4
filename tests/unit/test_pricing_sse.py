"""SSE contract (seed 003 "v1 Stream Contract"): golden samples, ordering, keepalive timing, fast path."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from activities.pricing import stream as events
from activities.pricing.agent import single_agent
from activities.pricing.catalog import load_catalog_file
from activities.pricing.chat_sse import (
    KEEPALIVE,
    canonical,
    parse_last_event_id,
    skip_seen,
    sse_frame,
    with_keepalive,
)
from activities.pricing.options import pricing_options
from activities.pricing.router import resolve_scope
from overseer.errors import InvalidRequestError
from overseer.settings import Settings

GOLDEN = [
    (events.token("The"), 'data: {"token":"The","done":false}\n\n'),
    (events.tool_call("optimize_price"), 'data: {"tool_call":"optimize_price","done":false}\n\n'),
    (events.final("The optimal price is $94.50.", tools_used=["optimize_price"], model="rules"),
     'data: {"message":"The optimal price is $94.50.","tools_used":["optimize_price"],"done":true,'
     '"model":"rules","strategy":"rules"}\n\n'),
    (events.error("Rate limit exceeded", "rate_limit", retryable=True),
     'data: {"error":"Rate limit exceeded","code":"rate_limit","retryable":true,"done":true}\n\n'),
]


@pytest.mark.parametrize(("event", "frame"), GOLDEN)
def test_golden_samples_from_the_seed(event, frame):
    assert sse_frame(event) == frame


def test_seq_becomes_the_sse_id_and_trails_the_payload():
    assert sse_frame({**events.token("The"), "seq": 7}) == (
        'id: 7\ndata: {"token":"The","done":false,"seq":7}\n\n')


def test_sorted_keys_from_the_workflow_stream_are_put_back_in_envelope_order():
    stored = dict(sorted({**events.final("ok", tools_used=["a"], model="rules", thread_id="t"),
                          "seq": 3}.items()))
    assert list(canonical(stored)) == ["message", "tools_used", "done", "model", "thread_id",
                                       "strategy", "seq"]
    meta = dict(sorted(events.meta("policy_checker_worker", violations=[], summary="s").items()))
    assert list(canonical(meta)) == ["node", "summary", "violations", "done"]


def test_chunks_reassemble_exactly():
    text = "Line one.\n- two  spaces\n"
    assert "".join(events.chunks(text)) == text


async def slow_source(delays: list[float]) -> AsyncIterator[str]:
    for n, delay in enumerate(delays):
        await asyncio.sleep(delay)
        yield f"data: {n}\n\n"


async def test_keepalive_only_after_interval_without_events():
    got: list[tuple[float, str]] = []
    start = time.monotonic()
    async for frame in with_keepalive(slow_source([0.0, 0.05, 0.45, 0.05]), 0.1):
        got.append((time.monotonic() - start, frame))
    frames = [f for _, f in got]
    assert frames[:2] == ["data: 0\n\n", "data: 1\n\n"]  # fast events: no keepalive between
    slow = frames[2:frames.index("data: 2\n\n")]
    assert 3 <= len(slow) <= 5 and set(slow) == {KEEPALIVE}  # the slow step: one per 0.1 s
    assert frames[-1] == "data: 3\n\n" and frames[-2] == "data: 2\n\n"
    keep_times = [t for t, f in got if f == KEEPALIVE]
    assert keep_times[0] >= 0.05 + 0.1 - 0.02
    assert all(b - a >= 0.09 for a, b in zip(keep_times, keep_times[1:], strict=False))


async def test_no_keepalive_when_not_asked():
    frames = [f async for f in with_keepalive(slow_source([0.0, 0.2]), None)]
    assert KEEPALIVE not in frames


def test_last_event_id_parsing():
    assert parse_last_event_id(None) == 0 and parse_last_event_id("12") == 12
    with pytest.raises(InvalidRequestError):
        parse_last_event_id("abc")


async def test_skip_seen_drops_already_delivered_events():
    async def source():
        for n in range(1, 6):
            yield {"token": str(n), "done": False, "seq": n}
    assert [e["seq"] async for e in skip_seen(source(), 3)] == [4, 5]


async def test_fast_path_answers_in_milliseconds_with_tool_then_tokens_then_final():
    catalog = load_catalog_file()
    message = "What is the optimal price for TB006-campus?"
    start = time.monotonic()
    out = [e async for e in single_agent(message, catalog, pricing_options(Settings()),
                                         scope=resolve_scope(message, catalog))]
    assert time.monotonic() - start < 0.2
    assert out[0] == {"tool_call": "optimize_price", "done": False}
    assert all(set(e) == {"token", "done"} for e in out[1:-1])
    final = out[-1]
    assert final["message"] == "".join(e["token"] for e in out[1:-1])
    assert final["message"].startswith("The optimal prices for ASTR 4")
    assert (final["model"], final["strategy"]) == ("rules", "rules")


async def test_fast_path_with_a_model_streams_token_by_token_without_deprecated_apis():
    import warnings

    from langchain_core._api.deprecation import LangChainDeprecationWarning

    from overseer.runtime import llm

    llm.set_chat_model_factory(lambda s, m: GenericFakeChatModel(
        messages=iter([AIMessage(content="New copies of ASTR 4 should stay at $119.97.")])))
    try:
        catalog = load_catalog_file()
        message = "What is the optimal new price for TB006-campus?"
        with warnings.catch_warnings():  # astream_events(version="v1") is deprecated (issue 28)
            warnings.simplefilter("error", LangChainDeprecationWarning)
            out = [e async for e in single_agent(message, catalog, pricing_options(Settings()),
                                                 scope=resolve_scope(message, catalog),
                                                 model_name="fake-model", settings=Settings())]
    finally:
        llm.set_chat_model_factory(None)
    tokens = [e["token"] for e in out if "token" in e]
    assert len(tokens) > 5  # the model's chunks, as they come
    assert out[-1]["strategy"] == "llm:fake-model"
    assert out[-1]["message"] == "New copies of ASTR 4 should stay at $119.97."


def test_model_choice_is_the_llm_layers_with_an_allowlist_and_rules_offline():
    from activities.pricing.chat_routing import effective_model

    offline = Settings(environment="test", llm_allowed_models=["gpt-4o-mini", "gpt-4o"])
    assert effective_model(offline, None) == ("rules", "no_llm_endpoint")
    assert effective_model(offline, "evil-model") == ("rules",
                                                      "no_llm_endpoint;hint_not_allowlisted")
    online = offline.model_copy(update={"llm_base_url": "http://127.0.0.1:9/v1"})
    assert effective_model(online, "gpt-4o") == ("gpt-4o", "request_hint")
    assert effective_model(online, "evil-model") == ("gpt-4o-mini",
                                                     "global_default;hint_not_allowlisted")
    assert effective_model(online.model_copy(update={"llm_admin_override": "gpt-4o"}),
                           "gpt-4o-mini") == ("gpt-4o", "admin_override")
