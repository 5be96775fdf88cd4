"""A whole embedded stack under program control, for benchmarks and fault tests.

:class:`ManagedStack` starts Postgres, a Temporal dev server (SQLite file, so it can be
restarted with its data), N worker processes and the API on free ports under one data
directory, and lets a harness kill, stop and restart each part the way an operator (or
a crash) would. ``make run`` uses :mod:`services.local.embedded` directly; this is the same
parts with handles.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from services.local import embedded


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ManagedStack:
    """Postgres + Temporal + workers + API as child processes of this one.

    Attributes:
        data_dir: where Postgres data, the Temporal SQLite file and logs live.
        env_overrides: extra ``OVERSEER_*`` settings for the worker and API processes.
    """

    data_dir: Path
    env_overrides: dict[str, str] = field(default_factory=dict)
    temporal_port: int = field(default_factory=free_port)
    temporal_ui_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    tokens: dict[str, str] = field(default_factory=lambda: {
        "submitter": "stack-submitter-token-0000000001", "reviewer": "stack-reviewer-token-00000000001",
        "admin": "stack-admin-token-0000000000000001"})
    pg: embedded.EmbeddedPostgres | None = None
    temporal: subprocess.Popen[bytes] | None = None
    api: subprocess.Popen[bytes] | None = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, *, workers: int = 1, api: bool = True) -> ManagedStack:
        """Start everything and wait until the API answers ``/readyz``."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.start_postgres()
        self.start_temporal()
        for _ in range(workers):
            self.start_worker()
        if api:
            self.start_api()
        return self

    def stop(self) -> None:
        """Stop every part (workers and API first, Postgres last)."""
        for proc in [*self.workers, self.api]:
            if proc is not None:
                embedded.stop_process(proc)
        self.workers.clear()
        self.api = None
        if self.temporal is not None:
            embedded.stop_process(self.temporal)
            self.temporal = None
        if self.pg is not None:
            self.pg.stop()
            self.pg = None

    def __enter__(self) -> ManagedStack:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- parts -----------------------------------------------------------------------------------

    @property
    def database_url(self) -> str:
        """The Postgres URL (unix socket)."""
        assert self.pg is not None, "postgres is not running"
        return self.pg.url

    @property
    def temporal_address(self) -> str:
        """``host:port`` of the Temporal frontend."""
        return f"127.0.0.1:{self.temporal_port}"

    @property
    def api_url(self) -> str:
        """Base URL of the API."""
        return f"http://127.0.0.1:{self.api_port}"

    def env(self) -> dict[str, str]:
        """Environment for worker and API processes."""
        grants = {token: {"role": role, "subject": f"stack-{role}"}
                  for role, token in self.tokens.items()}
        return embedded.child_env(
            OVERSEER_DATABASE_URL=self.database_url,
            OVERSEER_TEMPORAL_ADDRESS=self.temporal_address,
            OVERSEER_DATA_DIR=str(self.data_dir),
            OVERSEER_API_TOKENS=json.dumps(grants),
            OVERSEER_ENVIRONMENT="test",
            **self.env_overrides,
        )

    def start_postgres(self) -> None:
        """Start (or restart) the embedded Postgres on the same data directory."""
        self.pg = embedded.start_postgres(self.data_dir)

    def stop_postgres(self) -> None:
        """Stop Postgres (fast shutdown); clients see connection errors until restarted."""
        if self.pg is not None:
            self.pg.stop()

    def start_temporal(self) -> None:
        """Start (or restart) the dev server on the same SQLite file."""
        self.temporal = embedded.start_temporal(self.data_dir, port=self.temporal_port,
                                                ui_port=self.temporal_ui_port)

    def restart_temporal(self, *, down_seconds: float = 0.0) -> None:
        """Stop the dev server, wait ``down_seconds``, start it on the same data."""
        if self.temporal is not None:
            embedded.stop_process(self.temporal)
        time.sleep(down_seconds)
        self.start_temporal()

    def start_worker(self, **env: str) -> subprocess.Popen[bytes]:
        """One more worker process (``env`` adds settings for it only)."""
        log = open(self.data_dir / f"worker-{len(self.workers)}.log", "ab")  # noqa: SIM115
        env = {"OVERSEER_METRICS_PORT_WORKER": str(free_port()), **env}  # one /metrics per worker
        proc = subprocess.Popen([sys.executable, "-m", "services.worker.main"],
                                env={**self.env(), **env}, stdout=log, stderr=subprocess.STDOUT)
        self.workers.append(proc)
        return proc

    def kill_worker(self, index: int = 0, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL) to a worker and reap it."""
        proc = self.workers.pop(index)
        proc.send_signal(sig)
        proc.wait(30)

    def start_api(self, *, ready_timeout_seconds: float = 240.0) -> None:
        """Start the API and wait for ``/readyz``."""
        log = open(self.data_dir / "api.log", "ab")  # noqa: SIM115
        self.api = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--factory", "services.api.main:app", "--host",
             "127.0.0.1", "--port", str(self.api_port), "--log-level", "warning",
             # a thread stream never ends by itself: a stop closes open streams after 10 s
             "--timeout-graceful-shutdown", "10"],
            env=self.env(), stdout=log, stderr=subprocess.STDOUT)
        self.wait_ready(ready_timeout_seconds)

    def restart_api(self, *, sig: int = signal.SIGKILL) -> None:
        """Kill the API (default SIGKILL) and start it again."""
        if self.api is not None:
            self.api.send_signal(sig)
            self.api.wait(30)
        self.start_api()

    def wait_ready(self, timeout_seconds: float = 240.0) -> None:
        """Block until ``/readyz`` says ok.

        Raises:
            RuntimeError: not ready in time (see ``api.log`` in the data dir).
        """
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.api_url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.api is not None and self.api.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"the API did not become ready; see {self.data_dir / 'api.log'}")

    def client(self, role: str = "admin", **kwargs: Any) -> httpx.Client:
        """An HTTP client for the API authenticated as ``role``."""
        return httpx.Client(base_url=self.api_url, timeout=kwargs.pop("timeout", 30),
                            headers={"Authorization": f"Bearer {self.tokens[role]}"}, **kwargs)

    def process_rss_bytes(self) -> dict[str, int]:
        """Resident memory of each child process (workers, API, Temporal)."""
        import psutil

        out: dict[str, int] = {}
        for name, proc in [("temporal", self.temporal), ("api", self.api),
                           *((f"worker-{i}", w) for i, w in enumerate(self.workers))]:
            if proc is not None and proc.poll() is None:
                out[name] = psutil.Process(proc.pid).memory_info().rss
        return out


def kill_tree(pid: int) -> None:
    """SIGKILL a process group (for a child started with ``start_new_session``)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
