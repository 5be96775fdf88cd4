"""Prove that the read models agree with the event log, and that nothing was doubled.

The read models (``runs``, ``approvals`` and each pipeline's own, ``Pipeline.store``) are
rebuilt from the event log alone — every event replayed in append order through the same projectors the
writers use — into a scratch schema inside a transaction that is rolled back, then
compared row by row with the live tables. On top of that, per-run invariants a duplicate
or a lost step would break: exactly one ``run.submitted``; at most one terminal event;
never more decisions than approval requests.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from overseer.registry import get_registry
from overseer.store.events import NewEvent, projectors_of

READ_MODELS = ("runs", "approvals")
SHADOW = "consistency_shadow"


@dataclass
class ConsistencyReport:
    """What the check found; ``ok`` when every list is empty."""

    events: int = 0
    runs: int = 0
    mismatched: dict[str, list[str]] = field(default_factory=dict)
    """table → run ids whose rebuilt rows differ from the live rows."""
    runs_without_submission: list[str] = field(default_factory=list)
    duplicate_submissions: list[str] = field(default_factory=list)
    duplicate_terminal_events: list[str] = field(default_factory=list)
    decisions_without_request: list[str] = field(default_factory=list)
    by_status: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the read models equal the rebuilt ones and no invariant is broken."""
        return not (any(self.mismatched.values()) or self.runs_without_submission
                    or self.duplicate_submissions or self.duplicate_terminal_events
                    or self.decisions_without_request)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"ok": self.ok, "events": self.events, "runs": self.runs,
                "mismatched": self.mismatched,
                "runs_without_submission": self.runs_without_submission,
                "duplicate_submissions": self.duplicate_submissions,
                "duplicate_terminal_events": self.duplicate_terminal_events,
                "decisions_without_request": self.decisions_without_request,
                "by_status": self.by_status}


async def check_consistency(conn: asyncpg.Connection) -> ConsistencyReport:
    """Rebuild the read models from the log and compare; check the per-run invariants.

    Args:
        conn: a connection (a transaction is opened and rolled back; nothing is changed).

    Returns:
        The report.
    """
    report = ConsistencyReport()
    report.events = await conn.fetchval("SELECT count(*) FROM events")
    report.runs = await conn.fetchval("SELECT count(*) FROM runs")
    report.by_status = {r["status"]: r["n"] for r in await conn.fetch(
        "SELECT status, count(*) AS n FROM runs GROUP BY status")}
    report.runs_without_submission = [str(r["run_id"]) for r in await conn.fetch(
        """SELECT r.run_id FROM runs r WHERE NOT EXISTS (
               SELECT 1 FROM events e WHERE e.run_id = r.run_id AND e.type = 'run.submitted')""")]
    report.duplicate_submissions = await _runs_having(conn, "type = 'run.submitted'", "> 1")
    report.duplicate_terminal_events = await _runs_having(
        conn, "type IN ('run.completed', 'run.failed', 'run.cancelled')", "> 1")
    report.decisions_without_request = [str(r["run_id"]) for r in await conn.fetch(
        """SELECT run_id FROM events GROUP BY run_id
           HAVING count(*) FILTER (WHERE type = 'approval.decided')
                > count(*) FILTER (WHERE type = 'approval.requested')""")]
    tr = conn.transaction()
    await tr.start()
    try:
        await conn.execute(f"CREATE SCHEMA {SHADOW}")
        tables = read_models()
        for table in tables:
            await conn.execute(
                f"CREATE TABLE {SHADOW}.{table} (LIKE public.{table} INCLUDING DEFAULTS INCLUDING INDEXES)")
        await conn.execute(f"SET LOCAL search_path = {SHADOW}, public")
        async for row in conn.cursor(
                "SELECT run_id, type, data, actor, occurred_at, trace_id FROM public.events "
                "ORDER BY seq"):
            projectors = projectors_of(row["type"])
            if not projectors:
                continue
            event = NewEvent(run_id=str(row["run_id"]), key="", type=row["type"],
                             data=json.loads(row["data"]), actor=row["actor"],
                             trace_id=row["trace_id"])
            for projector in projectors:
                await projector(conn, event, row["occurred_at"])
        for table in tables:
            report.mismatched[table] = await _differences(conn, table)
    finally:
        await tr.rollback()
    return report


def read_models() -> tuple[str, ...]:
    """Every read model rebuilt from the log: Overseer's and each pipeline's (``Pipeline.store``)."""
    return READ_MODELS + tuple(t for p in get_registry() for t in p.store.read_models)


async def _runs_having(conn: asyncpg.Connection, where: str, having: str) -> list[str]:
    rows = await conn.fetch(
        f"SELECT run_id FROM events WHERE {where} GROUP BY run_id HAVING count(*) {having}")
    return [str(r["run_id"]) for r in rows]


async def _differences(conn: asyncpg.Connection, table: str) -> list[str]:
    rows = await conn.fetch(
        f"""(SELECT run_id FROM (SELECT * FROM {SHADOW}.{table}
                                 EXCEPT SELECT * FROM public.{table}) a)
            UNION
            (SELECT run_id FROM (SELECT * FROM public.{table}
                                 EXCEPT SELECT * FROM {SHADOW}.{table}) b)""")
    return sorted({str(uuid.UUID(str(r["run_id"]))) for r in rows})
