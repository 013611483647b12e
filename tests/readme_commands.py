"""The fenced commands of the README and of every docs page, and what the commands test does
with each (every documented command works verbatim on a fresh clone).

:func:`documented` reads the ```` ```bash ```` and ```` ```python ```` blocks of README.md and
of the docs pages in the site's navigation order (``mkdocs.yml``: a reader follows Getting
started first, and the later pages use the proxy it starts); :data:`PLAN` says, for each
command (matched by its start), whether the test runs it (``RUN``), starts it until ready
(``SERVE``, ready when :data:`READY`'s path answers), reads it into the environment of the
commands after it (``ENV``), or why it does not run it — a command the docs gain without a
plan fails ``test_every_documented_command_has_a_plan``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
RUN, SERVE, ENV = "run", "serve", "env"
_FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)
_DB = "the PostgreSQL deployment: needs a database server (tests/storage/test_cli_pg.py, "
_DB += "test_replicas_e2e.py run them against one when present)"

# (the command's start, the plan): the first match wins
PLAN: list[tuple[str, str]] = [
    ("make demo", "make install + `groundproxy demo`: test_make_demo_runs runs `groundproxy demo`"),
    ("make test", "this very suite (plus ruff, mypy and the docs build)"),
    ("source .venv/bin/activate", "puts the venv's `groundproxy` on PATH: the test puts the same "
     "program on PATH (a shim running this interpreter's `-m groundproxy.proxy`)"),
    ("groundproxy demo --upstream-only --port 8099", SERVE),
    ("groundproxy ingest --tenant demo --data ./data", RUN),
    ("groundproxy serve --policies ./policies --data ./data --port", SERVE),
    ("export GROUNDPROXY_DATABASE_URL", _DB),
    ("export ", ENV),
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
    ("groundproxy serve --policies ./policies  ", _DB),
    ("groundproxy ingest --tenant acme ./handbook/", _DB),
    ("groundproxy calibrate --tenant acme ../shared/data", "reads ../shared/data, which a "
     "lone clone lacks (tests/proxy/test_calibrate.py runs it on tests/data)"),
    ("python: from openai import OpenAI\n\nclient = OpenAI()  # reads", RUN),
    ("python: from openai import OpenAI\n\nclient = OpenAI()  # OPENAI_BASE_URL", RUN),
    ("python: from langchain_openai import ChatOpenAI", RUN),
    ("python: from llama_index.llms.openai import OpenAI", "needs llama-index-llms-openai, not "
     "a dependency of this project (it is the openai SDK underneath, run above)"),
    ("python: from openai import OpenAI\n\nclient = OpenAI()  # the proxy",
     "a fragment: part_a and part_b are the reader's (tests/e2e/test_traces_e2e.py runs the "
     "same steps)"),
]  # fmt: skip

# a SERVE command is ready when this path answers 200 on its --port
READY: dict[str, str] = {
    "groundproxy demo --upstream-only": "/v1/models",
    "groundproxy serve": "/readyz",
}

# what a RUN python block must print (the example's own claim about its output)
_SDK = "python: from openai import OpenAI\n\nclient = OpenAI()  # "
EXPECT: dict[str, tuple[str, ...]] = {
    f"{_SDK}reads": ("12 months", "contradicted"),
    f"{_SDK}OPENAI_BASE_URL": ("12 months", "trust:"),
    "python: from langchain_openai import ChatOpenAI": ("12 months",),
}


@dataclass(frozen=True)
class Command:
    text: str  # a bash command (continuation lines joined), or "python: <the block>"
    line: int  # where it starts in its file
    source: str = "README.md"  # the file, relative to the repository

    @property
    def plan(self) -> str | None:
        return next((plan for start, plan in PLAN if self.text.startswith(start)), None)

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


def _nav_files(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [f for value in nav.values() for f in _nav_files(value)]
    return [f for item in nav for f in _nav_files(item)]


def pages() -> list[Path]:
    """The README, then every page of the site in its navigation order."""
    site = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    docs = REPO / site.get("docs_dir", "docs")
    return [README, *(docs / name for name in _nav_files(site["nav"]))]


def documented() -> list[Command]:
    """Every command of :func:`pages`, in reading order."""
    found: list[Command] = []
    for page in pages():
        found += fenced(page.read_text(encoding="utf-8"), str(page.relative_to(REPO)))
    return found


def fenced(readme: str, source: str = "README.md") -> list[Command]:
    """Every command of a page's bash blocks (comment lines left out, a line ending in a
    backslash joined to the next) and every python block, in order."""
    found: list[Command] = []
    for block in _FENCE.finditer(readme):
        kind, body = block.group(1), block.group(2)
        first = readme.count("\n", 0, block.start(2)) + 1
        if kind == "python":
            found.append(Command(f"python: {body}", first, source))
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
            found.append(Command(pending + line, start, source))
            pending = ""
    return found
