"""``llm_usage`` totals are numbers, not strings (issue 17: tokens came back as ``"322"``)."""

from __future__ import annotations

import json
import uuid

from overseer.store.events import LLM_CALLED, RUN_SUBMITTED, NewEvent, append_events
from services.api.readmodels import llm_usage


async def test_token_totals_are_integers(db):
    run_id = str(uuid.uuid4())
    async with db.acquire() as conn:
        await append_events(conn, [
            NewEvent(run_id=run_id, key="run.submitted", type=RUN_SUBMITTED,
                     data={"pipeline": "p", "workflow_id": f"p-{run_id}"}),
            *[NewEvent(run_id=run_id, key=f"llm:{i}", type=LLM_CALLED,
                       data={"node": "n", "model": "m", "input_tokens": 100 + i,
                             "output_tokens": 11, "cost_usd": 0.001, "outcome": "ok"})
              for i in range(2)]])
        usage = await llm_usage(conn, uuid.UUID(run_id))
    total = json.loads(json.dumps(usage))["total"]
    assert total["input_tokens"] == 201 and isinstance(total["input_tokens"], int)
    assert total["output_tokens"] == 22 and isinstance(total["output_tokens"], int)
    assert total["calls"] == 2
