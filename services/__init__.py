"""Processes: the HTTP API and the Temporal worker."""
