"""Demand model: one price elasticity per (tier, segment), fit to the catalog; linear demand per item.

Why this model (seed 003 asks for an ``optimize_price`` service; the issue for "a demand model
with elasticity per tier/segment fit to the catalog"): the catalog holds prices and unit costs
but no volumes, so elasticities are *implied* by margins. If a seller prices a tier optimally,
the inverse-elasticity (Lerner) rule gives ``(p − c) / p = 1 / ε``, i.e. ``ε = p / (p − c)``.
Each item's implied elasticity is computed for every tier with a positive margin; the
(tier, segment) elasticity is their median, clamped to ``[min_elasticity, max_elasticity]``.
Items whose own implied elasticity differs from their segment's are the ones the optimizer
moves: they are priced as if their customers were more (or less) price-sensitive than the
segment's.

Demand for one item and tier is linear through the current point with that elasticity:
``q(p) = q0 · (1 + ε − ε·p/p0)`` (so ``q(p0) = q0`` and the point elasticity at ``p0`` is ε).
Linear rather than constant-elasticity demand keeps both objectives interior: margin is
maximised at ``(p0·(1 + 1/ε) + c) / 2`` and revenue at ``p0·(1 + ε) / (2ε)``.
Cross-tier substitution is not modelled; the hierarchy guardrails keep tiers apart instead.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Literal

from activities.pricing.catalog import Catalog, CatalogItem

Objective = Literal["margin", "revenue"]

MIN_ELASTICITY = 1.2
MAX_ELASTICITY = 6.0


@dataclass(frozen=True)
class DemandModel:
    """Fitted elasticities.

    Attributes:
        elasticities: ``{(tier, segment): ε}`` (ε > 1: elastic demand).
        observations: ``{(tier, segment): n}`` items with a positive margin used in each fit.
        fallback: ε for a (tier, segment) without observations (median of all fits).
    """

    elasticities: dict[tuple[str, str], float]
    observations: dict[tuple[str, str], int] = field(default_factory=dict)
    fallback: float = 2.0

    def elasticity(self, tier: str, segment: str) -> float:
        """The fitted ε for ``(tier, segment)`` (the fallback when never observed)."""
        return self.elasticities.get((tier, segment), self.fallback)

    def as_table(self) -> list[dict[str, object]]:
        """Rows ``{tier, segment, elasticity, n}`` for reports and the API."""
        return [{"tier": t, "segment": s, "elasticity": round(e, 3),
                 "n": self.observations.get((t, s), 0)}
                for (t, s), e in sorted(self.elasticities.items())]


def implied_elasticity(price: float, unit_cost: float) -> float | None:
    """Lerner-implied elasticity ``p / (p − c)``; None when the margin is not positive."""
    if price <= unit_cost:
        return None
    return price / (price - unit_cost)


def fit_demand_model(catalog: Catalog, *, min_elasticity: float = MIN_ELASTICITY,
                     max_elasticity: float = MAX_ELASTICITY) -> DemandModel:
    """Fit one elasticity per (tier, segment) as the median implied elasticity of its items.

    Args:
        catalog: items with prices and unit costs per tier.
        min_elasticity: lower clamp (an implied ε near 1 means a margin near 100 %, which
            linear demand turns into absurd price rises).
        max_elasticity: upper clamp.

    Returns:
        The fitted model; deterministic for a given catalog.
    """
    samples: dict[tuple[str, str], list[float]] = {}
    for item in catalog.items.values():
        for tier in item.tiers(catalog.tiers):
            eps = implied_elasticity(item.prices[tier], item.unit_costs[tier])
            if eps is not None:
                samples.setdefault((tier, item.segment), []).append(eps)
    fits = {key: _clamp(statistics.median(values), min_elasticity, max_elasticity)
            for key, values in samples.items()}
    fallback = (_clamp(statistics.median(fits.values()), min_elasticity, max_elasticity)
                if fits else 2.0)
    return DemandModel(elasticities=fits, observations={k: len(v) for k, v in samples.items()},
                       fallback=fallback)


def demand(price: float, *, p0: float, q0: float, elasticity: float) -> float:
    """Linear demand through ``(p0, q0)`` with point elasticity ``elasticity``; never negative."""
    return max(0.0, q0 * (1 + elasticity - elasticity * price / p0))


def outcome(price: float, *, p0: float, q0: float, unit_cost: float, elasticity: float,
            objective: Objective) -> float:
    """Margin ``(p − c)·q(p)`` or revenue ``p·q(p)`` in USD per period."""
    q = demand(price, p0=p0, q0=q0, elasticity=elasticity)
    return (price - unit_cost) * q if objective == "margin" else price * q


def item_outcome(item: CatalogItem, prices: dict[str, float], model: DemandModel, *,
                 objective: Objective, scale: float = 1.0) -> float:
    """Sum of :func:`outcome` over the item's tiers at ``prices`` (elasticities × ``scale``)."""
    total = 0.0
    for tier, price in prices.items():
        total += outcome(price, p0=item.prices[tier], q0=item.units.get(tier, 1.0),
                         unit_cost=item.unit_costs[tier],
                         elasticity=model.elasticity(tier, item.segment) * scale,
                         objective=objective)
    return total


def _clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))
