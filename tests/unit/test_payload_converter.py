"""Overseer's payload converter decodes what the SDK's default decodes, to the same objects.

:class:`overseer.temporal_client.PayloadConverter` only reads each dataclass's field types
once per class; the payloads and the decoded values must not change.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.contrib.workflow_streams import PublisherState, WorkflowStreamState
from temporalio.contrib.workflow_streams._types import _WorkflowStreamWireItem
from temporalio.converter import DefaultPayloadConverter

from overseer.run_types import GraphRunInput
from overseer.runtime.segment_call import SegmentCall, SegmentResult
from overseer.temporal_client import PayloadConverter


def _both(value: Any, hint: type) -> tuple[Any, Any]:
    payloads = DefaultPayloadConverter().to_payloads([value])
    assert PayloadConverter().to_payloads([value]) == payloads  # the same on the wire
    return (DefaultPayloadConverter().from_payloads(payloads, [hint])[0],
            PayloadConverter().from_payloads(payloads, [hint])[0])


@pytest.mark.parametrize("value", [
    SegmentCall(run_id="r", pipeline="p", thread_id="t", input={"topic": "a"},
                interrupt_before=["n1"], interrupt_after="*", modes=["values", "updates"],
                ending={"thread_state": {"marks": []}}, context={"user": 1}),
    SegmentResult(status="interrupted", interrupts=[{"id": "i", "value": {"q": 1}}],
                  nodes=["a", "b"], snapshot=None, next=["c"]),
    GraphRunInput(run_id="r", pipeline="p", input={"x": [1, 2]}, thread_id=None,
                  stream_state=WorkflowStreamState(
                      log=[_WorkflowStreamWireItem(topic="events", data="YQ==", offset=3)],
                      base_offset=2,
                      publishers={"w": PublisherState(sequence=4, last_seen=datetime(
                          2026, 11, 27, 9, 30, tzinfo=UTC))})),
    GraphRunInput(run_id="r", pipeline="p", input={}),
], ids=["segment_call", "segment_result", "run_input_with_stream", "run_input"])
def test_decodes_the_same_objects_as_the_sdk(value: Any) -> None:
    sdk, ours = _both(value, type(value))
    assert ours == sdk == value
    assert type(ours) is type(value)
    # twice: the second decode reads the class's fields from the cache
    assert PayloadConverter().from_payloads(
        DefaultPayloadConverter().to_payloads([value]), [type(value)])[0] == value


def test_unknown_keys_are_ignored_and_a_missing_field_fails_as_with_the_sdk() -> None:
    payloads = DefaultPayloadConverter().to_payloads([{"status": "done", "later": 1}])
    sdk = DefaultPayloadConverter().from_payloads(payloads, [SegmentResult])[0]
    ours = PayloadConverter().from_payloads(payloads, [SegmentResult])[0]
    assert ours == sdk == SegmentResult(status="done")
    missing = DefaultPayloadConverter().to_payloads([{"pipeline": "p"}])
    for converter in (DefaultPayloadConverter(), PayloadConverter()):
        with pytest.raises(TypeError, match="missing 2 required .* 'run_id' and 'thread_id'"):
            converter.from_payloads(missing, [SegmentCall])
    wrong = DefaultPayloadConverter().to_payloads([{"status": "done", "nodes": 3}])
    with pytest.raises(TypeError, match="nodes"):  # a field's value that does not convert
        PayloadConverter().from_payloads(wrong, [SegmentResult])


@dataclasses.dataclass
class _Counted:
    name: str
    seen: int = dataclasses.field(default=0, init=False)


def test_a_dataclass_with_an_init_false_field_is_left_to_the_sdk() -> None:
    value = _Counted("a")
    value.seen = 2
    sdk, ours = _both(value, _Counted)
    assert ours.seen == sdk.seen == 2 and ours.name == "a"

