"""The pipeline catalogue: every pipeline the registry hosts, how to start it, what it accepts."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from overseer.errors import InvalidRequestError, NotFoundError
from overseer.pipelines import Pipeline
from overseer.registry import get_registry
from overseer.settings import Settings


@dataclass(frozen=True)
class PipelineSpec:
    """One hosted pipeline.

    Attributes:
        name: wire name, used in paths (``/v1/pipelines/<name>/runs``) and workflow ids.
        workflow_type: Temporal workflow type name.
        seed: the seed document it comes from.
        description: one line for ``GET /v1/pipelines``.
        accepts: input kinds (``document`` = multipart file upload).
        human_gate: what a reviewer decides.
    """

    name: str
    workflow_type: str
    seed: str
    description: str
    accepts: tuple[str, ...]
    human_gate: str
    submit_path: str | None = None
    """Where runs are started; None = ``/v1/pipelines/<name>/runs`` (document upload)."""

    @property
    def entry_path(self) -> str:
        """The path that starts a run of this pipeline."""
        return self.submit_path or f"/v1/pipelines/{self.name}/runs"

    def workflow_id(self, run_id: str) -> str:
        """``<pipeline>-<run_id>``: the workflow id of a run, unique per run, readable in the Temporal UI."""
        return f"{self.name}-{run_id}"


class _Catalogue(Mapping[str, PipelineSpec]):
    """A read-only view of the registry (:func:`overseer.registry.get_registry`) as catalogue entries."""

    def __getitem__(self, name: str) -> PipelineSpec:
        registry = get_registry()
        if name not in registry:
            raise KeyError(name)
        return spec_of(registry.get(name))

    def __iter__(self) -> Iterator[str]:
        return iter([p.name for p in get_registry()])

    def __len__(self) -> int:
        return len(get_registry().names())


def spec_of(pipeline: Pipeline) -> PipelineSpec:
    """The catalogue entry of a registered pipeline."""
    return PipelineSpec(
        name=pipeline.name, workflow_type="SegmentRunWorkflow", seed=pipeline.seed or "",
        description=pipeline.description, accepts=pipeline.intake.accepts,
        human_gate=pipeline.gate.human_gate, submit_path=pipeline.intake.submit_path)


CATALOGUE: Mapping[str, PipelineSpec] = _Catalogue()
"""Every pipeline the registry hosts (the project's ``langgraph.json`` plus ``OVERSEER_GRAPHS``)."""


def get_pipeline(name: str) -> PipelineSpec:
    """The catalogue entry for ``name``.

    Raises:
        NotFoundError: unknown pipeline.
    """
    try:
        return CATALOGUE[name]
    except KeyError:
        raise NotFoundError(f"unknown pipeline {name!r}",
                            details={"known": sorted(CATALOGUE)}) from None


DURABILITY_MODES = ("sync", "async", "exit")
"""LangGraph's checkpoint durability modes (a run segment passes its own to LangGraph)."""


def request_options(metadata: dict[str, Any]) -> dict[str, Any]:
    """Per-run options a submitter may set in ``metadata``: LLM budget, model hint, durability.

    Keys: ``llm_budget_usd`` (number ≥ 0), ``llm_budget_tokens`` (integer ≥ 0),
    ``llm_model`` (a hint; used only when allowlisted, otherwise ignored with a reason),
    ``durability`` (LangGraph's ``sync`` | ``async`` | ``exit``, for runs as segments).

    Raises:
        InvalidRequestError: a key with the wrong type or a negative value, or an unknown
            durability.
    """
    out: dict[str, Any] = {}
    for key, kind in (("llm_budget_usd", (int, float)), ("llm_budget_tokens", (int,))):
        if key in metadata:
            value = metadata[key]
            if isinstance(value, bool) or not isinstance(value, kind) or value < 0:
                raise InvalidRequestError(f"metadata.{key} must be a non-negative number",
                                          details={"field": key})
            out[key] = value
    if "durability" in metadata:
        if metadata["durability"] not in DURABILITY_MODES:
            raise InvalidRequestError(f"metadata.durability must be one of {DURABILITY_MODES}",
                                      details={"field": "durability"})
        out["durability"] = metadata["durability"]
    if "llm_model" in metadata:
        if not isinstance(metadata["llm_model"], str):
            raise InvalidRequestError("metadata.llm_model must be a string",
                                      details={"field": "llm_model"})
        out["llm_model_hint"] = metadata["llm_model"]
    return out


def approval_ladder_options(settings: Settings) -> dict[str, Any]:
    """The escalation ladder a run's approvals climb (``workflows.approval.EscalationLadder``)."""
    return {
        "remind_after_seconds": settings.approval_remind_after_seconds,
        "reassign_after_seconds": settings.approval_reassign_after_seconds,
        "sla_seconds": settings.approval_sla_seconds,
        "final_after_seconds": settings.approval_final_after_seconds,
        "final_action": settings.approval_final_action,
        "reassign_to_group": settings.approval_escalation_group,
        "webhook_url": settings.approval_webhook_url,
        "final_resume": settings.approval_final_resume,
    }
