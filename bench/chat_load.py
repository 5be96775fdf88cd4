"""Many people chatting with a streaming agent at once: Overseer beside the Agent Server peer.

The job Overseer exists for, in load terms: an agent's run spends its life waiting on a model
that streams tokens to a person watching. The agent is :mod:`bench.user_graph.chat` (a fake
model paced as hosted models stream: first token after ``chat_first_token_ms``, then one every
``chat_token_gap_ms``, around a ``chat_tool_ms`` tool), the same file on both sides. Each
person opens a thread and streams one run on it with the official ``langgraph-sdk``
(``runs.stream(stream_mode="messages-tuple")``), ``chat_people`` at once, ``chat_runs`` in
all, then reads the thread's state and checks that the stream rebuilds the thread's messages
exactly (:func:`rebuild_messages` against :func:`thread_messages`).

Two phases, each side by side in the same invocation:

* ``chat_load_defaults`` — both sides as they start: Overseer's worker on its default slot
  sizing, the peer with langgraph-api's default ``N_JOBS_PER_WORKER`` (10).
* ``chat_load_widened`` — both widened to ``chat_widened`` runs at once: Overseer's worker
  with that many fixed activity slots, the peer with that many jobs.

Each records throughput (runs/s), time to first token and whole-run p50/p95, and server CPU
per run by process (the bench client's own CPU is left out of the total).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bench import agent_server_peer as asp
from bench import graph_scenarios as gs
from bench import inputs
from bench import scenarios as sc
from bench.harness import Harness, cpu_per_run_ms, run_bounded
from bench.stats import ScenarioResult, Trial, latency_summary, load_average

GRAPH_NAME = "bench_chat"
"""The chat agent's graph id on both sides (registered by the bench's ``langgraph.json``)."""


@dataclass
class ChatBenchConfig:
    """Sizes and pacing of the ``chat_load`` scenario.

    Attributes:
        chat_runs: runs (one a chat) per side per trial.
        chat_people: chats in flight at once.
        chat_widened: runs at once per side in the widened phase (Overseer's fixed activity
            slots, the peer's ``N_JOBS_PER_WORKER``).
        chat_trials: trials per side and phase.
        chat_first_token_ms: the model's time to its first token.
        chat_token_gap_ms: the model's time between tokens.
        chat_tokens: tokens per reply (two replies a run).
        chat_tool_ms: the tool's time.
        chat_waiting: chats waiting on a slow model at once on one worker (``waiting_chats``).
        chat_slow_model_ms: that slow model's time to its first token.
        chat_four_step_runs: document_intake runs, one at a time, timed alone and beside them.
    """

    chat_runs: int = 200
    chat_people: int = 50
    chat_widened: int = 100
    chat_trials: int = 1
    chat_first_token_ms: float = 300.0
    chat_token_gap_ms: float = 25.0
    chat_tokens: int = 30
    chat_tool_ms: float = 500.0
    chat_waiting: int = 1000
    chat_slow_model_ms: float = 120_000.0
    chat_four_step_runs: int = 15


def pacing_env(ccfg: ChatBenchConfig) -> dict[str, str]:
    """The chat agent's pacing as the ``BENCH_CHAT_*`` variables both sides read."""
    return {"BENCH_CHAT_FIRST_TOKEN_MS": f"{ccfg.chat_first_token_ms:g}",
            "BENCH_CHAT_TOKEN_GAP_MS": f"{ccfg.chat_token_gap_ms:g}",
            "BENCH_CHAT_TOKENS": str(ccfg.chat_tokens),
            "BENCH_CHAT_TOOL_MS": f"{ccfg.chat_tool_ms:g}"}


def use_chat_pacing(ccfg: ChatBenchConfig) -> None:
    """Set :func:`pacing_env` for this process and every child it starts (before the stack starts)."""
    os.environ.update(pacing_env(ccfg))


def widened_worker_env(slots: int) -> dict[str, str]:
    """An Overseer worker's settings for ``slots`` fixed activity slots."""
    return {"OVERSEER_WORKER_ACTIVITY_SLOTS": "fixed",
            "OVERSEER_WORKER_MAX_CONCURRENT_ACTIVITIES": str(slots)}


# -- checking a stream against its thread (pure; unit-tested) --------------------------------------


def rebuild_messages(parts: Sequence[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The messages a client rebuilds from a run's ``messages-tuple`` events, in order.

    A chunk (``AIMessageChunk``) adds its content to the message of its id; a whole message
    (a tool's result, a reply that was not streamed) sets it; a ``remove`` (LangChain's
    ``RemoveMessage``: a retried segment takes back what a dead attempt streamed) drops it,
    as LangGraph's ``add_messages`` and ``useStream`` do.

    Args:
        parts: each event's message dict (``data[0]`` of a ``messages`` event), in order.

    Returns:
        ``[(id, type, content)]`` in the order each id first came; ``type`` without ``Chunk``.
    """
    order: list[str] = []
    types: dict[str, str] = {}
    content: dict[str, str] = {}
    for msg in parts:
        mid = str(msg.get("id"))
        if msg.get("type") == "remove":
            if mid in content:
                order.remove(mid)
                del content[mid]
            continue
        if mid not in content:
            order.append(mid)
            content[mid] = ""
        kind = str(msg.get("type", ""))
        text = msg.get("content") if isinstance(msg.get("content"), str) else str(msg.get("content"))
        if kind.endswith("Chunk"):
            content[mid] += text or ""
            types[mid] = kind.removesuffix("Chunk").removesuffix("Message").lower() or "ai"
        else:
            content[mid] = text or ""
            types[mid] = kind
    return [(m, types[m], content[m]) for m in order]


def thread_messages(values: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``[(id, type, content)]`` of a thread's messages that a run made (the person's are left out)."""
    return [(str(m.get("id")), str(m.get("type")), str(m.get("content")))
            for m in values.get("messages", []) if m.get("type") != "human"]


@dataclass
class ChatOutcome:
    """One chat as its person saw it.

    Attributes:
        first_token_s: from the run's request to its first non-empty token (None: none came).
        whole_s: from the request to the stream's end.
        matches: the stream rebuilt exactly the thread's messages.
        error: what failed, if anything.
        details: for a stream that did not match, the first messages of both sides.
    """

    first_token_s: float | None = None
    whole_s: float = 0.0
    matches: bool = False
    error: str = ""
    details: dict[str, Any] = field(default_factory=dict)


async def one_chat(client: Any, assistant: str, text: str) -> ChatOutcome:
    """Open a thread, stream one run on it (``messages-tuple``), check it against the thread."""
    out = ChatOutcome()
    try:
        thread = await client.threads.create()
        parts: list[dict[str, Any]] = []
        t0 = time.perf_counter()
        async for part in client.runs.stream(
                thread["thread_id"], assistant, stream_mode="messages-tuple",
                input={"messages": [{"role": "user", "content": text}]}):
            if part.event.startswith("messages") and isinstance(part.data, list) and part.data:
                msg = part.data[0]
                if out.first_token_s is None and msg.get("content"):
                    out.first_token_s = time.perf_counter() - t0
                parts.append(msg)
            elif part.event == "error":
                out.error = str(part.data)[:160]
        out.whole_s = time.perf_counter() - t0
        state = await client.threads.get_state(thread["thread_id"])
        streamed, kept = rebuild_messages(parts), thread_messages(state["values"])
        out.matches = streamed == kept and bool(kept)
        if not out.matches:
            out.details = {"streamed": streamed[:4], "thread": kept[:4]}
    except Exception as exc:  # noqa: BLE001 — counted as a failed chat, kept for the note
        out.error = f"{type(exc).__name__}: {exc}"[:160]
    return out


def _summary(outcomes: Sequence[ChatOutcome], elapsed: float) -> dict[str, Any]:
    firsts = [o.first_token_s for o in outcomes if o.first_token_s is not None]
    wholes = [o.whole_s for o in outcomes if not o.error]
    return {"elapsed_s": round(elapsed, 3), "runs": len(outcomes),
            "completed": sum(1 for o in outcomes if not o.error),
            "streams_matching": sum(1 for o in outcomes if o.matches),
            "first_token": latency_summary(firsts), "whole_run": latency_summary(wholes)}


async def _trial(h: Harness, peer: asp.LanghostPeer, side: str, clients: dict[str, Any],
                 ccfg: ChatBenchConfig) -> Trial:
    def cpu() -> dict[str, float]:
        return h.cpu_seconds() if side == "overseer" else {**peer.cpu_seconds(),
                                                             "bench": asp._bench_cpu()}

    async def chat(text: str) -> ChatOutcome:
        return await one_chat(clients[side], GRAPH_NAME, text)

    load, cpu0 = load_average(), cpu()
    elapsed, _, outcomes = await run_bounded(
        [f"where is my order {t}" for t in gs.topics(ccfg.chat_runs)], chat, concurrency=ccfg.chat_people)
    per_run = cpu_per_run_ms(cpu0, cpu(), ccfg.chat_runs)
    server = {k: v for k, v in per_run.items() if k != "bench"}
    summary = _summary(outcomes, elapsed)
    errors = sorted({o.error for o in outcomes if o.error})[:3]
    mismatch = next((o.details for o in outcomes if o.details), None)
    return Trial(summary["completed"] / elapsed, load, {
        **summary, "cpu_ms_per_run": per_run, "cpu_ms_per_run_total": round(sum(server.values()), 1),
        **({"errors": errors} if errors else {}),
        **({"first_mismatch": mismatch} if mismatch else {})})


async def _restart_worker(h: Harness, env: dict[str, str]) -> None:
    """Replace the stack's worker by one with ``env`` (SIGTERM: it drains, nothing is lost)."""
    await asyncio.to_thread(h.stack.kill_worker, 0, signal.SIGTERM)
    h.stack.start_worker(**env)
    await sc.wait_worker_polling(h)


async def chat_load(h: Harness, cfg: sc.BenchConfig, ccfg: ChatBenchConfig | None = None,
                    ) -> list[ScenarioResult]:
    """Both phases (defaults, widened), each Overseer against the peer; see the module docstring.

    Returns:
        ``[chat_load_defaults, chat_load_widened]``; when the peer cannot be set up, one
        result carrying the skip message and no trials.
    """
    ccfg = ccfg or ChatBenchConfig()
    from langgraph_sdk import get_client

    common = {"runs_per_trial": ccfg.chat_runs, "people": ccfg.chat_people,
              "pacing": pacing_env(ccfg), "peer": asp.LANGHOST_REQUIREMENT}
    phases = {
        "defaults": ScenarioResult(
            "chat_load_defaults", f"runs/s, {ccfg.chat_people} people streaming messages-tuple",
            higher_is_better=True, baseline_name=f"{asp.PEER_NAME}, N_JOBS_PER_WORKER=10",
            target="≥ 3 × the peer, first token p95 ≤ 1.5 s, every stream = its thread",
            target_value=3.0, extra={**common, "overseer_worker": "default slot sizing",
                                     "peer_jobs_per_worker": 10}),
        "widened": ScenarioResult(
            "chat_load_widened", f"runs/s, {ccfg.chat_people} people, both widened",
            higher_is_better=True,
            baseline_name=f"{asp.PEER_NAME}, N_JOBS_PER_WORKER={ccfg.chat_widened}",
            target="≥ 1.0 × the peer (aim 1.5 ×), first token p50 ≤ peer's + 50 ms, server "
                   "CPU per run ≤ 1.3 × the peer's, every stream = its thread",
            target_value=1.0, extra={**common, "overseer_worker": widened_worker_env(ccfg.chat_widened),
                                     "peer_jobs_per_worker": ccfg.chat_widened})}
    overseer = get_client(url=h.stack.api_url, api_key=h.stack.tokens["admin"])
    for phase, result in phases.items():
        jobs = 10 if phase == "defaults" else ccfg.chat_widened
        try:
            peer = asp.LanghostPeer(io_ms=0, jobs_per_worker=jobs)
            await peer.__aenter__()
        except asp.PeerUnavailable as exc:
            result.notes.append(asp.skip_message(str(exc)))
            result.target, result.target_value = f"(skipped) {result.target}", None
            return [result]
        try:
            if phase == "widened":
                await _restart_worker(h, widened_worker_env(ccfg.chat_widened))
            clients = {"overseer": overseer, "baseline": get_client(url=peer.url, api_key=None)}
            for client in clients.values():  # warm both
                await run_bounded(["warm up"] * 4, partial(one_chat, client, GRAPH_NAME), concurrency=4)
            for i in range(ccfg.chat_trials):
                for side in gs._order(i):
                    trial = await _trial(h, peer, side, clients, ccfg)
                    (result.overseer if side == "overseer" else result.baseline).append(trial)
        finally:
            await peer.__aexit__(None, None, None)
            if phase == "widened":
                await _restart_worker(h, {})
        _verdicts(result, phase)
    return list(phases.values())


async def waiting_chats(h: Harness, cfg: sc.BenchConfig, ccfg: ChatBenchConfig | None = None,
                        ) -> ScenarioResult:
    """``chat_waiting`` chats waiting on a slow model on one worker, a document_intake run beside them.

    The 4-step p50 of one text-layer document_intake run at a time is taken alone, then with
    the chats in flight (each its own thread and run, started through the Agent Server API,
    every one holding an activity slot: its segment has written its first checkpoint and
    waits on the model); the worker's RSS is read then. The chats are cancelled after.

    Returns:
        ``waiting_chats``: the ratio of the two p50s (target ≤ 1.5 ×) and the worker's RSS
        (target ≤ 1 GB) in its checks.
    """
    ccfg = ccfg or ChatBenchConfig()
    from langgraph_sdk import get_client

    res = ScenarioResult(
        "waiting_chats", "document_intake 4-step p50 ms", higher_is_better=False,
        baseline_name="the same runs, the worker otherwise idle",
        target=f"beside {ccfg.chat_waiting} waiting chats ≤ 1.5 × alone; worker RSS ≤ 1 GB",
        target_value=1.5, extra={"chats": ccfg.chat_waiting,
                                 "slow_model_first_token_ms": ccfg.chat_slow_model_ms})

    async def four_step_p50() -> dict[str, float]:
        runs = await h.store([inputs.text_pdf(s) for s in sc.fresh_seeds(ccfg.chat_four_step_runs)])
        _, lat, _ = await run_bounded(runs, h.run_to_end, concurrency=1)
        return latency_summary(lat)

    await four_step_p50()  # warm
    alone = await four_step_p50()
    res.baseline.append(Trial(alone["p50_ms"], load_average(), {"latency": alone}))
    await _restart_worker(h, {"BENCH_CHAT_FIRST_TOKEN_MS": f"{ccfg.chat_slow_model_ms:g}"})
    client = get_client(url=h.stack.api_url, api_key=h.stack.tokens["admin"])
    rss_idle = h.stack.process_rss_bytes().get("worker-0", 0)

    async def start_chat(i: int) -> tuple[str, str]:
        thread = await client.threads.create()
        chat_input: Any = {"messages": [{"role": "user", "content": f"where is my order {i}"}]}
        run = await client.runs.create(thread["thread_id"], GRAPH_NAME, input=chat_input)
        return thread["thread_id"], run["run_id"]

    t0 = time.perf_counter()
    _, _, chats = await run_bounded(list(range(ccfg.chat_waiting)), start_chat, concurrency=20)
    threads = [t for t, _ in chats]
    waiting = 0
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        waiting = int(await h.pool.fetchval(
            "SELECT count(DISTINCT thread_id) FROM checkpoints WHERE thread_id = ANY($1::text[])",
            threads))
        if waiting >= len(threads):
            break
        await asyncio.sleep(1)
    all_waiting_s = time.perf_counter() - t0
    try:
        beside = await four_step_p50()
        rss = h.stack.process_rss_bytes().get("worker-0", 0)
    finally:
        await run_bounded(chats, lambda c: client.runs.cancel(c[0], c[1]), concurrency=20)
        await _restart_worker(h, {})
    res.overseer.append(Trial(beside["p50_ms"], load_average(), {
        "latency": beside, "chats_waiting": waiting, "seconds_to_all_waiting": round(all_waiting_s, 1),
        "worker_rss_mb": round(rss / 2**20, 1), "worker_rss_idle_mb": round(rss_idle / 2**20, 1)}))
    ratio = res.ratio_spread()
    res.extra["checks"] = {
        f"all {ccfg.chat_waiting} chats waiting at once": waiting == ccfg.chat_waiting,
        "4-step p50 ≤ 1.5 × alone": bool(ratio and ratio.median <= 1.5),
        "worker RSS ≤ 1 GB": rss <= 2**30}
    res.notes.append(f"{waiting}/{ccfg.chat_waiting} chats waiting after {all_waiting_s:.0f} s; worker "
                     f"RSS {rss / 2**20:.0f} MB ({rss_idle / 2**20:.0f} MB idle); 4-step p50 "
                     f"{beside['p50_ms']:.0f} ms beside them, {alone['p50_ms']:.0f} ms alone")
    return res


def _verdicts(result: ScenarioResult, phase: str) -> None:
    """Fill ``extra["checks"]`` and the notes of a phase from its trials."""
    ratio = result.ratio_spread()
    cpu = result.cpu_ratio_spread()
    o, b = result.overseer, result.baseline
    if not o or not b:
        return

    def med(trials: list[Trial], *path: str) -> float:
        values = []
        for t in trials:
            v: Any = t.details
            for p in path:
                v = v.get(p, {}) if isinstance(v, dict) else {}
            values.append(float(v) if isinstance(v, int | float) else float("nan"))
        values.sort()
        return values[len(values) // 2]

    first = {"overseer": (med(o, "first_token", "p50_ms"), med(o, "first_token", "p95_ms")),
             "peer": (med(b, "first_token", "p50_ms"), med(b, "first_token", "p95_ms"))}
    matching = all(t.details["streams_matching"] == t.details["runs"] for t in [*o, *b])
    overseer_matching = all(t.details["streams_matching"] == t.details["runs"] for t in o)
    if phase == "defaults":
        result.extra["checks"] = {
            "throughput ≥ 3 × peer": bool(ratio and ratio.median >= 3.0),
            "first token p95 ≤ 1.5 s": first["overseer"][1] <= 1500.0,
            "every Overseer stream = its thread": overseer_matching}
    else:
        result.extra["checks"] = {
            "throughput ≥ 1.0 × peer": bool(ratio and ratio.median >= 1.0),
            "first token p50 ≤ peer's + 50 ms": first["overseer"][0] <= first["peer"][0] + 50.0,
            "server CPU per run ≤ 1.3 × peer's": bool(cpu and 1 / cpu.median <= 1.3),
            "every Overseer stream = its thread": overseer_matching}
    result.extra["first_token_ms"] = first
    result.notes.append(
        f"first token p50/p95: Overseer {first['overseer'][0]:.0f}/{first['overseer'][1]:.0f} ms, "
        f"peer {first['peer'][0]:.0f}/{first['peer'][1]:.0f} ms; whole run p50: Overseer "
        f"{med(o, 'whole_run', 'p50_ms'):.0f} ms, peer {med(b, 'whole_run', 'p50_ms'):.0f} ms")
    result.notes.append(
        f"server CPU per run: Overseer {o[0].details['cpu_ms_per_run']} ms, "
        f"peer {b[0].details['cpu_ms_per_run']} ms")
    if not matching:
        result.notes.append("streams ≠ thread: " + ", ".join(
            f"{side} {t.details['runs'] - t.details['streams_matching']}/{t.details['runs']}"
            for side, trials in (("Overseer", o), ("peer", b)) for t in trials
            if t.details["streams_matching"] != t.details["runs"]))
    for side, trials in (("Overseer", o), ("peer", b)):
        for t in trials:
            if t.details.get("errors"):
                result.notes.append(f"{side} errors (first): {'; '.join(t.details['errors'])}")


__all__ = ["GRAPH_NAME", "ChatBenchConfig", "ChatOutcome", "chat_load", "one_chat", "pacing_env",
           "rebuild_messages", "thread_messages", "use_chat_pacing", "waiting_chats",
           "widened_worker_env"]
