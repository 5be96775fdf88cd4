"""The model strategy of the coders and theme coders (seed 002 R3, R5.6, R8).

A coder prompts with its identity's ``prompt_prefix`` and an evenly spaced sample of the
window's sentences, each with its quote id; every quote id the model cites is checked to
exist in the window's data, unknown ids are dropped (and counted), and a code left without
quotes is dropped. A theme coder sees the codebook (ids, labels, definitions) and may only
group existing code ids. Calls go through :func:`overseer.runtime.llm.call_json`: one
``llm.called`` ledger event per attempt, token usage returned per call. A transient failure
(429, 5xx, time-out) is raised to the node, which lets Temporal retry the step with backoff
(a 429's Retry-After honoured) while *this call* has failed fewer than ``llm_max_attempts``
times in a row (:func:`overseer.runtime.llm.model_call_retryable`, from the ledger: the coders
of one step share its activity's attempts, so the activity's attempt number is no count of
a coder's failures), and then uses its rules.

A reply that is not a JSON object (a small model answering in prose, JSON cut off midway)
or whose JSON holds nothing usable (no code citing a listed sentence id, no theme over a
listed code id: the wrong shape, or only invented ids) is asked for once more, with what
was wrong (as structured-output libraries re-ask); a second unusable reply raises
:class:`~overseer.errors.LLMResponseError`, and the node codes that step with the rules
instead.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from activities.thematic_analysis.dataset import Corpus
from activities.thematic_analysis.identities import Identity
from activities.thematic_analysis.options import ThematicOptions

log = logging.getLogger("overseer.thematic_analysis")

CODER_INSTRUCTIONS = (
    "Code the sentences below for a thematic analysis. Reply with one JSON object only: "
    '{"codes": [{"label": "<2-5 words>", "definition": "<one sentence>", '
    '"quote_ids": ["<ids of the sentences that show it>"]}]}. Cite only ids listed below; '
    "never invent or alter an id. Give at most {max_codes} codes."
)
THEME_INSTRUCTIONS = (
    "Group these codes into themes for a thematic analysis. Reply with one JSON object only: "
    '{"themes": [{"name": "<3-6 words>", "description": "<one sentence>", '
    '"code_ids": ["<ids of codes listed below>"]}]}. Use only code ids listed below. Give at '
    "most {max_themes} themes."
)
DRY_RUN_MODEL = "dry-run"
"""``overseer.runtime.llm.DRY_RUN_MODEL`` (not imported: this module must not pull in temporalio).
DRY_RUN answers ``{}``; the nodes replace it with mock output, so it is never "unusable"."""

REASK = ("Your answer could not be used: {error}. Answer again with exactly one JSON object "
         "in the format asked for above, and nothing else.")
"""The one re-ask after a reply that is not a JSON object (the parse error is named)."""


@dataclass
class ModelOutput:
    """What one model-backed coder or theme coder produced.

    Attributes:
        items: codes or theme proposals (already checked against the data).
        call: usage of the call ``{node, identity_id, model, input_tokens, output_tokens,
            cost_usd, strategy}``.
        dropped_quote_ids: cited ids that do not exist in the window (coders) or unknown code
            ids (theme coders).
        failed_calls: usage of replies that could not be used before the re-ask got a good
            one (``outcome: "error"``); their tokens were billed, so they count (R8.1).
    """

    items: list[dict[str, Any]] = field(default_factory=list)
    call: dict[str, Any] = field(default_factory=dict)
    dropped_quote_ids: int = 0
    failed_calls: list[dict[str, Any]] = field(default_factory=list)


def settings() -> Any:
    """The activity runtime's settings, or settings from the environment when none is configured."""
    from overseer.plugin import get_runtime

    try:
        return get_runtime().settings
    except RuntimeError:
        from overseer.plugin import Settings

        return Settings()


def model_enabled() -> bool:
    """True when coders call a model (an endpoint, DRY_RUN or a test's fake model)."""
    from overseer.plugin import llm_enabled

    return llm_enabled(settings())


def sample_sentences(corpus: Corpus, limit: int) -> list[str]:
    """Up to ``limit`` quote ids evenly spaced over the window (deterministic)."""
    ids = corpus.quote_ids
    if len(ids) <= limit:
        return list(ids)
    step = len(ids) / limit
    return [ids[int(i * step)] for i in range(limit)]


def coder_messages(identity: Identity, corpus: Corpus, ids: Sequence[str],
                   options: ThematicOptions) -> list[BaseMessage]:
    """The coder prompt: the identity's prefix, the instructions, ``id: sentence`` lines."""
    lines = "\n".join(f"{q}: {corpus.text[q]}" for q in ids)
    return [
        SystemMessage(f"{identity.prompt_prefix.strip()}\n\n"
                      + CODER_INSTRUCTIONS.replace("{max_codes}", str(options.codes_per_identity))),
        HumanMessage(f"Sentences:\n{lines}"),
    ]


def theme_messages(identity: Identity, codebook: Sequence[Mapping[str, Any]],
                   options: ThematicOptions) -> list[BaseMessage]:
    """The theme-coder prompt: the identity's prefix, the instructions, the codebook as JSON lines."""
    lines = "\n".join(json.dumps({"code_id": c["code_id"], "label": c["label"],
                                  "definition": c.get("definition", ""), "count": c["count"]})
                      for c in codebook)
    return [
        SystemMessage(f"{identity.prompt_prefix.strip()}\n\n"
                      + THEME_INSTRUCTIONS.replace("{max_themes}", str(options.max_themes))),
        HumanMessage(f"Codes:\n{lines}"),
    ]


async def model_coder(identity: Identity, corpus: Corpus, options: ThematicOptions, *,
                      run_id: str, node: str) -> ModelOutput:
    """Codes from the model for one identity; cited quote ids verified against the window.

    A reply that is not a JSON object, or gives no code citing a sentence id of the window,
    is asked for once more with what was wrong.

    Raises:
        LLMRateLimitedError, LLMUnavailableError: transient; the node decides whether
            Temporal retries the step (:func:`transient_failures_in_a_row`).
        LLMResponseError: the re-ask's reply was unusable too; LLMRefusedError,
            LLMClientError: refused. Permanent: the node codes with the rules instead.
            The spent tokens of every unusable reply are on the error (:func:`failed_calls`).
        BudgetExceededError: the call would pass the run's budget.
    """
    ids = sample_sentences(corpus, options.llm_sentences)

    def check(result: Any) -> str | None:
        if result.model == DRY_RUN_MODEL or not ids or coder_items(result, corpus, options,
                                                                   identity)[0]:
            return None
        return ('it gives no code citing a sentence id listed (expected {"codes": [{"label", '
                '"definition", "quote_ids"}]})')

    result, call, failed = await _call(coder_messages(identity, corpus, ids, options), options,
                                       run_id=run_id, node=node, identity=identity, check=check)
    items, dropped = coder_items(result, corpus, options, identity)
    out = ModelOutput(items=items, call=call, failed_calls=failed, dropped_quote_ids=dropped)
    if out.dropped_quote_ids:
        log.warning("coder cited quotes that are not in the data", extra={
            "analysis_id": run_id, "identity_id": identity.id,
            "dropped_quote_ids": out.dropped_quote_ids})
    return out


def coder_items(result: Any, corpus: Corpus, options: ThematicOptions, identity: Identity
                ) -> tuple[list[dict[str, Any]], int]:
    """The usable codes of a coder's reply and how many cited ids were not in the window.

    Args:
        result: the :class:`~overseer.runtime.llm.LLMResult` (``data``: ``{"codes": [...]}``).
        corpus: the window (the ids a code may cite).
        options: ``max_quotes_per_code``.
        identity: the coder's identity (recorded on each code).

    Returns:
        ``(codes, dropped)``: codes ``{label, definition, terms, quote_ids, count,
        identity_id, strategy}`` with at least one quote id of the window each.
    """
    items: list[dict[str, Any]] = []
    dropped = 0
    raw_codes = result.data.get("codes")
    for raw in raw_codes if isinstance(raw_codes, list) else []:
        if not isinstance(raw, dict) or not str(raw.get("label") or "").strip():
            continue
        quote_ids = raw.get("quote_ids")
        cited = [str(q) for q in quote_ids if isinstance(q, str | int)] \
            if isinstance(quote_ids, list) else []
        valid = list(dict.fromkeys(q for q in cited if q in corpus.text))
        dropped += len(cited) - len([q for q in cited if q in corpus.text])
        if not valid:
            continue
        items.append({
            "label": str(raw["label"]).strip()[:120],
            "definition": str(raw.get("definition") or "").strip()[:500],
            "terms": [],
            "quote_ids": valid[: options.max_quotes_per_code],
            "count": len(valid),
            "identity_id": identity.id,
            "strategy": result.strategy,
        })
    return items, dropped


async def model_theme_coder(identity: Identity, codebook: Sequence[Mapping[str, Any]],
                            options: ThematicOptions, *, run_id: str, node: str) -> ModelOutput:
    """Theme proposals from the model for one identity; unknown code ids dropped.

    A reply that is not a JSON object, or proposes no theme over a code id of the codebook
    (an empty list, the wrong shape, only invented ids), is asked for once more.

    Raises:
        LLMCallError, BudgetExceededError: as :func:`model_coder` (the node proposes themes
            with the rules after a permanent one).
    """
    known = {str(c["code_id"]) for c in codebook}

    def check(result: Any) -> str | None:
        if result.model == DRY_RUN_MODEL or not known or theme_items(result, known, identity)[0]:
            return None
        return ('it proposes no theme over a code id listed (expected {"themes": [{"name", '
                '"description", "code_ids"}]})')

    result, call, failed = await _call(theme_messages(identity, codebook, options), options,
                                       run_id=run_id, node=node, identity=identity, check=check)
    items, dropped = theme_items(result, known, identity)
    return ModelOutput(items=items, call=call, failed_calls=failed, dropped_quote_ids=dropped)


def theme_items(result: Any, known: set[str], identity: Identity
                ) -> tuple[list[dict[str, Any]], int]:
    """The usable theme proposals of a theme coder's reply and how many code ids were unknown.

    Args:
        result: the :class:`~overseer.runtime.llm.LLMResult` (``data``: ``{"themes": [...]}``).
        known: the codebook's code ids.
        identity: the theme coder's identity (recorded on each proposal).

    Returns:
        ``(proposals, dropped)``: ``{name, description, code_ids, identity_id, strategy}``
        with at least one known code id each.
    """
    items: list[dict[str, Any]] = []
    dropped = 0
    raw_themes = result.data.get("themes")
    for raw in raw_themes if isinstance(raw_themes, list) else []:
        if not isinstance(raw, dict):
            continue
        code_ids = raw.get("code_ids")
        cited = [str(c) for c in code_ids] if isinstance(code_ids, list) else []
        valid = sorted({c for c in cited if c in known})
        dropped += len(cited) - len([c for c in cited if c in known])
        if valid:
            items.append({"name": str(raw.get("name") or "").strip()[:120],
                          "description": str(raw.get("description") or "").strip()[:500],
                          "code_ids": valid, "identity_id": identity.id,
                          "strategy": result.strategy})
    return items, dropped


async def _call(messages: list[BaseMessage], options: ThematicOptions, *, run_id: str, node: str,
                identity: Identity, check: Callable[[Any], str | None] | None = None
                ) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:
    """One model step: the call, and one re-ask when the reply is unusable.

    Unusable: not a JSON object (:func:`overseer.runtime.llm.parse_reply`), or ``check(result)``
    names what is wrong with the JSON (None: usable).

    Returns:
        ``(result, call, failed)``: the usable reply, its ``llm_calls`` entry, and the
        entries of the unusable replies before it (``[]`` or one).

    Raises:
        LLMCallError, BudgetExceededError: as :func:`model_coder`; the error carries the
            ``llm_calls`` entries of every reply that came back (``err.llm_calls``).
    """
    from overseer.plugin import LLMContext, LLMResponseError, call_json

    ctx = LLMContext(run_id=run_id, node=node, step=0, budget_usd=options.llm_budget_usd,
                     budget_tokens=options.llm_budget_tokens, hint=options.llm_model_hint)
    record, spend = _ledger()
    recorded: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []

    async def record_and_keep(events: list[Any]) -> None:
        recorded.extend(dict(e.data) for e in events)
        if record is not None:
            await record(events)
        else:
            from overseer.plugin import append_from_activity

            await append_from_activity(events)

    for reask in (False, True):
        recorded.clear()
        try:
            result = await call_json(messages, task="extraction", ctx=ctx, settings=settings(),
                                     record=record_and_keep, spend=spend)
            problem = check(result) if check is not None else None
            if problem is None:
                break
            raise LLMResponseError(f"the model's reply is not usable ({problem})",
                                   details={"reason": "schema"})
        except Exception as err:
            if recorded:  # the ledger has this call: so does llm_calls (R8.1)
                entry = _usage_entry(recorded[-1], node=node, identity=identity, outcome="error")
                if isinstance(err, LLMResponseError) and not entry.get("error_code"):
                    entry["error_code"] = err.code  # answered, but not with what was asked
                failed.append(entry)
            if reask or not isinstance(err, LLMResponseError):
                err.llm_calls = list(failed)  # type: ignore[attr-defined]
                raise
            log.warning("model reply unusable; asking once more", extra={
                "analysis_id": run_id, "identity_id": identity.id, "node": node,
                "code": err.code})
            messages = [*messages, HumanMessage(REASK.format(error=err.message))]
    call = {"node": node, "identity_id": identity.id, "model": result.model,
            "input_tokens": result.input_tokens, "output_tokens": result.output_tokens,
            "cost_usd": result.cost_usd or 0.0, "price_known": result.cost_usd is not None,
            "strategy": result.strategy, "outcome": "ok"}
    return result, call, failed


def failed_calls(err: BaseException) -> list[dict[str, Any]]:
    """Usage of the failed model calls behind ``err``, as ``llm_calls`` entries.

    A reply that is not the JSON asked for, or a refusal, is a permanent failure of the step,
    but the endpoint billed its tokens and the ledger counts them; a coder that records the
    failure (or falls back to the rules) adds these entries to ``llm_calls`` so
    ``token_usage`` still equals the ledger. One entry per ledgered call of the step: none
    (a budget refusal sends nothing), one, or two (the reply and the re-ask's); a call that
    got no reply is listed with 0 tokens.

    Returns:
        ``[{node, identity_id, model, input_tokens, output_tokens, cost_usd, price_known,
        strategy, outcome: "error", error_code}]``.
    """
    entries = getattr(err, "llm_calls", None)
    if entries is None and err.__cause__ is not None:
        entries = getattr(err.__cause__, "llm_calls", None)
    return [dict(e) for e in entries or [] if isinstance(e, dict)]


def _usage_entry(event: dict[str, Any], *, node: str, identity: Identity,
                 outcome: str) -> dict[str, Any]:
    """An ``llm_calls`` entry from an ``llm.called`` ledger event's data."""
    return {"node": node, "identity_id": identity.id, "model": event.get("model"),
            "input_tokens": int(event.get("input_tokens") or 0),
            "output_tokens": int(event.get("output_tokens") or 0),
            "cost_usd": float(event.get("cost_usd") or 0.0),
            "price_known": bool(event.get("price_known")), "strategy": f"llm:{event.get('model')}",
            "outcome": outcome, "error_code": event.get("error_code")}


def _ledger() -> tuple[Any, dict[str, float] | None]:
    """Ledger writer and spend source: the event log inside a worker's activity; none elsewhere."""
    from temporalio import activity

    if activity.in_activity():
        return None, None

    async def discard(events: list[Any]) -> None:
        return None

    return discard, {"cost_usd": 0.0, "tokens": 0.0, "calls": 0.0}


def estimate_cost_usd(corpus: Corpus, identities: int, codebook_codes: int,
                      options: ThematicOptions) -> dict[str, Any]:
    """The expected LLM cost of a run, from prompt sizes (seed 002 R8.3's "estimate").

    Returns:
        ``{"usd", "input_tokens", "output_tokens", "model"}``; ``usd`` is None when the
        model has no known price.
    """
    from overseer.plugin import price_usd, select_model

    cfg = settings()
    sample = sample_sentences(corpus, options.llm_sentences)
    coder_in = sum(len(corpus.text[q]) + 16 for q in sample) // 4 + 200
    theme_in = codebook_codes * 40 + 200
    input_tokens = identities * (coder_in + theme_in)
    output_tokens = identities * 2 * cfg.llm_max_output_tokens
    model = select_model("extraction", cfg, hint=options.llm_model_hint).model
    return {"usd": price_usd(model, input_tokens, output_tokens, cfg),
            "input_tokens": input_tokens, "output_tokens": output_tokens, "model": model}
