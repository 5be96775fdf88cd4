"""Parsing, windowing, sentences and quote ids of the thematic_analysis upload (pure, no Postgres)."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import date

import pytest

from activities.thematic_analysis import dataset
from activities.thematic_analysis.dataset import (
    DatasetError,
    build_corpus,
    parse_dataset,
    parse_window_metadata,
    quote_id,
    window,
)

CSV = (b"interaction_id,account_id,occurred_at,text\n"
       b"a1,acme,2024-01-02,\"The delivery was late. Support was kind, though.\"\n"
       b"a2,acme,2024-02-10T09:30:00Z,Great value for the price. I would buy again.\n"
       b"a3,other,2024-01-05,Not in this account at all.\n"
       b"a4,acme,2024-03-01,Outside the window entirely here.\n")


def test_csv_and_jsonl_parse_to_the_same_rows():
    rows = parse_dataset(CSV, "x.csv")
    lines = [json.dumps({"interaction_id": r.interaction_id, "account_id": r.account_id,
                         "occurred_at": r.occurred_at.isoformat(), "text": r.text}) for r in rows]
    assert parse_dataset("\n".join(lines).encode(), "x.jsonl") == rows
    assert parse_dataset("\n".join(lines).encode()) == rows  # sniffed
    assert rows[1].occurred_at == date(2024, 2, 10)


def test_window_is_inclusive_and_per_account():
    rows = parse_dataset(CSV, "x.csv")
    assert [r.interaction_id for r in window(rows, "acme", "2024-01-02", "2024-02-10")] == ["a1", "a2"]
    assert window(rows, "acme", "2025-01-01", "2025-12-31") == []
    with pytest.raises(DatasetError, match="start_date is after end_date"):
        window(rows, "acme", "2024-03-01", "2024-01-01")


def test_bad_rows_are_reported_with_row_numbers():
    bad = (b"interaction_id,account_id,occurred_at,text\n"
           b"a1,acme,yesterday,hello there friend\n"
           b"a2,acme,2024-01-01,\n"
           b"a2,acme,2024-01-01,dup one\n"
           b"a2,acme,2024-01-01,dup two\n")
    with pytest.raises(DatasetError) as caught:
        parse_dataset(bad, "bad.csv")
    message = caught.value.message
    assert "row 2: occurred_at 'yesterday' is not an ISO-8601 date" in message
    assert "row 3: empty or missing text" in message
    assert "row 5: duplicate interaction_id 'a2'" in message
    assert caught.value.code == "invalid_dataset"


@pytest.mark.parametrize(("content", "message"), [
    (b"id,text\n1,hi\n", "lacks column(s) interaction_id, account_id, occurred_at"),
    (b"", "no rows"),
    (b"\xff\xfe\x00bad", "not UTF-8"),
    (b'{"interaction_id": "1"}\nnot json\n', "row 2: not JSON"),
])
def test_unreadable_uploads(content, message):
    with pytest.raises(DatasetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_dataset(content, "upload")


def test_metadata_needs_account_and_dates():
    with pytest.raises(DatasetError, match="missing account_id, end_date"):
        parse_window_metadata({"start_date": "2024-01-01"})
    assert parse_window_metadata({"account_id": "x", "start_date": "2024-01-01",
                                  "end_date": "2024-01-31"})[0] == "x"


def test_quotes_are_verbatim_sentences_with_stable_ids():
    rows = window(parse_dataset(CSV, "x.csv"), "acme", "2024-01-01", "2024-12-31")
    corpus = build_corpus(rows)
    by_id = {r.interaction_id: r.text for r in rows}
    assert corpus.quote_ids[0] == quote_id("a1", 0)
    assert corpus.text[quote_id("a1", 1)] == "Support was kind, though."
    for qid in corpus.quote_ids:
        assert corpus.text[qid] in by_id[corpus.interaction_of[qid]]
    assert build_corpus(rows).quote_ids == corpus.quote_ids


def test_quotes_for_resolves_only_known_ids():
    async def loader(sha: str) -> bytes:
        assert sha == "sha"
        return CSV

    dataset.set_artifact_loader(loader)
    try:
        wanted = [quote_id("a2", 1), quote_id("a1", 0), "q0000000000-0", "garbage"]
        quotes = asyncio.run(dataset.quotes_for(wanted, "sha"))
    finally:
        dataset.set_artifact_loader(None)
    assert quotes == {quote_id("a2", 1): "I would buy again.",
                      quote_id("a1", 0): "The delivery was late."}


async def test_concurrent_loads_of_one_window_read_and_split_the_upload_once():
    """Three coders on a worker that did not load the dataset share one derivation (issue 14)."""
    reads: list[str] = []

    async def loader(sha: str) -> bytes:
        reads.append(sha)
        await asyncio.sleep(0.05)  # the loads overlap
        return CSV

    dataset.set_artifact_loader(loader)
    try:
        ref = {"sha256": "sha", "filename": "x.csv", "account_id": "acme",
               "start_date": "2024-01-01", "end_date": "2024-12-31"}
        first, second, third = await asyncio.gather(*[dataset.load_corpus(ref) for _ in range(3)])
        again = await dataset.load_corpus(ref)
    finally:
        dataset.set_artifact_loader(None)
    assert reads == ["sha"]
    assert first is second is third is again
    assert first.interaction_ids == ["a1", "a2", "a4"]


def test_memo_computes_once_across_threads():
    corpus = build_corpus(window(parse_dataset(CSV, "x.csv"), "acme", "2024-01-01", "2024-12-31"))
    calls: list[int] = []

    def compute() -> list[int]:
        calls.append(1)
        time.sleep(0.05)  # the other threads arrive while it computes
        return [len(corpus.quote_ids)]

    with ThreadPoolExecutor(4) as pool:
        values = list(pool.map(lambda _: corpus.memo("k", compute), range(4)))
    assert calls == [1] and all(v is values[0] for v in values)
