"""The ``notify_webhook`` activity: tell an outside system that an approval needs attention or a run ended."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import httpx
from temporalio import activity

SIGNATURE_HEADER = "X-Overseer-Signature"
"""``sha256=<hex HMAC-SHA256 of the body with OVERSEER_WEBHOOK_SECRET>`` when a secret is set."""
DELIVERY_HEADER = "X-Overseer-Delivery"
"""The same id on every attempt of one delivery, so a receiver can drop a retried duplicate."""


def signature(secret: str, body: bytes) -> str:
    """The :data:`SIGNATURE_HEADER` value of ``body`` (``sha256=`` and 64 hex digits)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@activity.defn(name="notify_webhook")
async def notify_webhook(url: str, payload: dict[str, Any], delivery: str | None = None) -> int:
    """POST ``payload`` as JSON to ``url``; returns the HTTP status.

    The body is signed (:data:`SIGNATURE_HEADER`) when ``OVERSEER_WEBHOOK_SECRET`` is set, and
    ``delivery`` (stable across Temporal's retries) goes in :data:`DELIVERY_HEADER`.

    Raises:
        httpx.HTTPError: network failure or a 5xx (transient; Temporal retries). A 4xx is
            returned, not raised: the receiver refused and retrying will not help.
    """
    from overseer.resources import current

    body = json.dumps(payload, separators=(",", ":"), default=str).encode()
    headers = {"Content-Type": "application/json"}
    runtime = current()
    secret = runtime.settings.webhook_secret if runtime is not None else None
    if secret:
        headers[SIGNATURE_HEADER] = signature(secret, body)
    if delivery:
        headers[DELIVERY_HEADER] = delivery
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(url, content=body, headers=headers)
    if response.status_code >= 500:
        response.raise_for_status()
    return response.status_code
