"""``POST /api/v1/policy/check`` (seed 003 "optional policy validation utility")."""

from __future__ import annotations

from fastapi import APIRouter

from activities.pricing.catalog import current_catalog
from activities.pricing.options import pricing_options
from activities.pricing.policy import PolicyConfig, PolicyReport, check_all_policies
from activities.pricing.schemas import PolicyCheckRequest, PolicyCheckResponse
from overseer.plugin import InvalidRequestError, NotFoundError, PoolDep, PrincipalDep, SettingsDep

router = APIRouter(prefix="/api/v1/policy", tags=["policy"])


@router.post("/check", response_model=PolicyCheckResponse)
async def check(body: PolicyCheckRequest, _: PrincipalDep, settings: SettingsDep,
                pool: PoolDep) -> PolicyCheckResponse:
    """Check explicit price lists and/or catalog items against the hierarchy and gap rules.

    Violations come in the seed's shape (``{type, item, current, suggest}`` plus a rationale);
    suggestions are the fixes, cascades included; ``fixed_prices`` applies them all.
    """
    config = PolicyConfig.model_validate(pricing_options(settings)["policy"])
    if body.thresholds is not None:
        config = config.model_copy(update=body.thresholds.model_dump(exclude_none=True))
    if not body.items and not body.item_ids:
        raise InvalidRequestError("give items (explicit prices) or item_ids (catalog items)")
    entries = [i.model_dump() for i in body.items]
    if body.item_ids:
        catalog = await current_catalog(pool)
        missing = [i for i in body.item_ids if catalog.get(i) is None]
        if missing:
            raise NotFoundError("unknown catalog items", details={"item_ids": missing[:20]})
        for item_id in body.item_ids:
            item = catalog.get(item_id)
            assert item is not None
            entries.append({"item_id": item.item_id, "prices": item.prices,
                            "segment": item.segment, "region": item.region})
    report = PolicyReport()
    for entry in entries:
        unknown = sorted(set(entry["prices"]) - set(config.tiers))
        if unknown:
            raise InvalidRequestError(f"unknown tiers for {entry['item_id']}",
                                      details={"tiers": unknown, "known": config.tiers})
        if any(p <= 0 for p in entry["prices"].values()):
            raise InvalidRequestError(f"prices must be > 0 ({entry['item_id']})")
        report.extend(check_all_policies(entry["item_id"], entry["prices"],
                                         segment=entry.get("segment"),
                                         region=entry.get("region"), config=config))
    return PolicyCheckResponse(
        ok=report.ok, counts=report.counts(),
        violations=[v.model_dump() for v in report.violations],
        suggestions=[s.model_dump() for s in report.suggestions],
        fixed_prices=report.fixed_prices)
