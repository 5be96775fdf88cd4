"""The review agent's suggestions: document_intake's own table, its projectors and its route.

The review agent records each proposal as a ``review.suggested`` event (its values, the
quote check, the evidence). This module is everything else the pipeline keeps of them, all
declared in its :class:`~overseer.plugin.Store` and router, none in the runtime:

- the ``review_suggestions`` table (:data:`MIGRATIONS`), a read model of the event log
  (``overseer check`` rebuilds it);
- its projectors: a ``review.suggested`` event adds a row (``auto_applied`` or
  ``pending``); the run's ``approval.decided`` resolves the pending ones: ``approved``,
  ``overridden`` (approved with another value) or ``rejected``;
- the same rows on the run's page in the review console (:func:`console_view`); its route,
  ``GET /v1/runs/{run_id}/suggestions``, is with the pipeline's other routes
  (:func:`activities.document_intake.api.list_suggestions`), so the worker never imports
  the web framework.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from overseer.plugin import APPROVAL_DECIDED, REVIEW_SUGGESTED, ConsoleView

TABLE = "review_suggestions"

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("review_suggestions", """
        CREATE TABLE IF NOT EXISTS review_suggestions (
            suggestion_id     uuid PRIMARY KEY,
            run_id            uuid NOT NULL REFERENCES runs (run_id),
            current_values    jsonb NOT NULL,
            proposed_updates  jsonb NOT NULL,
            evidence          jsonb NOT NULL,
            strength          double precision NOT NULL,
            strategy          text NOT NULL,
            status            text NOT NULL,
            created_at        timestamptz NOT NULL,
            resolved_at       timestamptz,
            resolved_by       text
        );
        CREATE INDEX IF NOT EXISTS review_suggestions_run ON review_suggestions (run_id);
        """),
)
"""The table, as the runtime's schema had it before it moved here (``IF NOT EXISTS``: a
database made then keeps its table)."""


async def suggested(conn: Any, event: Any, at: datetime) -> None:
    """``review.suggested``: a new row, ``auto_applied`` or ``pending`` (idempotent by id)."""
    d = event.data
    await conn.execute(
        """INSERT INTO review_suggestions (suggestion_id, run_id, current_values, proposed_updates,
                                           evidence, strength, strategy, status, created_at,
                                           resolved_at, resolved_by)
           VALUES ($1, $2, $3::jsonb, $4::jsonb, $5::jsonb, $6, $7, $8, $9, $10, $11)
           ON CONFLICT (suggestion_id) DO NOTHING""",
        uuid.UUID(d["suggestion_id"]),
        uuid.UUID(event.run_id),
        json.dumps(d["current_values"]),
        json.dumps(d["proposed_updates"]),
        json.dumps(d["evidence"]),
        float(d["strength"]),
        d["strategy"],
        "auto_applied" if d.get("auto_applied") else "pending",
        at,
        at if d.get("auto_applied") else None,
        "review_agent" if d.get("auto_applied") else None,
    )


async def resolved(conn: Any, event: Any, at: datetime) -> None:
    """``approval.decided`` on any run: its pending suggestions are resolved by the decision.

    A reviewer who approved with a value other than the one proposed overrode the proposal.
    """
    d = event.data
    await conn.execute(
        """UPDATE review_suggestions SET resolved_at = $3, resolved_by = $4, status =
               CASE WHEN $2 <> 'approve' THEN 'rejected'
                    WHEN EXISTS (SELECT 1 FROM jsonb_each_text(proposed_updates) p
                                 WHERE $5::jsonb ? p.key
                                   AND ($5::jsonb ->> p.key) IS DISTINCT FROM p.value)
                    THEN 'overridden' ELSE 'approved' END
           WHERE run_id = $1 AND status = 'pending'""",
        uuid.UUID(event.run_id),
        d["decision"],
        at,
        d.get("decided_by"),
        json.dumps(d.get("updates") or {}),
    )


PROJECTORS = {REVIEW_SUGGESTED: suggested, APPROVAL_DECIDED: resolved}
"""What the pipeline's table takes from the event log (``Pipeline.store.projectors``)."""


async def console_view(pool: Any, run_id: str) -> ConsoleView | None:
    """The run's suggestions on its review console page: one row per proposed field.

    Returns:
        None for a run the review agent made no proposal for.
    """
    rows = await pool.fetch(
        """SELECT proposed_updates, current_values, status, strategy FROM review_suggestions
           WHERE run_id = $1 ORDER BY created_at""", uuid.UUID(run_id))
    if not rows:
        return None
    table = []
    for r in rows:
        current = json.loads(r["current_values"])
        for name, value in sorted(json.loads(r["proposed_updates"]).items()):
            table.append([name, str(value), str(current.get(name, "")), r["status"],
                          r["strategy"]])
    return ConsoleView(title="Review agent's suggestions",
                       columns=("field", "proposed", "was", "status", "strategy"), rows=table)
