"""The pipeline contract and the one registry that the worker, the API, the catalogue and the console read.

A *pipeline* is a LangGraph graph plus what Overseer needs to host it: a name, where its
input comes from, how its options are configured, which decisions its human gate takes.
A user's graph named in a ``langgraph.json`` becomes a :class:`Pipeline` with defaults;
Overseer's reference pipelines declare theirs in ``activities/<name>/pipeline.py`` and are
named in the project's own ``langgraph.json`` — the same mechanism: graphs are plug-ins
named in a config file and found through one registry.

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
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from overseer.errors import NotFoundError, OverseerError

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
            least every 3 s while it works (``activities.heartbeat.with_heartbeats``), so a
            dead worker is noticed.
        split_locally: ``(input state) -> bool``: True when this input's split is short (a
            text layer of a few pages), so it runs as a local activity in the run's own
            workflow task instead of a scheduled activity (one task-queue round trip fewer;
            docs/performance.md). Default: always a scheduled, heartbeating activity.
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
    """

    router: Callable[[], Any] | None = None
    report: Callable[[Mapping[str, Any]], Any] | None = None
    quotes: Callable[[Mapping[str, Any], list[str]], Any] | None = None
    record_fields: Callable[[], Mapping[str, Mapping[str, Any]]] | None = None


@dataclass(frozen=True)
class Pipeline:
    """One hosted pipeline: a graph and what Overseer needs to run it, grouped by where it runs.

    Attributes:
        name: wire name (paths, workflow ids ``<name>-<run_id>``); ``[a-z0-9_-]+``.
        graph: a builder — a callable returning a ``StateGraph`` or a compiled graph — or
            the graph itself (as ``langgraph.json`` allows).
        description: one line for ``GET /v1/pipelines``.
        seed: the seed system it comes from (``"004"``), if any.
        intake: how a run starts (the API, before the workflow): :class:`Intake`.
        gate: what its approvals take (the workflow's update validator; pure): :class:`Gate`.
        run: how its workflow goes (the workflow; pure): :class:`RunHooks`.
        nodes: what is recorded per node (the segment activity): :class:`NodeHooks`.
        api: what the API and console serve for it (the API process): :class:`Api`.
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


# --- the registry ------------------------------------------------------------------------------

PROJECT_GRAPHS = Path(__file__).resolve().parents[1] / "langgraph.json"
"""The project's own ``langgraph.json``: the reference pipelines, registered like a user's graph."""

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


class RegistryError(ValueError):
    """A ``langgraph.json`` or one of its entries cannot be loaded (raised at start-up)."""


class Registry:
    """Every hosted pipeline by name, loaded once per process from ``langgraph.json`` files.

    The worker builds its workflows' graphs and node activities from it; the API, the
    catalogue and the console list and start pipelines from it.
    """

    def __init__(self, pipelines: Mapping[str, Pipeline],
                 auth_entry: tuple[str, Path, str] | None = None) -> None:
        self._pipelines = dict(pipelines)
        self._builders: dict[str, Any] = {}
        self._auth_entry = auth_entry
        self._auth: Any = None

    @property
    def auth_source(self) -> str | None:
        """Where the deployment's LangGraph ``Auth`` comes from (``file:entry``), or None."""
        return f"{self._auth_entry[2]}:{self._auth_entry[0]}" if self._auth_entry else None

    def auth(self) -> Any:
        """The ``langgraph_sdk.Auth`` named by a ``langgraph.json``'s ``auth.path``, or None.

        Imported on first use (the API needs it; the worker never asks).

        Raises:
            RegistryError: the entry cannot be imported or is not an ``Auth``.
        """
        if self._auth_entry is None:
            return None
        if self._auth is None:
            from langgraph_sdk import Auth

            entry, base, source = self._auth_entry
            target = _import_entry(entry, base, "auth")
            if not isinstance(target, Auth):
                raise RegistryError(f"{source}: auth.path {entry!r} is a "
                                    f"{type(target).__name__}, not a langgraph_sdk.Auth")
            self._auth = target
        return self._auth

    def __iter__(self) -> Iterator[Pipeline]:
        """Pipelines in registration order: the project's, then each ``OVERSEER_GRAPHS`` file's."""
        return iter(list(self._pipelines.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._pipelines

    def names(self) -> list[str]:
        """Pipeline names, sorted."""
        return sorted(self._pipelines)

    def get(self, name: str) -> Pipeline:
        """The pipeline called ``name``.

        Raises:
            NotFoundError: no such pipeline (404, with the known names).
        """
        try:
            return self._pipelines[name]
        except KeyError:
            raise NotFoundError(f"unknown pipeline {name!r}",
                                details={"known": self.names()}) from None

    def builder(self, name: str) -> Any:
        """The pipeline's ``StateGraph`` (built once per process and never compiled in place).

        Raises:
            NotFoundError: no such pipeline.
            RegistryError: its graph entry does not give a graph.
        """
        if name not in self._builders:
            self._builders[name] = builder_of(self.get(name).graph, name)
        return self._builders[name]


def builder_of(graph: Any, name: str = "graph") -> Any:
    """The ``StateGraph`` behind ``graph``: a builder, a compiled graph, or a factory of either.

    Factories may take no argument or one ``config`` argument (``{}`` is passed), as
    ``langgraph.json`` allows.

    Raises:
        RegistryError: ``graph`` (or what the factory returns) is neither.
    """
    from langgraph.graph import StateGraph
    from langgraph.pregel import Pregel

    if callable(graph) and not isinstance(graph, (StateGraph, Pregel)):
        params = [p for p in inspect.signature(graph).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                  and p.default is p.empty]
        graph = graph({}) if params else graph()
    if isinstance(graph, Pregel):
        builder = getattr(graph, "builder", None)
        if builder is None:
            raise RegistryError(f"{name}: a compiled graph without its StateGraph builder "
                                "(Functional API entrypoints are not supported yet)")
        graph = builder
    if not isinstance(graph, StateGraph):
        raise RegistryError(f"{name}: expected a StateGraph, a compiled graph or a factory of "
                            f"one, got {type(graph).__name__}")
    return graph


def load_langgraph_json(path: str | Path) -> dict[str, Pipeline]:
    """Pipelines named in one ``langgraph.json`` (the LangGraph CLI's format).

    ``graphs`` maps a name to ``"./path/file.py:attr"`` or ``"package.module:attr"``; the
    attribute may be a :class:`Pipeline` (Overseer's declaration, whose ``name`` must be
    its key) or anything :func:`builder_of` accepts. ``dependencies`` entries that are paths are put on
    ``sys.path`` (packages are not installed); ``env`` (a dict or a ``.env`` file) fills
    environment variables that are not already set.

    Raises:
        RegistryError: unreadable file, bad entry, import error, bad name, a Pipeline whose
            ``name`` is not its key.
    """
    path, config = _read_config(path)
    graphs = config.get("graphs")
    if not isinstance(graphs, dict) or not graphs:
        raise RegistryError(f"{path}: 'graphs' must be a non-empty object")
    base = path.parent
    for dep in config.get("dependencies") or ["."]:
        if isinstance(dep, str) and (dep.startswith(".") or dep.startswith("/")):
            folder = str((base / dep).resolve())
            if folder not in sys.path:
                sys.path.insert(0, folder)
    _load_env(config.get("env"), base)
    out: dict[str, Pipeline] = {}
    for name, entry in graphs.items():
        if not _NAME.match(name):
            raise RegistryError(f"{path}: graph name {name!r} must match {_NAME.pattern}")
        if not isinstance(entry, str) or ":" not in entry:
            raise RegistryError(f"{path}: graph {name!r} must be 'path/file.py:attr' or "
                                "'package.module:attr'")
        target = _import_entry(entry, base, name)
        source = f"{path}:{name}"
        if isinstance(target, Pipeline):
            if target.name != name:
                raise RegistryError(f"{path}: graph {name!r} is a Pipeline named "
                                    f"{target.name!r}; the key and Pipeline.name must agree")
            out[name] = dataclasses.replace(target, source=source)
        else:
            builder = builder_of(target, name)
            out[name] = Pipeline(name=name, graph=builder, source=source,
                                 description=f"graph {entry} from {path.name}")
    return out


def _read_config(path: str | Path) -> tuple[Path, dict[str, Any]]:
    path = Path(path).resolve()
    try:
        config = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise RegistryError(f"{path}: cannot read langgraph.json ({err})") from err
    if not isinstance(config, dict):
        raise RegistryError(f"{path}: langgraph.json must be an object")
    return path, config


def auth_entry_of(path: str | Path) -> tuple[str, Path, str] | None:
    """A ``langgraph.json``'s ``"auth": {"path": "./auth.py:auth"}``: ``(entry, base, file)``, or None.

    Raises:
        RegistryError: unreadable file, or an ``auth`` without a ``path`` of the form ``file:attr``.
    """
    path, config = _read_config(path)
    auth = config.get("auth")
    if auth is None:
        return None
    entry = auth.get("path") if isinstance(auth, dict) else None
    if not isinstance(entry, str) or ":" not in entry:
        raise RegistryError(f"{path}: 'auth' must be {{\"path\": \"./auth.py:auth\"}}")
    return entry, path.parent, str(path)


def load_registry(graph_files: str | None = None) -> Registry:
    """The project's pipelines plus every ``langgraph.json`` in ``graph_files`` (``:``-separated).

    A user file may not reuse a name the project already has; at most one file may name an
    ``auth`` (it governs the whole deployment's Agent Server API).

    Raises:
        RegistryError: a file or entry fails to load, a name is taken twice, or two files
            name an ``auth``.
    """
    pipelines = load_langgraph_json(PROJECT_GRAPHS)
    auth = auth_entry_of(PROJECT_GRAPHS)
    for item in (graph_files or "").split(":"):
        if not item.strip():
            continue
        for name, pipeline in load_langgraph_json(item.strip()).items():
            if name in pipelines:
                raise RegistryError(f"{item}: graph name {name!r} is already registered by "
                                    f"{pipelines[name].source}")
            pipelines[name] = pipeline
        found = auth_entry_of(item.strip())
        if found is not None and auth is not None:
            raise RegistryError(f"{item}: an auth is already set by {auth[2]}; a deployment "
                                "has one")
        auth = found or auth
    return Registry(pipelines, auth)


_registry: Registry | None = None


def get_registry() -> Registry:
    """The process's registry (``OVERSEER_GRAPHS`` read on first use)."""
    global _registry
    if _registry is None:
        _registry = load_registry(os.environ.get("OVERSEER_GRAPHS"))
    return _registry


def set_registry(registry: Registry | None) -> None:
    """Install (or with None, forget) the process's registry — for tests and the CLI."""
    global _registry
    _registry = registry


def _import_entry(entry: str, base: Path, name: str) -> Any:
    target, _, attr = entry.rpartition(":")
    try:
        if target.endswith(".py") or "/" in target:
            file = (base / target).resolve()
            module_name = "overseer_user_graphs." + re.sub(r"\W", "_", str(file))
            module = sys.modules.get(module_name)
            if module is None:
                spec = importlib.util.spec_from_file_location(module_name, file)
                if spec is None or spec.loader is None:
                    raise RegistryError(f"graph {name!r}: cannot import {file}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[module_name] = module
                try:
                    spec.loader.exec_module(module)
                except BaseException:
                    del sys.modules[module_name]
                    raise
        else:
            module = importlib.import_module(target)
    except RegistryError:
        raise
    except Exception as err:
        raise RegistryError(f"graph {name!r}: importing {target} failed: {err!r}") from err
    try:
        return getattr(module, attr)
    except AttributeError:
        raise RegistryError(f"graph {name!r}: {target} has no attribute {attr!r}") from None


def _load_env(env: Any, base: Path) -> None:
    if isinstance(env, dict):
        for key, value in env.items():
            os.environ.setdefault(str(key), str(value))
    elif isinstance(env, str):
        file = (base / env).resolve()
        if not file.is_file():
            raise RegistryError(f"env file {file} does not exist")
        for line in file.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                os.environ.setdefault(key.strip(), value.strip().strip("'\""))
