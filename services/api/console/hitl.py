"""Human-in-the-loop interrupt shapes the console renders as actions.

Three shapes people's graphs interrupt with today, each answered the way its graph reads
the answer:

- **Agent Inbox** (``HumanInterrupt``): ``{"action_request": {"action", "args"}, "config":
  {"allow_accept", "allow_edit", "allow_respond", "allow_ignore"}, "description"}``,
  usually inside a one-item list (``interrupt([request])[0]``). Answered with a
  ``HumanResponse`` ``{"type": "accept" | "edit" | "response" | "ignore", "args"}`` — in a
  list when the request came in one.
- **LangChain's ``HumanInTheLoopMiddleware``, batched** (``HITLRequest``):
  ``{"action_requests": [{"name", "args", "description"}], "review_configs":
  [{"action_name", "allowed_decisions"}]}``. Answered with ``{"decisions": [...]}``, one
  decision per action request, in order: ``{"type": "approve"}``, ``{"type": "edit",
  "edited_action": {"name", "args"}}``, ``{"type": "reject", "message"?}``, ``{"type":
  "respond", "message"}``.
- **The same middleware, per call** (``ToolApprovalRequest``): ``{"type": "tool_approval",
  "tool_call_id", "name", "args", "description"}``, answered with one decision.

Any other interrupt value keeps the console's generic view (the request as JSON and a
JSON answer).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from overseer.errors import InvalidRequestError

INBOX_TYPES = (("accept", "allow_accept"), ("edit", "allow_edit"),
               ("response", "allow_respond"), ("ignore", "allow_ignore"))
"""Agent Inbox's response types and the ``config`` flag that allows each."""
LANGCHAIN_DECISIONS = ("approve", "edit", "reject", "respond")
"""LangChain's decision types (all allowed when a review config does not say)."""
RUNTIME_KEYS = ("interrupt_id", "pending_interrupts", "other_interrupts")
"""Keys the runtime adds to an approval's payload beside the interrupt's own value."""


def _value(payload: Mapping[str, Any]) -> tuple[Any, bool]:
    """The interrupt's own value from an approval payload, and whether it came as a list."""
    value: Any = payload.get("value") if set(payload) - set(RUNTIME_KEYS) == {"value"} \
        else {k: v for k, v in payload.items() if k not in RUNTIME_KEYS}
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        return value[0], True
    return value, False


def human_interrupt(payload: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The actions a known interrupt shape asks a person about, or None for any other value.

    Returns:
        ``{"kind": "inbox" | "langchain" | "tool_approval", "listed": bool, "description",
        "actions": [{"name", "args", "description", "allowed": [decision types]}]}``.
    """
    if not payload:
        return None
    value, listed = _value(payload)
    if not isinstance(value, dict):
        return None
    request = value.get("action_request")
    if isinstance(request, dict) and isinstance(value.get("config"), dict):
        allowed = [kind for kind, flag in INBOX_TYPES if value["config"].get(flag)]
        return {"kind": "inbox", "listed": listed, "description": value.get("description"),
                "actions": [{"name": str(request.get("action") or ""),
                             "args": request.get("args") or {},
                             "description": value.get("description"), "allowed": allowed}]}
    requests = value.get("action_requests")
    if isinstance(requests, list) and requests and all(isinstance(r, dict) for r in requests):
        configs = {c.get("action_name"): c.get("allowed_decisions")
                   for c in value.get("review_configs") or [] if isinstance(c, dict)}
        return {"kind": "langchain", "listed": False, "description": None, "actions": [
            {"name": str(r.get("name") or ""), "args": r.get("args") or {},
             "description": r.get("description"),
             "allowed": [d for d in configs.get(r.get("name")) or LANGCHAIN_DECISIONS
                         if d in LANGCHAIN_DECISIONS]} for r in requests]}
    if value.get("type") == "tool_approval" and isinstance(value.get("name"), str):
        return {"kind": "tool_approval", "listed": False, "description": value.get("description"),
                "actions": [{"name": value["name"], "args": value.get("args") or {},
                             "description": value.get("description"),
                             "allowed": list(LANGCHAIN_DECISIONS)}]}
    return None


def _args(form: Mapping[str, str], i: int) -> Any:
    raw = form.get(f"args_{i}", "").strip()
    try:
        args = json.loads(raw) if raw else {}
    except json.JSONDecodeError as err:
        raise InvalidRequestError(
            f"the arguments of action {i + 1} are not valid JSON",
            details={"errors": {f"args_{i}": f"{err.msg} (line {err.lineno}, column {err.colno})"}}
        ) from err
    if not isinstance(args, dict):
        raise InvalidRequestError(f"the arguments of action {i + 1} must be a JSON object",
                                  details={"errors": {f"args_{i}": "not an object"}})
    return args


def human_resume(view: Mapping[str, Any], form: Mapping[str, str]) -> Any:
    """The answer to the interrupt ``view`` describes, from the reviewer's choices in ``form``.

    ``form`` holds, per action ``i``: ``choice_i`` (a decision type the action allows),
    ``args_i`` (the edited arguments, JSON) and ``message_i`` (a reason or a response).

    Raises:
        InvalidRequestError: a missing or disallowed choice, arguments that are not a JSON
            object, a response without text (422, ``details.errors`` names the field).
    """
    decisions: list[dict[str, Any]] = []
    for i, action in enumerate(view["actions"]):
        choice = form.get(f"choice_{i}", "")
        if choice not in action["allowed"]:
            raise InvalidRequestError(
                f"choose one of {', '.join(action['allowed'])} for {action['name']}",
                details={"errors": {f"choice_{i}": "missing or not allowed"}})
        message = form.get(f"message_{i}", "").strip()
        if choice in ("response", "respond") and not message:
            raise InvalidRequestError(f"write the response for {action['name']}",
                                      details={"errors": {f"message_{i}": "empty"}})
        if view["kind"] == "inbox":
            args: Any = {"accept": None, "ignore": None, "response": message,
                         "edit": {"action": action["name"], "args": None}}[choice]
            if choice == "edit":
                args["args"] = _args(form, i)
            answer = {"type": choice, "args": args}
            return [answer] if view["listed"] else answer
        decision: dict[str, Any] = {"type": choice}
        if choice == "edit":
            decision["edited_action"] = {"name": action["name"], "args": _args(form, i)}
        elif choice in ("reject", "respond") and message:
            decision["message"] = message
        decisions.append(decision)
    if view["kind"] == "tool_approval":
        return decisions[0]
    return {"decisions": decisions}
