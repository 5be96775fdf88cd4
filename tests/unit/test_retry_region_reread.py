"""Issue 28 item 4: the offline retry re-reads only the doubtful fields' regions at 400 dpi.

Real pages of the labelled corpus, real Tesseract, the real ``retry_extraction`` node on a
real Postgres (the page cache and the event log). Which field a page leaves doubtful at
300 dpi is read from the first pass at run time, never written into the test; each test
first checks the situation it is about is there, so a corpus change fails loudly instead of
passing vacuously.
"""

from __future__ import annotations

import io
from typing import Any

import asyncpg
import pytest
from PIL import Image, ImageDraw

from activities.document_intake.extract_labels import label_table, line_labels
from activities.document_intake.node_retry_extraction import retry_extraction
from activities.document_intake.node_run_pipeline import run_pipeline
from activities.document_intake.reread import anchor_lines, reread_regions
from activities.document_intake.schema import load_field_schema
from activities.document_intake.validate import normalise_value
from bench.corpus import LabelledDoc, labelled_set
from overseer.documents import DocumentKind, extract_pages, sniff_kind
from overseer.documents.ocr import pytesseract
from overseer.graph_codec import decode
from tests.helpers import submit_document

pytestmark = pytest.mark.timeout(240)


def _doc(name: str) -> LabelledDoc:
    return next(d for d in labelled_set(40) if d.name == name)


async def _first_pass(db: asyncpg.Pool, data: bytes, filename: str) -> dict[str, Any]:
    """The run's state after ``run_pipeline`` (300 dpi, cached for the retry's anchors)."""
    inp = await submit_document(db, data, filename)
    state: dict[str, Any] = decode(inp.input)
    return {**state, **await run_pipeline(state)}  # type: ignore[arg-type]


def _truth(doc: LabelledDoc, name: str) -> str | None:
    schema = load_field_schema()
    value = doc.truth.get(name)
    return None if value is None else normalise_value(schema.field(name), value)


async def test_a_missing_field_is_read_from_its_region_only(db: asyncpg.Pool) -> None:
    doc = _doc("30_scan_tiff")
    state = await _first_pass(db, doc.data, doc.filename)
    missing = [n for n in state["missing_fields"] if doc.truth.get(n)]
    assert missing, "the 300 dpi pass should leave a stated required field missing"

    out = await retry_extraction(state)  # type: ignore[arg-type]

    retry = out["report"]["retry_ocr"]
    assert retry["mode"] == "region"
    assert retry["dpi"] == 400
    read_px = sum(r["bottom_px"] - r["top_px"] for r in retry["regions"])
    assert read_px < 0.45 * _height_px_at(doc.data, 400)  # a band of lines, not the page
    for name in missing:
        assert out["record"][name] == _truth(doc, name)
        evidence = out["evidence"][name]
        assert evidence["page_number"] == 1
        assert evidence["region"]["fields"] and name in evidence["region"]["fields"]
        assert out["record"][name].split()[-1] in evidence["snippet"]  # the exact line read
    for name, value in state["record"].items():  # present values are never overwritten
        if value is not None:
            assert out["record"][name] == value


async def test_a_weak_value_read_differently_at_400_dpi_goes_to_a_person(db: asyncpg.Pool) -> None:
    doc = _doc("23_scan_skewed_noisy")
    state = await _first_pass(db, doc.data, doc.filename)
    first = state["record"]["email"]
    assert first is not None and first != _truth(doc, "email"), "300 dpi misreads the e-mail"
    assert state["field_ocr_confidence"]["email"] < 0.8

    out = await retry_extraction(state)  # type: ignore[arg-type]

    check = out["report"]["retry_ocr"]["checks"]["email"]
    assert check["first"] == first
    assert check["reread"] == _truth(doc, "email")  # 400 dpi reads it right ...
    assert check["agrees"] is False
    assert out["record"]["email"] == first  # ... but a present value is never overwritten
    assert "reread_disagrees_email" in out["review_reason_codes"]
    assert out["needs_review"] is True


async def test_a_field_whose_label_was_not_read_falls_back_to_the_page(db: asyncpg.Pool) -> None:
    # A real scan with the grade's line covered (a sticker, a torn corner): the 300 dpi
    # pass finds neither the label nor the value, so there is nothing to place a region on.
    doc = _doc("16_scan_png")
    image = Image.open(io.BytesIO(doc.data)).convert("L")
    _cover_line_of(image, "grade")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", dpi=image.info.get("dpi", (200, 200)))
    state = await _first_pass(db, buffer.getvalue(), "covered.png")
    assert "grade" in state["missing_fields"]

    out = await retry_extraction(state)  # type: ignore[arg-type]

    assert out["report"]["retry_ocr"] == {"mode": "page", "dpi": 400}
    assert out["report"]["retry_ocr_confidence_avg"] is not None  # the page was OCR'd again
    assert out["record"]["grade"] is None
    assert "reread_disagrees_grade" not in out["review_reason_codes"]


def test_regions_are_placed_from_the_300_dpi_text_and_checked_after_ocr() -> None:
    doc = _doc("33_scanned_pdf")
    schema = load_field_schema()
    kind = sniff_kind(doc.data, doc.filename)
    pages = extract_pages(doc.data, kind, dpi=300)
    anchors = anchor_lines(pages, schema, ["school", "city"], {})
    assert set(anchors) == {"school", "city"}
    assert anchors["school"][1] != anchors["city"][1]

    read = reread_regions(doc.data, kind, pages, schema, extract=["school", "city"])

    assert read is not None
    assert read.placed == {"school", "city"}
    assert {name for r in read.regions for name in r.fields} == {"school", "city"}
    text = read.pages[0].text
    assert _normal(doc.truth["city"]) in _normal(text)
    assert _normal(doc.truth["school"]) in _normal(text)
    assert "judged" not in text  # the header line is outside both regions
    essay_words = [w for w in pages[0].text.split() if len(w) > 9][-5:]
    assert not any(w in text for w in essay_words)  # and so is the essay


def test_a_text_document_is_never_reread() -> None:
    doc = _doc("01_plain_text")
    pages = extract_pages(doc.data, DocumentKind.TEXT)
    assert reread_regions(doc.data, DocumentKind.TEXT, pages, load_field_schema(),
                          extract=["grade"]) is None


def _cover_line_of(image: Image.Image, field: str) -> None:
    """Whites out, across the page, the line holding ``field``'s label and the one below."""
    data = pytesseract.image_to_data(image, lang="eng", output_type=pytesseract.Output.DICT)
    table = label_table(load_field_schema())
    rows: dict[tuple[int, int, int], list[int]] = {}
    for i, word in enumerate(data["text"]):
        if str(word).strip():
            key = (data["block_num"][i], data["par_num"][i], data["line_num"][i])
            rows.setdefault(key, []).append(i)
    for ids in rows.values():
        line = " ".join(str(data["text"][i]) for i in ids)
        if any(hit.field == field for hit in line_labels(line, table, ocr=True, fuzzy=True)):
            top = min(data["top"][i] for i in ids)
            bottom = max(data["top"][i] + data["height"][i] for i in ids)
            pad = round(0.25 * (bottom - top)) + 4
            ImageDraw.Draw(image).rectangle(
                (0, top - pad, image.width, bottom + (bottom - top) * 3), fill=255)
            return
    raise AssertionError(f"no {field} label on the page")


def _normal(text: str | None) -> str:
    return "".join((text or "").casefold().split())


def _height_px_at(data: bytes, dpi: int) -> float:
    """The page's height in pixels at ``dpi`` (its embedded resolution, else 300 dpi)."""
    image = Image.open(io.BytesIO(data))
    embedded = float(image.info.get("dpi", (300, 300))[1])
    return image.height * dpi / embedded
