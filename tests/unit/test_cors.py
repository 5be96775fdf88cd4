"""CORS: a LangGraph UI served from another origin can call the API (and only an allowed one)."""

from __future__ import annotations

import httpx
import pytest

from overseer.settings import LOCAL_ORIGINS, Settings, cors_policy
from services.api.main import create_app

PREFLIGHT = {"access-control-request-method": "POST",
             "access-control-request-headers": "content-type,x-api-key"}


async def preflight(settings: Settings, origin: str, path: str = "/threads") -> httpx.Response:
    transport = httpx.ASGITransport(app=create_app(settings))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        return await client.options(path, headers={"origin": origin, **PREFLIGHT})


def test_policy_defaults_to_this_machine_outside_production_and_to_nothing_in_it() -> None:
    assert cors_policy(Settings(environment="development")) == ([], LOCAL_ORIGINS)
    assert cors_policy(Settings(environment="production", api_tokens={})) == ([], None)
    named = Settings(environment="production", cors_allow_origins="https://ui.example.com,"
                     "https://admin.example.com", api_tokens={})
    assert cors_policy(named) == (["https://ui.example.com", "https://admin.example.com"], None)


async def test_a_page_on_this_machine_may_call_the_agent_server_api_in_development() -> None:
    answer = await preflight(Settings(environment="development"), "http://localhost:3000")
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == "http://localhost:3000"
    allowed = answer.headers["access-control-allow-headers"].lower()
    assert "x-api-key" in allowed and "content-type" in allowed
    assert "access-control-allow-credentials" not in answer.headers  # no console cookie use


@pytest.mark.parametrize("origin", ["https://evil.example.com", "http://localhost.evil.com"])
async def test_another_origin_gets_no_cors_headers(origin: str) -> None:
    answer = await preflight(Settings(environment="development"), origin)
    assert "access-control-allow-origin" not in answer.headers


async def test_a_named_origin_may_read_the_run_id_header_and_errors() -> None:
    settings = Settings(environment="test", cors_allow_origins=["https://ui.example.com"])
    answer = await preflight(settings, "https://ui.example.com", "/threads/abc/runs/stream")
    assert answer.headers["access-control-allow-origin"] == "https://ui.example.com"
    assert (await preflight(settings, "http://localhost:3000")).headers.get(
        "access-control-allow-origin") is None  # naming origins replaces the local default
    transport = httpx.ASGITransport(app=create_app(settings))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        missing = await client.get("/no/such/path", headers={"origin": "https://ui.example.com"})
    assert missing.status_code == 404 and missing.json()["code"]
    assert missing.headers["access-control-allow-origin"] == "https://ui.example.com"
    assert "content-location" in missing.headers["access-control-expose-headers"].lower()
