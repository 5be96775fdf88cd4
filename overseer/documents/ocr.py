"""Tesseract OCR: preprocessing (denoise, binarise, deskew), reading, coverage; pages in parallel."""

from __future__ import annotations

import importlib.util
import itertools
import math
import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from functools import partial
from typing import Any

import numpy as np
from PIL import Image

from overseer.documents._common import _given, _unreadable
from overseer.documents.model import COVERAGE_FULL, TESSERACT_LANG, PageText, Word


def _lazy_module(name: str) -> Any:
    """``name`` imported on first attribute access (``importlib.util.LazyLoader``).

    OpenCV and pytesseract (which imports pandas) add ~95 MB to a process; a worker that
    never OCRs (text-layer PDFs, plain text, other pipelines) should not pay it in its idle
    RSS.
    """
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


cv2 = _lazy_module("cv2")
pytesseract = _lazy_module("pytesseract")

# Tesseract's LSTM engine spreads one page over every core with OpenMP, and on a busy
# worker that oversubscription makes it several times slower (docs/performance-history.md). We run it
# single-threaded and parallelise pages across processes instead. ``setdefault`` so an
# operator can still override it; the ``tesseract`` subprocesses inherit the environment.
os.environ.setdefault("OMP_THREAD_LIMIT", "1")


def ocr_image(
    image: Image.Image,
    *,
    page_number: int = 1,
    dpi: int = 300,
    timeout_seconds: float = 120.0,
) -> PageText:
    """OCRs one page image with Tesseract and measures how much of the page it really read.

    Preprocessing: flatten to grayscale (transparency over white); median blur 3x3 when
    the page is measurably noisy (grain, salt-and-pepper; at >= 200 dpi only); deskew by
    the angle in [-12, 12] degrees that makes the horizontal ink projection sharpest (text
    lines and form rules line up), rotating back on an enlarged white canvas; Otsu
    binarisation; removal of specks smaller than 0.01 x 0.01 in. Tesseract (``--psm 3``,
    LSTM, ``eng``) then runs on the binarised page and words with confidence -1 or empty
    text are dropped.

    Coverage: Tesseract may report high confidence while silently dropping most of a page,
    so the page's text ink is measured independently: long horizontal and vertical rules
    (form lines, >= 0.4 in) are removed from the ink, the rest is smeared horizontally
    into text-line blobs, and blobs with almost no ink (specks) or taller than 0.75 in
    (photos, logos) are ignored. ``coverage`` is the fraction of the ink in the remaining
    blobs that falls inside the (slightly padded) boxes of recognised words. Gibberish
    words Tesseract does emit count as covering their ink; their low confidence lowers
    the mean instead. A page whose ink is all rules or pictures but where Tesseract found
    words gets coverage 1.0 (nothing to check against).

    Confidence::

        ocr_confidence = mean word confidence, weighted by word length (0..1)
                         * min(1, coverage / COVERAGE_FULL)        # COVERAGE_FULL = 0.8

    A blank page (no ink with real contrast after Otsu) returns text ``""``, coverage 0.0
    and confidence 0.0 without running Tesseract. Word confidences and both ratios are
    rounded to 4 decimals.

    Args:
        image: the page, any Pillow mode; upright up to about +-12 degrees of skew.
        page_number: 1-based page number to record.
        dpi: the image's resolution in dots per inch; scales the preprocessing kernels and
            is passed to Tesseract.
        timeout_seconds: Tesseract wall-clock limit for this page, in seconds.

    Returns:
        The page with ``source="ocr"``, words, coverage and confidence.

    Raises:
        UnreadableDocumentError: Tesseract exceeded ``timeout_seconds`` (reason
            ``ocr_timeout``). Permanent.
        pytesseract.TesseractNotFoundError: no ``tesseract`` binary (retryable setup problem).
    """
    binary = preprocess_page(image, dpi)
    if binary is None:
        return _blank_page(page_number, dpi)
    text_ink = text_ink_mask(binary, dpi)

    data = _run_tesseract(binary, dpi, timeout_seconds)
    words, boxes, text = _collect_words(data)
    coverage = _coverage(text_ink, boxes, dpi, has_words=bool(words))
    weights = [len(w.text) for w in words]
    mean_confidence = (
        sum(w.confidence * n for w, n in zip(words, weights, strict=True)) / sum(weights) if words else 0.0
    )
    confidence = mean_confidence * min(1.0, coverage / COVERAGE_FULL)
    return PageText(page_number, text, "ocr", round(confidence, 4), round(coverage, 4), words, dpi)


def preprocess_page(image: Image.Image, dpi: int) -> np.ndarray[Any, Any] | None:
    """:func:`ocr_image`'s preprocessing of one page: what Tesseract reads.

    Grayscale, median blur when the page is measurably noisy, Otsu binarisation, deskew
    (see :func:`ocr_image`), specks removed.

    Args:
        image: the page, any Pillow mode.
        dpi: its resolution in dots per inch (scales the kernels).

    Returns:
        uint8 (H, W), 0 ink and 255 paper, deskewed; None for a blank page (no ink with real
        contrast).
    """
    gray = _to_grayscale(image)
    if gray.size == 0:
        return None
    gray = _denoise(gray, dpi)
    binary = _binarise(gray, dpi)
    if binary is None:
        return None
    angle = _estimate_skew_degrees(binary == 0)
    if abs(angle) >= 0.2:
        binary = _binarise(_rotate(gray, angle), dpi)
    return binary


def ocr_binary(binary: np.ndarray[Any, Any], dpi: int,
               timeout_seconds: float = 120.0) -> tuple[list[Word], str]:
    """Tesseract on an already preprocessed image (:func:`preprocess_page`, or a crop of one).

    As :func:`ocr_image` runs it (``--psm 3``, LSTM, ``eng``; words with confidence -1 or
    empty text dropped), without the coverage check.

    Args:
        binary: uint8 (H, W), 0 ink and 255 paper.
        dpi: its resolution in dots per inch (passed to Tesseract).
        timeout_seconds: Tesseract wall-clock limit, in seconds.

    Returns:
        ``(words, text)``: the words with their confidences (0..1), and the text by lines.

    Raises:
        UnreadableDocumentError: Tesseract exceeded ``timeout_seconds`` (``ocr_timeout``).
    """
    words, _, text = _collect_words(_run_tesseract(binary, dpi, timeout_seconds))
    return words, text


def ocr_pages_parallel(
    images: Sequence[Image.Image],
    *,
    dpi: int,
    max_workers: int | None = None,
    page_numbers: Sequence[int] | None = None,
    timeout_seconds: float = 120.0,
) -> list[PageText]:
    """OCRs pages with :func:`ocr_image`, one page per process at a time.

    Worker processes are spawned (not forked: the caller may be a threaded Temporal
    worker) with ``OMP_THREAD_LIMIT=1`` and one OpenCV thread, so N workers use N cores.
    One image runs in-process without a pool. At most ``2 * max_workers`` pages are in
    flight; on the first failure the remaining pages are cancelled.

    Args:
        images: page images, any Pillow mode (flattened to grayscale before pickling).
        dpi: their resolution in dots per inch.
        max_workers: processes to use; default the number of usable CPUs, never more than
            there are pages.
        page_numbers: 1-based page numbers to record, same length as ``images``; default
            ``1..len(images)``.
        timeout_seconds: Tesseract wall-clock limit per page, in seconds.

    Returns:
        One :class:`PageText` per image, in input order.

    Raises:
        UnreadableDocumentError: a page hit the OCR time-out (reason ``ocr_timeout``). Permanent.
        ValueError: ``page_numbers`` of the wrong length.
        concurrent.futures.process.BrokenProcessPool: a worker died (e.g. out of memory);
            transient.
    """
    numbers = list(page_numbers) if page_numbers is not None else list(range(1, len(images) + 1))
    if len(numbers) != len(images):
        raise ValueError("page_numbers must have one entry per image")
    jobs: list[_Job] = [
        (number, partial(_given, image, dpi)) for number, image in zip(numbers, images, strict=True)
    ]
    return _ocr_jobs(jobs, max_workers, timeout_seconds)



# (page number, loader returning the page image and its dpi). Loaders run in the parent
# as workers free up, so a 200-page PDF never has more than a few bitmaps alive.
_Job = tuple[int, Callable[[], tuple[Image.Image, int]]]


def _ocr_jobs(jobs: Sequence[_Job], max_workers: int | None, timeout_seconds: float) -> list[PageText]:
    if not jobs:
        return []
    if len(jobs) == 1:
        number, load = jobs[0]
        image, dpi = load()
        return [ocr_image(image, page_number=number, dpi=dpi, timeout_seconds=timeout_seconds)]
    workers = max(1, min(max_workers or _usable_cpus(), len(jobs)))
    results: list[PageText | None] = [None] * len(jobs)
    queue = iter(enumerate(jobs))
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_init_ocr_worker) as pool:
        pending: dict[Future[PageText], int] = {}
        try:
            for position, job in itertools.islice(queue, 2 * workers):
                pending[_submit(pool, job, timeout_seconds)] = position
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    results[pending.pop(future)] = future.result()
                for position, job in itertools.islice(queue, len(done)):
                    pending[_submit(pool, job, timeout_seconds)] = position
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return [page for page in results if page is not None]


def _submit(pool: ProcessPoolExecutor, job: _Job, timeout_seconds: float) -> Future[PageText]:
    number, load = job
    image, dpi = load()
    # Grayscale before pickling: a 300 dpi letter page is 8 MB instead of 25 MB.
    gray = Image.fromarray(_to_grayscale(image))
    return pool.submit(_ocr_in_worker, gray, number, dpi, timeout_seconds)


def _ocr_in_worker(image: Image.Image, number: int, dpi: int, timeout_seconds: float) -> PageText:
    return ocr_image(image, page_number=number, dpi=dpi, timeout_seconds=timeout_seconds)


def _init_ocr_worker() -> None:
    # Each worker owns one core: no OpenMP threads in Tesseract, no OpenCV thread pool.
    os.environ["OMP_THREAD_LIMIT"] = "1"
    cv2.setNumThreads(1)


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1



_NOISE_LEVEL = 4.0  # gray levels; see _denoise
_MIN_INK_CONTRAST = 64  # gray levels between Otsu's two class means; below it, no real ink
_SKEW_SEARCH_DEGREES = 12.0


def _blank_page(page_number: int, dpi: int) -> PageText:
    return PageText(page_number, "", "ocr", 0.0, 0.0, [], dpi)


def _to_grayscale(image: Image.Image) -> np.ndarray[Any, Any]:
    """Flattens any Pillow mode to uint8 grayscale (H, W); transparency becomes white."""
    if image.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        array = np.asarray(image, dtype=np.float32)
        peak = float(array.max()) if array.size else 0.0
        return (array * (255.0 / peak) if peak > 0 else array).clip(0, 255).astype(np.uint8)
    if image.mode == "L":
        return np.asarray(image, dtype=np.uint8)
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, rgba)
    elif image.mode not in ("1", "P", "RGB"):  # CMYK, YCbCr, LAB, ...: via RGB
        image = image.convert("RGB")
    return np.asarray(image.convert("L"), dtype=np.uint8)


def _denoise(gray: np.ndarray[Any, Any], dpi: int) -> np.ndarray[Any, Any]:
    """Median blur 3x3, but only on a noisy page at >= 200 dpi.

    On a clean scan the blur costs accuracy (it erodes i-dots and thin serifs); below
    200 dpi strokes are too thin for it. "Noisy" means the mean absolute change the blur
    makes exceeds :data:`_NOISE_LEVEL` gray levels (clean scans measure 1-2, grainy or
    salt-and-pepper ones 10+).
    """
    if dpi < 200:
        return gray
    smoothed = cv2.medianBlur(gray, 3)
    change = float(cv2.absdiff(gray, smoothed).mean())
    return smoothed if change > _NOISE_LEVEL else gray


def _binarise(gray: np.ndarray[Any, Any], dpi: int) -> np.ndarray[Any, Any] | None:
    """Otsu threshold to 0 (ink) / 255 (paper), specks removed; ``None`` for a blank page."""
    threshold, binary = cv2.threshold(gray, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    ink = gray <= threshold
    if not ink.any() or ink.all():
        return None
    if float(gray[~ink].mean()) - float(gray[ink].mean()) < _MIN_INK_CONTRAST:
        return None
    binary = _remove_specks(binary, dpi)
    return binary if (binary == 0).any() else None


def _estimate_skew_degrees(ink: np.ndarray[Any, Any]) -> float:
    """Angle (degrees, counter-clockwise) that makes text lines horizontal.

    Projection-profile search on a downscaled ink mask: the rotation at which the row sums
    change most sharply is the one where text lines and rules are level. Coarse 0.5 degree
    steps over +-12 degrees, then 0.05 degree steps around the best.
    """
    mask: np.ndarray[Any, Any] = np.where(ink, np.uint8(255), np.uint8(0))
    height, width = mask.shape
    factor = min(1.0, 1000.0 / max(height, width))
    if factor < 1.0:
        mask = cv2.resize(mask, None, fx=factor, fy=factor, interpolation=cv2.INTER_AREA)
    height, width = mask.shape
    if int(np.count_nonzero(mask)) < 50:
        return 0.0
    center = (width / 2.0, height / 2.0)

    def sharpness(angle: float) -> float:
        matrix = cv2.getRotationMatrix2D(center, angle, 1.0)
        rotated = cv2.warpAffine(mask, matrix, (width, height), flags=cv2.INTER_LINEAR)
        rows = rotated.sum(axis=1, dtype=np.float64)
        return float(np.square(np.diff(rows)).sum())

    coarse = np.arange(-_SKEW_SEARCH_DEGREES, _SKEW_SEARCH_DEGREES + 0.01, 0.5)
    best = max(coarse, key=sharpness)
    fine = np.arange(best - 0.5, best + 0.51, 0.05)
    return round(float(max(fine, key=sharpness)), 2)


def _rotate(gray: np.ndarray[Any, Any], angle: float) -> np.ndarray[Any, Any]:
    """Rotates counter-clockwise by ``angle`` degrees on a canvas enlarged to keep corners."""
    height, width = gray.shape
    matrix = cv2.getRotationMatrix2D((width / 2.0, height / 2.0), angle, 1.0)
    cos, sin = abs(matrix[0, 0]), abs(matrix[0, 1])
    new_width = int(math.ceil(height * sin + width * cos))
    new_height = int(math.ceil(height * cos + width * sin))
    matrix[0, 2] += (new_width - width) / 2.0
    matrix[1, 2] += (new_height - height) / 2.0
    rotated: np.ndarray[Any, Any] = cv2.warpAffine(
        gray,
        matrix,
        (new_width, new_height),
        flags=cv2.INTER_CUBIC,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=255,
    )
    return rotated


def _remove_specks(binary: np.ndarray[Any, Any], dpi: int) -> np.ndarray[Any, Any]:
    """Whitens ink components smaller than 0.01 x 0.01 in (3x3 px at 300 dpi).

    Larger thresholds start eating i-dots of 9 pt type ("is" becomes "1s").
    """
    min_area = max(2, int((dpi * 0.01) ** 2))
    count, labels, stats, _ = cv2.connectedComponentsWithStats((binary == 0).astype(np.uint8), connectivity=8)
    small = stats[:, cv2.CC_STAT_AREA] < min_area
    small[0] = False  # background label
    if not small[1:count].any():
        return binary
    cleaned = binary.copy()
    cleaned[small[labels]] = 255
    return cleaned


def text_ink_mask(binary: np.ndarray[Any, Any], dpi: int) -> np.ndarray[Any, Any]:
    """Boolean mask (H, W) of ink that belongs to text lines: no rules, specks or pictures.

    Args:
        binary: uint8 (H, W), 0 ink and 255 paper (:func:`preprocess_page`).
        dpi: its resolution in dots per inch (rules are ink runs of 0.4 in or more).
    """
    ink = (binary == 0).astype(np.uint8) * 255
    rule_px = max(15, int(dpi * 0.4))
    horizontal = cv2.morphologyEx(
        ink, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_RECT, (rule_px, 1))
    )
    vertical = cv2.morphologyEx(ink, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_RECT, (1, rule_px)))
    # Grow the rules a little: after deskewing they are a pixel or two off level, and the
    # opening misses their ragged edges.
    grow = max(1, int(dpi * 0.01))
    rules = cv2.dilate(
        cv2.bitwise_or(horizontal, vertical),
        cv2.getStructuringElement(cv2.MORPH_RECT, (2 * grow + 1, 2 * grow + 1)),
    )
    text = cv2.subtract(ink, rules)
    smear = cv2.dilate(text, cv2.getStructuringElement(cv2.MORPH_RECT, (max(3, int(dpi * 0.08)), 1)))
    count, labels, stats, _ = cv2.connectedComponentsWithStats(smear, connectivity=8)
    ink_per_blob = np.bincount(labels[text > 0], minlength=count)
    keep = (ink_per_blob >= max(4, int((dpi * 0.02) ** 2))) & (stats[:, cv2.CC_STAT_HEIGHT] <= dpi * 0.75)
    keep[0] = False
    mask: np.ndarray[Any, Any] = keep[labels] & (text > 0)
    return mask


def _run_tesseract(binary: np.ndarray[Any, Any], dpi: int, timeout_seconds: float) -> dict[str, list[Any]]:
    try:
        result: dict[str, list[Any]] = pytesseract.image_to_data(
            Image.fromarray(binary),
            lang=TESSERACT_LANG,
            config=f"--psm 3 --dpi {dpi}",
            output_type=pytesseract.Output.DICT,
            timeout=timeout_seconds,
        )
    except RuntimeError as exc:
        if "timeout" not in str(exc).lower():
            raise
        _unreadable("OCR timed out on a page.", "ocr_timeout", timeout_seconds=timeout_seconds)
    return result


def _collect_words(
    data: dict[str, list[Any]],
) -> tuple[list[Word], list[tuple[int, int, int, int]], str]:
    """Words, their boxes (left, top, width, height; px) and the page text from TSV rows."""
    words: list[Word] = []
    boxes: list[tuple[int, int, int, int]] = []
    blocks: dict[int, dict[tuple[int, int], list[str]]] = {}
    for i, raw in enumerate(data["text"]):
        text = str(raw).strip()
        confidence = float(data["conf"][i])
        if not text or confidence < 0:
            continue
        words.append(Word(text, round(confidence / 100.0, 4)))
        boxes.append(
            (
                int(data["left"][i]),
                int(data["top"][i]),
                int(data["width"][i]),
                int(data["height"][i]),
            )
        )
        lines = blocks.setdefault(int(data["block_num"][i]), {})
        lines.setdefault((int(data["par_num"][i]), int(data["line_num"][i])), []).append(text)
    text = "\n\n".join("\n".join(" ".join(line) for line in lines.values()) for lines in blocks.values())
    return words, boxes, text


def _coverage(
    text_ink: np.ndarray[Any, Any], boxes: Sequence[tuple[int, int, int, int]], dpi: int, *, has_words: bool
) -> float:
    """Fraction of text ink inside word boxes padded by about 0.01 in."""
    total = int(np.count_nonzero(text_ink))
    if total == 0:
        # Nothing we recognise as text lines (e.g. one huge headline): trust Tesseract.
        return 1.0 if has_words else 0.0
    pad = max(1, int(dpi * 0.01))
    covered = np.zeros(text_ink.shape, dtype=bool)
    height, width = text_ink.shape
    for left, top, box_width, box_height in boxes:
        covered[
            max(0, top - pad) : min(height, top + box_height + pad),
            max(0, left - pad) : min(width, left + box_width + pad),
        ] = True
    return float(np.count_nonzero(text_ink & covered)) / total
