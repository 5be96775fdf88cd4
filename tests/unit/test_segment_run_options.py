"""A run's own LangGraph options as a segment applies them (issues 25, 26).

The config a segment runs with, its breakpoints next to the runtime's, which stop ends
the run, and a subgraph's events and tokens under the Agent Server's names.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessageChunk

from overseer import token_stream
from overseer.run_body import segment_settings
from overseer.run_types import RUN_ID_KEY, SEGMENT_KEY, GraphRunInput, RunSettings
from overseer.runtime.segment_call import SegmentCall
from overseer.runtime.segment_setup import loop_breakpoints, own_breakpoint, run_config
from overseer.settings import Settings
from overseer.thread_streams import StreamDeriver
from overseer.thread_sync import thread_status

RUN = {"run_id": "r-1", "thread_id": "t-1", "graph_id": "g", "assistant_id": "a-1",
       "workflow_run_id": "w-1"}


def _call(**kwargs: object) -> SegmentCall:
    return SegmentCall(run_id="r-1", pipeline="g", thread_id="t-1", **kwargs)  # type: ignore[arg-type]


def test_the_runs_config_goes_under_the_runtimes_keys():
    call = _call(config={"configurable": {"language": "fr", "thread_id": "spoof",
                                          "checkpoint_id": "c", "__pregel_x": 1},
                         "tags": ["user:web"],
                         "metadata": {"team": "a", RUN_ID_KEY: "spoof", SEGMENT_KEY: 9}},
                 recursion_limit=7, segment=2)
    config = run_config(call, ["cb"])
    assert config["configurable"] == {"language": "fr", "thread_id": "t-1"}
    assert config["metadata"] == {"team": "a", RUN_ID_KEY: "r-1", SEGMENT_KEY: 2}
    assert config["tags"] == ["user:web"] and config["recursion_limit"] == 7
    assert config["callbacks"] == ["cb"]
    assert "tags" not in run_config(_call(), [])


def test_breakpoints_join_the_runtimes_and_only_the_runs_own_end_it():
    assert loop_breakpoints(_call(), []) == {}
    assert loop_breakpoints(_call(interrupt_before=["b"]), ["placed"]) == {
        "interrupt_before": ["b", "placed"]}
    assert loop_breakpoints(_call(interrupt_before="*"), ["placed"]) == {"interrupt_before": "*"}
    assert loop_breakpoints(_call(one_step=True, interrupt_after=["x"]), []) == {
        "interrupt_after": "*"}

    assert own_breakpoint(_call(interrupt_before=["b"]), ["b"], ["a"])
    assert not own_breakpoint(_call(interrupt_before=["b"]), ["placed"], ["a"])
    assert own_breakpoint(_call(interrupt_after=["a"]), ["placed"], ["a"])
    assert not own_breakpoint(_call(interrupt_after=["a"]), ["c"], ["z"])
    assert not own_breakpoint(_call(one_step=True, interrupt_before="*"), ["b"], [])


def test_segment_settings_from_an_agent_server_run():
    assert segment_settings({}) == {}
    own = segment_settings({"config": {"configurable": {"k": 1}, "recursion_limit": 9,
                                       "other": True},
                            "context": {}, "interrupt_after": ["n"],
                            "stream_subgraphs": True, "durability": "exit",
                            "stream_mode": ["messages-tuple", "tasks", "values"]})
    assert own == {
        "graph_config": {"configurable": {"k": 1}}, "recursion_limit": 9, "context": {},
        "interrupt_after": ["n"], "stream_subgraphs": True, "durability": "exit",
        "stream_modes": ["tasks", "messages"]}
    run = RunSettings(**own)  # every key is a field: a typo would raise TypeError here
    assert run.recursion_limit == 9 and run.stream_modes == ["tasks", "messages"]


def test_run_settings_from_the_operator_the_request_and_the_starter():
    """One typed RunSettings per run: the operator's defaults, then metadata, then the starter's."""
    from overseer.runs import run_settings

    settings = Settings(environment="test", durability="async", segment_heartbeat_seconds=4.0)
    run = run_settings(settings, {"llm_budget_usd": 0.5, "durability": "sync"},
                       {"stream_modes": ["messages"], "local_seconds": 2.0})
    assert (run.durability, run.heartbeat_seconds, run.local_seconds) == ("sync", 4.0, 2.0)
    assert run.llm_budget_usd == 0.5 and run.llm_budget_tokens is None
    assert run.approval["sla_seconds"] == settings.approval_sla_seconds
    with pytest.raises(TypeError):
        run_settings(settings, {}, {"segment_local_seconds": 1})  # the old key is no field


def test_a_run_started_with_its_settings_in_options_reads_them_from_there():
    """A run from before ``GraphRunInput.run`` (and its replay) keeps the settings it started with."""
    old = GraphRunInput(run_id="r", pipeline="p", input={}, options={
        "durability": "exit", "segment_local_seconds": 5, "segment_heartbeat_seconds": 1.5,
        "stream_modes": ["messages"], "approval_sla_seconds": 60, "llm_budget_tokens": 500,
        "continue_as_new_after_segments": 1, "ocr_dpi": 300})
    run = old.run_settings()
    assert (run.durability, run.local_seconds, run.heartbeat_seconds) == ("exit", 5.0, 1.5)
    assert run.approval == {"sla_seconds": 60} and run.llm_budget_tokens == 500
    assert run.continue_as_new_after_segments == 1 and run.stream_modes == ["messages"]
    new = GraphRunInput(run_id="r", pipeline="p", input={}, options={"durability": "exit"},
                        run=RunSettings(durability="sync"))
    assert new.run_settings().durability == "sync"  # the typed settings win


def test_a_run_ended_at_a_breakpoint_leaves_its_thread_interrupted():
    ended = {"marks": [{"offset": 3, "event": "end"}], "published": 4}
    assert thread_status({**ended, "next": ["middle"]}) == "interrupted"
    assert thread_status({**ended, "next": []}) == "idle"


def test_subgraph_chunks_and_tokens_keep_their_namespace():
    deriver = StreamDeriver(RUN, ["updates", "messages-tuple"], live_messages=True)  # type: ignore[arg-type]
    assert deriver.feed(0, "updates|sub:1", {"count": {}}) == [("updates|sub:1", {"count": {}})]
    assert deriver.feed(1, "values|sub:1", {"x": 1}) == []  # values not asked
    token = token_stream.token_item(AIMessageChunk(content="a", id="m"), {}, ("sub:1", "in:2"))
    assert token[2] == ["sub:1", "in:2"]
    [(name, data)] = deriver.token(token)
    assert name == "messages|sub:1|in:2" and data[0]["content"] == "a"
    [(name, _)] = deriver.token(token_stream.token_item(AIMessageChunk(content="b", id="n"), {}))
    assert name == "messages"
