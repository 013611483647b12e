"""The judge's limits (:mod:`proxy.serving.judge_limits`) without a server: the shared rate
limit across real processes, the per-request allowance, the reason scrub, the judge-key
host rule of the policy and the judge-label bound (end to end through ``serve``:
tests/e2e/test_judge_limits_e2e.py, tests/e2e/test_judge_workers_e2e.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import ValidationError

from groundproxy.guards.types import Claim, ClaimResult, Evidence, Probs
from groundproxy.guards.verdict.stages import decide
from groundproxy.policies.schema import local_policy
from groundproxy.proxy.serving.judge_limits import (
    MAX_STORED_REASON,
    JudgeAllowance,
    SharedRateLimiter,
    judge_allowance,
    scrubbed,
)
from groundproxy.proxy.serving.judging import JudgeService
from groundproxy.proxy.storage.feedback import Labelled
from groundproxy.proxy.storage.judge_labels import JudgeLabels, label_context
from groundproxy.testing.fake_judge import FakeJudge
from groundproxy.testing.storage import MemoryLabels
from tests.proxy.test_judging import CONTRADICTED, _policy, _verified

_HAMMER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from groundproxy.proxy.serving.judge_limits import SharedRateLimiter
    limiter = SharedRateLimiter(Path(sys.argv[1]))
    print(sum(limiter.allow("acme", int(sys.argv[2])) for _ in range(int(sys.argv[3]))))
    """
)


def test_processes_share_one_rate_limit(tmp_path: Path) -> None:
    """Four real processes asking 25 times each against a limit of 30: 30 allowed in all."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _HAMMER, str(tmp_path), "30", "25"], stdout=subprocess.PIPE
        )
        for _ in range(4)
    ]
    allowed = [int(p.communicate(timeout=120)[0]) for p in procs]
    assert sum(allowed) == 30, allowed
    assert (tmp_path / "acme").read_text().count("\n") == 30


def test_shared_window_moves_on_and_is_per_tenant(tmp_path: Path) -> None:
    now = [1000.0]
    limiter = SharedRateLimiter(tmp_path, clock=lambda: now[0])
    assert [limiter.allow("acme", 2) for _ in range(3)] == [True, True, False]
    assert limiter.allow("globex", 2) and not limiter.allow("acme", 0)
    now[0] += 61.0
    assert limiter.allow("acme", 2)


def test_one_allowance_per_request_calls_and_time() -> None:
    fake = FakeJudge(CONTRADICTED)
    service = JudgeService(fake)
    service.cache.max_entries = 0  # every answer calls the judge
    policy = _policy(max_calls_per_request=2)
    v = _verified()

    async def request() -> list[Any]:
        with judge_allowance(JudgeAllowance.of(policy)):
            return [
                (await service.judge(v, decide(v, policy), policy, 10.0)).results[0].judge
                for _ in range(3)
            ]

    judged = anyio.run(request)
    assert [j.get("skipped") for j in judged] == [None, None, "budget"] and len(fake.calls) == 2


def test_after_a_timeout_the_rest_of_the_request_does_not_wait() -> None:
    slow = FakeJudge(CONTRADICTED, delay_s=5.0)
    service = JudgeService(slow)
    policy = _policy(timeout_ms=200)
    v = _verified()

    async def request() -> list[Any]:
        with judge_allowance(JudgeAllowance.of(policy)):
            return [
                (await service.judge(v, decide(v, policy), policy, 10.0)).results[0].judge
                for _ in range(4)
            ]

    judged = anyio.run(request)
    assert [j["skipped"] for j in judged] == ["timeout", "budget", "budget", "budget"]
    assert len(slow.calls) == 1


def test_the_reason_is_scrubbed_and_cut() -> None:
    text = "Authorization: Bearer abc.DEF-123456 and sk-proj-0123456789abcdef " + "word " * 200
    out = scrubbed(text)
    assert "abc.DEF-123456" not in out and "sk-proj-0123456789abcdef" not in out
    assert out.startswith("Authorization: Bearer [redacted]") and len(out) == MAX_STORED_REASON


@pytest.mark.parametrize(
    ("upstream", "judge", "ok"),
    [
        ({"api_base": "http://10.0.0.5:8000/v1"}, {"api_base": "http://10.0.0.5:9000/v1"}, True),
        ({"api_base": "http://10.0.0.5:8000/v1"}, {}, True),  # the upstream's own base
        ({"api_base": "https://api.a.example/v1"}, {"api_base": "https://b.example/v1"}, False),
        ({}, {"api_base": "https://judge.example/v1"}, False),  # provider's default → else
        ({}, {"model": "anthropic/claude"}, False),  # another provider
        ({}, {"model": "openai/gpt-4o"}, True),
        ({"api_base": "https://a.example/v1"}, {"api_base": "https://b.example/v1",
                                                "api_key_env": "JUDGE_KEY"}, True),
    ],
)  # fmt: skip
def test_the_upstream_key_is_lent_to_the_judge_only_on_its_host(
    upstream: dict[str, Any], judge: dict[str, Any], ok: bool
) -> None:
    up: dict[str, Any] = {"model": "openai/gpt-4o-mini", "api_key_env": "UP_KEY", **upstream}
    calls = {"escalate": "all", **judge}
    if ok:
        local_policy("acme", upstream=up, judge=calls)
        return
    with pytest.raises(ValidationError, match="is not the upstream's host"):
        local_policy("acme", upstream=up, judge=calls)
    local_policy("acme", upstream=up, judge={**calls, "escalate": "none"})  # no judge calls


def _result(text: str, *passages: str) -> ClaimResult:
    cites = [Evidence(p, "doc", f"c{i}", 0.9, (0, len(p))) for i, p in enumerate(passages)]
    return ClaimResult(Claim(text, (0, len(text))), "supported", Probs(0.9, 0.05, 0.05), 0.1,
                       citations=cites)  # fmt: skip


def test_a_label_carries_the_cited_evidence_bounded() -> None:
    claims = [_result("a", "p1", "p2"), _result("b", "p2", "x" * 50_000, "p3")]
    context = label_context(claims, limit=1000)
    assert context[:2] == ["p1", "p2"] and len(context) == 3 and sum(map(len, context)) == 1000


def test_judge_labels_stop_at_the_tenants_bound() -> None:
    store = MemoryLabels()
    labels = JudgeLabels(store)
    item = Labelled(answer="The warranty lasts 12 months.", label_hallucinated=0)
    outcomes = [labels.keep("acme", item, max_bytes=300) for _ in range(4)]
    assert outcomes[0] == "stored" and outcomes[-1] == "full"
    assert store.feedback_bytes("acme") < 300 + 300  # one label past the bound at most
    assert labels.keep("globex", item, max_bytes=300) == "stored"
    assert local_policy("acme").judge.max_label_store_bytes == 16 * 1024 * 1024
