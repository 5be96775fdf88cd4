"""One small error tree: every domain error carries a stable ``code`` and an ``http_status``.

The API renders any :class:`OverseerError` as ``{"code", "message", "details"}``;
activities turn permanent ones into non-retryable ``ApplicationError`` with
``type=code`` so Temporal never retries a poison document.
"""

from __future__ import annotations

from typing import Any, ClassVar


class OverseerError(Exception):
    """Base of every error Overseer raises on purpose.

    Attributes:
        code: stable machine-readable code (wire name: never renamed).
        http_status: status the API answers with.
        retryable: whether a Temporal retry could help (transient) or not (permanent).
        details: JSON-serialisable context for the caller; never document text.
    """

    code: ClassVar[str] = "internal_error"
    http_status: ClassVar[int] = 500
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class AuthenticationError(OverseerError):
    """Missing, malformed or unknown bearer token (401)."""

    code = "unauthenticated"
    http_status = 401


class TokenExpiredError(AuthenticationError):
    """A granted token past its ``expires_at`` (401)."""

    code = "token_expired"


class PermissionDeniedError(OverseerError):
    """The caller's role may not do this (403)."""

    code = "forbidden"
    http_status = 403


class NotFoundError(OverseerError):
    """Unknown run, approval or pipeline (404)."""

    code = "not_found"
    http_status = 404


class ConflictError(OverseerError):
    """The resource is not in a state that allows this (409), e.g. a decision on a finished run."""

    code = "conflict"
    http_status = 409


class NotAwaitingApprovalError(ConflictError):
    """A decision arrived for a run that has no open approval.

    Already decided, finished, or not yet asked.
    """

    code = "not_awaiting_approval"


class PayloadTooLargeError(OverseerError):
    """Upload larger than ``max_upload_bytes`` (413)."""

    code = "payload_too_large"
    http_status = 413


class UnsupportedDocumentError(OverseerError):
    """The upload is not a PDF, PNG/JPEG/TIFF image or UTF-8/Latin-1 text (415)."""

    code = "unsupported_media_type"
    http_status = 415


class UnreadableDocumentError(OverseerError):
    """The document is empty, truncated, corrupt, encrypted or over a resource limit (422).

    Permanent: retrying the same bytes cannot help.
    """

    code = "unreadable_document"
    http_status = 422


class InvalidFieldEditsError(OverseerError):
    """Field edits sent with an approval fail the pipeline's validators (422)."""

    code = "invalid_field_edits"
    http_status = 422


class InvalidRequestError(OverseerError):
    """A request that is well-formed HTTP but not a valid Overseer request (422)."""

    code = "invalid_request"
    http_status = 422


class DependencyUnavailableError(OverseerError):
    """Temporal or Postgres cannot be reached (503). Transient."""

    code = "dependency_unavailable"
    http_status = 503
    retryable = True




class LLMCallError(OverseerError):
    """A model call failed. Subclasses say whether another attempt could help."""

    code = "llm_error"
    http_status = 502


class LLMRateLimitedError(LLMCallError):
    """429 from the endpoint; ``details["retry_after_seconds"]`` when it said. Transient."""

    code = "llm_rate_limited"
    retryable = True


class LLMUnavailableError(LLMCallError):
    """5xx, time-out or connection failure. Transient."""

    code = "llm_unavailable"
    retryable = True


class LLMClientError(LLMCallError):
    """Any other 4xx (bad request, auth, unknown model). Permanent."""

    code = "llm_client_error"


class LLMRefusedError(LLMCallError):
    """The model refused (content policy). Permanent."""

    code = "llm_refused"


class BudgetExceededError(OverseerError):
    """A call would take the run past its LLM budget; the run pauses for a reviewer."""

    code = "llm_budget_exceeded"
    http_status = 409


class LLMResponseError(LLMCallError):
    """A model answered with something that is not the JSON asked for. Permanent for that step."""

    code = "llm_malformed_response"
