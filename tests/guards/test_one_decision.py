"""The guard pipeline's decision is made in one place (issue 39 item 1): the runtime reads
the policy's ``on_guard_error`` in guards/action.py alone (once, in
``refused_on_guard_error``), and no Protocol exists in the serving layer to break a call loop
between the guard and its judge or ladder."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ("guards", "proxy", "retrieval", "integrations")


def _modules() -> list[Path]:
    return [
        p for top in RUNTIME for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts
    ]


def test_on_guard_error_is_read_in_guards_action_alone_and_once() -> None:
    readers: dict[str, int] = {}
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        n = sum(
            1
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr == "on_guard_error"
            and isinstance(node.ctx, ast.Load)
        )
        if n:
            readers[str(path.relative_to(ROOT))] = n
    assert readers == {"guards/action.py": 1}


def test_no_protocol_types_the_guard_for_its_judge_or_ladder() -> None:
    for name in ("proxy/serving/judging.py", "proxy/serving/rungs.py"):
        tree = ast.parse((ROOT / name).read_text(encoding="utf-8"))
        protocols = [
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
            and any(getattr(b, "id", None) == "Protocol" for b in node.bases)
        ]
        assert protocols == [], name
