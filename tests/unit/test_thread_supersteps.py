"""``threads.create``'s ``supersteps`` read into LangGraph's ``StateUpdate``s (before any write)."""

from __future__ import annotations

import pytest
from langgraph.types import Command

from overseer.errors import InvalidRequestError
from overseer.threads import parse_supersteps

GRAPH = {"graph_id": "document_intake"}


def test_values_and_commands_become_state_updates_per_superstep():
    graph_id, steps = parse_supersteps([
        {"updates": [{"values": {"a": 1}, "as_node": "__input__"}]},
        {"updates": [{"values": {"b": 2}, "as_node": "x"},
                     {"values": None, "command": {"update": {"c": 3}, "goto": "y"},
                      "as_node": "z"}]},
    ], GRAPH)
    assert graph_id == "document_intake"
    assert [[(u.values if not isinstance(u.values, Command) else "command", u.as_node)
             for u in step] for step in steps] == \
        [[({"a": 1}, "__input__")], [({"b": 2}, "x"), ("command", "z")]]
    command = steps[1][1].values
    assert isinstance(command, Command) and command.update == {"c": 3} and command.goto == "y"


@pytest.mark.parametrize(("supersteps", "metadata", "field"), [
    ([{"updates": []}], {}, "metadata.graph_id"),
    ([{"updates": []}], {"graph_id": "no_such_graph"}, "metadata.graph_id"),
    ({"updates": []}, GRAPH, "supersteps"),
    ([{"updates": "x"}], GRAPH, "supersteps"),
    ([{"updates": ["x"]}], GRAPH, "supersteps"),
    (["x"], GRAPH, "supersteps"),
])
def test_bad_supersteps_are_refused_before_anything_is_written(supersteps, metadata, field):
    with pytest.raises(InvalidRequestError) as err:
        parse_supersteps(supersteps, metadata)
    assert err.value.details == {"field": field}
