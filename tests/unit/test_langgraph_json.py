"""Loading a langgraph.json (overseer.registry.load_langgraph_json / load_registry)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overseer.pipelines import Pipeline
from overseer.registry import Registry, RegistryError, load_langgraph_json, load_registry

GRAPH_PY = '''
from langgraph.func import entrypoint
from langgraph.graph import START, END, StateGraph
from typing import TypedDict

from overseer.pipelines import Pipeline


class State(TypedDict):
    topic: str


def build():
    graph = StateGraph(State)
    graph.add_node("echo", lambda state: {"topic": state["topic"].upper()})
    graph.add_edge(START, "echo")
    graph.add_edge("echo", END)
    return graph


declared = Pipeline(name="declared", graph=build, description="declared by the user")

factory_calls = []


def build_paused():
    factory_calls.append(1)
    return build().compile(interrupt_before=["echo"])


everywhere = build().compile(interrupt_after="*")


@entrypoint()
def shout(inp: dict) -> str:
    return inp["topic"].upper()
'''


def project(tmp_path: Path, graphs: dict[str, str]) -> Path:
    (tmp_path / "graph_mod_lgjson.py").write_text(GRAPH_PY)
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps({"dependencies": ["."], "graphs": graphs}))
    return path


def test_a_plain_graph_and_a_pipeline_named_by_its_key_load(tmp_path: Path) -> None:
    loaded = load_langgraph_json(project(tmp_path, {
        "echo": "./graph_mod_lgjson.py:build", "declared": "./graph_mod_lgjson.py:declared"}))
    assert set(loaded) == {"echo", "declared"}
    assert isinstance(loaded["declared"], Pipeline) and loaded["declared"].name == "declared"
    assert loaded["declared"].description == "declared by the user"
    assert loaded["echo"].source.endswith("langgraph.json:echo")


def test_a_pipeline_under_another_key_is_refused_not_renamed(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="the key and Pipeline.name must agree"):
        load_langgraph_json(project(tmp_path, {"renamed": "./graph_mod_lgjson.py:declared"}))


def test_bad_names_and_names_the_project_has_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="must match"):
        load_langgraph_json(project(tmp_path, {"no spaces": "./graph_mod_lgjson.py:build"}))
    path = project(tmp_path, {"pricing": "./graph_mod_lgjson.py:build"})
    with pytest.raises(RegistryError, match="already registered"):
        load_registry(str(path))


def test_breakpoints_given_to_compile_are_kept_and_a_factory_is_called_once(
        tmp_path: Path) -> None:
    import re
    import sys

    registry = Registry(load_langgraph_json(project(tmp_path, {
        "paused": "./graph_mod_lgjson.py:build_paused",
        "everywhere": "./graph_mod_lgjson.py:everywhere",
        "echo": "./graph_mod_lgjson.py:build"})))
    assert registry.breakpoints("paused") == {"interrupt_before": ["echo"]}
    assert registry.breakpoints("everywhere") == {"interrupt_after": "*"}
    assert registry.breakpoints("echo") == {}  # a builder has none
    assert set(registry.builder("paused").nodes) == {"echo"}
    module = next(m for name, m in sys.modules.items()
                  if name.endswith(re.sub(r"\W", "_", str(tmp_path / "graph_mod_lgjson.py"))))
    assert len(module.factory_calls) == 1


def test_a_functional_api_entrypoint_loads_as_a_graph_with_no_builder(tmp_path: Path) -> None:
    registry = Registry(load_langgraph_json(project(tmp_path, {
        "shout": "./graph_mod_lgjson.py:shout", "echo": "./graph_mod_lgjson.py:build"})))
    assert registry.functional("shout") and not registry.functional("echo")
    assert registry.node_metadata("shout") == {}
    assert list(registry.app("shout").nodes) == ["shout"]
    assert registry.app("shout").invoke({"topic": "hi"}) == "HI"
    assert registry.node_metadata("echo") == {"echo": None}
    with pytest.raises(RegistryError, match="Functional API entrypoint"):
        registry.builder("shout")
