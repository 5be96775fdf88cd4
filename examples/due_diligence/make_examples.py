"""Writes the due_diligence example uploads from real agreements (licensedcode-data).

    PYTHONPATH=. .venv/bin/python examples/due_diligence/make_examples.py

* ``crunchbase_data_license.pdf`` — Crunchbase's data licence agreement typeset with a text
  layer (reportlab).
* ``crunchbase_data_license_page1.png`` — its first page rasterised at 200 dpi with no text
  layer (a clean "scan"; the pipeline OCRs it with Tesseract).
* ``crunchbase_data_license.txt`` — the plain text.
"""

from __future__ import annotations

from pathlib import Path

from activities.due_diligence.samples import license_text, rasterise_page, render_pdf

HERE = Path(__file__).resolve().parent
KEY = "crunchbase-data-2019-12-17"


def main() -> None:
    """Writes the three files next to this script."""
    text = license_text(KEY)
    pdf = render_pdf(text, title="Crunchbase Data License Agreement")
    (HERE / "crunchbase_data_license.txt").write_text(text, encoding="utf-8")
    (HERE / "crunchbase_data_license.pdf").write_bytes(pdf)
    (HERE / "crunchbase_data_license_page1.png").write_bytes(rasterise_page(pdf, 1, dpi=200))


if __name__ == "__main__":
    main()
