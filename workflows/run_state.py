"""What a run carries across continue-as-new: one dataclass, :class:`RunState`.

The graph's own state is in LangGraph's checkpointer, so a continued run needs only this:
its stream counters, its LLM spend and budget, the decisions it took and the approvals
still open (each whole: claim, rungs fired, a decision taken meanwhile). Every part of the
workflow (:mod:`workflows.approval`, :mod:`workflows.budget`, :mod:`workflows.durable_stream`)
reads and writes the one instance the run holds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Approval:
    """One open approval of a run: a question, its claim, its ladder, its decision.

    Every pending interrupt of a run is its own approval (parallel interrupts are parallel
    approvals), and so is each LLM budget stop.

    Attributes:
        key: the approval's key within the run (``<round>:<interrupt id>``, or
            ``budget:<n>``): its events' idempotency keys and its read-model row.
        payload: what the reviewer sees.
        requested_at: ISO time it opened (the ladder's rungs count from it).
        sla_deadline: ISO time of ``approval.sla_breached``.
        interrupt_id: the LangGraph interrupt it answers (None for a budget stop).
        claim: ``{"by", "at"}`` while a reviewer holds it.
        group: the group it is assigned to (the ladder's reassignment, or a reviewer's).
        decision: the normalised decision, once taken (the run takes it at its next step).
        claim_events: claims, releases and reassignments recorded so far (their keys).
        fired: the ladder's rungs already fired (carried across continue-as-new).
        sla_breached: the SLA rung has fired.
        taken_at: the run's move counter when the run took the decision (None before).
    """

    key: str
    payload: dict[str, Any]
    requested_at: str
    sla_deadline: str
    interrupt_id: str | None = None
    claim: dict[str, Any] | None = None
    group: str | None = None
    decision: dict[str, Any] | None = None
    claim_events: int = 0
    fired: list[str] = field(default_factory=list)
    sla_breached: bool = False
    taken_at: int | None = None

    def tags(self) -> dict[str, Any]:
        """What every event of this approval carries so the read model keeps one row per approval."""
        return {"approval_key": self.key, "interrupt_id": self.interrupt_id}

    def view(self) -> dict[str, Any]:
        """The approval as the ``get_status`` query shows it."""
        return {"payload": self.payload, "requested_at": self.requested_at,
                "sla_deadline": self.sla_deadline, "approval_key": self.key,
                "interrupt_id": self.interrupt_id, "claimed_by": (self.claim or {}).get("by"),
                "group": self.group, "decided": self.decision is not None}


@dataclass
class RunState:
    """A run's counters and open approvals: what goes along when it continues as new.

    Attributes:
        published: items on the run's durable stream so far (its next item's offset).
        marks: ``[{offset, event, cancelled?}]`` of every ``interrupt``, ``end`` and
            ``error`` item (an Agent Server run's stretches end there).
        spent: the run's chat-model spend, ``{"usd", "tokens", "calls"}``.
        budget: its LLM budget, ``{"usd", "tokens"}`` (None = no limit).
        budget_stops: budget stops so far (their approvals' keys).
        last_decision: the kind of the latest decision taken (the default outcome).
        moves: how often the run reached a next state (a pause, an approval opened); a
            ``decide`` answers once this passes the count at which the run took it.
        open: the approvals still open, oldest first.
    """

    published: int = 0
    marks: list[dict[str, Any]] = field(default_factory=list)
    spent: dict[str, Any] = field(default_factory=lambda: {"usd": 0.0, "tokens": 0, "calls": 0})
    budget: dict[str, Any] = field(default_factory=dict)
    budget_stops: int = 0
    last_decision: str | None = None
    moves: int = 0
    open: list[Approval] = field(default_factory=list)

    def counters(self) -> dict[str, Any]:
        """The JSON form a continued run's input carries (``carry["counters"]``)."""
        return {"published": self.published, "marks": self.marks,
                "spent": self.spent, "budget": self.budget,
                "budget_stops": self.budget_stops,
                "last_decision": self.last_decision,
                "moves": self.moves, "open": [dataclasses.asdict(a) for a in self.open]}

    @classmethod
    def from_counters(cls, counters: dict[str, Any]) -> RunState:
        """A continued run's state from what the run before carried (:meth:`counters`)."""
        return cls(published=int(counters["published"]), marks=list(counters["marks"]),
                   spent=dict(counters["spent"]), budget=dict(counters["budget"]),
                   budget_stops=int(counters["budget_stops"]),
                   last_decision=counters.get("last_decision"),
                   moves=int(counters.get("moves") or counters.get("approval_seq") or 0),
                   open=[Approval(**a) for a in counters.get("open") or []])
