"""Intent routing (seed 003 AC3, "Routing Heuristics"): single agent or orchestrator, and the plan.

Rules first (the seed's keyword heuristics, extended with a few synonyms); an LLM intent
classifier, when a model is configured, may *add* intents the rules missed but never removes
one, so the offline answer and the online answer route the same way for the seed's examples.

* A **simple ask** — only the optimizer intent (or nothing recognised) — stays on the
  single tool-calling agent (no workflow, low latency).
* A **composite ask** — anything else, or ``plan=true`` — goes to the orchestrator with a plan:
  ``optimizer`` (when a proposal or price is asked for) → ``policy`` (always after a
  proposal, and when asked) → ``explainer`` → ``sensitivity`` → ``reporter`` (always last) →
  ``approval`` (only when the ask is a proposal or report of new prices, an instruction to
  change prices however it is phrased — "set every History price to its optimum", "make
  TB001-campus cost what it should" (:func:`asks_for_changes`) — or
  ``plan=true``; a question such as "what's the best price for X and why?" or "should I
  raise the History prices?" is answered, not signed off).

Keywords match whole words (see :data:`KEYWORDS`), never substrings.

The graph's ``router`` node follows the plan one step per visit, bounded by
``max_iterations`` (:func:`next_route`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

INTENTS = ("optimizer", "policy", "explainer", "sensitivity", "report")
WORKERS = ("optimizer", "policy", "explainer", "sensitivity", "reporter")
Path = Literal["single_agent", "orchestrator"]

KEYWORDS: dict[str, tuple[str, ...]] = {
    "optimizer": ("optimal", "optimum", "optimi*", "best price*", "what price*", "right price*",
                  "reasonable price*", "fair price*", "how much should", "recommend a price",
                  "recommend prices", "price for", "prices for", "pricing for"),
    "policy": ("hierarch*", "polic*", "violat*", "complian*", "FAR", "guardrail*", "inversion*",
               "inverted", "tier gap*"),
    "explainer": ("why", "explain*", "driver*", "factor*", "reason", "reasons", "reasoning",
                  "rationale", "how come"),
    "sensitivity": ("robust*", "sensitiv*", "confiden*", "worst", "best case*", "what if",
                    "uncertain*", "risk", "risks", "risky"),
    "report": ("propos*", "q1", "q2", "q3", "q4", "adjustment*", "price update*",
               "pricing update*", "update prices", "update the prices", "price change*",
               "new prices", "reprice*", "repricing", "pricing plan", "price plan",
               "summary", "summari*", "leadership", "executive", "report"),
}
"""Rule keywords per intent, matched as **whole words** (seed 003 "Routing Heuristics", extended).

A phrase matches its words in order separated by spaces or hyphens; a trailing ``*`` allows
any word ending (``optimi*`` = optimise, optimize, optimizing); an all-capitals entry is an
acronym matched case-sensitively (``FAR``, so "how far can I push" is not a policy ask);
everything else is case-insensitive. Whole words, not substrings: "reasonable" is not
"reason", "sofar" is not "far".
"""

CHANGE_KEYWORDS = ("propos*", "q1", "q2", "q3", "q4", "adjustment*", "price update*",
                   "pricing update*", "update prices", "update the prices", "price change*",
                   "new prices", "reprice*", "repricing", "pricing plan", "price plan")
"""The ``report`` keywords that ask for price *changes* (a proposal); the rest ask for a summary."""


def _keyword_pattern(keyword: str) -> re.Pattern[str]:
    words = keyword.split()
    parts = [re.escape(w[:-1]) + r"\w*" if w.endswith("*") else re.escape(w) for w in words]
    body = r"(?:\s+|\s*-\s*)".join(parts)
    flags = 0 if keyword.isupper() and len(keyword) > 1 else re.IGNORECASE
    return re.compile(rf"(?<!\w){body}(?!\w)", flags)


_PATTERNS = {intent: tuple(_keyword_pattern(k) for k in kws) for intent, kws in KEYWORDS.items()}
_CHANGE_PATTERNS = tuple(_keyword_pattern(k) for k in CHANGE_KEYWORDS)
# An instruction to change prices, however it is phrased: a clause that starts,
# after a courtesy ("please", "can you", "go ahead and", "I want you to" …), with a verb that
# changes something, and names a price, a cost or an item. A question ("should I raise …?",
# "what if I lowered …") does not start with the verb, so it is answered, not signed off.
_COURTESY = (r"(?:(?:please|kindly|now|then|and|so|ok(?:ay)?|just)[\s,]+)*"
             r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?|go\s+ahead\s+and\s+|"
             r"i\s+(?:want|need|would\s+like)\s+(?:you\s+)?to\s+|let'?s\s+)?(?:please\s+)?")
_CHANGE_VERB = (r"(?:set|change|apply|move|raise|lower|cut|increase|decrease|adjust|update|"
                r"reprice|correct|fix|bump|drop|push|make|bring|put|reduce|hike|"
                r"mark\s+(?:up|down))")
_INSTRUCTION = re.compile(
    rf"(?:^|[.;!?:]\s*|,\s*|\b(?:and|then)\s+)\s*{_COURTESY}(?P<verb>{_CHANGE_VERB})\b"
    r"(?P<rest>[^.;!?]*)", re.IGNORECASE)
_PRICED = re.compile(r"\b(?:prices?|priced|pricing|costs?)\b|\bTB\d+", re.IGNORECASE)


@dataclass
class RouteDecision:
    """Where a message goes.

    Attributes:
        path: ``single_agent`` or ``orchestrator``.
        intents: recognised intents (see :data:`INTENTS`), in canonical order.
        plan: orchestrator steps, e.g. ``["optimizer", "policy", "reporter", "approval"]``.
        reason: why (``plan_param``, ``composite``, ``worker_intent``, ``single_intent``,
            ``no_intent``).
        strategy: ``rules`` or ``llm:<model>`` when the classifier added an intent.
    """

    path: Path
    intents: list[str]
    plan: list[str] = field(default_factory=list)
    reason: str = ""
    strategy: str = "rules"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (recorded in the run's input)."""
        return {"path": self.path, "intents": self.intents, "plan": self.plan,
                "reason": self.reason, "strategy": self.strategy}


def rule_intents(message: str) -> list[str]:
    """Intents whose keywords appear in ``message`` as whole words, in canonical order."""
    return [intent for intent in INTENTS if any(p.search(message) for p in _PATTERNS[intent])]


def asks_for_changes(message: str) -> bool:
    """Whether ``message`` asks for new prices (a proposal or an instruction to change them).

    Not only for an answer or a summary: a proposal keyword (:data:`CHANGE_KEYWORDS`), or
    an instruction whose verb changes something and that names a price, a cost or an item
    ("set every History price to its optimum", "make TB001-campus cost what it should").
    """
    if any(p.search(message) for p in _CHANGE_PATTERNS):
        return True
    return any(_PRICED.search(m.group(0)) for m in _INSTRUCTION.finditer(message))


def decide_route(message: str, *, plan: bool = False,
                 extra_intents: Sequence[str] = (), strategy: str = "rules") -> RouteDecision:
    """Seed 003 AC3: simple asks → single agent; composite asks or ``plan=true`` → orchestrator.

    Args:
        message: the user's ask.
        plan: the ``plan`` query parameter (forces the orchestrator, with a sign-off step).
        extra_intents: intents an LLM classifier found (added to the rules' intents).
        strategy: recorded with the decision.
    """
    intents = [i for i in INTENTS if i in set(rule_intents(message)) | set(extra_intents)]
    change = asks_for_changes(message)
    if change and "report" not in intents:  # new prices are proposed, reported, signed off
        intents = [i for i in INTENTS if i in {*intents, "report"}]
    if plan:
        return RouteDecision("orchestrator", intents,
                             build_plan(intents or ["report"], sign_off=True), "plan_param",
                             strategy)
    if not intents:
        return RouteDecision("single_agent", intents, [], "no_intent", strategy)
    if intents == ["optimizer"]:
        return RouteDecision("single_agent", intents, [], "single_intent", strategy)
    reason = "composite" if len(intents) > 1 else "worker_intent"
    return RouteDecision("orchestrator", intents, build_plan(intents, sign_off=change), reason,
                         strategy)


def build_plan(intents: Sequence[str], *, sign_off: bool | None = None) -> list[str]:
    """The orchestrator's ordered steps for ``intents`` (see module docstring).

    Args:
        intents: recognised intents.
        sign_off: whether the ask is a proposal that changes prices (:func:`asks_for_changes`,
            or ``plan=true``). None (callers that only have intents): any ``report`` ask counts.

    A ``report`` ask alongside policy/explainer/sensitivity questions and no proposal
    ("a report on current inversions") reports on those; a bare report ask ("executive summary
    for leadership") or a proposal computes new prices. ``approval`` is planned only for a
    sign-off ask that computes prices, and even then the router skips it when the proposal
    changes nothing (:func:`next_route`): a question that changes no price never waits for a
    sign-off.
    """
    wanted = set(intents)
    if sign_off is None:
        sign_off = "report" in wanted
    questions = wanted & {"policy", "explainer", "sensitivity"}
    report_prices = "report" in wanted and (sign_off or not questions)
    propose = "optimizer" in wanted or report_prices
    full_report = "report" in wanted and propose
    steps: list[str] = []
    if propose:
        steps.append("optimizer")
    if propose or "policy" in wanted:
        steps.append("policy")
    if "explainer" in wanted or full_report:
        steps.append("explainer")
    if "sensitivity" in wanted or full_report:
        steps.append("sensitivity")
    steps.append("reporter")
    if propose and (sign_off or report_prices):
        steps.append("approval")
    return steps


def next_route(state: dict[str, Any]) -> tuple[str, str]:
    """The router node's decision: the next plan step not yet done, or END.

    Bounded: after ``max_iterations`` worker visits the plan jumps to ``reporter`` (when it
    has not run) and then ends, so a cycle can never run away.

    Returns:
        ``(route, reason)`` where route is a worker name, ``approval`` or ``end``.
    """
    done = list(state.get("completed_steps", []))
    plan = list(state.get("plan", []))
    iterations = int(state.get("iterations", 0))
    limit = int(state.get("max_iterations", 8))
    if iterations >= limit:
        if "reporter" in plan and "reporter" not in done:
            return "reporter", "max_iterations"
        return "end", "max_iterations"
    for step in plan:
        if step not in done:
            if step == "approval" and not (state.get("proposal") or {}).get("changes"):
                return "end", "no_changes_to_approve"
            return step, "plan"
    return "end", "plan_complete"


INTENT_PROMPT = (
    "Classify a pricing analyst's request. Reply with one JSON object only: "
    '{"intents": [...]} using any of: optimizer (asks for an optimal/recommended price), '
    "policy (hierarchy, compliance or violations), explainer (why, drivers), sensitivity "
    "(robustness, confidence, worst/best case), report (proposal, plan, summary for leadership)."
)


async def classify_with_llm(model: Any, message: str,
                            replies: list[Any] | None = None) -> list[str]:
    """Ask a chat model for intents; unknown names and unparsable replies give ``[]``.

    Never raises for a bad reply: routing falls back to the rules.

    Args:
        model: a chat model.
        message: the analyst's ask.
        replies: when given, the model's reply is appended to it (its usage is the ledger's).
    """
    from langchain_core.messages import HumanMessage, SystemMessage

    reply = await model.ainvoke([SystemMessage(INTENT_PROMPT), HumanMessage(message[:2000])])
    if replies is not None:
        replies.append(reply)
    content = reply.content if isinstance(reply.content, str) else json.dumps(reply.content)
    start, end = content.find("{"), content.rfind("}")
    try:
        parsed = json.loads(content[start:end + 1]) if start >= 0 else {}
    except json.JSONDecodeError:
        return []
    raw = parsed.get("intents") if isinstance(parsed, dict) else None
    return [i for i in raw if i in INTENTS] if isinstance(raw, list) else []


# --- scope: which items a message is about ---------------------------------------------------

SEGMENT_WORDS = {"premium": "premium", "standard": "standard", "budget": "budget"}
REGION_WORDS = {"campus": "campus", "bookstore": "campus", "online": "online", "amazon": "online"}
TIER_WORDS = {"new": "new", "exchange": "exchange", "repair": "repair", "usm": "usm",
              "used": "usm"}


def resolve_scope(message: str, catalog: Any, *, previous: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
    """Items, segment, region and tier a message is about.

    A named item (id, ISBN, course code or title) wins; "that"/"this"/"it" without a name
    reuses the previous turn's scope from the session; otherwise segment/region words filter
    the whole catalog.

    Returns:
        ``{"item_ids": [...] | None, "segment", "region", "tier", "matched": str | None}``.
    """
    text = message.lower()
    words = set(re.findall(r"[a-z0-9]+", text))
    segment = next((v for k, v in SEGMENT_WORDS.items() if k in words), None)
    region = next((v for k, v in REGION_WORDS.items() if k in words), None)
    tier = next((v for k, v in TIER_WORDS.items() if k in words), None)
    hits = catalog.search(message, limit=4)
    strong = [item for item, score in hits if score >= 0.6]
    if strong:
        top = max(score for _, score in hits)
        chosen = [item for item, score in hits if score >= top - 1e-9]
        if region:
            chosen = [i for i in chosen if i.region == region] or chosen
        return {"item_ids": [i.item_id for i in chosen], "segment": None, "region": region,
                "tier": tier, "matched": chosen[0].name}
    if previous and previous.get("item_ids") and words & {"that", "this", "it", "its"}:
        return {**previous, "tier": tier or previous.get("tier")}
    return {"item_ids": None, "segment": segment, "region": region, "tier": tier,
            "matched": None}
