"""``groundproxy serve``: uvicorn in front of the app, SIGHUP reloads policies.

Start-up errors found before uvicorn starts (no policies folder, an unknown embedder, a port
already taken) raise :class:`BadRequestError`: the CLI prints them as one line, exit 2.
"""

from __future__ import annotations

import socket

from groundproxy.errors import BadRequestError
from groundproxy.proxy.logs import configure_logging, log_level
from groundproxy.proxy.settings import Settings
from groundproxy.retrieval.embedder import available_embedders


def preflight(settings: Settings) -> None:
    """What would make the server fail to start, checked without loading anything."""
    if not settings.policies.is_dir():
        raise BadRequestError(f"policies folder {settings.policies} does not exist")
    if settings.embedder not in available_embedders():
        valid = ", ".join(available_embedders())
        raise BadRequestError(f"unknown embedder {settings.embedder!r}; valid: {valid}")
    if settings.port == 0:
        return
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds it
        try:
            sock.bind((settings.host, settings.port))
        except OSError as exc:
            where = f"{settings.host}:{settings.port}"
            raise BadRequestError(f"cannot listen on {where}: {exc.strerror or exc}") from exc


def serve(settings: Settings) -> int:
    import uvicorn

    from groundproxy.proxy.app import create_app

    preflight(settings)
    configure_logging(settings.log_level)
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level(settings.log_level),
        log_config=None,  # uvicorn's loggers go through structlog's JSON (proxy.logs)
        access_log=False,  # the access log is groundproxy's own (proxy.metrics)
        lifespan="on",
        timeout_graceful_shutdown=10,
    )
    server = uvicorn.Server(config)
    server.run()
    failed = server.should_exit and not server.started  # the app's lifespan start-up failed
    return 2 if failed else 0
