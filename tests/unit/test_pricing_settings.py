"""pricing reads its own ``OVERSEER_PRICING_*`` settings; the platform's Settings names no pipeline."""

from __future__ import annotations

import pytest

from activities.pricing.options import pricing_options
from activities.pricing.settings import get_pricing_settings
from overseer.settings import Settings


@pytest.fixture
def fresh_pricing_settings():
    get_pricing_settings.cache_clear()
    yield
    get_pricing_settings.cache_clear()


def test_the_existing_variable_names_still_set_pricing_options(monkeypatch,
                                                               fresh_pricing_settings) -> None:
    monkeypatch.setenv("OVERSEER_PRICING_MIN_GAP_PCT", "0.04")
    monkeypatch.setenv("OVERSEER_PRICING_OBJECTIVE", "revenue")
    monkeypatch.setenv("OVERSEER_PRICING_SEGMENT_GAPS", '{"premium": 0.1}')
    options = pricing_options(Settings(environment="test"))
    assert options["policy"]["min_gap_pct"] == 0.04
    assert options["policy"]["segment_overrides"] == {"premium": 0.1}
    assert options["optimizer"]["objective"] == "revenue"
    assert options["approval_sla_seconds"] == Settings(environment="test").approval_sla_seconds


def test_platform_settings_hold_no_pipeline_fields() -> None:
    assert not [name for name in Settings.model_fields if name.startswith("pricing_")]
