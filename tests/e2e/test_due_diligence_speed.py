"""Seed 004's speed target end to end: a 10-page real agreement in under 2 minutes (issue 13).

The same input as the bench scenario ``due_diligence_agreement``: gradle-enterprise-sla
(``licensedcode-data``, 45,700 characters) typeset as a 10-page PDF with a text layer,
uploaded through the API to the worker process, timed until the run completes.
"""

from __future__ import annotations

import time

import pytest

from activities.due_diligence.samples import license_text, render_pdf
from tests.e2e.conftest import Stack
from tests.e2e.test_user_graph_api import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_a_ten_page_agreement_completes_in_under_two_minutes(stack: Stack) -> None:
    pytest.importorskip("licensedcode")
    pdf = render_pdf(license_text("gradle-enterprise-sla-2022-11-08"), title="Gradle SLA")
    sub = stack.client("submitter")
    started = time.monotonic()
    res = sub.post("/v1/pipelines/due_diligence/runs",
                   files={"file": ("gradle-sla.pdf", pdf, "application/pdf")})
    assert res.status_code == 202, res.text
    run = wait_for(sub, res.json()["run_id"], {"completed", "failed"}, timeout=120)
    seconds = time.monotonic() - started
    assert run["status"] == "completed", run.get("error")
    assert run["result"]["output"]["ingestion"]["page_count"] == 10
    found = [f for f in run["result"]["output"]["clauses"]["findings"] if f["status"] == "found"]
    assert len(found) >= 5
    assert seconds < 120
    print(f"due_diligence, 10-page agreement end to end: {seconds:.2f} s")  # noqa: T201
