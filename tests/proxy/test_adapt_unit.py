"""The adapter's pieces without a server: fit, file versions and hot reload, feedback parsing."""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path
from typing import Any

import pytest

from groundproxy.errors import BadRequestError, PolicyError
from groundproxy.guards.adapter.combiner import Adapter
from groundproxy.guards.adapter.features import (
    FEATURE_SETS,
    FEATURES,
    LEGACY_FEATURES,
    TOKEN_FEATURES,
    features_from_signals,
)
from groundproxy.guards.adapter.signals import CLAIM_FIELDS
from groundproxy.proxy.cli.adapt import (
    Candidates,
    Conformal,
    best_threshold,
    fit_combiner,
    without_token_features,
)
from groundproxy.proxy.storage.adapters import AdapterCache, versions, write_adapter
from groundproxy.proxy.storage.feedback import (
    Labelled,
    append,
    feedback_path,
    parse_labelled,
    read_labelled,
)


def _rows(n: int, seed: int) -> tuple[list[dict[str, float]], list[int]]:
    rng = random.Random(seed)
    xs, ys = [], []
    for i in range(n):
        y = i % 2
        x = {name: rng.random() for name in FEATURES}
        x["max_p_contradicted"] = 0.8 * y + 0.2 * rng.random()
        xs.append(x)
        ys.append(y)
    return xs, ys


def test_fit_learns_the_signal_and_conformal_threshold() -> None:
    xs, ys = _rows(60, 0)
    fit = fit_combiner(xs, ys, seed=0)
    ad = Adapter.from_dict({**fit, "version": 1, "verifier": "v"})
    preds = [int(ad.p_hallucinated(x) > ad.threshold) for x in xs]
    assert sum(p == y for p, y in zip(preds, ys, strict=True)) / len(ys) > 0.9
    assert fit["fit"]["oof_balanced_accuracy"] > 0.9
    conf = fit_combiner(xs, ys, conformal=Conformal(0.1), seed=0)
    assert conf["fit"]["threshold_rule"] == "split conformal" and 0 <= conf["threshold"] <= 1
    with pytest.raises(BadRequestError):
        fit_combiner(xs[:5], ys[:5])
    assert best_threshold([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9]) == pytest.approx(0.5)


def test_fit_chooses_features_and_regularization_by_cross_fitting() -> None:
    xs, ys = _rows(80, 3)
    only = {"lexical": ("lex_answer", "trust"), "signal": ("max_p_contradicted", "trust")}
    fit = fit_combiner(xs, ys, seed=0, candidates=Candidates(only, (0.01, 1.0)))
    assert fit["fit"]["feature_set"] == "signal" and fit["features"] == list(only["signal"])
    assert fit["fit"]["C"] in (0.01, 1.0) and fit["fit"]["oof_roc_auc"] > 0.95
    ad = Adapter.from_dict({**fit, "version": 3, "verifier": "v"})
    assert ad.features == only["signal"]


def test_old_adapter_files_load_and_unknown_features_are_refused() -> None:
    legacy = {
        "version": 1,
        "verifier": "v",
        "features": list(LEGACY_FEATURES),
        "mean": [0.0] * len(LEGACY_FEATURES),
        "scale": [1.0] * len(LEGACY_FEATURES),
        "coef": [0.0] * (len(LEGACY_FEATURES) - 1) + [-2.0],  # trust only
        "intercept": 1.0,
        "threshold": 0.5,
    }
    ad = Adapter.from_dict(legacy)
    signals = {
        "claims": [[0.9, 0.9, 0.05] + [0.0] * (len(CLAIM_FIELDS) - 3)],
        "trust": 0.9,
        "lex_answer": 0.4,
        "lex_answer_alone": 0.3,
        "n_passages": 2,
        "answer_words": 7,
    }
    feats = features_from_signals(signals)
    assert set(feats) == set(FEATURES)
    assert feats["min_p_supported"] == pytest.approx(0.9) and feats["n_claims_log"] > 0
    assert ad.p_hallucinated(feats) < 0.5  # 1 − 2·0.9 < 0
    with pytest.raises(PolicyError, match=r"does not compute.*fit it again"):
        Adapter.from_dict({**legacy, "features": [*LEGACY_FEATURES[:-1], "from_the_future"]})


def test_versions_and_hot_reload(tmp_path: Path) -> None:
    xs, ys = _rows(40, 1)
    content = {**fit_combiner(xs, ys), "verifier": "v"}
    cache = AdapterCache(tmp_path)
    assert cache.get("acme") is None
    write_adapter(tmp_path, "acme", content)
    assert cache.get("acme") is not None and cache.get("acme").version == 1  # type: ignore[union-attr]
    write_adapter(tmp_path, "acme", {**content, "threshold": 0.25})
    current = tmp_path / "acme" / "adapter.json"
    os.utime(current, ns=(1, 1))  # a different mtime even on a coarse clock
    got = cache.get("acme")
    assert got is not None and got.version == 2 and got.threshold == 0.25
    assert versions(tmp_path, "acme") == [1, 2]
    with pytest.raises(PolicyError):
        cache.for_verifier("acme", "other")
    current.write_text(json.dumps({"features": ["x"]}), encoding="utf-8")
    with pytest.raises(PolicyError):
        cache.get("acme")


def test_feedback_records(tmp_path: Path) -> None:
    item = parse_labelled({"answer": "A.", "claims": [{"text": "A.", "label": "hallucinated"}]})
    assert item.label_hallucinated == 1
    row = parse_labelled({"response": "B.", "query": "q", "context": "c", "label_hallucinated": 0})
    assert row == Labelled(answer="B.", label_hallucinated=0, question="q", context=["c"])
    for bad in (
        {"answer": "A."},
        {"answer": "", "label": "supported"},
        {"answer": "A.", "label_hallucinated": 2},
    ):
        with pytest.raises(BadRequestError):
            parse_labelled(bad)
    # the response's logprobs travel with the label, stored as [{"token", "logprob"}]
    legacy = {"tokens": ["B", "."], "token_logprobs": [-0.1, -2.0]}
    sure = parse_labelled({"answer": "B.", "label": "supported", "logprobs": legacy})
    assert sure.logprobs == [{"token": "B", "logprob": -0.1}, {"token": ".", "logprob": -2.0}]
    assert row.logprobs is None
    with pytest.raises(BadRequestError, match="logprob"):
        parse_labelled({"answer": "B.", "label": "supported", "logprobs": {"content": "x"}})
    append(tmp_path, "acme", item)
    append(tmp_path, "acme", row)
    append(tmp_path, "acme", sure)
    stored = read_labelled(feedback_path(tmp_path, "acme"))
    assert [s.label_hallucinated for s in stored] == [1, 0, 0] and stored[0].id.startswith("fb-")
    assert stored[2].logprobs == sure.logprobs


def test_feature_sets_without_token_features() -> None:
    sets = without_token_features(FEATURE_SETS)
    assert set(sets) == {"all", "legacy", "compact"}  # compact_tok is compact without them
    assert all(not set(names) & set(TOKEN_FEATURES) for names in sets.values())
    assert sets["compact"] == FEATURE_SETS["compact"]
    assert set(FEATURE_SETS["all"]) - set(sets["all"]) == set(TOKEN_FEATURES)


def test_version_one_signals_read_as_no_alignment() -> None:
    """Signals cached before the token fields (15 per claim) give the neutral alignment."""
    row = [0.9] * (len(CLAIM_FIELDS) - 5)  # neither the token nor the logprob fields
    old = {"claims": [row], "trust": 0.9, "lex_answer": 0.5, "lex_answer_alone": 0.5,
           "n_passages": 1, "answer_words": 5}  # fmt: skip
    f = features_from_signals(old)
    assert f["min_tok_mean"] == 1.0 and f["min_tok_min"] == 1.0 and f["max_tok_low"] == 0.0
    assert math.isnan(f["min_lp_min"])  # no logprobs: the adapter reads its fitted mean
    new = features_from_signals({**old, "claims": [[*row, 0.7, 0.2, 0.5]]})
    assert new["min_tok_mean"] == 0.7 and new["min_tok_min"] == 0.2 and new["max_tok_low"] == 0.5


def test_fit_output_says_what_token_features_cost(tmp_path: Path, embedder: Any) -> None:
    from groundproxy.policies.schema import local_policy
    from groundproxy.proxy.cli.adapt_command import index_stores_token_states, token_cost_note
    from groundproxy.retrieval.ingest import ingest_texts

    doc = [("faq", "Refunds take 14 days. The desk opens at 9 am on weekdays.")]
    ingest_texts(tmp_path, "new", doc, embedder)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GROUNDPROXY_TOKEN_STATES", "0")
        ingest_texts(tmp_path, "old", doc, embedder)
    stored = {
        name: index_stores_token_states(tmp_path, local_policy(name, retrieval={"index": name}))
        for name in ("new", "old")
    }
    assert stored == {"new": True, "old": False}
    assert index_stores_token_states(tmp_path, local_policy("x")) is None  # no index
    nothing_here = local_policy("x", retrieval={"index": "never-ingested"})
    assert index_stores_token_states(tmp_path, nothing_here) is None

    fine = token_cost_note(FEATURE_SETS["compact_tok"], True)
    assert fine is not None and "no extra model pass" in fine and "bench.signal_cost" in fine
    assert "min_tok_mean" in fine and "lex_answer" not in fine
    slow = token_cost_note(FEATURE_SETS["compact_tok"], False)
    assert slow is not None and "embedded once more" in slow and "--no-token-features" in slow
    assert "delete and ingest" in slow
    assert token_cost_note(FEATURE_SETS["compact"], False) is None
