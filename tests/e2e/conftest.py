"""End-to-end fixtures: the real API and worker as separate processes over the embedded stack."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

USER_GRAPHS = Path(__file__).resolve().parents[1] / "graphs" / "user_graph" / "langgraph.json"
"""A user's langgraph.json, hosted next to the reference pipelines (``OVERSEER_GRAPHS``)."""
SEGMENT_GRAPHS = Path(__file__).resolve().parents[1] / "graphs" / "segments" / "langgraph.json"
WEBHOOK_SECRET = "e2e-webhook-secret"
"""The stack signs every webhook with this (``OVERSEER_WEBHOOK_SECRET``)."""
"""The same user's graphs declared to run as segments (issue 25)."""


@dataclass
class Stack:
    """A running API (+ worker processes) and the tokens to call it with."""

    base_url: str
    env: dict[str, str]
    tokens: dict[str, str]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def client(self, role: str = "admin") -> httpx.Client:
        """An HTTP client authenticated as ``role``."""
        return httpx.Client(base_url=self.base_url, timeout=30,
                            headers={"Authorization": f"Bearer {self.tokens[role]}"})

    def start_worker(self) -> subprocess.Popen[bytes]:
        """Start one more worker process."""
        proc = subprocess.Popen([sys.executable, "-m", "services.worker.main"], env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.workers.append(proc)
        return proc

    def kill_workers(self) -> None:
        """SIGKILL every live worker: no worker runs until :meth:`start_worker`."""
        for proc in self.workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)

    def replace_workers(self) -> subprocess.Popen[bytes]:
        """SIGKILL every live worker (so the one running a run's work dies), then start one.

        Returns the new worker. Killing only one of them would leave another to pick the
        work up, and a later crash test's kill might miss the worker that runs its run.
        """
        self.kill_workers()
        return self.start_worker()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(env: dict[str, str], tokens: dict[str, str]) -> tuple[Stack, subprocess.Popen[bytes]]:
    """Start the API (uvicorn) on a free port and one worker; wait until ``/readyz`` answers."""
    port = _free_port()
    env = dict(env, OVERSEER_API_PORT=str(port))
    api = subprocess.Popen([sys.executable, "-m", "uvicorn", "--factory", "services.api.main:app",
                            "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
                           env=env)
    stack = Stack(base_url=f"http://127.0.0.1:{port}", env=env, tokens=tokens)
    stack.start_worker()
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{stack.base_url}/readyz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or api.poll() is not None:
            api.kill()
            raise RuntimeError("the API did not become ready")
        time.sleep(0.2)
    return stack, api


def _stop(stack: Stack, api: subprocess.Popen[bytes]) -> None:
    for proc in [api, *stack.workers]:
        proc.terminate()
    for proc in [api, *stack.workers]:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _base_env(dev_server: WorkflowEnvironment, pg_url: str, data_dir: Path,
              grants: dict[str, dict[str, str]], task_queue: str,
              graphs: Path | str) -> dict[str, str]:
    target = dev_server.client.service_client.config.target_host
    return dict(os.environ, OVERSEER_DATABASE_URL=pg_url, OVERSEER_TEMPORAL_ADDRESS=target,
                OVERSEER_DATA_DIR=str(data_dir), OVERSEER_API_TOKENS=json.dumps(grants),
                OVERSEER_ENVIRONMENT="test", OVERSEER_TASK_QUEUE=task_queue,
                OVERSEER_GRAPHS=str(graphs),
                # queued runs start when the run before them ends (its workflow hands the
                # thread on); the API's recovery pass runs at start-up only, so no test
                # passes because of it by accident
                OVERSEER_QUEUE_RECOVERY_SECONDS="3600",
                OVERSEER_WEBHOOK_SECRET=WEBHOOK_SECRET)


@pytest.fixture(scope="session")
def stack(dev_server: WorkflowEnvironment, pg_url: str, pool: object,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """API (uvicorn) and one worker as child processes, like ``make run`` starts them."""
    data_dir = tmp_path_factory.mktemp("overseer-data")
    tokens = {"submitter": "e2e-submitter-token-000000000001",
              "reviewer": "e2e-reviewer-token-0000000000001",
              "admin": "e2e-admin-token-000000000000001"}
    grants = {tokens["submitter"]: {"role": "submitter", "subject": "alice"},
              tokens["reviewer"]: {"role": "reviewer", "subject": "rita"},
              tokens["admin"]: {"role": "admin", "subject": "root"},
              "e2e-other-submitter-token-00001": {"role": "submitter", "subject": "bob"},
              "e2e-second-reviewer-token-000001": {"role": "reviewer", "subject": "sam"},
              "e2e-expired-token-00000000000001": {"role": "admin", "subject": "old",
                                                   "expires_at": "2020-01-01T00:00:00+00:00"}}
    tokens["expired"] = "e2e-expired-token-00000000000001"
    tokens["other"] = "e2e-other-submitter-token-00001"
    tokens["reviewer2"] = "e2e-second-reviewer-token-000001"
    env = _base_env(dev_server, pg_url, data_dir, grants, "e2e", f"{USER_GRAPHS}:{SEGMENT_GRAPHS}")
    stack, api = _launch(env, tokens)
    yield stack
    _stop(stack, api)


AUTHED_GRAPHS = Path(__file__).resolve().parents[1] / "graphs" / "authed" / "langgraph.json"
"""A user's ``langgraph.json`` with ``"auth": {"path": "./auth.py:auth"}`` (LangGraph custom auth)."""


@pytest.fixture(scope="module")
def authed_stack(dev_server: WorkflowEnvironment, pg_url: str, pool: object,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A second deployment, on its own task queue, whose ``langgraph.json`` names an ``Auth``.

    Its ``tokens`` are the bearer tokens that ``tests/graphs/authed/auth.py`` knows (by user
    id); ``OVERSEER_API_TOKENS`` still holds an admin token, which the Agent Server API no
    longer accepts there.
    """
    data_dir = tmp_path_factory.mktemp("overseer-authed-data")
    grants = {"e2e-authed-admin-token-0000001": {"role": "admin", "subject": "root"}}
    tokens = {"user1": "user1-token", "user2": "user2-token", "auditor": "auditor-token",
              "overseer-admin": "e2e-authed-admin-token-0000001"}
    env = _base_env(dev_server, pg_url, data_dir, grants, "e2e-authed", AUTHED_GRAPHS)
    stack, api = _launch(env, tokens)
    yield stack
    _stop(stack, api)


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
