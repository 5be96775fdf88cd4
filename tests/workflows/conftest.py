"""Workflow-test fixtures: an in-process worker on a fresh task queue per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from services.worker.main import build_worker


@pytest.fixture
async def worker(dev_server: WorkflowEnvironment, db: object, task_queue: str
                 ) -> AsyncIterator[Worker]:
    """The real Overseer worker (plugin, graphs, activities) polling ``task_queue`` on the dev server."""
    async with build_worker(dev_server.client, task_queue=task_queue) as w:
        yield w
