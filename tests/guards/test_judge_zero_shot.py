"""A zero-shot decision proven on the tenant's (judge) labels decides answers alone; the
``judge.audit`` share is judged anyway (issue 29 items 2-3 together)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groundproxy.errors import PolicyError
from groundproxy.guards import Adapter, ZeroShotRecord, read_adapter, read_record
from groundproxy.guards.judge.merge import (
    ADAPTER_GOOD,
    ZERO_SHOT_PROOF,
    JudgeSummary,
    zero_shot_decides,
)
from groundproxy.guards.types import Claim, ClaimResult, Probs
from groundproxy.policies.schema import local_policy
from groundproxy.proxy.serving.judging import audited
from groundproxy.proxy.storage.adapters import AdapterCache, write_adapter


def _claims(*texts: str) -> list[ClaimResult]:
    return [
        ClaimResult(Claim(t, (0, len(t))), "supported", Probs(0.9, 0.05, 0.05), 0.9) for t in texts
    ]


def _zero_record(score: object, n: object = 12, verifier: str = "embedhead") -> dict[str, object]:
    fit = {"n": n, "zero_shot_balanced_accuracy": score, "kept": "zero_shot"}
    return {"object": "groundproxy.adapter", "decision": "zero_shot", "fit": fit,
            "version": 3, "verifier": verifier}  # fmt: skip


def test_a_zero_shot_record_reads_as_what_it_proves() -> None:
    found = read_record(_zero_record(0.9))
    assert found == ZeroShotRecord(3, "embedhead", 0.9, 12)
    assert read_adapter(_zero_record(0.9)) is None  # no adapter in force
    # figures that are not figures prove nothing, they do not break the record
    for score, n in ((True, 12), ("0.9", 12), (1.5, 12), (None, 12), (0.9, -1), (0.9, "12")):
        bad = read_record(_zero_record(score, n))
        assert isinstance(bad, ZeroShotRecord)
        assert not zero_shot_decides(bad, _claims("a"))
    with pytest.raises(PolicyError, match="version"):
        read_record({**_zero_record(0.9), "version": 0})


def test_zero_shot_decides_only_when_proven_on_enough_labels() -> None:
    claims = _claims("The meeting is at 10:00.", "Coffee is served.")
    assert zero_shot_decides(ZeroShotRecord(1, "x", ADAPTER_GOOD, ZERO_SHOT_PROOF), claims)
    assert not zero_shot_decides(ZeroShotRecord(1, "x", ADAPTER_GOOD - 0.01, 500), claims)
    assert not zero_shot_decides(ZeroShotRecord(1, "x", 1.0, ZERO_SHOT_PROOF - 1), claims)
    assert not zero_shot_decides(ZeroShotRecord(1, "x", None, 500), claims)
    assert not zero_shot_decides(ZeroShotRecord(1, "x", 1.0, 500), [])  # nothing to decide


def test_the_cache_serves_a_zero_shot_record_for_its_verifier_only(tmp_path: Path) -> None:
    content = {k: v for k, v in _zero_record(0.95).items() if k != "version"}
    write_adapter(tmp_path, "acme", content)
    cache = AdapterCache(tmp_path)
    assert cache.get("acme") is None and cache.for_verifier("acme", "embedhead") is None
    assert cache.zero_shot_for("acme", "embedhead") == ZeroShotRecord(1, "embedhead", 0.95, 12)
    assert cache.zero_shot_for("acme", "crossencoder") is None  # proven for another verifier
    assert cache.zero_shot_for("globex", "embedhead") is None  # never fitted
    # a combiner fitted later replaces it: the zero-shot record is no longer in force
    combiner = json.loads(
        (Path(__file__).parents[2] / "models/embedhead/answer-combiner.json").read_text()
    )
    write_adapter(tmp_path, "acme", {**combiner, "source": "tenant"})
    assert (
        isinstance(cache.get("acme"), Adapter) and cache.zero_shot_for("acme", "embedhead") is None
    )


def test_the_audit_share_is_a_stable_fair_draw() -> None:
    policy = local_policy("acme")
    answers = [_claims(f"Answer number {i} is fine.") for i in range(4000)]
    share = {}
    for a in (0.0, 0.05, 0.25, 1.0):
        at = policy.model_copy(update={"judge": policy.judge.model_copy(update={"audit": a})})
        share[a] = sum(audited(at, c) for c in answers) / len(answers)
    assert share[0.0] == 0.0 and share[1.0] == 1.0
    assert abs(share[0.05] - 0.05) < 0.015 and abs(share[0.25] - 0.25) < 0.03
    assert policy.judge.audit == 0.05  # the default
    picked = [audited(policy, c) for c in answers[:200]]
    assert picked == [audited(policy, c) for c in answers[:200]]  # the same answer, the same draw
    other = local_policy("globex")
    assert picked != [audited(other, c) for c in answers[:200]]  # tenants draw apart


def test_the_summary_says_who_decided_and_what_was_an_audit() -> None:
    alone = JudgeSummary(model="m", decided_by="zero_shot").as_dict()
    assert alone["escalated"] == 0 and alone["decided_by"] == "zero_shot" and "audit" not in alone
    checked = JudgeSummary(escalated=2, model="m", audit=True).as_dict()
    assert checked["audit"] is True and "decided_by" not in checked
    both = JudgeSummary(decided_by="adapter").add(JudgeSummary(decided_by="zero_shot"))
    assert both.decided_by == ""  # pieces decided differently: no single answer
