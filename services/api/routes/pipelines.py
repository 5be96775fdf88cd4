"""The registry's pipelines: ``GET /v1/pipelines``."""

from __future__ import annotations

from fastapi import APIRouter

from overseer.http_routes import PrincipalDep
from overseer.registry import get_registry
from overseer.run_types import RUN_WORKFLOW
from services.api.schemas import PipelineView

router = APIRouter(prefix="/v1/pipelines", tags=["pipelines"])


@router.get("", response_model=list[PipelineView])
async def list_pipelines(_: PrincipalDep) -> list[PipelineView]:
    """Every hosted pipeline and how to submit to it."""
    return [
        PipelineView(name=p.name, workflow_type=RUN_WORKFLOW, seed=p.seed or "",
                     description=p.description, accepts=list(p.intake.accepts),
                     human_gate=p.gate.human_gate, links={"runs": p.entry_path})
        for p in get_registry()
    ]
