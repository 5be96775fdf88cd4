"""Real agreements for tests, examples and the evaluation: ScanCode's licence texts.

The ``licensedcode-data`` package ships ScanCode's licence database: one
``<key>.LICENSE`` file per licence, YAML front matter (``category``, ``owner``, …)
between ``---`` lines, then the text. Commercial and proprietary licences are real
end-user and developer agreements (governing law, liability caps, indemnities, …).
"""

from __future__ import annotations

import importlib.util
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
