"""Labels that always help (issue 29), the pure parts: the zero-shot comparison, the
zero-shot record and the label warnings of ``calibrate --fit``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from groundproxy.errors import PolicyError
from groundproxy.guards import FEATURES, read_adapter
from groundproxy.proxy.cli.adapt_fit import (
    Conformal,
    fit_combiner,
    keep_zero_shot,
    label_warnings,
)
from groundproxy.proxy.storage.adapters import AdapterCache, write_adapter
from tests.conftest import ACCEPT_ALL


def _rows(n: int, signal: float, seed: int = 0) -> tuple[list[dict[str, float]], list[int]]:
    rng = np.random.default_rng(seed)
    y = [int(v) for v in rng.integers(0, 2, n)]
    feats = [{f: float(rng.normal() + signal * yy) for f in FEATURES} for yy in y]
    return feats, y


def test_an_adapter_that_beats_zero_shot_ships_with_its_honest_estimate() -> None:
    feats, y = _rows(80, 1.5)
    coin = [int(v) for v in np.random.default_rng(1).integers(0, 2, len(y))]
    content = fit_combiner(feats, y, zero=coin)
    fit = content["fit"]
    assert "decision" not in content and content["features"]
    assert fit["cross_fitted_balanced_accuracy"] > fit["zero_shot_balanced_accuracy"]
    # the nested estimate is not above the estimate whose threshold saw the labels
    assert fit["cross_fitted_balanced_accuracy"] <= fit["oof_balanced_accuracy"] + 0.05


def test_a_fit_that_does_not_beat_zero_shot_keeps_it() -> None:
    feats, y = _rows(60, 0.0)  # features that know nothing
    content = fit_combiner(feats, y, zero=y)  # the zero-shot decision gets every label right
    assert content["decision"] == "zero_shot" and "features" not in content
    assert content["fit"]["kept"] == "zero_shot"
    assert content["fit"]["zero_shot_balanced_accuracy"] == 1.0
    # the --alpha path compares too
    conformal = fit_combiner(feats, y, zero=y, conformal=Conformal(0.2))
    assert conformal["decision"] == "zero_shot"
    assert fit_combiner(feats, y)["features"]  # without the comparison it would ship


def test_a_tie_keeps_zero_shot() -> None:
    fit: dict[str, object] = {}
    assert keep_zero_shot(fit, 0.7, 0.7) and fit["cross_fitted_balanced_accuracy"] == 0.7
    assert not keep_zero_shot({}, 0.71, 0.7)


def test_label_warnings() -> None:
    labels = [1, 0] * 10
    assert label_warnings(labels, labels, labels) == []
    inverted = label_warnings(labels, [1 - v for v in labels], [0] * 20)
    assert len(inverted) == 1 and "0.00 < 0.5" in inverted[0]
    # every answer a value rule contradicts labelled correct
    ruled = label_warnings(labels, labels, [1 - v for v in labels])
    assert len(ruled) == 1 and ruled[0].startswith("10 of 10 answers whose values")


def test_a_zero_shot_record_withdraws_the_adapter_in_force(tmp_path: Path) -> None:
    write_adapter(tmp_path, "acme", ACCEPT_ALL)
    cache = AdapterCache(tmp_path)
    assert cache.for_verifier("acme", "embedhead") is not None
    write_adapter(tmp_path, "acme", {"object": "groundproxy.adapter", "decision": "zero_shot"})
    assert cache.get("acme") is None and cache.for_verifier("acme", "other") is None
    stored = json.loads((tmp_path / "acme" / "adapter-v2.json").read_text(encoding="utf-8"))
    assert stored["version"] == 2 and stored["decision"] == "zero_shot"
    with pytest.raises(PolicyError, match="version"):
        read_adapter({"decision": "zero_shot", "version": 0})
