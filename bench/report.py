"""Printing and saving benchmark results: a ratio table on stdout, one JSON file per invocation."""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.stats import ScenarioResult, load_average


def machine() -> dict[str, Any]:
    """CPU count, memory and load: every figure depends on them."""
    import psutil

    return {"cpus": psutil.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(), "platform": platform.platform(),
            "load_average": load_average()}


def table(results: Sequence[ScenarioResult]) -> str:
    """One line per scenario: Overseer and baseline median [min–max], the paired ratio, the verdict."""
    head = f"{'scenario':<28} {'metric':<40} {'overseer':>26} {'baseline':>26} {'ratio':>22}  target"
    lines = [head, "-" * len(head)]
    for r in results:
        o, b, q = r.overseer_spread(), r.baseline_spread(), r.ratio_spread()
        verdict = {True: "MET", False: "NOT MET", None: "-"}[r.verdict()]
        lines.append(f"{r.name:<28} {r.metric[:40]:<40} {o.fmt() if o else '-':>26} "
                     f"{b.fmt() if b else '-':>26} {q.fmt(3) if q else '-':>22}  "
                     f"{verdict}: {r.target}")
        cpu = r.cpu_ratio_spread()
        if cpu is not None:
            lines.append(f"{'':<28} {'CPU per run, baseline ÷ Overseer':<40} {'':>26} {'':>26} "
                         f"{cpu.fmt(3):>22}  (load-independent)")
    return "\n".join(lines)


def write_json(results: Sequence[ScenarioResult], out_dir: Path, *, config: dict[str, Any],
               tuning: dict[str, Any]) -> Path:
    """Write ``bench-<UTC time>.json`` under ``out_dir`` (created) and return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / time.strftime("bench-%Y%m%dT%H%M%SZ.json", time.gmtime())
    body = {"machine": machine(), "config": config, "tuning": tuning,
            "scenarios": [r.to_dict() for r in results]}
    path.write_text(json.dumps(body, indent=2, default=str))
    return path
