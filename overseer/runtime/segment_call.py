"""A run segment's call and result: what ``SegmentRunWorkflow`` and ``run_segment`` exchange.

Plain dataclasses, safe in Temporal's workflow code (:mod:`workflows.segment_run` builds the
call; :func:`overseer.runtime.segments.run_segment` answers with the result).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SegmentCall:
    """One segment of a run.

    Attributes:
        run_id: the Overseer run.
        pipeline: the registry name of its graph.
        thread_id: LangGraph's thread (the run's own id unless it belongs to a thread).
        input: the run's graph input, :func:`overseer.graph_codec.encode`-d (first segment).
        resume: ``{interrupt id: value}`` for a resume segment (LangGraph's resume map).
        durability: ``sync`` | ``async`` | ``exit`` (LangGraph's).
        recursion_limit: Pregel's step limit.
        go_on: the same segment already ran in part (a local try that did not finish in
            time, or a stop at the run's LLM budget that a reviewer raised): go on from
            what it checkpointed, as a retry does.
        stream: an Agent Server run: write the segment's chunks (``values``, ``updates``,
            ``custom`` and what ``modes`` asks for) live to ``agent_run_tokens`` as LangGraph's
            loop makes them (:mod:`overseer.token_stream`), and return the thread's state.
        segment: the segment's number in its run (0 = the start; each resume adds one): keys
            the ledger entries of the chat-model calls made in it.
        checkpoint_id: start from this past checkpoint of the thread (an Agent Server run
            with ``checkpoint_id``: LangGraph forks there); the first segment only.
        budget: the run's LLM budget ``{"usd", "tokens"}`` (None = not limited); a chat-model
            call that would start once ``spent`` plus this segment's calls have passed it
            is not made: the segment stops there (status ``budget``).
        spent: the run's LLM spend before this segment ``{"usd", "tokens", "calls"}``.
        heartbeat_seconds: the activity's heartbeat time-out; the segment heartbeats three
            times per time-out while a node runs, so a long node is not taken for a dead worker.
        leg: how many times this segment went on (``go_on``) before: keys its ledger entries
            apart from the earlier legs' (each leg's first attempt is attempt 1).
        one_step: run one superstep only (LangGraph's ``interrupt_after="*"``): the step of
            a node with options, run as its own activity with them. Otherwise the segment
            stops before any superstep that has such a node
            (:func:`overseer.node_options.placed_nodes`; ``interrupt_before``).
        modes: with ``stream``, LangGraph stream modes the run asked for beyond
            :data:`overseer.runtime.segment_stream.STREAM_MODES` (``tasks``, ``checkpoints``,
            ``debug``): their chunks are returned too; ``messages``: LangGraph's messages
            chunks (tokens as a model makes them) are written live to ``agent_run_tokens``
            (:mod:`overseer.token_stream`).
        stream_base: with ``stream``, how many items the run's durable stream held when the
            segment started: LangGraph's ``messages`` chunks (tokens as they come) are
            written with it to ``agent_run_tokens`` (:mod:`overseer.token_stream`).
        config: the run's own LangGraph config (an Agent Server run's ``config``):
            ``configurable`` keys (beyond the thread and checkpoint ids, which are the
            runtime's), ``tags`` and ``metadata``, given to every node as LangGraph gives them.
        context: the run's runtime context (LangGraph's ``context=``; a dict becomes the
            graph's ``context_schema`` when it is a dataclass or pydantic model).
        interrupt_before: the run's breakpoints before these nodes (``"*"``: every node).
        interrupt_after: the run's breakpoints after these nodes (``"*"``: every node).
            A segment stopped at one of the run's own breakpoints ends the run (``done``
            with ``next`` set); the thread's next run with no input goes on from there.
        subgraphs: with ``stream``, stream subgraphs' chunks too, their event named
            ``"<mode>|<namespace>"`` as the Agent Server names them (``stream_subgraphs``).
        values_at_pause: return the thread's values at an interrupt too: the pipeline's
            ``check_decision`` reads the state at the pause (``Pipeline.gate.decides_on_state``).
        ending: for a thread's run (``{"thread_state", "last_decision"}``:
            :meth:`workflows.durable_stream.DurableStream.segment_ending`): a segment that ends
            the graph (``done``) writes the run's ending and hands the thread on itself
            (:mod:`overseer.runtime.segment_ending`), and says so in ``SegmentResult.ended``.
        yield_after: a local try (only) stops at the first superstep boundary this many
            seconds after it started (0 = never) and reports ``paused`` with ``yielded``: the
            workflow goes on from its checkpoint in the heartbeating activity, so nothing
            runs twice and from then on a cancel reaches it at a heartbeat
            (:class:`overseer.runtime.segment_setup.YieldAfter`).
    """

    run_id: str
    pipeline: str
    thread_id: str
    input: dict[str, Any] | None = None
    resume: dict[str, Any] | None = None
    durability: str = "async"
    recursion_limit: int = 100
    go_on: bool = False
    stream: bool = False
    segment: int = 0
    checkpoint_id: str | None = None
    budget: dict[str, Any] | None = None
    spent: dict[str, Any] = field(default_factory=dict)
    heartbeat_seconds: float = 10.0
    leg: int = 0
    one_step: bool = False
    modes: list[str] = field(default_factory=list)
    stream_base: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    context: Any = None
    # str first: Temporal's JSON converter tries a union's types in order, and would make
    # "*" the list ["*"], which LangGraph reads as a node named "*"
    interrupt_before: str | list[str] | None = None
    interrupt_after: str | list[str] | None = None
    subgraphs: bool = False
    values_at_pause: bool = False
    ending: dict[str, Any] | None = None
    yield_after: float = 0.0


@dataclass
class SegmentResult:
    """How a segment ended.

    Attributes:
        status: ``interrupted`` (waiting on ``interrupts``), ``budget`` (stopped before a
            chat-model call past the run's LLM budget, at ``stopped_at``), ``paused`` (the
            graph goes on with the nodes in ``next``: a node with options is among them, or a
            one-step segment ended) or ``done`` (the graph ended, or stopped at one of the
            run's own breakpoints: then ``next`` names the nodes it stopped before).
        values: the thread's values (JSON) when ``done``, ``budget`` or ``paused``; while
            interrupted only with ``SegmentCall.values_at_pause`` (the checkpointer holds
            them).
        interrupts: ``[{"id", "value"}]`` pending, oldest first.
        nodes: the nodes this attempt ran, in order (what the Temporal UI summary names).
        snapshot: with ``SegmentCall.stream``: the thread's state as the workflow's
            ``get_thread_state`` gives it (``values``, ``encoded``, ``next``, ``tasks``,
            ``interrupts``, checkpoint ids, ``metadata``, ``created_at``).
        usage: this attempt's chat-model spend ``{"cost_usd", "input_tokens",
            "output_tokens", "calls"}`` (a node activity's ``usage`` shape).
        stopped_at: with status ``budget``, the node whose call was not made.
        blocked: with status ``budget``, when the node stopped on its own pre-call
            estimate (:class:`overseer.budget.BudgetStop`): the spend and the call's
            estimate; None when the spend had passed the budget.
        next: with status ``paused`` (or ``done`` at a breakpoint), the nodes of the next
            superstep.
        interrupted_in: with status ``interrupted``, the nodes whose ``interrupt()`` waits.
        ended: with status ``done`` and ``SegmentCall.ending``, the ending the segment wrote:
            ``{"webhooks"}`` (:func:`overseer.runtime.segment_ending.write_ending`).
        yielded: with status ``paused``, a local try stopped at its ``yield_after``: the
            rest of the segment belongs in the heartbeating activity.
    """

    status: str
    values: dict[str, Any] | None = None
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    snapshot: dict[str, Any] | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    stopped_at: str | None = None
    blocked: dict[str, Any] | None = None
    next: list[str] = field(default_factory=list)
    interrupted_in: list[str] = field(default_factory=list)
    ended: dict[str, Any] | None = None
    yielded: bool = False
