"""The upload paths: a PDF's text layer, and a rasterised page through Tesseract OCR.

One page is OCR'd (a few seconds); the scan must find at least 90 % of the clause types
the text layer of the same page finds.
"""

from __future__ import annotations

import time

import pytest

from activities.due_diligence.clauses import extract_clauses
from activities.due_diligence.ingest import ingest_bytes, ingest_text
from activities.due_diligence.report import render_report

pytest.importorskip("licensedcode")
from activities.due_diligence.samples import license_text, rasterise_page, render_pdf  # noqa: E402


@pytest.fixture(scope="module")
def agreement_pdf() -> bytes:
    """intel-scl typeset small enough (7 pt) to fit one page."""
    return render_pdf(license_text("intel-scl"), title="Intel Software License Agreement",
                      font_size=7.0)


def test_text_layer_pdf_finds_the_clauses(agreement_pdf: bytes) -> None:
    ingestion = ingest_bytes(agreement_pdf, "pdf")
    assert ingestion["text_sources"] == ["text_layer"]
    result = extract_clauses(ingestion)
    assert {"governing_law", "limitation_of_liability", "termination", "warranty_disclaimer",
            "license_restrictions"} <= set(result["found_types"])
    for f in result["findings"]:
        if f["status"] == "found":
            assert ingestion["text"][f["start"]:f["end"]] == f["quote"]


def test_scanned_page_finds_at_least_90_percent_of_the_text_version(agreement_pdf: bytes) -> None:
    if not _has_tesseract():
        pytest.skip("tesseract not installed")
    text_page = ingest_bytes(agreement_pdf, "pdf")["pages"][0]["text"]
    expected = set(extract_clauses(ingest_text(text_page))["found_types"])
    started = time.perf_counter()
    scan = ingest_bytes(rasterise_page(agreement_pdf, 1, dpi=300), "image")
    assert time.perf_counter() - started < 60
    assert scan["text_sources"] == ["ocr"]
    result = extract_clauses(scan)
    got = set(result["found_types"])
    assert len(expected) >= 5
    assert len(got & expected) >= 0.9 * len(expected), (expected - got)
    for f in result["findings"]:
        if f["status"] == "found":
            assert scan["text"][f["start"]:f["end"]] == f["quote"]
    assert "## Clauses" in render_report({"ingestion": scan, "clauses": result})


def _has_tesseract() -> bool:
    import shutil

    return shutil.which("tesseract") is not None
