"""A verifier's calibration (issue 42 item 3): the served uncertainty becomes the calibrated
P(the verdict is wrong); the ladder still climbs by the fast rung's decision margin."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from groundproxy.errors import ModelLoadError
from groundproxy.guards import Rungs, decide_claims, verify
from groundproxy.guards.pipeline import evidence_fn
from groundproxy.guards.types import Probs
from groundproxy.guards.verdict.stages import Verified
from groundproxy.guards.verdict.uncertainty import Calibration, margin_risk
from groundproxy.models.ranker_file import read_ranker
from groundproxy.policies.schema import Policy, local_policy
from groundproxy.testing.verifiers import ScriptedVerifier

CONTEXT = [("system", "The warranty lasts 12 months. Support is open on weekdays.")]
QUESTION = "Tell me about the robot."
SURE = "The warranty lasts 12 months."
UNSURE = "Support is open on weekdays."
FAST = {SURE: Probs(0.95, 0.03, 0.02), UNSURE: Probs(0.55, 0.1, 0.35)}  # threshold 0.6


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def test_platt_scaling_of_the_raw_probability() -> None:
    cal = Calibration(0.5, -0.25)
    assert cal.p_supported(0.8, 0.6) == pytest.approx(sigmoid(0.5 * logit(0.8) - 0.25))
    # P(wrong): the other class's calibrated probability, whatever the threshold
    assert cal.p_wrong(0.8, True, 0.6) == pytest.approx(1.0 - sigmoid(0.5 * logit(0.8) - 0.25))
    assert cal.p_wrong(0.3, False, 0.6) == pytest.approx(sigmoid(0.5 * logit(0.3) - 0.25))
    # a raw 0 or 1 is clipped, never infinite
    assert 0.0 < cal.p_supported(0.0, 0.6) < cal.p_supported(1.0, 0.6) < 1.0


def test_temperature_about_the_threshold_in_force() -> None:
    cal = Calibration(0.3, method="threshold")
    assert cal.p_supported(0.1, 0.1) == pytest.approx(0.5)  # 1/2 at the threshold
    assert cal.p_supported(0.6, 0.6) == pytest.approx(0.5)  # whichever is in force
    assert cal.p_supported(0.9, 0.1) == pytest.approx(sigmoid(0.3 * (logit(0.9) - logit(0.1))))
    # P(wrong) falls off on both sides of the threshold, at most 1/2
    assert cal.p_wrong(0.9, True, 0.1) == pytest.approx(1.0 - cal.p_supported(0.9, 0.1))
    assert cal.p_wrong(0.01, False, 0.1) < cal.p_wrong(0.05, False, 0.1) < 0.5


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"b": 0.1}, "'a' and 'b'"),
        ({"a": "x", "b": 0.1}, "'a' and 'b'"),
        ({"a": 0.0, "b": 0.1}, "'a' must be"),
        ({"a": float("inf"), "b": 0.1}, "'a' must be"),
        ({"a": 1.0, "method": "isotonic"}, "'method'"),
    ],
)
def test_an_invalid_calibration_is_refused(data: dict[str, object], match: str) -> None:
    with pytest.raises(ModelLoadError, match=match):
        Calibration.from_dict(data)


def test_the_model_folder_gives_its_ranker_else_its_calibration(tmp_path: Path) -> None:
    assert read_ranker(tmp_path) is None
    (tmp_path / "calibration.json").write_text(
        json.dumps({"object": "groundproxy.calibration", "method": "threshold", "a": 0.3}),
        encoding="utf-8",
    )
    assert read_ranker(tmp_path) == Calibration(0.3, 0.0, "threshold")
    (tmp_path / "calibration.json").write_text('{"a": -1, "b": 0}', encoding="utf-8")
    with pytest.raises(ModelLoadError, match=r"calibration\.json"):
        read_ranker(tmp_path)
    (tmp_path / "calibration.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ModelLoadError, match="not a JSON object"):
        read_ranker(tmp_path)


def scripted(
    name: str, probs: dict[str, Probs] | Probs, cal: Calibration | None
) -> ScriptedVerifier:
    v = ScriptedVerifier(
        (lambda p: probs[p.claim]) if isinstance(probs, dict) else probs, name=name
    )
    v.error_ranker = cal  # type: ignore[attr-defined]  # what read_ranker gives a verifier
    return v


def run(answer: str, pol: Policy, rungs: Rungs) -> Verified:
    return verify(
        answer, question=QUESTION, policy=pol, verifier=rungs,
        evidence_for=evidence_fn(CONTEXT, pol, None, None, QUESTION),
    )  # fmt: skip


def test_a_calibrated_verifier_serves_its_calibrated_p_wrong() -> None:
    pol = local_policy("acme", verifier={"ladder": {"strong": "none"}})
    cal = Calibration(0.8, 0.4)
    sure, unsure = decide_claims(run(f"{SURE} {UNSURE}", pol, Rungs(scripted("f", FAST, cal))), pol)
    assert (sure.verdict, unsure.verdict) == ("supported", "unverifiable")  # threshold 0.6
    assert sure.uncertainty == pytest.approx(cal.p_wrong(0.95, True, 0.6))
    assert unsure.uncertainty == pytest.approx(cal.p_wrong(0.55, False, 0.6))
    # no calibration: the decision margin, as before
    sure, unsure = decide_claims(
        run(f"{SURE} {UNSURE}", pol, Rungs(scripted("f", FAST, None))), pol
    )
    assert sure.uncertainty == pytest.approx(margin_risk(0.95, True, 0.6))
    assert unsure.uncertainty == pytest.approx(margin_risk(0.55, False, 0.6))


def test_the_ladder_climbs_by_the_margin_and_each_rung_serves_its_calibration() -> None:
    pol = local_policy("acme", verifier={"ladder": {"strong": "strong", "max_share": 1.0}})
    # UNSURE's margin 0.55/0.6 = 0.92 ≥ 0.7 climbs; its calibrated P(wrong) (≈ 0.45) would not
    fast_cal = Calibration(1.0, method="threshold")
    assert fast_cal.p_wrong(0.55, False, 0.6) < 0.7
    strong_probs = Probs(0.3, 0.1, 0.6)
    strong = scripted("strong", strong_probs, Calibration(0.5, 1.0))
    strong.threshold = 0.1  # type: ignore[attr-defined]  # its own fitted threshold
    v = run(f"{SURE} {UNSURE}", pol, Rungs(scripted("fast", FAST, fast_cal), strong))
    sure, unsure = decide_claims(v, pol)
    assert (sure.rung, unsure.rung) == ("fast", "strong")
    assert sure.uncertainty == pytest.approx(fast_cal.p_wrong(0.95, True, 0.6))
    assert unsure.verdict == "supported"  # 0.3 ≥ the strong rung's 0.1
    assert unsure.uncertainty == pytest.approx(Calibration(0.5, 1.0).p_wrong(0.3, True, 0.1))
