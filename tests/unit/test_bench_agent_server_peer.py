"""The Agent Server peer's pure parts: finding binaries, building commands, skipping cleanly.

Nothing here installs or starts langhost, Postgres or Redis (``make bench`` does).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bench import agent_server_peer as asp
from bench.__main__ import API_SCENARIOS, GRAPH_FUNCS, ORDER, parse
from bench.graph_scenarios import GraphBenchConfig
from bench.report import table
from bench.scenarios import BenchConfig


def _pg_bin(root: Path, version: str, *, complete: bool = True) -> Path:
    d = root / "postgresql" / version / "bin"
    d.mkdir(parents=True)
    for name in ("initdb", "pg_ctl", "postgres") if complete else ("initdb",):
        (d / name).write_text("#!/bin/sh\n")
    return d


def test_find_postgres_bin_prefers_the_newest_complete_debian_build(tmp_path: Path) -> None:
    old, new = _pg_bin(tmp_path, "13"), _pg_bin(tmp_path, "15")
    broken = _pg_bin(tmp_path, "16", complete=False)
    assert asp.find_postgres_bin([old, broken, new], which=lambda _: None) == new
    assert asp.find_postgres_bin([old], which=lambda _: None) == old


def test_find_postgres_bin_follows_a_symlinked_initdb_on_path(tmp_path: Path) -> None:
    real = _pg_bin(tmp_path, "15")
    local = tmp_path / "local-bin"
    local.mkdir()
    (local / "initdb").symlink_to(real / "initdb")
    assert asp.find_postgres_bin([], which=lambda _: str(local / "initdb")) == real


def test_find_postgres_bin_ignores_a_lone_initdb(tmp_path: Path) -> None:
    lone = tmp_path / "bin"
    lone.mkdir()
    (lone / "initdb").write_text("")
    assert asp.find_postgres_bin([], which=lambda _: str(lone / "initdb")) is None
    assert asp.find_postgres_bin([], which=lambda _: None) is None


def test_missing_packages_and_the_install_hint() -> None:
    assert asp.missing_packages(None, None) == ["postgresql", "redis-server"]
    assert asp.missing_packages(Path("/usr/lib/postgresql/15/bin"), None) == ["redis-server"]
    assert asp.missing_packages(Path("/x"), "/usr/bin/redis-server") == []
    assert asp.install_hint(["postgresql", "redis-server"]) == \
        "apt-get install postgresql redis-server (as root)"


def test_apt_install_tries_nothing_unless_root_with_apt_get(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: Any, **__: Any) -> None:
        raise AssertionError("apt-get must not run")

    monkeypatch.setattr(asp.subprocess, "run", boom)
    assert asp.apt_install(["redis-server"], is_root=False, apt="/usr/bin/apt-get") is False
    assert asp.apt_install(["redis-server"], is_root=True, apt="") is False
    assert asp.apt_install([], is_root=True, apt="/usr/bin/apt-get") is False


def test_apt_install_updates_then_installs_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    class Done:
        returncode = 0

    def run(argv: list[str], **kwargs: Any) -> Done:
        calls.append(argv)
        assert kwargs["env"]["DEBIAN_FRONTEND"] == "noninteractive"
        return Done()

    monkeypatch.setattr(asp.subprocess, "run", run)
    assert asp.apt_install(["postgresql"], is_root=True, apt="apt-get") is True
    assert calls == [["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "postgresql"]]


def test_postgres_runs_as_the_postgres_user_only_under_root() -> None:
    assert asp.postgres_user(is_root=False) is None
    assert asp.postgres_user(is_root=True, lookup=lambda name: name) == "postgres"

    def no_user(name: str) -> None:
        raise KeyError(name)

    with pytest.raises(asp.PeerUnavailable, match="apt-get install postgresql"):
        asp.postgres_user(is_root=True, lookup=no_user)


def test_postgres_commands(tmp_path: Path) -> None:
    pg = Path("/usr/lib/postgresql/15/bin")
    data = tmp_path / "data"
    assert asp.initdb_command(pg, data, None)[:3] == [str(pg / "initdb"), "-D", str(data)]
    as_pg = asp.initdb_command(pg, data, "postgres")
    assert as_pg[:4] == ["runuser", "-u", "postgres", "--"]
    assert "--auth=trust" in as_pg
    start = asp.pg_ctl_start_command(pg, data, port=5555, socket_dir=tmp_path, log=tmp_path / "l",
                                     user=None)
    opts = start[start.index("-o") + 1]
    assert "-p 5555" in opts
    assert "listen_addresses=127.0.0.1" in opts
    assert f"unix_socket_directories={tmp_path}" in opts
    assert start[-1] == "start"
    assert "-w" in start
    stop = asp.pg_ctl_stop_command(pg, data, "postgres")
    assert stop[0] == "runuser"
    assert stop[-4:] == ["-m", "fast", "-w", "stop"]


def test_redis_and_langhost_commands(tmp_path: Path) -> None:
    redis = asp.redis_command("/usr/bin/redis-server", port=6400, workdir=tmp_path)
    assert redis[redis.index("--port") + 1] == "6400"
    assert redis[redis.index("--save") + 1] == ""
    assert redis[redis.index("--bind") + 1] == "127.0.0.1"
    cmd = asp.langhost_command(tmp_path / "venv", port=7000, config=tmp_path / "langgraph.json",
                               jobs_per_worker=10)
    assert cmd[:2] == [str(tmp_path / "venv" / "bin" / "langhost"), "serve"]
    assert cmd[cmd.index("--port") + 1] == "7000"
    assert cmd[cmd.index("--n-jobs-per-worker") + 1] == "10"


def test_langhost_env_keeps_nothing_of_overseer() -> None:
    env = asp.langhost_env(database_uri="postgresql://pg", redis_uri="redis://r", io_ms=20.0,
                           jobs_per_worker=10,
                           base={"PATH": "/bin", "OVERSEER_GRAPHS": "x", "VIRTUAL_ENV": "v",
                                 "LANGSMITH_API_KEY": "k", "BENCH_CHAT_TOKENS": "12"})
    assert env["PATH"] == "/bin"
    assert env["DATABASE_URI"] == "postgresql://pg"
    assert env["REDIS_URI"] == "redis://r"
    assert env["BENCH_GRAPH_IO_MS"] == "20"
    assert env["N_JOBS_PER_WORKER"] == "10"
    assert env["BENCH_CHAT_TOKENS"] == "12"  # both sides' chat agent streams alike
    assert env["LANGSMITH_TRACING"] == "false"
    assert not {"OVERSEER_GRAPHS", "VIRTUAL_ENV", "LANGSMITH_API_KEY"} & set(env)


def test_the_peer_serves_the_bench_graph_itself() -> None:
    namespace: dict[str, Any] = {}
    exec(asp.peer_graph_source(), namespace)  # noqa: S102 — our own generated module
    graph = namespace["graph"]
    assert set(graph.nodes) == {"fetch", "enrich", "score", "publish"}
    chat: dict[str, Any] = {}
    exec(asp.peer_graph_source(asp.CHAT_PY, "build_chat_graph"), chat)  # noqa: S102
    assert set(chat["graph"].nodes) == {"agent", "tools"}
    assert asp.langgraph_config() == {"dependencies": ["."],
                                      "graphs": {"bench_four_io": "./peer_graph.py:graph",
                                                 "bench_chat": "./peer_chat.py:graph"}}


def test_final_answers() -> None:
    final = {"topic": "t", "trail": ["fetch", "enrich", "score", "publish"], "published": True}
    assert asp.is_final_answer(final)
    assert not asp.is_final_answer({**final, "published": False})
    assert not asp.is_final_answer({**final, "trail": ["fetch"]})
    assert not asp.is_final_answer(RuntimeError("boom"))
    assert not asp.is_final_answer(None)


def test_skip_message_is_one_line() -> None:
    msg = asp.skip_message("redis-server not found:\n  apt-get install redis-server")
    assert msg == "skipped: redis-server not found: apt-get install redis-server"


def test_last_line_of_a_log_drops_colours(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("first\n\x1b[31merror: no graph\x1b[0m\n\n")
    assert asp.last_line(log) == "error: no graph"
    assert asp.last_line(tmp_path / "missing.log") == ""


def test_venv_location_and_reuse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert asp.venv_dir({asp.VENV_ENV: str(tmp_path)}) == tmp_path
    assert asp.venv_dir({}) == asp.DEFAULT_VENV
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "langhost").write_text("")
    (tmp_path / ".overseer-bench-requirement").write_text(asp.LANGHOST_REQUIREMENT + "\n")

    def boom(*_: Any, **__: Any) -> None:
        raise AssertionError("a stamped venv is reused as it is")

    monkeypatch.setattr(asp.subprocess, "run", boom)
    assert asp.ensure_venv(tmp_path) == tmp_path / "bin" / "langhost"


def test_a_venv_that_cannot_be_made_is_a_one_line_reason(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(asp.PeerUnavailable, match=asp.VENV_ENV):
        asp.ensure_venv(blocker / "venv")


def test_the_scenario_is_registered_and_gets_the_api() -> None:
    assert "agent_server_peer" in ORDER
    assert "agent_server_peer" in GRAPH_FUNCS
    assert "agent_server_peer" in API_SCENARIOS
    inv = parse(["--only", "agent_server_peer", "--peer-runs", "50", "--peer-jobs-per-worker", "20"])
    assert inv.only == {"agent_server_peer"}
    assert inv.pcfg.peer_runs == 50
    assert inv.pcfg.peer_jobs_per_worker == 20
    assert parse([]).pcfg == asp.PeerBenchConfig()


@pytest.mark.parametrize("error", [asp.PeerUnavailable("redis-server not found: apt-get install "
                                                       "redis-server (as root)"),
                                   OSError("disk full")])
def test_a_peer_that_cannot_start_skips_the_scenario(monkeypatch: pytest.MonkeyPatch,
                                                     error: Exception) -> None:
    stopped: list[bool] = []

    def start(self: asp.LanghostPeer) -> None:
        raise error

    monkeypatch.setattr(asp.LanghostPeer, "_start", start)
    monkeypatch.setattr(asp.LanghostPeer, "_stop", lambda self: stopped.append(True))
    results = asyncio.run(asp.agent_server_peer(None, BenchConfig(), GraphBenchConfig()))  # type: ignore[arg-type]
    assert len(results) == 1
    (res,) = results
    assert res.name == "agent_server_peer"
    assert not res.overseer
    assert not res.baseline
    assert res.verdict() is None
    assert len(res.notes) == 1
    assert res.notes[0].startswith("skipped: ")
    assert "\n" not in res.notes[0]
    assert str(error) in res.notes[0]
    assert stopped == [True]
    assert res.to_dict()["meets_target"] is None
    assert "(skipped)" in table([res])
