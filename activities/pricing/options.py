"""pricing's options snapshot: policy, optimizer, sensitivity and limits from the settings."""

from __future__ import annotations

from typing import Any

from activities.pricing.settings import get_pricing_settings
from overseer.plugin import Settings, approval_ladder_options


def pricing_options(settings: Settings) -> dict[str, Any]:
    """The options snapshot a pricing run starts with (policy, optimizer, sensitivity, limits).

    Policy and optimiser come from :class:`~activities.pricing.settings.PricingSettings`, the
    approval ladder and SLA from the platform ``settings``.
    """
    own = get_pricing_settings()
    return {
        "policy": {"min_gap_pct": own.min_gap_pct,
                   "segment_overrides": dict(own.segment_gaps),
                   "region_overrides": dict(own.region_gaps)},
        "optimizer": {"objective": own.objective, "max_change_pct": own.max_change_pct},
        "sensitivity": {"width": own.sensitivity_width, "points": 9},
        "max_iterations": own.max_iterations,
        "approval_sla_seconds": settings.approval_sla_seconds,
        "approval": approval_ladder_options(settings),
    }
