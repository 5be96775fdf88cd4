"""A run segment's live stream: which LangGraph modes it streams, and its chunks on their way out.

An Agent Server run's segment writes LangGraph's chunks (:data:`STREAM_MODES` and what the run
asked for) to the run's live stream in Postgres as the loop makes them (:func:`live_chunk`,
:mod:`overseer.token_stream`); under the ``events`` mode the loop runs in LangChain's
``astream_events`` (:func:`chunks_and_events`); a pipeline's own stream protocol writes its
events the same way (:class:`OwnStream`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from overseer.fencing import Fence
from overseer.graph_codec import decode
from overseer.graph_state import claim_checked
from overseer.resources import get_runtime
from overseer.token_stream import (
    CHUNK_FLUSH_SECONDS,
    FLUSH_SECONDS,
    TokenWriter,
    chunk_item,
    event_item,
    own_item,
)

STREAM_MODES = ("values", "updates", "custom")
"""What an Agent Server run's segment always streams, live (:mod:`overseer.token_stream`)."""
EXTRA_STREAM_MODES = ("tasks", "checkpoints", "debug", "tools")
"""LangGraph modes an Agent Server run may also ask for (``SegmentCall.modes``)."""


class OwnStream:
    """A pipeline's own stream protocol in a segment: :meth:`RunStream.chunk` events, live.

    Written as rows of the run's live stream (:func:`overseer.token_stream.own_item`, in
    the loop's order, within :data:`overseer.token_stream.FLUSH_SECONDS`), as tokens are;
    the workflow publishes the protocol's other events (start, interrupt, decision, end)
    on its durable stream, and the pipeline's reader merges both
    (:func:`overseer.token_stream.merge_live`). Nothing of it crosses Temporal.
    """

    def __init__(self, stream: Any, writer: TokenWriter) -> None:
        self._stream, self.writer = stream, writer
        self.modes: tuple[str, ...] = tuple(stream.stream_modes)

    @classmethod
    def open(cls, spec: Any, run_id: str, encoded_input: dict[str, Any] | None,
             stream_base: int, fence: Fence | None = None) -> OwnStream:
        """The stream of ``spec`` for a segment of run ``run_id``, writing from ``stream_base``.

        Args:
            spec: the run's pipeline (its ``stream`` makes the protocol's stream).
            run_id: the run.
            encoded_input: the run's graph input, :func:`overseer.graph_codec.encode`-d
                (``SegmentCall.input``: the first segment's; None on a resume).
            stream_base: how many items the run's durable stream held when the segment started.
            fence: the segment attempt writing (:class:`overseer.token_stream.TokenWriter`).
        """
        graph_input = decode(encoded_input) if encoded_input is not None else None
        return cls(spec.run.stream(graph_input or {"run_id": run_id}),
                   TokenWriter(get_runtime().pool, run_id, stream_base, fence))

    async def chunk(self, mode: str, chunk: Any) -> None:
        """Buffer the protocol's events for one top-level LangGraph chunk."""
        for event in self._stream.chunk(mode, chunk):
            await self.writer.add(own_item(event))

    async def close(self) -> None:
        """Write what is buffered (before the segment reports).

        Raises:
            asyncpg.PostgresError, OSError: a write failed (Temporal retries the segment).
        """
        await self.writer.close()


async def chunks_and_events(events: AsyncIterator[dict[str, Any]],
                            tokens: TokenWriter) -> AsyncIterator[Any]:
    """LangGraph's ``(namespace, mode, chunk)`` out of ``astream_events``; the rest, live as ``events``.

    The run asked for the ``events`` stream mode: the loop runs under LangChain's
    ``astream_events(version="v2")``, as the Agent Server runs it then. The root run's
    ``on_chain_stream`` events carry LangGraph's chunks (the loop goes on with them as with
    ``astream``); every other event (the graph's and each node's, chat-model and tool
    events …) goes to the run's ``events`` readers, except those tagged
    ``langsmith:hidden`` (LangGraph's internal writers), which the Agent Server drops too.

    Args:
        events: the graph's ``astream_events(version="v2")``.
        tokens: the run's live stream writer (the other events go there).

    Yields:
        LangGraph's ``(namespace, mode, chunk)``, in the loop's order.
    """
    async for event in events:
        if "langsmith:hidden" in (event.get("tags") or ()):
            continue
        if event.get("event") == "on_chain_stream" and not event.get("parent_ids"):
            yield event["data"]["chunk"]
        else:
            await tokens.add(event_item(event))


async def live_chunk(tokens: TokenWriter, mode: str, chunk: Any) -> None:
    """One of LangGraph's chunks, live to the run's readers as the loop makes it.

    Claim-checked like the thread's state; a chunk holding the pause (``__interrupt__``)
    is left to the workflow's one ``interrupt`` item (the API gives ``updates``, then
    ``values``, as LangGraph streams a pause).

    Args:
        tokens: the run's live stream writer.
        mode: the chunk's stream mode (a subgraph's: ``"<mode>|<namespace>"``).
        chunk: LangGraph's chunk.

    Raises:
        asyncpg.PostgresError, OSError: a claim-checked value, or a full buffer, could not
            be written (the segment fails and Temporal retries it).
    """
    if isinstance(chunk, dict) and "__interrupt__" in chunk and mode in ("updates", "values"):
        return
    if mode == "updates" and isinstance(chunk, dict):  # {node: update}
        data: Any = {node: await claim_checked(update) for node, update in chunk.items()}
    else:
        data = await claim_checked(chunk)
    await tokens.add(chunk_item(mode, data), within=(  # a tool's start shows at once
        FLUSH_SECONDS if mode.split("|")[0] == "tools" else CHUNK_FLUSH_SECONDS))
