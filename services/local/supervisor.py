"""Keep the embedded stack's worker and API running: restart a child that dies, with backoff.

``overseer run`` (``make run``) starts the worker and the API as child processes. A child
that exits while the stack is running — a crash, an OOM kill, a SIGKILL — is started again
after a backoff of 1 s, doubling to at most :data:`MAX_BACKOFF_SECONDS`; a child that then
stays up for :data:`HEALTHY_AFTER_SECONDS` starts from 1 s again. Each exit and restart is
logged with the child's name and exit code. Only :meth:`Supervisor.stop` (Ctrl-C or SIGTERM
in ``overseer run``) ends everything. Temporal owns what a dead worker was doing: its
activities time out on their heartbeat and run again on the restarted worker.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 30.0
HEALTHY_AFTER_SECONDS = 60.0
"""A child up this long is healthy again: its next restart waits :data:`FIRST_BACKOFF_SECONDS`."""


@dataclass
class Child:
    """One supervised process.

    Attributes:
        name: how the log names it (``worker``, ``api``).
        argv: the command line.
        env: its environment (None: this process's).
        proc: the running process, None between an exit and its restart.
        started_at: ``time.monotonic()`` of the last start.
        restarts: how many times it was started again.
        backoff: seconds the next restart waits.
        restart_at: ``time.monotonic()`` when the pending restart is due, or None.
    """

    name: str
    argv: Sequence[str]
    env: Mapping[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restarts: int = 0
    backoff: float = FIRST_BACKOFF_SECONDS
    restart_at: float | None = None
    exits: list[int] = field(default_factory=list)


class Supervisor:
    """Start children, restart any that exits, stop them all on :meth:`stop`.

    Args:
        children: the processes to keep running.
        stop_process: how to stop one child at the end (SIGTERM, then SIGKILL after a grace).
        say: where exit and restart lines go (stderr in ``overseer run``).
        poll_seconds: how often children are checked.
    """

    def __init__(self, children: Sequence[Child],
                 stop_process: Callable[[subprocess.Popen[bytes]], None], *,
                 say: Callable[[str], None] = logger.warning,
                 poll_seconds: float = 0.25) -> None:
        self.children = list(children)
        self._stop_process = stop_process
        self._say = say
        self._poll = poll_seconds
        self._stopping = threading.Event()

    def start(self) -> None:
        """Start every child."""
        for child in self.children:
            self._spawn(child)

    def run(self) -> None:
        """Watch the children until :meth:`stop` is called (blocks), then stop them all."""
        try:
            while not self._stopping.wait(self._poll):
                self.check()
        finally:
            self.stop_children()

    def check(self, now: float | None = None) -> None:
        """One pass: notice exits, schedule restarts, start those that are due."""
        now = time.monotonic() if now is None else now
        for child in self.children:
            if child.proc is not None and child.proc.poll() is not None:
                code = child.proc.returncode
                child.exits.append(code)
                if now - child.started_at >= HEALTHY_AFTER_SECONDS:
                    child.backoff = FIRST_BACKOFF_SECONDS
                child.proc, child.restart_at = None, now + child.backoff
                self._say(f"{child.name} exited with code {code}; restarting in "
                          f"{child.backoff:g} s")
                child.backoff = min(child.backoff * 2, MAX_BACKOFF_SECONDS)
            if child.proc is None and child.restart_at is not None and now >= child.restart_at \
                    and not self._stopping.is_set():
                child.restarts += 1
                self._spawn(child)
                self._say(f"{child.name} restarted (pid {child.proc.pid if child.proc else '?'}, "
                          f"restart {child.restarts})")

    def stop(self) -> None:
        """Ask :meth:`run` to end (safe from a signal handler or another thread)."""
        self._stopping.set()

    def stop_children(self) -> None:
        """Stop every running child."""
        for child in self.children:
            if child.proc is not None:
                self._stop_process(child.proc)

    def _spawn(self, child: Child) -> None:
        child.proc = subprocess.Popen(list(child.argv),
                                      env=dict(child.env) if child.env is not None else None)
        child.started_at, child.restart_at = time.monotonic(), None
