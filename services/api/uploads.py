"""Reading uploads for the API's routes and the pipelines' own routes (bounded, checked)."""

from __future__ import annotations

import json
from typing import Any

from overseer.errors import InvalidRequestError, PayloadTooLargeError, UnreadableDocumentError

_CHUNK_BYTES = 1024 * 1024


async def read_bounded(file: Any, max_bytes: int) -> bytes:
    """Read an upload in chunks, refusing it as soon as it passes ``max_bytes``.

    Raises:
        PayloadTooLargeError: over ``max_bytes`` (413).
        UnreadableDocumentError: an empty file (422).
    """
    chunks: list[bytes] = []
    total = 0
    while chunk := await file.read(_CHUNK_BYTES):
        total += len(chunk)
        if total > max_bytes:
            raise PayloadTooLargeError(f"upload larger than {max_bytes} bytes",
                                       details={"max_upload_bytes": max_bytes})
        chunks.append(chunk)
    data = b"".join(chunks)
    if not data:
        raise UnreadableDocumentError("the uploaded file is empty", details={"reason": "empty"})
    return data


def parse_metadata(raw: str | None) -> dict[str, Any]:
    """The ``metadata`` form field as a dict (``{}`` when absent).

    Raises:
        InvalidRequestError: not JSON, or not a JSON object.
    """
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise InvalidRequestError("metadata is not valid JSON") from None
    if not isinstance(value, dict):
        raise InvalidRequestError("metadata must be a JSON object")
    return value
