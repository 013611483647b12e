"""structlog set-up: request id and tenant ride in contextvars; JSON when not on a TTY.

The commands other than ``serve`` log in words instead (:func:`configure_cli_logging`):
``groundproxy ingest: warning: skipping a.png: unsupported file type`` on stderr.

Every line is one JSON object: structlog's own, and the standard library's (uvicorn's
``uvicorn.error``, litellm, httpx …) through the same renderer
(``structlog.stdlib.ProcessorFormatter``), tracebacks included as a field. The access log
is groundproxy's own (``groundproxy.access``, written by ``proxy.metrics.MetricsMiddleware``);
uvicorn's is off. ``level`` (``GROUNDPROXY_LOG_LEVEL``) applies to both.

Prompt and answer bodies and keys are never logged by default.
"""

from __future__ import annotations

import logging
import sys

import structlog

UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the ``sys.stderr`` of the moment (a test's capture stream is closed later)."""

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _: object) -> None:
        pass


def log_level(level: str) -> int:
    return logging.getLevelNamesMapping().get(level.upper(), logging.INFO)


def configure_logging(level: str = "info", json: bool | None = None) -> None:
    """Configure structlog, and route stdlib logging (uvicorn's too) through its renderer."""
    if json is None:
        json = not sys.stderr.isatty()
    lvl = log_level(level)
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    )
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    handler = _StderrHandler()
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    # replace only a handler of ours (a test runner's own handlers stay)
    ours = (_StderrHandler, _CliHandler)
    root.handlers[:] = [h for h in root.handlers if not isinstance(h, ours)]
    root.addHandler(handler)
    root.setLevel(lvl)
    logging.captureWarnings(True)  # a library's warnings.warn: a JSON line, not plain text
    for name in UVICORN_LOGGERS:  # no handlers of their own: they reach the root's
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
        logger.setLevel(lvl)
    for noisy in ("LiteLLM", "litellm", "httpx", "httpcore", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(max(lvl, logging.WARNING))
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


class _CliHandler(logging.Handler):
    """A command's log records as one human line each on stderr (never JSON): written
    through ``tqdm.write`` so a progress bar on the same stream is cleared and redrawn
    around the line instead of being broken by it."""

    def __init__(self, prog: str) -> None:
        super().__init__()
        self.prog = prog

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = f"{self.prog}: {record.levelname.lower()}: {self.format(record)}"
            try:
                from tqdm import tqdm
            except ImportError:  # pragma: no cover - tqdm ships with the package
                print(line, file=sys.stderr)
            else:
                tqdm.write(line, file=sys.stderr)
        except Exception:  # a log line never fails the command
            self.handleError(record)


def _plain(_: object, __: str, event: structlog.types.EventDict) -> str:
    """``message (key=value, …)`` of a structlog event or a stdlib record."""
    message = str(event.pop("event", ""))
    for meta in ("level", "timestamp", "logger", "exc_info", "_record", "_from_structlog"):
        event.pop(meta, None)
    extra = ", ".join(f"{k}={v}" for k, v in event.items())
    return f"{message} ({extra})" if extra else message


def configure_cli_logging(prog: str, level: str = "warning") -> None:
    """Logging for a command other than ``serve``: warnings and errors (structlog's and the
    standard library's) as ``<prog>: warning: <message>`` lines on stderr, in human form
    whatever stderr is (the JSON lines are the server's), kept clear of progress bars."""
    lvl = log_level(level)
    handler = _CliHandler(prog)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_log_level],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, _plain],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if not isinstance(h, _StderrHandler | _CliHandler)]
    root.addHandler(handler)
    root.setLevel(lvl)
    logging.captureWarnings(True)
    for noisy in ("LiteLLM", "litellm", "httpx", "httpcore", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(max(lvl, logging.WARNING))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.add_log_level,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )
