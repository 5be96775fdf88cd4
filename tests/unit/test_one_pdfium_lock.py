"""PDFium is not thread-safe across documents: the console's page renderer and the OCR path
share one process-wide lock (issue 11: there were two)."""

from overseer import documents
from services.api.console import pages


def test_the_console_renderer_uses_the_one_pdfium_lock():
    assert pages._PDFIUM_LOCK is documents.PDFIUM_LOCK
