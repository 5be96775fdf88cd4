"""Pricing's analyst summary with a model that misbehaves (issue 28 item 5), on plain LangGraph.

The composite ask used to fail at ``reporter_worker`` after 10 attempts
(``llm_unavailable``, ValueError) although a template report exists. Now an unusable summary
(unreadable, refused, or stating a number the facts do not) is asked for once more with
what was wrong, then the template report is used and recorded as ``strategy: rules`` with
the reason; transient failures are still Temporal's to retry. The model is a
langchain-core fake chat model.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.exceptions import ModelRefusalError
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from temporalio.exceptions import ApplicationError

from activities.pricing import nodes
from activities.pricing.catalog import SAMPLE_PATH, load_catalog_file
from activities.pricing.graph import build_pricing_graph
from activities.pricing.options import pricing_options
from activities.pricing.reporter import invented_numbers, template_report
from activities.pricing.router import decide_route, resolve_scope
from activities.pricing.run import result
from overseer.runtime import llm
from overseer.settings import Settings

COMPOSITE = "Propose Q1 pricing updates ensuring hierarchy; summarize"
GOOD = "Leadership summary: the proposal keeps the tier hierarchy; sign-off is needed."
INVENTED_PRICE = "987.65"
INVENTED = f"Raise every new copy to ${INVENTED_PRICE} for the best revenue."


@pytest.fixture(autouse=True)
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from overseer.resources import ActivityRuntime

    monkeypatch.setattr("overseer.resources._runtime", ActivityRuntime(
        pool=None, settings=Settings(environment="test")))  # type: ignore[arg-type]
    yield
    llm.set_chat_model_factory(None)


def scripted(replies: list[str | BaseException], prompts: list[list[str]]) -> None:
    """Every model call answers the next reply (raised when it is an exception)."""
    queue = list(replies)

    class Scripted(GenericFakeChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            prompts.append([str(m.content) for m in messages])
            reply = queue.pop(0)
            if isinstance(reply, BaseException):
                raise reply
            self.messages = iter([AIMessage(content=reply)])
            return super()._generate(messages, stop, run_manager, **kwargs)

    llm.set_chat_model_factory(lambda settings, model: Scripted(messages=iter(())))


def initial_state(message: str = COMPOSITE, model: str = "fake-model") -> dict[str, Any]:
    catalog = load_catalog_file()
    return {"run_id": "00000000-0000-4000-8000-000000000001",
            "messages": [{"role": "user", "content": message}],
            "request": {"message": message, "model": model},
            "options": pricing_options(Settings(environment="test")),
            "catalog": {"sha256": catalog.sha256, "path": str(SAMPLE_PATH)},
            "scope": resolve_scope(message, catalog), "plan": decide_route(message).plan,
            "max_iterations": 8, "iterations": 0, "completed_steps": [], "outputs": {},
            "tools_used": []}


async def compose(model: str = "fake-model") -> tuple[dict[str, Any], list[str]]:
    """Run the composite ask up to its sign-off: the state there and the streamed tokens."""
    app = build_pricing_graph(for_temporal=False).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    tokens = [c["token"] async for c in app.astream(initial_state(model=model), config,
                                                    stream_mode="custom")]
    return (await app.aget_state(config)).values, tokens


async def test_an_unreadable_summary_is_asked_again_and_the_second_is_used():
    prompts: list[list[str]] = []
    scripted([ValueError("{'message': 'model failed to answer'}"), GOOD], prompts)
    state, tokens = await compose()
    assert state["strategy"] == "llm:fake-model" and state["report"] == GOOD
    assert "fallback" not in state["outputs"]["reporter"]
    assert len(prompts) == 2  # the question and one re-ask
    assert "could not be used" in prompts[1][-1] and "ValueError" in prompts[1][-1]
    assert "".join(tokens) == GOOD


async def test_unusable_twice_gives_the_template_report_and_the_run_goes_on():
    prompts: list[list[str]] = []
    scripted([ValueError("not JSON"), ValueError("not JSON")], prompts)
    state, tokens = await compose()
    assert state["completed_steps"][-1] == "reporter"  # reached the sign-off, not failed
    assert state["strategy"] == "rules"
    assert state["report"] == template_report(state) and "".join(tokens) == state["report"]
    assert state["outputs"]["reporter"]["fallback"]["code"] == "llm_malformed_response"
    view = result(state)
    assert view["strategies"] == ["rules"]
    assert view["fallback"]["code"] == "llm_malformed_response"
    assert len(prompts) == 2  # bounded: one re-ask


async def test_a_number_the_model_invents_is_never_in_the_report():
    offline, _ = await compose(model="rules")
    facts = offline["report"]
    assert INVENTED_PRICE not in facts
    prompts: list[list[str]] = []
    scripted([INVENTED, INVENTED], prompts)
    state, tokens = await compose()
    assert INVENTED_PRICE not in state["report"] and state["report"] == facts
    assert state["strategy"] == "rules"
    assert state["outputs"]["reporter"]["fallback"]["code"] == "llm_invented_numbers"
    assert INVENTED_PRICE in prompts[1][-1]  # the re-ask names the number
    assert prompts[1][-2] == INVENTED  # and shows the answer it means
    # streamed tokens cannot be withdrawn: the template follows them after a blank line
    assert "".join(tokens).endswith("\n\n" + facts)
    # the proposal the sign-off would apply is the optimizer's either way
    assert state["proposal"] == offline["proposal"]


async def test_a_re_asked_summary_with_the_facts_numbers_is_used():
    offline, _ = await compose(model="rules")
    price = re.search(r"→ (\d+\.\d\d)", offline["report"])
    assert price is not None
    honest = f"The largest move ends at {price.group(1)}; approve or cancel the proposal."
    assert invented_numbers(honest, offline["report"]) == []
    prompts: list[list[str]] = []
    scripted([INVENTED, honest], prompts)
    state, _ = await compose()
    assert state["strategy"] == "llm:fake-model" and state["report"] == honest


async def test_a_refusal_gives_the_template_without_a_re_ask():
    prompts: list[list[str]] = []
    scripted([ModelRefusalError("I can't help with pricing.")], prompts)
    state, _ = await compose()
    assert state["strategy"] == "rules" and state["report"] == template_report(state)
    assert state["outputs"]["reporter"]["fallback"]["code"] == "llm_refused"
    assert len(prompts) == 1


async def test_a_value_error_is_not_retried_but_a_time_out_still_is():
    """The ValueError used to leave the step as a retryable ``llm_unavailable`` (10 attempts);
    a time-out must still be a retryable failure Temporal backs off on."""
    prompts: list[list[str]] = []
    scripted([ValueError("bad body"), ValueError("bad body")], prompts)
    update = await nodes.reporter_worker(initial_state())  # type: ignore[arg-type]
    assert update["strategy"] == "rules"

    scripted([TimeoutError("model timed out")], prompts)
    with pytest.raises(ApplicationError) as raised:
        await nodes.reporter_worker(initial_state())  # type: ignore[arg-type]
    assert raised.value.type == "llm_unavailable" and not raised.value.non_retryable


def test_numbers_match_the_facts_as_rounded_and_ids_are_not_numbers():
    facts = ("Pricing review for ASTR 4 (TB006-campus).\n- Proposal: 3 price changes "
             "(1 up, 2 down); expected revenue +3.20% (max change ±10%).\n"
             "- Largest changes: TB006-campus New 119.97 → 1,204.50.\n")
    assert invented_numbers("1. Revenue up 3.2% (about 3%), max 10%; TB006-campus to "
                            "$1204.50 from 119.97.", facts) == []
    assert invented_numbers("Raise TB006-campus to $129.99 for 5% more.", facts) == [
        "129.99", "5"]
