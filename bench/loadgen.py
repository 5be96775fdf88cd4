"""Open-loop HTTP load generator for the API scenario, run as its own process.

``python -m bench.loadgen --url … --token … --rate 50 --seconds 20 --file form.txt``
POSTs the file as multipart to ``/v1/submissions`` at a fixed rate and prints one JSON
line: latencies (p50/p95/p99/max, ms), status counts and the rate actually achieved.

Open loop: request *i* is due at ``start + i / rate`` whatever happened to earlier ones,
and its latency is measured from when it was due, not from when it was sent, so a
stalled server shows up as latency instead of silently lowering the rate (no
coordinated omission). A separate process keeps the generator's CPU out of the API's
event loop, as a real client would be. ``wrk`` (Debian) is run beside it when installed,
as a cross-check with a C client (see :func:`run_wrk`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from bench.stats import latency_summary


async def open_loop(url: str, token: str, body: bytes, filename: str, *, rate: float,
                    seconds: float, timeout_seconds: float = 10.0) -> dict[str, Any]:
    """POST ``body`` at ``rate`` requests/s for ``seconds``; latency from each request's due time.

    Returns:
        ``{requested, completed, achieved_rate, statuses, errors, latency}``; an error is a
        transport failure or a status other than 202.
    """
    total = int(rate * seconds)
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=url, timeout=timeout_seconds, limits=limits,
                                 headers={"Authorization": f"Bearer {token}"}) as client:

        async def one(due: float) -> None:
            try:
                res = await client.post("/v1/submissions",
                                        files={"file": (filename, body, "text/plain")})
                statuses[str(res.status_code)] += 1
            except httpx.HTTPError as err:
                statuses[type(err).__name__] += 1
            latencies.append(time.perf_counter() - due)

        start = time.perf_counter() + 0.05
        tasks = []
        for i in range(total):
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(due)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
    errors = sum(n for code, n in statuses.items() if code != "202")
    return {"requested": total, "completed": len(latencies), "rate_target": rate,
            "achieved_rate": round(total / elapsed, 2), "statuses": dict(statuses),
            "errors": errors, "latency": latency_summary(latencies)}


WRK_LUA = r"""
-- POST a small plain-text form as multipart; each connection waits `pause_ms` after
-- every response, so c connections give about c * 1000 / (pause_ms + latency) req/s.
local boundary = "----overseer-bench-boundary"
local body = io.open(os.getenv("BENCH_FILE"), "rb"):read("*a")
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN")
wrk.headers["Content-Type"] = "multipart/form-data; boundary=" .. boundary
wrk.body = "--" .. boundary .. "\r\n"
  .. 'Content-Disposition: form-data; name="file"; filename="form.txt"\r\n'
  .. "Content-Type: text/plain\r\n\r\n" .. body .. "\r\n--" .. boundary .. "--\r\n"
local pause_ms = tonumber(os.getenv("BENCH_PAUSE_MS"))
function delay() return pause_ms end
local codes = {}
function response(status, headers, body) codes[status] = (codes[status] or 0) + 1 end
"""


def run_wrk(url: str, token: str, file: Path, *, rate: float, seconds: float,
            connections: int = 5) -> dict[str, Any] | None:
    """Cross-check with ``wrk`` (closed loop with a pause per connection), if it is installed.

    wrk has no fixed-rate mode (that is wrk2, not in Debian), so each of ``connections``
    pauses ``connections / rate`` seconds after every response: the achieved rate is a
    little under ``rate`` and latency excludes queueing before the send. The open-loop
    generator stays the headline figure.

    Returns:
        ``{requests, achieved_rate, p50_ms, p99_ms, errors}`` or None when wrk is missing.
    """
    wrk = shutil.which("wrk")
    if wrk is None:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_LUA)
    pause_ms = max(0, int(connections * 1000 / rate))
    proc = subprocess.run(
        [wrk, "-t1", f"-c{connections}", f"-d{int(seconds)}s", "--latency", "-s", script.name,
         f"{url}/v1/submissions"],
        capture_output=True, text=True, timeout=seconds + 60,
        env={"BENCH_FILE": str(file), "BENCH_TOKEN": token, "BENCH_PAUSE_MS": str(pause_ms),
             "PATH": "/usr/bin:/bin"})
    return parse_wrk(proc.stdout)


_UNIT_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def parse_wrk(text: str) -> dict[str, Any]:
    """The figures in ``wrk --latency`` output (latency percentiles in ms, rate, errors)."""
    out: dict[str, Any] = {}
    for pct, key in (("50", "p50_ms"), ("99", "p99_ms")):
        m = re.search(rf"^\s*{pct}(?:\.0+)?%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        if m:
            out[key] = round(float(m.group(1)) * _UNIT_MS[m.group(2)], 2)
    m = re.search(r"(\d+) requests in", text)
    out["requests"] = int(m.group(1)) if m else 0
    m = re.search(r"Requests/sec:\s+([\d.]+)", text)
    out["achieved_rate"] = float(m.group(1)) if m else 0.0
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    errors = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        errors += sum(int(g) for g in m.groups())
    out["errors"] = errors
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI entry: run the open-loop generator and print its JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--file", required=True, type=Path)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    result = asyncio.run(open_loop(args.url, args.token, args.file.read_bytes(), args.file.name,
                                   rate=args.rate, seconds=args.seconds))
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
