"""The due_diligence plug-in (seed 004): what Overseer needs to host the graph."""

from __future__ import annotations

from activities.due_diligence.graph import AGENTS, build_due_diligence_graph
from activities.due_diligence.options import DueDiligenceOptions
from activities.due_diligence.report import render_report
from activities.due_diligence.strategies import run_result
from overseer.plugin import Api, Gate, Intake, NodeHooks, Pipeline, RunHooks

PIPELINE = Pipeline(
    name="due_diligence",
    graph=build_due_diligence_graph,
    seed="004",
    description=("Contract due diligence: clauses with verbatim quotes, risks, an extractive "
                 "summary and a checklist, by five agents in a fixed order."),
    intake=Intake(accepts=("application/pdf", "image/png", "image/tiff", "image/jpeg",
                           "text/plain"),
                  options_model=DueDiligenceOptions),
    gate=Gate(human_gate="optional sign-off: approve or reject the findings and checklist"),
    run=RunHooks(result=run_result),
    nodes=NodeHooks(progress_nodes=AGENTS),
    api=Api(report=render_report),
)
