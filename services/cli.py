"""The ``overseer`` command: ``run`` (embedded stack), ``worker``, ``api``, ``migrate``."""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import sys
from typing import Any

import typer

from overseer.settings import Settings
from services.local.supervisor import Child, Supervisor

app = typer.Typer(help="Overseer: durable supervised AI-agent pipelines on Temporal.",
                  no_args_is_help=True)


@app.command()
def run() -> None:
    """Start the whole embedded stack in the foreground: Postgres, Temporal, worker, API.

    A worker or API that dies is started again with backoff (:mod:`services.local.supervisor`);
    only Ctrl-C or SIGTERM stops the stack.
    """
    from services.local import embedded

    settings = Settings()
    data = settings.data_dir
    data.mkdir(parents=True, exist_ok=True)
    tokens = ensure_dev_tokens(settings)
    pg = None
    temporal = None
    supervisor: Supervisor | None = None
    try:
        if settings.database_url:
            db_url = settings.database_url
        else:
            typer.echo("starting embedded Postgres …")
            pg = embedded.start_postgres(data)
            db_url = pg.url
        asyncio.run(_migrate(db_url))
        if settings.temporal_address:
            address = settings.temporal_address
        else:
            typer.echo("starting Temporal dev server …")
            temporal = embedded.start_temporal(data, port=settings.temporal_port,
                                               ui_port=settings.temporal_ui_port)
            address = f"127.0.0.1:{settings.temporal_port}"
        env = embedded.child_env(OVERSEER_DATABASE_URL=db_url, OVERSEER_TEMPORAL_ADDRESS=address)
        supervisor = Supervisor(
            [Child("worker", [sys.executable, "-m", "services.worker.main"], env),
             Child("api", [sys.executable, "-m", "uvicorn", "--factory", "services.api.main:app",
                           "--host", settings.api_host, "--port", str(settings.api_port),
                           "--log-level", "warning"], env)],
            embedded.stop_process, say=lambda line: typer.echo(line, err=True))
        supervisor.start()
        _banner(settings, address, tokens)
        _until_stopped(supervisor)
    finally:
        typer.echo("stopping …")
        if supervisor is not None:
            supervisor.stop_children()
        if temporal is not None:
            embedded.stop_process(temporal)
        if pg is not None:
            pg.stop()
        typer.echo("stopped; data kept in " + str(data))


@app.command()
def worker() -> None:
    """Run a worker against ``OVERSEER_TEMPORAL_ADDRESS`` and ``OVERSEER_DATABASE_URL``."""
    from services.worker.main import main

    main()


@app.command()
def api() -> None:
    """Run the HTTP API (uvicorn) against the configured Temporal and Postgres."""
    import uvicorn

    settings = Settings()
    uvicorn.run("services.api.main:app", factory=True, host=settings.api_host,
                port=settings.api_port)


@app.command()
def migrate() -> None:
    """Apply pending database migrations to ``OVERSEER_DATABASE_URL``."""
    settings = Settings()
    if not settings.database_url:
        raise typer.BadParameter("OVERSEER_DATABASE_URL is not set")
    applied = asyncio.run(_migrate(settings.database_url))
    typer.echo(f"applied: {', '.join(applied) or 'nothing (up to date)'}")


def ensure_dev_tokens(settings: Settings) -> dict[str, str]:
    """Create ``.overseer/dev-tokens.json`` (``{role: token}``) once; reuse it after.

    Development only: outside it, tokens come from ``OVERSEER_API_TOKENS`` / a tokens file.
    """
    path = settings.dev_tokens_path
    if path.exists():
        tokens: dict[str, str] = json.loads(path.read_text())
        return tokens
    tokens = {role: f"ovs_{role[:3]}_{secrets.token_urlsafe(24)}"
              for role in ("submitter", "reviewer", "admin")}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tokens, indent=2) + "\n")
    path.chmod(0o600)
    return tokens


async def _migrate(url: str) -> list[str]:
    import asyncpg

    from overseer.store.migrations import apply_migrations

    conn = await asyncpg.connect(url)
    try:
        return await apply_migrations(conn)
    finally:
        await conn.close()


def _banner(settings: Settings, address: str, tokens: dict[str, str]) -> None:
    api = f"http://{settings.api_host}:{settings.api_port}"
    lines = [
        "",
        "Overseer is up (Ctrl-C stops everything; data stays in "
        f"{settings.data_dir}/)",
        f"  API              {api}   (OpenAPI docs: {api}/docs)",
        f"  Temporal         {address}",
        f"  Temporal Web UI  http://127.0.0.1:{settings.temporal_ui_port}"
        if not settings.temporal_address else "  Temporal Web UI  (external cluster)",
        f"  metrics          {api}/metrics (API), "
        f"http://{settings.metrics_host_worker}:{settings.metrics_port_worker}/metrics (worker)",
        f"  review console   {api}/console",
        f"  dev tokens       {settings.dev_tokens_path}",
    ]
    lines += [f"    {role:<10} {token}" for role, token in tokens.items()]
    typer.echo("\n".join(lines) + "\n")


def _until_stopped(supervisor: Supervisor) -> None:
    """Keep the worker and the API running (restarted with backoff when one dies) until Ctrl-C / SIGTERM."""

    def _handler(*_: object) -> None:
        supervisor.stop()

    # Installed explicitly: a parent that ignores SIGINT (nohup, a background job) would
    # otherwise leave Ctrl-C without effect.
    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, _handler)
    try:
        supervisor.run()
    except KeyboardInterrupt:
        return


@app.command()
def check(json_output: bool = typer.Option(False, "--json", help="print the report as JSON")) -> None:
    """Prove the read models agree with the event log (exit 1 when they do not)."""
    import asyncpg

    from overseer.store.consistency import check_consistency

    settings = Settings()
    if not settings.database_url:
        raise typer.BadParameter("OVERSEER_DATABASE_URL is not set")

    async def _run() -> dict[str, Any]:
        conn = await asyncpg.connect(settings.database_url)
        try:
            return (await check_consistency(conn)).to_dict()
        finally:
            await conn.close()

    report = asyncio.run(_run())
    if json_output:
        typer.echo(json.dumps(report, indent=2))
    else:
        verdict = "consistent" if report["ok"] else "INCONSISTENT"
        typer.echo(f"{verdict}: {report['events']} events, {report['runs']} runs, "
                   f"statuses {report['by_status']}")
        for key in ("mismatched", "runs_without_submission", "duplicate_submissions",
                    "duplicate_terminal_events", "decisions_without_request"):
            if report[key] and (key != "mismatched" or any(report[key].values())):
                typer.echo(f"  {key}: {report[key]}")
    raise typer.Exit(0 if report["ok"] else 1)
