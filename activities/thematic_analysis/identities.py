"""Coder identities (seed 002 R1.2, R1.3, R6): ``identities.yaml``, validated, loaded once per process.

Each identity runs one coder and one theme coder. A bad file (missing, not YAML, a missing
required field, no identities, a duplicate id) raises :class:`IdentitiesConfigError` with the
path and every problem in one message, so a worker fails fast at start-up rather than per job.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from overseer.plugin import OverseerError

DEFAULT_IDENTITIES_PATH = Path(__file__).with_name("identities.yaml")
IDENTITIES_PATH_ENV = "OVERSEER_THEMATIC_IDENTITIES_PATH"
"""Environment variable naming another identities file (default: the packaged one)."""


class IdentitiesConfigError(OverseerError):
    """identities.yaml is missing or invalid (permanent: a configuration error)."""

    code = "invalid_identities"
    http_status = 500


class Identity(BaseModel):
    """One coder identity (seed 002 R6.1).

    Attributes:
        id: stable identifier (``[a-z0-9_-]``, used in quote provenance and node payloads).
        name: human-readable name.
        prompt_prefix: the system prompt prefix its coders use with a model.
        description: optional; offline, its words (with the prompt prefix's) form the lens.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_-]*$")
    name: str = Field(min_length=1)
    prompt_prefix: str = Field(min_length=1)
    description: str | None = None

    @property
    def lens(self) -> str:
        """The text whose words steer this identity's offline coding."""
        return f"{self.name}. {self.description or ''} {self.prompt_prefix}".strip()


class IdentitiesFile(BaseModel):
    """The file's shape: ``{"identities": [Identity, ...]}``, at least one, unique ids."""

    model_config = ConfigDict(extra="forbid")

    identities: list[Identity] = Field(min_length=1)

    @field_validator("identities")
    @classmethod
    def _unique_ids(cls, value: list[Identity]) -> list[Identity]:
        seen: set[str] = set()
        for identity in value:
            if identity.id in seen:
                raise ValueError(f"duplicate identity id {identity.id!r}")
            seen.add(identity.id)
        return value


def load_identities(path: str | Path | None = None) -> tuple[Identity, ...]:
    """The identities of ``path`` (default: ``$OVERSEER_THEMATIC_IDENTITIES_PATH`` or the packaged file).

    Cached per resolved path, so a process reads and validates each file once (R6.5).

    Raises:
        IdentitiesConfigError: missing file, invalid YAML, missing required fields, unknown
            fields, no identities, duplicate ids (permanent).
    """
    chosen = Path(path or os.environ.get(IDENTITIES_PATH_ENV) or DEFAULT_IDENTITIES_PATH)
    return _load_cached(str(chosen.resolve()))


def identities_from_dict(data: Any, *, source: str = "<dict>") -> tuple[Identity, ...]:
    """Validate already-parsed identities (e.g. a snapshot carried in state).

    Raises:
        IdentitiesConfigError: the data does not have the file's shape.
    """
    try:
        return tuple(IdentitiesFile.model_validate(data).identities)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in err.errors()
        )
        raise IdentitiesConfigError(
            f"invalid identities file {source}: {problems}",
            details={"path": source, "problems": [
                {"loc": [str(p) for p in e["loc"]], "msg": e["msg"]} for e in err.errors()]},
        ) from None


@functools.lru_cache(maxsize=8)
def _load_cached(path: str) -> tuple[Identity, ...]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise IdentitiesConfigError(f"cannot read identities file {path}: {err.strerror}",
                                    details={"path": path}) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise IdentitiesConfigError(f"identities file {path} is not valid YAML: {err}",
                                    details={"path": path}) from None
    if not isinstance(data, dict):
        raise IdentitiesConfigError(
            f"invalid identities file {path}: expected a mapping with an 'identities' list",
            details={"path": path})
    return identities_from_dict(data, source=path)
