"""docs/runbook.md covers every alert rule: a new alert without its runbook row fails here."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_every_alert_has_a_row_in_the_runbook():
    rules = yaml.safe_load((ROOT / "observability" / "prometheus" / "alerts.yml").read_text())
    alerts = {r["alert"] for group in rules["groups"] for r in group["rules"] if "alert" in r}
    runbook = (ROOT / "docs" / "runbook.md").read_text()
    rows = {line.split("|")[1].strip() for line in runbook.splitlines()
            if line.startswith("| `Overseer")}
    named = {name.strip(" `") for row in rows for name in row.split(",")}
    named = {n.split("`")[0] for n in named}
    assert len(alerts) >= 9
    assert alerts - named == set(), "alerts with no row in docs/runbook.md"
    assert named - alerts == set(), "runbook rows for alerts that no longer exist"
