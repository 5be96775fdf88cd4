"""Temporal workflows: deterministic, no I/O. One module per pipeline plus the shared approval gate."""
