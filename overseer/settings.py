"""One ``Settings`` object for API, worker and CLI, read from ``OVERSEER_*`` environment variables.

Defaults are the embedded development stack that ``make run`` starts: a Temporal
dev server on ``localhost:7233`` and an embedded Postgres under ``.overseer/``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

PLACEHOLDER_SECRETS = frozenset({"", "changeme", "change-me", "secret", "token", "dev", "test"})
"""Token values refused outside development (full-stack-fastapi-template style)."""

Role = Literal["submitter", "reviewer", "admin"]


class TokenGrant(dict[str, str]):
    """One API token's grant: ``{"role": Role, "subject": str}``."""


class Settings(BaseSettings):
    """Runtime configuration.

    Every field maps to ``OVERSEER_<FIELD>`` (e.g. ``OVERSEER_TEMPORAL_ADDRESS``).
    Units are in the names: ``*_seconds``, ``*_bytes``.
    """

    model_config = SettingsConfigDict(env_prefix="OVERSEER_", extra="ignore")

    environment: Literal["development", "test", "production"] = "development"
    data_dir: Path = Path(".overseer")

    temporal_address: str | None = None
    """``host:port`` of an external Temporal frontend; None starts the embedded dev server."""
    temporal_namespace: str = "default"
    temporal_port: int = 7233
    temporal_ui_port: int = 8233
    task_queue: str = "overseer"
    search_attributes_enabled: bool = True
    """Upsert ``OverseerPipeline``/``OverseerStatus``; off for servers without them registered."""
    worker_max_cached_workflows: int = Field(100, ge=0)
    """Runs a worker keeps in memory (its sticky cache; Temporal's default is 1000). A cached
    run costs ~0.3 MB; an evicted one is replayed from its history at its next workflow
    task, e.g. when its decision arrives (measured as cheap for a parked run:
    docs/performance-history.md). Size it to the worker's memory, and above the number of runs with
    work in flight at once, or every step of those runs replays. 0 replays every task."""
    worker_activity_slots: Literal["resource", "fixed"] = "resource"
    """How a worker sizes its activity slots (a run segment, a node run as its own activity, an
    event write: each holds one while it runs). ``resource``: Temporal's resource-based slot
    supplier hands out slots while the machine's CPU and memory stay under
    ``worker_target_cpu_usage`` / ``worker_target_memory_usage``, from
    ``worker_max_concurrent_activities`` (given without a check) up to
    ``worker_max_activity_slots``: runs that wait on a model cost almost nothing, so hundreds
    run at once, and CPU-bound nodes stop new slots being handed out before they starve each
    other. ``fixed``: exactly ``worker_max_concurrent_activities`` slots (docs/runbook.md,
    "Sizing a worker")."""
    worker_max_concurrent_activities: int = Field(8, ge=1)
    """``fixed``: the worker's activity slots. ``resource``: the slots handed out without a
    resource check (the floor)."""
    worker_max_activity_slots: int = Field(1000, ge=1)
    """``resource``: the most activity slots the worker ever holds at once."""
    worker_target_cpu_usage: float = Field(0.9, gt=0, le=1)
    """``resource``: system CPU use (0-1) above which no new activity slot is handed out."""
    worker_target_memory_usage: float = Field(0.8, gt=0, le=1)
    """``resource``: system memory use (0-1) above which no new activity slot is handed out."""
    worker_activity_slot_ramp_ms: int = Field(10, ge=0)
    """``resource``: past the floor, at least this long between two new slots, so the worker
    sees what the last ones use before it hands out more (Temporal's default is 50 ms: 50 chats
    arriving at once would wait up to 2 s for their slots)."""
    worker_nice: int = Field(5, ge=0, le=19)
    """Added to the worker process's nice value at start, so an API on the same cores keeps
    answering while the worker is saturated (docs/performance-history.md); 0 leaves it alone."""

    database_url: str | None = None
    """``postgresql://…`` of an external Postgres 15+; None starts the embedded server."""
    database_pool_max_size: int = 10

    api_host: str = "127.0.0.1"
    api_port: int = 8000
    api_tokens: dict[str, dict[str, str]] = Field(default_factory=dict)
    """``{token: {"role": "submitter"|"reviewer"|"admin", "subject": name, "expires_at"?: ISO-8601}}``."""
    tokens_file: Path | None = None
    """JSON file in the same shape as ``api_tokens`` (or the dev ``{role: token}`` shape)."""
    max_upload_bytes: int = 20 * 1024 * 1024
    metrics_port_worker: int = 9464
    """Port of the worker's ``/metrics`` (Overseer and Temporal SDK metrics); 0 turns it off."""
    metrics_host_worker: str = "127.0.0.1"
    """Address the worker's ``/metrics`` binds to (``0.0.0.0`` in containers)."""

    console_session_secret: str | None = None
    """Key signing review-console session cookies (>= 32 chars in production); None in
    development generates one under ``data_dir``; None in production disables the console login."""
    console_session_seconds: float = 8 * 3600
    """Lifetime of a review-console session cookie."""
    console_page_max_px: int = 1600
    """Longest side, in pixels, of a document page image the console renders."""
    temporal_web_url: str | None = None
    """Base URL of the Temporal Web UI for console links; None = ``http://127.0.0.1:<temporal_ui_port>``."""

    approval_sla_seconds: float = 72 * 3600
    approval_remind_after_seconds: float | None = 24 * 3600
    approval_reassign_after_seconds: float | None = 48 * 3600
    approval_final_after_seconds: float | None = 7 * 24 * 3600
    approval_final_action: Literal["keep_waiting", "auto_reject", "auto_approve"] = "keep_waiting"
    approval_escalation_group: str = "escalations"
    approval_webhook_url: str | None = None
    webhook_secret: str | None = None
    """``OVERSEER_WEBHOOK_SECRET``: when set, every webhook Overseer POSTs (a run's ``webhook``,
    the approval ladder's) carries ``X-Overseer-Signature: sha256=<HMAC-SHA256 of the body>``."""
    durability: Literal["sync", "async", "exit"] | None = None
    """``OVERSEER_DURABILITY``: LangGraph's checkpoint durability for runs as segments, unless a
    run's ``metadata.durability`` says otherwise (``sync``: before the next step; ``async``:
    while it runs, LangGraph's default; ``exit``: only when the segment ends). Unset: ``async``,
    and ``exit`` for the local segments of an input its pipeline calls short
    (``Pipeline.run.local_segments``: a crash reruns such a segment, under 5 s, from its start)."""
    segment_local_seconds: float = 0.0
    """``OVERSEER_SEGMENT_LOCAL_SECONDS``: a run segment is first tried as a local activity
    with this time-out (no activity task on the server); it goes on as a heartbeating
    activity from its last checkpoint at the first superstep boundary after 2 s, or when one
    superstep outlasts the time-out (that superstep runs again). 0 turns the local try off."""
    stateless_segment_local_seconds: float = Field(default=300.0, ge=0)
    """``OVERSEER_STATELESS_SEGMENT_LOCAL_SECONDS``: the local try of a stateless Agent Server
    run's segments (``POST /runs``, ``/runs/wait``, ``/runs/stream``: a thread made for the
    run alone), as ``segment_local_seconds`` is for every run. The server then has no
    activity task and one workflow task fewer per run (docs/performance-history.md). At
    the first superstep boundary after 2 s the segment goes on as the heartbeating activity
    (``workflows.segment_calls.LOCAL_YIELD_SECONDS``; nothing runs twice). The price, for the
    try's time: a cancel (and any update or query of the run's workflow) waits for the try's
    end or the workflow task's heartbeat (about 8 s) and the Temporal Web UI names the try's
    nodes only once it ends; a killed worker's try goes on after the workflow task's 10 s
    time-out, from its checkpoints. A superstep longer than this goes on as the
    heartbeating activity and runs again there. 0 turns it off."""
    segment_heartbeat_seconds: float = Field(default=6.0, gt=0)
    """``OVERSEER_SEGMENT_HEARTBEAT_SECONDS``: heartbeat time-out of a run segment's activity
    (it heartbeats three times per time-out while its nodes run): a killed worker's segment
    goes on on another worker after about this long."""
    store_embeddings: Literal["wordllama", "off"] = "wordllama"
    """``OVERSEER_STORE_EMBEDDINGS``: how the store indexes items for semantic search
    (``store.search_items(query=...)``, a graph's ``store.asearch(query=...)``):
    ``wordllama`` (offline 256-d embeddings shipped in a pip package) when the Postgres has
    the ``pgvector`` extension; ``off`` (or no pgvector): ``query`` is refused with 422."""
    store_ttl_sweep_minutes: float = Field(default=60.0, gt=0)
    """``OVERSEER_STORE_TTL_SWEEP_MINUTES``: how often the API deletes store items whose
    ``ttl`` (minutes, per item) has passed."""
    queue_recovery_seconds: float = Field(default=30.0, gt=0)
    """``OVERSEER_QUEUE_RECOVERY_SECONDS``: how often each API process looks for queued Agent
    Server runs that nobody started (accepted by an API process that died before starting
    them, or left when Temporal did not answer); it also looks once at start-up. A queued
    run normally starts when the run before it ends, handed on by that run's workflow."""
    approval_final_resume: Any = None
    """``OVERSEER_APPROVAL_FINAL_RESUME`` (JSON): the value ``interrupt()`` returns when the
    ladder's final rung auto-approves or auto-rejects a graph's interrupt; None for the
    ``{"decision", …}`` wrapper."""
    max_document_pages: int = 200
    max_pixels_per_page: int = 50_000_000
    ocr_timeout_seconds: float = 120.0
    ocr_dpi: int = 300
    retry_ocr_dpi: int = 400
    retry_ocr_region: bool = True
    """``OVERSEER_RETRY_OCR_REGION``: the offline retry re-reads at ``retry_ocr_dpi`` only the
    lines around the doubtful fields (whole pages when a field cannot be placed); ``false``
    re-reads whole pages (the speed-up is in docs/performance-history.md)."""
    exact_text_ocr_score: float = 1.0
    review_min_evidence_score: float = 0.85

    llm_base_url: str | None = None
    """Any OpenAI-compatible endpoint (OpenAI, Groq, vLLM, Ollama, llama.cpp); None = offline rules."""
    llm_api_key: str | None = None
    llm_model: str = "gpt-4o-mini"
    """Global default model."""
    llm_task_models: dict[str, str] = Field(default_factory=dict)
    """Per-task defaults: ``{"extraction"|"routing"|"drafting"|"reporting": model}``."""
    llm_allowed_models: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Models a per-request hint may pick; empty = the global and task defaults only."""
    llm_admin_override: str | None = None
    """Forces one model for every call (beats hints and defaults)."""
    llm_timeout_seconds: float = 60.0
    llm_max_output_tokens: int = 512
    llm_price_table: dict[str, dict[str, float]] = Field(default_factory=dict)
    """``{model: {"input_per_1m_usd": x, "output_per_1m_usd": y}}``, merged over built-in prices."""
    llm_run_budget_usd: float | None = None
    """Per-run LLM spend limit; a call that would pass it pauses the run for a reviewer."""
    llm_run_budget_tokens: int | None = None
    dry_run: bool = Field(default=False, validation_alias=AliasChoices("OVERSEER_DRY_RUN",
                                                                        "DRY_RUN"))
    """``DRY_RUN=1``: a fake model end to end, recorded as ``llm:dry-run``."""

    cors_allow_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Browser origins that may call the API from their own pages (a LangGraph UI such as
    agent-chat-ui served elsewhere): comma-separated or a JSON list, ``*`` for any. Empty
    (the default) = no CORS headers, except outside production, where pages on
    ``localhost`` / ``127.0.0.1`` (any port) may (:func:`cors_policy`)."""
    cors_allow_origin_regex: str | None = None
    """An origin pattern allowed as well (Starlette's ``allow_origin_regex``)."""

    metrics_token: str | None = None
    """Bearer token both ``/metrics`` endpoints (API and worker) require; None = no auth
    (then only the bind address protects them). Prometheus: ``authorization: {credentials: …}``."""

    @field_validator("api_tokens", "llm_task_models", "llm_price_table", mode="before")
    @classmethod
    def _parse_tokens(cls, value: Any) -> Any:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else {}
        return value

    @field_validator("approval_final_resume", mode="before")
    @classmethod
    def _parse_resume(cls, value: Any) -> Any:
        """The environment gives JSON text; a string that is not JSON stays a string."""
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value

    @field_validator("llm_allowed_models", "cors_allow_origins", mode="before")
    @classmethod
    def _parse_models(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            return json.loads(text) if text.startswith("[") else [m for m in text.split(",") if m]
        return value

    @model_validator(mode="after")
    def _refuse_placeholders(self) -> Settings:
        if self.environment == "production":
            for token in self.api_tokens:
                if token.lower() in PLACEHOLDER_SECRETS or len(token) < 24:
                    raise ValueError(
                        "OVERSEER_API_TOKENS holds a placeholder or short token (< 24 chars); "
                        "refusing to start in production"
                    )
            secret = self.console_session_secret
            if secret is not None and (secret.lower() in PLACEHOLDER_SECRETS or len(secret) < 32):
                raise ValueError(
                    "OVERSEER_CONSOLE_SESSION_SECRET is a placeholder or short (< 32 chars); "
                    "refusing to start in production"
                )
        return self

    @property
    def dev_tokens_path(self) -> Path:
        """Where ``make run`` writes ``{"submitter": …, "reviewer": …, "admin": …}``."""
        return self.data_dir / "dev-tokens.json"

    def console_secret(self) -> bytes | None:
        """The key that signs review-console sessions.

        ``console_session_secret`` when set; otherwise, outside production, a random key
        generated once per install in ``data_dir/console-secret`` (like the dev tokens), so
        API processes sharing the data dir accept each other's sessions.

        Returns:
            The key, or None in production without a configured secret (console login off).
        """
        if self.console_session_secret:
            return self.console_session_secret.encode()
        if self.environment == "production":
            return None
        path = self.data_dir / "console-secret"
        if not path.exists():
            import os
            import secrets

            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".console-secret.{os.getpid()}")
            tmp.write_text(secrets.token_urlsafe(48))
            tmp.chmod(0o600)
            try:
                os.link(tmp, path)  # atomic: never a half-written key for a concurrent reader
            except FileExistsError:
                pass  # another process made it first: use theirs
            finally:
                tmp.unlink()
        return path.read_text().strip().encode()

    def temporal_web_base_url(self) -> str:
        """Base URL of the Temporal Web UI (no trailing slash)."""
        return (self.temporal_web_url or f"http://127.0.0.1:{self.temporal_ui_port}").rstrip("/")

    def load_token_grants(self) -> dict[str, dict[str, str]]:
        """All accepted tokens: ``api_tokens`` plus ``tokens_file``, and the dev file in development.

        Returns:
            ``{token: {"role": role, "subject": subject}}``.

        Raises:
            ValueError: a tokens file that is not valid JSON of either accepted shape.
        """
        grants = dict(self.api_tokens)
        files = [self.tokens_file] if self.tokens_file else []
        if self.environment != "production":
            files.append(self.dev_tokens_path)
        for path in files:
            if path is not None and path.exists():
                grants.update(_grants_from_file(path))
        return grants


def _grants_from_file(path: Path) -> dict[str, dict[str, str]]:
    raw = json.loads(path.read_text())
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a JSON object")
    grants: dict[str, dict[str, str]] = {}
    for key, value in raw.items():
        if isinstance(value, str):  # dev shape {role: token}
            grants[value] = {"role": key, "subject": f"dev-{key}"}
        elif isinstance(value, dict) and "role" in value:
            grants[key] = {"role": value["role"], "subject": value.get("subject", key[:8]),
                           **({"expires_at": value["expires_at"]} if value.get("expires_at") else {})}
        else:
            raise ValueError(f"{path}: entry {key!r} is neither a token nor a grant")
    return grants


LOCAL_ORIGINS = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?"
"""Pages on this machine: allowed by default outside production (``make run``, tests)."""


def cors_policy(settings: Settings) -> tuple[list[str], str | None]:
    """``(allowed origins, allowed origin pattern)`` for the API's CORS middleware.

    What the settings name; with neither set, outside production, pages on this machine
    (:data:`LOCAL_ORIGINS`) so a UI run beside ``make run`` works unchanged. Both empty
    means no CORS headers at all (a browser page on another origin cannot call the API).
    """
    origins = list(settings.cors_allow_origins)
    regex = settings.cors_allow_origin_regex
    if not origins and regex is None and settings.environment != "production":
        regex = LOCAL_ORIGINS
    return origins, regex


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
