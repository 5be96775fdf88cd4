"""The embedded stack's supervisor restarts a dead child with backoff and stops only when told (issue 25).

Real processes (``python -c`` sleepers), real signals: a SIGKILLed child comes back with a
new pid after its backoff; a child that keeps dying waits longer each time (1, 2, 4 s … at
most 30 s); one that stayed up a minute starts from 1 s again; ``stop`` ends every child.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from services.local import embedded
from services.local.supervisor import (
    FIRST_BACKOFF_SECONDS,
    HEALTHY_AFTER_SECONDS,
    MAX_BACKOFF_SECONDS,
    Child,
    Supervisor,
)

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]
CRASHER = [sys.executable, "-c", "import sys; sys.exit(3)"]


def test_a_killed_child_is_restarted_and_stop_ends_everything():
    lines: list[str] = []
    worker, api = Child("worker", SLEEPER), Child("api", SLEEPER)
    supervisor = Supervisor([worker, api], embedded.stop_process, say=lines.append,
                            poll_seconds=0.05)
    supervisor.start()
    watcher = threading.Thread(target=supervisor.run, daemon=True)
    watcher.start()
    try:
        assert worker.proc is not None and api.proc is not None
        first_pid, api_pid = worker.proc.pid, api.proc.pid
        os.kill(first_pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not (worker.proc is not None and worker.proc.pid != first_pid):
            assert time.monotonic() < deadline, lines
            time.sleep(0.05)
        assert worker.restarts == 1 and worker.exits == [-signal.SIGKILL]
        assert api.proc.pid == api_pid and api.restarts == 0  # the other child is untouched
        assert lines[0] == f"worker exited with code {-signal.SIGKILL}; restarting in 1 s"
        assert lines[1].startswith("worker restarted (pid ")
        second = worker.proc
    finally:
        supervisor.stop()
        watcher.join(30)
    assert not watcher.is_alive()
    assert second.poll() is not None and api.proc.poll() is not None


def test_backoff_doubles_to_a_ceiling_and_resets_after_a_healthy_minute():
    crasher = Child("worker", CRASHER)
    supervisor = Supervisor([crasher], embedded.stop_process, say=lambda _: None)
    supervisor.start()
    waits = []
    try:
        for _ in range(7):
            assert crasher.proc is not None
            crasher.proc.wait(30)
            now = crasher.started_at + 0.1  # it died at once
            supervisor.check(now)
            assert crasher.proc is None and crasher.restart_at is not None
            waits.append(round(crasher.restart_at - now, 3))
            supervisor.check(now + waits[-1] - 0.01)
            assert crasher.proc is None  # not before its backoff
            supervisor.check(crasher.restart_at)
        assert waits == [1, 2, 4, 8, 16, 30, 30]
        assert waits[0] == FIRST_BACKOFF_SECONDS and waits[-1] == MAX_BACKOFF_SECONDS
        assert crasher.proc is not None
        crasher.proc.wait(30)
        supervisor.check(crasher.started_at + HEALTHY_AFTER_SECONDS + 1)  # "up" a minute
        assert crasher.restart_at is not None
        assert crasher.restart_at - (crasher.started_at + HEALTHY_AFTER_SECONDS + 1) == 1
        assert crasher.exits == [3] * 8
    finally:
        supervisor.stop()
        supervisor.stop_children()
