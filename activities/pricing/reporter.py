"""``compose_report`` (seed 003 reporter_worker): a concise analyst summary for leadership.

Offline it fills a fixed template from the workers' structured outputs (``strategy: rules``);
with a model configured the model rewrites the same facts in prose, streaming tokens
(``strategy: llm:<model>``). The model is given only the template's facts and told not to
invent numbers, and :func:`invented_numbers` checks that it did not; the template is also
the fallback when the model's summary is unusable (:func:`summary_problem`: empty,
unreadable, refused, JSON instead of prose, stating none of the facts, or stating a number
the facts do not, after one re-ask naming what was wrong).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from activities.pricing.catalog import TIER_LABELS

REPORT_PROMPT = (
    "You are a pricing analyst writing for leadership. Rewrite the facts below as a concise "
    "summary (at most 150 words, short paragraphs or bullets). Use only the numbers given; "
    "never invent prices, percentages or items. Keep item ids as written. End with the "
    "sign-off line unchanged if there is one."
)
REASK = ("Your summary could not be used: {error}. Write it again from the facts above, as "
         "plain text, using only the numbers given.")
"""The one re-ask after an unusable summary (what was wrong is named)."""

_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_LIST_MARKER = re.compile(r"^\s*\d+[.)]\s", re.MULTILINE)


def scope_label(scope: dict[str, Any], items: int) -> str:
    """``ASTR 4 — Black Holes… (TB006-campus)`` or ``all items, premium, online``."""
    if scope.get("item_ids"):
        ids = ", ".join(scope["item_ids"][:3])
        return f"{scope.get('matched') or ids} ({ids})"
    parts = [p for p in (scope.get("segment"), scope.get("region")) if p]
    return "all items" + (", " + ", ".join(parts) if parts else "") + f" ({items} items)"


def template_report(state: dict[str, Any]) -> str:
    """The deterministic analyst summary from whatever workers ran.

    Args:
        state: the graph state (``outputs``, ``proposal``, ``violations``, ``scope``, ``run_id``).

    Returns:
        Plain text, a few lines; ends with the sign-off line when a proposal awaits approval.
    """
    outputs = state.get("outputs", {})
    scope = state.get("scope", {})
    lines: list[str] = []
    opt = outputs.get("optimizer")
    n_items = (opt or outputs.get("policy") or {}).get("items", 0)
    lines.append(f"Pricing review for {scope_label(scope, n_items)}.")
    proposal = state.get("proposal") or {}
    changes = proposal.get("changes", {})
    if opt:
        moves = [m for tiers in changes.values() for m in tiers.values()]
        up = sum(1 for m in moves if m["to"] > m["from"])
        lines.append(
            f"- Proposal: {len(moves)} price changes on {len(changes)} items ({up} up, "
            f"{len(moves) - up} down); expected {opt['objective']} {proposal.get('uplift_pct', 0):+.2f}% "
            f"under the fitted demand model (max change ±{opt['max_change_pct']:.0%})."
        )
        if opt.get("relaxed_items"):
            lines.append(f"- {opt['relaxed_items']} items needed more than the max change to "
                         "restore the tier hierarchy (flagged in the proposal).")
    policy = outputs.get("policy")
    if policy:
        counts = policy.get("counts", {})
        if policy.get("violations_total"):
            lines.append(
                f"- Policy: today's prices break {policy['violations_total']} rules on "
                f"{policy['items_with_violations']} items "
                f"({counts.get('hierarchy_inversion', 0)} hierarchy inversions, "
                f"{counts.get('tier_gap_below_threshold', 0)} gaps below threshold); "
                + ("the proposal fixes all of them." if policy.get("proposal_ok", True) and opt
                   else "suggested fixes are attached.")
            )
        else:
            lines.append("- Policy: no violations in today's prices"
                         + ("; the proposal passes every rule." if opt else "."))
    explainer = outputs.get("explainer")
    if explainer and explainer.get("summaries"):
        lines.append("- Drivers: " + " ".join(explainer["summaries"][:3]))
    sensitivity = outputs.get("sensitivity")
    if sensitivity and sensitivity.get("summary"):
        lines.append("- Sensitivity: " + sensitivity["summary"])
    if changes:
        top = sorted(((abs(m["to"] - m["from"]), item, tier, m) for item, tiers in changes.items()
                      for tier, m in tiers.items()), key=lambda x: (-x[0], x[1], x[2]))[:5]
        lines.append("- Largest changes: " + "; ".join(
            f"{item} {TIER_LABELS.get(tier, tier)} {m['from']:.2f} → {m['to']:.2f}"
            for _, item, tier, m in top) + ".")
    if changes and "approval" in state.get("plan", []):
        lines.append(f"Sign-off needed: approve or cancel thread {state.get('run_id')}.")
    return "\n".join(lines) + "\n"


def invented_numbers(report: str, facts: str) -> list[str]:
    """Numbers the model's ``report`` states that ``facts`` do not, in order of appearance.

    A number matches a fact when it equals the fact rounded to the number's own decimals
    (``3.2%`` and ``3%`` both match ``+3.20%``; signs and ``$`` are ignored); digits inside a
    word (``TB006``) and numbered-list markers are not numbers; thousands separators are.

    Returns:
        The unmatched numbers as written (``[]`` when every number is in the facts).
    """
    known = [float(n) for n in _numbers(facts)]
    out: list[str] = []
    for written in _numbers(_LIST_MARKER.sub("", report)):
        value, decimals = float(written), len(written.partition(".")[2])
        if not any(abs(round(fact, decimals) - value) < 1e-9 for fact in known) and \
                written not in out:
            out.append(written)
    return out


_ITEM_ID = re.compile(r"\b[A-Za-z]+\d+[\w-]*")
"""An item id of the facts (``TB001-online``, ``ASTR4``): letters then digits."""
_WORD = re.compile(r"[A-Za-z]{5,}")
"""A word long enough to carry meaning (``prices``, ``hierarchy``; not ``the``, ``fine``)."""


def summary_problem(report: str, facts: str) -> dict[str, str] | None:
    """What makes the model's ``report`` unusable as a summary of ``facts`` (None: usable).

    Unusable: empty (``llm_empty_reply``); JSON where plain text was asked (a reply of
    another format, or one cut off midway: ``llm_not_a_summary``); about none of the facts
    — not one of their numbers, item ids or words of five letters or more, as a chatty
    "looks fine to me" is (``llm_not_a_summary``); or stating a number the facts do not
    (``llm_invented_numbers``, :func:`invented_numbers`).

    Returns:
        ``{"code", "message"}`` naming the problem (the re-ask shows the message), or None.
    """
    text = report.strip()
    if not text:
        return {"code": "llm_empty_reply", "message": "the summary was empty"}
    if text.startswith(("{", "[")):
        return {"code": "llm_not_a_summary",
                "message": "it is JSON (or the start of it), not a plain-text summary"}
    invented = invented_numbers(text, facts)
    if invented:
        return {"code": "llm_invented_numbers", "message": "it states numbers that are not "
                f"in the facts ({', '.join(invented[:5])})"}
    terms = {m.group(0).lower() for m in (*_ITEM_ID.finditer(facts), *_WORD.finditer(facts))}
    said = {m.group(0).lower() for m in (*_ITEM_ID.finditer(text), *_WORD.finditer(text))}
    if terms and not (said & terms or _numbers(_LIST_MARKER.sub("", text))):
        return {"code": "llm_not_a_summary", "message": "it is about none of the facts (not "
                "one of their numbers, item ids or words)"}
    return None


def _numbers(text: str) -> list[str]:
    return _NUMBER.findall(_THOUSANDS.sub("", text))


async def stream_llm_report(model: Any, facts: str, *, history: Sequence[Any] = ()
                            ) -> AsyncIterator[tuple[str, dict[str, int]]]:
    """Stream the model's rewrite of ``facts``: ``(text chunk, usage so far)`` pairs.

    Args:
        model: a chat model.
        facts: the template report.
        history: messages after the facts (a re-ask: the unusable answer and what was wrong).

    Raises:
        Exception: transport and parsing errors propagate (classified by the caller).
    """
    from langchain_core.messages import HumanMessage, SystemMessage

    async for chunk in model.astream([SystemMessage(REPORT_PROMPT), HumanMessage(facts),
                                      *history]):
        text = chunk.content if isinstance(chunk.content, str) else ""
        usage = getattr(chunk, "usage_metadata", None) or {}
        yield text, {k: int(v) for k, v in usage.items()
                     if k in ("input_tokens", "output_tokens") and v}
