"""``groundproxy serve``: uvicorn in front of the app, SIGHUP reloads policies.

Start-up errors found before uvicorn starts (no policies folder, a policy folder where no
policy loads — each bad file named with its line —, an unknown embedder, a port already
taken, a data folder that does not exist: serve never creates it) raise a
:class:`GroundproxyError`: the CLI prints it as one line, exit 2.
"""

from __future__ import annotations

import os
import socket

from groundproxy.errors import BadRequestError, ModelLoadError
from groundproxy.policies.loader import PolicyStore
from groundproxy.proxy.logs import configure_logging, log_level
from groundproxy.proxy.settings import Settings
from groundproxy.retrieval.embedder import embedder_factory


def existing_data(settings: Settings, then: str) -> None:
    """``serve`` and ``delete`` never create the data folder (a mistyped ``--data`` would
    serve, or delete from, empty indexes): it must exist unless documents live in
    PostgreSQL (``GROUNDPROXY_DATABASE_URL``). ``ingest`` creates it."""
    if settings.database_url is None and not settings.data.is_dir():
        raise BadRequestError(
            f"the data folder {settings.data} does not exist (--data, $GROUNDPROXY_DATA): {then}"
        )


def preflight(settings: Settings) -> None:
    """What would make the server fail to start, checked without loading anything."""
    if not settings.policies.is_dir():
        raise BadRequestError(f"policies folder {settings.policies} does not exist")
    PolicyStore(settings.policies).check()  # PolicyError when no policy would load
    try:
        embedder_factory(settings.embedder)  # a name, or an import path (imported, not built)
    except ModelLoadError as exc:
        raise BadRequestError(exc.message) from exc
    if settings.port != 0:
        _can_listen(settings)
    existing_data(settings, "`groundproxy ingest` creates it (or mkdir it to serve no documents)")


def _can_listen(settings: Settings) -> None:
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds it
        try:
            sock.bind((settings.host, settings.port))
        except OSError as exc:
            where = f"{settings.host}:{settings.port}"
            raise BadRequestError(f"cannot listen on {where}: {exc.strerror or exc}") from exc


def _settings_to_env(settings: Settings) -> None:
    """Hand the settings (command-line flags included) to worker processes, which read
    ``GROUNDPROXY_*`` (:func:`proxy.app.create_app_from_env`)."""
    for name, value in settings.model_dump().items():
        if value is None:
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        os.environ[f"GROUNDPROXY_{name.upper()}"] = text


def serve_workers(settings: Settings) -> int:
    """``--workers N``: uvicorn's supervisor forks N processes sharing the listening socket;
    each builds the app (its lifespan loads the models and opens the indexes read-only,
    following CURRENT on disk) and is restarted if it dies."""
    import uvicorn

    _settings_to_env(settings)
    uvicorn.run(
        "groundproxy.proxy.app:create_app_from_env",
        factory=True,
        workers=settings.workers,
        host=settings.host,
        port=settings.port,
        log_level=log_level(settings.log_level),
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=10,
        # the supervisor kills a worker that misses a ping for this long: loading the ONNX
        # models on a busy machine kept workers from answering uvicorn's default 5 s
        timeout_worker_healthcheck=120,
    )
    return 0


def serve(settings: Settings) -> int:
    import uvicorn

    from groundproxy.proxy.app import build_app

    preflight(settings)
    configure_logging(settings.log_level)
    if settings.workers > 1:
        return serve_workers(settings)
    app = build_app(settings)
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
