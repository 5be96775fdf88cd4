"""``threads.search``'s ``extract`` paths: parsed as the Agent Server reads them, walked over a thread."""

from __future__ import annotations

import pytest

from overseer.errors import InvalidRequestError
from overseer.threads import MAX_EXTRACT_PATHS, extracted, parse_extract

RESERVED = frozenset({"thread_id", "values", "metadata"})
THREAD = {"thread_id": "t", "metadata": {"user": {"name": "Ada"}},
          "values": {"messages": [{"content": "hi"}, {"content": "bye", "tags": ["a", "b"]}],
                     "count": 0, "flag": False},
          "interrupts": {}}


def test_paths_walk_keys_and_indexes_and_end_in_none():
    found = parse_extract({"last": "values.messages[-1].content", "first": "values.messages[0]",
                           "tag": "values.messages[1].tags[-2]", "who": "metadata.user.name",
                           "zero": "values.count", "no": "values.flag", "all": "values"},
                          RESERVED)
    assert found["last"] == ["values", "messages", -1, "content"]
    assert extracted(THREAD, found) == {
        "last": "bye", "first": {"content": "hi"}, "tag": "a", "who": "Ada", "zero": 0,
        "no": False, "all": THREAD["values"]}
    ends = parse_extract({"past": "values.messages[2]", "key_of_list": "values.messages.content",
                          "index_of_dict": "metadata.user[0]", "none": "interrupts.x.y",
                          "before": "values.messages[-3]"}, RESERVED)
    assert extracted(THREAD, ends) == dict.fromkeys(ends)


@pytest.mark.parametrize("extract", [
    ["values.a"],                                   # not an object
    {"values": "values.a"},                          # a thread field as alias
    {"1x": "values.a"},                              # not an identifier
    {"a": "secrets.b"},                              # another root
    {"a": ""}, {"a": 3},                             # not a path
    {"a": "values..b"}, {"a": "values[x]"}, {"a": "values.b["},
    {f"a{i}": "values.a" for i in range(MAX_EXTRACT_PATHS + 1)},
])
def test_a_bad_extract_is_refused_with_its_field(extract):
    with pytest.raises(InvalidRequestError) as err:
        parse_extract(extract, RESERVED)
    assert err.value.details == {"field": "extract"}
