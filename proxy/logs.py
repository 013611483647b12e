"""structlog set-up: request id and tenant ride in contextvars; JSON when not on a TTY.

Prompt and answer bodies and keys are never logged by default.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(level: str = "info", json: bool | None = None) -> None:
    """Configure structlog (and route stdlib logging through the same level)."""
    if json is None:
        json = not sys.stderr.isatty()
    lvl = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    logging.basicConfig(level=lvl, stream=sys.stderr, format="%(message)s")
    for noisy in ("LiteLLM", "litellm", "httpx", "httpcore", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(max(lvl, logging.WARNING))
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
