"""The catalogue: ``GET /v1/pipelines``."""

from __future__ import annotations

from fastapi import APIRouter

from overseer.catalogue import CATALOGUE
from overseer.web import PrincipalDep
from services.api.schemas import PipelineView

router = APIRouter(prefix="/v1/pipelines", tags=["pipelines"])


@router.get("", response_model=list[PipelineView])
async def list_pipelines(_: PrincipalDep) -> list[PipelineView]:
    """Every hosted pipeline and how to submit to it."""
    return [
        PipelineView(name=s.name, workflow_type=s.workflow_type, seed=s.seed,
                     description=s.description, accepts=list(s.accepts), human_gate=s.human_gate,
                     links={"runs": s.entry_path})
        for s in CATALOGUE.values()
    ]
