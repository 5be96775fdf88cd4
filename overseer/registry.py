"""The one registry of hosted pipelines, loaded from ``langgraph.json`` files.

The project's own ``langgraph.json`` names the reference pipelines; ``OVERSEER_GRAPHS``
adds a deployment's files. Each graph entry is a :class:`overseer.pipelines.Pipeline`
(Overseer's declaration) or any LangGraph graph (given the contract's defaults). The
worker, the API, the catalogue and the console all read the same :class:`Registry`
(:func:`get_registry`).
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
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from overseer.errors import NotFoundError
from overseer.pipelines import Pipeline

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
                 auth_entry: tuple[str, Path, str] | None = None,
                 thread_ttl: tuple[float, str] | None = None) -> None:
        self._pipelines = dict(pipelines)
        self._graphs: dict[str, Any] = {}
        self._auth_entry = auth_entry
        self._auth: Any = None
        self.thread_ttl = thread_ttl
        """``(minutes, strategy)`` every new thread without a ``ttl`` of its own gets
        (a ``langgraph.json``'s ``checkpointer.ttl``, :func:`thread_ttl_of`), or None."""

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
            RegistryError: its graph entry does not give a graph, or gives a Functional API
                entrypoint (no builder: see :meth:`functional`).
        """
        return builder_of(self._graph(name), name)

    def functional(self, name: str) -> bool:
        """True when the pipeline's graph is a Functional API ``@entrypoint`` (no ``StateGraph``).

        Such a graph runs as it is (its own compiled ``Pregel``, given the runtime's
        checkpointer and store: :func:`overseer.compiled_graphs.compiled`); it has no node
        metadata, so none of its tasks runs as an activity of its own.

        Raises:
            NotFoundError: no such pipeline.
        """
        return _is_entrypoint(self._graph(name))

    def app(self, name: str) -> Any:
        """The pipeline's graph compiled without a checkpointer, to read its shape and schemas.

        Raises:
            NotFoundError: no such pipeline.
            RegistryError: its graph entry does not give a graph.
        """
        return self._graph(name) if self.functional(name) else self.builder(name).compile()

    def node_metadata(self, name: str) -> dict[str, Any]:
        """``{node: metadata}`` of the pipeline's graph; ``{}`` for an entrypoint (it has none).

        Raises:
            NotFoundError: no such pipeline.
            RegistryError: its graph entry does not give a graph.
        """
        if self.functional(name):
            return {}
        return {node: spec.metadata for node, spec in self.builder(name).nodes.items()}

    def breakpoints(self, name: str) -> dict[str, Any]:
        """The breakpoints the pipeline's graph was compiled with, as LangGraph keeps them.

        ``{"interrupt_before": …, "interrupt_after": …}`` (each ``"*"`` or a list of node
        names) for a graph given compiled (``builder.compile(interrupt_before=[…])``);
        ``{}`` for a builder. A run that names none of its own stops at these, as
        LangGraph's ``astream`` defaults to them (``overseer.runtime.segments``).

        Raises:
            NotFoundError: no such pipeline.
            RegistryError: its graph entry does not give a graph.
        """
        from langgraph.pregel import Pregel

        graph = self._graph(name)
        if not isinstance(graph, Pregel):
            return {}
        return {key: value if isinstance(value, str) else list(value)
                for key, value in (("interrupt_before", graph.interrupt_before_nodes),
                                   ("interrupt_after", graph.interrupt_after_nodes)) if value}

    def _graph(self, name: str) -> Any:
        """The pipeline's graph with its factory called (once per process): a builder or a compiled graph."""
        if name not in self._graphs:
            self._graphs[name] = graph_of(self.get(name).graph)
        return self._graphs[name]


def graph_of(graph: Any) -> Any:
    """``graph``, or what it returns when it is a factory (no argument, or ``config``: ``{}``).

    Factories may take no argument or one ``config`` argument, as ``langgraph.json`` allows.
    """
    from langgraph.graph import StateGraph
    from langgraph.pregel import Pregel

    if callable(graph) and not isinstance(graph, (StateGraph, Pregel)):
        params = [p for p in inspect.signature(graph).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                  and p.default is p.empty]
        return graph({}) if params else graph()
    return graph


def builder_of(graph: Any, name: str = "graph") -> Any:
    """The ``StateGraph`` behind ``graph``: a builder, a compiled graph, or a factory of either.

    Raises:
        RegistryError: ``graph`` (or what the factory returns, :func:`graph_of`) is neither
            (a Functional API entrypoint has no builder: :meth:`Registry.functional`).
    """
    from langgraph.graph import StateGraph
    from langgraph.pregel import Pregel

    graph = graph_of(graph)
    if isinstance(graph, Pregel):
        builder = getattr(graph, "builder", None)
        if builder is None:
            raise RegistryError(f"{name}: a compiled graph without its StateGraph builder "
                                "(a Functional API entrypoint: Registry.app)")
        graph = builder
    if not isinstance(graph, StateGraph):
        raise RegistryError(f"{name}: expected a StateGraph, a compiled graph or a factory of "
                            f"one, got {type(graph).__name__}")
    return graph


def _is_entrypoint(graph: Any) -> bool:
    """A Functional API ``@entrypoint``: a compiled ``Pregel`` with no ``StateGraph`` behind it."""
    from langgraph.pregel import Pregel

    return isinstance(graph, Pregel) and getattr(graph, "builder", None) is None


def load_langgraph_json(path: str | Path) -> dict[str, Pipeline]:
    """Pipelines named in one ``langgraph.json`` (the LangGraph CLI's format).

    ``graphs`` maps a name to ``"./path/file.py:attr"`` or ``"package.module:attr"``; the
    attribute may be a :class:`Pipeline` (Overseer's declaration, whose ``name`` must be
    its key), anything :func:`builder_of` accepts, or a Functional API ``@entrypoint``.
    ``dependencies`` entries that are paths are put on ``sys.path`` (packages are not
    installed); ``env`` (a dict or a ``.env`` file) fills environment variables that are not
    already set.

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
        else:  # the factory called once; a compiled graph kept for its breakpoints
            graph = graph_of(target)
            if not _is_entrypoint(graph):
                builder_of(graph, name)  # a graph, or RegistryError now rather than at a run
            out[name] = Pipeline(name=name, graph=graph, source=source,
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


def thread_ttl_of(path: str | Path) -> tuple[float, str] | None:
    """A ``langgraph.json``'s ``"checkpointer": {"ttl": {"default_ttl", "strategy"}}``, or None.

    As the Agent Server reads it: ``default_ttl`` in minutes, ``strategy`` ``delete``
    (default) or ``keep_latest``; ``sweep_interval_minutes`` is accepted and not needed
    (each thread has its own timer, :mod:`overseer.thread_ttl`).

    Returns:
        ``(minutes, strategy)``, or None when the file sets no ``default_ttl``.

    Raises:
        RegistryError: unreadable file, or a ``ttl`` that is not such an object.
    """
    from overseer.errors import InvalidRequestError
    from overseer.ttl_options import parse_ttl

    path, config = _read_config(path)
    checkpointer = config.get("checkpointer")
    ttl = checkpointer.get("ttl") if isinstance(checkpointer, dict) else None
    if ttl is None or isinstance(ttl, dict) and ttl.get("default_ttl") is None:
        return None
    try:
        if not isinstance(ttl, dict):
            raise InvalidRequestError("not an object")
        return parse_ttl({"ttl": ttl["default_ttl"], "strategy": ttl.get("strategy")})
    except InvalidRequestError as err:
        raise RegistryError(f"{path}: checkpointer.ttl must be {{\"default_ttl\": minutes, "
                            f"\"strategy\": \"delete\" | \"keep_latest\"}} ({err})") from err


def load_registry(graph_files: str | None = None) -> Registry:
    """The project's pipelines plus every ``langgraph.json`` in ``graph_files`` (``:``-separated).

    A user file may not reuse a name the project already has; at most one file may name an
    ``auth`` (it governs the whole deployment's Agent Server API).

    Raises:
        RegistryError: a file or entry fails to load, a name is taken twice, or two files
            name an ``auth`` or a ``checkpointer.ttl``.
    """
    pipelines = load_langgraph_json(PROJECT_GRAPHS)
    auth = auth_entry_of(PROJECT_GRAPHS)
    ttl, ttl_file = thread_ttl_of(PROJECT_GRAPHS), str(PROJECT_GRAPHS)
    for item in (graph_files or "").split(":"):
        if not item.strip():
            continue
        found_ttl = thread_ttl_of(item.strip())
        if found_ttl is not None and ttl is not None:
            raise RegistryError(f"{item}: a checkpointer.ttl is already set by {ttl_file}; a "
                                "deployment has one")
        if found_ttl is not None:
            ttl, ttl_file = found_ttl, item.strip()
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
    return Registry(pipelines, auth, ttl)


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
