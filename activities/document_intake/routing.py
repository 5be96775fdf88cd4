"""Routing after an extraction step (seed 000 §1.3 ``route_after_pipeline``).

The decision, in the seed's order (first match wins):

1. ``len(tools_used) >= max_steps`` → ``escalate``
2. ``missing_fields == []`` and ``confidence >= 0.9`` → ``complete``
3. ``confidence < 0.5`` and ``tries < 2`` and ``missing_fields`` → ``retry``
4. ``needs_review`` and ``tries < 3`` → ``review``
5. otherwise → ``escalate``

:func:`explain_route` gives the stable reason code for the same decision (for events,
metrics and the run view). Workflow-safe: stdlib only, pure and deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

__all__ = [
    "ROUTE_REASONS",
    "Route",
    "RoutingThresholds",
    "explain_route",
    "route_after_pipeline",
]

Route = Literal["retry", "review", "complete", "escalate"]

ROUTE_REASONS: dict[str, Route] = {
    "max_steps_reached": "escalate",
    "confident_and_complete": "complete",
    "low_confidence_missing_fields": "retry",
    "needs_review": "review",
    "review_exhausted": "escalate",
    "incomplete_without_review": "escalate",
    "low_confidence_without_review": "escalate",
}
"""Every reason code :func:`explain_route` can return → the route it goes with (wire names)."""


@dataclass(frozen=True)
class RoutingThresholds:
    """Thresholds of seed 000 §1.3; the defaults are the seed's.

    Attributes:
        max_steps: escalate once this many tools ran (used when the state has no
            ``max_steps`` of its own, as in the seed's ``state.get("max_steps", 5)``).
        complete_confidence: 0..1; complete at or above it when nothing is missing.
        retry_below_confidence: 0..1; retry strictly below it when fields are missing.
        max_retry_tries: retry only while ``tries`` is below this.
        max_review_tries: review only while ``tries`` is below this.
    """

    max_steps: int = 5
    complete_confidence: float = 0.9
    retry_below_confidence: float = 0.5
    max_retry_tries: int = 2
    max_review_tries: int = 3

    def __post_init__(self) -> None:
        for name in ("max_steps", "max_retry_tries", "max_review_tries"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        for name in ("complete_confidence", "retry_below_confidence"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or math.isnan(value)
                or not 0.0 <= value <= 1.0
            ):
                raise ValueError(f"{name} must be a number within 0..1, got {value!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> RoutingThresholds:
        """Builds thresholds from a run's options; missing keys keep the seed defaults.

        Args:
            data: e.g. ``{"complete_confidence": 0.85}``; None or ``{}`` for the defaults.

        Raises:
            ValueError: an unknown key (named in the message) or a value of the wrong
                type or range.
        """
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown routing threshold(s): {', '.join(unknown)}; known: {sorted(known)}"
            )
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """Returns the thresholds as a plain JSON-serialisable dict."""
        return asdict(self)


def route_after_pipeline(
    state: Mapping[str, Any], thresholds: RoutingThresholds = RoutingThresholds()
) -> Route:
    """Where the graph goes after run_pipeline / retry_extraction (seed 000 §1.3, exactly).

    Args:
        state: graph state; reads ``tools_used`` (list, default []), ``max_steps`` (int,
            default ``thresholds.max_steps``), ``missing_fields`` (list, default []),
            ``confidence`` (0..1, default 0), ``tries`` (int, default 0) and
            ``needs_review`` (bool, default False).
        thresholds: the seed's thresholds unless a run overrides them.

    Returns:
        ``"escalate"``, ``"complete"``, ``"retry"`` or ``"review"``.
    """
    return _decide(state, thresholds)[0]


def explain_route(
    state: Mapping[str, Any], thresholds: RoutingThresholds = RoutingThresholds()
) -> str:
    """The stable reason code for :func:`route_after_pipeline`'s decision on ``state``.

    Args:
        state: as for :func:`route_after_pipeline`.
        thresholds: as for :func:`route_after_pipeline`.

    Returns:
        One of :data:`ROUTE_REASONS`: ``max_steps_reached``, ``confident_and_complete``,
        ``low_confidence_missing_fields``, ``needs_review``, ``review_exhausted`` (review
        wanted but ``tries`` is used up), ``incomplete_without_review`` or
        ``low_confidence_without_review`` (nothing asked for review, yet not complete).
    """
    return _decide(state, thresholds)[1]


def _decide(state: Mapping[str, Any], t: RoutingThresholds) -> tuple[Route, str]:
    # One function for both the route and its reason, so they can never disagree.
    tools_used = state.get("tools_used") or []
    max_steps = state.get("max_steps", t.max_steps)
    missing = state.get("missing_fields", [])
    confidence = state.get("confidence", 0) or 0
    tries = state.get("tries", 0) or 0
    needs_review = bool(state.get("needs_review"))

    if len(tools_used) >= max_steps:
        return "escalate", "max_steps_reached"
    # The seed's ``missing_fields == []``: an explicit None is not "nothing missing".
    nothing_missing = missing is not None and len(missing) == 0
    if nothing_missing and confidence >= t.complete_confidence:
        return "complete", "confident_and_complete"
    if confidence < t.retry_below_confidence and tries < t.max_retry_tries and missing:
        return "retry", "low_confidence_missing_fields"
    if needs_review and tries < t.max_review_tries:
        return "review", "needs_review"
    if needs_review:
        return "escalate", "review_exhausted"
    if missing:
        return "escalate", "incomplete_without_review"
    return "escalate", "low_confidence_without_review"
