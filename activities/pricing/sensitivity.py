"""``sensitivity_analysis`` (seed 003 sensitivity_worker): confidence band, worst/best, robustness.

Elasticities are the least certain input (they are implied by margins, not measured), so
the analysis scales every fitted elasticity by factors on a grid over ``1 ± width``
(default ±20 %, 9 points) and asks two questions:

* **band** — how far would the *recommended* prices move if demand were that much more or
  less price-sensitive (re-optimised under each scaled model)? Reported per tier as
  ``[low, high]`` and as the largest relative spread;
* **outcome** — if the proposal is applied and the true elasticity is the scaled one, how does
  the objective compare with keeping today's prices? ``worst``/``best`` are the lowest and
  highest uplift in %, and ``robustness_score`` (0..1) is the share of scenarios in which the
  proposal does not lose against today's prices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from activities.pricing.catalog import CatalogItem
from activities.pricing.demand import DemandModel, item_outcome
from activities.pricing.optimizer import OptimizerSettings, optimize_item
from activities.pricing.policy import PolicyConfig


def scale_grid(width: float = 0.2, points: int = 9) -> list[float]:
    """``points`` factors evenly spaced over ``[1 − width, 1 + width]`` (1.0 included when odd)."""
    if points < 2:
        return [1.0]
    step = 2 * width / (points - 1)
    return [round(1 - width + k * step, 6) for k in range(points)]


def sensitivity_analysis(items: Sequence[CatalogItem], proposed: dict[str, dict[str, float]],
                         model: DemandModel, *, policy: PolicyConfig,
                         settings: OptimizerSettings, width: float = 0.2,
                         points: int = 9) -> dict[str, Any]:
    """Band, worst/best uplift and robustness of ``proposed`` prices over an elasticity grid.

    Args:
        items: items in scope.
        proposed: ``{item_id: {tier: price}}`` (items absent keep today's prices).
        model: fitted elasticities.
        policy: tier order and gaps, as for the optimizer.
        settings: objective and guardrails, as for the optimizer.
        width: half-width of the grid (0.2 = ±20 %).
        points: grid size.

    Returns:
        ``{"grid", "scenarios": [{scale, uplift_pct}], "worst_pct", "best_pct",
        "robustness_score", "band": {item_id: {tier: [low, high]}}, "max_band_pct",
        "confidence_band_pct": [worst, best]}``.
    """
    grid = scale_grid(width, points)
    scenarios = []
    for scale in grid:
        before = sum(item_outcome(i, i.prices, model, objective=settings.objective, scale=scale)
                     for i in items)
        after = sum(item_outcome(i, proposed.get(i.item_id, i.prices), model,
                                 objective=settings.objective, scale=scale) for i in items)
        uplift = 100 * (after - before) / before if before > 0 else 0.0
        scenarios.append({"scale": scale, "uplift_pct": round(uplift, 3)})
    band: dict[str, dict[str, list[float]]] = {}
    spread = 0.0
    for item in items:
        if item.item_id not in proposed:
            continue
        lows: dict[str, float] = {}
        highs: dict[str, float] = {}
        for scale in grid:
            eps = {t: model.elasticity(t, item.segment) * scale for t in item.prices}
            rec = optimize_item(item, model, policy=policy, settings=settings, elasticities=eps)
            for tier, price in rec.recommended.items():
                lows[tier] = min(lows.get(tier, price), price)
                highs[tier] = max(highs.get(tier, price), price)
        band[item.item_id] = {t: [lows[t], highs[t]] for t in lows}
        for tier in lows:
            spread = max(spread, (highs[tier] - lows[tier]) / item.prices[tier])
    uplifts = [s["uplift_pct"] for s in scenarios]
    robust = sum(1 for u in uplifts if u >= -1e-9) / len(uplifts)
    worst, best = min(uplifts), max(uplifts)
    return {
        "grid": grid,
        "scenarios": scenarios,
        "worst_pct": round(worst, 2),
        "best_pct": round(best, 2),
        "confidence_band_pct": [round(worst, 2), round(best, 2)],
        "robustness_score": round(robust, 2),
        "band": band,
        "max_band_pct": round(100 * spread, 2),
    }


def summarise(result: dict[str, Any], width: float) -> str:
    """One sentence: band, worst/best and robustness."""
    return (f"With elasticities ±{width:.0%}, the proposal's uplift ranges from "
            f"{result['worst_pct']:+.2f}% (worst) to {result['best_pct']:+.2f}% (best); "
            f"robustness {result['robustness_score']:.2f} (share of scenarios that beat today's "
            f"prices); recommended prices move at most {result['max_band_pct']:.1f}%.")
