"""Task-queue names and search attributes (wire names: never renamed), from :mod:`overseer.run_types`."""

from overseer.run_types import (
    DEFAULT_TASK_QUEUE,
    PIPELINE_ATTRIBUTE,
    SEARCH_ATTRIBUTES,
    STATUS_ATTRIBUTE,
)

__all__ = ["DEFAULT_TASK_QUEUE", "PIPELINE_ATTRIBUTE", "SEARCH_ATTRIBUTES", "STATUS_ATTRIBUTE"]
