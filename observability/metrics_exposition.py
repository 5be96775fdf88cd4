"""The ``/metrics`` exposition: the registry as the scraper asks for it, and the worker's endpoint.

:func:`render` encodes the registry (OpenMetrics carries exemplars); the API serves it from
``GET /metrics`` (``observability.http``), the worker from :func:`start_metrics_server`.
:func:`metrics_authorized` is the bearer-token check both endpoints make when
``OVERSEER_METRICS_TOKEN`` is set.
"""

from __future__ import annotations

import hmac
import logging
import threading
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry
from prometheus_client.exposition import choose_encoder

log = logging.getLogger("overseer.metrics")


# --- exposition --------------------------------------------------------------------------------


def render(accept_header: str | None, registry: CollectorRegistry = REGISTRY) -> tuple[bytes, str]:
    """The registry in the format the scraper asked for (OpenMetrics carries exemplars).

    Returns:
        ``(body, content_type)``.
    """
    encoder, content_type = choose_encoder(accept_header or "")
    return encoder(registry), content_type or CONTENT_TYPE_LATEST


def start_metrics_server(host: str, port: int, registry: CollectorRegistry = REGISTRY, *,
                         token: str | None = None) -> int | None:
    """Serve ``/metrics`` on ``host:port`` from a daemon thread (the worker's scrape target).

    Args:
        host: bind address (``OVERSEER_METRICS_HOST_WORKER``; ``127.0.0.1`` by default).
        port: port; 0 picks a free one.
        registry: what to expose.
        token: when set (``OVERSEER_METRICS_TOKEN``), every request must carry
            ``Authorization: Bearer <token>``; others get 401 and no metrics.

    Returns:
        The bound port, or None when the port was taken (logged; the process keeps running,
        e.g. a second worker started on the same machine).
    """
    from wsgiref.simple_server import make_server

    from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler, make_wsgi_app

    class _Server(ThreadingWSGIServer):
        address_family = _address_family(host)

    app = _bearer_protected(make_wsgi_app(registry), token)
    try:
        server = make_server(host, port, app, _Server, handler_class=_SilentHandler)
    except OSError as err:
        log.warning("metrics endpoint not started", extra={"host": host, "port": port,
                                                            "error": str(err)})
        return None
    threading.Thread(target=server.serve_forever, name="overseer-metrics", daemon=True).start()
    return int(server.server_port)


def metrics_authorized(authorization: str | None, token: str | None) -> bool:
    """Whether a scrape may read ``/metrics``.

    Args:
        authorization: the request's ``Authorization`` header value (None when absent).
        token: the configured ``OVERSEER_METRICS_TOKEN``; None or empty = no authentication
            (the default: the endpoint is then protected only by where it listens).

    Returns:
        True when no token is configured, or the header is ``Bearer <token>`` (scheme
        case-insensitive, compared in constant time); False otherwise.
    """
    if not token:
        return True
    if not authorization:
        return False
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credentials.strip().encode(), token.encode())


def _bearer_protected(app: Any, token: str | None) -> Any:
    """Wrap the WSGI ``app`` so that only requests passing :func:`metrics_authorized` reach it."""
    if not token:
        return app

    def protected(environ: dict[str, Any], start_response: Any) -> Any:
        if metrics_authorized(environ.get("HTTP_AUTHORIZATION"), token):
            return app(environ, start_response)
        start_response("401 Unauthorized", [("Content-Type", "text/plain; charset=utf-8"),
                                            ("WWW-Authenticate", 'Bearer realm="metrics"')])
        return [b"metrics need Authorization: Bearer <OVERSEER_METRICS_TOKEN>\n"]

    return protected


def _address_family(host: str) -> int:
    import socket

    return socket.AF_INET6 if ":" in host else socket.AF_INET
