"""Overseer core: settings, errors, the event store and migrations, the pipeline catalogue, the CLI."""
