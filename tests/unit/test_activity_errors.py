"""Domain errors leave activities as the right ApplicationErrors (retryable or not)."""

from __future__ import annotations

import dataclasses

import pytest
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from overseer.errors import LLMRateLimitedError, UnreadableDocumentError
from overseer.runtime.errors import temporal_errors


@activity.defn
@temporal_errors
async def ocr_times_out() -> None:
    raise UnreadableDocumentError("OCR timed out on a page.", details={"reason": "ocr_timeout"})


@activity.defn
@temporal_errors
async def corrupt() -> None:
    raise UnreadableDocumentError("The PDF is truncated or corrupt.", details={"reason": "corrupt"})


@activity.defn
@temporal_errors
async def rate_limited() -> None:
    raise LLMRateLimitedError("slow down", details={"retry_after_seconds": 7})


async def _raised(fn, attempt: int = 1) -> ApplicationError:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, attempt=attempt)
    with pytest.raises(ApplicationError) as err:
        await env.run(fn)
    return err.value


async def test_ocr_timeout_is_retried_twice_then_permanent():
    first = await _raised(ocr_times_out, attempt=1)
    assert (first.type, first.non_retryable) == ("ocr_timeout", False)
    last = await _raised(ocr_times_out, attempt=3)
    assert (last.type, last.non_retryable) == ("unreadable_document", True)


async def test_corrupt_document_is_permanent_at_once():
    err = await _raised(corrupt)
    assert (err.type, err.non_retryable) == ("unreadable_document", True)


async def test_rate_limit_is_transient_with_the_servers_delay():
    err = await _raised(rate_limited)
    assert err.non_retryable is False
    assert err.next_retry_delay is not None and err.next_retry_delay.total_seconds() == 7
