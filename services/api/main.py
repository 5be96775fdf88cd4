"""The FastAPI app: one Temporal client and one Postgres pool made in the lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from observability.http import install_api_observability
from observability.metrics_temporal import temporal_runtime
from observability.tracing import setup_tracing
from overseer.settings import Settings, cors_policy, get_settings
from overseer.store.db import create_pool
from services.api.errors import install_error_handlers
from services.api.limits import MULTIPART_OVERHEAD_BYTES, BodySizeLimit
from services.api.routes import approvals, health, pipelines, runs, stats, submissions
from services.api.routes.console import install_console

EXPOSED_HEADERS = ("content-location", "location", "x-pagination-total", "x-pagination-next")
"""Response headers a page on another origin may read: the JS client takes a new run's id
from ``Content-Location`` and pages with the ``x-pagination-*`` ones (as the Agent Server)."""


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app for ``settings`` (default: from the environment).

    Raises:
        SystemExit: at startup, when no database URL is configured.
    """
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from overseer.temporal_client import connect_client

        setup_tracing("overseer-api")
        if not settings.database_url:
            raise SystemExit("OVERSEER_DATABASE_URL is not set (overseer run sets it for you)")
        app.state.settings = settings
        app.state.grants = settings.load_token_grants()
        app.state.pool = await create_pool(settings.database_url,
                                           max_size=settings.database_pool_max_size)
        # Pipelines' report and quote hooks read stored uploads through the same runtime
        # holder their nodes use.
        from overseer import resources as activity_runtime

        previous = activity_runtime.current()  # an in-process app (tests) must not leave its pool
        activity_runtime.configure(app.state.pool, settings)
        app.state.temporal = await connect_client(settings, temporal_runtime())
        try:
            yield
        finally:
            activity_runtime.install(previous)
            await app.state.pool.close()

    app = FastAPI(
        title="Overseer",
        version="0.1.0",
        description="Durable runtime for supervised LangGraph pipelines on Temporal.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit,
                       max_body_bytes=settings.max_upload_bytes + MULTIPART_OVERHEAD_BYTES)
    for module in (submissions, runs, approvals, pipelines, health, stats):
        app.include_router(module.router)
    from overseer.registry import get_registry

    for pipeline in get_registry():  # a pipeline's own routes (Pipeline.api.router)
        if pipeline.api.router is not None:
            app.include_router(pipeline.api.router())
    from services.api.routes import (
        agent_assistants,
        agent_crons,
        agent_info,
        agent_mcp,
        agent_protocol_commands,
        agent_protocol_stream,
        agent_run_streams,
        agent_runs,
        agent_store,
        agent_threads,
    )

    # the LangGraph Agent Server API
    app.include_router(agent_info.router)  # its versions and feature flags
    app.include_router(agent_assistants.router)  # registered graphs, and assistants with versions
    app.include_router(agent_threads.router)  # threads, their state and history
    # streams before runs: POST .../runs/wait and .../runs/stream are tried before .../runs/{run_id}
    app.include_router(agent_run_streams.router)  # a run streamed, waited for, joined
    app.include_router(agent_runs.router)  # runs (its lifespan starts queued runs left behind)
    app.include_router(agent_protocol_commands.router)  # its thread protocol v2 (useStream 1.x)
    app.include_router(agent_protocol_stream.router)  # ... and that protocol's event stream
    app.include_router(agent_store.router)  # its store API, on LangGraph's Postgres store
    app.include_router(agent_crons.router)  # its crons, each a Temporal Schedule
    app.include_router(agent_mcp.router)  # every assistant as an MCP tool (Streamable HTTP)
    install_console(app)

    install_api_observability(app, pipelines=tuple(get_registry().names()),
                              metrics_token=settings.metrics_token)
    origins, pattern = cors_policy(settings)
    if origins or pattern:  # outermost: a preflight is answered before auth, errors keep it
        app.add_middleware(CORSMiddleware, allow_origins=origins, allow_origin_regex=pattern,
                           allow_methods=["*"], allow_headers=["*"], allow_credentials=False,
                           expose_headers=list(EXPOSED_HEADERS), max_age=600)
    return app


def app() -> FastAPI:
    """Factory for ``uvicorn --factory services.api.main:app`` (JSON logs on stderr)."""
    from observability.logging import setup_logging

    setup_logging("overseer-api")
    return create_app()
