"""One module per resource: submissions, runs, approvals, pipelines, health."""
