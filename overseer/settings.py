"""One ``Settings`` object for API, worker and CLI, read from ``OVERSEER_*`` environment variables.

Defaults are the embedded development stack that ``make run`` starts: a Temporal
dev server on ``localhost:7233`` and an embedded Postgres under ``.overseer/``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

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

    database_url: str | None = None
    """``postgresql://…`` of an external Postgres 15+; None starts the embedded server."""
    database_pool_max_size: int = 10

    api_host: str = "127.0.0.1"
    api_port: int = 8000
    api_tokens: dict[str, dict[str, str]] = Field(default_factory=dict)
    """``{token: {"role": "submitter"|"reviewer"|"admin", "subject": name}}``."""
    tokens_file: Path | None = None
    """JSON file in the same shape as ``api_tokens`` (or the dev ``{role: token}`` shape)."""
    max_upload_bytes: int = 20 * 1024 * 1024
    metrics_port_worker: int = 9464

    approval_sla_seconds: float = 72 * 3600
    max_document_pages: int = 200
    max_pixels_per_page: int = 50_000_000
    ocr_timeout_seconds: float = 120.0
    ocr_dpi: int = 300
    retry_ocr_dpi: int = 400
    exact_text_ocr_score: float = 1.0
    review_min_evidence_score: float = 0.85

    llm_base_url: str | None = None
    llm_api_key: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_timeout_seconds: float = 60.0

    @field_validator("api_tokens", mode="before")
    @classmethod
    def _parse_tokens(cls, value: Any) -> Any:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else {}
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
        return self

    @property
    def dev_tokens_path(self) -> Path:
        """Where ``make run`` writes ``{"submitter": …, "reviewer": …, "admin": …}``."""
        return self.data_dir / "dev-tokens.json"

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
            grants[key] = {"role": value["role"], "subject": value.get("subject", key[:8])}
        else:
            raise ValueError(f"{path}: entry {key!r} is neither a token nor a grant")
    return grants


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
