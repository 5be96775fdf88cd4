"""A cron's schedule fields and its ticks' ids (issue 26): checked before Temporal sees them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from overseer.crons import check_schedule, tick_ids
from overseer.errors import InvalidRequestError


def test_schedule_fields_are_checked_and_normalised():
    fields = check_schedule({"schedule": " 0 9 * * 1 ", "timezone": "Europe/Paris",
                             "end_time": "2027-01-01T00:00:00", "enabled": False,
                             "on_run_completed": "keep"}, creating=True)
    assert fields == {"schedule": "0 9 * * 1", "timezone": "Europe/Paris",
                      "end_time": datetime(2027, 1, 1, tzinfo=UTC), "enabled": False,
                      "on_run_completed": "keep"}
    assert check_schedule({"enabled": True}, creating=False) == {"enabled": True}
    assert check_schedule({"end_time": None}, creating=False) == {"end_time": None}


@pytest.mark.parametrize(("body", "field"), [
    ({}, "schedule"),
    ({"schedule": "  "}, "schedule"),
    ({"schedule": "0 9 * * *", "timezone": "Nowhere/Special"}, "timezone"),
    ({"schedule": "0 9 * * *", "end_time": "next tuesday"}, "end_time"),
    ({"schedule": "0 9 * * *", "enabled": "yes"}, "enabled"),
    ({"schedule": "0 9 * * *", "on_run_completed": "archive"}, "on_run_completed"),
])
def test_a_malformed_field_is_named(body: dict[str, object], field: str):
    with pytest.raises(InvalidRequestError) as refused:
        check_schedule(body, creating=True)
    assert refused.value.details["field"] == field


def test_a_ticks_ids_are_stable_for_the_tick_and_differ_between_ticks():
    cron = "5b0c8a4e-3f2a-4c1e-9d7b-0a1b2c3d4e5f"
    first = tick_ids(cron, "cron-x-2026-11-26T09:00:00Z")
    assert first == tick_ids(cron, "cron-x-2026-11-26T09:00:00Z")  # a retried activity
    again = tick_ids(cron, "cron-x-2026-12-03T09:00:00Z")
    assert first[0] != again[0] and first[1] != again[1] and first[0] != first[1]
