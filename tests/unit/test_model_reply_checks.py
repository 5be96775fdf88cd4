"""What makes a model's reply unusable, per step, and the misbehaving endpoint the tests use.

A step that asks a model takes its offline strategy when the reply is unusable; these are
the checks that decide it (pure), and :class:`~tests.workflows.llm_support.MisbehavingModel`'s
rules (deterministic, so the reliability scenario is repeatable).
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import httpx
import pytest

from activities.pricing.reporter import summary_problem
from activities.thematic_analysis.identities import load_identities
from activities.thematic_analysis.llm_steps import coder_items, theme_items
from activities.thematic_analysis.options import ThematicOptions
from overseer.errors import LLMResponseError, LLMUnavailableError
from overseer.runtime.llm import model_call_retryable
from tests.workflows.llm_support import (
    MISBEHAVING_PROSE,
    MISBEHAVING_TRUNCATED,
    MISBEHAVING_WRONG_SHAPE,
    MisbehavingModel,
)

FACTS = ("Pricing review for ASTR 4 — Black Holes (TB006-campus).\n"
         "- Proposal: 12 price changes on 4 items (9 up, 3 down); expected revenue +3.20% "
         "under the fitted demand model (max change ±10%).\n"
         "- Policy: today's prices break 3 rules on 1 items (3 hierarchy inversions).\n")


@pytest.mark.parametrize(("report", "code"), [
    ("", "llm_empty_reply"),
    (MISBEHAVING_PROSE, "llm_not_a_summary"),
    (MISBEHAVING_TRUNCATED, "llm_not_a_summary"),
    (MISBEHAVING_WRONG_SHAPE, "llm_not_a_summary"),
    ("Raise ASTR 4 by 37.5%.", "llm_invented_numbers"),
    ("The proposal restores the tier hierarchy; sign-off is needed.", None),
    ("Hold prices on TB006-campus.", None),
    ("12 changes, revenue up 3.2%.", None),
])
def test_a_pricing_summary_must_be_prose_about_the_facts(report, code):
    problem = summary_problem(report, FACTS)
    assert (problem or {}).get("code") == code, problem


class Reply(SimpleNamespace):
    """What the checks read of an ``LLMResult``: its data, model and strategy."""


def test_a_coder_reply_without_a_code_on_the_window_has_no_items():
    corpus = SimpleNamespace(text={"q1": "Delivery was late.", "q2": "Beans were fresh."})
    options, identity = ThematicOptions(), load_identities(None)[0]
    for data in ({}, {"answer": "fine"}, {"codes": "none"}, {"codes": [{"label": "x"}]},
                 {"codes": [{"label": "Late", "quote_ids": ["q9"]}]},
                 {"codes": [{"label": "Late", "quote_ids": "q1"}]}):
        items, _ = coder_items(Reply(data=data, strategy="llm:m"), corpus, options, identity)
        assert items == [], data
    items, dropped = coder_items(Reply(data={"codes": [
        {"label": "Late", "quote_ids": ["q1", "q9"]}]}, strategy="llm:m"), corpus, options,
        identity)
    assert [(i["label"], i["quote_ids"]) for i in items] == [("Late", ["q1"])] and dropped == 1


def test_a_theme_reply_without_a_theme_over_known_codes_has_no_items():
    identity = load_identities(None)[0]
    for data in ({"themes": []}, {"answer": "fine"}, {"themes": [{"code_ids": ["c9"]}]},
                 {"themes": [{"name": "A", "code_ids": "c1"}]}):
        assert theme_items(Reply(data=data, strategy="llm:m"), {"c1", "c2"}, identity)[0] == []
    items, dropped = theme_items(Reply(data={"themes": [{"name": "A", "code_ids": ["c1", "c9"]}]},
                                       strategy="llm:m"), {"c1", "c2"}, identity)
    assert [i["code_ids"] for i in items] == [["c1"]] and dropped == 1


def test_outside_a_worker_nothing_retries_a_model_call():
    async def decide(err: Exception) -> bool:
        return await model_call_retryable(err, run_id="00000000-0000-4000-8000-000000000001",
                                          node="coder:x")

    assert asyncio.run(decide(LLMUnavailableError("down"))) is False
    assert asyncio.run(decide(LLMResponseError("prose"))) is False


def test_the_misbehaving_endpoint_is_deterministic_and_never_answers_what_was_asked():
    def ask(client: httpx.Client, prompt: str, stream: bool = False) -> int:
        return client.post("/chat/completions", json={
            "model": "m", "stream": stream,
            "messages": [{"role": "user", "content": prompt}]}).status_code

    with MisbehavingModel() as model, httpx.Client(base_url=model.base_url, timeout=10) as client:
        statuses = [ask(client, p) for p in ("a", "a", "a", "b", "b", "a", "a", "c")]
        try:
            ask(client, "a", stream=True)
        except httpx.HTTPError:
            pass
    kinds = [kind for _, kind, _ in model.seen]
    # a new prompt: 429 once; the 7th request: 500; otherwise an unusable answer
    assert kinds[0] == kinds[3] == "429" and kinds[6] == "500" and kinds[7] == "429"
    assert statuses[0] == 429 and statuses[6] == 500
    answered = [k for k in kinds if k not in ("429", "500")]
    assert answered and set(answered) <= {"prose", "truncated", "cut", "wrong_shape"}
    # the same prompt cycles through different misbehaviours
    by_a = [k for (_, k, _), p in zip(model.seen, "aaabbaaaa", strict=True)
            if p == "a" and k not in ("429", "500")]
    assert len(set(by_a)) == len(by_a)
    assert json.loads(MISBEHAVING_WRONG_SHAPE) and MISBEHAVING_TRUNCATED.count("{") > \
        MISBEHAVING_TRUNCATED.count("}")
