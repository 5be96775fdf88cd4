"""Optional PDF rendering of the tailored resume's Markdown, with ``reportlab`` (BSD).

``reportlab`` is a runtime dependency of Overseer; the finalization agent renders a PDF
only when the ``render_pdf`` option is on, and says why not if the library is missing.
The PDF travels base64-encoded in the result (one or two pages, a few kilobytes).
"""

from __future__ import annotations

import base64
import html
import io
import re


def pdf_available() -> bool:
    """True when ``reportlab`` can be imported."""
    try:
        import reportlab  # noqa: F401
    except ImportError:
        return False
    return True


def render_pdf(markdown: str, *, title: str = "Resume") -> bytes:
    """A simple A4 PDF of the resume Markdown (headings, bullets, paragraphs).

    Raises:
        ImportError: ``reportlab`` is not installed.
    """
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Flowable, Paragraph, SimpleDocTemplate, Spacer

    styles = getSampleStyleSheet()
    buffer = io.BytesIO()
    doc = SimpleDocTemplate(buffer, pagesize=A4, title=title, author="", subject="",
                            creator="overseer resume_tailoring", invariant=1)
    story: list[Flowable] = []
    for line in markdown.splitlines():
        text = _inline(line.lstrip("#- ").strip())
        if not line.strip():
            story.append(Spacer(1, 4))
        elif line.startswith("# "):
            story.append(Paragraph(text, styles["Title"]))
        elif line.startswith("## "):
            story.append(Paragraph(text, styles["Heading2"]))
        elif line.startswith("### "):
            story.append(Paragraph(text, styles["Heading4"]))
        elif line.startswith("- "):
            story.append(Paragraph(text, styles["BodyText"], bulletText="•"))
        else:
            story.append(Paragraph(text, styles["BodyText"]))
    doc.build(story)
    return buffer.getvalue()


def render_pdf_base64(markdown: str, *, title: str = "Resume") -> str:
    """:func:`render_pdf`, base64-encoded for a JSON result."""
    return base64.b64encode(render_pdf(markdown, title=title)).decode("ascii")


def _inline(text: str) -> str:
    """Markdown ``**bold**`` / ``*italic*`` to reportlab's mini-HTML; everything else escaped."""
    escaped = html.escape(text, quote=False)
    escaped = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", escaped)
    return re.sub(r"\*(.+?)\*", r"<i>\1</i>", escaped)
