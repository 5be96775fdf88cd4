"""Faults under load on the real embedded stack (``make reliability``; the smoke test runs in ``make test``).

Each scenario: a fresh stack with two workers, a mixed load of documents (typed, plain
text, office scans; some missing a required field) submitted with Idempotency-Keys by
retrying clients, one fault class injected, then the verdict: every accepted run is
terminal or awaiting approval, duplicate concurrent decisions apply once, nothing is
lost or duplicated, and the read models equal the ones rebuilt from the event log.
Results go to ``test-artifacts/reliability/*.json``; ``python -m tests.reliability.report``
turns them into docs/reliability.md.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from services.local.managed import ManagedStack
from tests.reliability.harness import (
    Clients,
    Outcome,
    consistency,
    finish,
    last_event_seq,
    mixed_load,
    run_async,
    settle,
    time_to_progress,
)
from tests.workflows.llm_support import LocalOpenAI, Scripted, completion, llm_answer

LOAD = 200


def _background(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def _assert(outcome: Outcome) -> None:
    assert not outcome.lost, outcome.lost[:10]
    assert outcome.settled == outcome.accepted
    assert outcome.consistency["ok"], outcome.consistency
    assert not outcome.decision_errors, outcome.decision_errors[:5]
    assert outcome.decisions_applied == outcome.waiting_for_decision
    assert outcome.decisions_sent == 2 * outcome.waiting_for_decision


def _kill_workers(stack: ManagedStack, outcome: Outcome, *, rounds: int, every: float) -> None:
    for _ in range(rounds):
        time.sleep(every)
        seq = run_async(lambda: last_event_seq(stack))
        stack.kill_worker(0, signal.SIGKILL)
        stack.start_worker()
        outcome.recovery_seconds.append(round(time_to_progress(stack, seq), 2))


@pytest.mark.timeout(900)
def test_smoke_worker_sigkill_under_small_load(tmp_path: Path):
    """The short subset that runs in ``make test``: 20 documents, one SIGKILL."""
    with ManagedStack(tmp_path).start(workers=2) as stack:
        outcome = Outcome("smoke_worker_sigkill", "SIGKILL one worker once", 20)
        clients = Clients(stack)
        submitting = _background(lambda: clients.submit_all(mixed_load(20, seed=9)))
        _kill_workers(stack, outcome, rounds=1, every=2.0)
        submitting.join()
        _assert(finish(stack, outcome, clients))


@pytest.mark.reliability
@pytest.mark.timeout(1800)
def test_worker_sigkill_repeatedly(tmp_path: Path):
    with ManagedStack(tmp_path).start(workers=2) as stack:
        outcome = Outcome("worker_sigkill", "SIGKILL a worker every 5 s (4 times) during OCR",
                          LOAD)
        clients = Clients(stack)
        submitting = _background(lambda: clients.submit_all(mixed_load(LOAD, seed=1)))
        started = time.monotonic()
        _kill_workers(stack, outcome, rounds=4, every=5.0)
        submitting.join()
        _assert(finish(stack, outcome, clients))
        outcome.wall_seconds = round(time.monotonic() - started, 1)
        outcome.save()


@pytest.mark.reliability
@pytest.mark.timeout(1800)
def test_temporal_restart_mid_run(tmp_path: Path):
    with ManagedStack(tmp_path).start(workers=2) as stack:
        outcome = Outcome("temporal_restart", "restart the Temporal dev server (same SQLite)",
                          LOAD)
        clients = Clients(stack)
        submitting = _background(lambda: clients.submit_all(mixed_load(LOAD, seed=2)))
        started = time.monotonic()
        time.sleep(6)
        seq = run_async(lambda: last_event_seq(stack))
        stack.restart_temporal(down_seconds=3)
        outcome.recovery_seconds.append(round(time_to_progress(stack, seq), 2))
        submitting.join()
        _assert(finish(stack, outcome, clients))
        outcome.wall_seconds = round(time.monotonic() - started, 1)
        outcome.save()


@pytest.mark.reliability
@pytest.mark.timeout(1800)
def test_postgres_down_30_seconds(tmp_path: Path):
    with ManagedStack(tmp_path).start(workers=2) as stack:
        outcome = Outcome("postgres_stop", "stop Postgres for 30 s mid-run", LOAD)
        clients = Clients(stack)
        submitting = _background(lambda: clients.submit_all(mixed_load(LOAD, seed=3)))
        started = time.monotonic()
        time.sleep(6)
        stack.stop_postgres()
        time.sleep(30)
        stack.start_postgres()
        outcome.recovery_seconds.append(round(time_to_progress(stack, 0), 2))
        submitting.join()
        _assert(finish(stack, outcome, clients))
        outcome.wall_seconds = round(time.monotonic() - started, 1)
        outcome.save()


@pytest.mark.reliability
@pytest.mark.timeout(1800)
def test_llm_endpoint_faults(tmp_path: Path):
    faults = [Scripted(status=500), Scripted(status=429, headers={"retry-after": "1"}),
              Scripted(body=completion("{}").body, delay_seconds=3.0),
              completion("this is not JSON"), completion(llm_answer(grade=("9", None)))]
    script = [faults[i % len(faults)] for i in range(2000)]
    with LocalOpenAI(script) as llm, ManagedStack(tmp_path, env_overrides={
            "OVERSEER_LLM_BASE_URL": llm.base_url, "OVERSEER_LLM_TIMEOUT_SECONDS": "1"}
            ).start(workers=2) as stack:
        outcome = Outcome("llm_faults", "LLM endpoint: 500s, 429 + Retry-After, hangs past the "
                          "time-out, malformed JSON; SIGKILL a worker twice during LLM calls",
                          LOAD)
        clients = Clients(stack)
        started = time.monotonic()
        docs = mixed_load(LOAD, seed=4, scanned_share=0.1, missing_share=0.6)
        submitting = _background(lambda: clients.submit_all(docs))
        _kill_workers(stack, outcome, rounds=2, every=6.0)
        submitting.join()
        _assert(finish(stack, outcome, clients))
        outcome.notes.append(f"{len(llm.requests)} model requests served")
        outcome.wall_seconds = round(time.monotonic() - started, 1)
        outcome.save()


@pytest.mark.reliability
@pytest.mark.timeout(1800)
def test_api_restarts_while_clients_retry(tmp_path: Path):
    with ManagedStack(tmp_path).start(workers=2) as stack:
        outcome = Outcome("api_restart", "SIGKILL and restart the API twice while clients "
                          "submit with Idempotency-Keys and retry", LOAD)
        clients = Clients(stack)
        docs = mixed_load(LOAD, seed=5, scanned_share=0.1)
        submitting = _background(lambda: clients.submit_all(docs))
        started = time.monotonic()
        for _ in range(2):
            time.sleep(4)
            down = time.monotonic()
            stack.restart_api()
            outcome.recovery_seconds.append(round(time.monotonic() - down, 2))
        submitting.join()
        _assert(finish(stack, outcome, clients))
        assert len(set(clients.accepted.values())) == len(clients.accepted) == len(docs)
        outcome.wall_seconds = round(time.monotonic() - started, 1)
        outcome.save()


USER_GRAPH_FILES = ":".join(str(Path(__file__).resolve().parents[1] / "graphs" / d / "langgraph.json")
                            for d in ("user_graph", "segments"))


@pytest.mark.reliability
@pytest.mark.timeout(900)
@pytest.mark.parametrize("via", ["v1", "threads"])
def test_user_graph_worker_and_api_killed_mid_run(tmp_path: Path, via: str):
    """Issue 25's crash: 50 in-flight runs of a 3 s + 1 s user graph that sets nothing; the
    worker and the API are SIGKILLed and started again. All 50 finish within 60 s of the
    API answering, none lost, no ``node.completed`` written twice.

    ``threads``: the same runs through the Agent Server API, one thread each, whose last
    segment writes the run's ending and hands the thread on itself: each run also ends
    ``success`` with ``run.completed`` once, its thread idle with the graph's final values.
    """
    from collections import Counter

    runs, graph = 50, "three_one"
    with ManagedStack(tmp_path, env_overrides={"OVERSEER_GRAPHS": USER_GRAPH_FILES}).start(
            workers=1) as stack:
        name = f"user_graph_crash_{graph}" + ("_threads" if via == "threads" else "")
        outcome = Outcome(name, "SIGKILL the worker and the API while "
                          f"{runs} runs of a 3 s + 1 s user graph are in flight "
                          + ("(Agent Server threads: one run per thread; " if via == "threads"
                             else "(") +
                          "segments), then start both again (recovery: API answering → all done)",
                          runs)
        run_ids, threads = [], []
        with stack.client("submitter") as client:
            for i in range(runs):
                if via == "threads":
                    thread = client.post("/threads", json={}).json()["thread_id"]
                    res = client.post(f"/threads/{thread}/runs", json={
                        "assistant_id": graph, "input": {"topic": f"crash {i}"}})
                    assert res.status_code == 200, res.text
                    threads.append(thread)
                else:
                    res = client.post(f"/v1/pipelines/{graph}/runs",
                                      json={"input": {"topic": f"crash {i}"}})
                    assert res.status_code == 202, res.text
                run_ids.append(res.json()["run_id"])
        outcome.accepted = len(run_ids)
        time.sleep(1.5)  # every run is inside its 3 s node
        stack.kill_worker(0, signal.SIGKILL)
        assert stack.api is not None
        stack.api.send_signal(signal.SIGKILL)
        stack.api.wait(30)
        stack.start_worker()
        stack.start_api()
        answering = time.monotonic()
        current = settle(stack, run_ids, timeout_seconds=300)
        outcome.recovery_seconds.append(round(time.monotonic() - answering, 2))
        outcome.settled = sum(1 for s in current.values() if s == "completed")
        outcome.lost = sorted(r for r, s in current.items() if s != "completed")
        outcome.statuses = dict(Counter(current.values()))
        doubled = []
        with stack.client("admin") as admin:
            for i, run_id in enumerate(run_ids):
                events = admin.get(f"/v1/runs/{run_id}/events").json()["items"]
                nodes = Counter(e["data"]["node"] for e in events if e["type"] == "node.completed")
                ends = [e["type"] for e in events if e["type"] in ("run.completed", "run.failed")]
                if nodes != Counter({"think": 1, "answer": 1}) or ends != ["run.completed"]:
                    doubled.append(f"{run_id}: {dict(nodes)} {ends}")
                run = admin.get(f"/v1/runs/{run_id}").json()
                assert run["result"]["output"]["trail"] == ["think", "answer"], run
                if via == "threads":
                    thread = admin.get(f"/threads/{threads[i]}").json()
                    assert thread["status"] == "idle", thread
                    assert thread["values"]["trail"] == ["think", "answer"], thread
                    agent_run = admin.get(f"/threads/{threads[i]}/runs/{run_id}").json()
                    assert agent_run["status"] == "success", agent_run
        outcome.notes = doubled[:10]
        outcome.consistency = run_async(lambda: consistency(stack))
        outcome.save()
        assert not outcome.lost and not doubled, (outcome.lost[:5], doubled[:5])
        assert outcome.consistency["ok"], outcome.consistency
        assert outcome.recovery_seconds[0] < 60, outcome.recovery_seconds
