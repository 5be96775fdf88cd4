"""Overseer core: settings, errors, the event store, the pipeline contract and registry, the CLI."""
