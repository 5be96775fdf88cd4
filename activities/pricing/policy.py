"""Pricing policy rules (seed 003 AC4, Task 2): pure functions, no I/O.

* **Hierarchy** — tiers are ordered New > Exchange > Repair > USM (configurable order); a
  lower tier priced at or above the tier above it is a ``hierarchy_inversion``.
* **Segment/region thresholds** — a lower tier must sit at least ``min_gap_pct`` below the tier
  above it, or it is ``tier_gap_below_threshold``. The default gap applies unless the item's
  segment or region has an override; when both have one, the stricter (larger) applies.
* **Fixes** — every violation carries a machine-readable fix in the seed's shape
  (``{"type", "item", "current", "suggest"}``, seed 003 "Policy Examples") plus a rationale.
  Fixes keep the higher tier and lower the lower one to ``higher × (1 − gap)``, rounded
  down to the cent, walking the tiers top-down so that a fix never creates a new violation
  (a tier that only moves because the tier above it moved gets a ``cascade`` suggestion).

Only adjacent tiers the item is sold in are compared: ordering is transitive, so when every
adjacent pair is ordered, every pair is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from activities.pricing.catalog import DEFAULT_TIERS, TIER_LABELS

ViolationType = Literal["hierarchy_inversion", "tier_gap_below_threshold"]


class PolicyConfig(BaseModel):
    """Thresholds for the tier-gap rule; all percentages are fractions (0.03 = 3 %).

    Attributes:
        tiers: tier order, highest first.
        min_gap_pct: default minimum gap between adjacent tiers.
        segment_overrides: ``{segment: min_gap_pct}``.
        region_overrides: ``{region: min_gap_pct}``.
    """

    tiers: list[str] = Field(default_factory=lambda: list(DEFAULT_TIERS))
    min_gap_pct: float = Field(default=0.02, ge=0, lt=0.9)
    segment_overrides: dict[str, float] = Field(
        default_factory=lambda: {"premium": 0.05, "budget": 0.01})
    region_overrides: dict[str, float] = Field(default_factory=dict)

    def gap_for(self, segment: str | None, region: str | None) -> float:
        """The minimum gap for an item in ``segment`` and ``region``."""
        overrides = [v for v in (self.segment_overrides.get(segment or ""),
                                 self.region_overrides.get(region or "")) if v is not None]
        return max(overrides) if overrides else self.min_gap_pct


class Violation(BaseModel):
    """One broken rule, in the seed's shape plus a rationale.

    ``current`` holds both tiers' prices; ``suggest`` the fixed price of the lower tier.
    """

    type: ViolationType
    item: str
    current: dict[str, float]
    suggest: dict[str, float]
    rationale: str
    threshold_pct: float | None = None


class Suggestion(BaseModel):
    """A machine-readable fix: set ``tier`` of ``item`` from ``current`` to ``suggested``."""

    item: str
    tier: str
    current: float
    suggested: float
    reason: Literal["hierarchy_inversion", "tier_gap_below_threshold", "cascade"]
    rationale: str


class PolicyReport(BaseModel):
    """Everything one check produced for one or more items."""

    violations: list[Violation] = Field(default_factory=list)
    suggestions: list[Suggestion] = Field(default_factory=list)
    fixed_prices: dict[str, dict[str, float]] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No violations."""
        return not self.violations

    def counts(self) -> dict[str, int]:
        """Violations by type."""
        out: dict[str, int] = {}
        for v in self.violations:
            out[v.type] = out.get(v.type, 0) + 1
        return out

    def extend(self, other: PolicyReport) -> None:
        """Merge another item's report into this one."""
        self.violations.extend(other.violations)
        self.suggestions.extend(other.suggestions)
        self.fixed_prices.update(other.fixed_prices)


def check_hierarchy(item: str, prices: Mapping[str, float],
                    tiers: Sequence[str] = DEFAULT_TIERS) -> list[Violation]:
    """Inversions between adjacent tiers (lower tier priced at or above the higher one).

    Args:
        item: item id, copied into each violation.
        prices: tier → price; tiers the item is not sold in are skipped.
        tiers: order, highest first.

    Returns:
        ``hierarchy_inversion`` violations with fixes at a zero gap (one cent below).
    """
    return [v for v in check_all_policies(item, prices, config=PolicyConfig(
        tiers=list(tiers), min_gap_pct=0.0, segment_overrides={}, region_overrides={}
    )).violations if v.type == "hierarchy_inversion"]


def check_tier_thresholds(item: str, prices: Mapping[str, float], *, segment: str | None = None,
                          region: str | None = None,
                          config: PolicyConfig | None = None) -> list[Violation]:
    """Ordered adjacent tiers closer than the segment/region minimum gap.

    Returns:
        ``tier_gap_below_threshold`` violations (inversions are :func:`check_hierarchy`'s).
    """
    report = check_all_policies(item, prices, segment=segment, region=region, config=config)
    return [v for v in report.violations if v.type == "tier_gap_below_threshold"]


def check_all_policies(item: str, prices: Mapping[str, float], *, segment: str | None = None,
                       region: str | None = None,
                       config: PolicyConfig | None = None) -> PolicyReport:
    """Hierarchy and threshold checks for one item, with consistent fixes.

    Args:
        item: item id.
        prices: tier → price in USD (> 0).
        segment: selects a segment threshold override.
        region: selects a region threshold override.
        config: thresholds (defaults: :class:`PolicyConfig`).

    Returns:
        Violations (seed shape), one suggestion per tier that must change, and the item's
        fixed prices (``fixed_prices[item]``, every tier, unchanged ones included).
    """
    config = config or PolicyConfig()
    gap = config.gap_for(segment, region)
    present = [t for t in config.tiers if t in prices]
    fixed = {t: float(prices[t]) for t in present}
    report = PolicyReport()
    for higher, lower in zip(present, present[1:], strict=False):
        original_hi, original_lo = float(prices[higher]), float(prices[lower])
        # Strictly below the tier above, even when the gap is 0 or less than a cent.
        bound = min(floor_cents(fixed[higher] * (1 - gap)), floor_cents(fixed[higher] - 0.01))
        kind: ViolationType | None = None
        if original_lo >= original_hi:
            kind = "hierarchy_inversion"
        elif original_lo > min(floor_cents(original_hi * (1 - gap)),
                               floor_cents(original_hi - 0.01)) + 1e-9:
            kind = "tier_gap_below_threshold"
        if original_lo <= bound + 1e-9:
            continue
        fixed[lower] = max(bound, 0.01)
        hi_label, lo_label = TIER_LABELS.get(higher, higher), TIER_LABELS.get(lower, lower)
        if kind is None:
            report.suggestions.append(Suggestion(
                item=item, tier=lower, current=original_lo, suggested=fixed[lower],
                reason="cascade",
                rationale=f"{lo_label} must stay {gap:.0%} below {hi_label}, whose fix moved it "
                          f"to {fixed[higher]:.2f}",
            ))
            continue
        if kind == "hierarchy_inversion":
            rationale = (f"{lo_label} ({original_lo:.2f}) is priced at or above {hi_label} "
                         f"({original_hi:.2f}); tiers must keep the order "
                         f"{' > '.join(TIER_LABELS.get(t, t) for t in config.tiers)}")
        else:
            rationale = (f"{lo_label} ({original_lo:.2f}) is only "
                         f"{(original_hi - original_lo) / original_hi:.1%} below {hi_label} "
                         f"({original_hi:.2f}); the {segment or 'default'}/{region or 'default'} "
                         f"minimum gap is {gap:.0%}")
        report.violations.append(Violation(
            type=kind, item=item, current={higher: original_hi, lower: original_lo},
            suggest={lower: fixed[lower]}, rationale=rationale, threshold_pct=gap,
        ))
        report.suggestions.append(Suggestion(
            item=item, tier=lower, current=original_lo, suggested=fixed[lower], reason=kind,
            rationale=f"lower {lo_label} to {fixed[lower]:.2f}, {gap:.0%} below {hi_label}",
        ))
    report.fixed_prices[item] = fixed
    return report


def auto_fix_suggestions(violations: Sequence[Violation]) -> list[Suggestion]:
    """The fixes carried by ``violations`` as suggestions (cascades need :func:`check_all_policies`)."""
    return [
        Suggestion(item=v.item, tier=tier, current=v.current[tier], suggested=price,
                   reason=v.type, rationale=v.rationale)
        for v in violations for tier, price in v.suggest.items()
    ]


def check_items(items: Sequence[Mapping[str, Any]], config: PolicyConfig | None = None
                ) -> PolicyReport:
    """Check many ``{item_id, prices, segment?, region?}`` entries; one merged report."""
    report = PolicyReport()
    for entry in items:
        report.extend(check_all_policies(
            str(entry["item_id"]), entry["prices"], segment=entry.get("segment"),
            region=entry.get("region"), config=config))
    return report


def floor_cents(value: float) -> float:
    """Round down to the cent (a fix must never land a hair above its bound)."""
    return math.floor(round(value * 100, 6)) / 100
