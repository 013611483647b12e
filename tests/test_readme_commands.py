"""Every README command works verbatim on a fresh clone (issue 31, item 1: the README's first
command, ``groundproxy ingest … proxy/samples/``, failed with "no such file or folder").

In a scratch folder laid out as a clone (each top-level entry of the repository linked in;
no ``data/``), each fenced command :data:`tests.readme_commands.PLAN` marks ``run`` is run
as written by bash, ``groundproxy`` being the installed entry point (here
``python -m groundproxy.proxy``, the same program), and must exit 0; the ``serve`` one is
started until ready and the quick start's Python block is run against it. What the test
supplies, as a reader would have it: the demo upstream (the scripted fake upstream the demo
policy's ``api_base`` points at, on a free port), a free port for ``--port 8080`` (other
processes on this machine may hold 8080), ``$GP`` / ``$ADMIN_KEY`` for the curl examples,
and the example files the ingest example names. ``make demo`` runs ``groundproxy demo``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from groundproxy.testing.processes import free_port, start_fake_upstream, stop_process, wait_http
from tests.readme_commands import ENV, README, RUN, SERVE, Command, fenced
from tests.retrieval.helpers import make_pdf

REPO = README.parent
COMMANDS = fenced(README.read_text(encoding="utf-8"))
ADMIN_KEY = "gp-demo-admin-please-change"  # policies/demo.yaml: the demo's public keys


def test_every_readme_command_has_a_plan() -> None:
    """A command the README gains is run by the test below, or says why it is not."""
    assert [c.line for c in COMMANDS if c.plan is None] == []
    assert sum(c.plan == RUN for c in COMMANDS) >= 8 and sum(c.plan == SERVE for c in COMMANDS)


def _clone(work: Path, upstream_port: int) -> Path:
    """A scratch folder laid out as a fresh clone; the demo policy's upstream on our port."""
    clone = work / "clone"
    clone.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in ("data", "policies", ".git", ".venv", ".venv-litellm"):
            (clone / entry.name).symlink_to(entry)
    shutil.copytree(REPO / "policies", clone / "policies")
    demo = clone / "policies" / "demo.yaml"
    policy = yaml.safe_load(demo.read_text(encoding="utf-8"))
    policy["upstream"]["api_base"] = f"http://127.0.0.1:{upstream_port}/v1"
    demo.write_text(yaml.safe_dump(policy), encoding="utf-8")
    # the files the ingest example names (its docs/ is the clone's own: docs/DESIGN.md)
    for name, text in (
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
    upstream_port = free_port()
    script = REPO / "testing" / "samples" / "demo_script.json"
    upstream = start_fake_upstream(upstream_port, script, log_path=work / "upstream.log")
    try:
        clone = _clone(work, upstream_port)
        yield {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "GP_CLONE": str(clone),
            "DEMO_UPSTREAM_KEY": "sk-readme-test",
            "ADMIN_KEY": ADMIN_KEY,
            "KEY": "gp-demo-key-please-change",
        }
    finally:
        stop_process(upstream)


def _bash(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command], cwd=env["GP_CLONE"], env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _verbatim(command: Command, port: int) -> str:
    return command.text.replace("8080", str(port))  # the one thing changed: a free port


@pytest.mark.slow
def test_the_readme_commands_run_on_a_fresh_clone(env: dict[str, str]) -> None:
    env, port = dict(env), free_port()  # the exports below are this test's
    server: subprocess.Popen[bytes] | None = None
    ran: list[int] = []
    try:
        for command in COMMANDS:
            if command.plan == ENV:
                name, _, value = command.text.removeprefix("export ").split("#")[0].partition("=")
                env[name.strip()] = _verbatim(Command(value.strip(), 0), port)
            elif command.plan == SERVE:
                server = subprocess.Popen(
                    ["bash", "-c", f"exec {_verbatim(command, port)}"], cwd=env["GP_CLONE"],
                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
                wait_http(f"http://127.0.0.1:{port}/readyz", server, timeout_s=180)
                env["GP"] = f"http://127.0.0.1:{port}"
            elif command.plan == RUN and command.text.startswith("python: "):
                code = command.text.removeprefix("python: ")
                done = subprocess.run([sys.executable, "-c", code], cwd=env["GP_CLONE"], env=env,
                                      capture_output=True, text=True, timeout=120)  # fmt: skip
                assert done.returncode == 0, f"README:{command.line}: {done.stderr[-2000:]}"
                assert "12 months" in done.stdout and "contradicted" in done.stdout, done.stdout
                ran.append(command.line)
            elif command.plan == RUN:
                done = _bash(_verbatim(command, port), env)
                where = f"README:{command.line}: {command.text}"
                assert done.returncode == 0, f"{where}\n{done.stdout[-1000:]}{done.stderr[-2000:]}"
                assert '"error"' not in done.stdout, f"{where}\n{done.stdout[-2000:]}"
                ran.append(command.line)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    assert len(ran) == sum(c.plan == RUN for c in COMMANDS)


@pytest.mark.slow
def test_make_demo_runs(env: dict[str, str]) -> None:
    """``make demo`` = ``make install`` (the venv this test runs in) + ``groundproxy demo``."""
    clean = {k: v for k, v in env.items() if not k.startswith("OPENAI_")}  # the scripted one
    done = _bash("groundproxy demo", clean)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "contradicted" in done.stdout, done.stdout[-3000:]
