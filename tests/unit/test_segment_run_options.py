"""A run's own LangGraph options as a segment applies them (issues 25, 26).

The config a segment runs with, its breakpoints next to the runtime's, which stop ends
the run, and a subgraph's events and tokens under the Agent Server's names.
"""

from __future__ import annotations

from langchain_core.messages import AIMessageChunk

from overseer import token_stream
from overseer.run_body import segment_options
from overseer.run_types import RUN_ID_KEY, SEGMENT_KEY
from overseer.runtime.segments import (
    SegmentCall,
    _breakpoints,
    _own_breakpoint,
    run_config,
)
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
    assert _breakpoints(_call(), []) == {}
    assert _breakpoints(_call(interrupt_before=["b"]), ["placed"]) == {
        "interrupt_before": ["b", "placed"]}
    assert _breakpoints(_call(interrupt_before="*"), ["placed"]) == {"interrupt_before": "*"}
    assert _breakpoints(_call(one_step=True, interrupt_after=["x"]), []) == {
        "interrupt_after": "*"}

    assert _own_breakpoint(_call(interrupt_before=["b"]), ["b"], ["a"])
    assert not _own_breakpoint(_call(interrupt_before=["b"]), ["placed"], ["a"])
    assert _own_breakpoint(_call(interrupt_after=["a"]), ["placed"], ["a"])
    assert not _own_breakpoint(_call(interrupt_after=["a"]), ["c"], ["z"])
    assert not _own_breakpoint(_call(one_step=True, interrupt_before="*"), ["b"], [])


def test_segment_options_from_an_agent_server_run():
    assert segment_options({}) == {}
    assert segment_options({"config": {"configurable": {"k": 1}, "recursion_limit": 9,
                                       "other": True},
                            "context": {}, "interrupt_after": ["n"],
                            "stream_subgraphs": True}) == {
        "graph_config": {"configurable": {"k": 1}}, "recursion_limit": 9, "context": {},
        "interrupt_after": ["n"], "stream_subgraphs": True}


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
