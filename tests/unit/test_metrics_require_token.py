"""``/metrics`` (API and worker) require a bearer token when OVERSEER_METRICS_TOKEN is set."""

from __future__ import annotations

import urllib.error
import urllib.request

import httpx
from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter

from observability import metrics_exposition
from observability.http import install_api_observability
from overseer.settings import Settings

TOKEN = "k9Jx2mQ7vT4sW8zL1pR6nB3c"


def _get(url: str, authorization: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if authorization:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 (localhost)
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_metrics_authorized_accepts_only_the_configured_bearer_token():
    assert metrics_exposition.metrics_authorized(None, None)
    assert metrics_exposition.metrics_authorized("anything", "")
    assert metrics_exposition.metrics_authorized(f"Bearer {TOKEN}", TOKEN)
    assert metrics_exposition.metrics_authorized(f"bearer  {TOKEN} ", TOKEN)
    assert not metrics_exposition.metrics_authorized(None, TOKEN)
    assert not metrics_exposition.metrics_authorized("", TOKEN)
    assert not metrics_exposition.metrics_authorized(f"Basic {TOKEN}", TOKEN)
    assert not metrics_exposition.metrics_authorized(f"Bearer {TOKEN}x", TOKEN)
    assert not metrics_exposition.metrics_authorized("Bearer", TOKEN)


def test_settings_read_the_metrics_token_and_default_to_none(monkeypatch):
    monkeypatch.delenv("OVERSEER_METRICS_TOKEN", raising=False)
    assert Settings().metrics_token is None
    monkeypatch.setenv("OVERSEER_METRICS_TOKEN", TOKEN)
    assert Settings().metrics_token == TOKEN


def test_worker_metrics_server_refuses_a_scrape_without_the_token():
    registry = CollectorRegistry()
    Counter("overseer_unit_auth_total", "unit", registry=registry).inc()
    port = metrics_exposition.start_metrics_server("127.0.0.1", 0, registry, token=TOKEN)
    assert port
    url = f"http://127.0.0.1:{port}/metrics"
    status, body = _get(url)
    assert status == 401 and b"overseer_unit_auth_total" not in body
    assert _get(url, "Bearer wrong")[0] == 401
    status, body = _get(url, f"Bearer {TOKEN}")
    assert status == 200 and b"overseer_unit_auth_total" in body


def test_worker_metrics_server_without_a_token_stays_open():
    registry = CollectorRegistry()
    Counter("overseer_unit_open_total", "unit", registry=registry).inc()
    port = metrics_exposition.start_metrics_server("127.0.0.1", 0, registry)
    status, body = _get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200 and b"overseer_unit_open_total" in body


async def test_api_metrics_route_requires_the_token():
    app = FastAPI()
    install_api_observability(app, metrics_token=TOKEN)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://t") as client:
        refused = await client.get("/metrics")
        assert refused.status_code == 401 and "overseer_" not in refused.text
        assert (await client.get("/metrics", headers={"Authorization": "Bearer no"})).status_code == 401
        ok = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200 and "overseer_build_info" in ok.text
