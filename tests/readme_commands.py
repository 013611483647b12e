"""The README's fenced commands, and what the README test does with each (issue 31, item 1:
every README command works verbatim on a fresh clone).

:func:`fenced` reads the README's ```` ```bash ```` and ```` ```python ```` blocks;
:data:`PLAN` says, for each command (matched by its start), whether the test runs it
(``RUN``), starts it until ready (``SERVE``), reads it into the environment of the
commands after it (``ENV``), or why it does not run it — a command the README gains
without a plan fails ``test_every_readme_command_has_a_plan``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
RUN, SERVE, ENV = "run", "serve", "env"
_FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)

# (the command's start, the plan): the first match wins
PLAN: list[tuple[str, str]] = [
    ("make demo", "make install + `groundproxy demo`: the test runs `groundproxy demo`"),
    ("make test", "this very suite (plus ruff and mypy)"),
    ("groundproxy ingest --tenant demo --data ./data", RUN),
    ("groundproxy serve --policies ./policies --data ./data --port", SERVE),
    ("export OPENAI_", ENV),
    ("groundproxy hash-key", RUN),
    ("groundproxy ingest --data ./data --tenant acme", RUN),
    ("groundproxy delete --data ./data --tenant acme", RUN),
    ("curl -s $GP/v1/groundproxy/traces", "follows the trace example's Python fragment"),
    ("curl", RUN),
    ("groundproxy models list", RUN),
    ("groundproxy models build --from PATH_OR_HF_ID", "a synopsis: PATH_OR_HF_ID and NAME are "
     "placeholders (tests/models/test_build_nli.py, test_build_causal.py build real ones)"),
    ("python -m bench.kshot", "a benchmark over ../shared/data (hours; says so when missing)"),
    ("python -m bench.judge real", "a benchmark: needs a judge server you deploy and "
     "../shared/data (bench/judge_real.py; tests/e2e/test_judge_e2e.py drives a real one)"),
    ("docker ", "needs a Docker daemon and minutes to build; the image's context is checked "
     "by tests/test_dockerignore.py and make wheel-check"),
    ("export GROUNDPROXY_DATABASE_URL", "the PostgreSQL deployment: needs a database server "
     "(tests/storage/test_cli_pg.py, test_replicas_e2e.py run them against one when present)"),
    ("groundproxy serve --policies ./policies  ", "the PostgreSQL deployment (above)"),
    ("groundproxy ingest --tenant acme ./handbook/", "the PostgreSQL deployment (above)"),
    ("groundproxy calibrate --tenant acme ../shared/data", "reads ../shared/data, which a "
     "lone clone lacks (tests/proxy/test_calibrate.py runs it on tests/data)"),
    ("python: from openai import OpenAI\n\nclient = OpenAI()  # reads", RUN),
    ("python: from openai import OpenAI\n\nclient = OpenAI()       ", "a fragment: part_a and "
     "part_b are the reader's (tests/e2e/test_traces_e2e.py runs the same steps)"),
]  # fmt: skip


@dataclass(frozen=True)
class Command:
    text: str  # a bash command (continuation lines joined), or "python: <the block>"
    line: int  # where it starts in the README

    @property
    def plan(self) -> str | None:
        return next((plan for start, plan in PLAN if self.text.startswith(start)), None)


def fenced(readme: str) -> list[Command]:
    """Every command of the README's bash blocks (comment lines left out, a line ending in
    a backslash joined to the next) and every python block, in order."""
    found: list[Command] = []
    for block in _FENCE.finditer(readme):
        kind, body = block.group(1), block.group(2)
        first = readme.count("\n", 0, block.start(2)) + 1
        if kind == "python":
            found.append(Command(f"python: {body}", first))
            continue
        if kind != "bash":
            continue
        pending, start = "", first
        for i, raw in enumerate(body.splitlines()):
            line = raw.rstrip()
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if not pending:
                start = first + i
            line = line.lstrip() if pending else line
            if line.endswith("\\"):
                pending += line[:-1].rstrip() + " "
                continue
            found.append(Command(pending + line, start))
            pending = ""
    return found
