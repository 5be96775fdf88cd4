"""The HTTP API: routes, auth, request/response schemas. Talks to Temporal and reads Postgres read models."""
