"""The rules strategy's CPU work runs off the event loop (issue 14).

A worker runs every activity, its heartbeats and its polls on one event loop. A node that
computes TF-IDF, embeddings, clustering or VADER scores on that loop stalls all of them
for as long as it computes (seconds on a large window; a stall past the 30 s heartbeat
time-out fails the activity). Here the offline nodes run in the order of the graph (three
coders at once, as three activities on one worker would) over a synthetic window while a
ticker coroutine sleeps 10 ms at a time: every tick must arrive within
:data:`MAX_TICK_DELAY_SECONDS` of when it was due. A node that computed on the loop would
delay a tick by its whole duration, and the long stages below each take longer than the bound.

The same run also checks that the nodes' memoised per-corpus analysis (TF-IDF table,
embeddings), now reached from several threads at once, gives the same codes as running the
coders one after another.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import vaderSentiment

from activities.thematic_analysis import coding, dataset, llm_steps, nlp, nodes
from activities.thematic_analysis.identities import Identity, load_identities
from activities.thematic_analysis.options import ThematicOptions

MAX_TICK_DELAY_SECONDS = 1.0
"""How late a 10 ms tick may be while the nodes compute. The interpreter hands the GIL back
to the loop every 5 ms, but one C call keeps it until it returns: scikit-learn sorting a
20,000-sentence window's vocabulary holds it for up to ~0.5 s here (two shared cores). A
stall that short is harmless next to the 30 s heartbeat time-out; stalls of whole nodes
(seconds, minutes on bigger windows) are what this catches."""

TICK_SECONDS = 0.01
INTERACTIONS = 4000
SENTENCES_PER_INTERACTION = 5


def synthetic_corpus(interactions: int = INTERACTIONS, seed: int = 14) -> dataset.Corpus:
    """A window of ``interactions`` × 5 sentences of English words, Zipf-distributed.

    Built directly (no pysbd) so the test spends its time in the nodes. Words are VADER's
    lexicon (shipped in ``vaderSentiment``), so sentiment has work to do too.
    """
    lexicon = Path(vaderSentiment.__file__).with_name("vader_lexicon.txt").read_text("utf-8")
    words = sorted({w for w in (line.split("\t")[0] for line in lexicon.splitlines())
                    if re.fullmatch(r"[a-z]{4,}", w)})
    rng = random.Random(seed)
    rng.shuffle(words)
    cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(words))))
    corpus = dataset.Corpus(interaction_ids=[], quote_ids=[], text={}, interaction_of={})
    for n in range(interactions):
        iid = f"synthetic-{n}"
        corpus.interaction_ids.append(iid)
        for index in range(SENTENCES_PER_INTERACTION):
            qid = dataset.quote_id(iid, index)
            corpus.quote_ids.append(qid)
            corpus.text[qid] = " ".join(rng.choices(words, cum_weights=cumulative,
                                                    k=rng.randint(6, 14))) + "."
            corpus.interaction_of[qid] = iid
    return corpus


class Ticker:
    """Sleeps :data:`TICK_SECONDS` at a time and keeps the worst lateness since the last reset."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.ticks = 0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + TICK_SECONDS
            await asyncio.sleep(TICK_SECONDS)
            self.worst = max(self.worst, loop.time() - due)
            self.ticks += 1

    def reset(self) -> None:
        self.worst, self.ticks = 0.0, 0


@pytest.fixture
def window(monkeypatch: pytest.MonkeyPatch) -> dataset.Corpus:
    """The synthetic window, served to the nodes in place of a stored upload.

    The libraries are imported and wordllama loaded first: a first import runs on the loop
    (``model_enabled`` imports the LLM layer) or holds the GIL for long stretches, once per
    process, which is not what this test measures.
    """
    from sklearn.cluster import AgglomerativeClustering  # noqa: F401
    from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: F401

    llm_steps.model_enabled()
    nlp.embed(["warm up"])
    nlp.sentiment(["warm up"])
    corpus = synthetic_corpus()

    async def load(ref: dict[str, Any]) -> dataset.Corpus:
        return corpus

    monkeypatch.setattr(nodes, "load_corpus", load)
    return corpus


async def test_offline_nodes_leave_the_event_loop_responsive(window: dataset.Corpus) -> None:
    identities = [i.model_dump() for i in load_identities(None)]
    options = ThematicOptions().model_dump(mode="json")
    ref = {"sha256": "synthetic", "account_id": "a", "start_date": "2024-01-01",
           "end_date": "2024-12-31", "interactions": INTERACTIONS,
           "sentences": len(window.quote_ids)}
    base = {"run_id": "", "dataset": ref, "options": options, "metadata": {}}
    state: dict[str, Any] = {**base, "identities": identities}
    ticker = Ticker()
    ticking = asyncio.create_task(ticker.run())
    measured: list[tuple[str, float, float, int]] = []

    async def stage(name: str, work: Callable[[], Awaitable[Any]]) -> Any:
        await asyncio.sleep(TICK_SECONDS * 3)
        ticker.reset()
        started = time.monotonic()
        out = await work()
        seconds = time.monotonic() - started
        await asyncio.sleep(TICK_SECONDS * 3)  # a tick the work held up lands now
        measured.append((name, seconds, ticker.worst, ticker.ticks))
        return out

    try:
        coded = await stage("coders", lambda: asyncio.gather(
            *[nodes.coder({**base, "identity": i}) for i in identities]))
        state["coder_results"] = [r["coder_results"][0] for r in coded]
        state.update(await stage("code_aggregator", lambda: nodes.code_aggregator(state)))
        state.update(await stage("reviewer", lambda: nodes.reviewer(state)))
        proposed = await stage("theme_coders", lambda: asyncio.gather(
            *[nodes.theme_coder({**base, "identity": i, "codebook": state["codebook"]})
              for i in identities]))
        state["theme_proposals"] = [p for r in proposed for p in r["theme_proposals"]]
        state.update(await stage("theme_aggregator", lambda: nodes.theme_aggregator(state)))
    finally:
        ticking.cancel()

    report = {name: (round(seconds, 2), round(worst, 3), ticks)
              for name, seconds, worst, ticks in measured}
    assert state["themes"], report
    # The stages that compute: computing on the loop (the three coders back to back:
    # nothing in them awaits), each would delay a tick by about its whole duration. Judged
    # relative to that duration, which depends on the machine (0.7-3 s seen), not against
    # a fixed second.
    for name in ("coders", "theme_coders", "theme_aggregator"):
        seconds, worst, _ticks = report[name]
        assert seconds > 30 * TICK_SECONDS, ("too little work to tell", report)
        assert worst < seconds / 3, (name, report)
    for name, (_seconds, worst, _ticks) in report.items():
        assert worst < MAX_TICK_DELAY_SECONDS, (name, report)

    # Three coders in threads over one corpus's memoised tables code as one coder at a time.
    fresh = synthetic_corpus()
    opts = ThematicOptions()
    alone = [coding.rules_coder(Identity.model_validate(i), fresh, opts) for i in identities]
    assert [r["coder_results"][0]["codes"] for r in coded] == alone
