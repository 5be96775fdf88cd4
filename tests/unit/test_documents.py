"""Document loading and OCR (the overseer.documents package) with real Tesseract.

Fixtures are drawn at test time (Pillow text, reportlab PDFs, hand-written PDF and PNG
headers); nothing is mocked. OCR results are module-scoped so each page is read once.
"""

from __future__ import annotations

import io
import json
import random
import shutil
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from overseer.documents import (
    COVERAGE_FULL,
    DocumentInfo,
    DocumentKind,
    DocumentLimits,
    PageText,
    Word,
    extract_pages,
    inspect_document,
    ocr_image,
    ocr_pages_parallel,
    sniff_kind,
)
from overseer.errors import UnreadableDocumentError, UnsupportedDocumentError

pytestmark = pytest.mark.skipif(shutil.which("tesseract") is None, reason="needs tesseract-ocr")

DPI = 300
FORM_LINES = [
    ("Student Name:", "Jane Doe"),
    ("Date of Birth:", "2001-04-05"),
    ("Student ID:", "S-448812"),
    ("Program:", "Computer Science"),
    ("Address:", "12 Harbour Road, Springfield"),
    ("Email:", "jane.doe@example.com"),
    ("Phone:", "555-0142"),
    ("Signature:", "J. Doe"),
]


# --------------------------------------------------------------------------------------
# Fixture builders
# --------------------------------------------------------------------------------------


def _font_path() -> str | None:
    """A TrueType font: DejaVu from fonts-dejavu-core, else Vera shipped inside reportlab."""
    candidates = [Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")]
    candidates += sorted(Path("/usr/share/fonts").glob("**/DejaVuSans.ttf"))
    try:
        import reportlab

        candidates.append(Path(reportlab.__file__).parent / "fonts" / "Vera.ttf")
    except ImportError:
        pass
    return next((str(p) for p in candidates if p.is_file()), None)


FONT = _font_path()


def _font(points: int) -> ImageFont.FreeTypeFont:
    if FONT is None:
        pytest.skip("no TrueType font found")
    return ImageFont.truetype(FONT, round(points * DPI / 72))


def draw_form(lines: list[tuple[str, str]] = FORM_LINES, title: str = "Enrollment Form") -> Image.Image:
    """A 8.5 x 5.5 in form at 300 dpi: 12 pt labels, values on ruled lines."""
    image = Image.new("L", (2550, 1650), 255)
    draw = ImageDraw.Draw(image)
    draw.text((150, 100), title, font=_font(18), fill=0)
    y = 300
    for label, value in lines:
        draw.text((150, y), label, font=_font(12), fill=0)
        draw.text((900, y), value, font=_font(12), fill=0)
        draw.line((880, y + 62, 2300, y + 62), fill=0, width=3)
        y += 150
    image.info["dpi"] = (DPI, DPI)
    return image


def skewed_noisy(image: Image.Image, degrees: float, seed: int = 7) -> Image.Image:
    """Rotated like a crooked scan, with Gaussian grain and 1 % salt-and-pepper."""
    rng = np.random.default_rng(seed)
    rotated = image.rotate(degrees, expand=True, fillcolor=255, resample=Image.Resampling.BICUBIC)
    pixels = np.asarray(rotated, dtype=np.float32) + rng.normal(0, 30, rotated.size[::-1])
    pixels = pixels.clip(0, 255).astype(np.uint8)
    speckle = rng.random(pixels.shape)
    pixels[speckle < 0.01] = 0
    pixels[speckle > 0.99] = 255
    return Image.fromarray(pixels)


def half_unreadable(image: Image.Image, seed: int = 3) -> Image.Image:
    """The form with its lower half replaced by rows of glyph-sized blobs Tesseract skips."""
    rng = random.Random(seed)
    page = image.copy()
    draw = ImageDraw.Draw(page)
    draw.rectangle((0, 880, page.width, page.height), fill=255)
    for y in range(900, 1500, 150):
        x = 150
        while x < 2000:
            width, height = rng.randint(15, 40), rng.randint(20, 50)
            draw.ellipse((x, y + 50 - height, x + width, y + 50), fill=0)
            x += width + rng.randint(5, 30)
    return page


def typed_pdf(pages: int = 2) -> bytes:
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=letter)
    for number in range(1, pages + 1):
        pdf.setFont("Helvetica", 12)
        pdf.drawString(72, 700, f"Student Name: Jane Doe (page {number})")
        pdf.drawString(72, 680, "Date of Birth: 2001-04-05")
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def mixed_pdf(scan: Image.Image) -> bytes:
    """Page 1 typed (text layer), page 2 the scanned form as an image (no text layer)."""
    from reportlab.lib.pagesizes import letter
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=letter)
    pdf.setFont("Helvetica", 12)
    pdf.drawString(72, 700, "Cover letter for the enrollment of Jane Doe, typed.")
    pdf.showPage()
    pdf.drawImage(ImageReader(scan), 0, 792 - 396, width=612, height=396)
    pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def image_bytes(image: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def minimal_pdf(catalog_extra: str = "", kids: str = "", count: int = 0, trailer_extra: str = "") -> bytes:
    """A hand-written PDF with a correct xref: object 1 catalog, 2 pages, 3 optional dict."""
    objects = [
        f"<< /Type /Catalog /Pages 2 0 R {catalog_extra}>>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>",
    ]
    return _write_pdf(objects, trailer_extra)


def encrypted_pdf_handmade() -> bytes:
    """A PDF whose /Encrypt dictionary demands a user password nobody knows."""
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [] /Count 0 >>",
        f"<< /Filter /Standard /V 2 /R 3 /Length 128 /P -3904 /O <{'ab' * 32}> /U <{'cd' * 32}> >>",
    ]
    return _write_pdf(objects, f"/Encrypt 3 0 R /ID [<{'01' * 16}> <{'01' * 16}>]")


def _write_pdf(objects: list[str], trailer_extra: str) -> bytes:
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R {trailer_extra}>>\nstartxref\n{xref}\n%%EOF\n"
    ).encode()
    return bytes(out)


def png_header(width: int, height: int) -> bytes:
    """A PNG declaring ``width x height`` gray pixels with (almost) no pixel data: cheap bombs."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 16))
        + chunk(b"IEND", b"")
    )


def reason(exc_info: pytest.ExceptionInfo[UnreadableDocumentError]) -> str:
    return str(exc_info.value.details["reason"])


# --------------------------------------------------------------------------------------
# Shared fixtures (module scope: every page is OCR'd once)
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def form() -> Image.Image:
    """The clean form page, 300 dpi grayscale."""
    return draw_form()


@pytest.fixture(scope="module")
def clean_ocr(form: Image.Image) -> PageText:
    """The clean form OCR'd once, the baseline the degraded pages are compared against."""
    return ocr_image(form, dpi=DPI)


@pytest.fixture(scope="module")
def scanned_pdf(form: Image.Image) -> bytes:
    """The form saved by Pillow as a one-page PDF: an image, no text layer."""
    return image_bytes(form, "PDF", resolution=DPI)


# --------------------------------------------------------------------------------------
# sniff_kind
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"%PDF-1.7\n...", DocumentKind.PDF),
        (b"\x89PNG\r\n\x1a\n\x00\x00", DocumentKind.IMAGE),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", DocumentKind.IMAGE),
        (b"II*\x00\x08\x00\x00\x00", DocumentKind.IMAGE),
        (b"MM\x00*\x00\x00\x00\x08", DocumentKind.IMAGE),
        (b"Student Name: Jane Doe\n", DocumentKind.TEXT),
        ("\ufeffNom : Zoë Ørsted\n".encode(), DocumentKind.TEXT),
        ("Name: Jane\r\n".encode("utf-16"), DocumentKind.TEXT),
        ("Straße 5, Café Müller\n".encode("latin-1"), DocumentKind.TEXT),
    ],
)
def test_sniff_kind_recognises_supported_bytes(data: bytes, expected: DocumentKind) -> None:
    assert sniff_kind(data) is expected


def test_sniff_kind_magic_wins_over_declared_type() -> None:
    assert sniff_kind(typed_pdf(1), "scan.png", "image/png") is DocumentKind.PDF


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"GIF89a\x01\x00\x01\x00\x80\x00\x00", id="gif"),
        pytest.param(b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(64), id="zip"),
        pytest.param(random.Random(0).randbytes(4096), id="random-binary"),
        pytest.param(b"text\x00with\x00nuls" * 10, id="nul-bytes"),
    ],
)
def test_sniff_kind_refuses_other_binaries(data: bytes) -> None:
    with pytest.raises(UnsupportedDocumentError):
        sniff_kind(data)


def test_sniff_kind_names_a_refused_binary_without_echoing_it() -> None:
    with pytest.raises(UnsupportedDocumentError) as exc_info:
        sniff_kind(b"GIF89a\x01\x00\x01\x00\x80\x00\x00")
    assert exc_info.value.details == {"detected": "gif"}


def test_sniff_kind_refuses_declared_image_with_wrong_magic() -> None:
    with pytest.raises(UnsupportedDocumentError):
        sniff_kind(b"just some words", "photo.png", "image/png")
    with pytest.raises(UnsupportedDocumentError):
        sniff_kind(b"just some words", content_type="image/heic")


def test_sniff_kind_zero_bytes_is_unreadable() -> None:
    with pytest.raises(UnreadableDocumentError) as exc_info:
        sniff_kind(b"")
    assert reason(exc_info) == "empty"


# --------------------------------------------------------------------------------------
# inspect_document
# --------------------------------------------------------------------------------------


def test_inspect_typed_and_scanned_pdfs(scanned_pdf: bytes) -> None:
    assert inspect_document(typed_pdf(2), DocumentKind.PDF) == DocumentInfo(DocumentKind.PDF, 2, True)
    assert inspect_document(scanned_pdf, DocumentKind.PDF) == DocumentInfo(DocumentKind.PDF, 1, False)


def test_inspect_text_counts_form_feed_pages() -> None:
    info = inspect_document(b"page one\fpage two\f", DocumentKind.TEXT)
    assert info == DocumentInfo(DocumentKind.TEXT, 2, True)


def _encrypted_with_pypdf() -> bytes:
    pypdf = pytest.importorskip("pypdf")
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(typed_pdf(1)))
    writer.encrypt("user-secret", owner_password="owner-secret", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("make", "kind", "expected"),
    [
        pytest.param(lambda: b"", DocumentKind.PDF, "empty", id="empty"),
        pytest.param(lambda: b"\xef\xbb\xbf \r\n\f", DocumentKind.TEXT, "empty", id="blank-text"),
        pytest.param(lambda: typed_pdf(2)[:1000], DocumentKind.PDF, "corrupt", id="truncated-pdf"),
        pytest.param(lambda: b"%PDF-1.4\n" + bytes(200), DocumentKind.PDF, "corrupt", id="garbage-pdf"),
        pytest.param(encrypted_pdf_handmade, DocumentKind.PDF, "encrypted", id="encrypt-dict"),
        pytest.param(_encrypted_with_pypdf, DocumentKind.PDF, "encrypted", id="pypdf-rc4"),
        pytest.param(minimal_pdf, DocumentKind.PDF, "no_pages", id="zero-pages"),
        pytest.param(lambda: png_header(0, 0), DocumentKind.IMAGE, "image_empty", id="png-0x0"),
        pytest.param(
            lambda: png_header(30000, 30000), DocumentKind.IMAGE, "image_too_large", id="png-30000²"
        ),
        pytest.param(lambda: png_header(8000, 8000), DocumentKind.IMAGE, "image_too_large", id="png-64MP"),
        pytest.param(
            lambda: image_bytes(draw_form(), "PNG")[:5000],
            DocumentKind.IMAGE,
            "corrupt",
            id="truncated-png",
        ),
        pytest.param(lambda: b"\x89PNG\r\n\x1a\nnonsense", DocumentKind.IMAGE, "corrupt", id="bad-png"),
        pytest.param(
            lambda: random.Random(1).randbytes(500), DocumentKind.TEXT, "not_text", id="binary-text"
        ),
    ],
)
def test_inspect_refuses_unreadable(make: Callable[[], bytes], kind: DocumentKind, expected: str) -> None:
    data = make()
    with pytest.raises(UnreadableDocumentError) as exc_info:
        inspect_document(data, kind)
    assert reason(exc_info) == expected
    with pytest.raises(UnreadableDocumentError) as exc_info:  # same when the pipeline loads it
        extract_pages(data, kind)
    assert reason(exc_info) == expected


def test_inspect_refuses_too_many_pages() -> None:
    limits = DocumentLimits(max_pages=2)
    for data, kind in [(typed_pdf(3), DocumentKind.PDF), (b"a\fb\fc", DocumentKind.TEXT)]:
        with pytest.raises(UnreadableDocumentError) as exc_info:
            inspect_document(data, kind, limits)
        assert reason(exc_info) == "too_many_pages"


def test_inspect_refuses_gif_passed_as_image() -> None:
    gif = image_bytes(Image.new("L", (10, 10), 255), "GIF")
    with pytest.raises(UnsupportedDocumentError):
        inspect_document(gif, DocumentKind.IMAGE)


# --------------------------------------------------------------------------------------
# extract_pages: exact text
# --------------------------------------------------------------------------------------


def test_typed_pdf_uses_the_text_layer() -> None:
    pages = extract_pages(typed_pdf(2), DocumentKind.PDF)
    assert [p.page_number for p in pages] == [1, 2]
    assert pages[1].text == "Student Name: Jane Doe (page 2)\nDate of Birth: 2001-04-05"
    for page in pages:
        assert page.source == "text_layer"
        assert page.ocr_confidence is None
        assert page.coverage is None
        assert page.words == []


def test_plain_text_splits_on_form_feed() -> None:
    data = b"Name: Jane Doe\r\nID: 1\fPage two\f"
    pages = extract_pages(data, DocumentKind.TEXT)
    assert [(p.page_number, p.text, p.source) for p in pages] == [
        (1, "Name: Jane Doe\nID: 1", "plain_text"),
        (2, "Page two", "plain_text"),
    ]
    assert pages[0].ocr_confidence is None
    assert [p.text for p in extract_pages(data, DocumentKind.TEXT, pages=[2])] == ["Page two"]


def test_latin1_text_is_decoded() -> None:
    data = "Adresse: Straße 5, Café Müller, Ørsted\n".encode("latin-1")
    kind = sniff_kind(data, "form.txt", "text/plain")
    assert extract_pages(data, kind)[0].text == "Adresse: Straße 5, Café Müller, Ørsted\n"


def test_page_numbers_outside_the_document_are_a_caller_error() -> None:
    with pytest.raises(ValueError, match="outside"):
        extract_pages(typed_pdf(2), DocumentKind.PDF, pages=[3])


# --------------------------------------------------------------------------------------
# OCR
# --------------------------------------------------------------------------------------


def test_clean_form_ocr(clean_ocr: PageText) -> None:
    assert clean_ocr.source == "ocr"
    assert "Student Name: Jane Doe" in clean_ocr.text
    assert "2001-04-05" in clean_ocr.text
    assert clean_ocr.ocr_confidence is not None
    assert clean_ocr.ocr_confidence > 0.8
    assert clean_ocr.coverage is not None
    assert clean_ocr.coverage > 0.9
    assert all(0.0 <= w.confidence <= 1.0 and w.text.strip() for w in clean_ocr.words)


def test_scanned_pdf_is_ocrd(scanned_pdf: bytes) -> None:
    [page] = extract_pages(scanned_pdf, DocumentKind.PDF, dpi=DPI)
    assert page.source == "ocr"
    assert page.dpi == DPI
    assert "Student Name" in page.text
    assert "Jane Doe" in page.text
    assert page.ocr_confidence is not None
    assert page.ocr_confidence > 0.6


def test_mixed_pdf_chooses_per_page(form: Image.Image) -> None:
    pages = extract_pages(mixed_pdf(form), DocumentKind.PDF, dpi=DPI)
    assert [p.source for p in pages] == ["text_layer", "ocr"]
    assert "Jane Doe" in pages[1].text


def test_force_ocr_reads_a_text_layer_page_with_tesseract() -> None:
    [page] = extract_pages(typed_pdf(2), DocumentKind.PDF, pages=[1], force_ocr=True)
    assert page.source == "ocr"
    assert "Jane Doe" in page.text
    assert page.ocr_confidence is not None
    assert page.ocr_confidence > 0.6


@pytest.mark.parametrize("degrees", [-8.0, 6.0])
def test_skewed_noisy_scan_is_deskewed(form: Image.Image, degrees: float) -> None:
    data = image_bytes(skewed_noisy(form, degrees), "PNG", dpi=(DPI, DPI))
    [page] = extract_pages(data, sniff_kind(data))
    assert "Student Name" in page.text
    assert "Jane Doe" in page.text
    assert "S-448812" in page.text
    assert page.ocr_confidence is not None
    assert page.ocr_confidence > 0.6


def test_unreadable_half_lowers_coverage(form: Image.Image, clean_ocr: PageText) -> None:
    page = ocr_image(half_unreadable(form), dpi=DPI)
    assert "Jane Doe" in page.text  # the readable half is still read ...
    assert page.coverage is not None
    assert clean_ocr.coverage is not None
    assert page.coverage < clean_ocr.coverage - 0.3  # ... but the dropped half is noticed
    assert page.coverage < COVERAGE_FULL
    assert page.ocr_confidence is not None
    assert clean_ocr.ocr_confidence is not None
    assert page.ocr_confidence < clean_ocr.ocr_confidence - 0.3


def test_blank_page_has_zero_confidence() -> None:
    grain = np.random.default_rng(0).normal(0, 12, (1650, 2550))
    for blank in [
        Image.new("RGB", (2550, 1650), "white"),
        Image.fromarray((250 - abs(grain)).astype(np.uint8)),
    ]:
        page = ocr_image(blank, page_number=4)
        assert (page.text, page.ocr_confidence, page.coverage, page.words) == ("", 0.0, 0.0, [])
        assert page.page_number == 4


def test_multi_frame_tiff_is_one_page_per_frame(form: Image.Image) -> None:
    second = draw_form([("Student Name:", "John Smith"), ("Student ID:", "S-990001")], "Page Two")
    data = image_bytes(form, "TIFF", save_all=True, append_images=[second], dpi=(DPI, DPI))
    assert inspect_document(data, sniff_kind(data)) == DocumentInfo(DocumentKind.IMAGE, 2, False)
    pages = extract_pages(data, DocumentKind.IMAGE)  # two pages: the process pool
    assert [p.page_number for p in pages] == [1, 2]
    assert "Jane Doe" in pages[0].text
    assert "John Smith" in pages[1].text
    assert all(p.source == "ocr" and p.dpi == DPI for p in pages)
    [only] = extract_pages(data, DocumentKind.IMAGE, pages=[2])
    assert only.page_number == 2
    assert "John Smith" in only.text


def test_low_resolution_image_is_upsampled_to_the_requested_dpi(form: Image.Image) -> None:
    fax = form.resize((form.width // 2, form.height // 2), Image.Resampling.LANCZOS)
    data = image_bytes(fax, "PNG", dpi=(150, 150))
    [page] = extract_pages(data, DocumentKind.IMAGE, dpi=300)
    assert page.dpi == 300
    assert "Jane Doe" in page.text


def test_implausible_camera_dpi_is_ignored(form: Image.Image) -> None:
    data = image_bytes(form, "PNG", dpi=(72, 72))  # 2550 px at 72 dpi would be a 35 in page
    [page] = extract_pages(data, DocumentKind.IMAGE, dpi=300)
    assert page.dpi == 300
    assert "Jane Doe" in page.text


def test_ocr_pages_parallel_keeps_order_and_numbers(form: Image.Image) -> None:
    blank = Image.new("L", form.size, 255)
    pages = ocr_pages_parallel([blank, form], dpi=DPI, max_workers=2, page_numbers=[7, 9])
    assert [p.page_number for p in pages] == [7, 9]
    assert pages[0].text == ""
    assert "Jane Doe" in pages[1].text


def test_pixel_limit_lowers_pdf_render_dpi(scanned_pdf: bytes) -> None:
    limits = DocumentLimits(max_pixels_per_page=4_000_000)  # a 8.5x5.5 in page fits at ~290 dpi
    [page] = extract_pages(scanned_pdf, DocumentKind.PDF, dpi=600, force_ocr=True, limits=limits)
    assert page.dpi is not None
    assert 250 <= page.dpi < 300


def test_ocr_timeout_is_unreadable(scanned_pdf: bytes) -> None:
    limits = DocumentLimits(ocr_timeout_seconds=0.01)
    with pytest.raises(UnreadableDocumentError) as exc_info:
        extract_pages(scanned_pdf, DocumentKind.PDF, limits=limits)
    assert reason(exc_info) == "ocr_timeout"


def test_page_text_round_trips_through_json() -> None:
    page = PageText(3, "Jane Doe", "ocr", 0.91, 0.97, [Word("Jane", 0.93), Word("Doe", 0.9)], 300)
    assert PageText.from_dict(json.loads(json.dumps(page.to_dict()))) == page
    exact = PageText(1, "x", "text_layer", None, None, [])
    assert PageText.from_dict(json.loads(json.dumps(exact.to_dict()))) == exact
