"""``groundproxy serve``: uvicorn in front of the app, SIGHUP reloads policies."""

from __future__ import annotations

from pathlib import Path

from groundproxy.proxy.logs import configure_logging
from groundproxy.proxy.settings import Settings


def serve(host: str, port: int, policies: Path, data: Path, log_level: str = "info") -> int:
    import uvicorn

    from groundproxy.proxy.app import create_app

    configure_logging(log_level)
    settings = Settings(host=host, port=port, policies=policies, data=data, log_level=log_level)
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=10,
    )
    uvicorn.Server(config).run()
    return 0
