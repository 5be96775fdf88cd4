"""``explain_decision`` (seed 003 explainer_worker): exact Shapley contributions per recommended price.

The seed's explainer returns a "SHAP/trace summary". Here the model is small enough for
exact Shapley values instead of SHAP's sampling: the recommendation is a function of a few
switchable *features*, and each feature's contribution is its average marginal effect on the
price over every order in which the features could be switched on:

* ``demand`` — the segment's fitted elasticity instead of the item's own implied one (with
  its own elasticity, today's price is already optimal, so this is what moves prices);
* ``hierarchy`` — the tier-ordering and minimum-gap guardrail;
* ``max_change`` — the ±max-change guardrail;
* ``cost_floor`` — the never-below-cost guardrail;
* ``objective`` — revenue instead of margin (only when the run maximises revenue).

Contributions add up exactly: ``current + baseline + Σ contributions = recommended``, where
``baseline`` is the gap between today's price and its own optimum with every feature off
(zero, except for a tier sold at or below cost, whose implied elasticity does not exist).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from activities.pricing.catalog import TIER_LABELS, CatalogItem
from activities.pricing.demand import DemandModel, implied_elasticity
from activities.pricing.optimizer import OptimizerSettings, optimize_item
from activities.pricing.policy import PolicyConfig

FEATURES = ("demand", "hierarchy", "max_change", "cost_floor")
FEATURE_LABELS = {"demand": "segment demand response", "hierarchy": "tier hierarchy",
                  "max_change": "max-change guardrail", "cost_floor": "cost floor",
                  "objective": "revenue objective"}


def explain_item(item: CatalogItem, model: DemandModel, *, policy: PolicyConfig,
                 settings: OptimizerSettings) -> dict[str, Any]:
    """Shapley contributions of each feature to each tier's recommended price.

    Returns:
        ``{"item_id", "tiers": {tier: {"current", "recommended", "baseline",
        "contributions": {feature: usd}}}, "top_driver", "summary"}``; amounts in USD,
        rounded to cents (the unrounded values add up exactly).
    """
    features = list(FEATURES) + (["objective"] if settings.objective == "revenue" else [])
    tiers = [t for t in policy.tiers if t in item.prices]
    own = {t: implied_elasticity(item.prices[t], item.unit_costs[t]) for t in tiers}
    segment_eps = {t: model.elasticity(t, item.segment) for t in tiers}

    cache: dict[frozenset[str], dict[str, float]] = {}

    def value(on: frozenset[str]) -> dict[str, float]:
        if on not in cache:
            eps = {t: segment_eps[t] if "demand" in on or own[t] is None else float(own[t] or 0)
                   for t in tiers}
            rec = optimize_item(
                item, model, policy=policy, settings=settings, elasticities=eps,
                use_hierarchy="hierarchy" in on, use_max_change="max_change" in on,
                use_cost_floor="cost_floor" in on,
                objective="revenue" if "objective" in on else "margin",
            )
            cache[on] = _unrounded(rec.recommended, rec.current)
        return cache[on]

    n = len(features)
    phi = {f: dict.fromkeys(tiers, 0.0) for f in features}
    for f in features:
        others = [g for g in features if g != f]
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for subset in itertools.combinations(others, size):
                without = frozenset(subset)
                with_f, without_v = value(without | {f}), value(without)
                for t in tiers:
                    phi[f][t] += weight * (with_f[t] - without_v[t])
    empty, full = value(frozenset()), value(frozenset(features))
    result: dict[str, Any] = {"item_id": item.item_id, "tiers": {}}
    totals = dict.fromkeys(features, 0.0)
    for t in tiers:
        result["tiers"][t] = {
            "current": item.prices[t],
            "recommended": round(full[t], 2),
            "baseline": round(empty[t] - item.prices[t], 2),
            "contributions": {f: round(phi[f][t], 2) for f in features},
        }
        for f in features:
            totals[f] += abs(phi[f][t])
    top = max(features, key=lambda f: totals[f])
    result["top_driver"] = top if totals[top] >= 0.005 else None
    result["summary"] = summarise(item, result)
    return result


def explain_items(items: Sequence[CatalogItem], model: DemandModel, *, policy: PolicyConfig,
                  settings: OptimizerSettings) -> list[dict[str, Any]]:
    """:func:`explain_item` for each item."""
    return [explain_item(i, model, policy=policy, settings=settings) for i in items]


def summarise(item: CatalogItem, explanation: dict[str, Any]) -> str:
    """One sentence naming the (at most two) biggest moves and what drove them."""
    parts = []
    moved = sorted(explanation["tiers"].items(),
                   key=lambda kv: -abs(kv[1]["recommended"] - kv[1]["current"]))[:2]
    for tier, row in moved:
        delta = row["recommended"] - row["current"]
        if abs(delta) < 0.005:
            continue
        drivers = sorted(row["contributions"].items(), key=lambda kv: -abs(kv[1]))
        named = ", ".join(f"{FEATURE_LABELS[f]} {v:+.2f}" for f, v in drivers[:2] if abs(v) >= 0.005)
        parts.append(f"{TIER_LABELS.get(tier, tier)} {row['current']:.2f} → {row['recommended']:.2f}"
                     f" ({named or 'rounding'})")
    if not parts:
        return f"{item.item_id}: today's prices are already optimal under the guardrails."
    return f"{item.item_id}: " + "; ".join(parts) + "."


def _unrounded(recommended: dict[str, float], current: dict[str, float]) -> dict[str, float]:
    return {t: float(recommended[t]) for t in current}
