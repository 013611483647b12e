"""The Docker build context holds what the image's commands need (issue 31, item 7): before,
``.dockerignore`` dropped ``policies/demo.yaml``, so ``docker run … groundproxy demo`` would
have crashed on the missing demo policy. Tenant policies stay out (they hold key hashes).
``make wheel-check`` builds its wheel from this same context and runs the demo from it."""

from __future__ import annotations

from pathlib import Path

from tests.dockerignore import build_context, excluded, patterns

REPO = Path(__file__).resolve().parents[1]


def test_docker_rules_as_docker_applies_them() -> None:
    rules = patterns("*\n!proxy/\nproxy/secret*\n**/__pycache__/\n!keep/**/x.txt\n")
    assert excluded("README.md", rules) and not excluded("proxy/app.py", rules)
    assert excluded("proxy/secret.txt", rules) and not excluded("proxy/a/secret.txt", rules)
    assert excluded("proxy/a/__pycache__/m.pyc", rules)
    assert not excluded("keep/a/b/x.txt", rules) and excluded("keep/a/b/y.txt", rules)


def test_the_build_context_holds_what_the_image_runs() -> None:
    context = set(build_context(REPO))
    # the demo (`docker run … demo`): its policy and its sample documents
    assert "policies/demo.yaml" in context
    assert {"testing/samples/handbook.md", "testing/demo.py"} <= context
    # every COPY of the Dockerfile
    for line in (REPO / "Dockerfile").read_text(encoding="utf-8").splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            for source in line.split()[1:-1]:
                assert any(p == source or p.startswith(f"{source}/") for p in context), source
    rules = patterns((REPO / ".dockerignore").read_text(encoding="utf-8"))
    assert excluded("policies/acme.yaml", rules)  # a tenant's policy is mounted, never baked
    assert not any(p.startswith(("tests/", "bench/", "training/", "docs/")) for p in context)
