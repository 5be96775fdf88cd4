"""Nodes of the thematic_analysis graph (seed 002 R3-R5, R7, R8, R10).

Nodes: ``load_dataset``, ``coder`` and ``theme_coder`` (one per identity, in parallel; each
fan-out an activity of its own with the coders' attempts), ``code_aggregator``,
``reviewer``, ``theme_aggregator`` and ``finish``, all in activities; the human gate
``codebook_review`` is in graph.py. The graph runs as segments (see graph.py).

Error policy (seed R5): a coder or theme coder never fails the run — its error is caught
and recorded in ``errors``. A model that misbehaves costs nothing either: a reply that is
not usable after the re-ask (prose, JSON cut off, JSON with nothing usable), a refusal, a
request it rejects, or a transient failure (429, 5xx, time-out) that outlasted its call's
``llm_max_attempts`` attempts (Temporal retried the step with backoff in between, a 429's
Retry-After honoured; counted per call from the ledger, not by the step's attempt, which
the coders of a step share) makes that step run the rules coder (or rules theme coder)
instead, recorded in ``fallbacks`` and as ``strategy: rules`` with the reason's code. Only
a budget refusal or a bug is an error. ``load_dataset``, the aggregators and the reviewer
raise, which fails the run, after logging ``status=failed`` and trying to record a failed
checkpoint. Logs carry the seed's fields (analysis_id, account_id, tenant_id, stage,
duration_ms, timestamp) and never interaction text (R10.5).

CPU work (TF-IDF, embeddings, clustering, fuzzy matching, VADER; seconds on a large
window) runs in a worker thread through :func:`off_loop`, never on the event loop: the
worker's loop carries every activity's heartbeats and the other activities it runs. The
threads share the cached corpus; its memoised tables are computed once under the corpus's
lock (:meth:`~activities.thematic_analysis.dataset.Corpus.memo`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from activities.thematic_analysis import coding, themes
from activities.thematic_analysis.dataset import load_corpus, parse_window_metadata
from activities.thematic_analysis.identities import Identity, load_identities
from activities.thematic_analysis.llm_steps import (
    DRY_RUN_MODEL,
    ModelOutput,
    estimate_cost_usd,
    failed_calls,
    model_coder,
    model_enabled,
    model_theme_coder,
)
from activities.thematic_analysis.options import ThematicOptions, run_options
from overseer.plugin import (
    LLMCallError,
    LLMClientError,
    LLMRefusedError,
    LLMResponseError,
    OverseerError,
    model_call_retryable,
)

log = logging.getLogger("overseer.thematic_analysis")

CHECKPOINT_RECORDED = "checkpoint.recorded"
"""Event type of a seed R4 checkpoint in the run's event log (wire name)."""

COST_OVERRUN_RATIO = 1.2
"""Seed R8.3: warn when the actual LLM cost exceeds the estimate by more than 20 %."""

UNUSABLE_MODEL = (LLMResponseError, LLMRefusedError, LLMClientError)
"""Permanent model failures a step answers with its rules strategy: the reply was not the JSON
asked for even after the re-ask, the model refused, or the endpoint rejected the request.
A transient one (429, 5xx, time-out) joins them once its call has had its attempts
(:func:`_model_gave_up`)."""


class _RetryStep(Exception):  # noqa: N818 - a signal, not an error
    """Raised past a coder's own error handling: Temporal retries the step with ``failure``."""

    def __init__(self, failure: Exception) -> None:
        super().__init__(str(failure))
        self.failure = failure

STATE_WARNING_BYTES = 10 * 1024 * 1024
"""Seed R2.3: warn when the serialised state passes 10 MB."""

Node = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

P = ParamSpec("P")
T = TypeVar("T")


async def off_loop(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run the CPU-bound ``fn(*args, **kwargs)`` in a worker thread and await its result.

    The event loop stays free for heartbeats (the segment heartbeats while the node runs)
    and for the worker's other activities; pure-Python work still shares the GIL, which
    the interpreter hands back to the loop every few milliseconds. A cancelled activity
    stops waiting at once; the thread finishes its computation and the result is dropped.

    Raises:
        Whatever ``fn`` raises.
    """
    return await asyncio.to_thread(fn, *args, **kwargs)


# --- load_dataset -----------------------------------------------------------------------------


async def load_dataset(state: dict[str, Any]) -> dict[str, Any]:
    """Node ``load_dataset``: validate metadata, window the upload, snapshot identities.

    Returns:
        ``options`` (with the request's LLM budget and model hint from ``metadata``),
        ``dataset`` (reference), ``account_id``, ``interaction_ids``, ``identities``,
        ``strategy``, ``cost_estimate``, ``started_at``, a stage duration.

    Raises:
        DatasetError, IdentitiesConfigError, NotFoundError: permanent; the run fails.
    """
    started, started_at = time.monotonic(), time.time()
    fields = _log_fields(state)
    log.info("thematic analysis started", extra={**fields, "stage": "started"})
    try:
        options = run_options(state.get("options"), state.get("metadata"))
        identities = load_identities(options.identities_path)
        account_id, first, last = parse_window_metadata(dict(state.get("metadata") or {}))
        document = dict(state.get("document") or {})
        if not document.get("sha256"):
            from activities.thematic_analysis.dataset import DatasetError

            raise DatasetError("the run has no uploaded dataset", details={})
        ref = {"sha256": document["sha256"], "filename": document.get("filename") or "",
               "content_type": document.get("content_type"), "account_id": account_id,
               "start_date": first.isoformat(), "end_date": last.isoformat()}
        corpus = await load_corpus(ref)
    except Exception as err:
        _log_failed(fields, "load_dataset", err)
        failure = _as_failure(err)
        if failure is err:
            raise
        raise failure from err
    uses_model = model_enabled()
    estimate = None
    if uses_model:
        estimate = estimate_cost_usd(corpus, len(identities), options.max_codes, options)
        if options.cost_estimate_usd is not None:
            estimate["usd"] = options.cost_estimate_usd
    ref.update(interactions=len(corpus.interaction_ids), sentences=len(corpus.quote_ids))
    duration = _ms(started)
    log.info("stage completed", extra={**fields, "stage": "load_dataset", "duration_ms": duration,
                                       "interactions": len(corpus.interaction_ids),
                                       "sentences": len(corpus.quote_ids)})
    return {
        "options": options.model_dump(mode="json"),
        "dataset": ref, "account_id": account_id, "interaction_ids": list(corpus.interaction_ids),
        "identities": [i.model_dump() for i in identities],
        "strategy": "llm" if uses_model else "rules", "cost_estimate": estimate,
        "started_at": started_at, "status": "running",
        "stage_durations": [{"stage": "load_dataset", "node": "load_dataset",
                             "duration_ms": duration}],
    }


# --- coder / theme_coder (may fail) -----------------------------------------------------------


async def coder(payload: dict[str, Any]) -> dict[str, Any]:
    """Node ``coder`` (one ``Send`` per identity): code the window through one identity's lens.

    Returns:
        ``coder_results`` + one entry, or ``errors`` + one entry when it failed (R5.1);
        ``llm_calls`` when a model was called; a stage duration. A model reply that stays
        unusable after the re-ask (or a refusal, a rejected request) gives the rules coder's
        codes (``strategy: rules`` with ``fallback: {code, message}``) and a ``fallbacks``
        entry instead of an error.

    Raises:
        ApplicationError: only a transient model failure before the last attempt.
    """
    identity = Identity.model_validate(payload["identity"])
    options = ThematicOptions.model_validate(payload.get("options") or {})
    started = time.monotonic()
    fields = {**_log_fields(payload), "identity_id": identity.id}
    update: dict[str, Any] = {}
    try:
        corpus = await load_corpus(payload["dataset"])
        if model_enabled():
            try:
                out = await model_coder(identity, corpus, options,
                                        run_id=payload.get("run_id", ""),
                                        node=f"coder:{identity.id}")
            except LLMCallError as err:
                if not await _model_gave_up(err, options, payload, f"coder:{identity.id}"):
                    raise
                codes = await off_loop(coding.rules_coder, identity, corpus, options)
                fallback = _fell_back(err, stage="coding", node="coder", identity=identity,
                                      fields=fields)
                result = {"identity_id": identity.id, "codes": codes, "strategy": "rules",
                          "dropped_quote_ids": 0, "fallback": {
                              "code": fallback["code"], "message": fallback["message"]}}
                update.update(coder_results=[result], fallbacks=[fallback])
                _keep_spent_tokens(err, update)
                return _coder_done(update, fields, identity, started)
            codes = out.items
            if out.call.get("model") == DRY_RUN_MODEL:  # seed R9.5: DRY_RUN returns mock codes
                codes = [{**c, "strategy": "llm:dry-run", "mock": True}
                         for c in await off_loop(coding.rules_coder, identity, corpus, options)]
            result = {"identity_id": identity.id, "codes": codes, "strategy": "llm",
                      "dropped_quote_ids": out.dropped_quote_ids}
            update["llm_calls"] = [*out.failed_calls, out.call]
        else:
            codes = await off_loop(coding.rules_coder, identity, corpus, options)
            result = {"identity_id": identity.id, "codes": codes, "strategy": "rules",
                      "dropped_quote_ids": 0}
        update["coder_results"] = [result]
    except _RetryStep as retry:
        raise retry.failure from retry.__cause__
    except Exception as err:
        _reraise_if_retrying(err, options)
        update["errors"] = [_tolerated(err, stage="coding", node="coder", identity=identity,
                                       fields=fields)]
        _keep_spent_tokens(err, update)
    return _coder_done(update, fields, identity, started)


def _coder_done(update: dict[str, Any], fields: dict[str, Any], identity: Identity,
                started: float) -> dict[str, Any]:
    """Log the coder's completion and add its stage duration to ``update``."""
    duration = _ms(started)
    log.info("stage completed", extra={**fields, "stage": "coder", "duration_ms": duration,
                                       "codes": len((update.get("coder_results") or [{}])[0]
                                                    .get("codes", []))})
    update["stage_durations"] = [{"stage": "coding", "node": "coder",
                                  "identity_id": identity.id, "duration_ms": duration}]
    return update


async def theme_coder(payload: dict[str, Any]) -> dict[str, Any]:
    """Node ``theme_coder`` (one ``Send`` per identity): propose themes over the codebook.

    Returns:
        ``theme_proposals`` + its proposals, or ``errors`` + one entry when it failed (R5.4);
        ``llm_calls`` when a model was called; a stage duration. A model reply that stays
        unusable after the re-ask (or a refusal, a rejected request) gives the rules theme
        coder's proposals (``strategy: rules``) and a ``fallbacks`` entry instead of an error.

    Raises:
        ApplicationError: only a transient model failure before the last attempt.
    """
    identity = Identity.model_validate(payload["identity"])
    options = ThematicOptions.model_validate(payload.get("options") or {})
    started = time.monotonic()
    fields = {**_log_fields(payload), "identity_id": identity.id}
    update: dict[str, Any] = {}
    codebook = payload.get("codebook") or []
    try:
        if model_enabled():
            out: ModelOutput | None = None
            try:
                out = await model_theme_coder(identity, codebook, options,
                                              run_id=payload.get("run_id", ""),
                                              node=f"theme_coder:{identity.id}")
            except LLMCallError as err:
                if not await _model_gave_up(err, options, payload,
                                            f"theme_coder:{identity.id}"):
                    raise
                corpus = await load_corpus(payload["dataset"])
                update["theme_proposals"] = await off_loop(
                    themes.rules_theme_coder, identity, codebook, corpus, options)
                update["fallbacks"] = [_fell_back(err, stage="themes", node="theme_coder",
                                                  identity=identity, fields=fields)]
                _keep_spent_tokens(err, update)
            if out is not None:
                proposals = out.items
                if out.call.get("model") == DRY_RUN_MODEL:  # mock proposals, end to end
                    corpus = await load_corpus(payload["dataset"])
                    proposals = await off_loop(themes.rules_theme_coder, identity, codebook,
                                               corpus, options)
                update["theme_proposals"] = proposals
                update["llm_calls"] = [*out.failed_calls, out.call]
        else:
            corpus = await load_corpus(payload["dataset"])
            update["theme_proposals"] = await off_loop(themes.rules_theme_coder, identity,
                                                       codebook, corpus, options)
    except _RetryStep as retry:
        raise retry.failure from retry.__cause__
    except Exception as err:
        _reraise_if_retrying(err, options)
        update["errors"] = [_tolerated(err, stage="themes", node="theme_coder",
                                       identity=identity, fields=fields)]
        _keep_spent_tokens(err, update)
    duration = _ms(started)
    log.info("stage completed", extra={**fields, "stage": "theme_coder", "duration_ms": duration})
    update["stage_durations"] = [{"stage": "themes", "node": "theme_coder",
                                  "identity_id": identity.id, "duration_ms": duration}]
    return update


# --- aggregators and reviewer (must not fail) --------------------------------------------------


def fatal_stage(stage: str) -> Callable[[Node], Node]:
    """Decorate a node whose failure fails the run (R5.2, R5.3, R5.5).

    Logs ``status=failed`` with the error code, tries to record a failed checkpoint (fail
    open), and re-raises (domain errors as non-retryable ``ApplicationError``).
    """

    def wrap(fn: Node) -> Node:
        @functools.wraps(fn)
        async def node(state: dict[str, Any]) -> dict[str, Any]:
            started = time.monotonic()
            try:
                update = await fn(state)
            except Exception as err:
                fields = _log_fields(state)
                _log_failed(fields, stage, err)
                await _persist_checkpoint(state, {
                    "analysis_id": state.get("run_id"), "stage": stage, "status": "failed",
                    "error": _error_dict(err), "created_at": _now()})
                failure = _as_failure(err)
                if failure is err:
                    raise
                raise failure from err
            duration = _ms(started)
            log.info("stage completed", extra={**_log_fields(state), "stage": stage,
                                               "duration_ms": duration})
            update.setdefault("stage_durations", []).append(
                {"stage": stage, "node": fn.__name__, "duration_ms": duration})
            return update

        return node

    return wrap


@fatal_stage("code_aggregator")
async def code_aggregator(state: dict[str, Any]) -> dict[str, Any]:
    """Node ``code_aggregator`` (R3.2): merge all coders' codes into a draft codebook.

    Raises:
        CodingFailedError: every coder failed on a non-empty window.
    """
    options = ThematicOptions.model_validate(state.get("options") or {})
    results = sorted(state.get("coder_results") or [], key=lambda r: r["identity_id"])
    dataset = state.get("dataset") or {}
    if not results and state.get("identities") and dataset.get("sentences"):
        codes = sorted({str(e.get("code")) for e in state.get("errors") or []})
        raise coding.CodingFailedError(
            f"every coder failed ({', '.join(codes) or 'no error recorded'}): there are no "
            "codes to aggregate", details={"errors": [
                e.get("code") for e in state.get("errors") or []]})
    if not dataset.get("sentences"):
        return {"codebook": []}
    corpus = await load_corpus(dataset)
    return {"codebook": await off_loop(coding.aggregate_codes, results, corpus, options)}


@fatal_stage("reviewer")
async def reviewer(state: dict[str, Any]) -> dict[str, Any]:
    """Node ``reviewer`` (R3.3): update the codebook; record checkpoint ``coding_complete`` (R4.1)."""
    options = ThematicOptions.model_validate(state.get("options") or {})
    codebook = state.get("codebook") or []
    if codebook:
        corpus = await load_corpus(state["dataset"])
        identities = [Identity.model_validate(i) for i in state.get("identities") or []]
        codebook = await off_loop(coding.review_codebook, codebook, corpus, options, identities)
    checkpoint = await _checkpoint(state, "coding_complete", codes=len(codebook),
                                   code_ids=[c["code_id"] for c in codebook])
    return {"codebook": codebook, "checkpoints": [checkpoint]}


@fatal_stage("theme_aggregator")
async def theme_aggregator(state: dict[str, Any]) -> dict[str, Any]:
    """Node ``theme_aggregator`` (R3.6): consensus themes; checkpoint ``theme_complete`` (R4.2).

    Theme coders that all succeeded but proposed nothing give no themes (outcome
    ``no_themes``): that is an answer, not a failure.

    Raises:
        ThemeStageError: codes exist but every theme coder failed.
    """
    options = ThematicOptions.model_validate(state.get("options") or {})
    codebook = state.get("codebook") or []
    proposals = sorted(state.get("theme_proposals") or [],
                       key=lambda p: (p.get("identity_id", ""), p.get("code_ids", [])))
    if codebook and not proposals:
        failed = {e.get("identity_id") for e in state.get("errors") or []
                  if e.get("node") == "theme_coder"}
        identities = {str(i["id"]) for i in state.get("identities") or []}
        if not identities or identities <= failed:
            raise themes.ThemeStageError("every theme coder failed", details={
                "codes": len(codebook), "errors": sorted(
                    str(e.get("code")) for e in state.get("errors") or []
                    if e.get("node") == "theme_coder")})
        found: list[dict[str, Any]] = []
    else:
        corpus = await load_corpus(state["dataset"])
        found = await off_loop(themes.aggregate_themes, proposals, codebook, corpus, options)
    checkpoint = await _checkpoint(state, "theme_complete", themes=len(found),
                                   theme_ids=[t["theme_id"] for t in found])
    return {"themes": found, "checkpoints": [checkpoint]}


async def finish(state: dict[str, Any]) -> dict[str, Any]:
    """Node ``finish``: token usage (R8), durations, the cost-overrun check, the completion log (R10.3).

    Returns:
        ``token_usage``, ``durations_ms``, ``warnings``, ``status``, ``outcome``,
        ``strategies`` (see :func:`strategies_used`); ``themes`` is set to ``[]`` when the
        theme stage was skipped (0 codes, R7.2).
    """
    fields = _log_fields(state)
    usage = token_usage(state.get("llm_calls") or [])
    warnings: list[str] = []
    estimate = (state.get("cost_estimate") or {}).get("usd")
    if estimate is not None and usage["cost_usd"] > COST_OVERRUN_RATIO * float(estimate):
        warnings.append("cost_overrun")
        log.warning("llm cost exceeds the estimate by more than 20%", extra={
            **fields, "cost_usd": usage["cost_usd"], "estimate_usd": estimate})
    durations: dict[str, int] = {}
    for item in state.get("stage_durations") or []:
        durations[item["stage"]] = durations.get(item["stage"], 0) + int(item["duration_ms"])
    total = int((time.time() - float(state.get("started_at") or time.time())) * 1000)
    durations["total"] = total
    rejected = (state.get("codebook_decision") or {}).get("decision") == "reject"
    codebook = state.get("codebook") or []
    found = state.get("themes") or []
    outcome = ("codebook_rejected" if rejected else "no_codes" if not codebook
               else "themes" if found else "no_themes")
    update: dict[str, Any] = {
        "token_usage": usage, "durations_ms": durations, "warnings": warnings,
        "status": "rejected" if rejected else "completed", "outcome": outcome,
        "strategies": strategies_used(state),
    }
    if outcome != "themes":
        update["themes"] = []
    size = len(json.dumps({**state, **update}, default=str))
    if size > STATE_WARNING_BYTES:
        warnings.append("state_large")
        log.warning("state is large", extra={**fields, "state_bytes": size})
    log.info("thematic analysis completed", extra={
        **fields, "status": update["status"], "total_duration_ms": total,
        "codes_generated": len(codebook), "themes_generated": len(state.get("themes") or []),
        "errors": len(state.get("errors") or []), "total_tokens": usage["total_tokens"]})
    return update


def strategies_used(state: dict[str, Any]) -> list[str]:
    """Every strategy that produced part of the result.

    ``llm:<model>`` for each model that gave a usable reply, ``rules`` when a coder or theme
    coder ran the rules (offline, or as the fallback after an unusable reply). ``strategy``
    alone names only what was configured.

    Returns:
        Names in first-use order, e.g. ``["llm:gpt-4o-mini", "rules"]``; ``["rules"]``
        offline.
    """
    ran = [c.get("strategy") for c in state.get("llm_calls") or [] if c.get("outcome") == "ok"]
    if state.get("strategy") == "rules" or state.get("fallbacks") or \
            any(r.get("strategy") == "rules" for r in state.get("coder_results") or []):
        ran.append("rules")
    out: list[str] = []
    for name in ran:
        if isinstance(name, str) and name and name not in out:
            out.append(name)
    return out


def token_usage(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals of the run's model calls (R8.1, R8.2): tokens, calls, cost, per node.

    ``calls`` are the entries of ``llm_calls``: every call that got a reply, including a
    reply the step could not use (``failed_calls``; its tokens were billed). Attempts that
    got no reply (time-outs, 5xx) spent no tokens and show only in the ``llm.called`` ledger.
    """
    by_node: dict[str, dict[str, Any]] = {}
    for call in calls:
        node = by_node.setdefault(call["node"], {"prompt_tokens": 0, "completion_tokens": 0,
                                                 "cost_usd": 0.0, "calls": 0})
        node["prompt_tokens"] += int(call.get("input_tokens", 0))
        node["completion_tokens"] += int(call.get("output_tokens", 0))
        node["cost_usd"] = round(node["cost_usd"] + float(call.get("cost_usd") or 0.0), 8)
        node["calls"] += 1
    prompt = sum(n["prompt_tokens"] for n in by_node.values())
    completion = sum(n["completion_tokens"] for n in by_node.values())
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion, "calls": len(calls),
            "failed_calls": sum(1 for c in calls if c.get("outcome") == "error"),
            "cost_usd": round(sum(n["cost_usd"] for n in by_node.values()), 8),
            "by_node": dict(sorted(by_node.items()))}


# --- helpers ----------------------------------------------------------------------------------


async def _checkpoint(state: dict[str, Any], stage: str, **data: Any) -> dict[str, Any]:
    entry = {"analysis_id": state.get("run_id"), "stage": stage, "status": "in_progress"
             if stage == "coding_complete" else "completed", "created_at": _now(), **data}
    entry["persisted"] = await _persist_checkpoint(state, entry)
    return entry


async def _persist_checkpoint(state: dict[str, Any], entry: dict[str, Any]) -> bool:
    """Append the checkpoint to the event log when inside a worker; never raises (R4.5 fail open)."""
    try:
        from temporalio import activity

        if not activity.in_activity() or not state.get("run_id"):
            return False
        from overseer.plugin import NewEvent, append_from_activity

        await append_from_activity([NewEvent(
            run_id=state["run_id"], key=f"{CHECKPOINT_RECORDED}:{entry['stage']}:{entry['status']}",
            type=CHECKPOINT_RECORDED, actor=f"activity:{entry['stage']}",
            data={k: v for k, v in entry.items() if k not in ("code_ids", "theme_ids")})])
        return True
    except Exception as err:  # noqa: BLE001 - fail open by design (seed R4.5)
        log.error("checkpoint not persisted", extra={
            "analysis_id": state.get("run_id"), "stage": entry.get("stage"),
            "error_code": type(err).__name__})
        return False


TRANSIENT_ERROR_NAMES = frozenset({"PostgresConnectionError", "ConnectionDoesNotExistError",
                                   "InterfaceError", "CannotConnectNowError",
                                   "TooManyConnectionsError"})
"""Database errors a retry can cure (by class name: asyncpg is not imported here)."""


def _reraise_if_retrying(err: Exception, options: ThematicOptions) -> None:
    """Let Temporal retry a transient failure before the last attempt.

    Transient: a retryable domain error (model 429/5xx/time-out), a lost connection or a
    database outage. Anything else (a bug, a refusal) is recorded at once: raising it would
    fail the run, which a coder must not do.
    """
    retryable = (isinstance(err, OverseerError) and err.retryable) or \
        isinstance(err, OSError | TimeoutError) or type(err).__name__ in TRANSIENT_ERROR_NAMES
    if not retryable:
        return
    from temporalio import activity

    if activity.in_activity() and activity.info().attempt < last_attempt(
            options, activity.info().retry_policy):
        raise _as_failure(err)


async def _model_gave_up(err: LLMCallError, options: ThematicOptions, payload: dict[str, Any],
                         node: str) -> bool:
    """Whether a model step falls back to its rules after ``err`` (True), or is retried.

    Permanent failures (:data:`UNUSABLE_MODEL`): True. A transient one (429, 5xx, time-out):
    raises :class:`_RetryStep` so Temporal retries the step (its backoff, a 429's
    Retry-After) while this call has failed fewer than ``llm_max_attempts`` times in a row
    and the step's activity has attempts left (:func:`~overseer.runtime.llm.model_call_retryable`);
    True once it has had them (and outside a worker, where nothing retries). Any other
    model error (the budget): False, the caller re-raises it.
    """
    if isinstance(err, UNUSABLE_MODEL):
        return True
    if not err.retryable:
        return False
    if await model_call_retryable(err, run_id=str(payload.get("run_id") or ""), node=node,
                                  max_attempts=options.llm_max_attempts):
        log.warning("model call failed transiently; retrying the step", extra={
            **_log_fields(payload), "stage": node, "error_code": err.code})
        raise _RetryStep(_as_failure(err)) from err
    return True


def last_attempt(options: ThematicOptions, retry_policy: Any) -> int:
    """The attempt after which a coder or theme coder records its failure instead of raising.

    ``options.llm_max_attempts``, but never past the activity's own retry policy
    (``maximum_attempts``; 0 or None = unlimited): raising on the policy's last attempt
    would fail the run, which a coder must not do (seed R5.1, R5.4).
    """
    limit = int(getattr(retry_policy, "maximum_attempts", 0) or 0)
    return min(options.llm_max_attempts, limit) if limit > 0 else options.llm_max_attempts


def _keep_spent_tokens(err: Exception, update: dict[str, Any]) -> None:
    """A failed model call that got a reply still cost tokens: count them (R8.1)."""
    spent = failed_calls(err)
    if spent:
        update["llm_calls"] = spent


def _fell_back(err: OverseerError, *, stage: str, node: str, identity: Identity,
               fields: dict[str, Any]) -> dict[str, Any]:
    """A ``fallbacks`` entry for a model step that ran its rules strategy instead; logged."""
    entry = {"stage": stage, "node": node, "identity_id": identity.id, "strategy": "rules",
             **_error_dict(err)}
    log.warning("model failed; the step used the rules", extra={
        **fields, "stage": node, "error_code": entry["code"]})
    return entry


def _tolerated(err: Exception, *, stage: str, node: str, identity: Identity,
               fields: dict[str, Any]) -> dict[str, Any]:
    error = {"stage": stage, "node": node, "identity_id": identity.id, **_error_dict(err)}
    log.error("node failed; the run goes on without it", extra={
        **fields, "stage": node, "error_code": error["code"]})
    return error


def _log_failed(fields: dict[str, Any], stage: str, err: BaseException) -> None:
    log.error("thematic analysis failed", extra={
        **fields, "stage": stage, "status": "failed", "error_code": _error_dict(err)["code"],
        "error_message": _error_dict(err)["message"]})


def _error_dict(err: BaseException) -> dict[str, Any]:
    from overseer.plugin import error_dict

    return error_dict(err)


def _as_failure(err: Exception) -> Exception:
    """Domain errors leave nodes as Temporal ApplicationErrors (permanent ones non-retryable)."""
    if isinstance(err, OverseerError):
        from overseer.plugin import as_application_error

        return as_application_error(err)
    return err


def _log_fields(state: dict[str, Any]) -> dict[str, Any]:
    metadata = state.get("metadata") or {}
    dataset = state.get("dataset") or {}
    return {"analysis_id": state.get("run_id"),
            "account_id": dataset.get("account_id") or metadata.get("account_id"),
            "tenant_id": metadata.get("tenant_id"), "timestamp": _now()}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
