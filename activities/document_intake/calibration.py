"""Calibrated scan confidence: raw Tesseract word confidence → P(value right).

Tesseract's word confidence is not a probability, and its meaning depends on what was read:
on the labelled scans, e-mail addresses read at 0.5–0.8 were almost always right (the
"@" and dots pull the score down), while person names read at 0.90–0.95 were wrong about
one time in eight (silently dropped accents: "Muñoz" → "Munoz" at 0.92). Using the raw
number as the OCR part of the record confidence (``assess.assess_record``) sent clean scans
to a person at 0.88 and let such names through.

A :class:`ScanCalibration` maps a field value's raw confidence (its weakest word,
``confidence.field_ocr_confidences``) to a calibrated one, per field kind: a monotone
step function fitted with isotonic regression on the training split of the labelled scans,
each step lowered to the one-sided 95 % Clopper-Pearson lower bound of the field accuracy
observed on it (a step seen a few times cannot claim more than it showed). Fitting and the
held-out figures: ``bench/calibration_fit.py`` (a development script, not shipped) and docs/accuracy.md.

The fitted tables ship as ``scan_calibration.json`` next to this module (read once at
import; no pickle). A lookup is a bisection over a few dozen numbers. Stdlib only, pure
and deterministic, so the workflow may call it.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ALL_KINDS",
    "CALIBRATION_FILE",
    "SCAN_CALIBRATION",
    "CalibrationCurve",
    "ScanCalibration",
    "load_scan_calibration",
]

CALIBRATION_FILE = "scan_calibration.json"
"""The shipped calibration, next to this module."""

ALL_KINDS = "*"
"""Key of the curve used for a field kind that has no curve of its own."""


@dataclass(frozen=True)
class CalibrationCurve:
    """A non-decreasing step function on 0..1 (raw confidence → calibrated confidence).

    Attributes:
        x: ascending raw confidences (0..1) where a step starts; ``x[0]`` is 0.0.
        y: calibrated confidence (0..1) from ``x[i]`` up to ``x[i + 1]``; non-decreasing.
        n: observations the fit saw on each step (for the record; not used by a lookup).
        right: how many of them were right.
    """

    x: tuple[float, ...]
    y: tuple[float, ...]
    n: tuple[int, ...] = ()
    right: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.x or len(self.x) != len(self.y):
            raise ValueError("a calibration curve needs as many x as y values, at least one")
        if self.x[0] != 0.0:
            raise ValueError(f"a calibration curve starts at x = 0.0, not {self.x[0]!r}")
        for a, b in zip(self.x, self.x[1:], strict=False):
            if not a < b:
                raise ValueError(f"calibration x values must increase: {a!r} then {b!r}")
        for a, b in zip(self.y, self.y[1:], strict=False):
            if not a <= b:
                raise ValueError(f"calibration y values must not decrease: {a!r} then {b!r}")
        for v in (*self.x, *self.y):
            _check_unit(v)

    def __call__(self, raw: float) -> float:
        """Calibrated confidence 0..1 of a raw confidence 0..1.

        Raises:
            ValueError: ``raw`` is NaN or outside 0..1.
        """
        _check_unit(raw)
        return self.y[bisect.bisect_right(self.x, raw) - 1]

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"x": [...], "y": [...], "n": [...], "right": [...]}``."""
        return {"x": list(self.x), "y": list(self.y), "n": list(self.n),
                "right": list(self.right)}


@dataclass(frozen=True)
class ScanCalibration:
    """Per field kind, the curve from raw OCR field confidence to calibrated confidence.

    Attributes:
        version: names this fit; recorded with every calibrated assessment.
        curves: field kind (``person_name``, ``email``, …) → curve; :data:`ALL_KINDS`
            for any other kind.
        method: how it was fitted, in words.
        fitted_on: which documents it was fitted on.
    """

    version: str
    curves: Mapping[str, CalibrationCurve]
    method: str = ""
    fitted_on: str = ""
    notes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if ALL_KINDS not in self.curves:
            raise ValueError(f"a scan calibration needs a {ALL_KINDS!r} curve for other kinds")

    def calibrate(self, kind: str, raw: float) -> float:
        """Calibrated confidence of a field value of ``kind`` read at ``raw``.

        Args:
            kind: the schema field's kind (``FieldSpec.kind``).
            raw: 0..1, the value's weakest OCR word confidence.

        Returns:
            0..1, the fitted lower bound on the share of such values that are right.

        Raises:
            ValueError: ``raw`` is NaN or outside 0..1.
        """
        return self.curves.get(kind, self.curves[ALL_KINDS])(raw)

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as :func:`load_scan_calibration` reads it."""
        return {"version": self.version, "method": self.method, "fitted_on": self.fitted_on,
                "notes": self.notes,
                "curves": {k: c.to_dict() for k, c in sorted(self.curves.items())}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScanCalibration:
        """Build from :meth:`to_dict`'s form.

        Raises:
            ValueError: a key is missing or a curve is malformed (not monotone, outside 0..1).
        """
        try:
            curves = {
                str(kind): CalibrationCurve(
                    x=tuple(float(v) for v in c["x"]), y=tuple(float(v) for v in c["y"]),
                    n=tuple(int(v) for v in c.get("n", ())),
                    right=tuple(int(v) for v in c.get("right", ())))
                for kind, c in data["curves"].items()
            }
            return cls(version=str(data["version"]), curves=curves,
                       method=str(data.get("method", "")),
                       fitted_on=str(data.get("fitted_on", "")),
                       notes=dict(data.get("notes", {})))
        except (KeyError, TypeError) as err:
            raise ValueError(f"malformed scan calibration: {err!r}") from err


def load_scan_calibration(path: Path | None = None) -> ScanCalibration:
    """Read a scan calibration JSON file.

    Args:
        path: the file; None for the shipped :data:`CALIBRATION_FILE` next to this module.

    Returns:
        The calibration.

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not JSON or not a valid calibration.
    """
    source = path if path is not None else Path(__file__).with_name(CALIBRATION_FILE)
    return ScanCalibration.from_dict(json.loads(source.read_text(encoding="utf-8")))


def _check_unit(value: float) -> None:
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"a confidence must be within 0..1, got {value!r}")


SCAN_CALIBRATION: ScanCalibration = load_scan_calibration()
"""The shipped calibration, read once at import (the workflow sandbox passes this module
through, so no file is read inside a workflow)."""
