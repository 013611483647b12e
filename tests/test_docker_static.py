"""The image and the compose file as written (issue 41, item 7). No Docker engine runs here,
so the Dockerfile and docker-compose.yml are read as files, and the image's HEALTHCHECK
command is run as a real process against a real ``groundproxy serve`` on a port that is
not 8080, with the ``GROUNDPROXY_PORT`` the image's ``serve`` reads.

Before: the HEALTHCHECK hard-coded 8080 (a container serving on another port was marked
unhealthy); each compose replica got its own anonymous data volume (the Dockerfile's
``VOLUME``), so what lives under ``--data`` was not shared."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from groundproxy.testing.processes import free_port, start_proxy, stop_process

REPO = Path(__file__).resolve().parents[1]


def _instructions() -> list[tuple[str, str]]:
    """(instruction, rest) of every Dockerfile line, continuations joined."""
    text = (REPO / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    found = [line.partition(" ") for line in lines if line and not line.startswith("#")]
    return [(word, rest.strip()) for word, _, rest in found]


def _runtime_env() -> dict[str, str]:
    stages = [i for i, (word, _) in enumerate(_instructions()) if word == "FROM"]
    env: dict[str, str] = {}
    for word, rest in _instructions()[stages[-1] :]:
        if word == "ENV":
            env.update(item.split("=", 1) for item in rest.split())  # type: ignore[misc]
    return env


def _healthcheck() -> list[str]:
    (rest,) = [rest for word, rest in _instructions() if word == "HEALTHCHECK"]
    command: list[str] = json.loads(rest[rest.index("CMD ") + 4 :])
    return [sys.executable if part == "python" else part for part in command]


@pytest.fixture(scope="module")
def serving(
    policies_dir: Path, data_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[int]:
    port = free_port()
    log = tmp_path_factory.mktemp("docker-health") / "proxy.log"
    proc = start_proxy(port, policies_dir, data_dir, log_path=log)
    try:
        yield port
    finally:
        stop_process(proc)


@pytest.mark.slow
def test_the_healthcheck_asks_the_port_the_server_listens_on(serving: int) -> None:
    assert serving != 8080
    env = {**os.environ, "GROUNDPROXY_PORT": str(serving)}
    healthy = subprocess.run(_healthcheck(), env=env, capture_output=True, timeout=30)
    assert healthy.returncode == 0, healthy.stderr
    elsewhere = {**os.environ, "GROUNDPROXY_PORT": str(free_port())}  # nothing listens there
    assert subprocess.run(_healthcheck(), env=elsewhere, capture_output=True).returncode == 1


def test_serve_and_the_healthcheck_read_one_port_setting() -> None:
    env = _runtime_env()
    assert env["GROUNDPROXY_PORT"] == "8080" and env["GROUNDPROXY_HOST"] == "0.0.0.0"
    (cmd,) = [json.loads(rest) for word, rest in _instructions() if word == "CMD"]
    assert "--port" not in cmd and "--host" not in cmd  # Settings reads GROUNDPROXY_PORT
    assert ":8080/" not in " ".join(_healthcheck())  # no hard-coded port: 8080 is the default
    assert "GROUNDPROXY_PORT" in " ".join(_healthcheck())


def test_one_base_image_argument_pins_both_stages() -> None:
    """Both stages build from ``PYTHON_IMAGE``: one ``--build-arg …@sha256:<digest>`` pins
    them (the digest is not knowable offline, so the default is the tag, said so above)."""
    instructions = _instructions()
    bases = [rest.split()[0] for word, rest in instructions if word == "FROM"]
    assert bases == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]
    (arg,) = [rest for word, rest in instructions if word == "ARG"]
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11-slim(@sha256:[0-9a-f]{64})?", arg)
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    assert "--build-arg PYTHON_IMAGE=python:3.11-slim@sha256:" in text  # how to pin it


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text("utf-8"))
    return loaded


def test_compose_replicas_share_postgres_and_one_data_volume() -> None:
    compose = _compose()
    services = compose["services"]
    replicas = {name: s for name, s in services.items() if s.get("build") == "."}
    assert len(replicas) == 2
    data = _runtime_env()["GROUNDPROXY_DATA"]
    for name, spec in replicas.items():
        url = urlparse(spec["environment"]["GROUNDPROXY_DATABASE_URL"])
        assert url.scheme == "postgresql" and url.hostname in services, name
        assert "pgvector" in services[str(url.hostname)]["image"]
        assert spec["depends_on"][url.hostname]["condition"] == "service_healthy"
        mounts = {v.split(":")[1]: v.split(":")[0] for v in spec["volumes"]}  # target: source
        # the data folder is a named volume (not the image's anonymous one per replica)
        assert mounts.get(data) in compose["volumes"], (name, spec["volumes"])
    sources = {tuple(sorted(s["volumes"])) for s in replicas.values()}
    assert len(sources) == 1  # the same volumes, the same data folder, for both
    lb = next(s for s in services.values() if "nginx" in str(s.get("image")))
    assert all(lb["depends_on"][n]["condition"] == "service_healthy" for n in replicas)
