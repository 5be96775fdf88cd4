"""The generic node activity: run one node of any registered graph, outside the workflow.

``GraphRunWorkflow`` drives a graph with LangGraph's own Pregel loop inside the workflow;
every node placed in an activity (the default) is a proxy that calls :func:`run_node`
here with the node's input. This activity finds the user's node in the registry by
``pipeline`` and path (``"clause_extraction/initial_search"`` for a node inside a
subgraph), invokes it with a LangGraph config of its own, and returns what it wrote.

- **Interrupts.** A node that calls ``interrupt()`` gets back the resume values the
  workflow already holds (``NodeCall.resumes``, in order); at the first unanswered
  ``interrupt()`` this activity returns the interrupt's value, and the workflow-side proxy
  raises the same interrupt inside Pregel, so ids, checkpoints and resumes are LangGraph's.
  Several interrupts in one node work: each resume re-runs the node with one more value.
- **Errors.** A domain error (:class:`overseer.errors.OverseerError`) leaves as its stable
  code (``activities.errors``). A bug — ``TypeError``, ``KeyError``, ``ValueError`` (and
  pydantic's ``ValidationError``), ``AttributeError`` … — fails the node after one attempt
  as ``node_error`` with the node and exception named: never an endless retry. Anything
  else (network, database, time-outs) is retried by the node's retry policy.
- **Events.** Each completed node appends ``node.completed`` (node, duration, attempt) to
  the event log, keyed by its task, so a retried or replayed node is recorded once.
- **Claim check.** Inputs may arrive as a reference; top-level output values over
  :data:`overseer.graph_codec.CLAIM_CHECK_BYTES` are stored and returned as references.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph._internal._constants import (
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_RUNTIME,
    CONFIG_KEY_SCRATCHPAD,
    CONFIG_KEY_SEND,
    CONFIG_KEY_THREAD_ID,
)
from langgraph._internal._scratchpad import PregelScratchpad
from langgraph.errors import GraphInterrupt
from langgraph.pregel import Pregel
from langgraph.pregel._algo import LazyAtomicCounter
from langgraph.runtime import Runtime
from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import as_application_error
from activities.events import append_from_activity
from activities.runtime import get_runtime
from overseer.errors import OverseerError
from overseer.graph_codec import (
    CLAIM_CHECK_BYTES,
    decode,
    encode,
    encoded_size,
    is_ref,
    ref_marker,
    to_jsonable,
)
from overseer.graph_store import graph_store
from overseer.pipelines import get_registry
from overseer.store.artifacts import load_artifact, store_artifact
from overseer.store.events import LLM_CALLED, NODE_COMPLETED, NewEvent

BUG_TYPES: tuple[type[BaseException], ...] = (
    TypeError, LookupError, ValueError, AttributeError, NameError, ArithmeticError,
    AssertionError, NotImplementedError, RecursionError, ValidationError,
)
"""Exceptions that mean the node's code (or its input) is wrong: retrying cannot help."""

NODE_ERROR = "node_error"
STATE_BLOB_KIND = "graph_state"


@dataclass
class NodeCall:
    """One node execution, as the workflow-side proxy asks for it.

    Attributes:
        run_id: the run (UUID string).
        pipeline: registry name of the graph.
        node: node path; ``/`` separates a subgraph node from its inner node.
        input: the node's input, :func:`overseer.graph_codec.encode`-d, or ``{"ref": sha256}``.
        resumes: encoded resume values of the node's earlier ``interrupt()`` calls, in order.
        config: ``{thread_id, checkpoint_ns, tags, metadata, recursion_limit}`` for the node.
        task: the task's checkpoint namespace (unique per node execution; the event key).
        progress_nodes: the pipeline's progress nodes (for ``node.completed`` snapshots).
    """

    run_id: str
    pipeline: str
    node: str
    input: dict[str, Any]
    resumes: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    task: str = ""
    progress_nodes: list[str] = field(default_factory=list)


@dataclass
class NodeResult:
    """What a node did: its encoded output, or the value of the interrupt it raised.

    Attributes:
        output: encoded node output (a state update, a ``Command``, None …).
        interrupt: encoded value of the first unanswered ``interrupt()``, if any.
        custom: chunks the node wrote with ``get_stream_writer()`` (JSON-able), in order.
        duration_ms: wall time of the node's code.
        usage: the node's chat-model calls: ``{calls, input_tokens, output_tokens, cost_usd}``
            (:class:`UsageMeter`; empty when it made none).
    """

    output: dict[str, Any] | None = None
    interrupt: dict[str, Any] | None = None
    custom: list[Any] = field(default_factory=list)
    duration_ms: float = 0.0
    usage: dict[str, Any] = field(default_factory=dict)


_LEDGER_TAG = "overseer:ledgered"
"""Tag of the chat-model calls :mod:`activities.llm` makes (``activities.llm.LEDGER_TAG``, not
imported: the worker loads the LLM layer on first use)."""


async def record_ledger(run_id: str, node: str, task: str, meter: UsageMeter) -> None:
    """One ``llm.called`` event per chat-model call the meter saw outside Overseer's LLM layer.

    Keyed by the run, node, task and call index and the activity attempt (a retried
    attempt's calls are new calls, as the layer counts them), so a replayed write adds none.
    """
    if not meter.ledger:
        return
    attempt = activity.info().attempt if activity.in_activity() else 1
    await append_from_activity([NewEvent(
        run_id=run_id, key=f"llm.called:{node}:{task}:{i}:{attempt}", type=LLM_CALLED,
        actor=f"activity:{entry.get('node') or node}",
        data={"task": "graph_node", "source": "callback", "attempt": attempt,
              **entry, "node": entry.get("node") or node})
        for i, entry in enumerate(meter.ledger)])


class UsageMeter(AsyncCallbackHandler):
    """Counts every chat-model call a node makes, whatever LangChain model it uses.

    Installed as a callback in the node's config (so models the node calls without passing
    a config find it through LangChain's context), it reads each reply's
    ``usage_metadata`` and prices it with the project's price table
    (:func:`activities.llm.price_usd`; an unknown model costs 0 and is named in
    ``unpriced``). The runtime's LLM budget gate sums these per run.

    Calls Overseer's own LLM layer did not make (a user's graph calling a chat model
    directly) are also kept in :attr:`ledger`, one entry per call, so the run's ``llm.called``
    ledger — what ``GET /v1/runs/{id}`` shows as ``llm_usage`` — counts them too (issue 28):
    the layer tags its calls :data:`activities.llm.LEDGER_TAG` and writes its own events.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd = 0.0
        self.unpriced: set[str] = set()
        self.ledger: list[dict[str, Any]] = []
        self._started: dict[Any, tuple[float, str | None]] = {}

    async def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any,
                                  metadata: dict[str, Any] | None = None,
                                  **kwargs: Any) -> None:
        """Note when a call starts and which graph node makes it (LangGraph's metadata)."""
        self._started[run_id] = (time.monotonic(),
                                 (metadata or {}).get("langgraph_node"))

    async def on_llm_error(self, error: BaseException, *, run_id: Any,
                           tags: list[str] | None = None, **kwargs: Any) -> None:
        """A failed call is one ledger entry too (outcome ``error``, no tokens)."""
        started, node = self._started.pop(run_id, (time.monotonic(), None))
        if _LEDGER_TAG not in (tags or []):
            self.ledger.append({"node": node, "model": "", "outcome": "error",
                                "error_code": type(error).__name__, "input_tokens": 0,
                                "output_tokens": 0, "cost_usd": 0.0,
                                "latency_ms": int((time.monotonic() - started) * 1000)})

    async def on_llm_end(self, response: Any, *, run_id: Any = None,
                         tags: list[str] | None = None, **kwargs: Any) -> None:
        """Add one call's tokens and cost."""
        from activities.llm import price_usd

        self.calls += 1
        started, node = self._started.pop(run_id, (time.monotonic(), None))
        call_in, call_out, call_cost, call_model, priced = 0, 0, 0.0, "", True
        for generation in [g for gens in response.generations for g in gens]:
            message = getattr(generation, "message", None)
            usage = getattr(message, "usage_metadata", None) or {}
            tokens_in, tokens_out = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
            self.input_tokens += tokens_in
            self.output_tokens += tokens_out
            meta = getattr(message, "response_metadata", None) or {}
            model = str(meta.get("model_name") or (response.llm_output or {}).get("model_name") or "")
            cost = price_usd(model, tokens_in, tokens_out, get_runtime().settings) if model else None
            if cost is None and (tokens_in or tokens_out):
                self.unpriced.add(model or "unknown")
            self.cost_usd += cost or 0.0
            call_in, call_out = call_in + tokens_in, call_out + tokens_out
            call_cost, call_model = call_cost + (cost or 0.0), model or call_model
            priced = priced and cost is not None
        if _LEDGER_TAG not in (tags or []):
            self.ledger.append({"input_tokens": call_in, "output_tokens": call_out,
                                "cost_usd": round(call_cost, 8), "model": call_model,
                                "price_known": priced, "node": node, "outcome": "ok",
                                "latency_ms": int((time.monotonic() - started) * 1000)})

    def totals(self) -> dict[str, Any]:
        """``{calls, input_tokens, output_tokens, cost_usd, unpriced}``, or ``{}`` without calls."""
        if not self.calls:
            return {}
        return {"calls": self.calls, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost_usd": round(self.cost_usd, 8),
                "unpriced": sorted(self.unpriced)}


@activity.defn(name="run_node")
async def run_node(call: NodeCall) -> NodeResult:
    """Run one node of a registered graph (see the module docstring).

    Raises:
        ApplicationError: ``node_error`` (non-retryable) for bugs; a domain error's code
            (non-retryable when permanent). Other exceptions propagate and are retried.
    """
    pipeline = get_registry().get(call.pipeline)
    runnable = find_node(get_registry().builder(call.pipeline), call.node)
    state = await resolve_refs(decode(await _load_input(call.input)))
    custom: list[Any] = []
    meter = UsageMeter()
    config = node_config(call, [decode(r) for r in call.resumes], custom.append,
                         plain=isinstance(runnable, Pregel),
                         store=await graph_store(get_runtime().settings))
    config["callbacks"] = [meter]
    started = time.perf_counter()
    token = var_child_runnable_config.set(cast(RunnableConfig, config))
    try:
        output = await _with_heartbeats(runnable.ainvoke(state, config))
    except GraphInterrupt as interrupt:
        return NodeResult(interrupt=encode(interrupt.args[0][0].value), custom=custom,
                          usage=meter.totals())
    except OverseerError as err:
        raise as_application_error(err) from err
    except BUG_TYPES as err:
        raise ApplicationError(
            f"node {call.node} raised {type(err).__name__}: {str(err)[:500]}",
            {"node": call.node, "exception": type(err).__name__}, type=NODE_ERROR,
            non_retryable=True) from err
    finally:
        var_child_runnable_config.reset(token)
        await record_ledger(call.run_id, call.node, call.task, meter)  # failed calls count too
    duration_ms = (time.perf_counter() - started) * 1000
    encoded = await claim_check(output)
    snapshot = pipeline.node_snapshot({**state, **output}) \
        if pipeline.node_snapshot and isinstance(state, dict) and isinstance(output, dict) else None
    await _record_completed(call, output, duration_ms, snapshot)
    return NodeResult(output=encoded, custom=[to_jsonable(c) for c in custom],
                      duration_ms=round(duration_ms, 3), usage=meter.totals())


@activity.defn(name="put_state_blob")
async def put_state_blob(encoded: dict[str, Any]) -> str:
    """Store an encoded value too large for a Temporal payload; returns its SHA-256.

    Called as a local activity by the workflow (a local activity's input never enters
    the history), so a large node input reaches its activity by reference.
    """
    data = json.dumps(encoded, separators=(",", ":")).encode()
    async with get_runtime().pool.acquire() as conn:
        return await store_artifact(conn, data, kind=STATE_BLOB_KIND, page_count=0,
                                    filename=None, content_type="application/json")


def find_node(builder: Any, path: str) -> Any:
    """The runnable of node ``path`` (``"sub/inner"`` walks into a subgraph node).

    Raises:
        ApplicationError: ``node_not_found`` (non-retryable): the graph changed under the run.
    """
    runnable: Any = None
    for part in path.split("/"):
        spec = builder.nodes.get(part) if builder is not None else None
        if spec is None:
            raise ApplicationError(f"graph has no node {path!r}", {"node": path},
                                   type="node_not_found", non_retryable=True)
        runnable = spec.runnable
        builder = getattr(runnable, "builder", None) if isinstance(runnable, Pregel) else None
    return runnable


def _no_null_resume(consume: bool = False) -> None:
    """A node run as an activity has no null resume (LangGraph's ``PregelScratchpad`` hook)."""
    return None


def node_config(call: NodeCall, resumes: list[Any], writer: Any, *,
                plain: bool = False, store: Any = None) -> dict[str, Any]:
    """A LangGraph config under which ``interrupt()``, ``get_stream_writer()``, ``get_store()`` work.

    ``interrupt()`` returns ``resumes[i]`` for its i-th call and raises ``GraphInterrupt``
    past them. ``plain`` (a whole subgraph run as one activity) gives only the thread id
    and the store. ``store``: LangGraph's ``BaseStore`` the node gets
    (:func:`overseer.graph_store.graph_store`).
    """
    base = {"tags": list(call.config.get("tags") or []),
            "metadata": dict(call.config.get("metadata") or {}),
            "recursion_limit": int(call.config.get("recursion_limit") or 25)}
    thread = {CONFIG_KEY_THREAD_ID: call.config.get("thread_id") or call.run_id}
    if plain:
        return {**base, "configurable": {**thread, CONFIG_KEY_RUNTIME: Runtime(store=store)}}
    scratchpad = PregelScratchpad(
        step=0, stop=0, call_counter=LazyAtomicCounter(), interrupt_counter=LazyAtomicCounter(),
        get_null_resume=_no_null_resume, resume=list(resumes),
        subgraph_counter=LazyAtomicCounter())
    return {**base, "configurable": {
        **thread, CONFIG_KEY_CHECKPOINT_NS: call.config.get("checkpoint_ns", ""),
        CONFIG_KEY_SCRATCHPAD: scratchpad, CONFIG_KEY_SEND: lambda _writes: None,
        CONFIG_KEY_RUNTIME: Runtime(context=None, stream_writer=writer, store=store),
    }}


async def claim_check(output: Any) -> dict[str, Any]:
    """Encode ``output``; a dict's values over the claim-check size are stored and referenced."""
    if isinstance(output, dict):
        slim: dict[str, Any] = {}
        for key, value in output.items():
            encoded = encode(value)
            size = encoded_size(encoded)
            if size > CLAIM_CHECK_BYTES:
                slim[key] = ref_marker(await put_state_blob(encoded), size)
            else:
                slim[key] = value
        output = slim
    return encode(output)


async def resolve_refs(state: Any) -> Any:
    """Replace top-level reference markers in a dict state with their stored values."""
    if not isinstance(state, dict) or not any(is_ref(v) for v in state.values()):
        return state
    resolved = dict(state)
    for key, value in state.items():
        if is_ref(value):
            resolved[key] = decode(await _load_blob(value["__overseer_ref__"]))
    return resolved


async def _load_input(encoded: dict[str, Any]) -> dict[str, Any]:
    if "ref" in encoded and len(encoded) == 1:
        return await _load_blob(encoded["ref"])
    return encoded


async def _load_blob(sha: str) -> dict[str, Any]:
    data, _ = await load_artifact(get_runtime().pool, sha)
    loaded: dict[str, Any] = json.loads(data)
    return loaded


async def _with_heartbeats(work: Any) -> Any:
    """Heartbeat three times per heartbeat time-out while the node runs (when it has one)."""
    timeout = activity.info().heartbeat_timeout if activity.in_activity() else None
    if not timeout:
        return await work
    every = max(0.2, timeout.total_seconds() / 3)
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()


def progress_snapshot(node: str, progress_nodes: list[str] | tuple[str, ...],
                      output: Any) -> dict[str, Any] | None:
    """A progress node's ``node.completed`` snapshot: its update plus ``progress``, else None.

    Args:
        node: the node that finished.
        progress_nodes: the pipeline's ordered progress nodes (``Pipeline.progress_nodes``).
        output: the node's update (a dict; anything else has no snapshot).

    Returns:
        ``{<update keys under the claim-check size>..., "progress": {"completed", "total",
        "current", "label"}}`` (``current``: the next progress node, None after the last),
        or None when ``node`` is not a progress node or its update is not a dict. The run
        view shows the progress; a retry of a node-by-node run starts from these snapshots.
    """
    if node not in progress_nodes or not isinstance(output, dict):
        return None
    index = list(progress_nodes).index(node)
    total = len(progress_nodes)
    current = progress_nodes[index + 1] if index + 1 < total else None
    snapshot = {k: v for k, v in to_jsonable(output).items()
                if encoded_size({"json": v}) <= CLAIM_CHECK_BYTES}
    return {**snapshot, "progress": {
        "completed": index + 1, "total": total, "current": current,
        "label": f"{index + 1} of {total} agents complete"}}


async def _record_completed(call: NodeCall, output: Any, duration_ms: float,
                            snapshot: dict[str, Any] | None = None) -> None:
    """``node.completed`` for this task (once, whatever the retries).

    Progress nodes add a snapshot of their update, a pipeline's ``node_snapshot`` its view
    of the state after the node.
    """
    info = activity.info()
    data: dict[str, Any] = {"node": call.node, "duration_ms": round(duration_ms, 3),
                            "attempt": info.attempt, "placement": "activity"}
    if snapshot is not None:
        data["snapshot"] = to_jsonable(snapshot)
    progress = progress_snapshot(call.node, call.progress_nodes, output)
    if progress is not None:
        data["snapshot"] = progress
    await append_from_activity([NewEvent(
        run_id=call.run_id, key=f"node.completed:{call.node}:{call.task}", type=NODE_COMPLETED,
        actor=f"activity:{call.node}", data=data)])
