"""Sniffing an upload's kind from its bytes (magic first), and plain-text uploads."""

from __future__ import annotations

import os
import re

from overseer.documents._common import _check_page_count, _unreadable
from overseer.documents.model import DocumentKind, DocumentLimits
from overseer.errors import UnsupportedDocumentError


def sniff_kind(data: bytes, filename: str | None = None, content_type: str | None = None) -> DocumentKind:
    """Decides what an upload is from its bytes; the declared type only ever refuses.

    Magic bytes are checked first (``%PDF-``, PNG, JPEG, TIFF ``II*``/``MM*``) and win over
    any declared type. Otherwise the bytes are text if they decode as UTF-8 (BOM optional)
    or as UTF-16 with a BOM and look like text (no NULs, at most 5 % control characters);
    failing that, Windows-1252 or Latin-1 under the same test.

    Args:
        data: the raw upload.
        filename: the client's file name, if any; an extension naming a binary format
            (``.pdf``, ``.png``, ``.jpg``, ``.tif``, ...) whose magic bytes are missing is refused.
        content_type: the declared media type, if any; ``image/*`` or ``application/pdf``
            whose magic bytes are missing is refused.

    Returns:
        The document kind.

    Raises:
        UnreadableDocumentError: zero-byte input (reason ``empty``). Permanent.
        UnsupportedDocumentError: any other binary (ZIP, GIF, ...), or bytes that do not
            match the declared binary type. Permanent.
    """
    if not data:
        _unreadable("The document is empty.", "empty")
    magic_kind = _kind_from_magic(data)
    if magic_kind is not None:
        return magic_kind
    declared = _declared_binary_type(filename, content_type)
    if declared is not None:
        raise UnsupportedDocumentError(
            f"The upload is declared as {declared} but its bytes are not one.",
            details={"declared": declared},
        )
    if _decode_text(data) is not None:
        return DocumentKind.TEXT
    raise UnsupportedDocumentError(
        "The upload is not a PDF, a PNG/JPEG/TIFF image or UTF-8/Latin-1 text.",
        details={"detected": _name_binary(data)},
    )



_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_IMAGE_MAGICS = (_PNG_MAGIC, b"\xff\xd8\xff", b"II*\x00", b"MM\x00*")
_IMAGE_FORMATS = frozenset({"PNG", "JPEG", "MPO", "TIFF"})
_BINARY_EXTENSIONS = {
    ".pdf": "application/pdf",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
}
# C0/C1 control characters other than tab, line breaks and form feed, plus U+FFFD.
_NON_TEXT = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd]")
_MIN_PRINTABLE_FRACTION = 0.95
# Common binaries refused by sniff_kind, named in the error details (never their bytes).
_KNOWN_BINARIES = (
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"PK\x03\x04", "zip"),
    (b"\xd0\xcf\x11\xe0", "ole"),
    (b"BM", "bmp"),
    (b"RIFF", "riff"),
    (b"\x1f\x8b", "gzip"),
)


def _kind_from_magic(data: bytes) -> DocumentKind | None:
    if data.startswith(_IMAGE_MAGICS):
        return DocumentKind.IMAGE
    # PDF readers accept junk before the header; so do we, unless that junk is text.
    position = data.find(b"%PDF-", 0, 1024)
    if position == 0 or (position > 0 and _decode_text(data[:position]) is None):
        return DocumentKind.PDF
    return None


def _declared_binary_type(filename: str | None, content_type: str | None) -> str | None:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media.startswith("image/") or media == "application/pdf":
        return media
    extension = os.path.splitext(filename or "")[1].lower()
    return _BINARY_EXTENSIONS.get(extension)


def _decode_text(data: bytes) -> str | None:
    """Decodes bytes that look like text; ``None`` when they do not."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            return None
        return text if _looks_like_text(text) else None
    if b"\x00" in data:
        return None
    utf8: str | None
    try:
        utf8 = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by truncation at the very end is still text.
        truncated = exc.reason == "unexpected end of data" and exc.start >= len(data) - 3
        utf8 = data[: exc.start].decode("utf-8-sig") if truncated else None
    if utf8 is not None:
        return utf8 if _looks_like_text(utf8) else None
    # Legacy 8-bit text: Windows-1252 (a superset of Latin-1's printable range) when its
    # undefined bytes are absent, ISO-8859-1 otherwise.
    for encoding in ("cp1252", "latin-1"):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        return text if _looks_like_text(text) else None
    return None


def _looks_like_text(text: str) -> bool:
    if "\x00" in text:
        return False
    if not text.strip():
        return True  # empty (e.g. a lone BOM) is text; inspect_document calls it "empty"
    non_text = len(text) - len(_NON_TEXT.sub("", text))
    return non_text <= (1 - _MIN_PRINTABLE_FRACTION) * len(text)


def _name_binary(data: bytes) -> str:
    if data[4:12] in (b"ftypheic", b"ftypheix", b"ftypmif1"):
        return "heic"
    return next((name for magic, name in _KNOWN_BINARIES if data.startswith(magic)), "unknown")


def _text_pages(data: bytes, limits: DocumentLimits) -> list[str]:
    text = _decode_text(data)
    if text is None:
        _unreadable("The document is not decodable text.", "not_text")
    if not text.strip():
        _unreadable("The document has no text.", "empty")
    pages = text.replace("\r\n", "\n").replace("\r", "\n").split("\f")
    if len(pages) > 1 and not pages[-1].strip():
        pages.pop()
    _check_page_count(len(pages), limits)
    return pages
