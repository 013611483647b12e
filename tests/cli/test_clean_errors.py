"""Every CLI command reports a bad input as one clean line on stderr — the file, the line,
what is wrong and the hint — with exit code 2 and no traceback; ``--debug`` adds the
traceback (issue 31, item 2). Real processes: ``python -m groundproxy.proxy …``.

Before: a bad policy folder killed ``serve`` with a 69-line traceback out of its lifespan
and exit code 3; ``--port 99999`` was an OverflowError traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from groundproxy.testing.embedders import HASHING

REPO = Path(__file__).resolve().parents[2]
DEMO = (REPO / "policies" / "demo.yaml").read_text(encoding="utf-8")
pytestmark = pytest.mark.slow  # real processes


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GROUNDPROXY_EMBEDDER": HASHING}
    done = subprocess.run(
        [sys.executable, "-m", "groundproxy.proxy", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=120,
    )  # bytes: text mode would turn a progress bar's \r into \n
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def on_screen(stderr: str) -> list[str]:
    """The lines a terminal shows: a progress bar redrawn with ``\r`` (and cleared when the
    command fails) leaves only what was written after its last ``\r``."""
    shown = (line.rsplit("\r", 1)[-1].strip() for line in stderr.split("\n"))
    return [line for line in shown if line]


def one_clean_line(done: subprocess.CompletedProcess[str], command: str) -> str:
    """The one stderr line of a bad-input exit (code 2, no traceback)."""
    lines = on_screen(done.stderr)
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr and len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith(f"groundproxy{command}: error: "), lines
    return lines[0]


def _folder(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "policies"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


TYPO = DEMO.replace("\nretrieval:", "\nretreival:")
TYPO_LINE = TYPO.splitlines().index("retreival:") + 1
TENANT_LINE = DEMO.splitlines().index(next(x for x in DEMO.splitlines() if x.startswith("tenant:")))


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"demo.yaml": TYPO},
            f"demo.yaml:{TYPO_LINE}: unknown key 'retreival' — did you mean 'retrieval'?",
        ),
        (
            {"demo.yaml": ""},
            "demo.yaml:1: the policy file is empty: a policy needs at least tenant, keys and "
            "upstream (policies/demo.yaml documents every field)",
        ),
        (
            {"demo.yaml": "tenant: demo\nkeys: [a\n  upstream: x\n"},
            "demo.yaml:3:11: invalid YAML: expected ',' or ']', but got ':' (check the "
            "indentation and quoting there)",
        ),
        ({}, "no policy file (*.yaml, *.yml) in it: copy policies/demo.yaml there as"),
        (
            {"demo.yaml": DEMO, "demo.yml": DEMO},
            f"demo.yaml:{TENANT_LINE + 1}: tenant 'demo' is already defined by "
            f"policies/demo.yml:{TENANT_LINE + 1}: both files are refused until one of them is "
            "changed",
        ),
    ],
    ids=["typo-key", "empty-file", "bad-yaml", "empty-folder", "duplicate-tenant"],
)
def test_serve_with_a_bad_policy_folder_is_one_line_exit_2(
    tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    _folder(tmp_path, files)
    done = cli("serve", "--policies", "policies", "--data", "data", "--port", "0", cwd=tmp_path)
    line = one_clean_line(done, " serve")
    assert "policies: no policy loaded: " in line and expected in line, line


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    _folder(tmp_path, {"demo.yaml": TYPO})
    args = ("serve", "--policies", "policies", "--port", "0")
    done = cli(*args, "--debug", cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback (most recent call last)" in done.stderr and "PolicyError" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("groundproxy serve: error: ")


@pytest.mark.parametrize(
    ("args", "command", "expected"),
    [
        (["serve", "--port", "99999"], "serve", "setting port (GROUNDPROXY_PORT)"),
        (["serve", "--policies", "nowhere"], "serve", "policies folder nowhere does not exist"),
        (["ingest", "--tenant", "t", "nosuch.md"], "ingest", "nosuch.md: no such file"),
        (["ingest", "--tenant", "t", "empty"], "ingest", "nothing to ingest in empty"),
        (["ingest", "--tenant", "../x", "docs"], "ingest", "invalid tenant name '../x'"),
        (["ingest", "--tenant", "t", "docs/rows.jsonl"], "ingest", "rows.jsonl:2: invalid JSON"),
        (["delete", "--tenant", "../x", "a.md"], "delete", "invalid tenant name"),
        (["check", "--tenant", "demo", "--answer", "x"], "check", "no policy loaded"),
        (["eval", "nosuch.jsonl"], "eval", "cannot read nosuch.jsonl"),
        (["eval", "docs/rows.jsonl", "--limit", "0"], "eval", "--limit: must be at least 1"),
        (["calibrate", "--tenant", "t", "docs/rows.jsonl", "--alpha", "2"], "calibrate", "alpha"),
        (["models", "build", "--from", "nowhere", "--name", "x"], "models", "nowhere"),
        (["hash-key", ""], "hash-key", "the key is empty"),
        # the sub-command's own usage error (issue 41, item 5: before, "groundproxy: error")
        (["serve", "--no-such-flag"], "serve", "unrecognized arguments: --no-such-flag"),
    ],
)
def test_every_command_reports_a_bad_input_in_one_line(
    tmp_path: Path, args: list[str], command: str, expected: str
) -> None:
    _folder(tmp_path, {"demo.yaml": TYPO})  # ./policies: a typo (check reads it)
    (tmp_path / "empty").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "rows.jsonl").write_text('{"id": "a", "text": "x"}\nnot json\n')
    line = one_clean_line(cli(*args, cwd=tmp_path), f" {command}" if command else "")
    assert expected in line, line
