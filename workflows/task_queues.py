"""Task-queue names and search attributes (wire names: never renamed)."""

from temporalio.common import SearchAttributeKey

DEFAULT_TASK_QUEUE = "overseer"
"""Workflows and node activities of every pipeline."""

PIPELINE_ATTRIBUTE = SearchAttributeKey.for_keyword("OverseerPipeline")
STATUS_ATTRIBUTE = SearchAttributeKey.for_keyword("OverseerStatus")
SEARCH_ATTRIBUTES = (PIPELINE_ATTRIBUTE, STATUS_ATTRIBUTE)
