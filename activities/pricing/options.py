"""pricing's options snapshot: policy, optimizer, sensitivity and limits from the settings."""

from __future__ import annotations

from typing import Any

from overseer.catalogue import approval_ladder_options
from overseer.settings import Settings


def pricing_options(settings: Settings) -> dict[str, Any]:
    """The options snapshot a pricing run starts with (policy, optimizer, sensitivity, limits)."""
    return {
        "policy": {"min_gap_pct": settings.pricing_min_gap_pct,
                   "segment_overrides": dict(settings.pricing_segment_gaps),
                   "region_overrides": dict(settings.pricing_region_gaps)},
        "optimizer": {"objective": settings.pricing_objective,
                      "max_change_pct": settings.pricing_max_change_pct},
        "sensitivity": {"width": settings.pricing_sensitivity_width, "points": 9},
        "max_iterations": settings.pricing_max_iterations,
        "approval_sla_seconds": settings.approval_sla_seconds,
        "approval": approval_ladder_options(settings),
    }
