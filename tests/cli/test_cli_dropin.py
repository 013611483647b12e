"""Issue 41, item 5: the CLI as a new user meets it, through real processes
(``python -m groundproxy.proxy …``): ``--version``; help on every argument, in the user's
words; a usage error names its sub-command; ``serve`` and ``delete`` refuse a data folder
that does not exist (a mistyped ``--data`` served empty indexes) while ``ingest`` creates
it; a warning during ``ingest`` is one human line on stderr, never a JSON log line."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from groundproxy.proxy.cli.main import build_parser
from tests.cli.test_clean_errors import DEMO, cli, on_screen, one_clean_line

pytestmark = pytest.mark.slow  # real processes
# what only the project's own developers could read
INTERNAL = re.compile(r"\bseed \d{3}\b|\.py\b|\bissue \d+|\bour\b|\bproxy/|\bguards/|\bce\b")


def _commands(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, Any]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from _commands(child, f"{name} {sub}")


def test_version() -> None:
    done = cli("--version", cwd=Path.cwd())
    assert done.returncode == 0 and done.stdout.strip() == f"groundproxy {version('groundproxy')}"


def test_every_argument_has_help_in_the_users_words() -> None:
    missing, internal = [], []
    for name, parser in _commands(build_parser(), "groundproxy"):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                texts = [a.help or "" for a in action._choices_actions]
            else:
                texts = [action.help or ""]
                if not action.help:
                    missing.append(f"{name} {action.option_strings or action.dest}")
            internal += [f"{name}: {t}" for t in texts if INTERNAL.search(t)]
    assert missing == [] and internal == []


@pytest.mark.parametrize("command", ["ingest", "calibrate", "models build"])
def test_help_as_printed(tmp_path: Path, command: str) -> None:
    done = cli(*command.split(), "--help", cwd=tmp_path)
    assert done.returncode == 0 and "usage: groundproxy " + command in done.stdout
    assert not INTERNAL.search(done.stdout), done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["ingest", "--tenant", "t", "--bogus", "docs"],
        ["models", "build", "--from", "x", "--name", "y", "--bad"],
    ],
    ids=["ingest", "models-build"],
)
def test_an_unknown_flag_names_its_command(tmp_path: Path, args: list[str]) -> None:
    command = " ".join(a for a in args[:2] if not a.startswith("-"))
    line = one_clean_line(cli(*args, cwd=tmp_path), f" {command}")
    assert "unrecognized arguments: " in line and "--b" in line


def _policies(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "demo.yaml").write_text(DEMO, encoding="utf-8")


def test_serve_and_delete_refuse_a_data_folder_that_does_not_exist(tmp_path: Path) -> None:
    _policies(tmp_path)
    served = cli("serve", "--port", "0", "--data", "dta", cwd=tmp_path)
    line = one_clean_line(served, " serve")
    assert "the data folder dta does not exist" in line and "ingest" in line
    deleted = cli("delete", "--data", "dta", "--tenant", "demo", "a.md", cwd=tmp_path)
    assert "the data folder dta does not exist" in one_clean_line(deleted, " delete")
    assert not (tmp_path / "dta").exists()  # before: created, and empty indexes served


def test_ingest_creates_the_folder_and_warns_in_words(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "handbook.md").write_text("The warranty lasts 12 months.\n", encoding="utf-8")
    (docs / "photo.png").write_bytes(b"\x89PNG")
    done = cli("ingest", "--data", "data", "--tenant", "t1", "docs", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["added"] == 1 and (tmp_path / "data").is_dir()
    lines = on_screen(done.stderr)
    warning = [line for line in lines if "photo.png" in line]
    assert warning and warning[0].startswith("groundproxy ingest: warning: skipping "), lines
    assert "unsupported file type" in warning[0]
    assert not any(line.lstrip().startswith("{") for line in lines), lines  # no JSON log line
