"""The ``notify_webhook`` activity: tell an outside system that an approval needs attention."""

from __future__ import annotations

from typing import Any

import httpx
from temporalio import activity


@activity.defn(name="notify_webhook")
async def notify_webhook(url: str, payload: dict[str, Any]) -> int:
    """POST ``payload`` as JSON to ``url``; returns the HTTP status.

    Raises:
        httpx.HTTPError: network failure or a 5xx (transient; Temporal retries). A 4xx is
            returned, not raised: the receiver refused and retrying will not help.
    """
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(url, json=payload)
    if response.status_code >= 500:
        response.raise_for_status()
    return response.status_code
