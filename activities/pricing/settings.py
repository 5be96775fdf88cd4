"""pricing's own settings, read from ``OVERSEER_PRICING_*`` environment variables.

The variable names are the ones these settings always had (they lived on
``overseer.settings.Settings`` as ``pricing_*`` before the pipeline became a plug-in), so
nothing a deployment sets changes. Seed 003 (``../shared/seeds/``) gives the defaults.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class PricingSettings(BaseSettings):
    """Catalog source and optimisation policy of the ``pricing`` pipeline.

    Every field maps to ``OVERSEER_PRICING_<FIELD>`` (e.g. ``OVERSEER_PRICING_CATALOG_PATH``).
    """

    model_config = SettingsConfigDict(env_prefix="OVERSEER_PRICING_", extra="ignore")

    catalog_path: Path | None = None
    """Catalog CSV; None uses the shipped sample (seed 003)."""
    catalog_table: str | None = None
    """Read the catalog from this Postgres table instead of a CSV file."""
    catalog_cache_seconds: float = 30.0
    """How long the API reuses a catalog read from Postgres before reading it again."""
    objective: Literal["margin", "revenue"] = "margin"
    max_change_pct: float = 0.15
    min_gap_pct: float = 0.02
    """Default minimum gap between adjacent tiers (0.02 = 2 %)."""
    segment_gaps: dict[str, float] = Field(
        default_factory=lambda: {"premium": 0.05, "budget": 0.01})
    region_gaps: dict[str, float] = Field(default_factory=dict)
    max_iterations: int = 8
    """Bound on orchestrator worker visits per run."""
    sensitivity_width: float = 0.2
    """Elasticity perturbation for the sensitivity band (0.2 = ±20 %)."""


@lru_cache(maxsize=1)
def get_pricing_settings() -> PricingSettings:
    """The process's pricing settings (read once from the environment).

    Raises:
        pydantic.ValidationError: a variable does not parse (e.g. a non-numeric gap).
    """
    return PricingSettings()
