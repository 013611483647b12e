"""Every command of the README and the docs pages works verbatim on a fresh clone (issue 31,
item 1; issue 41: the docs site's pages too, and the test supplies nothing the text does not
tell the reader to start — the Getting started steps failed with 502 upstream_unreachable as
written, because the demo policy's upstream ran only inside ``groundproxy demo``).

In a scratch folder laid out as a clone (each top-level entry of the repository linked in;
no ``data/``), each fenced command :data:`tests.readme_commands.PLAN` marks ``run`` is run as
written by bash, ``groundproxy`` being the installed entry point (here ``python -m
groundproxy.proxy``, the same program), and must exit 0; ``serve`` ones (the demo's scripted
upstream, ``groundproxy serve``) are started until ready; ``export`` lines set the
environment of the commands after them; the python blocks run against what was started.
What the test changes or supplies, and nothing else: free ports in place of the documented
8080 and 8099 (other processes on this machine may hold them; the clone's copy of
``policies/demo.yaml`` gets the same port, after checking it names 8099), and the reader's
own example files the ingest example names. ``make demo`` runs ``groundproxy demo``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from groundproxy.testing.processes import free_port, stop_process, wait_http
from tests.readme_commands import ENV, EXPECT, READY, REPO, RUN, SERVE, Command, documented
from tests.retrieval.helpers import make_pdf

COMMANDS = documented()
DEMO_UPSTREAM = "127.0.0.1:8099/v1"  # policies/demo.yaml's upstream.api_base, as documented


def test_every_documented_command_has_a_plan() -> None:
    """A command the README or a docs page gains is run by the test below, or says why not."""
    assert [c.where for c in COMMANDS if c.plan is None] == []
    assert sum(c.plan == RUN for c in COMMANDS) >= 10
    assert sum(c.plan == SERVE for c in COMMANDS) == 2
    assert {c.source for c in COMMANDS if c.plan == RUN} > {"docs/getting-started.md"}


def test_the_documented_upstream_is_the_demo_policys() -> None:
    """The port Getting started starts the scripted upstream on is the demo policy's."""
    from groundproxy.testing.demo import demo_upstream_port

    assert f"http://{DEMO_UPSTREAM}" in (REPO / "policies" / "demo.yaml").read_text("utf-8")
    assert demo_upstream_port() == 8099
    assert any(c.text.startswith("groundproxy demo --upstream-only --port 8099") for c in COMMANDS)


def _clone(work: Path, upstream_port: int) -> Path:
    """A scratch folder laid out as a fresh clone (the demo policy's port made free)."""
    clone = work / "clone"
    clone.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in ("data", "policies", ".git", ".venv", ".venv-litellm", "site"):
            (clone / entry.name).symlink_to(entry)
    shutil.copytree(REPO / "policies", clone / "policies")
    demo = clone / "policies" / "demo.yaml"
    text = demo.read_text(encoding="utf-8")
    assert DEMO_UPSTREAM in text
    demo.write_text(text.replace(DEMO_UPSTREAM, f"127.0.0.1:{upstream_port}/v1"), "utf-8")
    # the reader's own files (and folder) the ingest example names
    (clone / "manuals").mkdir()
    for name, text in (
        ("manuals/r2.md", "# Acme R2\n\nThe R2 weighs 4 kilograms.\n"),
        ("manuals/care.txt", "Empty the dust bin after every run."),
        ("handbook.md", "# Handbook\n\nThe warranty lasts 12 months.\n"),
        ("faq.html", "<p>Support answers within two days.</p>"),
        ("rows.jsonl", '{"id": "r1", "text": "Batteries last 6 months."}\n'),
    ):
        (clone / name).write_text(text, encoding="utf-8")
    make_pdf(clone / "manual.pdf", ["The manual says the robot weighs 3 kg."])
    return clone


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    work = tmp_path_factory.mktemp("readme")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "groundproxy"  # what `pip install` puts on PATH, as this interpreter runs it
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m groundproxy.proxy "$@"\n')
    shim.chmod(0o755)
    ports = {"8080": str(free_port()), "8099": str(free_port())}
    clone = _clone(work, int(ports["8099"]))
    outer = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GP", "DEMO_"))}
    yield {
        **outer,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "GP_CLONE": str(clone),
        "GP_PORT_8080": ports["8080"],
        "GP_PORT_8099": ports["8099"],
    }


def _bash(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command], cwd=env["GP_CLONE"], env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _verbatim(text: str, env: dict[str, str]) -> str:
    """The command as written, the one thing changed: free ports for 8080 and 8099."""
    return re.sub(r"\b(8080|8099)\b", lambda m: env[f"GP_PORT_{m.group(1)}"], text)


def _start(command: Command, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """A served command started as written, and the URL that answers once it is ready."""
    text = _verbatim(command.text, env)
    port = re.search(r"--port (\d+)", text)
    assert port, f"{command.where}: a served command names its --port"
    path = next(p for start, p in READY.items() if command.text.startswith(start))
    server = subprocess.Popen(
        ["bash", "-c", f"exec {text}"], cwd=env["GP_CLONE"], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return server, f"http://127.0.0.1:{port.group(1)}{path}"


def _python(command: Command, env: dict[str, str]) -> None:
    code = _verbatim(command.text.removeprefix("python: "), env)
    done = subprocess.run([sys.executable, "-c", code], cwd=env["GP_CLONE"], env=env,
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, f"{command.where}: {done.stderr[-2000:]}"
    expected = next((e for start, e in EXPECT.items() if command.text.startswith(start)), ())
    for text in expected:
        assert text in done.stdout, f"{command.where}: {text!r} not in\n{done.stdout[-2000:]}"


@pytest.mark.slow
def test_the_documented_commands_run_on_a_fresh_clone(env: dict[str, str]) -> None:
    env = dict(env)  # the exports below are this test's
    servers: list[subprocess.Popen[bytes]] = []
    ran: list[str] = []
    try:
        for command in COMMANDS:
            if command.plan == ENV:
                name, _, value = command.text.removeprefix("export ").split("#")[0].partition("=")
                env[name.strip()] = _verbatim(value.strip(), env)
            elif command.plan == SERVE:
                server, ready = _start(command, env)
                servers.append(server)  # stopped below even when it never gets ready
                wait_http(ready, server, timeout_s=300)  # models load slowly on a busy machine
            elif command.plan == RUN and command.text.startswith("python: "):
                _python(command, env)
                ran.append(command.where)
            elif command.plan == RUN:
                done = _bash(_verbatim(command.text, env), env)
                where = f"{command.where}: {command.text}"
                assert done.returncode == 0, f"{where}\n{done.stdout[-1000:]}{done.stderr[-2000:]}"
                assert '"error"' not in done.stdout, f"{where}\n{done.stdout[-2000:]}"
                ran.append(command.where)
    finally:
        for server in reversed(servers):
            stop_process(server, timeout_s=30)
    assert len(ran) == sum(c.plan == RUN for c in COMMANDS)


@pytest.mark.slow
def test_make_demo_runs(env: dict[str, str]) -> None:
    """``make demo`` = ``make install`` (the venv this test runs in) + ``groundproxy demo``."""
    done = _bash("groundproxy demo", env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "contradicted" in done.stdout, done.stdout[-3000:]
