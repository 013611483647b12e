"""The contradiction bar is a member of the ``Verifier`` protocol: every verifier carries it,
every wrapper forwards it, and a wrapper that forgets it fails (mypy and at run time).

Commit b1e3439 fixed such a bug: the verdict-cache and micro-batch wrappers dropped the
bar, so served requests used 0.5 instead of embedhead's fitted 0.92.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from groundproxy.guards.types import CONTRADICTION_MIN, Pair, Probs, Verifier, WrappedVerifier
from groundproxy.guards.verdict.cache import CachingVerifier, VerdictCache
from groundproxy.guards.verdict.decide import contradiction_bar
from groundproxy.guards.verdict.lexical import LexicalVerifier
from groundproxy.models.batching import BatchingVerifier, BatchOptions

ROOT = Path(__file__).resolve().parents[2]


class Barred:
    name = "barred"
    contradiction_min = 0.9

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        return [Probs(0.1, 0.8, 0.1) for _ in pairs]


class ForgetfulWrapper:
    """A wrapper written the way the two proxy wrappers were before b1e3439."""

    def __init__(self, inner: Verifier) -> None:
        self.inner = inner
        self.name = inner.name

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        return self.inner.score(pairs)


def test_every_wrapper_forwards_the_bar_through_the_protocol() -> None:
    inner = Barred()
    batched = BatchingVerifier(inner, BatchOptions(window_s=0.0))
    wrapped: list[Verifier] = [
        CachingVerifier(inner, VerdictCache(), "t"),
        batched,
        CachingVerifier(batched, VerdictCache(), "t"),
    ]
    for w in wrapped:
        assert isinstance(w, Verifier) and isinstance(w, WrappedVerifier)
        assert w.name == "barred"
        assert contradiction_bar(w) == pytest.approx(0.9)
    inner.contradiction_min = 0.95  # read through, never copied at construction
    assert all(contradiction_bar(w) == pytest.approx(0.95) for w in wrapped)
    assert isinstance(LexicalVerifier(), Verifier)
    assert contradiction_bar(LexicalVerifier()) == CONTRADICTION_MIN


def test_a_wrapper_that_forgets_the_bar_fails_at_run_time() -> None:
    forgetful = ForgetfulWrapper(Barred())
    assert not isinstance(forgetful, Verifier)
    with pytest.raises(AttributeError):
        contradiction_bar(forgetful)  # type: ignore[arg-type]


@pytest.mark.slow  # one mypy run (~12 s)
def test_a_wrapper_that_forgets_the_bar_fails_type_checking(tmp_path: Path) -> None:
    mypy_api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "forgetful.py"
    snippet.write_text(
        textwrap.dedent("""
        from collections.abc import Sequence

        from groundproxy.guards.types import Pair, Probs, Verifier, WrappedVerifier


        class Forgetful:
            def __init__(self, inner: Verifier) -> None:
                self.inner = inner
                self.name = inner.name

            def score(self, pairs: Sequence[Pair]) -> list[Probs]:
                return self.inner.score(pairs)


        class Forwarding(WrappedVerifier):
            def score(self, pairs: Sequence[Pair]) -> list[Probs]:
                return self.inner.score(pairs)


        def use(v: Verifier) -> float:
            return v.contradiction_min


        def check(inner: Verifier) -> None:
            use(Forwarding(inner))
            use(Forgetful(inner))
    """)
    )
    out, err, status = mypy_api.run(
        [
            "--strict",
            "--no-incremental",
            "--follow-imports=silent",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            str(snippet),
        ]
    )
    assert status == 1, out + err
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1, out  # only the forgetful one
    assert '"Forgetful"' in errors[0] and "Verifier" in errors[0]
    assert "contradiction_min" in out
