"""The pipeline contract and the one registry that the worker, the API, the catalogue and the console read.

A *pipeline* is a LangGraph graph plus what Overseer needs to host it: a name, where its
input comes from, how its options are configured, which decisions its human gate takes.
A user's graph named in a ``langgraph.json`` becomes a :class:`Pipeline` with defaults;
Overseer's reference pipelines declare theirs in ``activities/<name>/pipeline.py`` and are
named in the project's own ``langgraph.json`` — the same mechanism (STYLE: "graphs are
plug-ins named in a config file and found through one registry").

What a graph sees (nothing here needs the graph to import Overseer):

- **Input state.** A JSON run (``POST /v1/pipelines/{name}/runs`` with ``{"input": {...}}``)
  starts the graph with ``input`` (validated by :attr:`Pipeline.input_model` when given).
  An upload run (a pipeline whose :attr:`Pipeline.accepts` names media types) starts it
  with ``{"document": {sha256, kind, filename, content_type, size_bytes, page_count}}``.
  In both cases the runtime adds ``run_id`` (str), ``options`` (the options model's
  ``model_dump(mode="json")``) and ``metadata`` (the request's metadata dict) — each only
  when the graph's input schema declares that key.
- **Interrupts.** ``interrupt(payload)`` opens an approval whose payload (JSON) the
  reviewer sees; ``interrupt()`` returns ``{"decision", "note", "updates", "resume",
  "decided_by"}``. ``decision`` is one of :attr:`Pipeline.decisions`.
- **Nodes.** Node metadata ``{"overseer": {...}}`` chooses placement and limits; see
  :class:`NodeOptions`. Without it a node runs as an activity with the default retry
  policy and timeouts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from overseer.errors import OverseerError

DEFAULT_DECISIONS: tuple[str, ...] = ("approve", "reject")


class DecisionRefusedError(OverseerError):
    """A decision the pipeline's own rules refuse (answered 422 with ``code``).

    Raise it from :attr:`Pipeline.check_decision` with a stable code of your own, e.g.
    ``DecisionRefusedError("feedback is required", code="feedback_required")``.
    """

    code = "decision_refused"
    http_status = 422

    def __init__(self, message: str, *, code: str | None = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)
        if code:
            self.code = code  # type: ignore[misc]


class NodeOptions(BaseModel):
    """Per-node settings, read from node metadata ``{"overseer": {...}}``.

    Attributes:
        run_in: ``activity`` (default: I/O or real CPU), ``local_activity`` (short I/O, under
            ~10 s; no task-queue round trip) or ``workflow`` (cheap, pure, deterministic steps;
            must not do I/O, read the clock or draw random numbers).
        timeout_seconds: start-to-close timeout of one attempt (default 300).
        heartbeat_seconds: heartbeat timeout for long activities (default none); the runtime
            heartbeats on the node's behalf while it runs.
        max_attempts: attempts for errors that may be transient (default 5); a bug
            (``TypeError``, ``KeyError``, validation errors …) always fails after one.
        non_retryable: extra exception class names or ``ApplicationError`` types never retried.
        summary: what the Temporal UI shows for the node's activity (default: the node name).
    """

    run_in: str = "activity"
    timeout_seconds: float = 300.0
    heartbeat_seconds: float | None = None
    max_attempts: int = 5
    non_retryable: list[str] = []
    summary: str | None = None


@dataclass(frozen=True)
class Pipeline:
    """One hosted pipeline: a graph and what Overseer needs to run it.

    Attributes:
        name: wire name (paths, workflow ids ``<name>-<run_id>``); ``[a-z0-9_-]+``.
        graph: a builder — a callable returning a ``StateGraph`` or a compiled graph — or
            the graph itself (as ``langgraph.json`` allows).
        description: one line for ``GET /v1/pipelines``.
        seed: the seed system it comes from (``"004"``), if any.
        input_model: validates a JSON run's ``input`` (pydantic); None accepts any object.
        options_model: the pipeline's options (pydantic, every field with a default), read
            from ``OVERSEER_<NAME>__<FIELD>`` environment variables; None = no options.
        accepts: ``("application/json",)`` for JSON runs, or the media types of an upload.
        decisions: the decisions its human gate takes (``approve``/``reject`` by default;
            e.g. add ``revise``).
        check_decision: ``(payload, decision) -> None``: the pipeline's own refusal rules,
            pure and deterministic (it runs in the update validator). ``decision`` is the
            dict ``interrupt()`` will return. Raise :class:`DecisionRefusedError`.
        progress_nodes: ordered nodes whose completion is progress (``"3 of 5 complete"``).
        human_gate: one line: what a reviewer decides.
        console_view: template name of a pipeline-specific console panel, if any.
        router: builds an extra FastAPI ``APIRouter`` for this pipeline, if any.
        workflow: the Temporal workflow type that runs it (``GraphRunWorkflow`` unless a
            pipeline extends it through hooks).
        source: where it was registered from (``langgraph.json`` path and entry).
    """

    name: str
    graph: Any
    description: str = ""
    seed: str | None = None
    input_model: type[BaseModel] | None = None
    options_model: type[BaseModel] | None = None
    accepts: tuple[str, ...] = ("application/json",)
    decisions: tuple[str, ...] = DEFAULT_DECISIONS
    check_decision: Callable[[Mapping[str, Any], Mapping[str, Any]], None] | None = None
    progress_nodes: tuple[str, ...] = ()
    human_gate: str = "approve or reject at each interrupt"
    console_view: str | None = None
    router: Callable[[], Any] | None = None
    workflow: str = "GraphRunWorkflow"
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def takes_upload(self) -> bool:
        """True when runs start from an uploaded file (multipart) rather than JSON."""
        return self.accepts != ("application/json",)

    def workflow_id(self, run_id: str) -> str:
        """``<pipeline>-<run_id>`` (DESIGN §3)."""
        return f"{self.name}-{run_id}"
