"""Images (PNG, JPEG, TIFF; multi-frame): opening under limits, frames, embedded dpi."""

from __future__ import annotations

import io
import math
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial

from PIL import Image, ImageOps

from overseer.documents._common import _check_page_count, _reraise_resource_errors, _select_pages, _unreadable
from overseer.documents.model import DocumentLimits, PageText
from overseer.documents.ocr import _Job, _ocr_jobs, _to_grayscale, cv2
from overseer.documents.sniff import _IMAGE_FORMATS, _PNG_MAGIC
from overseer.errors import UnsupportedDocumentError


@contextmanager
def _open_image(data: bytes, limits: DocumentLimits) -> Iterator[Image.Image]:
    """Opens an image with Pillow, checking its format, frame count and every frame's size.

    Only headers are read here; pixels are decoded by :func:`_load_frame`.
    """
    width, height = _declared_png_size(data)
    if width * height == 0:
        _unreadable("The image has no pixels.", "image_empty")
    try:
        image = Image.open(io.BytesIO(data))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        _unreadable("The image has too many pixels.", "image_too_large")
    except Exception as exc:
        _reraise_resource_errors(exc)
        _unreadable("The image is truncated or corrupt.", "corrupt")
    try:
        if image.format not in _IMAGE_FORMATS:
            raise UnsupportedDocumentError(
                "Only PNG, JPEG and TIFF images are supported.",
                details={"format": str(image.format)},
            )
        _check_page_count(_frame_count(image), limits)
        for index in range(_frame_count(image)):
            _seek(image, index)
            width, height = image.size
            if width * height == 0:
                _unreadable("The image has no pixels.", "image_empty")
            if width * height > limits.max_pixels_per_page:
                _unreadable(
                    "The image has too many pixels.",
                    "image_too_large",
                    pixels=width * height,
                    max_pixels=limits.max_pixels_per_page,
                )
        yield image
    finally:
        image.close()


def _declared_png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR (Pillow refuses to identify a 0x0 PNG at all)."""
    if not data.startswith(_PNG_MAGIC) or len(data) < 24 or data[12:16] != b"IHDR":
        return (1, 1)
    width, height = struct.unpack(">II", data[16:24])
    return (int(width), int(height))


def _frame_count(image: Image.Image) -> int:
    return int(getattr(image, "n_frames", 1))


def _seek(image: Image.Image, index: int) -> None:
    try:
        image.seek(index)
    except Exception as exc:
        _reraise_resource_errors(exc)
        _unreadable("An image frame is truncated or corrupt.", "corrupt")


def _load_frame(image: Image.Image, index: int) -> Image.Image:
    """Decodes frame ``index`` into a standalone image, turned upright per its EXIF."""
    _seek(image, index)
    try:
        image.load()
        frame = image.copy()
    except Exception as exc:
        _reraise_resource_errors(exc)
        _unreadable("The image is truncated or corrupt.", "corrupt")
    try:
        return ImageOps.exif_transpose(frame)
    except Exception:  # a broken orientation tag is no reason to refuse the pixels
        return frame


def _extract_image_pages(
    data: bytes, pages: Sequence[int] | None, dpi: int, limits: DocumentLimits
) -> list[PageText]:
    with _open_image(data, limits) as image:
        numbers = _select_pages(pages, _frame_count(image))
        # Decode every wanted frame once up front so bad bytes fail before any OCR starts;
        # the OCR loaders decode again, one frame at a time, to bound memory.
        for number in numbers:
            _load_frame(image, number - 1)
    jobs: list[_Job] = [
        (number, partial(_load_image_page, data, number - 1, dpi, limits)) for number in numbers
    ]
    return _ocr_jobs(jobs, None, limits.ocr_timeout_seconds)


def _load_image_page(data: bytes, index: int, dpi: int, limits: DocumentLimits) -> tuple[Image.Image, int]:
    """Frame ``index`` ready for OCR, with its resolution in dpi.

    Never downsampled. A frame whose embedded resolution is below ``dpi`` is upsampled to
    ``dpi`` (Tesseract reads small glyphs badly), within the pixel limit, and a fax-style
    frame with unequal x/y resolution is made square. A frame without a plausible
    resolution is OCR'd as it is and assumed to be at ``dpi``.
    """
    with _open_image(data, limits) as image:
        frame = _load_frame(image, index)
    resolution = _embedded_dpi(frame)
    if resolution is None:
        return frame, dpi
    x_dpi, y_dpi = resolution
    target = max(dpi, x_dpi, y_dpi)
    fx, fy = target / x_dpi, target / y_dpi
    width, height = frame.size
    budget = limits.max_pixels_per_page / (width * fx * height * fy)
    if budget < 1.0:
        fx, fy = fx * math.sqrt(budget), fy * math.sqrt(budget)
    if max(abs(fx - 1.0), abs(fy - 1.0)) < 0.05 or min(fx, fy) < 1.0:
        return frame, x_dpi
    resized = cv2.resize(_to_grayscale(frame), None, fx=fx, fy=fy, interpolation=cv2.INTER_CUBIC)
    return Image.fromarray(resized), round(x_dpi * fx)


def _embedded_dpi(image: Image.Image) -> tuple[int, int] | None:
    """The (x, y) resolution an image declares, when plausible for a scanned page.

    Cameras and screenshots often declare 72 or 96 dpi whatever they show; a resolution is
    trusted only if it makes the image at most 17 in (tabloid) on its longer side.
    """
    value = image.info.get("dpi")
    try:
        x_dpi, y_dpi = (round(float(value[0])), round(float(value[1]))) if value else (0, 0)
    except (TypeError, ValueError, IndexError):
        return None
    if not (50 <= x_dpi <= 2400 and 50 <= y_dpi <= 2400):
        return None
    width, height = image.size
    if max(width / x_dpi, height / y_dpi) > 17:
        return None
    return x_dpi, y_dpi
