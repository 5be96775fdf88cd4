"""The Postgres side: migrations, the append-only event log and its read-model projections, artifacts."""
