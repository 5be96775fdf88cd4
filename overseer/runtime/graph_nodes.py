"""What every node run in a segment shares: its chat-model meter, its ledger, its errors.

:mod:`overseer.runtime.segments` runs LangGraph's loop in one activity per segment; this module
holds the pieces it applies to each node there:

- **Errors.** A bug — ``TypeError``, ``KeyError``, ``ValueError`` (and pydantic's
  ``ValidationError``), ``AttributeError`` … (:data:`BUG_TYPES`) — fails the segment after
  one attempt as :data:`NODE_ERROR` with the node and exception named: never an endless
  retry. Anything else (network, database, time-outs) is retried by Temporal.
- **Model use.** :class:`UsageMeter` counts every chat-model call a node makes, whatever
  LangChain model it uses (the LLM budget gate sums it per run), and :func:`record_ledger`
  writes the calls Overseer's own LLM layer did not make to the run's ``llm.called`` ledger.
- **Progress.** :func:`progress_snapshot`: a progress node's ``node.completed`` snapshot.
- **Claim check.** :func:`overseer.graph_state.put_state_blob` stores a value too large for a Temporal payload
  (:data:`overseer.graph_codec.CLAIM_CHECK_BYTES`) and returns its reference.
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.callbacks import AsyncCallbackHandler
from pydantic import ValidationError
from temporalio import activity

from overseer.graph_codec import CLAIM_CHECK_BYTES, encoded_size, to_jsonable
from overseer.resources import get_runtime
from overseer.runtime.events import append_from_activity
from overseer.store.events import LLM_CALLED, NewEvent

BUG_TYPES: tuple[type[BaseException], ...] = (
    TypeError, LookupError, ValueError, AttributeError, NameError, ArithmeticError,
    AssertionError, NotImplementedError, RecursionError, ValidationError,
)
"""Exceptions that mean the node's code (or its input) is wrong: retrying cannot help."""

NODE_ERROR = "node_error"
"""Error type of a node's bug (non-retryable; the run fails once, with the node named)."""


_LEDGER_TAG = "overseer:ledgered"
"""Tag of the chat-model calls :mod:`overseer.runtime.llm` makes (``overseer.runtime.llm.LEDGER_TAG``, not
imported: the worker loads the LLM layer on first use)."""


async def record_ledger(run_id: str, node: str, task: str, meter: UsageMeter) -> None:
    """One ``llm.called`` event per chat-model call the meter saw outside Overseer's LLM layer.

    Keyed by the run, node, task and call index and the activity attempt (a retried
    attempt's calls are new calls, as the layer counts them), so a replayed write adds none.
    """
    if not meter.ledger:
        return
    attempt = activity.info().attempt if activity.in_activity() else 1
    await append_from_activity([NewEvent(
        run_id=run_id, key=f"llm.called:{node}:{task}:{i}:{attempt}", type=LLM_CALLED,
        actor=f"activity:{entry.get('node') or node}",
        data={"task": "graph_node", "source": "callback", "attempt": attempt,
              **entry, "node": entry.get("node") or node})
        for i, entry in enumerate(meter.ledger)])


class UsageMeter(AsyncCallbackHandler):
    """Counts every chat-model call a node makes, whatever LangChain model it uses.

    Installed as a callback in the node's config (so models the node calls without passing
    a config find it through LangChain's context), it reads each reply's
    ``usage_metadata`` and prices it with the project's price table
    (:func:`overseer.runtime.llm.price_usd`; an unknown model costs 0 and is named in
    ``unpriced``). The runtime's LLM budget gate sums these per run.

    Calls Overseer's own LLM layer did not make (a user's graph calling a chat model
    directly) are also kept in :attr:`ledger`, one entry per call, so the run's ``llm.called``
    ledger — what ``GET /v1/runs/{id}`` shows as ``llm_usage`` — counts them too:
    the layer tags its calls :data:`overseer.runtime.llm.LEDGER_TAG` and writes its own events.
    """

    run_inline = True  # awaited in line: no task per callback event (every token, every chain)

    def __init__(self) -> None:
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd = 0.0
        self.unpriced: set[str] = set()
        self.ledger: list[dict[str, Any]] = []
        self._started: dict[Any, tuple[float, str | None]] = {}

    async def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any,
                                  metadata: dict[str, Any] | None = None,
                                  **kwargs: Any) -> None:
        """Note when a call starts and which graph node makes it (LangGraph's metadata)."""
        self._started[run_id] = (time.monotonic(),
                                 (metadata or {}).get("langgraph_node"))

    async def on_llm_error(self, error: BaseException, *, run_id: Any,
                           tags: list[str] | None = None, **kwargs: Any) -> None:
        """A failed call is one ledger entry too (outcome ``error``, no tokens)."""
        started, node = self._started.pop(run_id, (time.monotonic(), None))
        if _LEDGER_TAG not in (tags or []):
            self.ledger.append({"node": node, "model": "", "outcome": "error",
                                "error_code": type(error).__name__, "input_tokens": 0,
                                "output_tokens": 0, "cost_usd": 0.0,
                                "latency_ms": int((time.monotonic() - started) * 1000)})

    async def on_llm_end(self, response: Any, *, run_id: Any = None,
                         tags: list[str] | None = None, **kwargs: Any) -> None:
        """Add one call's tokens and cost."""
        from overseer.runtime.llm import price_usd

        self.calls += 1
        started, node = self._started.pop(run_id, (time.monotonic(), None))
        call_in, call_out, call_cost, call_model, priced = 0, 0, 0.0, "", True
        for generation in [g for gens in response.generations for g in gens]:
            message = getattr(generation, "message", None)
            usage = getattr(message, "usage_metadata", None) or {}
            tokens_in, tokens_out = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
            self.input_tokens += tokens_in
            self.output_tokens += tokens_out
            meta = getattr(message, "response_metadata", None) or {}
            model = str(meta.get("model_name") or (response.llm_output or {}).get("model_name") or "")
            cost = price_usd(model, tokens_in, tokens_out, get_runtime().settings) if model else None
            if cost is None and (tokens_in or tokens_out):
                self.unpriced.add(model or "unknown")
            self.cost_usd += cost or 0.0
            call_in, call_out = call_in + tokens_in, call_out + tokens_out
            call_cost, call_model = call_cost + (cost or 0.0), model or call_model
            priced = priced and cost is not None
        if _LEDGER_TAG not in (tags or []):
            self.ledger.append({"input_tokens": call_in, "output_tokens": call_out,
                                "cost_usd": round(call_cost, 8), "model": call_model,
                                "price_known": priced, "node": node, "outcome": "ok",
                                "latency_ms": int((time.monotonic() - started) * 1000)})

    def totals(self) -> dict[str, Any]:
        """``{calls, input_tokens, output_tokens, cost_usd, unpriced}``, or ``{}`` without calls."""
        if not self.calls:
            return {}
        return {"calls": self.calls, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost_usd": round(self.cost_usd, 8),
                "unpriced": sorted(self.unpriced)}



def progress_snapshot(node: str, progress_nodes: list[str] | tuple[str, ...],
                      output: Any) -> dict[str, Any] | None:
    """A progress node's ``node.completed`` snapshot: its update plus ``progress``, else None.

    Args:
        node: the node that finished.
        progress_nodes: the pipeline's ordered progress nodes (``Pipeline.nodes.progress_nodes``).
        output: the node's update (a dict; anything else has no snapshot).

    Returns:
        ``{<update keys under the claim-check size>..., "progress": {"completed", "total",
        "current", "label"}}`` (``current``: the next progress node, None after the last),
        or None when ``node`` is not a progress node or its update is not a dict. The run
        view shows the progress.
    """
    if node not in progress_nodes or not isinstance(output, dict):
        return None
    index = list(progress_nodes).index(node)
    total = len(progress_nodes)
    current = progress_nodes[index + 1] if index + 1 < total else None
    snapshot = {k: v for k, v in to_jsonable(output).items()
                if encoded_size({"json": v}) <= CLAIM_CHECK_BYTES}
    return {**snapshot, "progress": {
        "completed": index + 1, "total": total, "current": current,
        "label": f"{index + 1} of {total} agents complete"}}
