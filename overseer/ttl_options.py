"""A thread's ``ttl`` as a request (``threads.create`` / ``threads.update``) or ``langgraph.json`` gives it.

Parsing only; :mod:`overseer.thread_ttl` keeps the timers.
"""

from __future__ import annotations

import math
from typing import Any

from overseer.errors import InvalidRequestError

TTL_STRATEGIES = ("delete", "keep_latest")
"""What happens to a thread when its ttl is up, as on the Agent Server."""
MAX_TTL_MINUTES = 100 * 366 * 24 * 60
"""A century: a longer ttl would overflow a timer's duration (and Postgres' intervals)."""


def parse_ttl(ttl: Any) -> tuple[float, str]:
    """A request's ``ttl``: minutes, or ``{"ttl": minutes, "strategy"?}`` (the SDK sends the latter).

    Returns:
        ``(minutes, strategy)``; the strategy defaults to ``delete``.

    Raises:
        InvalidRequestError: not a positive number of minutes up to :data:`MAX_TTL_MINUTES`,
            or an unknown ``strategy`` (422, ``details.field="ttl"``).
    """
    minutes, strategy = (ttl.get("ttl"), ttl.get("strategy") or "delete") \
        if isinstance(ttl, dict) else (ttl, "delete")
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) \
            or not math.isfinite(minutes) or not 0 < minutes <= MAX_TTL_MINUTES:
        raise InvalidRequestError(f"ttl must be a positive number of minutes (at most "
                                  f"{MAX_TTL_MINUTES}), or "
                                  '{"ttl": minutes, "strategy": "delete" | "keep_latest"}',
                                  details={"field": "ttl"})
    if strategy not in TTL_STRATEGIES:
        raise InvalidRequestError(f"ttl strategy must be one of {TTL_STRATEGIES}",
                                  details={"field": "ttl"})
    return float(minutes), str(strategy)
