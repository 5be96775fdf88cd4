"""The pricing tools (seed 003 ``optimize_price``, ``explain_decision``, ``sensitivity_analysis``, …).

Pure functions of a catalog snapshot, the ask's scope and the run's options, shared by the
orchestrator's workers (activities), the single-agent fast path (API process) and
``POST /api/v1/policy/check``. :data:`TOOLS` is what ``GET /api/v1/chat/tools`` lists.
"""

from __future__ import annotations

from typing import Any

from activities.pricing.catalog import (
    TIER_LABELS,
    Catalog,
    CatalogItem,
    catalog_from_snapshot,
    load_catalog_file,
)
from activities.pricing.demand import DemandModel, fit_demand_model
from activities.pricing.explainer import explain_items
from activities.pricing.optimizer import OptimizerSettings, optimize_catalog, optimize_item
from activities.pricing.policy import PolicyConfig, check_all_policies
from activities.pricing.sensitivity import sensitivity_analysis
from activities.pricing.sensitivity import summarise as summarise_sensitivity
from activities.pricing.stream import VIOLATIONS_IN_STREAM
from overseer.plugin import NotFoundError

TOOLS: list[dict[str, str]] = [
    {"name": "optimize_price",
     "description": "Recommend prices per tier for catalog items: margin (or revenue) under a "
                    "demand model fit to the catalog, within hierarchy, max-change and cost "
                    "guardrails."},
    {"name": "check_policy",
     "description": "Check tier hierarchy (New > Exchange > Repair > USM) and segment/region "
                    "gap thresholds; returns violations with machine-readable fixes."},
    {"name": "explain_decision",
     "description": "Explain a recommended price: exact Shapley contributions of demand, "
                    "hierarchy, max-change and cost-floor effects."},
    {"name": "sensitivity_analysis",
     "description": "Perturb elasticities (±20 % by default): price band, worst/best uplift "
                    "and a robustness score."},
    {"name": "compose_report",
     "description": "Compose a concise analyst summary for leadership from the other tools' "
                    "results."},
    {"name": "request_approval",
     "description": "Pause a price proposal for human sign-off; resume with "
                    "POST /api/v1/chat/approve or /cancel and the thread id."},
]

EXPLAIN_TOP_ITEMS = 3
REPORT_TOP_RECOMMENDATIONS = 10

_catalogs: dict[str, Catalog] = {}


async def load_catalog(ref: dict[str, Any]) -> Catalog:
    """The catalog a run references: ``{sha256, path?}``, read once per process.

    The snapshot is the ``artifacts`` row with that SHA-256 (stored by the API when the run
    started); ``path`` lets plain-LangGraph tests point at a CSV file instead.

    Raises:
        NotFoundError: no stored snapshot with that hash (permanent).
    """
    sha = ref.get("sha256", "")
    if sha in _catalogs:
        return _catalogs[sha]
    if ref.get("path"):
        catalog = load_catalog_file(ref["path"])
    else:
        from overseer.plugin import get_runtime

        row = await get_runtime().pool.fetchrow(
            "SELECT content FROM artifacts WHERE sha256 = $1", sha)
        if row is None:
            raise NotFoundError(f"no stored catalog snapshot {sha}", details={"sha256": sha})
        catalog = catalog_from_snapshot(bytes(row["content"]))
    if sha and catalog.sha256 != sha:
        raise NotFoundError("catalog snapshot does not match its hash", details={"sha256": sha})
    if len(_catalogs) > 16:
        _catalogs.clear()
    _catalogs[catalog.sha256] = catalog
    return catalog


_models: dict[str, DemandModel] = {}


def demand_model(catalog: Catalog) -> DemandModel:
    """The fitted demand model of ``catalog`` (cached per snapshot hash)."""
    key = catalog.sha256 or f"id:{id(catalog)}"
    if key not in _models:
        if len(_models) > 16:
            _models.clear()
        _models[key] = fit_demand_model(catalog)
    return _models[key]


def policy_config(options: dict[str, Any]) -> PolicyConfig:
    """The run's policy thresholds (``options["policy"]``)."""
    return PolicyConfig.model_validate(options.get("policy", {}))


def optimizer_settings(options: dict[str, Any]) -> OptimizerSettings:
    """The run's optimizer settings (``options["optimizer"]``)."""
    return OptimizerSettings.from_options(options)


def scoped_items(catalog: Catalog, scope: dict[str, Any]) -> list[CatalogItem]:
    """Items the ask is about (all items when the scope names none)."""
    return catalog.select(item_ids=scope.get("item_ids"), segment=scope.get("segment"),
                          region=scope.get("region") if not scope.get("item_ids") else None)


def optimize_price(catalog: Catalog, scope: dict[str, Any], options: dict[str, Any]
                   ) -> dict[str, Any]:
    """Tool ``optimize_price``: the proposal for the scope and a short summary.

    Returns:
        ``{"proposal": {changes, proposed_prices, items_meta, uplift_pct, objective, items},
        "output": {items, change_count, items_changed, uplift_pct, objective, max_change_pct,
        policy_ok, top, elasticities, summary}}``.
    """
    items = scoped_items(catalog, scope)
    settings = optimizer_settings(options)
    model = demand_model(catalog)
    result = optimize_catalog(catalog, items, model, policy=policy_config(options),
                              settings=settings)
    changes = result["changes"]
    top = sorted(result["recommendations"], key=lambda r: -abs(r["uplift_pct"]))
    proposal = {
        "changes": changes,
        "proposed_prices": result["proposed_prices"],
        "items_meta": {i: {"segment": catalog.items[i].segment, "region": catalog.items[i].region}
                       for i in changes},
        "uplift_pct": result["uplift_pct"],
        "objective": settings.objective,
        "items": len(items),
    }
    moves = sum(len(v) for v in changes.values())
    summary = (f"{moves} price changes on {len(changes)} of {len(items)} items; expected "
               f"{settings.objective} {result['uplift_pct']:+.2f}%." if items
               else "No catalog items matched the request.")
    output = {
        "items": len(items), "change_count": moves, "items_changed": len(changes),
        "uplift_pct": result["uplift_pct"], "objective": settings.objective,
        "max_change_pct": settings.max_change_pct, "policy_ok": result["policy_ok"],
        "relaxed_items": sum(1 for r in result["recommendations"] if r["relaxed"]),
        "top": top[:REPORT_TOP_RECOMMENDATIONS],
        "elasticities": model.as_table(), "summary": summary,
    }
    return {"proposal": proposal, "output": output}


def check_policy(catalog: Catalog, scope: dict[str, Any], options: dict[str, Any],
                 proposal: dict[str, Any] | None) -> dict[str, Any]:
    """Tool ``check_policy``: violations in today's prices (seed shape) and the proposal's check.

    Returns:
        ``{"violations": [...], "output": {items, violations_total, items_with_violations,
        counts, violations (first 20), suggestions (first 50), proposal_ok, summary},
        "proposal": fixed proposal or None}``.
    """
    config = policy_config(options)
    items = scoped_items(catalog, scope)
    violations: list[dict[str, Any]] = []
    suggestions: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for item in items:
        report = check_all_policies(item.item_id, item.prices, segment=item.segment,
                                    region=item.region, config=config)
        violations += [v.model_dump() for v in report.violations]
        suggestions += [s.model_dump() for s in report.suggestions]
        for kind, n in report.counts().items():
            counts[kind] = counts.get(kind, 0) + n
    fixed_proposal = None
    proposal_ok = True
    if proposal and proposal.get("proposed_prices"):
        fixed_proposal = {**proposal, "proposed_prices": dict(proposal["proposed_prices"]),
                          "changes": dict(proposal["changes"])}
        for item_id, prices in proposal["proposed_prices"].items():
            item = catalog.items[item_id]
            check = check_all_policies(item_id, prices, segment=item.segment, region=item.region,
                                       config=config)
            if not check.ok:
                proposal_ok = False
                fixed = check.fixed_prices[item_id]
                fixed_proposal["proposed_prices"][item_id] = fixed
                fixed_proposal["changes"][item_id] = {
                    t: {"from": item.prices[t], "to": p} for t, p in fixed.items()
                    if abs(p - item.prices[t]) >= 0.005}
        if proposal_ok:
            fixed_proposal = None
    affected = len({v["item"] for v in violations})
    summary = (f"{len(violations)} policy violations on {affected} of {len(items)} items "
               f"({counts.get('hierarchy_inversion', 0)} hierarchy inversions, "
               f"{counts.get('tier_gap_below_threshold', 0)} gaps below threshold)"
               if violations else f"No policy violations in {len(items)} items")
    if proposal:
        summary += ("; the proposal passes every rule." if proposal_ok
                    else "; the proposal was repaired with the policy's fixes.")
    else:
        summary += "."
    output = {
        "items": len(items), "violations_total": len(violations),
        "items_with_violations": affected, "counts": counts,
        "violations": violations[:VIOLATIONS_IN_STREAM], "suggestions": suggestions[:50],
        "proposal_ok": proposal_ok, "summary": summary,
    }
    return {"violations": violations, "output": output, "proposal": fixed_proposal}


def explain_decision(catalog: Catalog, scope: dict[str, Any], options: dict[str, Any],
                     proposal: dict[str, Any] | None) -> dict[str, Any]:
    """Tool ``explain_decision``: contributions for the named items, else the biggest movers.

    Returns:
        ``{"explanations": [...], "summaries": [...], "summary"}``.
    """
    settings, config = optimizer_settings(options), policy_config(options)
    model = demand_model(catalog)
    if scope.get("item_ids"):
        chosen = scoped_items(catalog, scope)
    else:
        changes = (proposal or {}).get("changes")
        if changes is None:
            changes = optimize_price(catalog, scope, options)["proposal"]["changes"]
        ranked = sorted(changes.items(), key=lambda kv: -max(
            abs(m["to"] - m["from"]) / m["from"] for m in kv[1].values()))
        chosen = [catalog.items[i] for i, _ in ranked[:EXPLAIN_TOP_ITEMS]]
    explanations = explain_items(chosen, model, policy=config, settings=settings)
    summaries = [e["summary"] for e in explanations]
    return {"explanations": explanations, "summaries": summaries,
            "summary": " ".join(summaries) if summaries else "Nothing to explain."}


def sensitivity(catalog: Catalog, scope: dict[str, Any], options: dict[str, Any],
                proposal: dict[str, Any] | None) -> dict[str, Any]:
    """Tool ``sensitivity_analysis`` over the proposal (computed when none is in the state).

    Returns:
        The analysis (band trimmed to the ten items with the widest band) plus ``summary``.
    """
    settings, config = optimizer_settings(options), policy_config(options)
    raw = options.get("sensitivity", {})
    width, points = float(raw.get("width", 0.2)), int(raw.get("points", 9))
    items = scoped_items(catalog, scope)
    if proposal is None:
        proposal = optimize_price(catalog, scope, options)["proposal"]
    result = sensitivity_analysis(items, proposal.get("proposed_prices", {}), demand_model(catalog),
                                  policy=config, settings=settings, width=width, points=points)
    widest = sorted(result["band"].items(), key=lambda kv: -max(
        (hi - lo) for lo, hi in kv[1].values()))[:10]
    result["band"] = dict(widest)
    result["summary"] = summarise_sensitivity(result, width)
    return result


def describe_item_answer(catalog: Catalog, scope: dict[str, Any], options: dict[str, Any]
                         ) -> tuple[str, dict[str, Any]]:
    """The single agent's answer to "what is the optimal price for X?" (deterministic).

    Returns:
        ``(text, tool_result)`` — the text ends with a newline-free sentence.
    """
    settings, config = optimizer_settings(options), policy_config(options)
    model = demand_model(catalog)
    items = catalog.select(item_ids=scope["item_ids"]) if scope.get("item_ids") else []
    if not items:
        result = optimize_price(catalog, scope, options)
        out = result["output"]
        text = (f"Across {out['items']} catalog items the optimizer recommends "
                f"{out['change_count']} price changes (expected {out['objective']} "
                f"{out['uplift_pct']:+.2f}%). Name an item (e.g. TB006-campus or a course code "
                f"like ASTR 4) for its optimal prices, or ask to propose updates for sign-off.")
        return text, {"items": out["items"], "change_count": out["change_count"],
                      "uplift_pct": out["uplift_pct"]}
    sentences = []
    recs = []
    for item in items[:2]:
        rec = optimize_item(item, model, policy=config, settings=settings)
        recs.append(rec.to_dict())
        tiers = [scope["tier"]] if scope.get("tier") in rec.recommended else list(rec.recommended)
        parts = [f"{TIER_LABELS.get(t, t)} ${rec.recommended[t]:.2f} (now ${rec.current[t]:.2f})"
                 for t in tiers]
        sentences.append(
            f"The optimal price{'s' if len(tiers) > 1 else ''} for {item.name} "
            f"({item.item_id}, {item.region}) {'are' if len(tiers) > 1 else 'is'} "
            + ", ".join(parts)
            + f"; expected {settings.objective} {rec.uplift_pct:+.2f}%."
        )
    return " ".join(sentences), {"recommendations": recs}
