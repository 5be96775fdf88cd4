"""Thematic analysis with a model that misbehaves (issue 28 item 5), on plain LangGraph.

The model is a langchain-core fake chat model answering in prose, as small local models
often do. A reply that is not JSON is asked for once more with the parse error; a second
unusable reply makes that coder (or theme coder) use the rules, recorded as
``strategy: rules`` in its result, in ``fallbacks`` and in the run's ``strategies``; the run
completes instead of failing with ``coding_failed``. Quotes stay verbatim sentences of the
data whatever the model cites.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from activities.thematic_analysis import coding, dataset, llm_steps
from activities.thematic_analysis.graph import build_thematic_analysis_graph
from activities.thematic_analysis.identities import Identity
from activities.thematic_analysis.options import ThematicOptions
from overseer.runtime import llm
from tests.unit.test_thematic_graph import UPLOADS, in_memory_uploads  # noqa: F401 - autouse fixture

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "thematic_analysis" / "reviews.csv"
PROSE = "Sure! The customers mostly talk about delivery and how the coffee tastes."


@pytest.fixture
def ledger(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The ``llm.called`` events the coders write (outside a worker they are discarded)."""
    events: list[dict[str, Any]] = []

    async def keep(new: list[Any]) -> None:
        events.extend({"key": e.key, "type": e.type, **e.data} for e in new)

    monkeypatch.setattr(llm_steps, "_ledger",
                        lambda: (keep, {"cost_usd": 0.0, "tokens": 0.0, "calls": 0.0}))
    return events


def example_input() -> dict[str, Any]:
    content = EXAMPLE.read_bytes()
    sha = hashlib.sha256(content).hexdigest()
    UPLOADS[sha] = content
    document = {"sha256": sha, "kind": "text", "filename": "reviews.csv",
                "content_type": "text/csv", "size_bytes": len(content)}
    return {"document": document, "run_id": "run-1", "options": {},
            "metadata": {"account_id": "brewbox", "start_date": "2024-01-01",
                         "end_date": "2024-04-30"}}


def example_corpus() -> dataset.Corpus:
    rows = dataset.window(dataset.parse_dataset(EXAMPLE.read_bytes(), "reviews.csv"),
                          "brewbox", "2024-01-01", "2024-04-30")
    return dataset.build_corpus(rows)


async def run(state: dict[str, Any]) -> dict[str, Any]:
    graph = build_thematic_analysis_graph().compile(checkpointer=InMemorySaver())
    return await graph.ainvoke(state, {"configurable": {"thread_id": "t"}})


def scripted(first: str, after_reask: str, prompts: list[list[str]]):
    """A chat-model factory: ``first`` to a question, ``after_reask`` once re-asked.

    Every call's messages are appended to ``prompts`` (their text).
    """

    class Scripted(GenericFakeChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            texts = [str(m.content) for m in messages]
            prompts.append(texts)
            reasked = any("could not be used" in t for t in texts[2:])
            self.messages = iter([AIMessage(content=after_reask if reasked else first,
                                            usage_metadata={"input_tokens": 500,
                                                            "output_tokens": 20,
                                                            "total_tokens": 520})])
            return super()._generate(messages, stop, run_manager, **kwargs)

    return lambda settings, model: Scripted(messages=iter(()))


def model_answer(corpus: dataset.Corpus, *, invented: str | None = None) -> str:
    """Codes citing real quote ids of the window (and ``invented``), themes over them."""
    quotes = corpus.quote_ids
    codes = [{"label": "Delivery delays", "definition": "Late boxes.",
              "quote_ids": [*quotes[:3], *([invented] if invented else [])]},
             {"label": "Fresh beans", "definition": "Freshness.", "quote_ids": quotes[3:6]}]
    if invented:
        codes.append({"label": "Invented praise", "definition": "Nothing real.",
                      "quote_ids": [invented]})
    themes = [{"name": "Getting the coffee", "description": "Delivery and freshness.",
               "code_ids": [coding.code_id("Delivery delays"), coding.code_id("Fresh beans")]}]
    return json.dumps({"codes": codes, "themes": themes})


async def test_prose_then_json_keeps_the_models_codes_after_one_reask(ledger):
    corpus = example_corpus()
    prompts: list[list[str]] = []
    llm.set_chat_model_factory(scripted(PROSE, model_answer(corpus), prompts))
    state = await run(example_input())

    assert state["status"] == "completed" and state["errors"] == []
    assert state.get("fallbacks", []) == []
    assert {c["label"] for c in state["codebook"]} == {"Delivery delays", "Fresh beans"}
    assert all(c["strategy"].startswith("llm:") for c in state["codebook"])
    assert all(r["strategy"] == "llm" for r in state["coder_results"])
    model = next(c["model"] for c in state["llm_calls"] if c["outcome"] == "ok")
    assert state["strategies"] == [f"llm:{model}"]
    # each of the 6 steps (3 coders, 3 theme coders) asked once, then re-asked once
    assert len(prompts) == 12
    reasks = [p[-1] for p in prompts if "could not be used" in p[-1]]
    assert len(reasks) == 6 and all("not a JSON object" in r for r in reasks)
    assert all(len(p) == 3 for p in prompts if "could not be used" in p[-1])  # bounded: one
    # the ledger has both calls of every step; llm_calls counts the billed prose too
    coder = sorted((e["key"], e["outcome"], e.get("error_code")) for e in ledger
                   if e["node"] == "coder:outcomes")
    assert coder == [("llm.called:coder:outcomes:0:1:1", "error", "llm_malformed_response"),
                     ("llm.called:coder:outcomes:0:2:1", "ok", None)]
    assert state["token_usage"]["calls"] == len(ledger) == 12
    assert state["token_usage"]["failed_calls"] == 6


async def test_prose_twice_codes_with_the_rules_and_the_run_completes(ledger):
    """Every coder's model answers prose, re-ask included: this failed the run with
    ``coding_failed`` before; now each coder uses the rules coder and says so."""
    prompts: list[list[str]] = []
    llm.set_chat_model_factory(scripted(PROSE, PROSE, prompts))
    state = await run(example_input())

    assert state["status"] == "completed" and state["outcome"] == "themes"
    assert state["errors"] == [] and state["codebook"] and state["themes"]
    corpus = example_corpus()
    options = ThematicOptions.model_validate(state["options"])
    for result in state["coder_results"]:
        identity = Identity.model_validate(
            next(i for i in state["identities"] if i["id"] == result["identity_id"]))
        assert result["strategy"] == "rules"
        assert result["fallback"]["code"] == "llm_malformed_response"
        assert result["codes"] == coding.rules_coder(identity, corpus, options)
    assert all(c["strategy"] == "rules" for c in state["codebook"])
    assert all(t["strategy"] == "rules" for t in state["themes"])
    assert sorted((f["node"], f["identity_id"]) for f in state["fallbacks"]) == sorted(
        (node, i["id"]) for node in ("coder", "theme_coder") for i in state["identities"])
    assert state["strategies"] == ["rules"]  # no model output in the result
    # two calls per step in the ledger (the question and the one re-ask), all failed
    assert len(ledger) == 12 and {e["outcome"] for e in ledger} == {"error"}
    assert state["token_usage"]["calls"] == 12 and state["token_usage"]["failed_calls"] == 12


async def test_a_quote_the_model_invents_is_never_applied(ledger):
    corpus = example_corpus()
    invented = dataset.quote_id("never-seen", 0)
    prompts: list[list[str]] = []
    llm.set_chat_model_factory(scripted(PROSE, model_answer(corpus, invented=invented), prompts))
    state = await run(example_input())

    assert {c["label"] for c in state["codebook"]} == {"Delivery delays", "Fresh beans"}
    quoted = [q for c in state["codebook"] for q in c["quote_ids"]]
    quoted += [q for t in state["themes"] for q in t["quote_ids"]]
    assert invented not in quoted
    assert quoted and all(q in corpus.text for q in quoted)  # verbatim sentences of the data
    assert all(r["dropped_quote_ids"] == 2 for r in state["coder_results"])


async def test_a_refusal_codes_with_the_rules(ledger):
    class Refusing(GenericFakeChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            self.messages = iter([AIMessage(content="", additional_kwargs={
                "refusal": "I can't help with that."})])
            return super()._generate(messages, stop, run_manager, **kwargs)

    llm.set_chat_model_factory(lambda settings, model: Refusing(messages=iter(())))
    state = await run(example_input())
    assert state["status"] == "completed" and state["errors"] == []
    assert {f["code"] for f in state["fallbacks"]} == {"llm_refused"}
    assert len(ledger) == 6  # a refusal is not re-asked
    assert state["strategies"] == ["rules"]

