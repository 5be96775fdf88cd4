"""The ``pricing`` pipeline's declaration (seed 003): its graph and how Overseer hosts it."""

from __future__ import annotations

from typing import Any

from activities.pricing.graph import GRAPH_NAME, build_pricing_graph
from overseer.pipelines import Pipeline


def worker_parts() -> dict[str, Any]:
    """What the worker registers for pricing: its workflow and plugin graph."""
    from workflows.pricing import PricingWorkflow

    return {"workflows": [PricingWorkflow], "plugin_graphs": {GRAPH_NAME: build_pricing_graph()}}

PIPELINE = Pipeline(
    name="pricing",
    graph=build_pricing_graph,
    seed="003",
    description=("Pricing policy orchestrator: router → optimizer → policy check → explainer / "
                 "sensitivity → analyst report → sign-off, streamed over SSE; simple asks answer "
                 "on a single-agent fast path"),
    accepts=("application/json",),
    human_gate=("approve (with price edits that must keep the policy) or reject a price "
                "proposal; cancel by thread id"),
    workflow="PricingWorkflow",
    worker_parts=worker_parts,
    extra={"submit_path": "/api/v1/chat"},
)
