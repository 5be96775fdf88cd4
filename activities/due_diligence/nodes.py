"""Node functions of the due_diligence graph and its clause-extraction subgraph.

Each agent node reads the previous agent's result key and writes its own, so a failed
agent leaves the earlier results in the state and a retry starts from it. Nodes are
module-level ``async`` functions returning partial state updates; everything is JSON.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from typing_extensions import TypedDict

from activities.due_diligence import clauses as clause_logic
from activities.due_diligence.checklist import build_checklist
from activities.due_diligence.clause_types import CLAUSE_TYPE_NAMES
from activities.due_diligence.ingest import ingest_pages, ingest_text
from activities.due_diligence.options import DueDiligenceOptions
from activities.due_diligence.risk import score_risks
from activities.due_diligence.state import DueDiligenceState
from activities.due_diligence.strategies import strategies_of
from activities.due_diligence.summary import summarise

# --- agent 1: ingestion ---------------------------------------------------------------------


async def ingestion(state: DueDiligenceState) -> dict[str, Any]:
    """Agent ``ingestion``: the agreement's text with page offsets.

    Plain ``text`` in the input is used as is; otherwise the uploaded document is read
    through document_intake's page loader (text layer, Tesseract OCR, plain text; pages
    cached in Postgres by document hash).

    Raises:
        UnreadableDocumentError / UnsupportedDocumentError / NotFoundError: permanent.
    """
    options = _options(state)
    if state.get("text") is not None:
        result = ingest_text(str(state["text"]))
    else:
        from overseer.documents import DocumentLimits
        from overseer.plugin import load_pages

        pages = await load_pages(
            state["document"], dpi=options.ocr_dpi,
            limits=DocumentLimits(max_pages=options.max_pages,
                                  ocr_timeout_seconds=options.ocr_timeout_seconds))
        result = await asyncio.to_thread(ingest_pages, pages)
    signals = clause_logic.agreement_signals(result["text"])
    result.update(is_agreement=signals["is_agreement"], agreement_score=signals["score"],
                  agreement_markers=signals["markers"])
    return {"ingestion": result}


# --- agent 2: clause extraction (subgraph) --------------------------------------------------


class ClauseSearchState(TypedDict, total=False):
    """Inner state of the clause-extraction subgraph; only ``clauses`` leaves it."""

    ingestion: dict[str, Any]
    """Input: the ingestion result (read only)."""
    options: dict[str, Any]
    """Input: the run's options."""
    candidates: dict[str, list[dict[str, Any]]]
    """Valid candidates so far by clause type (search nodes add, validate_clauses filters)."""
    new_candidates: dict[str, list[dict[str, Any]]]
    """Candidates of the latest search, not yet validated (search nodes)."""
    pending: list[str]
    """Clause types without a valid candidate yet (validate_clauses)."""
    searched: dict[str, int]
    """Clause type → searches made for it (search nodes)."""
    attempts: int
    """Searches so far: initial_search sets 1, each retry_search adds one."""
    validation_passed: bool
    """Every clause type has a valid candidate (validate_clauses)."""
    merged: dict[str, list[dict[str, Any]]]
    """Candidates after near-duplicate merging, best first (deduplicate)."""
    run_id: str
    """Input: the run (ledger keys of model calls)."""
    strategy: str
    """``llm:<model>`` once the clause agent ran (search nodes): the model asked, not what
    produced the findings (``clauses.strategy`` says that); absent offline."""
    rejected: list[dict[str, Any]]
    """Model proposals that failed verification, never candidates (search nodes)."""
    fallbacks: list[dict[str, Any]]
    """Search steps whose agent ended early, so the rules answered for them:
    ``[{step, node, clause_types, code, message}]`` (search nodes)."""
    clauses: dict[str, Any]
    """Output: the ``clauses`` result (score_confidence)."""


async def initial_search(state: ClauseSearchState) -> dict[str, Any]:
    """Subgraph node: search 1 for every clause type (BM25 top-k chunks + triggers).

    With a model configured, the clause agent (:mod:`.agent`) then works the same step
    with the same search results as its tool; its verified quotes join the candidates.
    """
    types = list(CLAUSE_TYPE_NAMES)
    if not state["ingestion"].get("is_agreement", True):
        types = []
    update = await asyncio.to_thread(_search, state, types, 1)
    return await _with_agent(state, update, types, 1, "clause_extraction/initial_search")


async def retry_search(state: ClauseSearchState) -> dict[str, Any]:
    """Subgraph node: a wider search for the types still pending (attempt 2 or 3)."""
    types, attempt = list(state.get("pending", [])), int(state.get("attempts", 1)) + 1
    update = await asyncio.to_thread(_search, state, types, attempt)
    return await _with_agent(state, update, types, attempt, "clause_extraction/retry_search")


async def _with_agent(state: ClauseSearchState, update: dict[str, Any], types: list[str],
                      attempt: int, node: str) -> dict[str, Any]:
    """Adds the clause agent's verified candidates to a search step's update (model only).

    An agent that ended early (a failed call, a malformed reply after its one re-ask, a
    refusal, a model without tool calling) adds a ``fallbacks`` entry ``{step, node,
    clause_types, code, message}``: the step's rules' candidates answer for it.
    """
    from activities.due_diligence.agent import run_clause_agent

    found = update.get("new_candidates") or {}
    outcome = await run_clause_agent(state["ingestion"]["text"], types, attempt, found,
                                     run_id=str(state.get("run_id") or ""), node=node)
    if outcome.error is not None:
        update = {**update, "fallbacks": [*(state.get("fallbacks") or []), {
            "step": attempt, "node": node, "clause_types": list(types), "code": outcome.error,
            "message": outcome.message or outcome.error}]}
    if outcome.strategy is None:
        return update
    merged = {name: [*outcome.candidates.get(name, []), *found.get(name, [])]
              for name in set(found) | set(outcome.candidates)}
    return {**update, "new_candidates": merged, "strategy": outcome.strategy,
            "rejected": [*(state.get("rejected") or []), *outcome.rejected]}


async def validate_clauses(state: ClauseSearchState) -> dict[str, Any]:
    """Subgraph node: keep candidates that hold against the text; list the missing types."""
    text = state["ingestion"]["text"]
    if not state["ingestion"].get("is_agreement", True):
        return {"candidates": {}, "new_candidates": {}, "pending": [], "validation_passed": True}
    candidates = {k: list(v) for k, v in (state.get("candidates") or {}).items()}
    fresh = state.get("new_candidates") or {}
    checked, _ = clause_logic.validate(text, fresh, list(fresh))
    for name, cands in checked.items():
        candidates.setdefault(name, []).extend(cands)
    pending = [t for t in CLAUSE_TYPE_NAMES if not candidates.get(t)]
    return {"candidates": candidates, "new_candidates": {}, "pending": pending,
            "validation_passed": not pending}


def route_after_validation(state: ClauseSearchState) -> str:
    """Seed 004: retry while ``not validation_passed and attempts < max`` (default 3)."""
    limit = int((state.get("options") or {}).get("max_search_attempts", 3))
    if not state.get("validation_passed") and int(state.get("attempts", 0)) < limit:
        return "retry"
    return "continue"


async def deduplicate(state: ClauseSearchState) -> dict[str, Any]:
    """Subgraph node: merge near-duplicate candidates per type (rapidfuzz), then classify.

    The sentence classifier checks and completes the merged candidates
    (:func:`.classifier.select`) unless ``options.use_classifier`` is off.
    """
    merged = await asyncio.to_thread(clause_logic.deduplicate, state.get("candidates") or {})
    if _options(state).use_classifier and state["ingestion"].get("is_agreement", True):
        from activities.due_diligence.classifier import select

        merged = await asyncio.to_thread(select, state["ingestion"]["text"], merged)
    return {"merged": merged}


async def score_confidence(state: ClauseSearchState) -> dict[str, Any]:
    """Subgraph node: findings with attributes and confidence → the ``clauses`` result."""
    ingestion_result = state["ingestion"]
    signals = {"is_agreement": ingestion_result.get("is_agreement", True),
               "markers": ingestion_result.get("agreement_markers", [])}
    findings: list[dict[str, Any]] = []
    if signals["is_agreement"]:
        # In a thread: the runtime heartbeats from the event loop while a long text is scored.
        findings = await asyncio.to_thread(clause_logic.score_findings, ingestion_result,
                                           state.get("merged") or {},
                                           attempts_by_type=state.get("searched") or {})
    result = clause_logic.clauses_result(findings, attempts=int(state.get("attempts", 0)),
                                         signals=signals)
    # what produced the findings, not what was asked: ``rules`` when the model gave nothing
    names = strategies_of(findings)
    result.update(strategy="+".join(names), strategies=names,
                  fallbacks=list(state.get("fallbacks") or []))
    if state.get("strategy"):
        result["rejected"] = list(state.get("rejected") or [])
    return {"clauses": result}


def _search(state: ClauseSearchState, types: list[str], attempt: int) -> dict[str, Any]:
    options = DueDiligenceOptions.model_validate(state.get("options") or {})
    searched = dict(state.get("searched") or {})
    for name in types:
        searched[name] = attempt
    if not types:
        return {"new_candidates": {}, "attempts": attempt, "searched": searched}
    index = clause_logic.DocumentIndex(state["ingestion"]["text"], options.chunk_chars)
    found = clause_logic.search(index, types, attempt, top_k=options.top_k)
    return {"new_candidates": found, "attempts": attempt, "searched": searched}


# --- agents 3-5 -------------------------------------------------------------------------------


async def risk_scoring(state: DueDiligenceState) -> dict[str, Any]:
    """Agent ``risk_scoring``: the rule table applied to every finding."""
    return {"risks": score_risks(state["clauses"])}


async def summary(state: DueDiligenceState) -> dict[str, Any]:
    """Agent ``summary``: extractive summary citing findings and risks."""
    return {"summary": summarise(state["clauses"], state["risks"])}


async def checklist(state: DueDiligenceState) -> dict[str, Any]:
    """Agent ``checklist``: one action per risk with priority, owner and due date."""
    return {"checklist": build_checklist(state["clauses"], state["risks"], state.get("summary"))}


def _options(state: Mapping[str, Any]) -> DueDiligenceOptions:
    return DueDiligenceOptions.model_validate(state.get("options") or {})
