"""The due_diligence plug-in (seed 004): what Overseer needs to host the graph."""

from __future__ import annotations

from activities.due_diligence.graph import AGENTS, build_due_diligence_graph
from activities.due_diligence.options import DueDiligenceOptions
from activities.due_diligence.report import render_report
from activities.due_diligence.strategies import run_result
from overseer.plugin import Pipeline

PIPELINE = Pipeline(
    name="due_diligence",
    graph=build_due_diligence_graph,
    seed="004",
    description=("Contract due diligence: clauses with verbatim quotes, risks, an extractive "
                 "summary and a checklist, by five agents in a fixed order."),
    options_model=DueDiligenceOptions,
    accepts=("application/pdf", "image/png", "image/tiff", "image/jpeg", "text/plain"),
    progress_nodes=AGENTS,
    human_gate="optional sign-off: approve or reject the findings and checklist",
    report=render_report,
    result=run_result,
)
