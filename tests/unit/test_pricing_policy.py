"""Policy rules (seed 003 AC4): hierarchy, segment/region thresholds, seed-shaped fixes."""

from __future__ import annotations

import pytest

from activities.pricing.catalog import load_catalog_file
from activities.pricing.policy import (
    PolicyConfig,
    auto_fix_suggestions,
    check_all_policies,
    check_hierarchy,
    check_items,
    check_tier_thresholds,
    floor_cents,
)


def test_the_seed_example_exactly():
    report = check_all_policies("x", {"new": 100, "repair": 110}, segment="premium")
    assert [v.model_dump(include={"type", "item", "current", "suggest"}) for v in report.violations] == [
        {"type": "hierarchy_inversion", "item": "x", "current": {"new": 100, "repair": 110},
         "suggest": {"repair": 95}}]
    assert report.violations[0].rationale
    assert report.fixed_prices == {"x": {"new": 100, "repair": 95}}


def test_ordered_prices_pass():
    assert check_all_policies("x", {"new": 100, "exchange": 90, "repair": 80, "usm": 70}).ok


def test_equal_prices_are_an_inversion_even_without_a_gap():
    violations = check_hierarchy("x", {"new": 50, "exchange": 50})
    assert [v.type for v in violations] == ["hierarchy_inversion"]
    assert violations[0].suggest == {"exchange": 49.99}


def test_gap_below_threshold_is_flagged_with_a_fix():
    violations = check_tier_thresholds("x", {"new": 100, "exchange": 99}, segment="standard")
    assert [(v.type, v.suggest) for v in violations] == [
        ("tier_gap_below_threshold", {"exchange": 98.0})]
    assert check_hierarchy("x", {"new": 100, "exchange": 99}) == []


def test_segment_and_region_overrides_stricter_wins():
    config = PolicyConfig(min_gap_pct=0.02, segment_overrides={"premium": 0.05, "budget": 0.01},
                          region_overrides={"online": 0.03})
    assert config.gap_for("standard", "campus") == 0.02
    assert config.gap_for("budget", "campus") == 0.01
    assert config.gap_for("budget", "online") == 0.03
    assert config.gap_for("premium", "online") == 0.05
    prices = {"new": 100, "exchange": 98.5}
    assert check_all_policies("x", prices, segment="budget", config=config).ok
    assert not check_all_policies("x", prices, segment="budget", region="online", config=config).ok


def test_fixes_cascade_top_down_and_never_create_new_violations():
    prices = {"new": 100, "exchange": 120, "repair": 110, "usm": 50}
    report = check_all_policies("x", prices, segment="standard")
    assert [(v.type, v.current) for v in report.violations] == [
        ("hierarchy_inversion", {"new": 100, "exchange": 120})]
    by_tier = {s.tier: s for s in report.suggestions}
    assert by_tier["exchange"].suggested == 98.0
    assert by_tier["repair"].reason == "cascade" and by_tier["repair"].suggested == 96.04
    assert "usm" not in by_tier
    assert check_all_policies("x", report.fixed_prices["x"], segment="standard").ok
    assert [s.tier for s in auto_fix_suggestions(report.violations)] == ["exchange"]


def test_custom_tier_order():
    config = PolicyConfig(tiers=["gold", "silver"], min_gap_pct=0.1, segment_overrides={})
    report = check_all_policies("x", {"gold": 10, "silver": 9.5}, config=config)
    assert report.violations[0].suggest == {"silver": 9.0}


def test_every_fixed_catalog_price_list_passes():
    catalog = load_catalog_file()
    report = check_items([{"item_id": i.item_id, "prices": i.prices, "segment": i.segment,
                           "region": i.region} for i in catalog.items.values()])
    assert report.counts() == {"hierarchy_inversion": 30, "tier_gap_below_threshold": 17}
    for item_id, fixed in report.fixed_prices.items():
        item = catalog.items[item_id]
        assert check_all_policies(item_id, fixed, segment=item.segment, region=item.region).ok


@pytest.mark.parametrize(("value", "expected"), [(95.0, 95.0), (95.239, 95.23), (0.999, 0.99)])
def test_floor_cents(value: float, expected: float):
    assert floor_cents(value) == expected
