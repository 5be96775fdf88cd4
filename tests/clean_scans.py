"""A wider set of clean 300-dpi scans of the entry form, rendered with Pillow, with ground truth.

``bench.corpus`` draws every scan with reportlab's three standard fonts and five templates.
This set varies what a clean office scan of a real form varies: the layout (labels with or
without a trailing colon, values aligned in a column, two columns, each value on the line
below its label, a ruled label/value table), the typeface (the DejaVu and Liberation
families installed with the system, sans, serif, mono, condensed and narrow), the file
(PNG, LZW TIFF, bilevel Group 4 TIFF, a two-page TIFF with the essay on page 2, a
high-quality JPEG), a small tilt (0 or 1-3 degrees either way: the OCR deskews up to 12;
quarter turns are not claimed by the OCR and are left out) and light sensor noise. Values
are varied and realistic: names with hyphens and apostrophes, e-mail addresses with dots,
plus tags, hyphens, underscores, digits and sub-domains, phone numbers written several
ways, and unrelated lines a form carries (a date, an entry fee) that must not be taken for
a field.

Everything is deterministic in ``(seed, index)``; the truth is what was drawn. Nothing is
committed: :func:`clean_scan_set` renders the forms in a few seconds, and
``tests/evaluate_clean_scans.py`` scores them through ``run_pipeline``'s own subgraph.
"""

from __future__ import annotations

import io
import random
import unicodedata
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

__all__ = [
    "FONTS",
    "FORMATS",
    "LAYOUTS",
    "CleanScan",
    "clean_scan",
    "clean_scan_set",
]

DPI = 300
"""Resolution of every scan (dots per inch)."""

_FONT_DIRS = (Path("/usr/share/fonts/truetype/dejavu"), Path("/usr/share/fonts/truetype/liberation"))

FONTS: dict[str, tuple[str, str]] = {
    "dejavu_sans": ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf"),
    "dejavu_serif": ("DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf"),
    "dejavu_sans_condensed": ("DejaVuSansCondensed.ttf", "DejaVuSansCondensed-Bold.ttf"),
    "dejavu_mono": ("DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf"),
    "liberation_sans": ("LiberationSans-Regular.ttf", "LiberationSans-Bold.ttf"),
    "liberation_serif": ("LiberationSerif-Regular.ttf", "LiberationSerif-Bold.ttf"),
    "liberation_mono": ("LiberationMono-Regular.ttf", "LiberationMono-Bold.ttf"),
    "liberation_narrow": ("LiberationSansNarrow-Regular.ttf", "LiberationSansNarrow-Bold.ttf"),
}
"""Typeface key → (value font file, label font file), from the system's font directories."""

Layout = Literal["colon", "no_colon", "aligned", "two_column", "below", "table"]
LAYOUTS: tuple[Layout, ...] = ("colon", "no_colon", "aligned", "two_column", "below", "table")
"""``colon``: "Label: value"; ``no_colon``: "Label  value" (mostly without a colon), the
values starting in one column; ``aligned``: "Label:" and each value typed on a ruled fill
line starting in one column; ``two_column``: two "Label: value" pairs
a row; ``below``: the label, and its value on the line below; ``table``: a ruled
two-column table, label cell and value cell."""

Format = Literal["png", "tiff", "tiff_g4", "tiff_2page", "jpeg"]
FORMATS: tuple[Format, ...] = ("png", "tiff", "tiff_g4", "tiff_2page", "jpeg")
"""``tiff``: LZW greyscale; ``tiff_g4``: bilevel CCITT Group 4 (what office scanners send);
``tiff_2page``: the form on page 1 and the essay on page 2; ``jpeg``: quality 90."""

_CONTENT_TYPES = {"png": ("image/png", "png"), "jpeg": ("image/jpeg", "jpg")}

FIELD_ORDER = (
    "student_name",
    "school",
    "grade",
    "teacher_name",
    "city",
    "father_figure_name",
    "phone",
    "email",
)

_LABELS: dict[str, tuple[str, ...]] = {
    "student_name": ("Student Name", "Name of Student", "Student's Name", "Student Full Name"),
    "school": ("School", "School Name", "Name of School", "School Attending"),
    "grade": ("Grade", "Grade Level", "Current Grade", "Grade/Year"),
    "teacher_name": ("Teacher", "Teacher Name", "Teacher's Name", "Name of Teacher"),
    "city": ("City", "City/Town", "Hometown"),
    "father_figure_name": (
        "Father/Father-Figure Name",
        "Father's Name",
        "Father Figure Name",
        "Name of Father or Father Figure",
    ),
    "phone": ("Phone", "Phone Number", "Telephone", "Telephone Number"),
    "email": ("Email", "E-mail", "Email Address", "E-mail Address"),
}

_FIRST = (
    "Maria",
    "Jamal",
    "Aisha",
    "Daniel",
    "Marcus",
    "Emily",
    "Diego",
    "Priya",
    "Tyrone",
    "Hannah",
    "Kevin",
    "Lucia",
    "Andre",
    "Grace",
    "Omar",
    "Natalie",
    "Keisha",
    "Ethan",
    "Mei",
    "Isaiah",
    "Olivia",
    "Darnell",
    "Mateo",
    "Ava",
    "Malik",
    "Chloe",
    "Samuel",
    "Layla",
    "Xavier",
    "Brianna",
    "Elijah",
    "Jasmine",
    "Noah",
    "Destiny",
    "Carlos",
    "Fatima",
    "Liam",
    "Imani",
    "Gabriel",
    "Zara",
    "Josiah",
    "Aaliyah",
    "Luis",
    "Nadia",
    "Owen",
    "Ruby",
    "Miles",
    "Tessa",
    "Dominic",
    "Leah",
    "René",
    "Zoë",
)
_LAST = (
    "Lopez",
    "Johnson",
    "Patel",
    "Washington",
    "Nguyen",
    "Kowalski",
    "Okafor",
    "Garcia",
    "Brown",
    "Rivera",
    "Kim",
    "Williams",
    "O'Brien",
    "Jackson",
    "Novak",
    "Robinson",
    "Martinez",
    "Singh",
    "Davis",
    "Thompson",
    "Coleman",
    "Schmidt",
    "Reyes",
    "Baker",
    "Carter",
    "Mitchell",
    "Ramirez",
    "Adams",
    "Nelson",
    "Hill",
    "Brooks",
    "Price",
    "Evans",
    "Foster",
    "Hughes",
    "Sanders",
    "Ellis",
    "Jenkins",
    "Perry",
    "Russell",
    "Smith-Jones",
    "McDonald",
    "Alvarez",
    "Bennett",
    "Castillo",
    "Dubois",
)
_MALE = (
    "Carlos",
    "James",
    "Anthony",
    "Robert",
    "Michael",
    "Luis",
    "David",
    "Terrence",
    "Raj",
    "Tomasz",
    "Emeka",
    "Hector",
    "William",
    "Curtis",
    "Minh",
    "Paul",
    "Marcus",
    "Andre",
    "Gregory",
    "Dwayne",
    "Victor",
    "Kenneth",
    "Frank",
    "Rashad",
)
_NAMESAKES = (
    "Lincoln",
    "Douglass",
    "Jane Addams",
    "Roosevelt",
    "Kennedy",
    "Ida B. Wells",
    "Washington",
    "Jefferson",
    "Roberto Clemente",
    "Gwendolyn Brooks",
    "Hawthorne",
    "Prairie View",
    "Lakeside",
    "Oak Grove",
    "Riverside",
    "Westfield",
    "Harriet Tubman",
    "Benjamin Banneker",
    "Maple Ridge",
    "Cesar Chavez",
    "Cedar Park",
    "Northside",
)
_SCHOOL_KINDS = {
    "elementary": ("Elementary School", "Elementary", "Academy"),
    "middle": ("Middle School", "Junior High School"),
    "high": ("High School", "Community High School", "College Prep Academy"),
}
_CITIES = (
    "Chicago",
    "Springfield",
    "Peoria",
    "Rockford",
    "Aurora",
    "Joliet",
    "Naperville",
    "Evanston",
    "Champaign",
    "Decatur",
    "Elgin",
    "Waukegan",
    "Cicero",
    "Bloomington",
    "Carbondale",
    "Oak Park",
    "Skokie",
    "Schaumburg",
    "Berwyn",
    "Palatine",
    "Urbana",
    "Arlington Heights",
    "Des Plaines",
    "Orland Park",
    "East St. Louis",
)
_AREA_CODES = ("312", "773", "630", "847", "217", "309", "815", "708", "618", "224", "331")
_TITLES = ("Ms.", "Mr.", "Mrs.", "Dr.")
_DOMAINS = (
    "gmail.com",
    "yahoo.com",
    "outlook.com",
    "icloud.com",
    "comcast.net",
    "cps.edu",
    "students.d211.org",
    "mail.example.org",
    "example.com",
    "student.naperville203.org",
    "k12.il.us",
    "hotmail.com",
    "aol.com",
    "sbcglobal.net",
)
_HEADERS = (
    "Illinois Fatherhood Initiative \u2014 Essay Contest Entry Form",
    "IFI Essay Contest 2026",
    "What My Father Means to Me \u2014 Official Entry",
    "Illinois Fatherhood Initiative Essay Contest \u2014 Student Entry",
)
_SUBTITLES = (
    "Open to students in grades 3 through 12. Please print clearly.",
    "Complete every line below and attach your essay.",
    "Entries are judged on sincerity and clarity, not length.",
)
_ESSAY_HEADINGS = ("Essay", "My Essay", "Essay: What My Father Means to Me")


@dataclass(frozen=True)
class CleanScan:
    """One rendered clean scan and what was written on it.

    Attributes:
        name: ``"{index:02d}_{layout}_{font}_{fmt}_{tilt}"``, unique in a set.
        data: the file's bytes, as a client would upload them.
        filename: the upload's file name.
        content_type: its MIME type.
        truth: field name → the value drawn on the form (every field is filled in).
        layout: one of :data:`LAYOUTS`.
        font: a key of :data:`FONTS`.
        fmt: one of :data:`FORMATS`.
        tilt_degrees: rotation applied, counter-clockwise (0.0 for a straight scan).
        labels: field name → the label printed for it.
    """

    name: str
    data: bytes
    filename: str
    content_type: str
    truth: dict[str, str]
    layout: str
    font: str
    fmt: str
    tilt_degrees: float
    labels: dict[str, str] = field(default_factory=dict)


def clean_scan_set(n: int, seed: int = 53) -> list[CleanScan]:
    """``n`` clean scans; form ``i`` has layout ``LAYOUTS[i % 6]`` and the font and format cycle too.

    Args:
        n: number of forms; with ``n >= 40`` every layout meets every format and most fonts.
        seed: base seed; the same ``(n, seed)`` always gives the same bytes.

    Returns:
        The scans, in index order.
    """
    return [clean_scan(i, seed) for i in range(n)]


def clean_scan(index: int, seed: int = 53) -> CleanScan:
    """Form ``index`` of :func:`clean_scan_set` (``seed``), rendered alone.

    Args:
        index: 0-based position in the set; fixes layout, font and format.
        seed: base seed of the set.

    Returns:
        The scan with its truth.
    """
    rng = random.Random(f"overseer-clean-scan-{seed}-{index}")
    layout = LAYOUTS[index % len(LAYOUTS)]
    fonts = sorted(FONTS)
    font = fonts[(index // len(LAYOUTS) + index) % len(fonts)]
    fmt = FORMATS[(index // 2) % len(FORMATS)]
    tilt = 0.0 if rng.random() < 0.35 else rng.choice((-1, 1)) * round(rng.uniform(1.0, 3.0), 2)
    truth = _values(rng)
    colon = layout not in ("no_colon", "table") or rng.random() < 0.3
    labels = {name: rng.choice(_LABELS[name]) for name in FIELD_ORDER}
    pages = _draw(rng, layout, font, fmt, truth, labels, colon)
    pages = [_scan(page, tilt, rng) for page in pages]
    name = f"{index:02d}_{layout}_{font}_{fmt}_{'tilt' if tilt else 'straight'}"
    data, content_type, ext = _encode(pages, fmt)
    return CleanScan(
        name=name,
        data=data,
        filename=f"{name}.{ext}",
        content_type=content_type,
        truth=truth,
        layout=layout,
        font=font,
        fmt=fmt,
        tilt_degrees=tilt,
        labels=labels,
    )


# --------------------------------------------------------------------------- values


def _values(rng: random.Random) -> dict[str, str]:
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    grade = rng.randint(3, 12)
    level = "elementary" if grade <= 5 else "middle" if grade <= 8 else "high"
    father_last = last if rng.random() < 0.7 else rng.choice(_LAST)
    area, number = rng.choice(_AREA_CODES), f"555-{rng.randint(100, 199):04d}"
    phone = rng.choice((f"({area}) {number}", f"{area}-{number}", f"{area}.{number.replace('-', '.')}"))
    return {
        "student_name": f"{first} {last}",
        "school": f"{rng.choice(_NAMESAKES)} {rng.choice(_SCHOOL_KINDS[level])}",
        "grade": str(grade),
        "teacher_name": f"{rng.choice(_TITLES)} {rng.choice(_LAST)}",
        "city": rng.choice(_CITIES),
        "father_figure_name": f"{rng.choice(_MALE)} {father_last}",
        "phone": phone,
        "email": _email(rng, first, last, father_last),
    }


def _email(rng: random.Random, first: str, last: str, father_last: str) -> str:
    f, la = _ascii(first).lower(), _ascii(last).lower().replace("'", "")
    digits = str(rng.choice((rng.randint(1, 99), rng.randint(2008, 2018), rng.randint(100, 999))))
    local = rng.choice(
        (
            f"{f}.{la}",
            f"{f}{la}{digits}",
            f"{f}.{la}{digits}",
            f"{f}_{la}",
            f"{f[0]}{la}{digits}",
            f"{f}-{la}",
            f"{f}.{la}+essay",
            f"{f}{la}+ifi",
            f"{la}.family",
            f"{f}.{la}.{digits}",
            f"{_ascii(father_last).lower().replace(chr(39), '')}.dad{digits}",
            f"{f}{digits}",
        )
    )
    return f"{local}@{rng.choice(_DOMAINS)}"


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


# --------------------------------------------------------------------------- drawing

_W, _H = int(8.5 * DPI), 11 * DPI
_MARGIN = DPI


@cache
def _font(file: str, size_px: int) -> ImageFont.FreeTypeFont:
    for folder in _FONT_DIRS:
        path = folder / file
        if path.is_file():
            return ImageFont.truetype(str(path), size_px)
    raise FileNotFoundError(f"font {file} not found in {[str(d) for d in _FONT_DIRS]}")


def _px(points: float) -> int:
    return round(points * DPI / 72)


def _draw(
    rng: random.Random,
    layout: Layout,
    font: str,
    fmt: str,
    truth: dict[str, str],
    labels: dict[str, str],
    colon: bool,
) -> list[Image.Image]:
    value_file, label_file = FONTS[font]
    value_font = _font(value_file, _px(rng.choice((11, 11.5, 12))))
    label_font = _font(label_file, _px(10.5))
    page = Image.new("L", (_W, _H), 255)
    draw = ImageDraw.Draw(page)
    y = _px(50)
    header = rng.choice(_HEADERS)
    head_font = _font(label_file, _px(15))
    draw.text(((_W - draw.textlength(header, font=head_font)) / 2, y), header, font=head_font, fill=0)
    y += _px(22)
    sub = rng.choice(_SUBTITLES)
    sub_font = _font(value_file, _px(9))
    draw.text(((_W - draw.textlength(sub, font=sub_font)) / 2, y), sub, font=sub_font, fill=0)
    y += _px(16)
    draw.line((_MARGIN, y, _W - _MARGIN, y), fill=0, width=4)
    y += _px(18)
    if rng.random() < 0.5:  # a line every real form has and the schema does not list
        stamp = f"Date: {rng.randint(1, 12):02d}/{rng.randint(1, 28):02d}/2026"
        draw.text((_W - _MARGIN - draw.textlength(stamp, font=label_font), y), stamp, font=label_font, fill=0)
        y += _px(24)
    order = list(FIELD_ORDER)
    if rng.random() < 0.4:
        order[1], order[2] = order[2], order[1]
    lab = {k: (f"{v}:" if colon else v) for k, v in labels.items()}
    y = _FIELD_DRAWERS[layout](draw, order, truth, lab, label_font, value_font, y)
    if rng.random() < 0.4:
        fee = "Entry fee paid: $5.00" if rng.random() < 0.5 else "Office use only: received ______"
        draw.text((_MARGIN, y + _px(6)), fee, font=sub_font, fill=0)
        y += _px(22)
    essay_font = _font(value_file, _px(10.5))
    from bench.corpus import make_entry  # real public-domain prose, deterministic in its seed

    essay = make_entry(rng.randrange(1 << 30)).essay.split("\n\n")
    pages = [page]
    if fmt == "tiff_2page":
        page2 = Image.new("L", (_W, _H), 255)
        _essay(ImageDraw.Draw(page2), rng, essay[:3], label_font, essay_font, _MARGIN)
        pages.append(page2)
    else:
        _essay(draw, rng, essay[:1], label_font, essay_font, y + _px(14))
    return pages


def _essay(
    draw: ImageDraw.ImageDraw,
    rng: random.Random,
    paragraphs: list[str],
    heading_font: ImageFont.FreeTypeFont,
    font: ImageFont.FreeTypeFont,
    y: int,
) -> None:
    draw.text((_MARGIN, y), rng.choice(_ESSAY_HEADINGS), font=heading_font, fill=0)
    y += _px(20)
    width = _W - 2 * _MARGIN
    for para in paragraphs:
        line = ""
        for word in para.split():
            trial = f"{line} {word}".strip()
            if draw.textlength(trial, font=font) > width:
                draw.text((_MARGIN, y), line, font=font, fill=0)
                y += _px(14.5)
                line = word
            else:
                line = trial
            if y > _H - _MARGIN:
                return
        draw.text((_MARGIN, y), line, font=font, fill=0)
        y += _px(21)


_ROW = _px(22)


def _rows_colon(
    draw: ImageDraw.ImageDraw,
    order: list[str],
    truth: dict[str, str],
    labels: dict[str, str],
    lf: ImageFont.FreeTypeFont,
    vf: ImageFont.FreeTypeFont,
    y: int,
) -> int:
    for name in order:
        draw.text((_MARGIN, y), labels[name], font=lf, fill=0)
        x = _MARGIN + draw.textlength(labels[name], font=lf) + _px(6)
        draw.text((x, y), truth[name], font=vf, fill=0)
        y += _ROW
    return y


def _rows_ruled(
    draw: ImageDraw.ImageDraw,
    order: list[str],
    truth: dict[str, str],
    labels: dict[str, str],
    lf: ImageFont.FreeTypeFont,
    vf: ImageFont.FreeTypeFont,
    y: int,
) -> int:
    return _rows_aligned(draw, order, truth, labels, lf, vf, y, ruled=True)


def _rows_aligned(
    draw: ImageDraw.ImageDraw,
    order: list[str],
    truth: dict[str, str],
    labels: dict[str, str],
    lf: ImageFont.FreeTypeFont,
    vf: ImageFont.FreeTypeFont,
    y: int,
    *,
    ruled: bool = False,
) -> int:
    column = _MARGIN + max(draw.textlength(labels[n], font=lf) for n in order) + _px(18)
    for name in order:
        draw.text((_MARGIN, y), labels[name], font=lf, fill=0)
        draw.text((column, y), truth[name], font=vf, fill=0)
        if ruled:
            draw.line((column - _px(3), y + _px(14), _W - _MARGIN, y + _px(14)), fill=0, width=3)
        y += _ROW + _px(2)
    return y


def _rows_two_column(
    draw: ImageDraw.ImageDraw,
    order: list[str],
    truth: dict[str, str],
    labels: dict[str, str],
    lf: ImageFont.FreeTypeFont,
    vf: ImageFont.FreeTypeFont,
    y: int,
) -> int:
    right = _MARGIN + (_W - 2 * _MARGIN) // 2 + _px(10)
    for left_name, right_name in zip(order[::2], order[1::2], strict=True):
        for name, x0 in ((left_name, _MARGIN), (right_name, right)):
            draw.text((x0, y), labels[name], font=lf, fill=0)
            x = x0 + draw.textlength(labels[name], font=lf) + _px(6)
            limit = (right - _px(14)) if x0 == _MARGIN else (_W - _MARGIN)
            font = vf
            while draw.textlength(truth[name], font=font) > limit - x and font.size > _px(7):
                font = _font(Path(font.path).name, font.size - 4)
            draw.text((x, y), truth[name], font=font, fill=0)
        y += _ROW + _px(2)
    return y


def _rows_below(
    draw: ImageDraw.ImageDraw,
    order: list[str],
    truth: dict[str, str],
    labels: dict[str, str],
    lf: ImageFont.FreeTypeFont,
    vf: ImageFont.FreeTypeFont,
    y: int,
) -> int:
    for name in order:
        draw.text((_MARGIN, y), labels[name], font=lf, fill=0)
        draw.text((_MARGIN + _px(12), y + _px(15)), truth[name], font=vf, fill=0)
        draw.line((_MARGIN + _px(8), y + _px(31), _px(380), y + _px(31)), fill=0, width=3)
        y += _px(40)
    return y


def _rows_table(
    draw: ImageDraw.ImageDraw,
    order: list[str],
    truth: dict[str, str],
    labels: dict[str, str],
    lf: ImageFont.FreeTypeFont,
    vf: ImageFont.FreeTypeFont,
    y: int,
) -> int:
    split = _MARGIN + max(draw.textlength(labels[n], font=lf) for n in order) + _px(16)
    height = _px(24)
    top = y
    for name in order:
        draw.text((_MARGIN + _px(6), y + _px(5)), labels[name], font=lf, fill=0)
        draw.text((split + _px(8), y + _px(5)), truth[name], font=vf, fill=0)
        draw.line((_MARGIN, y, _W - _MARGIN, y), fill=0, width=3)
        y += height
    draw.line((_MARGIN, y, _W - _MARGIN, y), fill=0, width=3)
    for x in (_MARGIN, split, _W - _MARGIN):
        draw.line((x, top, x, y), fill=0, width=3)
    return y + _px(10)


_FIELD_DRAWERS: dict[str, Any] = {
    "colon": _rows_colon,
    "no_colon": _rows_aligned,
    "aligned": _rows_ruled,
    "two_column": _rows_two_column,
    "below": _rows_below,
    "table": _rows_table,
}


# --------------------------------------------------------------------------- scanning


def _scan(page: Image.Image, tilt: float, rng: random.Random) -> Image.Image:
    """A clean office scan: slight tilt, soft optics, light sensor noise, background cut."""
    if tilt:
        page = page.rotate(tilt, resample=Image.Resampling.BICUBIC, fillcolor=255)
    page = page.filter(ImageFilter.GaussianBlur(rng.uniform(0.4, 0.8)))
    noise = np.random.default_rng(rng.randrange(1 << 32))
    arr = np.asarray(page, dtype=np.float32) * 0.99
    arr += noise.standard_normal(arr.shape, dtype=np.float32) * np.float32(rng.uniform(3.0, 8.0))
    specks = int(arr.size / 200_000)
    arr[noise.integers(0, arr.shape[0], specks), noise.integers(0, arr.shape[1], specks)] = 30
    arr *= 255.0 / 228.0
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "L")


def _encode(pages: list[Image.Image], fmt: str) -> tuple[bytes, str, str]:
    buf = io.BytesIO()
    if fmt == "png":
        pages[0].save(buf, "PNG", dpi=(DPI, DPI), compress_level=3)
    elif fmt == "jpeg":
        pages[0].save(buf, "JPEG", quality=90, dpi=(DPI, DPI))
    elif fmt == "tiff_g4":
        bilevel = [p.point(lambda v: 255 if v >= 160 else 0).convert("1") for p in pages]
        bilevel[0].save(buf, "TIFF", compression="group4", dpi=(DPI, DPI))
    else:
        pages[0].save(
            buf, "TIFF", compression="tiff_lzw", dpi=(DPI, DPI), save_all=True, append_images=pages[1:]
        )
    content_type, ext = _CONTENT_TYPES.get(fmt, ("image/tiff", "tiff"))
    return buf.getvalue(), content_type, ext
