"""``groundproxy calibrate`` on a slice of real labelled data (a seeded 120-row slice of
HaluEval-QA eval, vendored in tests/data): the held-out coverage of truly supported answers
respects the conformal bound, the diagnostics are reported and the calibration file is
written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groundproxy.models.registry import DEFAULT_VERIFIER
from groundproxy.proxy.cli.main import _run, build_parser
from groundproxy.proxy.storage.calibration import CalibrationCache, calibration_path
from tests.conftest import TEST_DATA

EVAL_FILE = TEST_DATA / "eval" / "halueval-qa.jsonl"
pytestmark = pytest.mark.slow


def test_calibrate_command_on_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    # The CLI's parser and dispatch (not main(): it reconfigures the process's logging).
    args = build_parser().parse_args(
        [
            "calibrate",
            "--tenant",
            "acme",
            str(EVAL_FILE),
            "--alpha",
            "0.2",
            "--limit",
            "60",
            "--seed",
            "3",
            "--data",
            str(data),
            "--policies",
            str(tmp_path / "no-policies"),
            "--json",
        ]
    )
    assert _run(args) == 0
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    assert "m1" in out and "m2" in out and "coverage" in out
    v = result["verifier_calibration"]
    held = v["held_out"]
    assert v["n_calibration"] >= 10 and held["n_supported"] >= 10
    assert v["feasible"] and 0.0 <= v["threshold"] <= 1.0
    # The guarantee: coverage ≥ 1 − alpha in expectation; on this held-out part the count
    # of accepted supported answers must fall inside the exact BetaBinomial interval.
    assert v["bound"]["lower"] >= 0.8
    assert held["interval_95"][0] <= held["coverage"] <= held["interval_95"][1]
    assert held["within_bound"] is True
    r = result["retrieval"]["held_out"]
    assert 0.0 <= r["m1"] <= 1.0 and 0.0 <= r["m2"] <= 1.0
    assert r["coverage_given_retrieved"] >= r["interval_95"][0]
    written = json.loads(calibration_path(data, "acme").read_text(encoding="utf-8"))
    assert {"alpha", "threshold", "n", "verifier", "created"} <= set(written)
    assert written["alpha"] == 0.2 and written["verifier"] == DEFAULT_VERIFIER  # the default
    assert CalibrationCache(data).get("acme")["threshold"] == v["threshold"]
    if r["m1"] < 0.8:
        assert "WARNING: m1" in out
