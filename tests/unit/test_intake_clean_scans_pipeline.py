"""Clean scans of the wider set through the real ``run_pipeline`` node.

Real pages rendered by ``tests/clean_scans.py`` (Pillow, 300 dpi), real Tesseract, the real
node on a real Postgres (the page cache and the event log). Each test first checks that the
situation it is about is there (what Tesseract read), so an OCR or renderer change fails
loudly instead of passing vacuously. The whole set's figures are in docs/accuracy.md.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from activities.document_intake.schema import load_field_schema
from activities.document_intake.validate import normalise_value
from overseer.graph_codec import decode
from tests.clean_scans import CleanScan, clean_scan
from tests.helpers import submit_document

pytestmark = pytest.mark.timeout(240)


async def _run_pipeline(db: asyncpg.Pool, scan: CleanScan) -> dict[str, Any]:
    from activities.document_intake.node_run_pipeline import run_pipeline

    inp = await submit_document(db, scan.data, scan.filename)
    state: dict[str, Any] = decode(inp.input)
    return {**state, **await run_pipeline(state)}  # type: ignore[arg-type]


def _truth(scan: CleanScan) -> dict[str, str]:
    schema = load_field_schema()
    return {name: normalise_value(schema.field(name), value) for name, value in scan.truth.items()}


async def test_a_clean_tiff_with_values_below_labels_and_digits_after_a_surname_completes(
    db: asyncpg.Pool,
) -> None:
    # Form 22 of seed 53: each value under its label, a tilted TIFF, the e-mail
    # "emily.alvarez2009@…" (a "z" before digits). Every field read right.
    scan = clean_scan(22, seed=53)
    assert (scan.layout, scan.fmt) == ("below", "tiff")

    state = await _run_pipeline(db, scan)

    assert state["record"] == _truth(scan)
    assert state["field_ocr_confidence"]["email"] < 0.95  # not clean enough for the old rule
    assert "ocr_confusion_email" not in state["review_reason_codes"]
    assert state["confidence"] >= 0.9
    assert state["last_route"] == "complete"


async def test_a_plus_sign_read_as_t_on_a_clean_scan_goes_to_a_person(db: asyncpg.Pool) -> None:
    # Form 33 of seed 53: two columns, "josiahgarcia+ifi@cps.edu" read "josiahgarciatifi@…"
    # with every other field read right and high (the record scored 0.934 and completed).
    scan = clean_scan(33, seed=53)
    assert scan.truth["email"] == "josiahgarcia+ifi@cps.edu"

    state = await _run_pipeline(db, scan)

    truth = _truth(scan)
    assert state["record"]["email"] == "josiahgarciatifi@cps.edu"
    assert {k: v for k, v in state["record"].items() if k != "email"} == {
        k: v for k, v in truth.items() if k != "email"
    }
    assert "ocr_confusion_email" in state["review_reason_codes"]
    assert state["last_route"] != "complete"
