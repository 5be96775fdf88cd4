"""Price optimisation under guardrails (seed 003 ``optimize_price``), exact for each item.

For one item the prices of its tiers are chosen together to maximise total margin (or
revenue) under the linear demand of :mod:`activities.pricing.demand`, subject to:

1. **hierarchy** — each lower tier at least the policy's minimum gap below the tier above
   (``p[t+1] ≤ (1 − gap)·p[t]``), so a proposal never violates the seed's ordering;
2. **max change** — each price within ``±max_change_pct`` of today's (no price shocks);
3. **cost floor** — no price below ``unit_cost × (1 + min_markup_pct)`` unless that would
   need a move larger than the max change (the price then rises by the max change).

The objective is a sum of concave quadratics, one per tier. Substituting
``y[t] = p[t] / (1 − gap)^t`` turns the hierarchy into ``y[0] ≥ y[1] ≥ …``, so the optimum
pools adjacent tiers into blocks that share one ``y``; each block's optimum is the vertex of
its summed parabola clipped to its bounds. With at most a handful of tiers, enumerating all
``2^(n−1)`` poolings and keeping the best feasible one is exact and takes microseconds.
When today's prices are so inverted that no pooling fits inside the max-change box, the box
is dropped for that item (the hierarchy wins) and the result says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from activities.pricing.catalog import Catalog, CatalogItem
from activities.pricing.demand import DemandModel, Objective, item_outcome
from activities.pricing.policy import PolicyConfig, check_all_policies, floor_cents


@dataclass(frozen=True)
class OptimizerSettings:
    """Guardrails and objective (fractions: 0.15 = 15 %).

    Attributes:
        objective: ``margin`` (default) or ``revenue``.
        max_change_pct: largest move from today's price per run.
        min_markup_pct: cost floor markup (0 = never below cost).
        min_change_usd / min_change_pct: a move smaller than both is not proposed (unless the
            hierarchy needs it).
    """

    objective: Objective = "margin"
    max_change_pct: float = 0.15
    min_markup_pct: float = 0.0
    min_change_usd: float = 0.05
    min_change_pct: float = 0.01

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> OptimizerSettings:
        """From a run's options snapshot (``options["optimizer"]``)."""
        raw = options.get("optimizer", {})
        return cls(objective=raw.get("objective", "margin"),
                   max_change_pct=float(raw.get("max_change_pct", 0.15)),
                   min_markup_pct=float(raw.get("min_markup_pct", 0.0)),
                   min_change_usd=float(raw.get("min_change_usd", 0.05)),
                   min_change_pct=float(raw.get("min_change_pct", 0.01)))


@dataclass
class ItemRecommendation:
    """The optimum for one item.

    Attributes:
        item_id: the item.
        current / recommended: tier → price in USD (recommended rounded to cents).
        elasticities: tier → ε used.
        outcome_current / outcome_recommended: objective value in USD per period.
        relaxed: guardrails that had to give way (``["max_change"]``).
        binding: guardrails active at the optimum (``hierarchy``, ``max_change``, ``cost_floor``).
    """

    item_id: str
    current: dict[str, float]
    recommended: dict[str, float]
    elasticities: dict[str, float]
    outcome_current: float
    outcome_recommended: float
    relaxed: list[str] = field(default_factory=list)
    binding: list[str] = field(default_factory=list)

    @property
    def uplift_pct(self) -> float:
        """Objective change in % of today's (0 when today's is not positive)."""
        if self.outcome_current <= 0:
            return 0.0
        return 100 * (self.outcome_recommended - self.outcome_current) / self.outcome_current

    def changes(self, min_change_usd: float = 0.0, min_change_pct: float = 0.0
                ) -> dict[str, dict[str, float]]:
        """Tiers whose price moves by at least the thresholds: ``{tier: {from, to}}``."""
        return {t: {"from": self.current[t], "to": p} for t, p in self.recommended.items()
                if abs(p - self.current[t]) >= max(min_change_usd, min_change_pct * self.current[t],
                                                    0.005)}

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe summary."""
        return {"item_id": self.item_id, "current": self.current,
                "recommended": self.recommended,
                "elasticities": {t: round(e, 3) for t, e in self.elasticities.items()},
                "outcome_current": round(self.outcome_current, 4),
                "outcome_recommended": round(self.outcome_recommended, 4),
                "uplift_pct": round(self.uplift_pct, 2), "relaxed": self.relaxed,
                "binding": self.binding}


def optimize_item(item: CatalogItem, model: DemandModel, *, policy: PolicyConfig,
                  settings: OptimizerSettings, elasticities: dict[str, float] | None = None,
                  use_hierarchy: bool = True, use_max_change: bool = True,
                  use_cost_floor: bool = True, objective: Objective | None = None
                  ) -> ItemRecommendation:
    """The best prices for one item's tiers under the guardrails (see module docstring).

    Args:
        item: the item (prices, costs, baseline units per tier).
        model: fitted elasticities (used unless ``elasticities`` overrides them per tier).
        policy: tier order and minimum gaps.
        settings: objective and guardrails.
        elasticities: per-tier ε override (the explainer's and sensitivity's counterfactuals).
        use_hierarchy: False switches the hierarchy guardrail off (counterfactuals).
        use_max_change: False switches the max-change guardrail off.
        use_cost_floor: False switches the cost floor off.
        objective: override ``settings.objective``.

    Returns:
        The recommendation; its prices always satisfy the hierarchy when ``use_hierarchy``.
    """
    tiers = [t for t in policy.tiers if t in item.prices]
    objective = objective or settings.objective
    eps = {t: (elasticities or {}).get(t, model.elasticity(t, item.segment)) for t in tiers}
    gap = policy.gap_for(item.segment, item.region) if use_hierarchy else 0.0
    ratio = 1 - gap
    scale = [ratio ** k for k in range(len(tiers))]
    quad, lin, lows, highs = [], [], [], []
    for k, tier in enumerate(tiers):
        p0, c, q0, e = item.prices[tier], item.unit_costs[tier], item.units.get(tier, 1.0), eps[tier]
        cost = c if objective == "margin" else 0.0
        # (p − cost)·q0·(1 + e − e·p/p0) = −(q0·e/p0)·p² + q0·(1 + e + e·cost/p0)·p + const
        a, b = -q0 * e / p0, q0 * (1 + e + e * cost / p0)
        s = scale[k]
        quad.append(a * s * s)
        lin.append(b * s)
        low, high = 0.01, float("inf")
        if use_max_change:
            low, high = p0 * (1 - settings.max_change_pct), p0 * (1 + settings.max_change_pct)
        if use_cost_floor:
            low = max(low, c * (1 + settings.min_markup_pct))
            low = min(low, high)
        lows.append(low / s)
        highs.append(high / s)
    relaxed: list[str] = []
    y = _solve_chain(quad, lin, lows, highs, ordered=use_hierarchy)
    if y is None:  # today's inversions cannot be repaired within the max change
        relaxed.append("max_change")
        floor = [max(0.01, item.unit_costs[t] * (1 + settings.min_markup_pct)) / scale[k]
                 if use_cost_floor else 0.01 / scale[k] for k, t in enumerate(tiers)]
        y = _solve_chain(quad, lin, floor, [float("inf")] * len(tiers), ordered=use_hierarchy)
        assert y is not None  # lower bounds only: always feasible
    raw = {t: y[k] * scale[k] for k, t in enumerate(tiers)}
    recommended = _round_prices(raw, tiers, ratio if use_hierarchy else None)
    binding = _binding(item, tiers, recommended, settings, use_max_change, use_cost_floor,
                       use_hierarchy, ratio)
    return ItemRecommendation(
        item_id=item.item_id, current={t: item.prices[t] for t in tiers},
        recommended=recommended, elasticities=eps,
        outcome_current=_outcome(item, {t: item.prices[t] for t in tiers}, eps, objective),
        outcome_recommended=_outcome(item, recommended, eps, objective),
        relaxed=relaxed, binding=binding,
    )


def optimize_catalog(catalog: Catalog, items: Sequence[CatalogItem], model: DemandModel, *,
                     policy: PolicyConfig, settings: OptimizerSettings) -> dict[str, Any]:
    """Optimise every item in ``items``; the proposal the policy checker and approval gate see.

    Moves below the minimum change are dropped, unless dropping them would leave the item's
    price list violating the policy (then the item keeps its full recommendation).

    Returns:
        ``{"recommendations": [ItemRecommendation.to_dict()], "changes": {item: {tier: {from,
        to}}}, "proposed_prices": {item: {tier: price}}, "outcome_current",
        "outcome_recommended", "uplift_pct", "items", "objective", "policy_ok"}``;
        ``policy_ok`` re-checks every proposed price list.
    """
    recs = [optimize_item(i, model, policy=policy, settings=settings) for i in items]
    changes: dict[str, dict[str, dict[str, float]]] = {}
    proposed: dict[str, dict[str, float]] = {}
    ok = True
    for rec in recs:
        item = catalog.items[rec.item_id]
        moves = rec.changes(settings.min_change_usd, settings.min_change_pct)
        prices = {**rec.current, **{t: m["to"] for t, m in moves.items()}}
        if not check_all_policies(rec.item_id, prices, segment=item.segment, region=item.region,
                                  config=policy).ok:
            moves, prices = rec.changes(), dict(rec.recommended)
            ok = ok and check_all_policies(rec.item_id, prices, segment=item.segment,
                                           region=item.region, config=policy).ok
        if moves:
            changes[rec.item_id] = moves
            proposed[rec.item_id] = prices
            rec.outcome_recommended = _outcome(item, prices, rec.elasticities, settings.objective)
        else:
            rec.outcome_recommended = rec.outcome_current
    before = sum(r.outcome_current for r in recs)
    after = sum(r.outcome_recommended for r in recs)
    return {
        "recommendations": [r.to_dict() for r in recs],
        "changes": changes,
        "proposed_prices": proposed,
        "items": len(recs),
        "objective": settings.objective,
        "outcome_current": round(before, 4),
        "outcome_recommended": round(after, 4),
        "uplift_pct": round(100 * (after - before) / before, 2) if before > 0 else 0.0,
        "policy_ok": ok,
    }


def _solve_chain(quad: list[float], lin: list[float], lows: list[float], highs: list[float], *,
                 ordered: bool) -> list[float] | None:
    """Maximise Σ quad·y² + lin·y with y non-increasing (when ``ordered``) inside the bounds."""
    n = len(quad)
    if not ordered:
        return [_clip(-lin[k] / (2 * quad[k]), lows[k], highs[k]) for k in range(n)]
    best: tuple[float, list[float]] | None = None
    for cuts in itertools.product((False, True), repeat=max(n - 1, 0)):
        blocks: list[list[int]] = [[0]]
        for k, cut in enumerate(cuts, start=1):
            if cut:
                blocks.append([k])
            else:
                blocks[-1].append(k)
        y = [0.0] * n
        feasible = True
        for block in blocks:
            lo, hi = max(lows[k] for k in block), min(highs[k] for k in block)
            if lo > hi + 1e-12:
                feasible = False
                break
            vertex = -sum(lin[k] for k in block) / (2 * sum(quad[k] for k in block))
            value = _clip(vertex, lo, hi)
            for k in block:
                y[k] = value
        if not feasible or any(y[k + 1] > y[k] + 1e-9 for k in range(n - 1)):
            continue
        score = sum(quad[k] * y[k] ** 2 + lin[k] * y[k] for k in range(n))
        if best is None or score > best[0] + 1e-12:
            best = (score, y)
    return None if best is None else best[1]


def _round_prices(raw: dict[str, float], tiers: list[str], ratio: float | None) -> dict[str, float]:
    """Cents, top-down, keeping each tier at or below ``ratio ×`` the rounded tier above."""
    out: dict[str, float] = {}
    previous: float | None = None
    for tier in tiers:
        price = round(raw[tier], 2)
        if previous is not None and ratio is not None:
            price = min(price, floor_cents(previous * ratio), floor_cents(previous - 0.01))
        out[tier] = max(price, 0.01)
        previous = out[tier]
    return out


def _outcome(item: CatalogItem, prices: dict[str, float], eps: dict[str, float],
             objective: Objective) -> float:
    model = DemandModel(elasticities={(t, item.segment): e for t, e in eps.items()})
    return item_outcome(item, prices, model, objective=objective)


def _binding(item: CatalogItem, tiers: list[str], prices: dict[str, float],
             settings: OptimizerSettings, use_max_change: bool, use_cost_floor: bool,
             use_hierarchy: bool, ratio: float) -> list[str]:
    found: set[str] = set()
    for k, tier in enumerate(tiers):
        p, p0 = prices[tier], item.prices[tier]
        if use_max_change and abs(abs(p - p0) - settings.max_change_pct * p0) <= 0.011:
            found.add("max_change")
        if use_cost_floor and abs(p - item.unit_costs[tier] * (1 + settings.min_markup_pct)) <= 0.011:
            found.add("cost_floor")
        if use_hierarchy and k and abs(p - prices[tiers[k - 1]] * ratio) <= 0.011:
            found.add("hierarchy")
    return sorted(found)


def _clip(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))
