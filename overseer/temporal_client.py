"""The one way a process of Overseer connects to Temporal (the API and the worker alike)."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client

from observability.tracing import temporal_tracing_plugin
from overseer.settings import Settings


async def connect_client(settings: Settings, runtime: Any = None) -> Client:
    """A Temporal client for the configured address and namespace, with tracing.

    Args:
        settings: address (``temporal_address``, else the embedded dev server's
            ``127.0.0.1:<temporal_port>``) and namespace.
        runtime: a ``temporalio.runtime.Runtime`` (e.g. one whose SDK metrics feed
            ``/metrics``, from :func:`observability.metrics_temporal.temporal_runtime`); default: the SDK's.

    Raises:
        RuntimeError: Temporal could not be reached (the SDK's connection error).
    """
    address = settings.temporal_address or f"127.0.0.1:{settings.temporal_port}"
    return await Client.connect(address, namespace=settings.temporal_namespace,
                                plugins=[temporal_tracing_plugin()], runtime=runtime)
