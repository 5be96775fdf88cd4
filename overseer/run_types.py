"""The run's wire types: what the API, a pipeline's routes and the workflow exchange.

A run's input and result (:class:`GraphRunInput`, :class:`GraphRunResult`), the approval
gate's update arguments (:class:`DecisionInput`, :class:`ClaimInput`,
:class:`ReassignInput`), the task queue, the search attributes and the run's stream topic.
They live in the core so that a starter never imports the workflows
(:mod:`workflows.segment_run`, :mod:`workflows.approval` use them from here); the names are
wire names, never renamed. Plain dataclasses, safe in Temporal's sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from temporalio.common import SearchAttributeKey
from temporalio.contrib.workflow_streams import WorkflowStreamState

RUN_WORKFLOW = "SegmentRunWorkflow"
"""The workflow type every run is (:class:`workflows.segment_run.SegmentRunWorkflow`)."""
DEFAULT_TASK_QUEUE = "overseer"
"""Workflows and node activities of every pipeline."""
PIPELINE_ATTRIBUTE = SearchAttributeKey.for_keyword("OverseerPipeline")
STATUS_ATTRIBUTE = SearchAttributeKey.for_keyword("OverseerStatus")
SEARCH_ATTRIBUTES = (PIPELINE_ATTRIBUTE, STATUS_ATTRIBUTE)
STREAM_TOPIC = "graph"
"""The run's durable event stream (``WorkflowStream`` topic): ``{"event", "data"}`` items —
``metadata`` first, then LangGraph's ``values`` / ``updates`` / ``custom`` chunks per step,
``interrupt`` when the run waits for a decision, and ``end`` or ``error`` last. Offsets are
stable across replays, so a reader resumes after the last offset it saw without duplicates."""


RUN_ID_KEY = "overseer_run_id"
"""Checkpoint metadata naming the run that wrote a checkpoint (from the config's ``metadata``)."""
SEGMENT_KEY = "overseer_segment"
"""Checkpoint metadata naming the segment of its run that wrote it (``SegmentCall.segment``:
0 for the start, one more per resume), so a segment run again tells its own checkpoints from
those of the run's earlier segments."""

@dataclass
class RunSettings:
    """How a run's workflow runs its graph: what its starter chose, typed (``GraphRunInput.run``).

    Built once by the run service (:meth:`overseer.runs.RunRequest.workflow_input`) from the
    operator's settings, the request's per-run options and an Agent Server run's own choices.
    A field at its zero value means the workflow's default.

    Attributes:
        durability: LangGraph's checkpoint durability (``sync`` | ``async`` | ``exit``); None:
            ``async``, or ``exit`` for a pipeline's short input tried locally.
        local_seconds: try each segment as a local activity this long first (0: never).
        heartbeat_seconds: a segment's heartbeat time-out (0: ``SEGMENT_HEARTBEAT_SECONDS``).
        recursion_limit: LangGraph's recursion limit per segment (0: 100).
        stream_modes: LangGraph's stream modes the segments collect for the run's thread.
        stream_subgraphs: stream the subgraphs' chunks too.
        checkpoint_id: start from this checkpoint of the thread (None: its latest).
        graph_config: the run's own LangGraph config (``configurable``, ``tags``, ``metadata``).
        context: LangGraph's runtime context for the run.
        interrupt_before: the run's breakpoints before nodes (``"*"`` or names; None: the graph's).
        interrupt_after: the run's breakpoints after nodes.
        llm_budget_usd: the run's LLM cost budget in US dollars (None: none).
        llm_budget_tokens: the run's LLM token budget (None: none).
        approval: the escalation ladder its approvals climb (``EscalationLadder``'s fields).
        continue_as_new_after_segments: continue as new after this many segments (0: when
            Temporal suggests it).
    """

    durability: str | None = None
    local_seconds: float = 0.0
    heartbeat_seconds: float = 0.0
    recursion_limit: int = 0
    stream_modes: list[str] = field(default_factory=list)
    stream_subgraphs: bool = False
    checkpoint_id: str | None = None
    graph_config: dict[str, Any] = field(default_factory=dict)
    context: Any = None
    interrupt_before: Any = None
    interrupt_after: Any = None
    llm_budget_usd: float | None = None
    llm_budget_tokens: int | None = None
    approval: dict[str, Any] = field(default_factory=dict)
    continue_as_new_after_segments: int = 0

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> RunSettings:
        """The settings of a run whose input carried them in ``GraphRunInput.options``.

        Runs started before ``GraphRunInput.run`` existed (and their replays) read them
        here; keys other than these are the pipeline's own and are left out.
        """
        approval = dict(options.get("approval") or {})
        if "approval_sla_seconds" in options:
            approval.setdefault("sla_seconds", options["approval_sla_seconds"])
        return cls(durability=options.get("durability"),
                   local_seconds=float(options.get("segment_local_seconds") or 0),
                   heartbeat_seconds=float(options.get("segment_heartbeat_seconds") or 0),
                   recursion_limit=int(options.get("recursion_limit") or 0),
                   stream_modes=list(options.get("stream_modes") or []),
                   stream_subgraphs=bool(options.get("stream_subgraphs")),
                   checkpoint_id=options.get("checkpoint_id"),
                   graph_config=dict(options.get("graph_config") or {}),
                   context=options.get("context"),
                   interrupt_before=options.get("interrupt_before"),
                   interrupt_after=options.get("interrupt_after"),
                   llm_budget_usd=options.get("llm_budget_usd"),
                   llm_budget_tokens=options.get("llm_budget_tokens"),
                   approval=approval,
                   continue_as_new_after_segments=int(
                       options.get("continue_as_new_after_segments") or 0))


@dataclass
class GraphRunInput:
    """Input of one run of a registered graph.

    Attributes:
        run_id: UUID string; the workflow id is ``<pipeline>-<run_id>``.
        pipeline: registry name.
        input: the graph input, :func:`overseer.graph_codec.encode`-d.
        options: the pipeline's options snapshot and the request's per-run options, as
            recorded (the graph's nodes read theirs from its input; the workflow reads none).
        metadata: the request's metadata.
        submitted_by: the submitter's subject.
        search_attributes: upsert OverseerPipeline/OverseerStatus.
        resume_from: set on a retry that goes on from the failed run's checkpoints
            (``{"as_node": the last node that completed}``); such a run never splits.
        thread_id: the Agent Server thread the run belongs to (the graph's ``thread_id``);
            LangGraph's checkpointer holds the thread's state, so a new run on it starts from
            there (reducers see the old values).
        parent_run_id: the run that split its submission into this one (a child never
            splits again; see :attr:`overseer.pipelines.Pipeline.run.split`).
        carry: set by the run itself when it continues as new: the run's counters, the
            segment that just ended and the next one's call (the graph's state stays in
            LangGraph's checkpointer).
        stream_state: the run's event stream, handed over on continue-as-new.
        run: how the workflow runs it (:class:`RunSettings`); None for a run started before
            the field existed, whose settings are in ``options``.
        announce: publish the run's ``metadata`` item first on its durable stream (a ``/v1``
            run's stream readers show it). An Agent Server run's reader makes its own
            ``metadata`` event, so its run is started without it: the reader's first poll
            of the stream then waits for the segment's outcome, one workflow update a
            streamed run instead of two. (A run started before the field existed decodes
            with ``True``, so it replays as it ran.)
    """

    run_id: str
    pipeline: str
    input: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    submitted_by: str = "unknown"
    search_attributes: bool = True
    resume_from: dict[str, Any] | None = None
    thread_id: str | None = None
    parent_run_id: str | None = None
    carry: dict[str, Any] | None = None
    stream_state: WorkflowStreamState | None = None
    announce: bool = True
    run: RunSettings | None = None

    def run_settings(self) -> RunSettings:
        """How the workflow runs it: :attr:`run`, or for an older run what its ``options`` say."""
        return self.run if self.run is not None else RunSettings.from_options(self.options)


@dataclass
class GraphRunResult:
    """A finished run: status, outcome and the graph's final state as JSON.

    Attributes:
        output: the graph's final state (JSON); None for a run that split.
        result: the pipeline's result view of it (:attr:`~overseer.pipelines.Pipeline.run.result`),
            ``{}`` when the pipeline declares none.
        children: the child runs of a run that split (outcome ``split``).
        final_event: the final event of the pipeline's own stream
            (:attr:`~overseer.pipelines.Pipeline.run.stream`), if it has one.
    """

    run_id: str
    status: str
    outcome: str | None
    output: Any = None
    result: dict[str, Any] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    final_event: dict[str, Any] | None = None


@dataclass
class DecisionInput:
    """A reviewer's decision, sent as the ``decide`` update or the ``submit_decision`` signal.

    Attributes:
        decision: ``approve`` or ``reject``.
        updates: field edits (applied over the pending proposal when ``apply_proposal``).
        note: free-text reason, kept in the event log.
        decided_by: the reviewer's subject (set by the admin API from the token).
        apply_proposal: on approve, apply the review agent's proposal before the edits.
        budget_usd: on approving a budget stop, the run's new LLM cost budget.
        budget_tokens: on approving a budget stop, the run's new LLM token budget.
        is_admin: the decider is an admin (may override another reviewer's claim).
        resume: free-form value handed to the graph with the decision.
    """

    decision: str
    updates: dict[str, Any] | None = None
    note: str | None = None
    decided_by: str = "unknown"
    apply_proposal: bool = True
    budget_usd: float | None = None
    budget_tokens: int | None = None
    is_admin: bool = False
    resume: Any = None
    """Any JSON value for the graph: ``interrupt()`` returns it unchanged (a graph run)."""
    raw_resume: bool = False
    """``interrupt()`` returns ``resume`` itself, unchanged (an Agent Server ``Command(resume=...)``)."""
    interrupt_id: str | None = None
    """The interrupt whose approval this decides; None: the oldest approval still waiting."""
    more_resumes: dict[str, Any] | None = None
    """Other pending interrupts this decision answers too, ``{interrupt id: value}``: a
    resume map naming several interrupts, as LangGraph takes it; each id must be one of
    the run's approvals still waiting for a decision."""


@dataclass
class ClaimInput:
    """``claim`` / ``release``: who asks, and whether they are an admin (admins may override)."""

    reviewer: str
    is_admin: bool = False
    interrupt_id: str | None = None
    """The interrupt whose approval this claims or releases; None: the oldest one waiting."""


@dataclass
class ReassignInput:
    """``reassign``: give the approval to ``assignee`` (None = unclaimed) and/or a ``group``."""

    by: str
    assignee: str | None = None
    group: str | None = None
    is_admin: bool = False
    interrupt_id: str | None = None
    """The interrupt whose approval this reassigns; None: the oldest one waiting."""
