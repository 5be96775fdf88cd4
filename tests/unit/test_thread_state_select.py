"""``get_state`` / ``get_history``'s ``select``: top-level fields and ``values.<key>``."""

from __future__ import annotations

import pytest

from overseer.errors import InvalidRequestError
from overseer.threads import check_state_select, select_state

STATE = {"values": {"messages": ["hi"], "topic": "t"}, "next": ["a"], "tasks": [],
         "checkpoint": {"checkpoint_id": "1"}, "metadata": {}, "created_at": None,
         "parent_checkpoint": None, "interrupts": []}


def test_select_keeps_what_it_names():
    assert select_state(STATE, check_state_select(None)) is STATE
    assert select_state(STATE, check_state_select([])) is STATE
    assert select_state(STATE, check_state_select(["values.messages"])) == \
        {"values": {"messages": ["hi"]}}
    assert select_state(STATE, check_state_select(["next", "values.topic", "values.none"])) == \
        {"next": ["a"], "values": {"topic": "t"}}
    assert select_state(STATE, check_state_select(["values", "values.topic"])) == \
        {"values": STATE["values"]}


@pytest.mark.parametrize("select", ["values", ["secrets"], ["values."], [3]])
def test_a_bad_select_is_refused(select):
    with pytest.raises(InvalidRequestError) as err:
        check_state_select(select)
    assert err.value.details == {"field": "select"}
