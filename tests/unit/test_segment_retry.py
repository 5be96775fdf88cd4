"""What a retried segment runs (overseer.runtime.segment_setup.retry_input), on a real LangGraph graph.

The checkpointer here is LangGraph's in-memory one; the decision reads only LangGraph's
state (its latest checkpoint's metadata, ``next`` and interrupts), the same on Postgres.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from overseer.registry import builder_of, load_langgraph_json
from overseer.run_types import RUN_ID_KEY, SEGMENT_KEY
from overseer.runtime.segment_call import SegmentCall
from overseer.runtime.segment_setup import retry_input

USER_GRAPHS = Path(__file__).parents[1] / "graphs" / "user_graph" / "langgraph.json"


def app_of(name: str) -> Any:
    return builder_of(load_langgraph_json(USER_GRAPHS)[name].graph).compile(
        checkpointer=InMemorySaver())


def config(run_id: str, thread: str = "t", segment: int = 0) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread},
            "metadata": {RUN_ID_KEY: run_id, SEGMENT_KEY: segment}}


async def test_a_run_that_wrote_nothing_starts_again_from_its_input():
    app = app_of("constructs")
    call = SegmentCall(run_id="r1", pipeline="constructs", thread_id="t")
    assert await retry_input(app, config("r1"), call, {"topic": "a"}) == ({"topic": "a"}, False)


async def test_a_run_that_had_ended_only_ends_again():
    app = app_of("constructs")
    await app.ainvoke({"topic": "a"}, config("r1"))
    call = SegmentCall(run_id="r1", pipeline="constructs", thread_id="t")
    assert await retry_input(app, config("r1"), call, {"topic": "a"}) == (None, True)
    # and running None from there runs no node again
    steps = [c async for c in app.astream(None, config("r1"), stream_mode="tasks")]
    assert steps == []
    # another run on the same thread did not write it: its input is applied
    other = SegmentCall(run_id="r2", pipeline="constructs", thread_id="t")
    assert await retry_input(app, config("r2"), other, {"topic": "b"}) == ({"topic": "b"},
                                                                             False)


async def test_a_resume_still_waiting_is_sent_again_and_a_consumed_one_is_not():
    app = app_of("approvals")
    await app.ainvoke({"topic": "x"}, config("r1"))
    first = (await app.aget_state(config("r1"))).interrupts[0]
    call = SegmentCall(run_id="r1", pipeline="approvals", thread_id="t",
                       resume={first.id: {"decision": "yes"}})
    answer = Command(resume={first.id: {"decision": "yes"}})
    got, from_latest = await retry_input(app, config("r1"), call, answer)
    assert got is answer and from_latest
    await app.ainvoke(answer, config("r1"))  # consumed: the graph now waits on the next one
    assert await retry_input(app, config("r1"), call, answer) == (None, True)


async def test_a_superstep_run_again_from_a_recreated_checkpoint_keeps_its_event_keys():
    """When a crash loses the checkpoint a segment started from (``async``/``exit`` writes not
    yet in Postgres), the retry re-creates it with a new id, so LangGraph's task ids change;
    the step and path that key ``node.completed`` do not (``constructs`` has ``Send``
    fan-out, a subgraph and ``Command``)."""
    from overseer.runtime.segment_record import TaskSteps

    app = app_of("constructs")

    async def attempt(thread: str) -> tuple[list[str], list[str]]:
        where, ids, keys = TaskSteps(), [], []
        async for _, chunk in app.astream({"topic": "alpha beta"}, {
                **config("r1", thread), "callbacks": [where]}, stream_mode=["tasks"]):
            if "result" in chunk:
                ids.append(chunk["id"])
                keys.append(f"{chunk['name']}:{where.of(chunk['id'])}")
        return ids, keys

    first_ids, first_keys = await attempt("lost")
    again_ids, again_keys = await attempt("recreated")
    assert set(first_ids).isdisjoint(again_ids)
    assert sorted(first_keys) == sorted(again_keys) and len(set(first_keys)) == len(first_keys)
    assert all(":None" not in k for k in first_keys)


async def test_recovered_tasks_carry_the_keys_their_events_were_written_under():
    """A retried segment recovers node.completed from checkpoints (recoverable_tasks) under
    the key TaskSteps gave each task as it ran, Send fan-out and a resume included, so an
    event already in the log is never written twice."""
    from overseer.runtime.segment_record import TaskSteps, recoverable_tasks

    for graph, first, then in (("constructs", {"topic": "one two three"}, None),
                               ("approvals", {"topic": "x"}, "resume")):
        app = app_of(graph)
        cfg = config("r1")
        ran: set[tuple[str, str]] = set()
        value: Any = first
        for _ in range(4):
            steps = TaskSteps()
            async for chunk in app.astream(value, {**cfg, "callbacks": [steps]},
                                           stream_mode="tasks"):
                if "result" in chunk and not chunk.get("error") and not chunk.get("interrupts"):
                    where = steps.of(chunk["id"])
                    assert where is not None
                    ran.add((chunk["name"], where))
            pending = (await app.aget_state(cfg)).interrupts
            if then is None or not pending:
                break
            value = Command(resume={i.id: {"decision": "yes"} for i in pending})
        recovered = {(str(t.name), key) for t, key in await recoverable_tasks(app, cfg, "r1")}
        assert ran and recovered == ran, graph
        if graph == "constructs":  # Send fan-out: one task per word
            assert len([w for _, w in ran if "__pregel_push" in w]) >= 3, ran
        # another run's checkpoints on the same thread are not this run's to recover
        assert await recoverable_tasks(app, cfg, "someone-else") == []


async def test_a_later_segment_that_wrote_nothing_gets_its_own_input_not_the_runs_checkpoint():
    """A resume segment run again before it wrote a checkpoint (or a local try, which always
    looks) finds the latest checkpoint written by its run's earlier segment: that is not its
    own, so its resume is sent again. Here the earlier segment stopped before a node (as a
    pipeline's gate stops before the node that asks), so no interrupt is pending that the
    resume could match; before segments were told apart, the resume was dropped."""
    app = app_of("constructs")
    await app.ainvoke({"topic": "a"}, config("r1"), interrupt_before=["work"])
    assert not (await app.aget_state(config("r1"))).interrupts
    answer = Command(resume={"asked-later": {"decision": "yes"}})
    resume = SegmentCall(run_id="r1", pipeline="constructs", thread_id="t", segment=1,
                         resume={"asked-later": {"decision": "yes"}})
    assert await retry_input(app, config("r1", segment=1), resume, answer) == (answer, False)
    # once the resume segment wrote a checkpoint of its own, a retry goes on from it
    await app.ainvoke(None, config("r1", segment=1))
    assert await retry_input(app, config("r1", segment=1), resume, answer) == (None, True)
