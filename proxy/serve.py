"""``groundproxy serve``: uvicorn in front of the app, SIGHUP reloads policies."""

from __future__ import annotations

from groundproxy.proxy.logs import configure_logging, log_level
from groundproxy.proxy.settings import Settings


def serve(settings: Settings) -> int:
    import uvicorn

    from groundproxy.proxy.app import create_app

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
    uvicorn.Server(config).run()
    return 0
