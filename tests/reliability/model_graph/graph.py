"""A user graph that asks a chat model, written as a user writes one: support-ticket triage.

It never imports Overseer. ``triage`` asks an OpenAI-compatible model (``TRIAGE_LLM_BASE_URL``;
unset: offline) for the ticket's queue and the exact words that show it, streaming the
reply, with the client's own bounded retries (``max_retries=2``: a 429's Retry-After and
5xx). A reply it cannot use (prose, JSON cut off or stopped midway, a queue it does not
know, words the ticket does not contain) or a model that stays unavailable is no answer:
the keyword rules decide instead (``strategy: rules``, ``reason`` says why), and a ticket no
rule matches goes to a person (``interrupt`` with reason codes). So the model can only add
to what the rules give, never take it away.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

QUEUES: dict[str, tuple[str, ...]] = {
    "billing": ("refund", "charged", "invoice", "payment", "price"),
    "delivery": ("late", "delivery", "arrived", "shipping", "package"),
    "account": ("password", "log in", "login", "account"),
}
"""Each queue and the words that send a ticket to it (the rules)."""
MODEL = "gpt-4o-mini"
PROMPT = ("Route this support ticket. Reply with one JSON object only: "
          '{"queue": "<one of: ' + ", ".join(QUEUES) + '>", '
          '"quote": "<the exact words of the ticket that show it>"}.')


class Ticket(TypedDict, total=False):
    """The graph's state: the ticket in, its queue out, and how it was decided."""

    ticket: str
    queue: str | None
    quote: str | None
    strategy: str
    reason: str | None
    decided_by: str


def rules(ticket: str) -> tuple[str, str] | None:
    """The first queue one of whose words the ticket contains, with the words as written."""
    for queue, words in QUEUES.items():
        for word in words:
            found = re.search(rf"\b{re.escape(word)}\b", ticket, re.IGNORECASE)
            if found:
                return queue, found.group(0)
    return None


def usable(content: Any, ticket: str) -> tuple[str, str]:
    """The model's queue and quote, checked.

    Raises:
        ValueError: not a JSON object, an unknown queue, or a quote not in the ticket.
    """
    text = content if isinstance(content, str) else json.dumps(content)
    start, end = text.find("{"), text.rfind("}")
    data = json.loads(text[start:end + 1]) if 0 <= start < end else None
    if not isinstance(data, dict):
        raise ValueError("no JSON object in the reply")
    queue, quote = data.get("queue"), data.get("quote")
    if queue not in QUEUES or not isinstance(quote, str) or not quote or quote not in ticket:
        raise ValueError("the reply names no known queue with words of the ticket")
    return str(queue), quote


async def triage(state: Ticket) -> dict[str, Any]:
    """Ask the model when one is configured; the rules decide when it gives nothing usable."""
    ticket = state.get("ticket") or ""
    reason = None
    base_url = os.environ.get("TRIAGE_LLM_BASE_URL")
    if base_url:
        import openai
        from langchain_core.messages import HumanMessage, SystemMessage
        from langchain_openai import ChatOpenAI

        model = ChatOpenAI(base_url=base_url, api_key="not-needed", model=MODEL,
                           temperature=0, timeout=10, max_retries=2, streaming=True)
        try:
            reply = await model.ainvoke([SystemMessage(PROMPT), HumanMessage(ticket)])
            queue, quote = usable(reply.content, ticket)
            return {"queue": queue, "quote": quote, "strategy": f"llm:{MODEL}", "reason": None}
        except openai.APIError as err:
            reason = f"model_unavailable:{getattr(err, 'status_code', None) or type(err).__name__}"
        except ValueError:
            reason = "model_reply_unusable"
    found = rules(ticket)
    if found is None:
        return {"queue": None, "quote": None, "strategy": "rules", "reason": reason}
    return {"queue": found[0], "quote": found[1], "strategy": "rules", "reason": reason}


def route(state: Ticket) -> str:
    """A ticket without a queue goes to a person."""
    return END if state.get("queue") else "ask_person"


def ask_person(state: Ticket) -> dict[str, Any]:
    """A person picks the queue (``updates: {"queue": ...}`` in the decision)."""
    codes = ["no_rule_matched", *([state["reason"]] if state.get("reason") else [])]
    decision = interrupt({"kind": "ticket_triage", "ticket": state.get("ticket"),
                          "queues": list(QUEUES), "review_reason_codes": codes})
    updates = decision.get("updates") or {} if isinstance(decision, dict) else {}
    return {"queue": updates.get("queue"), "decided_by": "person"}


def _build() -> StateGraph:
    graph = StateGraph(Ticket)
    graph.add_node("triage", triage)
    graph.add_node("ask_person", ask_person)
    graph.add_edge(START, "triage")
    graph.add_conditional_edges("triage", route, ["ask_person", END])
    graph.add_edge("ask_person", END)
    return graph


ticket_triage = _build()
