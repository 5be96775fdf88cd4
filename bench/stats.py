"""Pure arithmetic of the benchmark: percentiles, min/median/max over repeats, ratios to baselines.

Nothing here touches a server, so ``tests/unit/test_bench*.py`` checks it exactly.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks.

    Same definition as ``numpy.percentile(..., method="linear")``.

    Args:
        values: samples, any order (not modified).
        q: percentile in [0, 100].

    Returns:
        The interpolated value.

    Raises:
        ValueError: no samples, or ``q`` out of range.
    """
    if not values:
        raise ValueError("percentile of no samples")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in [0, 100], got {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    if low == high:
        return float(ordered[low])
    return float(ordered[low] + (ordered[high] - ordered[low]) * (rank - low))


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """``{n, p50_ms, p95_ms, p99_ms, max_ms, mean_ms}`` of latencies given in seconds."""
    if not seconds:
        return {"n": 0}
    return {
        "n": len(seconds),
        "p50_ms": round(percentile(seconds, 50) * 1000, 2),
        "p95_ms": round(percentile(seconds, 95) * 1000, 2),
        "p99_ms": round(percentile(seconds, 99) * 1000, 2),
        "max_ms": round(max(seconds) * 1000, 2),
        "mean_ms": round(statistics.fmean(seconds) * 1000, 2),
    }


@dataclass
class Spread:
    """Min, median and max of one figure over repeated trials (same unit as the trials)."""

    min: float
    median: float
    max: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """The spread of ``values``.

        Raises:
            ValueError: no values.
        """
        if not values:
            raise ValueError("spread of no values")
        return cls(min=float(min(values)), median=float(statistics.median(values)),
                   max=float(max(values)), n=len(values))

    def fmt(self, digits: int = 2) -> str:
        """``median [min–max]`` with ``digits`` decimals."""
        return f"{self.median:.{digits}f} [{self.min:.{digits}f}–{self.max:.{digits}f}]"


def ratio(overseer: float, baseline: float) -> float:
    """``overseer / baseline``; ``inf`` for a zero baseline and a positive figure, ``nan`` for 0/0."""
    if baseline == 0:
        return math.nan if overseer == 0 else math.inf
    return overseer / baseline


def paired_ratios(overseer: Sequence[float], baseline: Sequence[float]) -> list[float]:
    """Trial-by-trial ratios (trial i of Overseer over trial i of its baseline, run back to back).

    Pairing trials taken minutes apart keeps slow drift in machine load (other engineers'
    test runs on the same 2 cores) out of the ratio as far as possible.

    Raises:
        ValueError: the two series differ in length.
    """
    if len(overseer) != len(baseline):
        raise ValueError("paired ratios need as many Overseer trials as baseline trials")
    return [ratio(o, b) for o, b in zip(overseer, baseline, strict=True)]


def meets(value: float, target: float, *, higher_is_better: bool) -> bool:
    """Whether ``value`` meets ``target`` (``>=`` when higher is better, else ``<=``)."""
    return value >= target if higher_is_better else value <= target


def load_average() -> list[float]:
    """The 1/5/15-minute load averages now (other work on the machine skews every figure)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on Linux
        return []


@dataclass
class Trial:
    """One timed trial of one side of a scenario.

    Attributes:
        value: the headline figure (runs/s, pages/s, ms …; unit in the scenario).
        load_before: load averages when the trial started.
        details: anything else measured (latency summaries, counts, RSS …).
    """

    value: float
    load_before: list[float] = field(default_factory=load_average)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class ScenarioResult:
    """Both sides of one scenario over repeated trials and their ratio.

    Attributes:
        name: scenario id (``text_throughput``, …).
        metric: what ``value`` means, with its unit (``runs/s``).
        higher_is_better: direction of the metric.
        overseer: Overseer's trials.
        baseline: the baseline's trials (empty when a scenario has an absolute target only).
        baseline_name: what the baseline is.
        target: the docs/performance.md target in words, and ``target_value`` / ``target_on`` say what
            is compared (``ratio`` or ``value``).
        notes: caveats measured along the way.
    """

    name: str
    metric: str
    higher_is_better: bool
    overseer: list[Trial] = field(default_factory=list)
    baseline: list[Trial] = field(default_factory=list)
    baseline_name: str = ""
    target: str = ""
    target_value: float | None = None
    target_on: str = "ratio"
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def overseer_spread(self) -> Spread | None:
        """Spread of Overseer's headline figure."""
        return Spread.of([t.value for t in self.overseer]) if self.overseer else None

    def baseline_spread(self) -> Spread | None:
        """Spread of the baseline's headline figure."""
        return Spread.of([t.value for t in self.baseline]) if self.baseline else None

    def ratio_spread(self) -> Spread | None:
        """Spread of the paired per-trial ratios (None without a baseline)."""
        if not self.overseer or len(self.overseer) != len(self.baseline):
            return None
        return Spread.of(paired_ratios([t.value for t in self.overseer],
                                       [t.value for t in self.baseline]))

    def cpu_ratio_spread(self) -> Spread | None:
        """Spread of baseline CPU per run ÷ Overseer CPU per run, trial by trial.

        The CPU-bound throughput ratio a quiet machine would show: it barely moves with
        other processes' load, unlike wall-clock throughput. None unless both sides
        recorded ``cpu_ms_per_run_total`` in their trial details.
        """
        key = "cpu_ms_per_run_total"
        if (not self.overseer or len(self.overseer) != len(self.baseline)
                or not all(key in t.details for t in [*self.overseer, *self.baseline])):
            return None
        return Spread.of([ratio(b.details[key], o.details[key])
                          for o, b in zip(self.overseer, self.baseline, strict=True)])

    def verdict(self) -> bool | None:
        """Whether the median meets the target (None when the scenario has no numeric target).

        A scenario with several targets lists them in ``extra["checks"]`` (name → met);
        then all of them must hold.
        """
        checks = self.extra.get("checks")
        if checks:
            return all(checks.values())
        if self.target_value is None:
            return None
        spread = self.ratio_spread() if self.target_on == "ratio" else self.overseer_spread()
        if spread is None:
            return None
        return meets(spread.median, self.target_value, higher_is_better=self.higher_is_better)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with the spreads and the verdict next to the raw trials."""
        out = asdict(self)
        for key, spread in (("overseer_spread", self.overseer_spread()),
                            ("baseline_spread", self.baseline_spread()),
                            ("ratio_spread", self.ratio_spread()),
                            ("cpu_ratio_spread", self.cpu_ratio_spread())):
            out[key] = asdict(spread) if spread is not None else None
        out["meets_target"] = self.verdict()
        return out
