"""JudgeService with the in-process FakeJudge: one call per answer, the cache, the per-tenant
rate limit, timeouts against the judge's own limit and the guard's budget, failures mapped
to skip reasons, metrics. (The real path, a served answer and a judge server process, is
tests/e2e/test_judge_e2e.py.)"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from groundproxy.errors import RateLimitError, UpstreamError, UpstreamTimeoutError
from groundproxy.guards.judge.merge import Judged
from groundproxy.guards.rules.check import RuleResult
from groundproxy.guards.types import Claim, Evidence, Probs
from groundproxy.guards.verdict.stages import ScoredClaim, Verified, decide
from groundproxy.policies.schema import Policy, local_policy
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.serving.judging import JudgeService, RateLimiter
from groundproxy.proxy.upstream.judge_client import UpstreamJudge
from groundproxy.proxy.upstream.types import Completion, UpstreamAnswer
from groundproxy.testing.fake_judge import FakeJudge, verdicts

DOC = "The Acme vacuum robot has a limited warranty of 12 months from the date of purchase."
ANSWER = "The warranty lasts 24 months."


def _verified(answer: str = ANSWER, doc: str = DOC) -> Verified:
    claim = Claim(answer, (0, len(answer)))
    ev = Evidence(doc, "handbook.md", "c1", 0.8, (0, len(doc)))
    scored = ScoredClaim(claim, [ev], [Probs(0.45, 0.25, 0.30)], RuleResult(ok=True))
    return Verified(answer, [scored], "fake", 0.5, question="How long is the warranty?")


def _policy(tenant: str = "acme", **judge: object) -> Policy:
    # a budget that leaves the judge the 10 s _run says are left (JudgeAllowance.seconds)
    return local_policy(
        tenant, "openai/up", latency_budget_ms=10_000, judge={"escalate": "all", **judge}
    )


def _run(service: JudgeService, policy: Policy, left_s: float = 10.0) -> Judged:
    v = _verified()

    async def go() -> Judged:
        return await service.judge(v, decide(v, policy), policy, left_s)

    return anyio.run(go)


CONTRADICTED = verdicts(("c1", "contradicted", "limited warranty of 12 months"))


def test_overturn_then_cache_hit_without_a_call() -> None:
    fake, metrics = FakeJudge(CONTRADICTED), Metrics()
    service = JudgeService(fake, metrics)
    first = _run(service, _policy())
    assert first.results[0].verdict == "contradicted" and first.summary.overturned == 1
    assert fake.data()["claims"][0]["claim"] == ANSWER
    assert fake.calls[0].model == "openai/up"  # the judge defaults to the tenant's upstream
    assert fake.calls[0].response_format["type"] == "json_schema"
    second = _run(service, _policy())
    assert len(fake.calls) == 1 and second.results[0].judge is not None
    assert second.results[0].judge["cached"] is True and second.summary.overturned == 1
    other = _run(service, _policy("globex"))  # the cache never crosses tenants
    assert len(fake.calls) == 2 and "cached" not in (other.results[0].judge or {})
    text = metrics.render().decode()
    assert 'groundproxy_judge_claims_total{outcome="overturned",tenant="acme"} 2.0' in text
    assert 'groundproxy_judge_cache_hits_total{tenant="acme"} 1.0' in text
    assert 'groundproxy_judge_calls_total{tenant="acme"} 1.0' in text


def test_rate_limit_per_tenant() -> None:
    now = [0.0]
    fake = FakeJudge(CONTRADICTED)
    service = JudgeService(fake, limiter=RateLimiter(clock=lambda: now[0]))
    service.cache.max_entries = 0  # every call reaches the limiter
    policy = _policy(max_calls_per_minute=2)
    reasons = [(_run(service, policy).results[0].judge or {}).get("skipped") for _ in range(3)]
    assert reasons == [None, None, "rate_limit"] and len(fake.calls) == 2
    assert (_run(service, _policy("globex", max_calls_per_minute=2)).results[0].judge or {}).get(
        "verdict"
    ) == "contradicted"
    now[0] = 61.0  # the window moved on
    assert "verdict" in (_run(service, policy).results[0].judge or {})


@pytest.mark.parametrize(
    ("fake", "timeout_ms", "left_s", "reason"),
    [
        (FakeJudge(CONTRADICTED, delay_s=1.0), 100, 10.0, "timeout"),
        (FakeJudge(CONTRADICTED, delay_s=1.0), 3000, 0.1, "budget"),
        (FakeJudge(CONTRADICTED), 3000, 0.0, "budget"),
        (FakeJudge(error=RateLimitError("429")), 3000, 10.0, "rate_limit"),
        (FakeJudge(error=UpstreamTimeoutError("slow")), 3000, 10.0, "timeout"),
        (FakeJudge(error=UpstreamError("down", code="upstream_unreachable")), 3000, 10.0, "error"),
        (FakeJudge("the claim is fine"), 3000, 10.0, "bad_json"),
        (FakeJudge(verdicts(("c1", "supported", "24 months"))), 3000, 10.0, "unquoted"),
    ],
)
def test_never_silent(fake: FakeJudge, timeout_ms: int, left_s: float, reason: str) -> None:
    judged = _run(JudgeService(fake), _policy(timeout_ms=timeout_ms), left_s)
    r = judged.results[0]
    assert r.judge == {"skipped": reason, "model": "openai/up"}
    assert r.verdict == "unverifiable"  # the verifier's verdict is kept
    assert judged.summary.skipped == 1 and judged.summary.reasons == (reason,)


def test_nothing_escalated_makes_no_call() -> None:
    fake = FakeJudge(CONTRADICTED)
    judged = _run(JudgeService(fake), _policy(escalate="uncertain", min_uncertainty=1.0))
    assert fake.calls == [] and judged.summary.escalated == 0 and judged.results[0].judge is None


class _SchemaRefusingUpstream:
    """An OpenAI-compatible server that knows only ``json_object`` (llama.cpp's server)."""

    def __init__(self) -> None:
        self.formats: list[str] = []
        self.schemas: list[Any] = []

    async def complete(
        self, upstream: Any, model: str, messages: Any, extra: Any, stream: bool = False
    ) -> UpstreamAnswer:
        kind = extra["response_format"]["type"]
        self.formats.append(kind)
        self.schemas.append(extra["response_format"].get("schema"))
        if kind != "json_object":
            raise UpstreamError(
                "body.response_format.type: Input should be 'text' or 'json_object'"
            )
        body = {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": CONTRADICTED}}]
        }
        return UpstreamAnswer(Completion.from_body(body), 0.01)


def test_upstream_judge_falls_back_to_json_object_once_per_endpoint() -> None:
    up = _SchemaRefusingUpstream()
    service = JudgeService(UpstreamJudge(up))  # type: ignore[arg-type]
    service.cache.max_entries = 0
    assert _run(service, _policy()).results[0].verdict == "contradicted"
    assert _run(service, _policy()).results[0].verdict == "contradicted"
    assert up.formats == ["json_schema", "json_object", "json_object"]
    # the schema travels beside json_object (llama-cpp-python's server constrains to it)
    assert all(s is not None and s["required"] == ["claims"] for s in up.schemas[1:])
