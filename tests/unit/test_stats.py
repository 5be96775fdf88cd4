"""overseer.stats over a hand-written event log: every figure is checked against known arithmetic."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from overseer.stats import compute_stats
from overseer.store.events import NewEvent, append_events

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


class Log:
    """Appends events of one run at offsets (seconds) from T0."""

    def __init__(self, conn: asyncpg.Connection, pipeline: str = "document_intake") -> None:
        self.conn, self.pipeline = conn, pipeline
        self.run_id = str(uuid.uuid4())
        self.n = 0

    async def add(self, at: float, type_: str, actor: str = "workflow", **data: Any) -> None:
        self.n += 1
        await append_events(self.conn, [NewEvent(
            run_id=self.run_id, key=f"{type_}:{self.n}", type=type_, data=data, actor=actor,
            occurred_at=(T0 + timedelta(seconds=at)).isoformat())])

    async def submitted(self, at: float = 0) -> Log:
        await self.add(at, "run.submitted", pipeline=self.pipeline,
                       workflow_id=f"{self.pipeline}-{self.run_id}", submitted_by="alice")
        return self

    async def requested(self, at: float, *reasons: str) -> None:
        await self.add(at, "approval.requested", pipeline=self.pipeline, reason_codes=list(reasons),
                       payload={}, sla_deadline=(T0 + timedelta(seconds=at + 1800)).isoformat())

    async def finished(self, at: float, status: str, outcome: str, tools: list[str] | None) -> None:
        snapshot = {"outcome": outcome, **({"tools_used": tools} if tools is not None else {})}
        await self.add(at, f"run.{'failed' if status == 'failed' else 'completed'}", status=status,
                       outcome=outcome, snapshot=snapshot)


async def _scenario(conn: asyncpg.Connection) -> dict[str, str]:
    auto = await Log(conn).submitted(10)
    await auto.add(11, "node.completed", node="run_pipeline", snapshot={"tools_used": ["run_pipeline"]})
    await auto.finished(12, "completed", "completed", ["run_pipeline"])

    approved = await Log(conn).submitted(20)
    await approved.add(21, "route.decided", route="review", reason="needs_review")
    await approved.add(22, "route.decided", route="escalate", reason="no_updates")
    await approved.requested(30, "missing_grade", "proposal_no_updates")
    await approved.add(40, "approval.claimed", actor="reviewer:rita", reviewer="rita")
    await approved.add(130, "approval.decided", actor="reviewer:rita", decision="approve",
                       decided_by="rita", updates={"grade": "8"})
    await approved.finished(131, "completed", "approved", ["run_pipeline", "review_agent"])

    waiting = await Log(conn).submitted(50)
    await waiting.add(55, "route.decided", route="escalate", reason="max_steps")
    await waiting.requested(60, "missing_grade")
    await waiting.add(600, "approval.reminded", reason="no_decision_after_t1")
    await waiting.add(1200, "approval.reassigned", by="escalation_policy", group="escalations",
                      assignee=None, reason="no_decision_after_t2")
    await waiting.add(1860, "approval.sla_breached", sla_seconds=1800)

    rejected = await Log(conn).submitted(70)
    await rejected.requested(80, "invalid_email")
    await rejected.add(90, "approval.claimed", actor="reviewer:rita", reviewer="rita")
    await rejected.add(95, "approval.released", actor="reviewer:rita", reviewer="rita")
    await rejected.add(100, "approval.claimed", actor="reviewer:sam", reviewer="sam")
    await rejected.add(2080, "approval.sla_breached", sla_seconds=1800)
    await rejected.add(2380, "approval.auto_decided", action="auto_reject", result="reject",
                       reason="policy_auto_reject")
    await rejected.add(2380, "approval.decided", decision="reject", decided_by="escalation_policy")
    await rejected.finished(2381, "rejected", "rejected", ["run_pipeline"])

    budget = await Log(conn).submitted(140)
    await budget.requested(150, "llm_budget_exceeded")
    await budget.add(450, "approval.decided", actor="reviewer:sam", decision="reject",
                     decided_by="sam")
    await budget.finished(451, "rejected", "budget_denied", ["run_pipeline"])

    pricing = await Log(conn, "pricing").submitted(200)
    await pricing.finished(210, "failed", "failed", None)

    old = await Log(conn).submitted(-86400)
    await old.finished(-86000, "completed", "completed", ["run_pipeline", "retry_extraction"])
    return {"waiting": waiting.run_id}


async def test_stats_from_the_event_log(db: asyncpg.Pool):
    async with db.acquire() as conn:
        await _scenario(conn)
    now = T0 + timedelta(seconds=3660)
    stats = await compute_stats(db, since=T0, now=now)

    by_name = {p.pipeline: p for p in stats.pipelines}
    intake = by_name["document_intake"]
    assert intake.submitted == 5 and intake.in_flight == 1
    assert intake.outcomes == {"approved": 1, "budget_denied": 1, "completed": 1, "rejected": 1}
    # tools of finished runs: 1, 2, 1, 1 (the one still waiting is not finished)
    assert intake.runs_with_tools == 4
    assert intake.avg_tools_per_submission == 1.25
    assert by_name["pricing"].outcomes == {"failed": 1}
    assert by_name["pricing"].avg_tools_per_submission is None
    assert stats.totals == {"submitted": 6, "in_flight": 1, "finished": 5, "pending_approvals": 1}
    assert stats.tool_usage == {"run_pipeline": 4, "review_agent": 1}

    reasons = {r.reason: r.count for r in stats.top_escalation_reasons}
    assert reasons == {"missing_grade": 2, "proposal_no_updates": 1, "invalid_email": 1,
                       "llm_budget_exceeded": 1}
    assert stats.top_escalation_reasons[0].reason == "missing_grade"
    assert {r.reason: r.count for r in stats.escalation_routes} == {"no_updates": 1, "max_steps": 1}

    overall = stats.approval_ages[0]
    assert overall.pipeline is None
    assert overall.pending.count == 1 and overall.pending.p50_seconds == 3600.0
    # human decisions took 100 s (rita) and 300 s (sam); the policy's took 2300 s
    assert overall.decided.count == 2
    assert overall.decided.p50_seconds == 200.0
    assert overall.decided.max_seconds == 300.0
    assert overall.decided.p90_seconds == 280.0
    assert overall.auto_decided.count == 1 and overall.auto_decided.p50_seconds == 2300.0
    assert [a.pipeline for a in stats.approval_ages] == [None, "document_intake"]

    sla = stats.sla
    assert sla.breaches == 2 and sla.by_pipeline == {"document_intake": 2}
    assert sla.breached_pending == 1 and sla.breached_then_decided == 1
    assert sla.overdue_pending == 1
    assert sla.reminders == 1 and sla.reassigned_by_policy == 1 and sla.reassigned_manually == 0
    assert sla.auto_decided == {"reject": 1}

    reviewers = {r.reviewer: r for r in stats.reviewers}
    assert set(reviewers) == {"rita", "sam"}  # the escalation policy is not a reviewer
    assert reviewers["rita"].decisions == 1 and reviewers["rita"].approved == 1
    assert reviewers["rita"].claims == 2
    assert reviewers["rita"].median_seconds_to_decision == 100.0
    assert reviewers["sam"].rejected == 1 and reviewers["sam"].claims == 1
    assert reviewers["sam"].decisions_last_24h == 1


async def test_filters_select_the_cohort(db: asyncpg.Pool):
    async with db.acquire() as conn:
        await _scenario(conn)
    everything = await compute_stats(db, now=T0 + timedelta(hours=1))
    assert everything.totals["submitted"] == 7
    intake = {p.pipeline: p for p in everything.pipelines}["document_intake"]
    assert intake.outcomes["completed"] == 2
    assert intake.avg_tools_per_submission == round(7 / 5, 3)

    pricing = await compute_stats(db, pipeline="pricing", now=T0 + timedelta(hours=1))
    assert [p.pipeline for p in pricing.pipelines] == ["pricing"]
    assert pricing.top_escalation_reasons == [] and pricing.reviewers == []
    assert pricing.approval_ages[0].pending.count == 0

    before = await compute_stats(db, until=T0, now=T0)
    assert before.totals == {"submitted": 1, "in_flight": 0, "finished": 1, "pending_approvals": 0}


async def test_empty_log_gives_zeros(db: asyncpg.Pool):
    stats = await compute_stats(db)
    assert stats.pipelines == [] and stats.reviewers == []
    assert stats.totals == {"submitted": 0, "in_flight": 0, "finished": 0, "pending_approvals": 0}
    assert stats.approval_ages[0].pending.count == 0
    assert stats.sla.breaches == 0


async def test_parallel_approvals_of_a_run_are_aged_each_by_its_own_events(db: asyncpg.Pool):
    """Two approvals of one run (one per interrupt): each closes with its own decision."""
    async with db.acquire() as conn:
        run = await Log(conn, "parallel").submitted(0)
        for key, at in (("1:aa", 10), ("1:bb", 10)):
            await run.add(at, "approval.requested", pipeline="parallel", reason_codes=[],
                          payload={}, approval_key=key, interrupt_id=key[2:],
                          sla_deadline=(T0 + timedelta(seconds=1000)).isoformat())
        await run.add(60, "approval.decided", actor="reviewer:rita", decision="approve",
                      decided_by="rita", approval_key="1:aa", interrupt_id="aa")
        await run.add(1200, "approval.sla_breached", sla_seconds=1000, approval_key="1:bb",
                      interrupt_id="bb")
        await run.add(1510, "approval.decided", actor="reviewer:sam", decision="reject",
                      decided_by="sam", approval_key="1:bb", interrupt_id="bb")
    stats = await compute_stats(db, since=T0, now=T0 + timedelta(seconds=2000))
    overall = stats.approval_ages[0]
    assert overall.decided.count == 2 and overall.pending.count == 0
    assert overall.decided.max_seconds == 1500.0  # bb's own decision, not aa's
    reviewers = {r.reviewer: r for r in stats.reviewers}
    assert reviewers["rita"].median_seconds_to_decision == 50.0
    assert reviewers["sam"].median_seconds_to_decision == 1500.0
    assert stats.sla.breached_then_decided == 1  # bb only
