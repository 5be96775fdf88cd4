"""Turning Overseer's domain errors into Temporal activity failures, once, for every activity."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from overseer.errors import OverseerError

P = ParamSpec("P")
R = TypeVar("R")


TRANSIENT_FIRST_ATTEMPTS: dict[str, int] = {"ocr_timeout": 3}
"""Permanent-looking failures that may be the machine's fault, not the document's: an OCR
time-out on a starved worker. They are retried until the given attempt, then permanent."""


def as_application_error(err: OverseerError) -> ApplicationError:
    """The ``ApplicationError`` for a domain error: ``type=code``; permanent ones non-retryable.

    A transient error carrying ``details["retry_after_seconds"]`` (a 429's Retry-After)
    sets ``next_retry_delay`` so Temporal waits that long before the next attempt. A
    reason listed in :data:`TRANSIENT_FIRST_ATTEMPTS` is retried (type = the reason) until
    that attempt, so an overloaded worker does not fail a good document.
    """
    reason = str(err.details.get("reason", ""))
    last_attempt = TRANSIENT_FIRST_ATTEMPTS.get(reason)
    if last_attempt and activity.in_activity() and activity.info().attempt < last_attempt:
        return ApplicationError(f"{err.message} (attempt {activity.info().attempt}, retrying)",
                                {"code": err.code, **err.details}, type=reason,
                                non_retryable=False)
    retry_after = err.details.get("retry_after_seconds")
    return ApplicationError(
        err.message,
        {"code": err.code, **err.details},
        type=err.code,
        non_retryable=not err.retryable,
        next_retry_delay=timedelta(seconds=float(retry_after)) if retry_after else None,
    )


def temporal_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Decorate an activity (or node) so domain errors leave it as ApplicationErrors.

    A poison document fails its step once with a reason and never retries forever;
    other exceptions (database, network) propagate unchanged so the retry policy applies.
    """

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except OverseerError as err:
            raise as_application_error(err) from err

    return wrapper


def error_dict(err: BaseException) -> dict[str, Any]:
    """``{code, message}`` for an error recorded in an event (no stack, no document text)."""
    if isinstance(err, OverseerError):
        return {"code": err.code, "message": err.message}
    return {"code": type(err).__name__, "message": str(err)[:300]}
