"""``GraphRunWorkflow``: the workflow that drives a registered LangGraph graph node by node.

The graph runs under LangGraph's own Pregel loop *inside* the workflow, so edges,
``Send`` fan-out, reducers, ``Command(goto=..., update=...)``, subgraphs and interrupts
behave exactly as LangGraph defines them; what changes is where each node runs:

- ``activity`` (default): a proxy calls the generic ``run_node`` activity
  (:mod:`activities.graph_nodes`), so Temporal owns the node's retries, time-outs and
  heartbeats, and a worker crash mid-node resumes on another worker.
- ``local_activity``: the same, as a local activity (short I/O; no task-queue round trip).
- ``workflow``: the node's own code, in the workflow (cheap, pure steps).

Node metadata ``{"overseer": {...}}`` chooses (:class:`overseer.pipelines.NodeOptions`);
the keys of Temporal's LangGraph plugin (``execute_in``, ``start_to_close_timeout``,
``retry_policy``, ``summary``) are read too, so a graph written for it runs unchanged. A
compiled subgraph added as a node is run node by node (its nodes become activities, its
interrupts are the run's interrupts), unless its metadata places it in one activity.

What the runtime fixes that the Temporal LangGraph plugin does not:
sync routers and sync workflow nodes are called directly instead of through
``run_in_executor``; lambdas, closures and ``functools.partial`` nodes are found by path,
not by ``__qualname__``; ``Command(goto=[Send(...)])`` and LangChain messages cross the
activity boundary with their types (:mod:`overseer.graph_codec`); checkpoint ids come from
the workflow's clock and random source, so interrupt ids survive a replay and parallel
interrupts resume by id after a worker restart; bugs fail the run once, with the node named.

Every interrupt is an approval on the shared gate (:class:`workflows.approval.ApprovalGate`):
one approval per pending interrupt, oldest id first. ``interrupt()`` returns the decision's
``resume`` exactly as sent whenever the decision carries one, whoever gives it (the SDK's
``Command(resume=...)``, the admin API, the console, the escalation ladder's
``final_resume``): LangGraph's meaning, issue 26. A decision without a ``resume`` gives
``{"decision", "note", "updates", "resume": None, "decided_by"}``.

LLM budget: every chat-model call a node makes is metered (any LangChain model;
:class:`activities.graph_nodes.UsageMeter`). Once a run's spend passes its budget (options
``llm_budget_usd`` / ``llm_budget_tokens``, e.g. from the request's metadata), the run
stops before its next node for an approval (payload ``kind: llm_budget``): approve with a
higher ``budget_usd`` / ``budget_tokens``, or reject to end it ``rejected`` /
``budget_denied`` with the state so far.

Pipelines with more than a graph extend this workflow through hooks
(:class:`overseer.pipelines.Pipeline`: ``make_input``, ``split``, ``check_decision``,
``result``, ``node_snapshot``, ``stream``), never with a workflow of their own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import random
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NoReturn, cast

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    TemporalError,
    is_cancelled_exception,
)

from workflows.approval import ApprovalGate, DecisionInput, EscalationLadder
from workflows.task_queues import STATUS_ATTRIBUTE

with workflow.unsafe.imports_passed_through():
    import langgraph.checkpoint.base as _checkpoint_base
    import langgraph.graph.message as _message_module
    import langgraph.pregel._checkpoint as _pregel_checkpoint
    from langchain_core.runnables import RunnableConfig
    from langgraph._internal._runnable import RunnableCallable
    from langgraph.checkpoint.base.id import UUID as _UUID6
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.config import get_stream_writer
    from langgraph.pregel import Pregel
    from langgraph.types import Command, interrupt
    from opentelemetry import trace
    from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState

    from activities.graph_nodes import NODE_ERROR, NodeCall, NodeResult, put_state_blob
    from activities.notify import notify_webhook
    from activities.segments import snapshot_of
    from observability.metrics import WORKFLOW_NODE_DURATION
    from overseer.budget import check_budget_decision, over_budget
    from overseer.graph_codec import (
        CLAIM_CHECK_BYTES,
        decode,
        encode,
        encoded_size,
        to_jsonable,
    )
    from overseer.pipelines import (
        DecisionRefusedError,
        NodeOptions,
        Pipeline,
        RunStream,
        get_registry,
    )
    from overseer.store.events import (
        APPROVAL_REQUESTED,
        NODE_COMPLETED,
        RUN_CANCELLED,
        RUN_COMPLETED,
        RUN_FAILED,
        RUN_SPLIT,
        RUN_SUBMITTED,
    )

WEBHOOK_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0,
                            maximum_interval=timedelta(minutes=5), maximum_attempts=8)
"""A run's webhook: retried by Temporal for about a quarter of an hour, then given up (logged)."""
DEFAULT_RECURSION_LIMIT = 100
"""Pregel's step limit, unless the run's options set ``recursion_limit``."""
GRAPH_STREAM_MODES = ("values", "updates", "custom")
LEAN_EVENTS_PATCH = "lean-events"
"""Deprecated patch id (every run takes it): local-activity event writes
(:meth:`GraphRunWorkflow.events_locally`). Remove once no history with its marker replays."""
LOCAL_SPLIT_PATCH = "local-split"
"""Deprecated patch id (every run takes it): a short split (``Pipeline.split_locally``) runs
as a local activity."""
RESUME_AS_SENT_PATCH = "resume-as-sent"
"""Deprecated patch id (every run takes it): a decision's ``resume`` reaches ``interrupt()``
unchanged on every path (issue 26)."""
CARRIED_STREAM_ITEMS = 100
"""Stream items a run hands to its next run when it continues as new (the newest)."""
SPLIT_HEARTBEAT_SECONDS = 4
"""Heartbeat time-out of a pipeline's split activity: a dead worker is noticed within it
(``activities.heartbeat.with_heartbeats`` sends one every 2 s while pages are OCR'd)."""
BUDGET_KEYS = ("budget_usd", "budget_tokens")
"""Decision fields a budget stop's approval carries to the graph (new LLM budgets)."""
LLM_BUDGET_KIND = "llm_budget"
"""``kind`` of the approval payload of the runtime's own LLM budget stop."""
STREAM_TOPIC = "graph"
"""The run's durable event stream (``WorkflowStream`` topic): ``{"event", "data"}`` items —
``metadata`` first, then LangGraph's ``values`` / ``updates`` / ``custom`` chunks per step,
``interrupt`` when the run waits for a decision, and ``end`` or ``error`` last. Offsets are
stable across replays, so a reader resumes after the last offset it saw without duplicates."""


@dataclass
class GraphRunInput:
    """Input of one run of a registered graph.

    Attributes:
        run_id: UUID string; the workflow id is ``<pipeline>-<run_id>``.
        pipeline: registry name.
        input: the graph input, :func:`overseer.graph_codec.encode`-d.
        options: the pipeline's options snapshot, plus ``approval`` (the escalation ladder).
        metadata: the request's metadata.
        submitted_by: the submitter's subject.
        search_attributes: upsert OverseerPipeline/OverseerStatus.
        resume_from: ``{"values": encoded state, "as_node": node}``: start as if ``as_node``
            had just written ``values`` (retry from a failed node without redoing the rest).
        thread_id: the Agent Server thread the run belongs to (the graph's ``thread_id``).
        thread_values: the thread's state before this run, encoded: applied with
            ``aupdate_state`` (as :func:`thread_node`) before ``input`` is invoked, so a new
            run on a thread starts from the thread's state (reducers see the old values).
        parent_run_id: the run that split its submission into this one (a child never
            splits again; see :attr:`overseer.pipelines.Pipeline.split`).
        carry: set by the run itself when it continues as new: the graph's latest
            checkpoint (encoded, with its pending writes) and the run's counters.
        stream_state: the run's event stream, handed over on continue-as-new.
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
    thread_values: dict[str, Any] | None = None
    parent_run_id: str | None = None
    carry: dict[str, Any] | None = None
    stream_state: WorkflowStreamState | None = None


@dataclass
class GraphRunResult:
    """A finished run: status, outcome and the graph's final state as JSON.

    Attributes:
        output: the graph's final state (JSON); None for a run that split.
        result: the pipeline's result view of it (:attr:`~overseer.pipelines.Pipeline.result`),
            ``{}`` when the pipeline declares none.
        children: the child runs of a run that split (outcome ``split``).
        final_event: the final event of the pipeline's own stream
            (:attr:`~overseer.pipelines.Pipeline.stream`), if it has one.
    """

    run_id: str
    status: str
    outcome: str | None
    output: Any = None
    result: dict[str, Any] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    final_event: dict[str, Any] | None = None


class ContinueAsNewNeeded(Exception):  # noqa: N818 - a signal to the workflow, not an error
    """The run should continue as new before its next node (raised inside Pregel)."""


class BudgetDeniedError(Exception):
    """A reviewer rejected a stop at the run's LLM budget (raised inside Pregel)."""

    def __init__(self, node: str) -> None:
        super().__init__(f"LLM budget stop before {node} was rejected")
        self.node = node


class NodeFailedError(Exception):
    """A node failed for good (raised inside Pregel, caught by the workflow)."""

    def __init__(self, node: str, code: str, message: str) -> None:
        super().__init__(message)
        self.node, self.code, self.message = node, code, message


@workflow.defn(name="GraphRunWorkflow")
class GraphRunWorkflow(ApprovalGate):
    """Drives one run of any registered graph to a terminal status (see the module docstring)."""

    overseer_graph_run = True
    """Marker for LangGraph's id functions patched below (:func:`_graph_run_instance`)."""
    answers_many = False
    """Whether one decision may answer several pending interrupts (a resume map naming
    them, ``DecisionInput.more_resumes``): node by node, interrupts are answered one at a
    time."""

    @workflow.init
    def __init__(self, inp: GraphRunInput) -> None:
        super().__init__()
        self.stream = WorkflowStream(prior_state=inp.stream_state)
        self._topic = self.stream.topic(STREAM_TOPIC)
        self._inp: GraphRunInput | None = None
        self._spec: Pipeline | None = None
        self._memo: dict[tuple[str, int], NodeResult] = {}
        self._pending_events: list[dict[str, Any]] = []
        self._uuid_last = 0
        self._progress_seq = 0
        self._interrupt_id: str | None = None
        self._published = 0
        self._marks: list[dict[str, Any]] = []
        self._snapshot: dict[str, Any] | None = None
        self._run_stream: RunStream | None = None
        self._own_topic: Any = None
        self._final: dict[str, Any] | None = None
        self._spent: dict[str, Any] = {"usd": 0.0, "tokens": 0, "calls": 0}
        self._budget: dict[str, Any] = {}
        self._budget_lock = asyncio.Lock()
        self._budget_stops = 0
        self._denied = False
        self._executed = 0
        self._ids: random.Random | None = None
        self._webhooks: list[Any] = []

    @workflow.run
    async def run(self, inp: GraphRunInput) -> GraphRunResult:
        """Run the graph; each interrupt waits on the approval gate; failures are recorded, then raised."""
        self._inp, self._run_id, self._pipeline = inp, inp.run_id, inp.pipeline
        self._use_search_attributes = inp.search_attributes
        self._spec, compiled = hosted(inp.pipeline)
        self._budget = {"usd": inp.options.get("llm_budget_usd"),
                        "tokens": inp.options.get("llm_budget_tokens")}
        if self._spec.stream is not None:
            self._run_stream = self._spec.stream(decode(inp.input))
            self._own_topic = self.stream.topic(self._run_stream.topic)
            if inp.carry is None:
                self._emit(self._run_stream.start())
        if inp.carry is None:
            self._publish("metadata", {"run_id": inp.run_id, "pipeline": inp.pipeline,
                                       "workflow_id": workflow.info().workflow_id})
        if self.events_locally() and \
                workflow.info().typed_search_attributes.get(STATUS_ATTRIBUTE) == "running":
            self._status = "running"  # the starter set the search attributes: no upsert
        else:
            await self.set_status("running")
        app = compiled.copy({"checkpointer": LatestCheckpointSaver()})
        config: dict[str, Any] = {
            "configurable": {"thread_id": inp.thread_id or inp.run_id},
            "recursion_limit": int(inp.options.get("recursion_limit") or DEFAULT_RECURSION_LIMIT)}
        try:
            graph_input: Any = decode(inp.input)
            if inp.carry is not None:
                self._restore(app, inp.carry)
                graph_input = None  # resume from the carried checkpoint
            elif self._spec.split and inp.parent_run_id is None and inp.resume_from is None:
                parts = await self._split_parts(graph_input)
                if len(parts) > 1:
                    return await self._start_children(graph_input, parts)
            if inp.thread_values is not None and inp.carry is None:
                await app.aupdate_state(config, decode(inp.thread_values),
                                        as_node=thread_node(inp.pipeline))
            if inp.resume_from and inp.carry is None:
                await app.aupdate_state(config, decode(inp.resume_from["values"]),
                                        as_node=inp.resume_from["as_node"])
                graph_input = None
            pending = await self._drive(app, graph_input, config)
            rounds = 0
            while pending:
                rounds += 1
                first = pending[0]
                await self._snap(app, config)
                decision = await self._ask(first, pending, rounds)
                pending = await self._drive(app, Command(resume={first.id: decision}), config)
        except NodeFailedError as err:
            await self._snap(app, config)
            await self._fail({"code": err.code, "message": err.message, "node": err.node})
        except BudgetDeniedError:
            self._denied = True  # a reviewer stopped the run at its LLM budget: end it here
        except ContinueAsNewNeeded:
            await self._continue_as_new(app)
        except ApplicationError:
            raise
        except asyncio.CancelledError:
            await self._cancelled()
            raise
        except ActivityError as err:  # cancelled while a node ran, or a runtime activity failed
            if is_cancelled_exception(err):
                await self._cancelled()
                raise
            await self._snap(app, config)
            await self._fail({"code": "activity_failed", "message": str(err)[:500], "node": None})
        except Exception as err:  # a bug in a workflow-placed node or router: fail once, named
            await self._snap(app, config)
            await self._fail({"code": NODE_ERROR, "message": f"{type(err).__name__}: {err}"[:500],
                              "node": None})
        await self._snap(app, config)
        values = to_jsonable((await app.aget_state(config)).values)
        status, outcome = (("rejected", "budget_denied") if self._denied
                           else final_status(values, self._last_decision))
        result = self._spec.result(values) if self._spec.result else {}
        if isinstance(result.get("outcome"), str):
            outcome = result["outcome"]  # the pipeline's own word for how the run ended
        await self._finish(status, outcome, result or {"output": values})
        self._publish("end", {"status": status, "outcome": outcome})
        if self._run_stream is not None:
            self._emit(self._run_stream.end(status, outcome, values))
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._webhooks_sent()
        return GraphRunResult(run_id=inp.run_id, status=status, outcome=outcome, output=values,
                              result=result, final_event=self._final)

    async def _split_parts(self, graph_input: Any) -> list[dict[str, Any]]:
        """The pipeline's split activity on the run's input: one dict per part."""
        assert self._spec is not None
        assert self._spec.split is not None
        arg = to_jsonable(graph_input)
        retry = RetryPolicy(maximum_interval=timedelta(seconds=30), maximum_attempts=5,
                            non_retryable_error_types=[NODE_ERROR])
        try:
            workflow.deprecate_patch(LOCAL_SPLIT_PATCH)  # always; older markers replay
            if self._spec.split_locally is not None and self._spec.split_locally(arg):
                parts: list[dict[str, Any]] = await workflow.execute_local_activity(
                    self._spec.split, arg, start_to_close_timeout=timedelta(minutes=2),
                    retry_policy=retry, summary="split the submission into parts")
            else:
                parts = await workflow.execute_activity(
                    self._spec.split, arg, start_to_close_timeout=timedelta(minutes=30),
                    heartbeat_timeout=timedelta(seconds=SPLIT_HEARTBEAT_SECONDS),
                    retry_policy=retry, summary="split the submission into parts")
        except (ActivityError, ApplicationError) as err:
            cause = failure_cause(err)
            await self._fail({"code": cause.type if cause and cause.type else "activity_failed",
                              "message": cause.message if cause else str(err),
                              "node": self._spec.split})
        return parts

    async def _start_children(self, graph_input: dict[str, Any],
                              parts: list[dict[str, Any]]) -> GraphRunResult:
        """One child run per part (``run.submitted`` first, so none is lost); outcome ``split``."""
        assert self._inp is not None
        inp, children = self._inp, []
        for index, part in enumerate(parts):
            child_id = str(uuid.uuid5(uuid.UUID(inp.run_id), f"entry:{index}"))
            child_input = {**graph_input, **part}
            if "run_id" in graph_input:
                child_input["run_id"] = child_id
            workflow_id = f"{inp.pipeline}-{child_id}"
            await self.record_batch(
                [{"run_id": child_id, "key": "run.submitted", "type": RUN_SUBMITTED,
                  "actor": "workflow", "occurred_at": workflow.now().isoformat(),
                  "data": {"pipeline": inp.pipeline, "workflow_id": workflow_id,
                           "parent_run_id": inp.run_id, "submitted_by": inp.submitted_by,
                           "input": {"part": to_jsonable(part)}}}],
                f"submit part {index + 1}")
            await workflow.start_child_workflow(
                type(self).run,  # the child runs as its parent does (node by node or segments)
                dataclasses.replace(inp, run_id=child_id, input=encode(child_input),
                                    parent_run_id=inp.run_id),
                id=workflow_id, parent_close_policy=workflow.ParentClosePolicy.ABANDON)
            children.append(child_id)
        await self.record(RUN_SPLIT, key="run.split",
                          data={"snapshot": {"children": children, "entries": len(children)}})
        await self._finish("completed", "split", {"children": children})
        self._publish("end", {"status": "completed", "outcome": "split", "children": children})
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._webhooks_sent()
        return GraphRunResult(run_id=inp.run_id, status="completed", outcome="split",
                              children=children)

    async def _drive(self, app: Any, graph_input: Any, config: dict[str, Any]) -> list[Any]:
        """Run the graph until it ends or waits; publish every chunk.

        Returns:
            The pending interrupts, oldest id first.
        """
        pending: list[Any] = []
        extra = [m for m in (self._run_stream.stream_modes if self._run_stream else ())
                 if m not in GRAPH_STREAM_MODES]
        async for mode, chunk in app.astream(graph_input, config,
                                             stream_mode=[*GRAPH_STREAM_MODES, *extra]):
            if self._run_stream is not None:
                self._emit(self._run_stream.chunk(mode, chunk))
            if mode in extra:
                continue
            if isinstance(chunk, dict) and "__interrupt__" in chunk:
                if mode == "updates":
                    pending.extend(chunk["__interrupt__"])
                    continue
                chunk = {k: v for k, v in chunk.items() if k != "__interrupt__"}
            self._publish(mode, chunk)
            if mode == "updates" and isinstance(chunk, dict):
                await self._progress(chunk)
        pending = sorted({i.id: i for i in pending}.values(), key=lambda i: i.id)
        if pending:
            self._publish("interrupt", [{"id": i.id, "value": i.value} for i in pending])
        return pending

    async def _progress(self, updates: dict[str, Any]) -> None:
        """``node.completed`` with a snapshot for progress nodes that ran in the workflow.

        Or as a subgraph (activity nodes record their own); written at once so progress
        shows live.
        """
        assert self._inp is not None
        assert self._spec is not None
        nodes = list(self._spec.progress_nodes)
        for node, update in updates.items():
            if node not in nodes or node in _in_activities.get(self._inp.pipeline, set()):
                continue
            self._progress_seq += 1
            index = nodes.index(node)
            snapshot = {k: v for k, v in to_jsonable(update or {}).items()
                        if encoded_size({"json": v}) <= CLAIM_CHECK_BYTES} \
                if isinstance(update, dict) else {}
            snapshot["progress"] = {
                "completed": index + 1, "total": len(nodes),
                "current": nodes[index + 1] if index + 1 < len(nodes) else None,
                "label": f"{index + 1} of {len(nodes)} agents complete"}
            self._pending_events.append({
                "run_id": self._inp.run_id, "key": f"node.completed:{node}:{self._progress_seq}",
                "type": NODE_COMPLETED, "actor": "workflow",
                "occurred_at": workflow.now().isoformat(),
                "data": {"node": node, "placement": "workflow", "attempt": 1,
                         "snapshot": snapshot}})
            await self._flush()

    def _publish(self, event: str, data: Any) -> None:
        if self._run_stream is not None:
            return  # the pipeline's own stream is the run's stream (dense offsets)
        if event in ("interrupt", "end", "error"):
            self._marks.append({"offset": self._published, "event": event})
        self._topic.publish({"event": event, "data": to_jsonable(data)})
        self._published += 1

    async def _snap(self, app: Any, config: dict[str, Any]) -> None:
        """Keep the graph's state (values, next, tasks, interrupts) for :meth:`get_thread_state`."""
        self._snapshot = snapshot_of(await app.aget_state(config))

    @workflow.query
    def get_thread_state(self) -> dict[str, Any]:
        """The graph's state at its last pause or end, for the Agent Server API.

        ``{values, encoded, next, tasks, interrupts, checkpoint_id, parent_checkpoint_id,
        metadata, created_at}`` (empty before the first pause) plus ``status``, ``published``
        (stream items so far), ``marks``: ``[{offset, event}]`` of every ``interrupt``,
        ``end`` and ``error`` stream item, and ``decided`` (a decision was taken on the
        latest approval).
        """
        return {**(self._snapshot or {}), "status": self._status,
                "published": self._published, "marks": list(self._marks),
                "decided": self._decision is not None,
                "decision_note": (self._decision or {}).get("note")}

    def _emit(self, events: list[dict[str, Any]]) -> None:
        """Publish a pipeline stream's events on its topic; a ``done`` event is the final one."""
        for event in events:
            self._own_topic.publish(event)
            if event.get("done"):
                self._final = event

    @workflow.query
    def get_final_event(self) -> dict[str, Any] | None:
        """The pipeline stream's final event once the run has ended (None before, or without one)."""
        return self._final

    @workflow.query
    def get_interrupts(self) -> list[dict[str, Any]]:
        """The interrupt the open approval answers, and every pending one (ids)."""
        if self._approval is None:
            return []
        payload = self._approval["payload"]
        return [{"id": i, "current": i == payload.get("interrupt_id")}
                for i in payload.get("pending_interrupts", [])]

    # -- the gate ----------------------------------------------------------------------------

    _last_decision: str | None = None

    async def _ask(self, first: Any, pending: list[Any], rounds: int) -> Any:
        assert self._inp is not None
        value = to_jsonable(first.value)
        payload = dict(value) if isinstance(value, dict) else {"value": value}
        payload.update({"interrupt_id": first.id,
                        "pending_interrupts": [i.id for i in pending]})
        if self.answers_many and len(pending) > 1:  # every question visible to the reviewer
            payload["other_interrupts"] = [{"id": i.id, "value": to_jsonable(i.value)}
                                           for i in pending if i.id != first.id]
        self._more_resumes: dict[str, Any] = {}
        self._interrupt_id = first.id
        ladder = EscalationLadder.from_options(self._inp.options)
        sla = timedelta(seconds=ladder.sla_seconds or 72 * 3600)
        await self._flush()
        if self._run_stream is not None:
            self._emit(self._run_stream.interrupt(payload))
        self._pause = self._paused_hand_off(f"{rounds}:{first.id}")  # with approval.requested
        decision = await self.request_approval(payload, sla=sla, key=f"{rounds}:{first.id}",
                                               ladder=ladder)
        self._last_decision = decision["decision"]
        self._more_resumes = dict(decision.get("more_resumes") or {})
        if self._run_stream is not None:
            self._emit(self._run_stream.decision(decision))
        workflow.deprecate_patch(RESUME_AS_SENT_PATCH)  # always; older markers replay
        if decision.get("raw") or decision.get("resume") is not None:
            return decision.get("resume")  # interrupt() gets the resume as it was sent
        answer = {"decision": decision["decision"], "note": decision.get("note"),
                  "updates": decision.get("updates") or {}, "resume": decision.get("resume"),
                  "decided_by": decision.get("decided_by")}
        answer.update({k: decision[k] for k in BUDGET_KEYS if decision.get(k) is not None})
        return answer

    def check_decision(self, decision: DecisionInput) -> dict[str, Any]:
        """The pipeline's decision kinds and its own refusal rules (pure; runs in the validator).

        Raises:
            ApplicationError: ``invalid_decision`` for a decision the pipeline does not take;
                the pipeline's own code (``DecisionRefusedError``) otherwise.
        """
        assert self._spec is not None
        assert self._approval is not None
        payload = self._approval["payload"]
        if payload.get("kind") == LLM_BUDGET_KIND:
            if decision.decision == "approve":  # the runtime's own budget stop: raise it
                try:
                    check_budget_decision({"budget_usd": decision.budget_usd,
                                           "budget_tokens": decision.budget_tokens},
                                          payload["budget"])
                except DecisionRefusedError as err:
                    raise ApplicationError(err.message, err.details, type=err.code) from err
            return {"updates": {}, **{k: getattr(decision, k) for k in BUDGET_KEYS
                                      if getattr(decision, k) is not None}}
        if decision.decision not in self._spec.decisions:
            raise ApplicationError(
                f"decision must be one of {', '.join(self._spec.decisions)}",
                {"decision": decision.decision, "allowed": list(self._spec.decisions)},
                type="invalid_decision")
        current = self._approval["payload"].get("interrupt_id")
        if decision.interrupt_id and decision.interrupt_id != current:
            raise ApplicationError(
                f"interrupt {decision.interrupt_id} was already answered",
                {"interrupt_id": decision.interrupt_id, "current": current},
                type="not_awaiting_approval")
        if decision.more_resumes:
            pending = set(self._approval["payload"].get("pending_interrupts") or [])
            if not self.answers_many:
                raise ApplicationError(
                    "this graph runs node by node: answer its interrupts one at a time",
                    {"interrupt_ids": sorted(decision.more_resumes)},
                    type="resume_one_interrupt_at_a_time")
            if not set(decision.more_resumes) <= pending - {current}:
                raise ApplicationError(
                    "a resume map may name only the run's pending interrupts",
                    {"interrupt_ids": sorted(decision.more_resumes),
                     "pending": sorted(pending)}, type="not_awaiting_approval")
        checked = {"decision": decision.decision, "note": decision.note,
                   "updates": dict(decision.updates or {}), "resume": decision.resume,
                   "decided_by": decision.decided_by, "apply_proposal": decision.apply_proposal,
                   "budget_usd": decision.budget_usd, "budget_tokens": decision.budget_tokens}
        try:
            checked = self._spec.checked_decision(self._approval["payload"], checked,
                                                  (self._snapshot or {}).get("values") or {})
        except DecisionRefusedError as err:
            raise ApplicationError(err.message, err.details, type=err.code) from err
        return {"updates": checked["updates"], "resume": checked["resume"],
                **{k: checked[k] for k in BUDGET_KEYS if checked.get(k) is not None},
                **({"raw": True} if decision.raw_resume else {}),
                **({"more_resumes": dict(decision.more_resumes)}
                   if decision.more_resumes else {})}

    def decisions(self) -> tuple[str, ...]:
        """Decision kinds the open approval accepts (the pipeline's; a budget stop's approve/reject)."""
        if self._approval is not None and \
                self._approval["payload"].get("kind") == LLM_BUDGET_KIND:
            return ("approve", "reject")
        return self._spec.decisions if self._spec else ("approve", "reject")

    # -- node dispatch ------------------------------------------------------------------------

    async def call_node(self, path: str, opts: NodeOptions, retry: RetryPolicy | None,
                        state: Any, config: dict[str, Any]) -> Any:
        """Run node ``path`` in an activity; re-raise its interrupts inside Pregel (see module doc)."""
        assert self._inp is not None
        assert self._spec is not None
        conf = config.get("configurable") or {}
        task = str(conf.get("checkpoint_ns") or path)
        node_input = encode(state)
        if encoded_size(node_input) > CLAIM_CHECK_BYTES:
            sha = await workflow.execute_local_activity(
                put_state_blob, node_input, start_to_close_timeout=timedelta(seconds=60))
            node_input = {"ref": sha}
        resumes: list[Any] = []
        while True:
            key = (task, len(resumes))
            result = self._memo.get(key)
            if result is None:
                call = NodeCall(
                    run_id=self._inp.run_id, pipeline=self._inp.pipeline, node=path,
                    input=node_input, resumes=[encode(r) for r in resumes],
                    config={"thread_id": conf.get("thread_id"), "checkpoint_ns": task,
                            "tags": list(config.get("tags") or []),
                            "metadata": to_jsonable(dict(config.get("metadata") or {})),
                            "recursion_limit": config.get("recursion_limit")},
                    task=task, progress_nodes=list(self._spec.progress_nodes))
                if not resumes and self._continue_as_new_due():
                    raise ContinueAsNewNeeded()  # before the node runs: it runs in the next run
                await self._within_budget(path)
                result = await self._execute(path, opts, retry, call)
                self._executed += 1
                self._count_usage(result.usage)
                self._memo[key] = result
            if result.custom:
                writer = get_stream_writer()
                for chunk in result.custom:
                    writer(chunk)
            if result.interrupt is not None:
                resumes.append(interrupt(decode(result.interrupt)))
                continue
            for k in [k for k in self._memo if k[0] == task]:
                del self._memo[k]
            return decode(result.output or {"json": None})

    # -- continue-as-new ------------------------------------------------------------------------

    def _continue_as_new_due(self) -> bool:
        """Temporal suggests it (the history is large), or the run's options say so.

        The options say after how many node executions (``continue_as_new_after_nodes``,
        for tests and tuning).
        """
        assert self._inp is not None
        limit = self._inp.options.get("continue_as_new_after_nodes")
        return workflow.info().is_continue_as_new_suggested() or \
            (limit is not None and bool(limit) and self._executed >= int(limit))

    async def _continue_as_new(self, app: Any) -> NoReturn:
        """Hand the checkpoint, the counters and the event stream to a new run of this workflow.

        The graph's latest checkpoint carries the writes of nodes that already finished in
        the interrupted step; LangGraph resumes from it as after any interruption.
        """
        assert self._inp is not None
        await self._flush()
        saver = app.checkpointer
        latest = saver.get_tuple({"configurable": {"thread_id": self._thread_id(),
                                                   "checkpoint_ns": ""}})
        carry = {
            "checkpoint": encode({"checkpoint": latest.checkpoint, "metadata": latest.metadata,
                                  "writes": [list(w) for w in latest.pending_writes or []]}),
            "counters": self._counters()}
        workflow.logger.info("continuing as new", extra={"run_id": self._inp.run_id,
                                                         "nodes": self._executed})
        await self._hand_over(carry)

    def _counters(self) -> dict[str, Any]:
        """The run's counters a continued run goes on with (spend, budget, stream, gate)."""
        return {"uuid_last": self._uuid_last, "progress_seq": self._progress_seq,
                "published": self._published, "marks": self._marks,
                "spent": self._spent, "budget": self._budget,
                "budget_stops": self._budget_stops,
                "last_decision": self._last_decision,
                "approval_seq": self._approval_seq}

    async def _hand_over(self, carry: dict[str, Any]) -> NoReturn:
        """Continue as new with ``carry`` and the newest items of the run's event stream.

        Waits for the handlers in flight and the webhooks first.
        """
        assert self._inp is not None
        self.stream.detach_pollers()
        self._handing_over = True  # a decide waiting for the next state answers "running"
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._webhooks_sent()
        # The stream goes along, its newest items only (values chunks hold whole states; the
        # hand-over must stay small): a reader further behind is refused and reads from 0,
        # which starts at the retained base.
        end = self.stream._on_offset()
        self.stream.truncate(max(0, end - CARRIED_STREAM_ITEMS))
        workflow.continue_as_new(dataclasses.replace(
            self._inp, carry=carry, stream_state=self.stream.get_state(),
            resume_from=None, thread_values=None))

    def _restore(self, app: Any, carry: dict[str, Any]) -> None:
        """Load a carried checkpoint into this run's saver and its counters into this run."""
        self._restore_counters(carry["counters"])
        saved = decode(carry["checkpoint"])
        checkpoint = saved["checkpoint"]
        base = {"configurable": {"thread_id": self._thread_id(), "checkpoint_ns": ""}}
        app.checkpointer.put(base, checkpoint, saved["metadata"], checkpoint["channel_versions"])
        at = {"configurable": {**base["configurable"], "checkpoint_id": checkpoint["id"]}}
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in saved["writes"]:
            by_task.setdefault(task_id, []).append((channel, value))
        for task_id, writes in by_task.items():
            app.checkpointer.put_writes(at, writes, task_id)

    def _restore_counters(self, counters: dict[str, Any]) -> None:
        """Go on with a continued run's counters (:meth:`_counters`)."""
        self._uuid_last = int(counters["uuid_last"])
        self._progress_seq = int(counters["progress_seq"])
        self._published, self._marks = int(counters["published"]), list(counters["marks"])
        self._spent, self._budget = dict(counters["spent"]), dict(counters["budget"])
        self._budget_stops = int(counters["budget_stops"])
        self._last_decision = counters.get("last_decision")
        self._approval_seq = int(counters.get("approval_seq") or 0)

    def _thread_id(self) -> str:
        assert self._inp is not None
        return self._inp.thread_id or self._inp.run_id

    # -- the LLM budget gate --------------------------------------------------------------------

    def _count_usage(self, usage: dict[str, Any]) -> None:
        """Add a node's chat-model calls (:class:`activities.graph_nodes.UsageMeter`) to the run's spend."""
        if usage:
            self._spent = {"usd": self._spent["usd"] + float(usage.get("cost_usd") or 0),
                           "tokens": self._spent["tokens"] + int(usage.get("input_tokens") or 0)
                           + int(usage.get("output_tokens") or 0),
                           "calls": self._spent["calls"] + int(usage.get("calls") or 0)}

    async def _within_budget(self, path: str) -> None:
        """Before a node runs: stop for an approval once the LLM spend has passed its budget.

        The budget is the options ``llm_budget_usd`` / ``llm_budget_tokens``; the approval's
        payload is ``kind: llm_budget``. Approve with a higher ``budget_usd`` / ``budget_tokens`` to go on;
        reject to end the run ``rejected`` / ``budget_denied``.

        Raises:
            BudgetDeniedError: the reviewer rejected the stop.
        """
        assert self._inp is not None
        if not over_budget(self._spent, self._budget):
            return
        async with self._budget_lock:  # parallel branches share one stop
            while over_budget(self._spent, self._budget):
                self._budget_stops += 1
                payload = {"kind": LLM_BUDGET_KIND, "node": path,
                           "review_reason_codes": ["llm_budget_exceeded"],
                           "budget": {"spent_usd": round(self._spent["usd"], 8),
                                      "spent_tokens": self._spent["tokens"],
                                      "calls": self._spent["calls"],
                                      "budget_usd": self._budget.get("usd"),
                                      "budget_tokens": self._budget.get("tokens")}}
                ladder = EscalationLadder.from_options(self._inp.options)
                await self._flush()
                decision = await self.request_approval(
                    payload, sla=timedelta(seconds=ladder.sla_seconds or 72 * 3600),
                    key=f"budget:{self._budget_stops}", ladder=ladder)
                if decision["decision"] != "approve":
                    raise BudgetDeniedError(path)
                self._budget = {
                    "usd": decision.get("budget_usd", self._budget.get("usd")),
                    "tokens": decision.get("budget_tokens", self._budget.get("tokens"))}

    async def _execute(self, path: str, opts: NodeOptions, retry: RetryPolicy | None,
                       call: NodeCall) -> NodeResult:
        policy = retry or RetryPolicy(
            initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
            maximum_interval=timedelta(seconds=30), maximum_attempts=opts.max_attempts,
            non_retryable_error_types=[NODE_ERROR, "node_not_found", *opts.non_retryable])
        timeout = timedelta(seconds=opts.timeout_seconds)
        try:
            result: NodeResult
            if opts.run_in == "local_activity":
                result = await workflow.execute_local_activity(
                    "run_node", call, result_type=NodeResult, start_to_close_timeout=timeout,
                    retry_policy=policy, summary=opts.summary or path)
                return result
            result = await workflow.execute_activity(
                "run_node", call, result_type=NodeResult, start_to_close_timeout=timeout,
                heartbeat_timeout=(timedelta(seconds=opts.heartbeat_seconds)
                                   if opts.heartbeat_seconds else None),
                retry_policy=policy, summary=opts.summary or path)
            return result
        except (ActivityError, ApplicationError) as err:
            if is_cancelled_exception(err):
                raise  # the run was cancelled: not the node's failure
            cause = failure_cause(err)
            raise NodeFailedError(path, (cause.type if cause and cause.type else "activity_failed"),
                                  cause.message if cause else str(err)) from err

    def note_workflow_node(self, path: str, task: str, started: float) -> None:
        """A workflow-placed node finished: its duration metric and span (replay-safe).

        Its ``node.completed`` is buffered (written with the next event).
        """
        assert self._inp is not None
        seconds = max(0.0, workflow.time() - started)
        labels = {"pipeline": self._inp.pipeline, "node": path}
        workflow.metric_meter().create_histogram_float(
            WORKFLOW_NODE_DURATION, "Graph nodes placed in the workflow", "s").record(seconds, labels)
        if not workflow.unsafe.is_replaying():
            trace.get_tracer("overseer.graph").start_span(
                f"langgraph.node {path}", attributes={
                    "langgraph.node": path, "langgraph.graph": self._inp.pipeline,
                    "overseer.pipeline": self._inp.pipeline, "overseer.run_id": self._inp.run_id,
                    "overseer.placement": "workflow"}).end()
        if self._spec is not None and path in self._spec.progress_nodes:
            return  # recorded with its snapshot by _progress
        self._pending_events.append({
            "run_id": self._inp.run_id, "key": f"node.completed:{path}:{task}",
            "type": NODE_COMPLETED, "actor": "workflow", "occurred_at": workflow.now().isoformat(),
            "data": {"node": path, "placement": "workflow", "attempt": 1,
                     "duration_ms": round((workflow.time() - started) * 1000, 3)}})

    def id_random(self) -> random.Random:
        """The run's own random source for checkpoint and message ids, seeded by its run id.

        Not ``workflow.random()``: other consumers (the OpenTelemetry id generator draws a
        seed from it only when spans are recorded, never on replay) would shift its
        sequence between an execution and its replay, and with it every id.
        """
        if self._ids is None:
            self._ids = random.Random(workflow.info().run_id)
        return self._ids

    def next_uuid6_timestamp(self, now_100ns: int) -> int:
        """Monotonic uuid6 timestamps for this run's checkpoints (see :func:`_workflow_uuid6`)."""
        self._uuid_last = max(now_100ns, self._uuid_last + 1)
        return self._uuid_last

    # -- endings ------------------------------------------------------------------------------

    def events_locally(self) -> bool:
        """Events go through a local activity.

        A run's ending writes its buffered ``node.completed`` events with ``run.finished``
        in one call (fewer workflow tasks: docs/performance.md, round 2). Runs recorded with
        the former patch's marker replay (``deprecate_patch``).
        """
        workflow.deprecate_patch(LEAN_EVENTS_PATCH)
        return True

    async def _flush(self) -> None:
        if self._pending_events:
            events, self._pending_events = self._pending_events, []
            await self.record_batch(events, "node.completed")

    async def _record_end(self, event_type: str, data: dict[str, Any]) -> None:
        """``run.finished`` (after any buffered events; with them in one call when lean)."""
        if not self.events_locally():
            await self._flush()
            await self.record(event_type, key="run.finished", data=data)
            return
        assert self._inp is not None
        events, self._pending_events = [*self._pending_events, {
            "run_id": self._inp.run_id, "key": "run.finished", "type": event_type, "data": data,
            "actor": "workflow", "occurred_at": workflow.now().isoformat()}], []
        await self.record_batch(events, event_type, self._hand_off(event_type))

    _pause: dict[str, Any] | None = None

    async def record_batch(self, events: list[dict[str, Any]], summary: str,
                           hand_off: dict[str, Any] | None = None) -> Any:
        """As the gate's, and the approval request of an interrupt hands the pause over.

        The thread's state at the interrupt goes to Postgres with ``approval.requested``
        (:meth:`_ask` prepares it), so ``runs.wait`` answers from there. The webhooks a
        hand-off claimed (runs that ended, ``webhook`` set) are each POSTed by a
        ``notify_webhook`` activity, retried by Temporal (:data:`WEBHOOK_RETRY`).
        """
        if hand_off is None and self._pause is not None and \
                any(e.get("type") == APPROVAL_REQUESTED for e in events):
            hand_off, self._pause = self._pause, None
        result = await super().record_batch(events, summary, hand_off)
        for hook in (result.get("webhooks") or []) if isinstance(result, dict) else []:
            self._webhooks.append(workflow.start_activity(  # POSTed while the run goes on
                notify_webhook, args=[hook["url"], hook["payload"], hook["delivery"]],
                start_to_close_timeout=timedelta(seconds=15), retry_policy=WEBHOOK_RETRY,
                summary=f"webhook: run {hook['delivery']} {hook['payload'].get('status')}"))
        return result

    async def _webhooks_sent(self) -> None:
        """Wait for the runs' webhooks still being POSTed (a closed workflow drops them).

        One that failed every attempt is logged; the run's own ending stands.
        """
        for handle in self._webhooks:
            try:
                await handle
            except ActivityError:
                workflow.logger.warning("run webhook not delivered", extra={
                    "run_id": self._run_id})
        self._webhooks = []

    def _paused_hand_off(self, key: str) -> dict[str, Any] | None:
        """What a thread's run hands the thread when it pauses on an interrupt (published).

        ``key`` (the approval's) claims the webhooks of the runs that ended there.
        """
        assert self._inp is not None
        if self._inp.thread_id is None or self._run_stream is not None \
                or not self.events_locally():
            return None
        return {"thread_id": self._inp.thread_id, "run_id": self._inp.run_id, "pause": True,
                "key": f"pause:{key}",
                "snapshot": to_jsonable({**self.get_thread_state(), "decided": False,
                                         "closed": False, "cancelled": False})}

    def _hand_off(self, event_type: str) -> dict[str, Any] | None:
        """What an Agent Server run's ending hands its thread (:func:`overseer.threads.hand_off`).

        The thread's state as :meth:`get_thread_state` answers once the ending's ``end`` or
        ``error`` item is published (right after the events are written). None for a run
        without a thread or with its own stream protocol, and for a cancelled run: whoever
        cancelled it through the API owns the thread's state then (an ``interrupt`` keeps
        the run's last state, a ``rollback`` the state before it) and starts the next run.
        """
        assert self._inp is not None
        if (self._inp.thread_id is None or self._run_stream is not None
                or event_type == RUN_CANCELLED):
            return None
        mark = {"offset": self._published, "event": "error" if event_type == RUN_FAILED else "end"}
        return {"thread_id": self._inp.thread_id, "run_id": self._inp.run_id, "key": "end",
                "snapshot": to_jsonable({**self.get_thread_state(),
                                         "marks": [*self._marks, mark],
                                         "published": self._published + 1, "closed": True,
                                         "cancelled": False})}

    async def _finish(self, status: str, outcome: str | None, snapshot: dict[str, Any]) -> None:
        self._outcome = outcome
        await self._record_end(RUN_COMPLETED, {"status": status, "outcome": outcome,
                                               "snapshot": {**snapshot, "outcome": outcome}})
        await self.set_status(status)

    async def _cancelled(self) -> None:
        """Record and announce a cancelled run (the caller re-raises the cancellation)."""
        self._outcome = "cancelled"
        await self._record_end(RUN_CANCELLED, {"status": "cancelled", "outcome": "cancelled",
                                               "snapshot": {"outcome": "cancelled"}})
        await self.set_status("cancelled")
        self._publish("end", {"status": "cancelled", "outcome": "cancelled"})
        if self._run_stream is not None:
            self._emit(self._run_stream.cancelled())
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._webhooks_sent()

    async def _fail(self, error: dict[str, Any]) -> NoReturn:
        await self._record_end(RUN_FAILED, {"status": "failed", "outcome": None, "error": error,
                                            "snapshot": {"outcome": None}})
        await self.set_status("failed")
        self._publish("error", error)
        if self._run_stream is not None:
            self._emit(self._run_stream.failed(error))
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._webhooks_sent()
        raise ApplicationError(error["message"], error, type=error["code"], non_retryable=True)


def failure_cause(err: BaseException) -> ApplicationError | None:
    """The ``ApplicationError`` an activity or local activity failed with, if any.

    A scheduled activity's failure arrives as ``ActivityError`` with the error as its
    cause; a local activity's failure (sdk-core) arrives as the ``ApplicationError`` itself.
    """
    if isinstance(err, ApplicationError):
        return err
    cause = getattr(err, "cause", None)
    return cause if isinstance(cause, ApplicationError) else None


def final_status(values: Any, last_decision: str | None) -> tuple[str, str]:
    """``(status, outcome)`` of a finished graph.

    The graph decides: a final state with ``status: "rejected"`` (or ``completed``) and a
    string ``outcome`` says so itself. Otherwise the run is ``completed``, with the last
    decision as its outcome (``approved``, ``rejected``, ``revised`` …) or ``completed``.
    """
    if isinstance(values, dict):
        status = values.get("status")
        outcome = values.get("outcome")
        if status in ("completed", "rejected"):
            return status, outcome if isinstance(outcome, str) else status
    past = {"approve": "approved", "reject": "rejected", "revise": "revised"}
    return "completed", past.get(last_decision or "", last_decision or "completed")


# --- the run's checkpointer ---------------------------------------------------------------------


class LatestCheckpointSaver(InMemorySaver):
    """LangGraph's ``InMemorySaver`` that keeps only each namespace's latest checkpoint.

    Inside a workflow the history is the durable record (a replay rebuilds the saver), so
    older checkpoints, their writes and the channel values they alone reference are only
    memory held by every parked run. Everything the runtime reads — the latest state, its
    pending writes and interrupts — stays.
    """

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        """Save ``checkpoint`` and drop the namespace's older ones (see the class docstring)."""
        saved = super().put(config, checkpoint, metadata, new_versions)
        thread = config["configurable"]["thread_id"]
        ns = config["configurable"]["checkpoint_ns"]
        checkpoints = self.storage[thread][ns]
        for old in [c for c in checkpoints if c != checkpoint["id"]]:
            del checkpoints[old]
            self.writes.pop((thread, ns, old), None)
        live = {(thread, ns, channel, version)
                for channel, version in checkpoint["channel_versions"].items()}
        for key in [k for k in self.blobs if k[:2] == (thread, ns) and k not in live]:
            del self.blobs[key]
        return saved


# --- preparing a graph for the workflow ----------------------------------------------------------

_compiled: dict[str, Any] = {}
_in_activities: dict[str, set[str]] = {}
"""Per pipeline, the top-level nodes that run in activities (they record their own completion)."""


def prepare_all() -> list[str]:
    """Load the registry and prepare every graph hosted on ``GraphRunWorkflow``.

    Outside the sandbox: call it before a worker polls or a ``Replayer`` replays (user
    modules must be imported unrestricted). Returns the prepared pipeline names.

    Raises:
        overseer.pipelines.RegistryError, pydantic.ValidationError: a graph cannot be hosted.
    """
    names = [p.name for p in get_registry() if p.workflow == "GraphRunWorkflow"]
    for name in names:
        compiled_graph(name)
    return names


def hosted(pipeline: str) -> tuple[Pipeline, Any]:
    """The pipeline and its prepared graph, loaded outside the sandbox if not loaded yet.

    The worker loads every graph before it polls; a replayer (or a lazily started worker)
    may not have, and user modules must never be imported under the sandbox's restrictions.
    """
    with workflow.unsafe.imports_passed_through(), workflow.unsafe.sandbox_unrestricted():
        return get_registry().get(pipeline), compiled_graph(pipeline)


def compiled_graph(pipeline: str) -> Any:
    """The pipeline's graph, prepared for :class:`GraphRunWorkflow` and compiled once per process."""
    if pipeline not in _compiled:
        builder = get_registry().builder(pipeline)
        _compiled[pipeline] = prepare(builder, prefix="").compile()
        _in_activities[pipeline] = {
            name for name, spec in builder.nodes.items()
            if node_options(spec.metadata)[0].run_in != "workflow"
            and not (isinstance(spec.runnable, Pregel)
                     and "run_in" not in dict((spec.metadata or {}).get("overseer") or {})
                     and "execute_in" not in (spec.metadata or {}))}
    return _compiled[pipeline]


def thread_node(pipeline: str) -> str:
    """The node a thread's earlier state is written as (``aupdate_state``'s ``as_node``).

    A node whose only edges lead to ``END`` (so, as on a finished LangGraph thread, nothing
    is scheduled next and no router runs on the old state); else the first node without
    conditional edges; else the first node. New input starts from ``START`` either way
    (pending tasks are discarded); a ``Command(goto=...)`` then runs only what it names.
    """
    from langgraph.graph import END

    builder = get_registry().builder(pipeline)
    names = list(builder.nodes)
    plain = [n for n in names if n not in builder.branches]
    targets: dict[str, set[str]] = {}
    for source, target in builder.edges:
        targets.setdefault(source, set()).add(target)
    last = [n for n in plain if targets.get(n) == {END}]
    return cast(str, (last or plain or names)[0])


def node_options(metadata: dict[str, Any] | None) -> tuple[NodeOptions, RetryPolicy | None]:
    """A node's :class:`NodeOptions` from its metadata (Overseer's keys, or the plugin's).

    Raises:
        pydantic.ValidationError: malformed ``{"overseer": {...}}`` metadata (at worker start).
    """
    meta = dict(metadata or {})
    raw = dict(meta.get("overseer") or {})
    if "execute_in" in meta and "run_in" not in raw:
        raw["run_in"] = meta["execute_in"]
    if "start_to_close_timeout" in meta and "timeout_seconds" not in raw:
        raw["timeout_seconds"] = meta["start_to_close_timeout"].total_seconds()
    if meta.get("heartbeat_timeout") and "heartbeat_seconds" not in raw:
        raw["heartbeat_seconds"] = meta["heartbeat_timeout"].total_seconds()
    if "summary" in meta and "summary" not in raw:
        raw["summary"] = meta["summary"]
    opts = NodeOptions.model_validate(raw)
    if opts.run_in not in ("activity", "local_activity", "workflow"):
        raise ValueError(f"run_in must be activity, local_activity or workflow, not {opts.run_in!r}")
    retry = meta.get("retry_policy") if isinstance(meta.get("retry_policy"), RetryPolicy) else None
    return opts, retry


def prepare(builder: Any, *, prefix: str) -> Any:
    """A copy of ``builder`` whose nodes dispatch as their options say (the user's graph is untouched)."""
    import copy
    from collections import defaultdict

    prepared = copy.copy(builder)
    prepared.compiled = False
    prepared.nodes = {}
    for name, spec in builder.nodes.items():
        path = f"{prefix}{name}"
        opts, retry = node_options(spec.metadata)
        runnable = spec.runnable
        explicit = "run_in" in dict((spec.metadata or {}).get("overseer") or {}) or \
            "execute_in" in (spec.metadata or {})
        if isinstance(runnable, Pregel) and not explicit:
            sub = getattr(runnable, "builder", None)
            new = prepare(sub, prefix=f"{path}/").compile() if sub is not None else runnable
        elif opts.run_in == "workflow":
            new = _in_workflow(runnable, path)
        else:
            new = _proxy(path, opts, retry)
        prepared.nodes[name] = _replace_runnable(spec, new)
    prepared.branches = defaultdict(dict)
    for source, branches in builder.branches.items():
        for name, branch in branches.items():
            prepared.branches[source][name] = branch._replace(path=_sync_direct(branch.path))
    return prepared


def _replace_runnable(spec: Any, runnable: Any) -> Any:
    import dataclasses

    return dataclasses.replace(spec, runnable=runnable, retry_policy=None)


def _proxy(path: str, opts: NodeOptions, retry: RetryPolicy | None) -> Any:
    async def run_in_activity(state: Any, config: RunnableConfig) -> Any:
        instance: GraphRunWorkflow = workflow.instance()
        return await instance.call_node(path, opts, retry, state, cast(dict[str, Any], config))

    return RunnableCallable(None, run_in_activity, name=path.rsplit("/", 1)[-1], trace=False)


def _in_workflow(runnable: Any, path: str) -> Any:
    inner = _sync_direct(runnable)

    async def run_in_workflow(state: Any, config: RunnableConfig) -> Any:
        started = workflow.time()
        out = await inner.ainvoke(state, config)
        instance: GraphRunWorkflow = workflow.instance()
        task = str((config.get("configurable") or {}).get("checkpoint_ns") or path)
        instance.note_workflow_node(path, task, started)
        return out

    return RunnableCallable(None, run_in_workflow, name=path.rsplit("/", 1)[-1], trace=False)


def _sync_direct(runnable: Any) -> Any:
    """A sync function's runnable that calls it directly.

    LangGraph would use ``run_in_executor``, which a workflow's event loop does not
    implement.
    """
    import copy

    func = getattr(runnable, "func", None)
    if not isinstance(runnable, RunnableCallable) or func is None or \
            inspect.iscoroutinefunction(func):
        return runnable

    @functools.wraps(func)
    async def call_directly(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    direct = copy.copy(runnable)
    direct.afunc = call_directly
    return direct


# --- deterministic checkpoint ids ---------------------------------------------------------------

_original_uuid6 = getattr(_pregel_checkpoint.uuid6,  # type: ignore[attr-defined]  # not re-exported
                          "overseer_original", _pregel_checkpoint.uuid6)  # type: ignore[attr-defined]


def _graph_run_instance() -> Any:
    """The running GraphRunWorkflow, or None (outside a workflow, or in another workflow).

    Checked by marker, not by class: a sandbox (a ``Replayer``'s) imports this module again,
    and its class is not the worker's; LangGraph's module keeps one patch for both.
    """
    try:
        instance = workflow.instance() if workflow.in_workflow() else None
    except TemporalError:  # a workflow context outside its event loop (an eviction's teardown)
        return None
    return instance if getattr(instance, "overseer_graph_run", False) else None


def _workflow_uuid6(node: int | None = None, clock_seq: int | None = None) -> Any:
    """LangGraph's ``uuid6`` from the workflow's clock and random source inside a GraphRunWorkflow.

    Checkpoint ids feed task ids and interrupt ids; from wall clock and ``random`` they
    differ on every replay, so an interrupt id a client holds would never match again.
    The random part comes from :meth:`GraphRunWorkflow.id_random`.
    Outside such a workflow it is LangGraph's own function.
    """
    instance = _graph_run_instance()
    if instance is None:
        return _original_uuid6(node, clock_seq)
    rng = instance.id_random()
    now_100ns = int(workflow.now().timestamp() * 10_000_000) + 0x01B21DD213814000
    timestamp = instance.next_uuid6_timestamp(now_100ns)
    clock_seq = rng.getrandbits(14) if clock_seq is None else clock_seq
    node = rng.getrandbits(48) if node is None else node
    value = ((timestamp >> 12) & 0xFFFFFFFFFFFF) << 80
    value |= (timestamp & 0x0FFF) << 64
    value |= (clock_seq & 0x3FFF) << 48
    value |= node & 0xFFFFFFFFFFFF
    return _UUID6(int=value, version=6)


_workflow_uuid6.overseer_original = _original_uuid6  # type: ignore[attr-defined]
_pregel_checkpoint.uuid6 = _workflow_uuid6  # type: ignore[attr-defined]  # not re-exported
_checkpoint_base.uuid6 = _workflow_uuid6  # type: ignore[attr-defined]


class _WorkflowUuid:
    """``uuid`` as ``langgraph.graph.message`` sees it.

    ``uuid4`` from the workflow's random source inside a GraphRunWorkflow (``add_messages``
    ids a message that has none, in the workflow; from ``os.urandom`` the id would change on
    every replay), the module elsewhere.
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(uuid, name)

    @staticmethod
    def uuid4() -> uuid.UUID:
        """A deterministic id in a GraphRunWorkflow, a random one anywhere else."""
        instance = _graph_run_instance()
        if instance is not None:
            return uuid.UUID(int=instance.id_random().getrandbits(128), version=4)
        return uuid.uuid4()


_message_module.uuid = _WorkflowUuid()  # type: ignore[assignment,attr-defined]
