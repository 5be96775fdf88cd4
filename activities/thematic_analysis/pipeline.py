"""The thematic_analysis plug-in (seed 002): what Overseer needs to host the graph."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from activities.thematic_analysis.coding import check_decision
from activities.thematic_analysis.graph import build_thematic_analysis_graph
from activities.thematic_analysis.options import ThematicOptions
from overseer.plugin import Api, Gate, Intake, NodeHooks, Pipeline


async def quotes(state: Mapping[str, Any], ids: list[str]) -> dict[str, str]:
    """Quote ids of a run → the review sentences they name (reviewer-only endpoint)."""
    from activities.thematic_analysis.dataset import quotes_for

    sha = (state.get("document") or {}).get("sha256")
    return await quotes_for(ids, sha) if sha else {}


async def report(state: Mapping[str, Any]) -> str:
    """Markdown report with each theme's representative quotes resolved."""
    from activities.thematic_analysis.report import render_report

    ids = [q for theme in state.get("themes") or [] for q in theme.get("quote_ids", [])]
    return render_report(state, await quotes(state, ids))

PIPELINE = Pipeline(
    name="thematic_analysis",
    graph=build_thematic_analysis_graph,
    seed="002",
    description=("Thematic analysis of an account's interactions in a date window: coders per "
                 "identity, a reviewed codebook, themes with verbatim quotes and sentiment"),
    intake=Intake(accepts=("text/csv", "application/jsonl", "application/x-ndjson",
                           "text/plain"),
                  options_model=ThematicOptions),
    gate=Gate(check_decision=check_decision,
              human_gate=("optional codebook review (metadata.review_codebook): approve with "
                          "merge / rename / delete edits, or reject")),
    nodes=NodeHooks(progress_nodes=("load_dataset", "code_aggregator", "reviewer",
                                    "theme_aggregator", "finish")),
    api=Api(report=report, quotes=quotes),
)
