"""Tracing, metrics and logging setup; Grafana dashboards and Prometheus configuration live beside it."""
