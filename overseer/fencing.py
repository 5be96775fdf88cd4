"""Fencing a run segment's attempts: an attempt that was replaced writes nothing after it.

A worker paused past its segment's heartbeat time-out (a long GC pause, a frozen VM, SIGSTOP)
still runs its segment when it wakes up, while Temporal has started that segment again
elsewhere. Temporal refuses the paused attempt's result, but not what it writes to Postgres
itself (LangGraph's checkpoints and pending writes, live stream rows, ``node.completed``
events, the run's ending). So each attempt claims its segment (:meth:`Fence.claim`), every
write an attempt makes goes in only while no other attempt holds the segment, and an attempt
that finds itself replaced stops with :class:`StaleAttempt`.

Claims go by Temporal's attempt number, not by who comes last: a paused worker can wake up
holding an attempt Temporal handed it while it slept and has long since given to another
worker as the next attempt, and that older attempt must not take the segment back. A local
try is always attempt 1; the one run again after its worker died replays in the same leg,
so among local tries the latest claim holds (a local try's leg is never shared with the
heartbeating activity's attempts: the activity goes on in the next leg).

An attempt claims its segment as it starts (one statement). LangGraph's checkpoints and
task writes go in one transaction that share-locks the attempt's fence row first
(:data:`FENCE_HELD`): a newer attempt's claim waits for such a write to commit, and every
write after the claim is refused, so a write is either before the claim or not at all, even
for a worker paused between two statements (Postgres ends a transaction left idle 10 s).
Stream rows check the fence in their own statement; ``node.completed`` events and the run's
ending check it just before they are written (a write already under way when a claim lands
goes in: an event keyed like the one the new attempt writes, so one of the two stays).

The current attempt's fence is :data:`current` (a context variable set by the segment
activity), so LangGraph's checkpointer, called from the loop's own tasks, finds it.
"""

from __future__ import annotations

import uuid
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import asyncpg

FENCE_OPEN = ("NOT EXISTS (SELECT 1 FROM segment_fences WHERE run_id = {run} "
              "AND segment = {segment} AND holder <> {holder})")
"""A SQL condition, true while no other attempt holds the segment: format it with the
statement's placeholders for the run id, the segment and this attempt's holder (all text)."""


FENCE_HELD = ("SELECT holder FROM segment_fences WHERE run_id = %s AND segment = %s "
              "FOR SHARE")
"""The fence row of ``(run_id, segment)``, share-locked until the reading transaction ends
(psycopg placeholders): a write in that transaction commits before any newer claim."""


class StaleAttempt(Exception):  # noqa: N818 - the field's name for what it is
    """This attempt's segment was claimed by a newer attempt: it must write nothing more.

    Raised from a write (a checkpoint, a live stream batch, a node's event, the ending); the
    segment fails with it and Temporal, which already runs the newer attempt, ignores that.
    """


@dataclass(frozen=True)
class Fence:
    """One attempt of one segment of a run.

    Attributes:
        run_id: the run (its workflow's run id).
        segment: the segment and its leg (``"<segment>.<leg>"``).
        holder: this attempt (a random hex id; a local try that runs again after its worker
            died is a new attempt, though Temporal numbers it 1 again).
    """

    run_id: str
    segment: str
    holder: str = field(default_factory=lambda: uuid.uuid4().hex)

    async def claim(self, pool: asyncpg.Pool, attempt: int, *, local: bool = False) -> None:
        """Hold the segment: from now on every other attempt of it is stale.

        Args:
            pool: Overseer's pool.
            attempt: Temporal's attempt number of this activity (or local activity).
            local: a local try (attempt 1 each time: the latest claim holds).

        Raises:
            StaleAttempt: a later attempt holds the segment already (this one was handed
                out before it and started late).
            asyncpg.PostgresError, OSError: the database is unavailable (the segment fails
                and Temporal retries it).
        """
        held = await pool.fetchval(
            "INSERT INTO segment_fences (run_id, segment, holder, attempt) "
            "VALUES ($1, $2, $3, $4) ON CONFLICT (run_id, segment) DO UPDATE SET "
            "holder = EXCLUDED.holder, attempt = EXCLUDED.attempt, claimed_at = now() "
            "WHERE segment_fences.attempt < EXCLUDED.attempt "
            "OR (segment_fences.attempt = EXCLUDED.attempt AND $5) RETURNING holder",
            self.run_id, self.segment, self.holder, attempt, local)
        if held is None:
            raise StaleAttempt(f"segment {self.segment} of run {self.run_id}: attempt "
                               f"{attempt} started after a later one")

    async def check(self, conn: asyncpg.Pool | asyncpg.Connection) -> None:
        """Go on only while no other attempt holds the segment.

        Raises:
            StaleAttempt: a newer attempt claimed it.
            asyncpg.PostgresError, OSError: the database is unavailable.
        """
        if not await conn.fetchval("SELECT " + FENCE_OPEN.format(run="$1", segment="$2",
                                                                  holder="$3"),
                                   self.run_id, self.segment, self.holder):
            raise StaleAttempt(f"segment {self.segment} of run {self.run_id} runs in a newer "
                               "attempt; this one writes nothing more")

    def args(self) -> tuple[str, str, str]:
        """``(run_id, segment, holder)``: the parameters :data:`FENCE_OPEN` names."""
        return self.run_id, self.segment, self.holder


current: ContextVar[Fence | None] = ContextVar("overseer_segment_fence", default=None)
"""The fence of the segment attempt running in this context (None outside a segment)."""


async def check_current(conn: Any) -> None:
    """:meth:`Fence.check` for this context's attempt; nothing outside a segment.

    Raises:
        StaleAttempt: a newer attempt holds this context's segment.
    """
    fence = current.get()
    if fence is not None:
        await fence.check(conn)
