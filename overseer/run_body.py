"""An Agent Server run body, checked and turned into what a run's workflow takes.

A client's ``runs.create`` / ``runs.stream`` / ``runs.wait`` body (``input``, ``command``,
``config``, ``context``, ``stream_mode``, ``interrupt_before`` …) is refused here with a
422 before anything is queued (:func:`check_run_body`), and later turned into the graph's
input (:func:`graph_input`) and how its segments run (:func:`segment_settings`).
Pure functions: no database, no Temporal.
"""

from __future__ import annotations

import re
from typing import Any

from overseer.errors import InvalidRequestError
from overseer.graph_codec import to_jsonable
from overseer.pipelines import Pipeline
from overseer.registry import get_registry
from overseer.runs import with_run_keys

SEGMENT_STREAM_MODES = ("tasks", "checkpoints", "debug", "tools", "events")
"""LangGraph's own chunks the segment writes live when the run asks for them
(:mod:`overseer.token_stream`); ``tools`` is LangGraph's tool-call lifecycle
(``tool-started``, ``tool-finished``, ``tool-error``); ``events`` LangChain's callback
events (``astream_events(version="v2")``), as the Agent Server streams them."""


STREAM_MODES = ("values", "updates", "custom", "messages", "messages-tuple",
                *SEGMENT_STREAM_MODES)
"""Stream modes Overseer serves (:func:`overseer.thread_streams.run_events`): every chunk
comes live from LangGraph's own loop in the segment (:mod:`overseer.token_stream`)."""


UNSERVED_STREAM_MODES = {
    "lifecycle": "the installed LangGraph has no lifecycle stream mode",
}
"""Modes a client may name that Overseer refuses (422 ``stream_mode_unsupported``), and why."""


MULTITASK_STRATEGIES = ("enqueue", "reject", "interrupt", "rollback")
"""``multitask_strategy`` values; the first is the default, as on LangGraph's Agent Server."""


class StreamModeUnsupportedError(InvalidRequestError):
    """A ``stream_mode`` Overseer cannot honour faithfully (422); ``details.unsupported`` names it."""

    code = "stream_mode_unsupported"


def stream_modes(value: Any) -> list[str]:
    """The ``stream_mode`` of a request (a name or a list; default ``["values"]``), validated.

    Raises:
        StreamModeUnsupportedError: a mode in :data:`UNSERVED_STREAM_MODES` or an unknown one (422).
    """
    modes = [value] if isinstance(value, str) else [str(m) for m in (value or [])]
    modes = modes or ["values"]
    refused = [m for m in modes if m not in STREAM_MODES]
    if refused:
        raise StreamModeUnsupportedError(
            f"stream mode {', '.join(map(repr, refused))} is not served by Overseer",
            details={"unsupported": refused, "supported": list(STREAM_MODES),
                     "reasons": {m: UNSERVED_STREAM_MODES.get(m, "unknown stream mode")
                                 for m in refused}})
    return modes


def asks_for_messages(modes: Any) -> bool:
    """Whether stream modes (a name or a list, as a run body has them) ask for messages."""
    asked = [modes] if isinstance(modes, str) else list(modes or [])
    return bool({"messages", "messages-tuple"} & set(asked))


def check_webhook(url: Any) -> None:
    """A run's ``webhook``: None, or an absolute ``http``/``https`` URL with a host.

    Raises:
        InvalidRequestError: anything else (422, ``details.field`` ``webhook``).
    """
    from urllib.parse import urlsplit

    if url is None:
        return
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequestError("webhook must be an absolute http or https URL",
                                  details={"field": "webhook"})


MAX_AFTER_SECONDS = 366 * 24 * 3600
"""The longest a run may wait before it starts (``after_seconds``): a year."""


def check_run_options(pipeline: Pipeline, body: dict[str, Any]) -> None:
    """Refuse run options the graph cannot honour, before the run is queued.

    Raises:
        InvalidRequestError: ``config`` that is not an object or with a ``recursion_limit``
            that is not a positive integer; ``after_seconds`` that is not 0 to
            :data:`MAX_AFTER_SECONDS`; ``interrupt_before`` / ``interrupt_after`` that
            is not ``"*"`` or a list of the graph's nodes (422, ``details.field`` names it).
    """
    config = body.get("config")
    if config is not None and not isinstance(config, dict):
        raise InvalidRequestError("config must be an object", details={"field": "config"})
    delay = body.get("after_seconds")
    if delay is not None and (isinstance(delay, bool) or not isinstance(delay, int | float)
                              or not 0 <= delay <= MAX_AFTER_SECONDS):
        raise InvalidRequestError(f"after_seconds must be a number of seconds from 0 to "
                                  f"{MAX_AFTER_SECONDS}", details={"field": "after_seconds"})
    limit = (config or {}).get("recursion_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or limit < 1):
        raise InvalidRequestError("config.recursion_limit must be a positive integer",
                                  details={"field": "config"})
    for key in ("interrupt_before", "interrupt_after"):
        value = body.get(key)
        if not value:
            continue
        registry = get_registry()
        nodes = set(registry.app(pipeline.name).nodes if registry.functional(pipeline.name)
                    else registry.node_metadata(pipeline.name))
        if value != "*" and (not isinstance(value, list) or not set(map(str, value)) <= nodes):
            raise InvalidRequestError(
                f'{key} must be "*" or a list of the graph\'s nodes {sorted(nodes)}',
                details={"field": key})


def segment_settings(kwargs: dict[str, Any]) -> dict[str, Any]:
    """An Agent Server run's own choices of how it runs, by ``RunSettings`` field name.

    From its stored ``kwargs`` (checked by :func:`check_run_body` and
    :func:`check_run_options` when it was made): the stream modes its segments collect
    (``stream_mode``, with ``messages`` for the token stream), ``durability``,
    ``checkpoint_id``, its LangGraph ``config`` (``configurable``, ``tags``, ``metadata``,
    ``recursion_limit``), ``context``, ``interrupt_before`` / ``interrupt_after`` and
    ``stream_subgraphs``, as the Agent Server passes them to LangGraph.
    """
    out: dict[str, Any] = {}
    asked = kwargs.get("stream_mode")
    asked = [asked] if isinstance(asked, str) else list(asked or [])
    collected = [m for m in asked if m in SEGMENT_STREAM_MODES]
    if asks_for_messages(asked):
        collected.append("messages")  # tokens as the model makes them (overseer.token_stream)
    if collected:
        out["stream_modes"] = collected  # LangGraph's chunks the segments collect for it
    for key in ("durability", "checkpoint_id"):
        if kwargs.get(key):
            out[key] = kwargs[key]
    config = kwargs.get("config") or {}
    own = {k: config[k] for k in ("configurable", "tags", "metadata") if config.get(k)}
    if own:
        out["graph_config"] = own
    if config.get("recursion_limit"):
        out["recursion_limit"] = int(config["recursion_limit"])
    if kwargs.get("context") is not None:
        out["context"] = kwargs["context"]
    for key in ("interrupt_before", "interrupt_after"):
        if kwargs.get(key):
            out[key] = kwargs[key]
    if kwargs.get("stream_subgraphs"):
        out["stream_subgraphs"] = True
    return out


def check_run_body(pipeline: Pipeline, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``(body, multitask strategy)`` of a run with input, checked before it is queued.

    A ``checkpoint`` object's ``checkpoint_id`` becomes the body's ``checkpoint_id`` when
    the body has none (the SDK sends either).

    Raises:
        InvalidRequestError: an unknown ``multitask_strategy`` or ``durability``, or an
            option :func:`check_run_options` refuses (422, ``details.field`` names it).
    """
    strategy = body.get("multitask_strategy") or MULTITASK_STRATEGIES[0]
    if strategy not in MULTITASK_STRATEGIES:
        raise InvalidRequestError(f"multitask_strategy must be one of {MULTITASK_STRATEGIES}",
                                  details={"field": "multitask_strategy"})
    given = body.get("checkpoint")
    checkpoint: dict[str, Any] = given if isinstance(given, dict) else {}
    if body.get("checkpoint_id") is None and checkpoint.get("checkpoint_id"):
        body = {**body, "checkpoint_id": checkpoint["checkpoint_id"]}
    if body.get("durability") is not None and body["durability"] not in ("sync", "async", "exit"):
        raise InvalidRequestError("durability must be sync, async or exit",
                                  details={"field": "durability"})
    check_run_options(pipeline, body)
    return body, str(strategy)


def run_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """The body's run options as ``agent_runs.kwargs`` keeps them (JSON), for its later start."""
    keep = ("input", "command", "config", "context", "stream_mode", "stream_resumable",
            "stream_subgraphs", "interrupt_before", "interrupt_after", "on_completion",
            "if_not_exists", "checkpoint_id", "durability", "webhook", "after_seconds")
    kwargs: dict[str, Any] = to_jsonable({k: body[k] for k in keep if k in body})
    return kwargs


def graph_input(pipeline: Pipeline, body: dict[str, Any], run_id: str, *,
                has_state: bool) -> tuple[Any, Any]:
    """``(graph input, its JSON record)`` of a run body: input, or ``Command(goto, update)``.

    No input on a thread with state is ``None``: as on LangGraph, the run goes on from the
    thread's checkpoint (past a breakpoint the run before stopped at); on a new thread no
    input is ``{}``.

    Raises:
        InvalidRequestError: input that is not a JSON object, for a graph that is not a
            Functional API entrypoint (:func:`takes_any_input`) (422).
        pydantic.ValidationError: the pipeline's ``input_model`` refuses a thread's first input.
    """
    from langgraph.types import Command


    command = body.get("command") or {}
    if "resume" in command:  # a thread's next tasks, resumed (create_run: no run waits)
        return (Command(resume=command["resume"], goto=_goto(command.get("goto")),
                        update=command.get("update")), {"command": command})
    if command.get("goto") is not None or command.get("update") is not None:
        return (Command(goto=_goto(command.get("goto")), update=command.get("update")),
                {"command": command})
    value = body.get("input")
    if value is None and has_state:
        return None, None  # LangGraph goes on from the thread's checkpoint (a breakpoint's)
    if value is None:
        value = {}
    if not isinstance(value, dict):
        if takes_any_input(pipeline):
            return value, value
        raise InvalidRequestError("input must be a JSON object", details={"field": "input"})
    if pipeline.intake.input_model is not None and not has_state:
        value = pipeline.intake.input_model.model_validate(value).model_dump(mode="json")
    value = with_run_keys(pipeline, value, run_id, dict(body.get("metadata") or {}))
    return value, value


def takes_any_input(pipeline: Pipeline) -> bool:
    """True when a run's ``input`` may be any JSON value, not only an object.

    A Functional API entrypoint's (:meth:`overseer.registry.Registry.functional`), as
    LangGraph's server passes it: the entrypoint's one argument. A ``StateGraph``'s input
    updates its state's keys, so it must be an object.
    """
    return get_registry().functional(pipeline.name)


def _goto(goto: Any) -> Any:
    from langgraph.types import Send

    if isinstance(goto, dict) and "node" in goto:
        return Send(goto["node"], goto.get("input"))
    if isinstance(goto, list):
        return [_goto(g) for g in goto]
    return goto if goto is not None else ()


def resume_target(resume: Any,
                  shown: list[dict[str, Any]]) -> tuple[str | None, Any, dict[str, Any]]:
    """``(interrupt id, value, other answers)`` a ``command.resume`` gives, as LangGraph reads it.

    A non-empty dict whose keys are all interrupt ids (32 hex digits, LangGraph's
    ``is_xxh3_128_hexdigest``) names its interrupts: ``{id: value}`` answers ``id``'s approval
    with ``value`` (the gate refuses an id whose approval is not waiting: 409
    ``not_awaiting_approval``). It may name several, in any order, as LangGraph allows: the
    first id is the decision's, the others come back as ``{id: value}`` and are answered
    with it (each must be waiting too). Any other value answers the interrupt the server
    last showed for the thread (the oldest id), so a resume never lands on an interrupt its
    client has not seen.
    """
    if isinstance(resume, dict) and resume and \
            all(isinstance(k, str) and re.fullmatch(r"[0-9a-f]{32}", k) for k in resume):
        first, *others = sorted(resume)
        return first, resume[first], {k: resume[k] for k in others}
    ids = sorted(str(i["id"]) for i in shown if i.get("id"))
    return (ids[0] if ids else None), resume, {}
