"""The thread protocol's events: a run's Agent Server events as "Protocol v2" events.

``@langchain/react`` 1.x ``useStream`` reads a thread as these events
(:mod:`services.api.routes.agent_protocol_stream`). Every run is ``lifecycle running``,
then ``values`` (the full state), ``messages`` (LangGraph's token chunks as
``message-start`` / ``content-block-*`` / ``message-finish``), ``updates``, ``custom``,
``tasks`` (LangGraph's task starts and results), ``checkpoints`` (an envelope per
checkpoint: ``{id, parent_id, step, source}``) and ``tools`` (LangGraph's tool-call
events: ``tool-started``, ``tool-output-delta``, ``tool-finished``, ``tool-error``),
then ``input.requested`` per interrupt and exactly one terminal
``lifecycle`` (``completed``, ``failed {error}`` or ``interrupted``).

:class:`RunTranslator` derives them from a run's events as
:func:`overseer.thread_streams.run_events` reads them, so every connection derives the
same events in the same order: an event's ``event_id`` is
``"<run id>:<the run's own event id>.<j>"``, and its ``seq`` is the run's place on the
thread times :data:`SEQ_STRIDE` plus the event's place in the run, the same on every
connection and rising across the thread's runs.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import asyncpg

RUN_STREAM_MODES = ["values", "updates", "custom", "messages-tuple", "tasks", "checkpoints",
                    "tools"]
"""The stream modes a ``run.start`` run asks for (LangGraph's models stream tokens only for a
run that asks for messages; ``tasks``, ``checkpoints`` and ``tools`` feed those channels),
and those each run is read in."""
SEQ_STRIDE = 2 ** 32
"""``seq`` = the run's place on the thread (1, 2 …) × this + the event's place in its run."""


def checkpoint_envelope(chunk: dict[str, Any]) -> dict[str, Any]:
    """The ``checkpoints`` channel's envelope of one of LangGraph's ``checkpoints`` chunks.

    ``{id, parent_id?, step, source}``: the checkpoint to fork from, its parent, its
    superstep (-1 for the input) and LangGraph's ``metadata.source`` (``input`` / ``loop``
    / ``update`` / ``fork``); the state itself stays with ``values`` and ``state.get``.
    """
    def checkpoint_id(config: Any) -> str | None:
        found = ((config or {}).get("configurable") or {}).get("checkpoint_id") \
            if isinstance(config, dict) else None
        return str(found) if found else None

    found = chunk.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    envelope: dict[str, Any] = {"id": checkpoint_id(chunk.get("config")),
                                "step": metadata.get("step"), "source": metadata.get("source")}
    parent = checkpoint_id(chunk.get("parent_config"))
    if parent:
        envelope["parent_id"] = parent
    return envelope


@dataclass
class _OpenMessage:
    """A message being streamed: its id, its blocks so far and the next block index."""

    id: str
    role: str
    text_index: int | None = None
    text: str = ""
    tools: dict[Any, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    """Tool-call chunks by their own index (or id): (block index, the chunk so far)."""
    usage: dict[str, int] = field(default_factory=dict)
    blocks: int = 0

    def next_index(self) -> int:
        self.blocks += 1
        return self.blocks - 1


class RunTranslator:
    """Turns one run's Agent Server events (:func:`overseer.thread_streams.run_events`) into protocol events.

    - ``metadata`` (the run's first event) → ``lifecycle {event: "running", graph_name}``.
    - ``values`` → ``values`` (the full state without ``__interrupt__``; the state a pause
      repeats is not sent twice); a ``__interrupt__`` in it is kept for the ending.
    - ``updates`` → one ``updates {node, values}`` per node (``node`` also in ``params``).
    - ``custom`` (``custom|<ns>``) → ``custom {payload}``.
    - ``messages`` (``messages|<ns>``) ``[chunk, metadata]``, a model's token chunk →
      ``message-start {role, id}`` on the first chunk of an id, ``content-block-start`` /
      ``content-block-delta`` (``text-delta`` for text; ``block-delta`` with the whole
      ``tool_call_chunk`` so far for tool calls) per chunk; the last chunk
      (``chunk_position: "last"``), a chunk of another id at the same node, the next item
      of the durable stream or the run's ending closes it: ``content-block-finish`` per
      block (text; ``tool_call`` with parsed ``args``, ``invalid_tool_call`` when they do
      not parse), then ``message-finish`` (with ``usage`` when the model gave it).
      ``params.node`` is LangGraph's ``langgraph_node``. Whole messages (a node's own, a
      human's) are not sent here: they come in ``values``.
      A ``remove`` message (a retried segment takes back what its dead attempt streamed)
      ends that message with ``error {code: attempt_lost}``; the first of a run of them is
      followed by ``lifecycle running``.
    - ``end`` / ``error``: the caller adds :meth:`ended` (``input.requested`` per interrupt
      then ``lifecycle interrupted``; ``completed``; ``failed {error}``; or ``interrupted``
      for a run cancelled through the API).
    - A subgraph's chunks (``<mode>|<namespace>``, a run started with ``stream_subgraphs``,
      as ``run.start`` starts every run) are the same events at that namespace (``values``
      without ``__interrupt__``: the interrupts are asked at the root). The first event of a
      namespace (and of each of its prefixes) is preceded by ``lifecycle {event: "started",
      graph_name}`` there, ``graph_name`` being the node the namespace runs
      (``"<node>:<task id>"``); the ``updates`` of that node one level up close it with
      ``lifecycle completed`` (the oldest still open of that node: a fan-out's tasks close
      in order), and the run's ending closes every namespace still open, deepest first,
      before the root's own ending, as the Agent Server's event session does.

    Args:
        run: the run's ``agent_runs`` row.
        place: the run's rank on its thread (1 for its first run), the high part of ``seq``.
    """

    def __init__(self, run: asyncpg.Record, place: int) -> None:
        self.run_id = str(run["run_id"])
        self.graph = str(run["graph_id"])
        self.base = place * SEQ_STRIDE
        self.count = 0
        self.open: dict[tuple[tuple[str, ...], str | None], _OpenMessage] = {}
        self.values: Any = None
        self.interrupts: list[dict[str, Any]] = []
        self.done = False
        self.spaces: dict[tuple[str, ...], bool] = {}
        self.retracting = False
        """The last message event was a retraction (the next one announces no ``running``)."""
        """Every subgraph namespace seen, in the order first seen: still open (True) or closed."""

    def _event(self, source: str, j: int, method: str, data: Any, *,
               namespace: tuple[str, ...] = (), node: str | None = None) -> dict[str, Any]:
        self.count += 1
        params: dict[str, Any] = {"namespace": list(namespace),
                                  "timestamp": int(time.time() * 1000), "data": data}
        if node is not None:
            params["node"] = node
        return {"type": "event", "event_id": f"{self.run_id}:{source}.{j}",
                "seq": self.base + self.count, "method": method, "params": params}

    def feed(self, source: str | None, name: str, data: Any) -> list[dict[str, Any]]:
        """The protocol events of one Agent Server event ``(source id, name, data)``."""
        source = source or "start"
        pieces: list[tuple[str, Any, tuple[str, ...], str | None]] = []
        kind, _, rest = name.partition("|")
        namespace = tuple(rest.split("|")) if rest else ()
        pieces += self._started(namespace)
        if not (kind == "messages" and isinstance(data, list) and data
                and isinstance(data[0], dict) and data[0].get("type") == "remove"):
            self.retracting = False
        if name == "metadata":
            pieces.append(("lifecycle", {"event": "running", "graph_name": self.graph}, (), None))
        elif kind == "messages":
            pieces += self._chunk(data, namespace)
        elif kind in ("tasks", "tools") and isinstance(data, dict):
            # LangGraph's own chunks: a task's start or result; a tool call's tool-started /
            # tool-output-delta / tool-finished / tool-error, as the protocol names them
            node = data.get("name") if kind == "tasks" else None
            pieces.append((kind, data, namespace, str(node) if node else None))
        elif kind == "checkpoints" and isinstance(data, dict):
            pieces.append(("checkpoints", checkpoint_envelope(data), namespace, None))
        else:
            pieces += self._close_all(namespace)
            if name == "values" and isinstance(data, dict):
                found = data.get("__interrupt__")
                if isinstance(found, list):
                    self.interrupts = [i for i in found if isinstance(i, dict)]
                state = {k: v for k, v in data.items() if k != "__interrupt__"}
                if state != self.values:
                    self.values = state
                    pieces.append(("values", state, (), None))
            elif kind == "values" and namespace:  # a subgraph's state (a task's own value)
                pieces.append(("values", {k: v for k, v in data.items() if k != "__interrupt__"}
                               if isinstance(data, dict) else data, namespace, None))
            elif kind == "updates" and isinstance(data, dict):
                for node, update in data.items():
                    if node == "__interrupt__":  # asked at the root, at the run's ending
                        continue
                    pieces.append(("updates", {"node": node, "values": update}, namespace, node))
                    pieces += self._node_done(namespace, str(node))
            elif kind == "custom":
                pieces.append(("custom", {"payload": data}, namespace, None))
        return self._with_ids(source, pieces)

    def ended(self, source: str | None, *, cancelled: bool = False,
              error: str | None = None) -> list[dict[str, Any]]:
        """The run's ending, once: ``completed``, ``failed {error}`` or ``interrupted``.

        ``cancelled`` (the run was cancelled through the API): ``interrupted``; else with
        ``error``: ``failed {error}``; else a paused run sends ``input.requested`` per
        interrupt before ``interrupted``; else ``completed``.
        """
        if self.done:
            return []
        self.done = True
        pieces = [*self._close_all(()), *self._close_under(())]
        base: dict[str, Any] = {"graph_name": self.graph}
        if cancelled:
            pieces.append(("lifecycle", {"event": "interrupted", **base}, (), None))
        elif error is not None:
            pieces.append(("lifecycle", {"event": "failed", "error": error, **base}, (), None))
        elif self.interrupts:
            pieces += [("input.requested", {"interrupt_id": str(i.get("id")),
                                            "payload": i.get("value")}, (), None)
                       for i in self.interrupts]
            pieces.append(("lifecycle", {"event": "interrupted", **base}, (), None))
        else:
            pieces.append(("lifecycle", {"event": "completed", **base}, (), None))
        return self._with_ids(f"{source or 'end'}.end", pieces)

    def _with_ids(self, source: str,
                  pieces: list[tuple[str, Any, tuple[str, ...], str | None]]
                  ) -> list[dict[str, Any]]:
        return [self._event(source, j, method, data, namespace=namespace, node=node)
                for j, (method, data, namespace, node) in enumerate(pieces)]

    def _chunk(self, data: Any, namespace: tuple[str, ...]
               ) -> list[tuple[str, Any, tuple[str, ...], str | None]]:
        if not isinstance(data, list) or len(data) < 2 or not isinstance(data[0], dict):
            return []
        message, metadata = data[0], data[1] if isinstance(data[1], dict) else {}
        kind = str(message.get("type") or "")
        if kind == "remove":  # a dead attempt's message, taken back (a retried segment)
            return self._retracted(str(message.get("id") or ""))
        if not kind.endswith("Chunk"):
            return []  # a whole message: it comes in values
        node = metadata.get("langgraph_node")
        node = str(node) if node is not None else None
        key = (namespace, node)
        mid = str(message.get("id") or "")
        out: list[tuple[str, Any, tuple[str, ...], str | None]] = []
        current = self.open.get(key)
        if current is not None and current.id != mid:
            out += self._close(key)
            current = None
        if current is None:
            role = kind.removesuffix("MessageChunk").lower() or "ai"
            current = self.open[key] = _OpenMessage(id=mid, role=role)
            start: dict[str, Any] = {"event": "message-start", "role": role, "id": mid}
            if role == "tool" and message.get("tool_call_id"):
                start["tool_call_id"] = message["tool_call_id"]
            out.append(("messages", start, namespace, node))
        text = _text_of(message.get("content"))
        if text:
            if current.text_index is None:
                current.text_index = current.next_index()
                out.append(("messages", {"event": "content-block-start",
                                         "index": current.text_index,
                                         "content": {"type": "text", "text": ""}},
                            namespace, node))
            current.text += text
            out.append(("messages", {"event": "content-block-delta", "index": current.text_index,
                                     "delta": {"type": "text-delta", "text": text}},
                        namespace, node))
        for piece in message.get("tool_call_chunks") or []:
            if not isinstance(piece, dict):
                continue
            slot = piece.get("index") if piece.get("index") is not None else piece.get("id")
            if slot not in current.tools:
                current.tools[slot] = (current.next_index(), {
                    "type": "tool_call_chunk", "id": piece.get("id"), "name": piece.get("name"),
                    "args": "", "index": piece.get("index")})
                at, block = current.tools[slot]
                out.append(("messages", {"event": "content-block-start", "index": at,
                                         "content": dict(block)}, namespace, node))
            at, block = current.tools[slot]
            for k in ("id", "name"):
                if piece.get(k) is not None:
                    block[k] = piece[k]
            if piece.get("args"):
                block["args"] += str(piece["args"])
                out.append(("messages", {"event": "content-block-delta", "index": at,
                                         "delta": {"type": "block-delta", "fields": dict(block)}},
                            namespace, node))
        for k, v in (message.get("usage_metadata") or {}).items():
            if k in ("input_tokens", "output_tokens", "total_tokens") and isinstance(v, int):
                current.usage[k] = current.usage.get(k, 0) + v
        if message.get("chunk_position") == "last":
            out += self._close(key)
        return out

    def _close_all(self, namespace: tuple[str, ...]
                   ) -> list[tuple[str, Any, tuple[str, ...], str | None]]:
        """Finish the messages open at ``namespace`` or below it (a step there has ended)."""
        out: list[tuple[str, Any, tuple[str, ...], str | None]] = []
        for key in list(self.open):
            if key[0][:len(namespace)] == namespace:
                out += self._close(key)
        return out

    def _retracted(self, mid: str) -> list[tuple[str, Any, tuple[str, ...], str | None]]:
        """A message an attempt that died streamed, taken back by the attempt that runs again.

        Its open stream ends with the protocol's message ``error`` (``code``
        ``attempt_lost``), and the first of a run of retractions says ``lifecycle running``
        again: ``useStream`` drops every message streamed but not yet in ``values`` (what
        the thread keeps comes back with the next ``values``).
        """
        out: list[tuple[str, Any, tuple[str, ...], str | None]] = []
        for key, current in list(self.open.items()):
            if current.id == mid:
                del self.open[key]
                out.append(("messages", {
                    "event": "error", "code": "attempt_lost",
                    "message": "the worker streaming this message stopped; its node runs "
                               "again from the run's last checkpoint"}, key[0], key[1]))
        if not self.retracting:
            self.retracting = True
            out.append(("lifecycle", {"event": "running", "graph_name": self.graph}, (), None))
        return out

    def _started(self, namespace: tuple[str, ...]
                 ) -> list[tuple[str, Any, tuple[str, ...], str | None]]:
        """``lifecycle started`` for each prefix of ``namespace`` not seen before, outermost first."""
        out: list[tuple[str, Any, tuple[str, ...], str | None]] = []
        for depth in range(1, len(namespace) + 1):
            prefix = namespace[:depth]
            if prefix not in self.spaces:
                self.spaces[prefix] = True
                out.append(("lifecycle", {"event": "started",
                                          "graph_name": _graph_name(prefix)}, prefix, None))
        return out

    def _node_done(self, parent: tuple[str, ...], node: str
                   ) -> list[tuple[str, Any, tuple[str, ...], str | None]]:
        """Close the oldest open namespace ``parent + ("<node>:…",)``: that node's task ended."""
        if node.startswith("__"):
            return []
        for namespace, still in self.spaces.items():
            if still and len(namespace) == len(parent) + 1 and namespace[:-1] == parent \
                    and _graph_name(namespace) == node:
                return self._close_under(namespace) + self._closed(namespace)
        return []

    def _close_under(self, prefix: tuple[str, ...]
                     ) -> list[tuple[str, Any, tuple[str, ...], str | None]]:
        """Close every namespace still open strictly below ``prefix``, deepest first."""
        out: list[tuple[str, Any, tuple[str, ...], str | None]] = []
        for namespace in sorted((ns for ns, still in self.spaces.items() if still
                                 and len(ns) > len(prefix) and ns[:len(prefix)] == prefix),
                                key=len, reverse=True):
            out += self._closed(namespace)
        return out

    def _closed(self, namespace: tuple[str, ...]
                ) -> list[tuple[str, Any, tuple[str, ...], str | None]]:
        self.spaces[namespace] = False
        return [*self._close_all(namespace),
                ("lifecycle", {"event": "completed", "graph_name": _graph_name(namespace)},
                 namespace, None)]

    def _close(self, key: tuple[tuple[str, ...], str | None]
               ) -> list[tuple[str, Any, tuple[str, ...], str | None]]:
        current = self.open.pop(key)
        namespace, node = key
        finished: list[tuple[int, dict[str, Any]]] = []
        if current.text_index is not None:
            finished.append((current.text_index, {"type": "text", "text": current.text}))
        for at, block in current.tools.values():
            try:
                args = json.loads(block["args"]) if block["args"] else {}
                final = {"type": "tool_call", "id": block["id"], "name": block["name"],
                         "args": args if isinstance(args, dict) else {"value": args}}
            except ValueError:
                final = {"type": "invalid_tool_call", "id": block["id"], "name": block["name"],
                         "args": block["args"], "error": "the arguments are not JSON"}
            finished.append((at, final))
        out: list[tuple[str, Any, tuple[str, ...], str | None]] = [
            ("messages", {"event": "content-block-finish", "index": index, "content": content},
             namespace, node) for index, content in sorted(finished, key=lambda f: f[0])]
        finish: dict[str, Any] = {"event": "message-finish"}
        if current.usage:
            finish["usage"] = current.usage
        out.append(("messages", finish, namespace, node))
        return out


def _graph_name(namespace: tuple[str, ...]) -> str:
    """The node a subgraph namespace runs: its last part without the task id (``"<node>:<id>"``)."""
    return namespace[-1].split(":", 1)[0]


def _text_of(content: Any) -> str:
    """The text in a chunk's ``content``: the string, or its ``text`` blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text") or "") for b in content
                       if isinstance(b, dict) and b.get("type") in ("text", None))
    return ""
