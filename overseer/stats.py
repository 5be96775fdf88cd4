"""Orchestrator statistics computed from the append-only event log (seed 000 §3.5).

Every figure is a query over the ``events`` table, never in-memory state, so the API
replicas agree with each other and with the audit trail:

- outcome counts per pipeline and the average number of tools (graph nodes) a
  finished submission used;
- the top escalation reasons (reason codes on ``approval.requested``) and the
  router's reasons for escalating (``route.decided`` with ``route = escalate``);
- approval age percentiles: pending requests (age now) and closed ones (time to
  decision), per pipeline and overall;
- SLA breaches and the escalation ladder's rungs (reminded, reassigned, auto-decided);
- reviewer throughput: decisions, approvals, rejections, claims and the median time
  from request to decision per reviewer.

The population is a *cohort of runs*: runs submitted (``run.submitted``) in
``[since, until)`` of ``pipeline``, all optional. Every figure then covers every event of
those runs, whenever it happened.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from pydantic import BaseModel, Field

TERMINAL_EVENTS = ("run.completed", "run.failed", "run.cancelled")
"""Events that end a run; the first one carries its outcome."""
ESCALATION_POLICY = "escalation_policy"
"""``decided_by`` of decisions the ladder's final rung applied (not a reviewer)."""


class PipelineOutcomes(BaseModel):
    """One pipeline's runs in the cohort."""

    pipeline: str
    submitted: int = Field(description="runs submitted (batch children included)")
    in_flight: int = Field(description="runs with no terminal event yet")
    outcomes: dict[str, int] = Field(
        description="finished runs by outcome (completed, approved, rejected, failed, split, ...)")
    avg_tools_per_submission: float | None = Field(
        description="mean length of tools_used over finished runs that ran tools")
    runs_with_tools: int


class ReasonCount(BaseModel):
    """A reason and how often it occurred."""

    reason: str
    count: int


class AgeSummary(BaseModel):
    """Distribution of approval ages, in seconds."""

    count: int = 0
    p50_seconds: float | None = None
    p90_seconds: float | None = None
    p99_seconds: float | None = None
    max_seconds: float | None = None


class ApprovalAges(BaseModel):
    """Approval ages for one pipeline (``pipeline`` None = all pipelines).

    ``pending`` ages run to now; ``decided`` (by a reviewer) and ``auto_decided`` (by the
    ladder's final rung) run from request to decision.
    """

    pipeline: str | None
    pending: AgeSummary
    decided: AgeSummary
    auto_decided: AgeSummary
    closed_without_decision: int = Field(
        description="requests that ended with the run (cancelled, failed) or were superseded")


class SlaStats(BaseModel):
    """SLA breaches and escalation-ladder rungs."""

    breaches: int = Field(description="approval.sla_breached events")
    breached_pending: int = Field(description="open requests that breached their SLA")
    breached_then_decided: int
    overdue_pending: int = Field(
        description="open requests past their SLA deadline, whether or not a breach was recorded")
    reminders: int
    reassigned_by_policy: int
    reassigned_manually: int
    auto_decided: dict[str, int] = Field(description="final-rung results: approve, reject, kept_waiting")
    by_pipeline: dict[str, int] = Field(description="breaches per pipeline")


class ReviewerThroughput(BaseModel):
    """One reviewer's decisions on the cohort's approvals."""

    reviewer: str
    decisions: int
    approved: int
    rejected: int
    claims: int
    decisions_last_24h: int
    median_seconds_to_decision: float | None
    last_decision_at: str | None


class Stats(BaseModel):
    """``GET /v1/admin/stats``: the orchestrator dashboard's numbers (seed 000 §3.5)."""

    generated_at: str
    filters: dict[str, str | None]
    totals: dict[str, int] = Field(description="submitted, in_flight, finished, pending_approvals")
    pipelines: list[PipelineOutcomes]
    tool_usage: dict[str, int] = Field(description="how many finished runs used each tool")
    top_escalation_reasons: list[ReasonCount]
    escalation_routes: list[ReasonCount] = Field(
        description="the router's reasons for sending runs to a human")
    approval_ages: list[ApprovalAges] = Field(description="overall first, then per pipeline")
    sla: SlaStats
    reviewers: list[ReviewerThroughput]


_COHORT = """
WITH cohort AS (
    SELECT run_id, data->>'pipeline' AS pipeline
    FROM events
    WHERE type = 'run.submitted'
      AND ($1::text IS NULL OR data->>'pipeline' = $1)
      AND ($2::timestamptz IS NULL OR occurred_at >= $2)
      AND ($3::timestamptz IS NULL OR occurred_at < $3)
), finished AS (
    SELECT DISTINCT ON (e.run_id) e.run_id,
           coalesce(e.data->>'outcome', e.data->'snapshot'->>'outcome', e.data->>'status',
                    split_part(e.type, '.', 2)) AS outcome
    FROM events e JOIN cohort c USING (run_id)
    WHERE e.type IN ('run.completed', 'run.failed', 'run.cancelled')
    ORDER BY e.run_id, e.seq
)"""

_OUTCOMES = _COHORT + """
SELECT c.pipeline, f.outcome, count(*) AS n
FROM cohort c LEFT JOIN finished f USING (run_id)
GROUP BY 1, 2"""

_TOOLS = _COHORT + """, tools AS (
    SELECT DISTINCT ON (e.run_id) e.run_id, e.data->'snapshot'->'tools_used' AS tools
    FROM events e JOIN finished f USING (run_id)
    WHERE jsonb_typeof(e.data->'snapshot'->'tools_used') = 'array'
    ORDER BY e.run_id, e.seq DESC
)
SELECT c.pipeline, t.tools
FROM tools t JOIN cohort c USING (run_id)"""

_ESCALATION_REASONS = _COHORT + """
SELECT r.reason, count(*) AS n
FROM events e JOIN cohort c USING (run_id),
     jsonb_array_elements_text(CASE WHEN jsonb_typeof(e.data->'reason_codes') = 'array'
                                    THEN e.data->'reason_codes' ELSE '[]'::jsonb END) AS r(reason)
WHERE e.type = 'approval.requested'
GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT $4"""

_ESCALATION_ROUTES = _COHORT + """
SELECT coalesce(e.data->>'reason', 'unknown') AS reason, count(*) AS n
FROM events e JOIN cohort c USING (run_id)
WHERE e.type = 'route.decided' AND e.data->>'route' = 'escalate'
GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT $4"""

# Each approval request is paired with the first event that closes it: its decision, a newer
# request of the same approval (superseded) or the end of the run. No closing event means it
# is still pending. A run's parallel approvals (one per interrupt) are told apart by their
# ``approval_key``; events written before approvals were keyed have none (one per run then).
_REQUESTS = _COHORT + """, requests AS (
    SELECT r.run_id, c.pipeline, r.occurred_at AS requested_at,
           (r.data->>'sla_deadline')::timestamptz AS sla_deadline,
           x.type AS closed_by, x.occurred_at AS closed_at, x.data AS closing,
           EXISTS (SELECT 1 FROM events b
                   WHERE b.run_id = r.run_id AND b.type = 'approval.sla_breached'
                     AND coalesce(b.data->>'approval_key', '') = coalesce(r.data->>'approval_key', '')
                     AND b.seq > r.seq AND (x.seq IS NULL OR b.seq < x.seq)) AS breached
    FROM events r JOIN cohort c USING (run_id)
    LEFT JOIN LATERAL (
        SELECT seq, type, occurred_at, data FROM events x
        WHERE x.run_id = r.run_id AND x.seq > r.seq
          AND (x.type IN ('run.completed', 'run.failed', 'run.cancelled')
               OR (x.type IN ('approval.decided', 'approval.requested')
                   AND coalesce(x.data->>'approval_key', '')
                       = coalesce(r.data->>'approval_key', '')))
        ORDER BY x.seq LIMIT 1
    ) x ON true
    WHERE r.type = 'approval.requested'
), classified AS (
    SELECT *,
           CASE WHEN closed_by IS NULL THEN 'pending'
                WHEN closed_by = 'approval.decided' AND closing->>'decided_by' = 'escalation_policy'
                    THEN 'auto_decided'
                WHEN closed_by = 'approval.decided' THEN 'decided'
                ELSE 'closed' END AS state,
           extract(epoch FROM coalesce(closed_at, $4::timestamptz) - requested_at)::float8 AS age
    FROM requests
)"""

_AGES = _REQUESTS + """
SELECT pipeline, state, count(*) AS n, max(age) AS max_age,
       percentile_cont(ARRAY[0.5, 0.9, 0.99]) WITHIN GROUP (ORDER BY age) AS pcts
FROM classified
GROUP BY GROUPING SETS ((pipeline, state), (state))"""

_SLA_REQUESTS = _REQUESTS + """
SELECT count(*) FILTER (WHERE state = 'pending' AND breached) AS breached_pending,
       count(*) FILTER (WHERE state IN ('decided', 'auto_decided') AND breached) AS breached_decided,
       count(*) FILTER (WHERE state = 'pending' AND sla_deadline < $4::timestamptz) AS overdue_pending
FROM classified"""

_REVIEWERS = _REQUESTS + """
SELECT coalesce(closing->>'decided_by', 'unknown') AS reviewer, count(*) AS decisions,
       count(*) FILTER (WHERE closing->>'decision' = 'approve') AS approved,
       count(*) FILTER (WHERE closing->>'decision' = 'reject') AS rejected,
       count(*) FILTER (WHERE closed_at >= $4::timestamptz - interval '24 hours') AS last_24h,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY age) AS median_age,
       max(closed_at) AS last_at
FROM classified
WHERE state = 'decided'
GROUP BY 1"""

_LADDER = _COHORT + """
SELECT c.pipeline, e.type, e.data->>'by' AS by, e.data->>'result' AS result,
       e.data->>'reviewer' AS reviewer, count(*) AS n
FROM events e JOIN cohort c USING (run_id)
WHERE e.type IN ('approval.sla_breached', 'approval.reminded', 'approval.reassigned',
                 'approval.auto_decided', 'approval.claimed')
GROUP BY 1, 2, 3, 4, 5"""


async def compute_stats(
    conn: asyncpg.Connection | asyncpg.Pool,
    *,
    pipeline: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    now: datetime | None = None,
    top: int = 10,
) -> Stats:
    """Compute the dashboard figures for a cohort of runs from the event log.

    Args:
        conn: a pool or connection on the Overseer database.
        pipeline: only runs of this pipeline; None for all.
        since: only runs submitted at or after this instant (timezone-aware); None = no bound.
        until: only runs submitted before this instant; None = no bound.
        now: the instant pending ages run to (default: the current time); tests pin it.
        top: how many escalation reasons to list.

    Returns:
        A :class:`Stats`; ages in seconds.

    Raises:
        asyncpg.PostgresError: the database failed (transient).
    """
    now = now or datetime.now(UTC)
    cohort = (pipeline, since, until)
    outcome_rows = await conn.fetch(_OUTCOMES, *cohort)
    tool_rows = await conn.fetch(_TOOLS, *cohort)
    reasons = await conn.fetch(_ESCALATION_REASONS, *cohort, top)
    routes = await conn.fetch(_ESCALATION_ROUTES, *cohort, top)
    age_rows = await conn.fetch(_AGES, *cohort, now)
    sla_row = await conn.fetchrow(_SLA_REQUESTS, *cohort, now)
    reviewer_rows = await conn.fetch(_REVIEWERS, *cohort, now)
    ladder_rows = await conn.fetch(_LADDER, *cohort)

    pipelines = _pipeline_outcomes(outcome_rows, tool_rows)
    tool_usage: dict[str, int] = {}
    for row in tool_rows:
        for tool in set(_json(row["tools"])):
            tool_usage[tool] = tool_usage.get(tool, 0) + 1
    ages = _approval_ages(age_rows)
    sla, claims = _sla(ladder_rows, sla_row)
    reviewers = [
        ReviewerThroughput(
            reviewer=r["reviewer"], decisions=r["decisions"], approved=r["approved"],
            rejected=r["rejected"], claims=claims.pop(r["reviewer"], 0),
            decisions_last_24h=r["last_24h"],
            median_seconds_to_decision=_round(r["median_age"]),
            last_decision_at=r["last_at"].isoformat() if r["last_at"] else None,
        )
        for r in reviewer_rows
    ]
    reviewers += [ReviewerThroughput(reviewer=name, decisions=0, approved=0, rejected=0, claims=n,
                                     decisions_last_24h=0, median_seconds_to_decision=None,
                                     last_decision_at=None)
                  for name, n in claims.items()]
    reviewers.sort(key=lambda r: (-r.decisions, -r.claims, r.reviewer))
    submitted = sum(p.submitted for p in pipelines)
    in_flight = sum(p.in_flight for p in pipelines)
    return Stats(
        generated_at=now.isoformat(),
        filters={"pipeline": pipeline, "since": since.isoformat() if since else None,
                 "until": until.isoformat() if until else None},
        totals={"submitted": submitted, "in_flight": in_flight, "finished": submitted - in_flight,
                "pending_approvals": ages[0].pending.count},
        pipelines=pipelines,
        tool_usage=dict(sorted(tool_usage.items(), key=lambda kv: (-kv[1], kv[0]))),
        top_escalation_reasons=[ReasonCount(reason=r["reason"], count=r["n"]) for r in reasons],
        escalation_routes=[ReasonCount(reason=r["reason"], count=r["n"]) for r in routes],
        approval_ages=ages,
        sla=sla,
        reviewers=reviewers,
    )


def window_start(hours: float | None, now: datetime | None = None) -> datetime | None:
    """``since`` for "the last ``hours`` hours" (None = all time)."""
    if not hours:
        return None
    return (now or datetime.now(UTC)) - timedelta(hours=hours)


def _pipeline_outcomes(outcome_rows: list[asyncpg.Record],
                       tool_rows: list[asyncpg.Record]) -> list[PipelineOutcomes]:
    by_pipeline: dict[str, dict[str, Any]] = {}
    for row in outcome_rows:
        entry = by_pipeline.setdefault(row["pipeline"], {"submitted": 0, "in_flight": 0, "outcomes": {}})
        entry["submitted"] += row["n"]
        if row["outcome"] is None:
            entry["in_flight"] += row["n"]
        else:
            entry["outcomes"][row["outcome"]] = row["n"]
    tools: dict[str, list[int]] = {}
    for row in tool_rows:
        tools.setdefault(row["pipeline"], []).append(len(_json(row["tools"])))
    out = []
    for name in sorted(by_pipeline):
        entry = by_pipeline[name]
        counts = tools.get(name, [])
        out.append(PipelineOutcomes(
            pipeline=name, submitted=entry["submitted"], in_flight=entry["in_flight"],
            outcomes=dict(sorted(entry["outcomes"].items(), key=lambda kv: (-kv[1], kv[0]))),
            avg_tools_per_submission=round(sum(counts) / len(counts), 3) if counts else None,
            runs_with_tools=len(counts),
        ))
    return out


def _approval_ages(rows: list[asyncpg.Record]) -> list[ApprovalAges]:
    groups: dict[str | None, dict[str, Any]] = {None: {}}
    for row in rows:
        groups.setdefault(row["pipeline"], {})[row["state"]] = row
    out = []
    for name in [None, *sorted(p for p in groups if p is not None)]:
        states = groups[name]
        closed = states.get("closed")
        out.append(ApprovalAges(
            pipeline=name, pending=_summary(states.get("pending")),
            decided=_summary(states.get("decided")), auto_decided=_summary(states.get("auto_decided")),
            closed_without_decision=closed["n"] if closed else 0,
        ))
    return out


def _summary(row: asyncpg.Record | None) -> AgeSummary:
    if row is None:
        return AgeSummary()
    p50, p90, p99 = row["pcts"]
    return AgeSummary(count=row["n"], p50_seconds=_round(p50), p90_seconds=_round(p90),
                      p99_seconds=_round(p99), max_seconds=_round(row["max_age"]))


def _sla(ladder_rows: list[asyncpg.Record],
         request_row: asyncpg.Record | None) -> tuple[SlaStats, dict[str, int]]:
    breaches = reminders = by_policy = manual = 0
    auto: dict[str, int] = {}
    by_pipeline: dict[str, int] = {}
    claims: dict[str, int] = {}
    for row in ladder_rows:
        n = row["n"]
        if row["type"] == "approval.sla_breached":
            breaches += n
            by_pipeline[row["pipeline"]] = by_pipeline.get(row["pipeline"], 0) + n
        elif row["type"] == "approval.reminded":
            reminders += n
        elif row["type"] == "approval.reassigned":
            if row["by"] == ESCALATION_POLICY:
                by_policy += n
            else:
                manual += n
        elif row["type"] == "approval.auto_decided":
            key = row["result"] or "unknown"
            auto[key] = auto.get(key, 0) + n
        elif row["type"] == "approval.claimed" and row["reviewer"]:
            claims[row["reviewer"]] = claims.get(row["reviewer"], 0) + n
    return SlaStats(
        breaches=breaches,
        breached_pending=request_row["breached_pending"] if request_row else 0,
        breached_then_decided=request_row["breached_decided"] if request_row else 0,
        overdue_pending=request_row["overdue_pending"] if request_row else 0,
        reminders=reminders, reassigned_by_policy=by_policy, reassigned_manually=manual,
        auto_decided=auto, by_pipeline=by_pipeline,
    ), claims


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 3)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
