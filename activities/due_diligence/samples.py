"""Real agreements for tests, examples and the evaluation: ScanCode's licence texts.

The ``licensedcode-data`` package ships ScanCode's licence database: one
``<key>.LICENSE`` file per licence, YAML front matter (``category``, ``owner``, …)
between ``---`` lines, then the text. Commercial and proprietary licences are real
end-user and developer agreements (governing law, liability caps, indemnities, …).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

AGREEMENT_CATEGORIES = ("Commercial", "Proprietary Free")


@lru_cache(maxsize=1)
def licenses_dir() -> Path:
    """The ``licensedcode/data/licenses`` folder of the installed ``licensedcode-data``.

    Raises:
        FileNotFoundError: the package is not installed.
    """
    spec = importlib.util.find_spec("licensedcode")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        folder = Path(root) / "data" / "licenses"
        if folder.is_dir():
            return folder
    raise FileNotFoundError("licensedcode-data is not installed (pip install licensedcode-data)")


def read_license(key: str) -> tuple[dict[str, Any], str]:
    """``(metadata, text)`` of one licence by ScanCode key (e.g. ``"amazon-redshift-jdbc"``)."""
    raw = (licenses_dir() / f"{key}.LICENSE").read_text(encoding="utf-8")
    _, front, text = raw.split("---", 2)
    return yaml.safe_load(front) or {}, text.lstrip("\n")


def license_text(key: str) -> str:
    """The agreement text of one licence."""
    return read_license(key)[1]


def agreement_keys() -> list[str]:
    """Keys of every non-deprecated Commercial / Proprietary Free licence, sorted."""
    keys = []
    for path in sorted(licenses_dir().glob("*.LICENSE")):
        meta, _ = read_license(path.stem)
        if meta.get("category") in AGREEMENT_CATEGORIES and not meta.get("is_deprecated"):
            keys.append(path.stem)
    return keys


def render_pdf(text: str, *, title: str | None = None, font_size: float = 10.0) -> bytes:
    """Typesets plain text as a PDF with a text layer (reportlab), one paragraph per block.

    Used for examples and tests; blank lines separate paragraphs, single newlines are
    re-flowed.
    """
    import io
    from xml.sax.saxutils import escape

    from reportlab.lib.pagesizes import LETTER
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer

    styles = getSampleStyleSheet()
    body = styles["BodyText"]
    body.fontSize = font_size
    body.leading = font_size * 1.3
    story: list[Any] = []
    if title:
        story += [Paragraph(escape(title), styles["Title"]), Spacer(1, 6)]
    for block in text.split("\n\n"):
        block = " ".join(block.split())
        if block:
            story.append(Paragraph(escape(block), body))
    buffer = io.BytesIO()
    SimpleDocTemplate(buffer, pagesize=LETTER, title=title or "agreement",
                      leftMargin=54, rightMargin=54, topMargin=54, bottomMargin=54).build(story)
    return buffer.getvalue()


def rasterise_page(pdf: bytes, page: int = 1, *, dpi: int = 300) -> bytes:
    """One PDF page as a grayscale PNG (pypdfium2), i.e. a clean "scan" without a text layer."""
    import io

    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(pdf)
    try:
        image = doc[page - 1].render(scale=dpi / 72, grayscale=True).to_pil()
    finally:
        doc.close()
    out = io.BytesIO()
    image.save(out, format="PNG", dpi=(dpi, dpi))
    return out.getvalue()


_TRAILING_PUNCTUATION = ",.;:)]!?\"'”’"


def typeset_pdf(text: str, *, title: str | None = None, font_size: float = 10.0,
                punctuation_gap: float = 2.0, hyphenate: bool = True,
                running_header: bool = True) -> bytes:
    """Typesets plain text the way word processors' PDFs come out, for extraction tests.

    Unlike :func:`render_pdf` (one text run per line), every word is placed on its own
    (reportlab canvas), which is what PDFium's text layer then has to reassemble:

    * lines are justified (the space between words varies);
    * trailing punctuation (``, . ; : )`` …) is placed ``punctuation_gap`` points after
      its word, so the text layer reads "United States , Washington" — PDFium inserts a
      space for a gap of about 1.5 pt or more;
    * with ``hyphenate``, a long word that does not fit is broken over the line end with
      a hyphen ("Wash-" / "ington");
    * with ``running_header``, every page starts with the title and ends with
      "Page N", which the text layer interleaves with the body.

    Blank lines separate paragraphs; a one-line paragraph of at most ten words is set
    in bold, as a heading. Single newlines are re-flowed.

    Args:
        text: the agreement.
        title: the running header's text ("Agreement" when None).
        font_size: body size in points.
        punctuation_gap: extra space before trailing punctuation, in points (0 = none).
        hyphenate: break long words over line ends.
        running_header: print the header and page number on every page.

    Returns:
        The PDF's bytes (US Letter).
    """
    import io
    from functools import partial

    from reportlab.lib.pagesizes import LETTER
    from reportlab.pdfbase.pdfmetrics import stringWidth
    from reportlab.pdfgen import canvas

    width, height = LETTER
    left, right, top, bottom = 72.0, width - 72.0, height - 72.0, 72.0
    leading = font_size * 1.3
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=LETTER)
    pdf.setTitle(title or "agreement")
    state = {"page": 1, "y": top}

    def measure(word: str, font: str) -> float:
        return stringWidth(word, font, font_size)

    def start_page() -> None:
        if running_header:
            pdf.setFont("Helvetica", font_size - 2)
            pdf.drawString(left, height - 48, title or "Agreement")
            pdf.drawRightString(right, 40, f"Page {state['page']}")
        state["y"] = top

    def new_page() -> None:
        pdf.showPage()
        state["page"] += 1
        start_page()

    def draw_word(x: float, y: float, word: str, font: str) -> None:
        core = word.rstrip(_TRAILING_PUNCTUATION)
        tail = word[len(core):]
        if not core or not tail or punctuation_gap <= 0:
            pdf.drawString(x, y, word)
            return
        pdf.drawString(x, y, core)
        pdf.drawString(x + measure(core, font) + punctuation_gap, y, tail)

    def word_width(word: str, font: str) -> float:
        core = word.rstrip(_TRAILING_PUNCTUATION)
        gap = punctuation_gap if core and core != word else 0.0
        return measure(word, font) + gap

    def set_line(line: list[str], font: str, justify: bool) -> None:
        if state["y"] < bottom:
            new_page()
        pdf.setFont(font, font_size)
        natural = sum(word_width(w, font) for w in line)
        space = measure(" ", font)
        if justify and len(line) > 1:
            space = max(space, (right - left - natural) / (len(line) - 1))
        x = left
        for word in line:
            draw_word(x, state["y"], word, font)
            x += word_width(word, font) + space
        state["y"] -= leading

    start_page()
    for block in text.split("\n\n"):
        tokens = block.split()
        if not tokens:
            continue
        font = "Helvetica-Bold" if len(tokens) <= 10 and len(" ".join(tokens)) < 80 \
            and not block.strip().endswith((".", ";", ",")) else "Helvetica"
        space = measure(" ", font)
        line: list[str] = []
        used = 0.0
        queue = list(tokens)
        while queue:
            word = queue.pop(0)
            need = word_width(word, font) + (space if line else 0.0)
            if used + need <= right - left:
                line.append(word)
                used += need
                continue
            room = right - left - used - (space if line else 0.0)
            head = _hyphen_head(word, room, partial(measure, font=font)) if hyphenate else None
            if head is not None:
                line.append(head + "-")
                queue.insert(0, word[len(head):])
            elif not line:
                line.append(word)
            else:
                queue.insert(0, word)
            set_line(line, font, justify=True)
            line, used = [], 0.0
        if line:
            set_line(line, font, justify=False)
        state["y"] -= leading * 0.5
    pdf.save()
    return buffer.getvalue()


def _hyphen_head(word: str, room: float, measure: Callable[[str], float]) -> str | None:
    """The longest start of ``word`` (3+ letters, leaving 3+) that fits ``room`` with a hyphen.

    Breaks only inside a run of letters, after a vowel followed by a consonant (a rough
    syllable boundary), never in a word of fewer than 7 letters.
    """
    if len(word) < 7 or not word[:3].isalpha():
        return None
    vowels = "aeiouyAEIOUY"
    for cut in range(len(word) - 3, 2, -1):
        head = word[:cut]
        if not (head[-1].isalpha() and word[cut].isalpha()):
            continue
        if head[-1] in vowels and word[cut] not in vowels and measure(head + "-") <= room:
            return head
    return None
