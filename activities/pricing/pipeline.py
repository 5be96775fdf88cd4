"""The ``pricing`` pipeline's declaration (seed 003): its graph and how Overseer hosts it.

It runs as segments (``SegmentRunWorkflow``) with the hooks in :mod:`activities.pricing.run`:
its own chat stream (``stream``), policy-checked sign-off edits (``check_decision``) and
its result view (``result`` / ``node_snapshot``). Runs start from the chat API
(``/api/v1/chat``: routing, scope and a catalog snapshot come first), not from
``/v1/pipelines/pricing/runs``.
"""

from __future__ import annotations

from typing import Any

from activities.pricing.graph import build_pricing_graph
from activities.pricing.run import PricingStream, check_decision, node_snapshot, result
from overseer.plugin import Api, Gate, Intake, NodeHooks, Pipeline, RunHooks


def build_router() -> Any:
    """The pipeline's own routes (``Pipeline.api.router``).

    The chat (``/api/v1/chat``, SSE, sign-off, cancel), given :data:`PIPELINE` for the runs
    it starts, and the policy check utility (``/api/v1/policy/check``).
    """
    from fastapi import APIRouter

    from activities.pricing import api, policy_api

    router = APIRouter()
    router.include_router(api.build_router(PIPELINE))
    router.include_router(policy_api.router)
    return router


PIPELINE = Pipeline(
    name="pricing",
    graph=build_pricing_graph,
    seed="003",
    description=("Pricing policy orchestrator: router → optimizer → policy check → explainer / "
                 "sensitivity → analyst report → sign-off, streamed over SSE; simple asks answer "
                 "on a single-agent fast path"),
    intake=Intake(accepts=("application/json",), submit_path="/api/v1/chat"),
    gate=Gate(human_gate=("approve (with price edits that must keep the policy) or reject a "
                          "price proposal; cancel by thread id"),
              check_decision=check_decision,
              decides_on_state=True),  # its refusal rules read the state at the pause
    run=RunHooks(result=result, stream=PricingStream),
    nodes=NodeHooks(node_snapshot=node_snapshot),
    api=Api(router=build_router),
)
