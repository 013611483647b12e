"""What ``docker build .`` sends to the builder: the repository's files less what
``.dockerignore`` excludes, by Docker's rules (no Docker engine needed, CI has none).

Docker's rules (moby ``patternmatcher``): each line is a pattern, ``!`` re-includes; patterns
are matched with Go's ``filepath.Match`` (``*`` and ``?`` never cross a ``/``) plus ``**``
for any number of folders; a pattern that matches a folder matches everything in it; the last
pattern that matches a path decides.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):  # "**/": zero or more folders
                i += 1
                out += "(?:.*/)?"
            else:
                out += ".*"
            continue
        out += {"*": "[^/]*", "?": "[^/]"}.get(c, re.escape(c))
        i += 1
    return re.compile(out + "(?:/.*)?")  # a matching folder matches all it holds


def patterns(text: str) -> list[tuple[bool, str]]:
    """``(negated, pattern)`` per line of a ``.dockerignore``."""
    out: list[tuple[bool, str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line[1:].strip() if negated else line
        out.append((negated, pattern.strip("/")))
    return out


def excluded(path: str, rules: list[tuple[bool, str]]) -> bool:
    """Whether ``path`` (relative, ``/``-separated) stays out of the build context."""
    out = False
    for negated, pattern in rules:
        if _regex(pattern).fullmatch(path):
            out = not negated
    return out


def build_context(repo: Path) -> list[str]:
    """The files a ``docker build`` of ``repo`` sends (tracked and untracked, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    rules = patterns((repo / ".dockerignore").read_text(encoding="utf-8"))
    return sorted(p for p in listed if (repo / p).is_file() and not excluded(p, rules))
