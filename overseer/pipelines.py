"""The pipeline contract: what Overseer needs to host a graph, grouped by where each hook runs.

A *pipeline* is a LangGraph graph plus what Overseer needs to host it: a name, where its
input comes from, how its options are configured, which decisions its human gate takes.
A user's graph named in a ``langgraph.json`` becomes a :class:`Pipeline` with defaults;
Overseer's reference pipelines declare theirs in ``activities/<name>/pipeline.py`` and are
named in the project's own ``langgraph.json`` — the same mechanism: graphs are plug-ins
named in a config file and found through one registry (:mod:`overseer.registry`).

What a graph sees (nothing here needs the graph to import Overseer):

- **Input state.** A JSON run (``POST /v1/pipelines/{name}/runs`` with ``{"input": {...}}``)
  starts the graph with ``input`` (validated by :attr:`Intake.input_model` when given).
  An upload run (a pipeline whose :attr:`Intake.accepts` names media types) starts it
  with ``{"document": {sha256, kind, filename, content_type, size_bytes, page_count}}``.
  In both cases the runtime adds ``run_id`` (str), ``options`` (the options model's
  ``model_dump(mode="json")``, plus the request's per-run ``llm_budget_usd``,
  ``llm_budget_tokens`` and ``llm_model_hint`` from its metadata) and ``metadata`` (the
  request's metadata dict) — each only
  when the graph's input schema declares that key.
- **Interrupts.** ``interrupt(payload)`` opens an approval whose payload (JSON) the
  reviewer sees; ``interrupt()`` returns ``{"decision", "note", "updates", "resume",
  "decided_by"}``. ``decision`` is one of :attr:`Gate.decisions`.
- **Nodes.** Node metadata ``{"overseer": {...}}`` chooses placement and limits; see
  :class:`overseer.node_options.NodeOptions`. Without it a node runs as an activity with the default retry
  policy and timeouts.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from overseer.errors import OverseerError

DEFAULT_DECISIONS: tuple[str, ...] = ("approve", "reject")


class DecisionRefusedError(OverseerError):
    """A decision the pipeline's own rules refuse (answered 422 with ``code``).

    Raise it from :attr:`Gate.check_decision` with a stable code of your own, e.g.
    ``DecisionRefusedError("feedback is required", code="feedback_required")``.
    """

    code = "decision_refused"
    http_status = 422

    def __init__(self, message: str, *, code: str | None = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)
        if code:
            self.code = code  # type: ignore[misc]  # this refusal's own code shadows the class default


class RunStream:
    """A run's own event stream (:attr:`RunHooks.stream`), driven by the run's workflow.

    One instance per run, living in the workflow: every method is pure and deterministic
    (no I/O, clock or randomness) and returns the events (JSON dicts) to publish, in order,
    on :attr:`topic`. :meth:`chunk` is called in the segment activity, on an instance of its
    own per segment, as LangGraph makes each chunk, and must keep no state between chunks;
    its events go out live as rows of the run's live stream, with what the nodes write with
    ``get_stream_writer()`` (``custom`` chunks), and a reader merges them with the durable
    events (:func:`overseer.token_stream.merge_live`).
    """

    topic = "events"
    stream_modes: tuple[str, ...] = ()
    """Extra LangGraph stream modes the run should produce for :meth:`chunk` (e.g. ``tasks``)."""

    def start(self) -> list[dict[str, Any]]:
        """Events when the run starts."""
        return []

    def chunk(self, mode: str, chunk: Any) -> list[dict[str, Any]]:
        """Events for one LangGraph stream chunk (``updates``, ``values``, ``custom``, …); stateless."""
        return []

    def interrupt(self, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Events when the run waits for a decision on ``payload`` (the approval's payload)."""
        return []

    def decision(self, decision: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Events when a decision resumes the run."""
        return []

    def end(self, status: str, outcome: str | None, state: Mapping[str, Any]
            ) -> list[dict[str, Any]]:
        """Events when the graph has finished (the last one is the run's final event)."""
        return []

    def failed(self, error: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Events when the run fails with ``{code, message, node}``."""
        return []

    def cancelled(self) -> list[dict[str, Any]]:
        """Events when the run is cancelled."""
        return []


@dataclass(frozen=True)
class Intake:
    """How a run starts. Runs in the API, before the run's workflow exists.

    Attributes:
        accepts: ``("application/json",)`` for JSON runs, or the media types of an upload.
        input_model: validates a JSON run's ``input`` (pydantic); None accepts any object.
        options_model: the pipeline's options (pydantic, every field with a default), read
            from ``OVERSEER_<NAME>__<FIELD>`` environment variables; None = no options.
        make_input: ``(StartContext) -> dict``: the graph's input state for a new run, when
            the default (the JSON input or ``{"document": ...}``, plus the declared
            ``run_id``/``options``/``metadata``) is not what the graph takes.
        submit_path: where its runs start when not at ``POST /v1/pipelines/{name}/runs``
            (a route of its own :attr:`Api.router`); that generic route then answers 409
            naming it.
    """

    accepts: tuple[str, ...] = ("application/json",)
    input_model: type[BaseModel] | None = None
    options_model: type[BaseModel] | None = None
    make_input: Callable[[Any], dict[str, Any]] | None = None
    submit_path: str | None = None


@dataclass(frozen=True)
class Gate:
    """What the run's approvals take. Runs in the workflow's update validator: pure and deterministic.

    The recorded histories in ``tests/workflows/histories`` replay these hooks.

    Attributes:
        decisions: the decisions its human gate takes (``approve``/``reject`` by default;
            e.g. add ``revise``).
        check_decision: ``(payload, decision, state) -> dict | None``: the pipeline's own
            refusal rules. ``decision`` is the dict ``interrupt()`` will return (plus
            ``apply_proposal``); ``state`` is the graph's state at the pause with
            :attr:`decides_on_state`, else ``{}``. Raise :class:`DecisionRefusedError`;
            return a dict to replace fields of the decision (e.g. ``updates`` merged with a
            proposal), or None to keep it.
        decides_on_state: ``check_decision`` reads the graph's state at the pause, so each
            segment that ends at an interrupt hands the thread's values to the workflow
            (a larger history); False by default.
        human_gate: one line: what a reviewer decides (``GET /v1/pipelines``).
    """

    decisions: tuple[str, ...] = DEFAULT_DECISIONS
    check_decision: Callable[[Mapping[str, Any], dict[str, Any], Mapping[str, Any]],
                             dict[str, Any] | None] | None = None
    decides_on_state: bool = False
    human_gate: str = "approve or reject at each interrupt"


@dataclass(frozen=True)
class RunHooks:
    """How the run's workflow goes. Runs in the workflow: pure and deterministic (replayed).

    Attributes:
        result: ``(state) -> dict``: the run's result (``GET /v1/runs/{id}`` ``result``) from
            its final state; default ``{"output": state}``. A string ``outcome`` in it is the
            run's outcome.
        split: name of an activity ``(input state) -> [dict, ...]`` (registered with
            ``Pipeline.worker_parts``) that splits one submission into parts; with more than
            one part the run becomes a parent that starts one child run per part (input
            ``{**input, **part}``) and completes with outcome ``split``. It must heartbeat at
            least every 3 s while it works (``overseer.runtime.heartbeat.with_heartbeats``), so a
            dead worker is noticed.
        split_locally: ``(input state) -> bool``: True when this input's split is short (a
            text layer of a few pages), so it runs as a local activity in the run's own
            workflow task instead of a scheduled activity (one task-queue round trip fewer;
            docs/performance-history.md). Default: always a scheduled, heartbeating activity.
        local_segments: ``(input state) -> bool``: True when this input's segments are short
            (a text layer rather than a scan), so each is first tried as a local activity in
            the run's own workflow task (one task-queue round trip fewer; it falls back to a
            heartbeating activity after ``LOCAL_SEGMENT_SECONDS``, going on from the local
            try's checkpoints).
        stream: ``(input) -> RunStream``: a stream protocol of its own (e.g. a chat SSE
            contract) for the run's events: its methods run in the workflow, but
            :meth:`RunStream.chunk` in the segment activity. The run's generic ``graph``
            topic is then not published, so the pipeline's offsets stay dense.
    """

    result: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    split: str | None = None
    split_locally: Callable[[Any], bool] | None = None
    local_segments: Callable[[Any], bool] | None = None
    stream: Callable[[Any], RunStream] | None = None


@dataclass(frozen=True)
class NodeHooks:
    """What the run records per node. Runs in the segment activity, as each node completes.

    Attributes:
        node_snapshot: ``(state after the node) -> dict``: what each ``node.completed`` event
            merges into the run's result while it runs (live partial results), if anything.
        progress_nodes: ordered nodes whose completion is progress (``"3 of 5 complete"``).
    """

    node_snapshot: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    progress_nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConsoleView:
    """A table a pipeline adds to a run's page in the review console (escaped by the console).

    Attributes:
        title: the section's heading.
        columns: the column headings.
        rows: one list of cell texts per row, as many as ``columns``.
    """

    title: str
    columns: tuple[str, ...]
    rows: list[list[str]]


@dataclass(frozen=True)
class Api:
    """What the API and the console serve for it. Runs in the API process.

    Attributes:
        router: builds an extra FastAPI ``APIRouter`` for this pipeline, if any.
        report: ``(state) -> str`` (or a coroutine function): Markdown of a run's final or
            partial state, served at ``GET /v1/runs/{id}/report.md``.
        quotes: ``async (state, ids) -> {id: text}``: resolves quote ids the state holds
            (served to reviewers at ``GET /v1/runs/{id}/quotes``).
        record_fields: ``() -> {name: {"label", "required"}}``: the fields of the record its
            approvals edit (payload ``record``), in display order, for the console's form.
        console_view: ``async (pool, run_id) -> ConsoleView | None``: a section of its own
            on a run's page in the review console (e.g. its own table's rows for the run).
    """

    router: Callable[[], Any] | None = None
    report: Callable[[Mapping[str, Any]], Any] | None = None
    quotes: Callable[[Mapping[str, Any], list[str]], Any] | None = None
    record_fields: Callable[[], Mapping[str, Mapping[str, Any]]] | None = None
    console_view: Callable[[Any, str], Awaitable[ConsoleView | None]] | None = None


Projector = Callable[[Any, Any, datetime], Awaitable[None]]
"""``async (conn, event, occurred_at) -> None``: writes one new event (``NewEvent``) into read
models, inside the event log's transaction (so the log and the read models agree)."""


@dataclass(frozen=True)
class Store:
    """The pipeline's own tables. Its migrations run where Overseer's do; its projectors with the event log.

    Attributes:
        migrations: ``(name, SQL)`` in order, each applied once per database after
            Overseer's own and recorded in ``pipeline_migrations`` (never edit a shipped
            one: append another).
        projectors: ``{event type: projector}``: what each new event of that type writes
            into the pipeline's tables, in the same transaction as the event. The type may
            be the runtime's own (``approval.decided``): a projector sees every run's events.
        read_models: the tables its projectors write (each with a ``run_id`` column):
            ``overseer check`` rebuilds them from the event log and compares.
    """

    migrations: tuple[tuple[str, str], ...] = ()
    projectors: Mapping[str, Projector] = dataclasses.field(default_factory=dict)
    read_models: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pipeline:
    """One hosted pipeline: a graph and what Overseer needs to run it, grouped by where it runs.

    Attributes:
        name: wire name (paths, workflow ids ``<name>-<run_id>``); ``[a-z0-9_-]+``.
        graph: a builder — a callable returning a ``StateGraph`` or a compiled graph — or
            the graph itself (as ``langgraph.json`` allows), or a Functional API
            ``@entrypoint``.
        description: one line for ``GET /v1/pipelines``.
        seed: the seed system it comes from (``"004"``), if any.
        intake: how a run starts (the API, before the workflow): :class:`Intake`.
        gate: what its approvals take (the workflow's update validator; pure): :class:`Gate`.
        run: how its workflow goes (the workflow; pure): :class:`RunHooks`.
        nodes: what is recorded per node (the segment activity): :class:`NodeHooks`.
        api: what the API and console serve for it (the API process): :class:`Api`.
        store: its own tables, migrations and projectors (:class:`Store`).
        worker_parts: ``() -> {"activities": [...], "workflows": [...]}``: what the worker
            registers for the pipeline besides the graph runtime (e.g. its split activity).
        source: where it was registered from (``langgraph.json`` path and entry).
    """

    name: str
    graph: Any
    description: str = ""
    seed: str | None = None
    intake: Intake = Intake()
    gate: Gate = Gate()
    run: RunHooks = RunHooks()
    nodes: NodeHooks = NodeHooks()
    api: Api = Api()
    store: Store = Store()
    worker_parts: Callable[[], dict[str, Any]] | None = None
    source: str = ""

    @property
    def entry_path(self) -> str:
        """The path that starts a run of this pipeline (:attr:`Intake.submit_path` or ``/v1``'s)."""
        return self.intake.submit_path or f"/v1/pipelines/{self.name}/runs"

    def checked_decision(self, payload: Mapping[str, Any], decision: dict[str, Any],
                         state: Mapping[str, Any]) -> dict[str, Any]:
        """``decision`` after the pipeline's :attr:`Gate.check_decision` (the fields it replaces merged in).

        Raises:
            DecisionRefusedError: the pipeline refuses the decision.
        """
        if self.gate.check_decision is None:
            return decision
        replaced = self.gate.check_decision(payload, decision,
                                            state if self.gate.decides_on_state else {})
        return {**decision, **(replaced or {})}

    @property
    def takes_upload(self) -> bool:
        """True when runs start from an uploaded file (multipart) rather than JSON."""
        return self.intake.accepts != ("application/json",)

    def workflow_id(self, run_id: str) -> str:
        """``<pipeline>-<run_id>``: the workflow id of a run, unique per run, readable in the Temporal UI."""
        return f"{self.name}-{run_id}"

    @property
    def env_prefix(self) -> str:
        """Where its options are read from: ``OVERSEER_<NAME>__`` (``-`` becomes ``_``)."""
        return f"OVERSEER_{self.name.upper().replace('-', '_')}__"

    def options(self, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The options snapshot a run starts with: the options model read from the environment.

        ``OVERSEER_<NAME>__<FIELD>=value`` sets a field (JSON values are parsed, so lists
        and numbers work). Returns ``{}`` when the pipeline has no options model.

        Raises:
            pydantic.ValidationError: a variable does not validate (at start-up).
        """
        model = self.intake.options_model
        if model is None:
            return {}
        environ = os.environ if environ is None else environ
        raw: dict[str, Any] = {}
        for field_name in model.model_fields:
            value = environ.get(self.env_prefix + field_name.upper())
            if value is not None:
                try:
                    raw[field_name] = json.loads(value)
                except json.JSONDecodeError:
                    raw[field_name] = value
        return model.model_validate(raw).model_dump(mode="json")
