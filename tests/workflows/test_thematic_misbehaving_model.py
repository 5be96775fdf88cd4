"""Thematic analysis against a model that misbehaves, through the real stack (Temporal dev server).

The only fake is the model: :class:`~tests.workflows.llm_support.MisbehavingModel`, an
OpenAI-compatible endpoint on 127.0.0.1 that the real client (``langchain-openai``) talks
to. It never answers what was asked: every new prompt is rate limited once (429 with
``Retry-After: 1``), every 7th request fails with a 500, and the rest are prose, truncated
JSON, an answer that stops midway or JSON of the wrong shape. The README example must still
give themes, as the same file offline does, every coder and theme coder recording
``strategy: rules`` with the reason its model failed; no step is lost to a 500.
"""

from __future__ import annotations

import pytest

from tests.workflows.llm_support import MisbehavingModel, llm_settings
from tests.workflows.test_thematic_stack import IDENTITY_IDS, events, submit

pytestmark = pytest.mark.timeout(240)

UNUSABLE = {"llm_malformed_response", "llm_unavailable", "llm_rate_limited"}


async def test_misbehaving_model_costs_no_theme(dev_server, worker, db, task_queue):
    run_id, handle = await submit(db, dev_server.client, task_queue)
    offline = await handle.result()
    assert offline["outcome"] == "themes" and offline["output"]["themes"]

    with MisbehavingModel() as model, llm_settings(llm_base_url=model.base_url,
                                                   llm_api_key="test", llm_timeout_seconds=5):
        run_id, handle = await submit(db, dev_server.client, task_queue)
        result = await handle.result()
    counts = model.counts()
    assert counts.get("500") and counts.get("429") and counts.get("prose"), counts

    assert result["status"] == "completed", result
    out = result["output"]
    assert result["outcome"] == "themes" and out["themes"], (result["outcome"], out["fallbacks"])
    assert out["errors"] == []
    # every model step fell back to the rules, each with the reason its model failed
    assert sorted(r["identity_id"] for r in out["coder_results"]) == IDENTITY_IDS
    assert {r["strategy"] for r in out["coder_results"]} == {"rules"}
    assert {r["fallback"]["code"] for r in out["coder_results"]} <= UNUSABLE
    stages = sorted((f["stage"], f["identity_id"]) for f in out["fallbacks"])
    assert stages == sorted([("coding", i) for i in IDENTITY_IDS]
                            + [("themes", i) for i in IDENTITY_IDS])
    assert all(f["strategy"] == "rules" and f["code"] in UNUSABLE and f["message"]
               for f in out["fallbacks"])
    assert out["strategies"] == ["rules"]
    assert {t["strategy"] for t in out["themes"]} == {"rules"}
    # the same codes and themes as offline: the rules ran on the same data
    assert [c["code_id"] for c in out["codebook"]] == [
        c["code_id"] for c in offline["output"]["codebook"]]
    assert [t["theme_id"] for t in out["themes"]] == [
        t["theme_id"] for t in offline["output"]["themes"]]
    # a 500 is retried, never the step's last word while attempts remain: every step that
    # met a transient error asked again, and its ledger shows the retry
    ledger = [e["data"] for e in await events(db, run_id, "llm.called")]
    assert len(ledger) == len(model.seen)
    for node in {e["node"] for e in ledger}:
        codes = [e.get("error_code") for e in ledger if e["node"] == node]
        assert codes[-1] not in ("llm_unavailable", "llm_rate_limited") or len(codes) >= 3, (
            node, codes)
