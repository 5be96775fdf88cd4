"""The thematic_analysis plug-in (seed 002): what Overseer needs to host the graph."""

from __future__ import annotations

from activities.thematic_analysis.coding import check_decision
from activities.thematic_analysis.graph import build_thematic_analysis_graph
from activities.thematic_analysis.options import ThematicOptions
from overseer.pipelines import Pipeline

PIPELINE = Pipeline(
    name="thematic_analysis",
    graph=build_thematic_analysis_graph,
    seed="002",
    description=("Thematic analysis of an account's interactions in a date window: coders per "
                 "identity, a reviewed codebook, themes with verbatim quotes and sentiment"),
    accepts=("text/csv", "application/jsonl", "application/x-ndjson", "text/plain"),
    options_model=ThematicOptions,
    check_decision=check_decision,
    progress_nodes=("load_dataset", "code_aggregator", "reviewer", "theme_aggregator", "finish"),
    human_gate=("optional codebook review (metadata.review_codebook): approve with merge / "
                "rename / delete edits, or reject"),
)
