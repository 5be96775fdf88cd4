"""The Agent Server peer: ``langhost`` (stock ``langgraph-api`` on ``langgraph-runtime-pg``) beside Overseer.

The bench compares Overseer's Agent Server API with the Agent Server users would otherwise
host themselves. :class:`LanghostPeer` sets that peer up for one bench invocation and tears
it down again:

* Debian's PostgreSQL server binaries (``/usr/lib/postgresql/<v>/bin``) and ``redis-server``,
  installed with ``apt-get`` when missing and this process is root (as ``make bench`` does
  for ``wrk``);
* a venv of its own (``.bench/langhost-venv``, or ``OVERSEER_BENCH_LANGHOST_VENV``),
  made once with ``pip install langhost==…`` and reused: langhost is MIT, ``langgraph-api``
  under it is Elastic-2.0; neither is ever a dependency of Overseer itself;
* a throwaway Postgres cluster (``initdb`` in a temporary directory, its own port on
  127.0.0.1, run as the ``postgres`` user when this process is root: initdb refuses root)
  and a ``redis-server`` without persistence on a free port;
* ``langhost serve`` on a generated ``langgraph.json`` whose graph is the bench's own
  :mod:`bench.user_graph.graph` (loaded by path: same node code, same
  ``BENCH_GRAPH_IO_MS`` sleep per node as Overseer runs), ready when ``/ok`` answers.

Any step that cannot be done raises :class:`PeerUnavailable` with one line saying why and
what to install; :func:`agent_server_peer` turns it into a skipped scenario, never a crash
of the bench. :func:`agent_server_peer` itself measures, with the official
``langgraph-sdk`` and paired per trial, 100 concurrent stateless ``runs.wait`` and the p50
of one ``runs.wait`` at a time against Overseer's API (the graph as segments) and
against the peer, and counts the answers that are the final state.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import graph_scenarios as gs
from bench import scenarios as sc
from bench.harness import Harness, cpu_per_run_ms, run_bounded
from bench.stats import ScenarioResult, Trial, latency_summary, load_average
from bench.user_graph.graph import NODES

LANGHOST_REQUIREMENT = "langhost==0.11.1.post1"
"""What the peer's venv installs (pinned: the figures name this version)."""
PEER_GRAPH_ID = "bench_four_io"
"""The graph id (and default assistant id) the peer serves the bench graph under."""
GRAPH_PY = Path(__file__).resolve().parent / "user_graph" / "graph.py"
"""The bench graph's source, loaded by path by the peer (the same file Overseer registers)."""
PEER_CHAT_GRAPH_ID = "bench_chat"
"""The graph id the peer serves the bench's chat agent under (as Overseer registers it)."""
CHAT_PY = GRAPH_PY.parent / "chat.py"
"""The chat agent's source (:mod:`bench.user_graph.chat`), loaded by path by the peer."""
DEFAULT_VENV = Path(__file__).resolve().parents[1] / ".overseer" / "bench" / "langhost-venv"
"""Where the peer's venv is made and reused (``OVERSEER_BENCH_LANGHOST_VENV`` overrides)."""
VENV_ENV = "OVERSEER_BENCH_LANGHOST_VENV"
PG_BIN_GLOB = "/usr/lib/postgresql/*/bin"
"""Debian's layout: one directory of server binaries per major version."""
PEER_NAME = f"Agent Server peer: {LANGHOST_REQUIREMENT} (langgraph-api on langgraph-runtime-pg)"


class PeerUnavailable(RuntimeError):
    """The peer cannot be set up here; ``str(exc)`` is one line: why, and what to install."""


@dataclass
class PeerBenchConfig:
    """Sizes of the ``agent_server_peer`` scenario.

    Attributes:
        peer_runs: ``runs.wait`` calls per side per throughput trial, all in flight at once
            (the target's count: 100).
        peer_latency_runs: sequential ``runs.wait`` calls per side per latency trial.
        peer_jobs_per_worker: the peer's ``N_JOBS_PER_WORKER`` (runs it executes at once;
            10 is langgraph-api's own default, ``langhost serve`` alone would use 1).
    """

    peer_runs: int = 100
    peer_latency_runs: int = 15
    peer_jobs_per_worker: int = 10


# -- finding and installing what the peer needs (pure parts unit-tested) ---------------------------


def _version_key(path: Path) -> tuple[int, ...]:
    """``/usr/lib/postgresql/15/bin`` → ``(15,)``; non-numeric versions sort first."""
    parts = re.findall(r"\d+", path.parent.name)
    return tuple(int(p) for p in parts) or (-1,)


def find_postgres_bin(candidates: Iterable[Path] | None = None,
                      which: Callable[[str], str | None] = shutil.which) -> Path | None:
    """The directory of a PostgreSQL server build with ``initdb``, ``pg_ctl`` and ``postgres``.

    Debian's ``/usr/lib/postgresql/<major>/bin`` first (the newest major), else the
    directory ``initdb`` on ``PATH`` really lives in (``/usr/local/bin/initdb`` is often a
    symlink to Debian's; a build without ``pg_ctl`` and ``postgres`` beside it is not used).

    Args:
        candidates: directories to consider instead of :data:`PG_BIN_GLOB`'s matches.
        which: ``shutil.which`` (injected in tests).

    Returns:
        The directory, or None when no complete build is found.
    """
    dirs = list(candidates) if candidates is not None else [
        Path(p) for p in sorted(Path("/").glob(PG_BIN_GLOB.lstrip("/")))]
    for d in sorted(dirs, key=_version_key, reverse=True):
        if _complete_pg_bin(d):
            return d
    on_path = which("initdb")
    if on_path:
        d = Path(os.path.realpath(on_path)).parent
        if _complete_pg_bin(d):
            return d
    return None


def _complete_pg_bin(d: Path) -> bool:
    return all((d / name).is_file() for name in ("initdb", "pg_ctl", "postgres"))


def find_redis_server(which: Callable[[str], str | None] = shutil.which) -> str | None:
    """The ``redis-server`` binary on ``PATH`` (Debian: ``/usr/bin/redis-server``), or None."""
    return which("redis-server")


def missing_packages(pg_bin: Path | None, redis: str | None) -> list[str]:
    """The Debian packages to install for what was not found (``postgresql``, ``redis-server``)."""
    return [pkg for pkg, found in (("postgresql", pg_bin), ("redis-server", redis)) if not found]


def install_hint(packages: Sequence[str]) -> str:
    """``apt-get install postgresql redis-server`` (as root): the one-line fix for a skip."""
    return f"apt-get install {' '.join(packages)} (as root)"


def apt_install(packages: Sequence[str], *, is_root: bool | None = None,
                apt: str | None = None, timeout_seconds: float = 600.0) -> bool:
    """Install Debian ``packages`` quietly when this process is root and has ``apt-get``.

    Follows the Makefile's ``wrk`` pattern: ``apt-get update -qq`` (failure ignored), then
    ``apt-get install -y -qq`` non-interactively, output discarded.

    Returns:
        Whether the install command succeeded (False when not root or without apt-get:
        nothing is tried then).
    """
    is_root = os.geteuid() == 0 if is_root is None else is_root
    apt = apt if apt is not None else shutil.which("apt-get")
    if not packages or not is_root or not apt:
        return False
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL,
                             "env": env, "timeout": timeout_seconds, "check": False}
    subprocess.run([apt, "update", "-qq"], **quiet)
    return subprocess.run([apt, "install", "-y", "-qq", *packages], **quiet).returncode == 0


def as_user(argv: Sequence[str], user: str | None) -> list[str]:
    """``argv`` run as ``user`` (``runuser -u user -- argv``), or unchanged when ``user`` is None."""
    return ["runuser", "-u", user, "--", *argv] if user else list(argv)


def postgres_user(*, is_root: bool, lookup: Callable[[str], Any] | None = None) -> str | None:
    """Who runs the peer's Postgres: None (this user) unless root, then ``postgres``.

    Raises:
        PeerUnavailable: root, and there is no ``postgres`` user to run ``initdb`` as.
    """
    if not is_root:
        return None
    import pwd

    try:
        (lookup or pwd.getpwnam)("postgres")
    except KeyError:
        raise PeerUnavailable("initdb refuses to run as root and there is no 'postgres' user: "
                              f"{install_hint(['postgresql'])} creates it") from None
    return "postgres"


def initdb_command(pg_bin: Path, data: Path, user: str | None) -> list[str]:
    """``initdb`` of a trust-auth, UTF-8 cluster in ``data`` (superuser ``postgres``), as ``user``."""
    return as_user([str(pg_bin / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                    "-E", "UTF8", "--no-sync"], user)


def pg_ctl_start_command(pg_bin: Path, data: Path, *, port: int, socket_dir: Path, log: Path,
                         user: str | None) -> list[str]:
    """``pg_ctl start -w``: Postgres on 127.0.0.1:``port``, its socket in ``socket_dir``, as ``user``."""
    opts = f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={socket_dir}"
    return as_user([str(pg_bin / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(log), "-w",
                    "-t", "60", "start"], user)


def pg_ctl_stop_command(pg_bin: Path, data: Path, user: str | None) -> list[str]:
    """``pg_ctl stop -m fast -w`` of the cluster in ``data``, as ``user``."""
    return as_user([str(pg_bin / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], user)


def redis_command(redis: str, *, port: int, workdir: Path) -> list[str]:
    """``redis-server`` on 127.0.0.1:``port``, no RDB snapshots, no AOF, files in ``workdir``."""
    return [redis, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(workdir), "--daemonize", "no"]


def langhost_command(venv: Path, *, port: int, config: Path, jobs_per_worker: int) -> list[str]:
    """``langhost serve`` of ``config`` on 127.0.0.1:``port`` (one process, ``jobs_per_worker`` jobs)."""
    return [str(venv / "bin" / "langhost"), "serve", "--host", "127.0.0.1", "--port", str(port),
            "-c", str(config), "--workers", "1", "--n-jobs-per-worker", str(jobs_per_worker),
            "--server-log-level", "WARNING"]


def langhost_env(*, database_uri: str, redis_uri: str, io_ms: float, jobs_per_worker: int,
                 base: dict[str, str] | None = None) -> dict[str, str]:
    """The peer's environment: its Postgres and Redis, the graphs' pacing, no tracing.

    Only ``PATH``, ``HOME``, ``LANG`` and ``TMPDIR`` are kept from ``base`` (this process's
    environment by default), so no ``OVERSEER_*``, ``VIRTUAL_ENV`` or LangSmith key leaks in;
    the chat agent's pacing (``BENCH_CHAT_*``) is kept too, so both sides stream alike.
    """
    base = dict(os.environ) if base is None else base
    kept: dict[str, str] = {k: v for k, v in base.items()
                            if k in ("PATH", "HOME", "LANG", "TMPDIR") or k.startswith("BENCH_CHAT_")}
    return {**kept, "DATABASE_URI": database_uri, "REDIS_URI": redis_uri,
            gs.IO_ENV: f"{io_ms:g}", "N_JOBS_PER_WORKER": str(jobs_per_worker),
            "LANGGRAPH_NO_VERSION_CHECK": "true", "LANGSMITH_TRACING": "false",
            "LANGCHAIN_TRACING_V2": "false", "PYTHONUNBUFFERED": "1"}


def peer_graph_source(graph_py: Path = GRAPH_PY, builder: str = "build_four_io_graph") -> str:
    """A peer graph module: ``builder()`` of the bench module at ``graph_py``, loaded by path, uncompiled.

    langgraph-api compiles it with its own checkpointer; nothing of Overseer is imported.
    """
    return ("import importlib.util\nimport sys\n\n"
            f"_spec = importlib.util.spec_from_file_location('bench_{graph_py.stem}', {str(graph_py)!r})\n"
            "_mod = importlib.util.module_from_spec(_spec)\n"
            "sys.modules[_spec.name] = _mod\n"
            "_spec.loader.exec_module(_mod)\n"
            f"graph = _mod.{builder}()\n")


PEER_GRAPHS: dict[str, tuple[Path, str, str]] = {
    PEER_GRAPH_ID: (GRAPH_PY, "build_four_io_graph", "peer_graph.py"),
    PEER_CHAT_GRAPH_ID: (CHAT_PY, "build_chat_graph", "peer_chat.py")}
"""What the peer serves: graph id → (bench module, its builder, the peer's module file)."""


def langgraph_config() -> dict[str, Any]:
    """The peer's ``langgraph.json``: each of :data:`PEER_GRAPHS` as ``./<module file>:graph``."""
    return {"dependencies": ["."],
            "graphs": {gid: f"./{module}:graph" for gid, (_, _, module) in PEER_GRAPHS.items()}}


def venv_dir(env: dict[str, str] | None = None) -> Path:
    """The peer's venv: ``OVERSEER_BENCH_LANGHOST_VENV`` or :data:`DEFAULT_VENV`."""
    env = dict(os.environ) if env is None else env
    return Path(env[VENV_ENV]) if env.get(VENV_ENV) else DEFAULT_VENV


def base_python() -> str:
    """The interpreter to make the peer's venv with (this venv's base Python, 3.11+)."""
    return str(getattr(sys, "_base_executable", "") or sys.executable)


def is_final_answer(answer: Any) -> bool:
    """Whether a ``runs.wait`` answer is the bench graph's final state (every node ran, published)."""
    return (isinstance(answer, dict) and answer.get("published") is True
            and list(answer.get("trail") or []) == list(NODES))


def skip_message(reason: str) -> str:
    """The scenario's one-line skip note."""
    return f"skipped: {' '.join(reason.split())}"


def last_line(path: Path, *, width: int = 200) -> str:
    """The last non-empty line of a log file, without colour codes (``""`` when there is none)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        clean = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        if clean:
            return clean[:width]
    return ""


# -- setting the peer up ---------------------------------------------------------------------------


def ensure_venv(venv: Path, *, python: str | None = None, timeout_seconds: float = 900.0) -> Path:
    """Make (once) the peer's venv with :data:`LANGHOST_REQUIREMENT`; its ``langhost`` script.

    A venv whose stamp file names the same requirement is reused as it is.

    Raises:
        PeerUnavailable: ``python -m venv`` or ``pip install`` failed or timed out (no
            ``python3-venv``, no network to PyPI, ``venv`` not writable …).
    """
    try:
        return _ensure_venv(venv, python=python, timeout_seconds=timeout_seconds)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerUnavailable(f"could not make the peer's venv at {venv} ({type(exc).__name__}: "
                              f"{exc}): set {VENV_ENV} to a writable directory with PyPI "
                              "access") from exc


def _ensure_venv(venv: Path, *, python: str | None, timeout_seconds: float) -> Path:
    stamp = venv / ".overseer-bench-requirement"
    script = venv / "bin" / "langhost"
    if script.exists() and stamp.exists() and stamp.read_text().strip() == LANGHOST_REQUIREMENT:
        return script
    python = python or base_python()
    venv.parent.mkdir(parents=True, exist_ok=True)
    if not (venv / "bin" / "python").exists():
        made = subprocess.run([python, "-m", "venv", str(venv)], capture_output=True, text=True,
                              timeout=120, check=False)
        if made.returncode != 0:
            raise PeerUnavailable(f"could not make the peer's venv with {python} -m venv "
                                  f"({_tail(made.stderr)}): apt-get install python3-venv")
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                          "--disable-pip-version-check", LANGHOST_REQUIREMENT],
                         capture_output=True, text=True, timeout=timeout_seconds, check=False)
    if pip.returncode != 0 or not script.exists():
        raise PeerUnavailable(f"pip install {LANGHOST_REQUIREMENT} failed in {venv} "
                              f"({_tail(pip.stderr)}): needs PyPI access; or make that venv "
                              f"yourself and name it in {VENV_ENV}")
    check = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import langgraph.graph, typing_extensions, langgraph_runtime_pg"],
                           capture_output=True, text=True, timeout=120, check=False)
    if check.returncode != 0:
        raise PeerUnavailable(f"the peer's venv {venv} cannot import the bench graph's "
                              f"dependencies ({_tail(check.stderr)}): delete it and run again")
    stamp.write_text(LANGHOST_REQUIREMENT + "\n")
    return script


def _tail(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()
             and not line.startswith("WARNING: Location")]
    return lines[-1][:160] if lines else "no output"


@dataclass
class LanghostPeer:
    """``langhost`` serving the bench graph on its own Postgres and Redis (async context manager).

    ``async with LanghostPeer(io_ms=20) as peer:`` sets everything up (minutes the first
    time, for the venv; ~10 s after) and ``peer.url`` answers the Agent Server API;
    leaving the block stops langhost, Redis and Postgres and deletes the cluster.

    Attributes:
        io_ms: what each node of the bench graph awaits, in milliseconds.
        jobs_per_worker: the peer's ``N_JOBS_PER_WORKER``.
        venv: the peer's venv (None: :func:`venv_dir`).
        ready_timeout_seconds: how long to wait for ``/ok``.

    Raises:
        PeerUnavailable: (from ``__aenter__``) a step cannot be done here.
    """

    io_ms: float = 20.0
    jobs_per_worker: int = 10
    venv: Path | None = None
    ready_timeout_seconds: float = 120.0
    url: str = ""
    workdir: Path | None = None
    _pg_bin: Path | None = None
    _pg_user: str | None = None
    _pg_started: bool = False
    _redis: subprocess.Popen[bytes] | None = None
    _langhost: subprocess.Popen[bytes] | None = None
    _logs: list[Any] = field(default_factory=list)

    async def __aenter__(self) -> LanghostPeer:
        try:
            await asyncio.to_thread(self._start)
        except BaseException as exc:
            await asyncio.to_thread(self._stop)
            if isinstance(exc, Exception) and not isinstance(exc, PeerUnavailable):
                raise PeerUnavailable(f"setting the peer up failed: {type(exc).__name__}: "
                                      f"{exc}") from exc
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self._stop)

    # blocking parts, run in a thread

    def _start(self) -> None:
        from services.local.managed import free_port

        pg_bin, redis = find_postgres_bin(), find_redis_server()
        missing = missing_packages(pg_bin, redis)
        if missing and apt_install(missing):
            pg_bin, redis = find_postgres_bin(), find_redis_server()
            missing = missing_packages(pg_bin, redis)
        if missing or pg_bin is None or redis is None:
            raise PeerUnavailable(f"{' and '.join(missing)} not found: {install_hint(missing)}")
        is_root = os.geteuid() == 0
        if is_root and not shutil.which("runuser"):
            raise PeerUnavailable("root needs runuser to run initdb as 'postgres': "
                                  "apt-get install util-linux")
        self._pg_bin, self._pg_user = pg_bin, postgres_user(is_root=is_root)
        venv = self.venv or venv_dir()
        ensure_venv(venv)

        self.workdir = Path(tempfile.mkdtemp(prefix="overseer-langhost-"))
        self.workdir.chmod(0o755)  # the postgres user must reach its cluster inside
        pg_dir = self.workdir / "pg"
        pg_dir.mkdir()
        if self._pg_user:
            shutil.chown(pg_dir, self._pg_user, self._pg_user)
        self._run(initdb_command(pg_bin, pg_dir / "data", self._pg_user), "initdb")
        pg_port, redis_port, port = free_port(), free_port(), free_port()
        self._run(pg_ctl_start_command(pg_bin, pg_dir / "data", port=pg_port, socket_dir=pg_dir,
                                       log=pg_dir / "postgres.log", user=self._pg_user),
                  "pg_ctl start", log=pg_dir / "postgres.log")
        self._pg_started = True
        self._redis = self._spawn(redis_command(redis, port=redis_port, workdir=self.workdir),
                                  "redis.log")

        app = self.workdir / "app"
        app.mkdir()
        for graph_py, builder, module in PEER_GRAPHS.values():
            (app / module).write_text(peer_graph_source(graph_py, builder))
        (app / "langgraph.json").write_text(json.dumps(langgraph_config(), indent=2))
        env = langhost_env(database_uri=f"postgresql://postgres@127.0.0.1:{pg_port}/postgres"
                                        "?sslmode=disable",
                           redis_uri=f"redis://127.0.0.1:{redis_port}/0", io_ms=self.io_ms,
                           jobs_per_worker=self.jobs_per_worker)
        self._langhost = self._spawn(
            langhost_command(venv, port=port, config=app / "langgraph.json",
                             jobs_per_worker=self.jobs_per_worker),
            "langhost.log", cwd=app, env=env)
        self.url = f"http://127.0.0.1:{port}"
        self._wait_ready()

    def _run(self, argv: list[str], what: str, *, log: Path | None = None) -> None:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            detail = (last_line(log) if log else "") or _tail(done.stderr or done.stdout)
            raise PeerUnavailable(f"{what} failed for the peer's Postgres ({detail})")

    def _spawn(self, argv: list[str], log_name: str, **kwargs: Any) -> subprocess.Popen[bytes]:
        assert self.workdir is not None
        log = open(self.workdir / log_name, "ab")  # noqa: SIM115 — closed in _stop
        self._logs.append(log)
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, **kwargs)

    def _wait_ready(self) -> None:
        import httpx

        assert self._langhost is not None
        assert self.workdir is not None
        deadline = time.monotonic() + self.ready_timeout_seconds
        while time.monotonic() < deadline:
            if self._redis is not None and self._redis.poll() is not None:
                raise PeerUnavailable(f"redis-server exited ({self._redis.returncode}): "
                                      f"{last_line(self.workdir / 'redis.log')}")
            if self._langhost.poll() is not None:
                raise PeerUnavailable(f"langhost exited ({self._langhost.returncode}): "
                                      f"{last_line(self.workdir / 'langhost.log')}")
            try:
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise PeerUnavailable(f"langhost did not answer /ok in {self.ready_timeout_seconds:g} s: "
                              f"{last_line(self.workdir / 'langhost.log')}")

    def _stop(self) -> None:
        from services.local.embedded import stop_process

        for proc in (self._langhost, self._redis):
            if proc is not None:
                stop_process(proc)
        self._langhost = self._redis = None
        if self._pg_started and self._pg_bin is not None and self.workdir is not None:
            subprocess.run(pg_ctl_stop_command(self._pg_bin, self.workdir / "pg" / "data",
                                               self._pg_user),
                           capture_output=True, timeout=60, check=False)
            self._pg_started = False
        for log in self._logs:
            log.close()
        self._logs.clear()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds used so far by the peer's parts: ``{langhost, postgres, redis}``.

        Postgres counts the postmaster and every backend it forked (read from
        ``postmaster.pid``).
        """
        import psutil

        from bench.harness import _cpu

        out: dict[str, float] = {}
        for name, proc in (("langhost", self._langhost), ("redis", self._redis)):
            if proc is not None and proc.poll() is None:
                out[name] = _cpu(psutil.Process(proc.pid))
        pg = 0.0
        if self.workdir is not None:
            try:
                pid = int((self.workdir / "pg" / "data" / "postmaster.pid").read_text().split()[0])
                master = psutil.Process(pid)
                for p in [master, *master.children(recursive=True)]:
                    try:
                        pg += _cpu(p)
                    except psutil.Error:
                        continue
            except (OSError, ValueError, IndexError, psutil.Error):
                pass
        out["postgres"] = pg
        return out


# -- the scenario ----------------------------------------------------------------------------------


def _bench_cpu() -> float:
    import psutil

    from bench.harness import _cpu

    return _cpu(psutil.Process(os.getpid()))


async def agent_server_peer(h: Harness, cfg: sc.BenchConfig, gcfg: gs.GraphBenchConfig,
                            pcfg: PeerBenchConfig | None = None) -> list[ScenarioResult]:
    """Overseer's Agent Server API against langhost's, the same graph, the official SDK.

    Per trial and side (order alternating as ``_order(i)`` does): ``pcfg.peer_runs``
    stateless ``runs.wait`` calls all in flight at once (runs/s of final answers), then
    ``pcfg.peer_latency_runs`` one at a time (p50 ms). Overseer runs the bench graph as
    segments (``bench_four_io``, as every graph of a ``langgraph.json`` runs); the peer runs
    the same ``graph.py``.

    Returns:
        ``[throughput, p50]`` results: ``agent_server_peer`` (ratio Overseer ÷ peer, target
        ≥ 1.0 × and every answer final) and ``agent_server_peer_p50`` (target: p50 ≤ 60 ms
        above the nodes' own ``4 × graph_io_ms`` of I/O). When the peer cannot be set up,
        the first result carries the skip message in ``notes`` and no trials.
    """
    pcfg = pcfg or PeerBenchConfig()
    from langgraph_sdk import get_client

    io_floor = len(NODES) * gcfg.graph_io_ms
    common = {"io_ms_per_node": gcfg.graph_io_ms, "peer": LANGHOST_REQUIREMENT,
              "peer_jobs_per_worker": pcfg.peer_jobs_per_worker,
              "overseer_graph": gs.GRAPH_NAME}
    thr = ScenarioResult(
        "agent_server_peer", f"runs/s, {pcfg.peer_runs} concurrent runs.wait (HTTP, SDK)",
        higher_is_better=True, baseline_name=PEER_NAME,
        target="≥ 1.0 × the Agent Server peer, every answer final (aim 2 ×)",
        target_value=1.0, extra={**common, "runs_per_trial": pcfg.peer_runs})
    p50 = ScenarioResult(
        "agent_server_peer_p50", "runs.wait p50 ms, one at a time", higher_is_better=False,
        baseline_name=PEER_NAME,
        target=f"p50 ≤ 60 ms above the nodes' own {io_floor:g} ms of I/O",
        target_value=60.0 + io_floor, target_on="value",
        extra={**common, "runs_per_trial": pcfg.peer_latency_runs, "node_io_floor_ms": io_floor})
    try:
        peer = LanghostPeer(io_ms=gcfg.graph_io_ms, jobs_per_worker=pcfg.peer_jobs_per_worker)
        await peer.__aenter__()
    except PeerUnavailable as exc:
        thr.notes.append(skip_message(str(exc)))
        thr.target = f"(skipped) {thr.target}"
        thr.target_value = None
        return [thr]
    try:
        clients = {"overseer": get_client(url=h.stack.api_url, api_key=h.stack.tokens["admin"]),
                   "baseline": get_client(url=peer.url, api_key=None)}
        graphs = {"overseer": gs.GRAPH_NAME, "baseline": PEER_GRAPH_ID}

        def waiter(side: str) -> Callable[[str], Any]:
            async def one(topic: str) -> Any:
                try:
                    return await clients[side].runs.wait(None, graphs[side], input={"topic": topic})
                except Exception as exc:  # noqa: BLE001 — counted as a missing answer, kept for the note
                    return exc
            return one

        def cpu(side: str) -> dict[str, float]:
            if side == "overseer":
                return h.cpu_seconds()
            return {**peer.cpu_seconds(), "bench": _bench_cpu()}

        for side in ("overseer", "baseline"):  # warm both
            await run_bounded(gs.topics(4), waiter(side), concurrency=2)
        answers = {"overseer": [0, 0], "baseline": [0, 0]}
        errors: dict[str, list[str]] = {"overseer": [], "baseline": []}
        for i in range(cfg.repeats):
            for side in gs._order(i):
                load, cpu0 = load_average(), cpu(side)
                elapsed, lat, out = await run_bounded(gs.topics(pcfg.peer_runs), waiter(side),
                                                      concurrency=pcfg.peer_runs)
                per_run = cpu_per_run_ms(cpu0, cpu(side), pcfg.peer_runs)
                done = sum(1 for r in out if is_final_answer(r))
                answers[side][0] += done
                answers[side][1] += len(out)
                errors[side] += [f"{type(r).__name__}: {r}"[:160] for r in out
                                 if isinstance(r, Exception)][:3]
                (thr.overseer if side == "overseer" else thr.baseline).append(Trial(
                    done / elapsed, load, {
                        "elapsed_s": round(elapsed, 3), "answered": done, "sent": len(out),
                        "latency": latency_summary(lat), "cpu_ms_per_run": per_run,
                        "cpu_ms_per_run_total": round(sum(per_run.values()), 1)}))
                load = load_average()
                _, lat, out = await run_bounded(gs.topics(pcfg.peer_latency_runs), waiter(side),
                                                concurrency=1)
                summary = latency_summary(lat)
                final = sum(1 for r in out if is_final_answer(r))
                answers[side][0] += final
                answers[side][1] += len(out)
                (p50.overseer if side == "overseer" else p50.baseline).append(Trial(
                    summary["p50_ms"], load, {"latency": summary, "answered": final}))
        ratio = thr.ratio_spread()
        thr.extra["answers"] = {k: f"{v[0]}/{v[1]}" for k, v in answers.items()}
        thr.extra["checks"] = {
            "throughput ≥ 1.0 × peer": bool(ratio and ratio.median >= 1.0),
            "every answer final (both sides)": all(d == n for d, n in answers.values())}
        thr.notes.append(f"final answers: Overseer {thr.extra['answers']['overseer']}, "
                         f"peer {thr.extra['answers']['baseline']} (throughput and latency "
                         f"trials); peer N_JOBS_PER_WORKER={pcfg.peer_jobs_per_worker}")
        for side, errs in errors.items():
            if errs:
                thr.notes.append(f"{side} errors (first): {'; '.join(errs[:3])}")
    finally:
        await peer.__aexit__(None, None, None)
    return [thr, p50]


__all__ = ["LANGHOST_REQUIREMENT", "PEER_CHAT_GRAPH_ID", "PEER_GRAPHS",
           "LanghostPeer", "PeerBenchConfig", "PeerUnavailable",
           "agent_server_peer", "apt_install", "as_user", "ensure_venv", "find_postgres_bin",
           "find_redis_server", "initdb_command", "install_hint", "is_final_answer",
           "langgraph_config", "langhost_command", "langhost_env", "missing_packages",
           "peer_graph_source", "pg_ctl_start_command", "pg_ctl_stop_command", "postgres_user",
           "redis_command", "skip_message", "venv_dir"]
