"""``DocumentIntakeWorkflow``: the document_intake runs started before the graph runtime (legacy).

New runs of ``document_intake`` start :class:`workflows.graph_run.GraphRunWorkflow` (the
pipeline's declaration in ``activities/document_intake/pipeline.py``). This workflow type
stays registered only so that runs started before that cut-over — possibly waiting days
for an approval — finish on the code they started with (Temporal replays a run against
its own workflow type). Remove it once no run of it is open::

    temporal workflow count --query 'WorkflowType="DocumentIntakeWorkflow" AND ExecutionStatus="Running"'

Its recorded histories (``tests/workflows/histories/``) keep replaying until then.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

from workflows.approval import EVENT_RETRY, ApprovalGate, DecisionInput, EscalationLadder

with workflow.unsafe.imports_passed_through():
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command
    from temporalio.langgraph import graph as registered_graph

    from activities.document_intake.activities import split_document
    from activities.document_intake.assess import public_snapshot
    from activities.document_intake.decisions import check_decision as check_intake_decision
    from activities.document_intake.graph import GRAPH_NAME, NODE_RETRY
    from activities.document_intake.schema import FieldSchema
    from overseer.pipelines import DecisionRefusedError
    from overseer.store.events import (
        RUN_COMPLETED,
        RUN_FAILED,
        RUN_SPLIT,
        RUN_SUBMITTED,
    )

PIPELINE = "document_intake"


@dataclass
class DocumentIntakeInput:
    """Input of one document_intake run.

    Attributes:
        run_id: UUID string; the workflow id is ``document_intake-<run_id>``.
        document: ``{sha256, kind, filename, page_count}`` reference to the stored upload.
        field_schema: field schema snapshot (``FieldSchema.model_dump()``) taken at submission.
        options: thresholds, scores, dpi, limits and ``approval_sla_seconds``.
        submitted_by: the submitter's subject.
        span: the entry inside a batch file (children only).
        parent_run_id: the batch run that started this one (children only).
        search_attributes: upsert OverseerPipeline/OverseerStatus.
    """

    run_id: str
    document: dict[str, Any]
    field_schema: dict[str, Any]
    options: dict[str, Any]
    submitted_by: str = "unknown"
    span: dict[str, Any] | None = None
    parent_run_id: str | None = None
    search_attributes: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunResult:
    """Result of a run: final status, outcome and the public snapshot of its record."""

    run_id: str
    status: str
    outcome: str | None
    result: dict[str, Any] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)


@workflow.defn(name="DocumentIntakeWorkflow")
class DocumentIntakeWorkflow(ApprovalGate):
    """Runs one uploaded document: split a batch into child runs, or run the graph for one entry."""

    def __init__(self) -> None:
        super().__init__()
        self._schema: FieldSchema | None = None
        self._state: dict[str, Any] = {}

    @workflow.run
    async def run(self, inp: DocumentIntakeInput) -> RunResult:
        """Drive the run to a terminal status; failures are recorded before they surface."""
        self._run_id, self._pipeline = inp.run_id, PIPELINE
        self._use_search_attributes = inp.search_attributes
        self._schema = FieldSchema.model_validate(inp.field_schema)
        await self.set_status("running")
        try:
            if inp.span is None:
                spans = await workflow.execute_activity(
                    split_document, args=[inp.document, inp.field_schema, inp.options],
                    start_to_close_timeout=timedelta(minutes=30),
                    heartbeat_timeout=timedelta(seconds=20), retry_policy=NODE_RETRY,
                    summary="split batch into entries",
                )
                if len(spans) > 1:
                    return await self._split(inp, spans)
            result = await self._run_graph(inp)
        except (ActivityError, ChildWorkflowError) as err:
            cause = err.cause if isinstance(err.cause, ApplicationError) else None
            error = {"code": cause.type if cause and cause.type else "activity_failed",
                     "message": cause.message if cause else str(err)}
            await self._finish("failed", None, RUN_FAILED, error=error)
            raise ApplicationError(error["message"], error, type=error["code"],
                                   non_retryable=True) from err
        await workflow.wait_condition(workflow.all_handlers_finished)
        return result

    def check_decision(self, decision: DecisionInput) -> dict[str, Any]:
        """Seed 000 §2.5, as the pipeline declares it (:mod:`activities.document_intake.decisions`)."""
        assert self._schema is not None
        assert self._approval is not None
        try:
            return check_intake_decision(
                self._approval["payload"],
                {"decision": decision.decision, "updates": decision.updates,
                 "apply_proposal": decision.apply_proposal, "budget_usd": decision.budget_usd,
                 "budget_tokens": decision.budget_tokens},
                {"field_schema": self._schema.model_dump(mode="json")})
        except DecisionRefusedError as err:
            raise ApplicationError(err.message, err.details, type=err.code) from err

    async def _run_graph(self, inp: DocumentIntakeInput) -> RunResult:
        """Run the graph; every interrupt becomes an approval request, resumed with its decision."""
        app = registered_graph(GRAPH_NAME).compile(checkpointer=InMemorySaver())
        config: RunnableConfig = {"configurable": {"thread_id": inp.run_id}}
        state: dict[str, Any] = {
            "run_id": inp.run_id, "document": inp.document, "span": inp.span,
            "field_schema": inp.field_schema, "options": inp.options,
            "max_steps": int(inp.options.get("thresholds", {}).get("max_steps", 5)),
            "tries": 0, "tools_used": [], "record": {},
        }
        out = await app.ainvoke(state, config)
        rounds = 0
        while "__interrupt__" in out:
            rounds += 1
            payload = out["__interrupt__"][0].value
            self._state = payload
            decision = await self.request_approval(
                payload, sla=timedelta(seconds=float(inp.options["approval_sla_seconds"])),
                key=str(rounds), ladder=EscalationLadder.from_options(inp.options),
            )
            out = await app.ainvoke(Command(resume=decision), config)
        snapshot = public_snapshot(out)
        status = out.get("status", "completed")
        await self._finish(status, out.get("outcome"), RUN_COMPLETED, snapshot=snapshot)
        return RunResult(run_id=inp.run_id, status=status, outcome=out.get("outcome"),
                         result=snapshot)

    async def _split(self, inp: DocumentIntakeInput, spans: list[dict[str, Any]]) -> RunResult:
        children: list[str] = []
        for span in spans:
            child_id = str(uuid.uuid5(uuid.UUID(inp.run_id), f"entry:{span['index']}"))
            child = DocumentIntakeInput(
                run_id=child_id, document=inp.document, field_schema=inp.field_schema,
                options=inp.options, submitted_by=inp.submitted_by, span=span,
                parent_run_id=inp.run_id, search_attributes=inp.search_attributes,
            )
            await workflow.execute_activity(
                "record_events",
                [{"run_id": child_id, "key": "run.submitted", "type": RUN_SUBMITTED,
                  "actor": "workflow", "occurred_at": workflow.now().isoformat(),
                  "data": {"pipeline": PIPELINE, "workflow_id": f"{PIPELINE}-{child_id}",
                           "parent_run_id": inp.run_id, "submitted_by": inp.submitted_by,
                           "input": {"document": inp.document, "span": span}}}],
                start_to_close_timeout=timedelta(seconds=30), retry_policy=EVENT_RETRY,
                summary=f"submit entry {span['index']}",
            )
            await workflow.start_child_workflow(
                DocumentIntakeWorkflow.run, child, id=f"{PIPELINE}-{child_id}",
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            )
            children.append(child_id)
        await self.record(RUN_SPLIT, key="run.split",
                          data={"snapshot": {"children": children, "entries": len(children)}})
        await self._finish("completed", "split", RUN_COMPLETED, snapshot={"children": children})
        await workflow.wait_condition(workflow.all_handlers_finished)
        return RunResult(run_id=inp.run_id, status="completed", outcome="split",
                         children=children)

    async def _finish(self, status: str, outcome: str | None, event_type: str, *,
                      snapshot: dict[str, Any] | None = None,
                      error: dict[str, Any] | None = None) -> None:
        self._outcome = outcome
        data: dict[str, Any] = {"status": status, "outcome": outcome,
                                "snapshot": {**(snapshot or {}), "outcome": outcome}}
        if error:
            data["error"] = error
        await self.record(event_type, key="run.finished", data=data)
        await self.set_status(status)

