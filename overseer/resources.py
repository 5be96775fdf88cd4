"""Process-wide resources that activities use: the Postgres pool and the settings.

The worker (or a test) calls :func:`configure` once before polling; activities call
:func:`get_runtime`. Node functions wrapped by the LangGraph plugin are module-level
and cannot take constructor arguments, hence this small holder.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from overseer.settings import Settings


@dataclass
class ActivityRuntime:
    """What an activity may touch besides its input."""

    pool: asyncpg.Pool
    settings: Settings


_runtime: ActivityRuntime | None = None


def configure(pool: asyncpg.Pool, settings: Settings) -> ActivityRuntime:
    """Install the runtime for this process (replacing any earlier one)."""
    global _runtime
    _runtime = ActivityRuntime(pool=pool, settings=settings)
    return _runtime


def get_runtime() -> ActivityRuntime:
    """The installed runtime.

    Raises:
        RuntimeError: :func:`configure` was not called in this process.
    """
    if _runtime is None:
        raise RuntimeError("overseer.resources.configure() was not called in this process")
    return _runtime


def current() -> ActivityRuntime | None:
    """The installed runtime, or None (for code that must put back what it replaced)."""
    return _runtime


def install(runtime: ActivityRuntime | None) -> None:
    """Put back a runtime returned by :func:`current` (None uninstalls)."""
    global _runtime
    _runtime = runtime
