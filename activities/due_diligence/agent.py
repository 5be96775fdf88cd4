"""With a model configured: a ReAct-style clause agent per search step (seed 004).

The agent gets the same tools the offline search uses — ``search_clauses`` (the step's
BM25 + pattern candidates for a clause type, with offsets) and ``propose_clause`` (a
verbatim quote for a type) — and calls them in a loop until it answers without a tool
call (at most ``max_turns`` model calls). Every proposed quote is verified against the
ingested text exactly like an offline candidate: it must be a verbatim slice, read as the
clause type (its trigger or weak patterns) and hit no exclusion. A quote that fails is
answered ``rejected`` to the model, recorded in ``rejected`` and never becomes a
candidate. Accepted quotes become candidates with ``strategy: llm:<model>``; they rank
above the rules' candidates of the same type, which stay as the fallback.

The model comes from the project's LLM layer (:mod:`overseer.runtime.llm`: model choice, factory,
``llm.called`` ledger). A failed call ends the agent for that step; the rules' candidates
are used (``llm.called`` records the error) and :attr:`AgentOutcome.error` /
:attr:`AgentOutcome.message` say why. Offline (no model) nothing here runs and every
finding says ``strategy: rules``.

Malformed replies. The prompt names only the clause types: the agreement
is readable through ``search_clauses`` alone. So a reply that calls no tool before the
model has called any tool in the step cannot be "nothing found" (the model has read
nothing); it is a malformed answer (prose instead of a tool call), as is a reply whose only
tool calls have arguments that are not JSON. Such a reply is asked for once more with what
was wrong (:data:`REASK`); a second one ends the step's agent with
``llm_malformed_response``. Both replies are ``llm.called`` events with ``outcome: error``.
After the model has used a tool, a reply without a tool call is its "done" (as the prompt
asks), whatever it says: prose then cannot be told from a finished search, and is not
re-asked. A refusal ends the step's agent at once (``llm_refused``).
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

REASK = ("Your answer could not be used: {error}. The agreement can only be read through "
         "search_clauses: call it for the clause types listed, then call propose_clause for "
         "each clause the agreement contains, copying the sentence exactly. Answer without a "
         "tool call only when done (also when you found none).")
"""The one re-ask of a step after a malformed reply (what was wrong is named)."""
NO_TOOL_CALL = ("it called no tool (prose instead of a tool call), so nothing in the agreement "
                "was read")
"""What was wrong with a reply that calls no tool before any tool was called."""

Recorder = Callable[[list[Any]], Awaitable[Any]]


@dataclass
class AgentOutcome:
    """What the agent produced for one search step.

    Attributes:
        candidates: verified candidates by clause type (``strategy: llm:<model>``).
        rejected: proposals that failed verification ``[{clause_type, quote, reason}]``.
        strategy: ``llm:<model>`` when a model ran, None offline.
        calls: model calls made.
        error: the error code that ended the agent early, if any (the step's rules'
            candidates are then all it adds, beyond what was accepted before).
        message: what went wrong, in words, with ``error``.
        reasks: re-asks after a malformed reply (0 or 1).
    """

    candidates: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    strategy: str | None = None
    calls: int = 0
    error: str | None = None
    message: str | None = None
    reasks: int = 0


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
    from overseer.plugin import chat_model, llm_enabled, select_model

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
        return AgentOutcome(error="tools_unsupported",
                            message=f"the model {name} cannot call tools; the rules answered")
    labels = ", ".join(f"{t} ({CLAUSE_TYPES[t]['label']})" for t in types)
    messages: list[BaseMessage] = [SystemMessage(AGENT_INSTRUCTIONS),
                                   HumanMessage(f"Clause types: {labels}.")]
    writer = record if record is not None else _default_recorder()
    used_tools = False
    unanswered: Exception | None = None  # a malformed reply whose re-ask has no turn left
    for turn in range(max_turns):
        reply, failure = await _call(bound, messages, run_id=run_id, node=node,
                                     attempt=attempt, turn=turn, model=choice.model,
                                     record=writer, used_tools=used_tools)
        outcome.calls += 1
        unanswered = None
        if reply is None:
            outcome.error, outcome.message = _code(failure), _message(failure)
            break
        messages.append(reply)
        for bad in getattr(reply, "invalid_tool_calls", None) or []:
            # the endpoint got these as tool calls: each needs its answer
            messages.append(ToolMessage(
                content=f"error: the arguments are not valid JSON ({bad.get('error') or ''})",
                tool_call_id=bad.get("id") or ""))
        if failure is not None:
            if outcome.reasks or _code(failure) != "llm_malformed_response":
                outcome.error = _code(failure)
                outcome.message = _message(failure) + (", again after one re-ask"
                                                       if outcome.reasks else "")
                break
            outcome.reasks += 1
            unanswered = failure
            messages.append(HumanMessage(REASK.format(error=_message(failure))))
            continue
        calls = list(getattr(reply, "tool_calls", None) or [])
        if not calls:
            break
        used_tools = True
        for call in calls:
            messages.append(ToolMessage(content=_run_tool(tools, call),
                                        tool_call_id=call.get("id") or ""))
    if unanswered is not None:  # the turns ran out before the re-ask was answered
        outcome.error, outcome.message = _code(unanswered), _message(unanswered)
    return outcome


def unusable_reply(reply: Any, *, used_tools: bool) -> Exception | None:
    """Why a reply cannot be used as the agent's next move, or None when it can.

    Args:
        reply: the model's ``AIMessage``.
        used_tools: the model has called a tool earlier in this step.

    Returns:
        :class:`LLMRefusedError` for a refusal; :class:`LLMResponseError` for a reply that
        calls no tool before any tool was called (it has read nothing of the agreement) or
        whose only tool calls could not be read; None otherwise (tool calls, or "done"
        after tools were used).
    """
    from overseer.plugin import LLMRefusedError, LLMResponseError

    meta = getattr(reply, "response_metadata", None) or {}
    extra = getattr(reply, "additional_kwargs", None) or {}
    if meta.get("finish_reason") == "content_filter" or extra.get("refusal"):
        return LLMRefusedError("the model refused the request")
    if getattr(reply, "tool_calls", None):
        return None
    invalid = list(getattr(reply, "invalid_tool_calls", None) or [])
    if invalid:
        detail = str(invalid[0].get("error") or "").strip()
        return LLMResponseError("its tool call could not be read (the arguments are not valid "
                                f"JSON{': ' + detail[:200] if detail else ''})")
    if not used_tools:
        return LLMResponseError(NO_TOOL_CALL)
    return None


def _run_tool(tools: Mapping[str, StructuredTool], call: Mapping[str, Any]) -> str:
    """A tool call's answer; arguments the tool cannot take are answered with the error."""
    tool = tools.get(str(call.get("name")))
    if tool is None:
        return f"unknown tool {call.get('name')}"
    try:
        return str(tool.invoke(call.get("args") or {}))
    except Exception as err:  # e.g. a missing or mistyped argument (pydantic)
        return f"error: {type(err).__name__}: {' '.join(str(err).split())[:300]}"


def _code(err: Exception | None) -> str:
    return str(getattr(err, "code", None) or "llm_error")


def _message(err: Exception | None) -> str:
    return str(getattr(err, "message", None) or err or "the model call failed")


async def _call(bound: Any, messages: list[BaseMessage], *, run_id: str, node: str,
                attempt: int, turn: int, model: str, record: Recorder | None,
                used_tools: bool = False) -> tuple[Any, Exception | None]:
    """One model call with its ``llm.called`` ledger event.

    Returns:
        ``(reply, None)`` for a usable reply; ``(reply, error)`` for one that came back but
        cannot be used (:func:`unusable_reply`; its tokens were billed and are in the
        ledger, ``outcome: error``); ``(None, error)`` when the call failed
        (:func:`overseer.runtime.llm.classify_error`).
    """
    from temporalio import activity

    from overseer.plugin import LLM_CALLED, NewEvent, classify_error, price_usd

    try_no = activity.info().attempt if activity.in_activity() else 1
    base = {"task": "extraction", "model": model, "node": node, "step": attempt,
            "turn": turn, "attempt": try_no, "tool_calling": True}
    started = time.monotonic()
    reply: Any = None
    error: Exception | None = None
    try:
        reply = await bound.ainvoke(list(messages))
    except Exception as err:  # CancelledError is a BaseException and passes through
        error = classify_error(err)
    if reply is not None:
        error = unusable_reply(reply, used_tools=used_tools)
    usage = getattr(reply, "usage_metadata", None) or {}
    tokens_in, tokens_out = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
    cost = price_usd(model, tokens_in, tokens_out, _settings()) if reply is not None else 0.0
    data = {**base, "outcome": "ok" if error is None else "error",
            "error_code": _code(error) if error is not None else None,
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
    from overseer.plugin import append_from_activity

    return append_from_activity


def _settings() -> Any:
    from overseer.plugin import get_runtime

    try:
        return get_runtime().settings
    except RuntimeError:
        from overseer.plugin import Settings

        return Settings()
