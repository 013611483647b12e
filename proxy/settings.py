"""Process-wide settings, from flags, then ``GROUNDPROXY_*`` environment variables.

The one place the server and the CLI read ``GROUNDPROXY_*`` (an empty variable counts as
unset); other modules take what they need as arguments.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Server settings. Tenant behaviour lives in the policy files, not here."""

    model_config = SettingsConfigDict(
        env_prefix="GROUNDPROXY_", extra="ignore", env_ignore_empty=True
    )

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    # Server processes (proxy.cli.serve): > 1 runs uvicorn's workers, each loading its models and
    # reading every tenant's on-disk index generation read-only (hot reload: each polls CURRENT).
    workers: int = Field(default=1, ge=1, le=64)
    policies: Path = Path("policies")
    data: Path = Path("data")
    # built verifier models (groundproxy models build); None: <data>/_models
    models_dir: Path | None = None
    max_body_bytes: int = 1_048_576
    max_json_depth: int = 64
    embedder: str = "minilm"
    # where the embedder's ONNX export is kept; None: $XDG_CACHE_HOME/groundproxy or
    # ~/.cache/groundproxy (retrieval.onnx_embedder.cache_root)
    cache: Path | None = None
    # Micro-batching of embedder/verifier calls across concurrent requests (models.batching):
    # wait up to this long for other requests' items; 0 (default) turns it off. Opt-in: at
    # 16 concurrent guards on 2 cores, 2 ms gives 1.55x answers/s in-process (embedhead) but
    # no gain through serve at c=16 (bench/results/batching.txt, latency-batch2.txt).
    batch_window_ms: float = 0.0
    batch_max: int = 64
    # Guards running at once (proxy.serving.admission); 0: one per core (batch_max with
    # batching on).
    guard_workers: int = 0
    watch_policies: bool = True
    policy_poll_s: float = 1.0
    log_level: str = "info"
    log_bodies: bool = False
    metrics_public: bool = False
    # PostgreSQL + pgvector shared by several replicas (proxy.storage.backends); unset:
    # embedded files.
    database_url: str | None = None
    # Client headers forwarded to the upstream besides x-request-id (comma-separated names;
    # credentials never are): proxy.forwarding.
    forward_headers: str = ""
    # Browser origins allowed by CORS (comma-separated, "*" for any); empty: CORS off.
    cors_origins: str = ""
    # /docs (Swagger UI, served offline) and /openapi.json; off: both 404
    # (proxy.routes.api_docs)
    api_docs: bool = False
