"""The pricing chat's runs as stored: the pipeline's name, their JSON columns, which are orchestrated."""

from __future__ import annotations

import json
from typing import Any

PIPELINE = "pricing"
"""The pipeline's name in the ``runs`` table."""


def is_orchestrated(view: Any) -> bool:
    """A pricing run with a workflow (fast-path answers are runs without one)."""
    return bool(view.pipeline == PIPELINE and view.workflow_id
                and (view.result or {}).get("path") != "single_agent")


def json_column(value: Any) -> Any:
    """A ``runs`` JSON column's value (``input``, ``result``): decoded when it comes as text."""
    return json.loads(value) if isinstance(value, str) else value
