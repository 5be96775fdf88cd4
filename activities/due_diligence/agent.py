"""With a model configured: a ReAct-style clause agent per search step (seed 004, issue 13).

The agent gets the same tools the offline search uses — ``search_clauses`` (the step's
BM25 + pattern candidates for a clause type, with offsets) and ``propose_clause`` (a
verbatim quote for a type) — and calls them in a loop until it answers without a tool
call (at most ``max_turns`` model calls). Every proposed quote is verified against the
ingested text exactly like an offline candidate: it must be a verbatim slice, read as the
clause type (its trigger or weak patterns) and hit no exclusion. A quote that fails is
answered ``rejected`` to the model, recorded in ``rejected`` and never becomes a
candidate. Accepted quotes become candidates with ``strategy: llm:<model>``; they rank
above the rules' candidates of the same type, which stay as the fallback.

The model comes from the project's LLM layer (:mod:`activities.llm`: model choice, factory,
``llm.called`` ledger). A failed call ends the agent for that step; the rules' candidates
are used (``llm.called`` records the error). Offline (no model) nothing here runs and
every finding says ``strategy: rules``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import StructuredTool

from activities.due_diligence.clause_types import CLAUSE_TYPES, compiled_specs
from activities.due_diligence.clauses import MIN_QUOTE_WORDS, _excluded, _first_match
from activities.due_diligence.text import words

AGENT_INSTRUCTIONS = """You review a commercial agreement for a lawyer.
For each clause type you are asked about, call search_clauses to read candidate passages,
then call propose_clause with the clause type and the exact sentence from the agreement
that is the clause. Copy quotes character for character; never paraphrase. Propose
nothing for a type the agreement does not contain. Answer without a tool call when done."""

Recorder = Callable[[list[Any]], Awaitable[Any]]


@dataclass
class AgentOutcome:
    """What the agent produced for one search step.

    Attributes:
        candidates: verified candidates by clause type (``strategy: llm:<model>``).
        rejected: proposals that failed verification ``[{clause_type, quote, reason}]``.
        strategy: ``llm:<model>`` when a model ran, None offline.
        calls: model calls made.
        error: the error code that ended the agent early, if any.
    """

    candidates: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    strategy: str | None = None
    calls: int = 0
    error: str | None = None


def verify_quote(text: str, clause_type: str, quote: str) -> tuple[dict[str, Any] | None, str]:
    """Checks a proposed quote like an offline candidate; locates it in the text.

    Args:
        text: the ingested agreement text.
        clause_type: one of :data:`CLAUSE_TYPES`.
        quote: the proposed quote (whitespace may differ from the text's line breaks).

    Returns:
        ``(candidate, "ok")`` with ``quote == text[start:end]``, or ``(None, reason)``.
    """
    specs = compiled_specs()
    if clause_type not in specs:
        return None, "unknown clause type"
    wanted = " ".join(str(quote or "").split())
    if len(words(wanted)) < MIN_QUOTE_WORDS:
        return None, "quote too short"
    pattern = r"\s+".join(re.escape(w) for w in wanted.split(" "))
    hit = re.search(pattern, text)
    if hit is None:
        return None, "quote not found verbatim in the agreement"
    start, end = hit.start(), hit.end()
    spec = specs[clause_type]
    strength = 1.0
    rank = _first_match(spec.triggers, text, start, start, end)
    if rank is None:
        rank, strength = _first_match(spec.weak, text, start, start, end), 0.6
    if rank is None:
        return None, f"the quote does not read as {clause_type}"
    if _excluded(spec, text, start, end):
        return None, f"the quote is excluded for {clause_type}"
    return {"clause_type": clause_type, "start": start, "end": end, "quote": text[start:end],
            "context_start": start, "pattern_rank": rank, "strength": strength,
            "heading": "", "heading_match": False, "bm25": 0.0}, "ok"


async def run_clause_agent(text: str, types: Sequence[str], attempt: int,
                           rules_found: Mapping[str, Sequence[Mapping[str, Any]]], *,
                           run_id: str, node: str, max_turns: int = 6,
                           record: Recorder | None = None) -> AgentOutcome:
    """Runs the ReAct-style agent for one search step, if a model is configured.

    Args:
        text: the ingested agreement text.
        types: the clause types this step searches.
        attempt: the search attempt (1..3), for ledger keys and candidates.
        rules_found: the step's offline candidates by type (what ``search_clauses`` shows).
        run_id: the run, for ``llm.called`` ledger events.
        node: the node path making the calls (ledger keys).
        max_turns: model calls at most.
        record: appends ledger events (default: the activity event writer inside an
            activity, none outside).

    Returns:
        An :class:`AgentOutcome`; empty with ``strategy=None`` when no model is configured.
    """
    from activities.llm import chat_model, llm_enabled, select_model

    settings = _settings()
    outcome = AgentOutcome()
    if not types or not llm_enabled(settings):
        return outcome
    choice = select_model("extraction", settings)
    model = chat_model(settings, choice.model)
    if model is None:
        return outcome
    name = "dry-run" if settings.dry_run else choice.model
    outcome.strategy = f"llm:{name}"
    asked = set(types)

    def search_clauses(clause_type: str, query: str = "") -> str:
        """Candidate passages for a clause type, with character offsets."""
        cands = list(rules_found.get(clause_type, []))[:5] if clause_type in asked else []
        return json.dumps([{"quote": c["quote"], "start": c["start"], "end": c["end"]}
                           for c in cands])

    def propose_clause(clause_type: str, quote: str) -> str:
        """Propose the verbatim sentence of the agreement that is the clause."""
        if clause_type not in asked:
            reason = "not a clause type of this step"
            cand = None
        else:
            cand, reason = verify_quote(text, clause_type, quote)
        if cand is None:
            outcome.rejected.append({"clause_type": clause_type, "quote": quote,
                                     "reason": reason, "attempt": attempt})
            return f"rejected: {reason}"
        cand.update(attempt=attempt, strategy=outcome.strategy)
        kept = outcome.candidates.setdefault(clause_type, [])
        if all(c["start"] != cand["start"] for c in kept):
            kept.append(cand)
        return f"accepted: characters {cand['start']}-{cand['end']}"

    tools = {t.name: t for t in (StructuredTool.from_function(search_clauses),
                                 StructuredTool.from_function(propose_clause))}
    try:
        bound = model.bind_tools(list(tools.values()))
    except NotImplementedError:  # e.g. DRY_RUN's fake model: the rules answer alone
        return AgentOutcome(error="tools_unsupported")
    labels = ", ".join(f"{t} ({CLAUSE_TYPES[t]['label']})" for t in types)
    messages: list[BaseMessage] = [SystemMessage(AGENT_INSTRUCTIONS),
                                   HumanMessage(f"Clause types: {labels}.")]
    writer = record if record is not None else _default_recorder()
    for turn in range(max_turns):
        reply, error = await _call(bound, messages, run_id=run_id, node=node, attempt=attempt,
                                   turn=turn, model=choice.model, record=writer)
        outcome.calls += 1
        if reply is None:
            outcome.error = error
            break
        messages.append(reply)
        calls = list(getattr(reply, "tool_calls", None) or [])
        if not calls:
            break
        for call in calls:
            tool = tools.get(call["name"])
            result = tool.invoke(call["args"]) if tool else f"unknown tool {call['name']}"
            messages.append(ToolMessage(content=str(result), tool_call_id=call.get("id") or ""))
    return outcome


async def _call(bound: Any, messages: list[BaseMessage], *, run_id: str, node: str,
                attempt: int, turn: int, model: str, record: Recorder | None
                ) -> tuple[Any, str | None]:
    """One model call with its ``llm.called`` ledger event; ``(None, code)`` on failure."""
    from temporalio import activity

    from activities.llm import classify_error, price_usd
    from overseer.store.events import LLM_CALLED, NewEvent

    try_no = activity.info().attempt if activity.in_activity() else 1
    base = {"task": "extraction", "model": model, "node": node, "step": attempt,
            "turn": turn, "attempt": try_no, "tool_calling": True}
    started = time.monotonic()
    reply, error = None, None
    try:
        reply = await bound.ainvoke(list(messages))
    except Exception as err:  # CancelledError is a BaseException and passes through
        error = classify_error(err).code
    usage = getattr(reply, "usage_metadata", None) or {}
    tokens_in, tokens_out = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
    cost = price_usd(model, tokens_in, tokens_out, _settings()) if reply is not None else 0.0
    data = {**base, "outcome": "ok" if reply is not None else "error", "error_code": error,
            "latency_ms": int((time.monotonic() - started) * 1000), "input_tokens": tokens_in,
            "output_tokens": tokens_out, "cost_usd": cost or 0.0}
    if record is not None:
        await record([NewEvent(run_id=run_id, key=f"llm.called:{node}:{attempt}:{turn}:{try_no}",
                               type=LLM_CALLED, actor=f"activity:{node}", data=data)])
    return reply, error


def _default_recorder() -> Recorder | None:
    from temporalio import activity

    if not activity.in_activity():
        return None
    from activities.events import append_from_activity

    return append_from_activity


def _settings() -> Any:
    from activities.runtime import get_runtime

    try:
        return get_runtime().settings
    except RuntimeError:
        from overseer.settings import Settings

        return Settings()
