"""Load, faults and verdicts for the reliability suite (``make reliability``).

A scenario starts a :class:`~services.local.managed.ManagedStack`, submits a mixed load of
documents with Idempotency-Keys from client threads that retry like real clients, injects
a fault, waits until every accepted run is terminal or awaiting approval, sends duplicate
concurrent decisions to every waiting run, and then checks the event log: nothing lost,
nothing duplicated, read models rebuilt from the log equal the live ones.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from overseer.store.consistency import check_consistency
from services.local.managed import ManagedStack
from tests import corpus

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "reliability"
SETTLED = ("completed", "rejected", "failed", "cancelled", "awaiting_approval")
FILL_INS = {"student_name": "Jordan Reviewer", "school": "Lincoln Middle School", "grade": "7"}
"""What the simulated reviewer types for a required field OCR missed."""


@dataclass
class Doc:
    """One document of the load."""

    key: str
    name: str
    data: bytes
    content_type: str
    kind: str


def mixed_load(n: int, *, seed: int = 1, scanned_share: float = 0.3,
               missing_share: float = 0.3) -> list[Doc]:
    """``n`` documents: typed PDFs and plain text, ``scanned_share`` office scans (PNG),
    ``missing_share`` of them with the grade left blank (they wait for a human)."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        drop = ["grade"] if rng.random() < missing_share else []
        entry = corpus.make_entry(10_000 + seed * 1000 + i, drop=drop)
        roll = rng.random()
        if roll < scanned_share:
            data = corpus.render_image(entry, "PNG", **{**corpus.OFFICE_SCAN, "dpi": 150})
            docs.append(Doc(f"k{seed}-{i}", f"scan-{i}.png", data, "image/png", "scan"))
        elif roll < scanned_share + (1 - scanned_share) / 2:
            docs.append(Doc(f"k{seed}-{i}", f"form-{i}.pdf", corpus.render_typed_pdf([entry]),
                            "application/pdf", "typed"))
        else:
            docs.append(Doc(f"k{seed}-{i}", f"form-{i}.txt", corpus.render_text([entry]),
                            "text/plain", "text"))
    return docs


@dataclass
class Outcome:
    """What a scenario measured."""

    scenario: str
    fault: str
    documents: int
    accepted: int = 0
    client_retries: int = 0
    refused_4xx: int = 0
    settled: int = 0
    lost: list[str] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    waiting_for_decision: int = 0
    decisions_sent: int = 0
    decisions_applied: int = 0
    decisions_refused: int = 0
    decision_errors: list[str] = field(default_factory=list)
    consistency: dict[str, Any] = field(default_factory=dict)
    recovery_seconds: list[float] = field(default_factory=list)
    wall_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing lost, nothing doubled, read models consistent."""
        return bool(not self.lost and self.settled == self.accepted
                    and self.consistency.get("ok") and not self.decision_errors
                    and self.decisions_applied == self.waiting_for_decision
                    and self.decisions_sent == 2 * self.waiting_for_decision)

    def save(self) -> Path:
        """Write ``test-artifacts/reliability/<scenario>.json``."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.scenario}.json"
        path.write_text(json.dumps({**asdict(self), "ok": self.ok}, indent=2))
        return path


class Clients:
    """Submitting threads that retry on connection errors and 5xx, like a careful client."""

    def __init__(self, stack: ManagedStack, *, concurrency: int = 12,
                 give_up_seconds: float = 300.0) -> None:
        self.stack = stack
        self.concurrency = concurrency
        self.give_up_seconds = give_up_seconds
        self.accepted: dict[str, str] = {}
        self.retries = 0
        self.refused = 0
        self._lock = threading.Lock()

    def submit_all(self, docs: list[Doc]) -> None:
        """Submit every document (blocking) with its Idempotency-Key, retrying until accepted."""
        with ThreadPoolExecutor(self.concurrency) as pool:
            list(pool.map(self._submit, docs))

    def _submit(self, doc: Doc) -> None:
        deadline = time.monotonic() + self.give_up_seconds
        while time.monotonic() < deadline:
            try:
                with self.stack.client("submitter", timeout=30) as client:
                    res = client.post("/v1/submissions",
                                      files={"file": (doc.name, doc.data, doc.content_type)},
                                      headers={"Idempotency-Key": doc.key})
                if res.status_code == 202:
                    with self._lock:
                        self.accepted[doc.key] = res.json()["run_id"]
                    return
                if res.status_code < 500:
                    with self._lock:
                        self.refused += 1
                    return
            except httpx.HTTPError:
                pass
            with self._lock:
                self.retries += 1
            time.sleep(0.5)


def run_async(coro_factory: Callable[[], Any]) -> Any:
    """Run a coroutine from the synchronous harness."""
    return asyncio.run(coro_factory())


async def statuses(stack: ManagedStack, run_ids: list[str]) -> dict[str, str]:
    """``{run_id: status}`` from the read model (missing runs absent)."""
    conn = await asyncpg.connect(stack.database_url)
    try:
        rows = await conn.fetch("SELECT run_id, status FROM runs WHERE run_id = any($1::uuid[])",
                                [uuid.UUID(r) for r in run_ids])
        return {str(r["run_id"]): r["status"] for r in rows}
    finally:
        await conn.close()


def settle(stack: ManagedStack, run_ids: list[str], *, timeout_seconds: float = 600.0
           ) -> dict[str, str]:
    """Wait until every run is terminal or awaiting approval (or the time is up)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            current = run_async(lambda: statuses(stack, run_ids))
        except (OSError, asyncpg.PostgresError):
            current = {}
        if len(current) == len(run_ids) and all(s in SETTLED for s in current.values()):
            return current
        if time.monotonic() > deadline:
            return current
        time.sleep(1.0)


def decide_twice(stack: ManagedStack, waiting: list[str]) -> tuple[int, int, int, list[str]]:
    """Send two concurrent approvals (different reviewers' edits) to every waiting run.

    Returns:
        ``(sent, applied, refused, errors)``: exactly one of each pair should apply (200) and
        the other be refused (409); ``errors`` lists anything else (5xx, transport failures).
    """
    sent = applied = refused = 0
    errors: list[str] = []
    lock = threading.Lock()

    def one(run_id: str, grade: str) -> None:
        nonlocal sent, applied, refused
        try:
            with stack.client("reviewer", timeout=300) as client:
                updates = {"grade": grade}
                res = client.post(f"/v1/admin/approvals/{run_id}/decision",
                                  json={"decision": "approve", "updates": updates})
                if res.status_code == 422 and res.json().get("code") == "invalid_field_edits":
                    # OCR also missed another required field: a reviewer would fill it in too.
                    missing = res.json()["details"].get("missing_fields", [])
                    updates |= {f: FILL_INS.get(f, "Filled In") for f in missing}
                    res = client.post(f"/v1/admin/approvals/{run_id}/decision",
                                      json={"decision": "approve", "updates": updates})
        except httpx.HTTPError as err:
            with lock:
                sent += 1
                errors.append(f"{run_id}: {type(err).__name__}")
            return
        with lock:
            sent += 1
            if res.status_code == 200:
                applied += 1
            elif res.status_code == 409:
                refused += 1
            else:
                errors.append(f"{run_id}: {res.status_code} {res.text[:200]}")

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(one, run_id, grade) for run_id in waiting for grade in ("7", "8")]
    for future in futures:
        future.result()
    return sent, applied, refused, errors


async def consistency(stack: ManagedStack) -> dict[str, Any]:
    """The read-model-vs-log report (overseer.store.consistency)."""
    conn = await asyncpg.connect(stack.database_url)
    try:
        return (await check_consistency(conn)).to_dict()
    finally:
        await conn.close()


async def last_event_seq(stack: ManagedStack) -> int:
    """The newest event's sequence number."""
    conn = await asyncpg.connect(stack.database_url)
    try:
        return int(await conn.fetchval("SELECT coalesce(max(seq), 0) FROM events"))
    finally:
        await conn.close()


def time_to_progress(stack: ManagedStack, since_seq: int, *, timeout_seconds: float = 180.0
                     ) -> float:
    """Seconds until an event newer than ``since_seq`` appears (the system moves again)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_seconds:
        try:
            if run_async(lambda: last_event_seq(stack)) > since_seq:
                return time.monotonic() - started
        except (OSError, asyncpg.PostgresError):
            pass
        time.sleep(0.1)
    return float("inf")


def finish(stack: ManagedStack, outcome: Outcome, clients: Clients) -> Outcome:
    """Settle, decide, settle again, and check the log; fills and saves ``outcome``."""
    outcome.accepted = len(clients.accepted)
    outcome.client_retries = clients.retries
    outcome.refused_4xx = clients.refused
    run_ids = list(clients.accepted.values())
    current = settle(stack, run_ids, timeout_seconds=1500)
    waiting = [r for r, s in current.items() if s == "awaiting_approval"]
    outcome.waiting_for_decision = len(waiting)
    (outcome.decisions_sent, outcome.decisions_applied, outcome.decisions_refused,
     outcome.decision_errors) = decide_twice(stack, waiting)
    current = settle(stack, run_ids, timeout_seconds=600)
    outcome.settled = sum(1 for s in current.values() if s in SETTLED)
    outcome.lost = sorted(set(run_ids) - {r for r, s in current.items() if s in SETTLED})
    outcome.statuses = {}
    for status in current.values():
        outcome.statuses[status] = outcome.statuses.get(status, 0) + 1
    outcome.consistency = run_async(lambda: consistency(stack))
    outcome.save()
    return outcome
