"""Small helpers the document readers share: page selection, limits, refusals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from PIL import Image

from overseer.documents.model import DocumentLimits
from overseer.errors import UnreadableDocumentError


def _given(image: Image.Image, dpi: int) -> tuple[Image.Image, int]:
    return image, dpi


def _select_pages(pages: Sequence[int] | None, page_count: int) -> list[int]:
    if pages is None:
        return list(range(1, page_count + 1))
    selected = sorted(set(pages))
    outside = [number for number in selected if not 1 <= number <= page_count]
    if outside:
        raise ValueError(f"pages {outside} outside 1..{page_count}")
    return selected


def _check_page_count(page_count: int, limits: DocumentLimits) -> None:
    if page_count > limits.max_pages:
        _unreadable(
            "The document has too many pages.",
            "too_many_pages",
            page_count=page_count,
            max_pages=limits.max_pages,
        )


def _reraise_resource_errors(exc: Exception) -> None:
    """Memory exhaustion is the worker's problem, not the document's: let it propagate."""
    if isinstance(exc, MemoryError):
        raise exc


def _unreadable(message: str, reason: str, **details: Any) -> NoReturn:
    raise UnreadableDocumentError(message, details={"reason": reason, **details})
