"""The one retry policy every graph node's activity uses (both pipelines)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from temporalio.common import RetryPolicy


def node_retry_policy(non_retryable: Sequence[str]) -> RetryPolicy:
    """Exponential backoff 1 s → 30 s, 10 attempts (~2.5 min: rides out a Postgres restart).

    Args:
        non_retryable: ``ApplicationError`` types that must never be retried (poison input).
    """
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=10,
        non_retryable_error_types=list(non_retryable),
    )
