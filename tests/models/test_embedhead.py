"""The shipped embedhead verifier: loads, checks its checksum, and gets easy pairs right."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from groundproxy.errors import ModelLoadError
from groundproxy.guards.types import Pair
from groundproxy.models.embedhead_verifier import MODEL_DIR, EmbedHeadVerifier, load_meta
from groundproxy.models.features import N_FEATURES, featurize, split_sentences
from groundproxy.models.registry import VerifierRegistry
from groundproxy.retrieval.embedder import load_embedder

EVIDENCE = "Every robot has a warranty of 12 months."
SUPPORTED = Pair("The warranty lasts 12 months.", EVIDENCE)
CONTRADICTED = Pair("The warranty lasts 24 months.", EVIDENCE)
UNVERIFIABLE = Pair("The Eiffel Tower was painted green in 1850.", EVIDENCE)


@pytest.fixture(scope="module")
def verifier() -> EmbedHeadVerifier:
    return EmbedHeadVerifier("int8", embedder=load_embedder())


def test_shipped_files_and_size() -> None:
    meta = load_meta(MODEL_DIR)
    total = sum(p.stat().st_size for p in MODEL_DIR.iterdir() if p.is_file())
    assert total <= 30 * 1024 * 1024
    assert meta["n_features"] == N_FEATURES
    for variant in ("int8", "fp32"):
        assert (MODEL_DIR / meta["files"][variant]).is_file()
    assert 0.0 < meta["threshold"] < 1.0


def test_corrupt_model_is_a_load_error(tmp_path: Path) -> None:
    copy = tmp_path / "embedhead"
    shutil.copytree(MODEL_DIR, copy)
    meta = load_meta(copy)
    target = copy / meta["files"]["int8"]
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(ModelLoadError, match="checksum"):
        EmbedHeadVerifier("int8", embedder=load_embedder(), model_dir=copy)


def test_missing_model_dir_is_a_load_error(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError):
        EmbedHeadVerifier("int8", embedder=load_embedder(), model_dir=tmp_path / "nowhere")


def test_registry_names_it() -> None:
    from groundproxy.models.registry import available

    assert "embedhead" in available()
    assert "embedhead-fp32" in available()
    assert VerifierRegistry().get("embedhead").name == "embedhead"


def test_hand_written_pairs(verifier: EmbedHeadVerifier) -> None:
    sup, con, unv = verifier.score([SUPPORTED, CONTRADICTED, UNVERIFIABLE])
    # supported: the model says supported, above the shipped decision threshold
    assert sup.supported == max(sup.supported, sup.contradicted, sup.unverifiable)
    assert sup.supported >= verifier.threshold
    # a swapped number: contradicted is the top label, P(supported) clearly lower
    # (int8 at training time: 0.75 / 0.25 / 0.01 vs 0.39 / 0.58 / 0.03)
    assert con.contradicted == max(con.supported, con.contradicted, con.unverifiable)
    assert con.supported < sup.supported - 0.2
    assert con.supported < verifier.threshold
    # an unrelated claim: unverifiable is the top label
    assert unv.unverifiable == max(unv.supported, unv.contradicted, unv.unverifiable)
    assert unv.supported < verifier.threshold


def test_probabilities_sum_to_one_and_batch_matches_single(verifier: EmbedHeadVerifier) -> None:
    pairs = [
        SUPPORTED,
        CONTRADICTED,
        UNVERIFIABLE,
        Pair("Robots are covered for a year.", EVIDENCE + " Shipping is free in the EU."),
        Pair("Shipping costs 5 euros.", "Shipping is free in the EU.\nReturns take 30 days."),
        Pair("", "Nothing here."),
        Pair("Returns take 30 days.", ""),
    ] * 3
    batch = verifier.score(pairs)
    assert len(batch) == len(pairs)
    for p in batch:
        total = p.supported + p.contradicted + p.unverifiable
        assert abs(total - 1.0) < 1e-6
        assert min(p.supported, p.contradicted, p.unverifiable) >= 0.0
    for pair, got in zip(pairs[:7], batch[:7], strict=True):
        (single,) = verifier.score([pair])
        assert abs(single.supported - got.supported) < 1e-4
        assert abs(single.contradicted - got.contradicted) < 1e-4
    assert verifier.score([]) == []


def test_featurize_one_encode_call() -> None:
    calls: list[int] = []

    def encode(texts: object) -> np.ndarray:
        items = list(texts)  # type: ignore[call-overload]
        calls.append(len(items))
        rng = np.random.default_rng(len(items))
        v = rng.normal(size=(len(items), 384)).astype(np.float32)
        out: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
        return out

    feats = featurize([("a b c.", "x. y. z."), ("a b c.", "x. y. z.")], encode)
    assert feats.shape == (2, N_FEATURES)
    assert len(calls) == 1
    assert np.array_equal(feats[0], feats[1])


def test_sentence_splitter() -> None:
    assert split_sentences("Dr. Smith left. He won 3.5 million!\n[Human]: hi") == [
        "Dr. Smith left.",
        "He won 3.5 million!",
        "[Human]: hi",
    ]


def test_the_default_verifier_is_the_shipped_int8_head() -> None:
    registry = VerifierRegistry()
    default = registry.get("default")
    assert isinstance(default, EmbedHeadVerifier)
    assert default.name == "embedhead" and default.variant == "int8"
    assert "default" in registry.loaded()
    # its contradiction bar was fitted on train data and is what the guard applies
    from groundproxy.guards.verdict.decide import contradiction_bar

    assert 0.5 < contradiction_bar(default) < 1.0
    assert contradiction_bar(default) == load_meta(MODEL_DIR)["contradiction_min"]


def test_hand_written_claims_through_the_guard_with_the_default_verifier() -> None:
    """The three hand-written cases through run_guard (claims, evidence windows, rules,
    decision) with the default policy and verifier, the request context as evidence."""
    from groundproxy.guards.pipeline import Backends, run_guard
    from groundproxy.policies.schema import local_policy

    context = [("system", "Every robot has a warranty of 12 months. Shipping is free in the EU.")]
    policy = local_policy("handwritten", "openai/test")
    verifier = VerifierRegistry().get("default")
    verdicts = {}
    for answer in (SUPPORTED.claim, CONTRADICTED.claim, UNVERIFIABLE.claim):
        report = run_guard(
            answer,
            question=None,
            context_messages=context,
            policy=policy,
            backends=Backends(verifier, load_embedder()),
        )
        (claim,) = report.claims
        verdicts[answer] = claim.verdict
        if answer == CONTRADICTED.claim:
            assert claim.correction is not None and "12 months" in claim.correction
            assert "12 months" in report.text and "24 months" not in report.text
    assert verdicts == {
        SUPPORTED.claim: "supported",
        CONTRADICTED.claim: "contradicted",
        UNVERIFIABLE.claim: "unverifiable",
    }


OBEROI = (
    "The Oberoi family is an Indian family that is famous for its involvement in hotels, "
    "namely through The Oberoi Group. The Oberoi Group is a hotel company with its head "
    "office in Delhi. Founded in 1934, the company owns and operates more than 30 luxury "
    "hotels and two river cruise ships in five countries."
)
OBEROI_Q = "The Oberoi family is part of a hotel company that has a head office in what city?"


@pytest.mark.parametrize(
    ("answer", "verdict"), [("Delhi", "supported"), ("Mumbai", "unverifiable")]
)
def test_a_short_answer_is_searched_with_its_question(answer: str, verdict: str) -> None:
    """A one-word answer alone is close to nothing in the evidence (every window fell under
    min_score: "no evidence found" for the right answer too); searched as question + answer,
    the right sentence is found and the verifier judges the answer against it."""
    from groundproxy.guards.pipeline import Backends, run_guard
    from groundproxy.policies.schema import local_policy

    report = run_guard(
        answer,
        question=OBEROI_Q,
        context_messages=[("context", OBEROI)],
        policy=local_policy("short", "openai/test"),
        backends=Backends(VerifierRegistry().get("default"), load_embedder()),
    )
    (claim,) = report.claims
    assert claim.verdict == verdict, claim.explanation
    assert claim.citations and "head office in Delhi" in OBEROI[claim.citations[0].span[0] :]


def test_the_contradiction_bar_survives_the_proxy_wrappers() -> None:
    """The proxy scores through a per-tenant verdict cache (and, with batching on, a
    micro-batcher): the guard must still see the model's bar, not the 0.5 default."""
    from groundproxy.guards.verdict.cache import CachingVerifier, VerdictCache
    from groundproxy.guards.verdict.decide import contradiction_bar
    from groundproxy.models.batching import BatchingVerifier

    default = VerifierRegistry().get("default")
    bar = load_meta(MODEL_DIR)["contradiction_min"]
    batched = BatchingVerifier(default)
    try:
        assert contradiction_bar(CachingVerifier(default, VerdictCache(), "t")) == bar
        assert contradiction_bar(batched) == bar
        assert contradiction_bar(CachingVerifier(batched, VerdictCache(), "t")) == bar
    finally:
        batched.close()
