"""Budgets, guard failures and the verdict cache, on GuardService with test verifiers
registered through models.registry's factories (removed again after each test)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from groundproxy.errors import ModelLoadError
from groundproxy.guards.types import CONTRADICTION_MIN, Pair, Probs
from groundproxy.guards.verdict.cache import CachingVerifier, VerdictCache
from groundproxy.guards.verdict.lexical import LexicalVerifier
from groundproxy.models import registry
from groundproxy.policies.schema import Policy, local_policy
from groundproxy.proxy.serving.guarding import GuardService, build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.testing.embedders import HashingEmbedder

ANSWER = "The warranty lasts 24 months. Batteries are covered for 6 months."
CONTEXT = [("system", "The warranty lasts 12 months. Batteries are covered for 6 months.")]


class SlowVerifier:
    name = "test-slow"
    contradiction_min = CONTRADICTION_MIN

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        time.sleep(2.0)
        return LexicalVerifier().score(pairs)


class BrokenVerifier:
    name = "test-broken"
    contradiction_min = CONTRADICTION_MIN

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        raise RuntimeError("verifier backend crashed")


class CountingVerifier:
    name = "test-counting"
    contradiction_min = CONTRADICTION_MIN

    def __init__(self) -> None:
        self.pairs = 0

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        self.pairs += len(pairs)
        return LexicalVerifier().score(pairs)


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GuardService]:
    counting = CountingVerifier()
    for name, factory in {
        "test-slow": SlowVerifier,
        "test-broken": BrokenVerifier,
        "test-counting": lambda: counting,
    }.items():
        monkeypatch.setitem(registry._FACTORIES, name, factory)
    yield build_guard(Settings(data=tmp_path, batch_window_ms=0), embedder=HashingEmbedder())


def policy(tenant: str = "t1", **over: Any) -> Policy:
    return local_policy(tenant, "x", **over)


def guard(service: GuardService, pol: Policy) -> Any:
    async def run() -> Any:
        return await service.guard(ANSWER, "How long?", CONTEXT, pol)

    return anyio.run(run)


def test_slow_verifier_past_budget_is_unverified_never_a_hang(service: GuardService) -> None:
    started = time.perf_counter()
    # the default ladder: its strong rung is loaded when a claim climbs, not before the
    # request context is read (a fresh guard once spent its budget loading it: no context
    # evidence, "no evidence found" → flag instead of unverified)
    slow = {"model": "test-slow"}
    report = guard(service, policy(verifier=slow, latency_budget_ms=200))
    assert time.perf_counter() - started < 1.5  # returned at the budget, not after 2 s
    why = [(c.verdict, c.explanation, c.rung) for c in report.claims]
    assert report.action == "unverified" and report.unverified, why
    assert report.text == ANSWER and not report.blocked
    assert report.claims and all(c.action == "unverified" for c in report.claims)
    assert all(c.verdict == "unverifiable" for c in report.claims)
    assert "latency budget" in report.claims[0].explanation
    # a budget overrun is a guard failure: "block" refuses, never returns unverified content
    pol = policy(verifier=slow, latency_budget_ms=200, on_guard_error="block")
    strict = guard(service, pol)
    assert strict.blocked and strict.action == "block" and strict.text == pol.actions.refusal


def test_raising_verifier_annotate_marks_unverified(service: GuardService) -> None:
    report = guard(service, policy(verifier={"model": "test-broken"}))
    assert report.action == "unverified" and report.unverified and not report.blocked
    assert report.text == ANSWER
    assert all(c.action == "unverified" for c in report.claims)
    assert "verifier backend crashed" in report.claims[0].explanation


def test_raising_verifier_block_refuses(service: GuardService) -> None:
    pol = policy(verifier={"model": "test-broken"}, on_guard_error="block")
    report = guard(service, pol)
    assert report.blocked and report.action == "block"
    assert report.text == pol.actions.refusal


def test_verdict_cache_hits_within_a_tenant_only(service: GuardService) -> None:
    pol_a = policy("tenant-a", verifier={"model": "test-counting"})
    pol_b = policy("tenant-b", verifier={"model": "test-counting"})
    counting = service.parts.verifiers.get("test-counting")
    assert isinstance(counting, CountingVerifier)
    first = guard(service, pol_a)
    scored = counting.pairs
    assert scored > 0
    again = guard(service, pol_a)
    assert counting.pairs == scored  # every pair answered from the cache
    assert [c.verdict for c in again.claims] == [c.verdict for c in first.claims]
    assert [c.probs for c in again.claims] == [c.probs for c in first.claims]
    guard(service, pol_b)
    assert counting.pairs == 2 * scored  # another tenant never hits tenant-a's entries
    stats = service.parts.verdict_cache.stats()
    assert stats["hits"] == scored and stats["misses"] == 2 * scored
    assert stats["hit_rate"] == pytest.approx(1 / 3, abs=1e-3)


def test_verdict_cache_is_bounded_lru() -> None:
    cache = VerdictCache(max_entries=2)
    inner = CountingVerifier()
    v = CachingVerifier(inner, cache, "t")
    pairs = [Pair(f"claim {i}", "evidence", None) for i in range(3)]
    v.score(pairs[:2])
    v.score(pairs[:1])  # claim 0 is now the most recently used
    v.score(pairs[2:])  # evicts claim 1
    assert cache.stats()["size"] == 2 and cache.stats()["evictions"] == 1
    before = inner.pairs
    v.score([pairs[0]])
    assert inner.pairs == before
    v.score([pairs[1]])
    assert inner.pairs == before + 1
    # evidence is keyed by its content: an edited chunk is a new entry
    v.score([Pair("claim 0", "evidence, edited", None)])
    assert inner.pairs == before + 2


def test_past_its_budget_the_report_takes_the_cheap_sentence_split(
    service: GuardService,
) -> None:
    """The budget is spent: the unverified report lists sentences (the linear splitter), not
    the clauses a full claim split would find (which cost 45 ms more on a long answer)."""
    answer = "The warranty lasts 24 months, and batteries are covered for 6 months."

    async def run(pol: Policy) -> Any:
        return await service.guard(answer, "How long?", CONTEXT, pol)

    slow = {"model": "test-slow"}  # the default ladder (see above)
    late = anyio.run(run, policy(verifier=slow, latency_budget_ms=100))
    assert late.unverified and [c.claim.text for c in late.claims] == [answer]
    failed = anyio.run(run, policy(verifier={"model": "test-broken"}))  # time to spare
    assert failed.unverified and len(failed.claims) == 2  # its clauses


def test_the_strong_rung_is_loaded_when_a_claim_climbs_not_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh guard (not warmed) loads the ladder's strong verifier at the first claim that
    climbs: an answer the fast rung is sure of never pays the load (it once came before the
    request context was read, out of the same budget)."""
    loads: list[str] = []

    def strong() -> CountingVerifier:
        loads.append("strong")
        return CountingVerifier()

    monkeypatch.setitem(registry._FACTORIES, "test-strong", strong)
    monkeypatch.setitem(registry._FACTORIES, "test-fast", LexicalVerifier)
    service = build_guard(Settings(data=tmp_path, batch_window_ms=0), embedder=HashingEmbedder())
    ladder = {"strong": "test-strong", "min_uncertainty": 0.0, "max_share": 1.0}
    sure = local_policy("t1", "x", verifier={"model": "test-fast", "ladder": ladder})
    off = local_policy(
        "t1", "x", verifier={"model": "test-fast", "ladder": {**ladder, "max_share": 0}}
    )

    async def run(pol: Policy) -> Any:
        return await service.guard(ANSWER, "How long?", CONTEXT, pol)

    nothing_climbs = anyio.run(run, off)
    assert all(c.rung == "fast" for c in nothing_climbs.claims) and loads == []
    climbed = anyio.run(run, sure)
    assert loads == ["strong"]
    assert any(c.rung == "strong" and c.rung_verifier == "test-strong" for c in climbed.claims)


def test_a_strong_rung_that_cannot_load_costs_only_the_ladder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unloadable() -> CountingVerifier:
        raise ModelLoadError("test-unloadable: weights missing")

    monkeypatch.setitem(registry._FACTORIES, "test-unloadable", unloadable)
    monkeypatch.setitem(registry._FACTORIES, "test-fast", LexicalVerifier)
    service = build_guard(Settings(data=tmp_path, batch_window_ms=0), embedder=HashingEmbedder())
    ladder = {"strong": "test-unloadable", "min_uncertainty": 0.0, "max_share": 1.0}
    pol = local_policy("t1", "x", verifier={"model": "test-fast", "ladder": ladder})

    async def run() -> Any:
        return await service.guard(ANSWER, "How long?", CONTEXT, pol)

    report = anyio.run(run)
    assert report.claims and not report.unverified
    why = [(c.rung, c.rung_skipped, c.verdict, c.explanation) for c in report.claims]
    # the wrong value is the rule's (it never climbs); the other keeps its fast verdict
    assert [(c.rung, c.rung_skipped) for c in report.claims] == [("fast", None), ("fast", "error")]
    assert report.claims[1].verdict == "supported", why
