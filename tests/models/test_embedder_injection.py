"""The configured embedder is injected into the verifiers that embed (``embedhead``): the
registry builds them with it when it gives the vectors the head was trained on, and with
the trained-on MiniLM otherwise; the verifier itself never loads a global embedder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from groundproxy.errors import ModelLoadError
from groundproxy.guards.types import Embedder, Pair
from groundproxy.models.embedhead_verifier import EmbedHeadVerifier
from groundproxy.models.registry import VerifierRegistry
from groundproxy.policies.schema import local_policy
from groundproxy.proxy.serving.guarding import build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.retrieval.embedder import MINILM_NAME, load_embedder
from groundproxy.testing.embedders import HashingEmbedder

PAIR = Pair("The warranty lasts 24 months.", "Every robot has a warranty of 12 months.")


class CountingEmbedder:
    """The real MiniLM, counting the texts it embeds."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.texts = 0

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts += len(texts)
        return self.inner.encode(texts)


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return load_embedder()


def test_the_registry_builds_embedhead_with_the_configured_embedder(minilm: Embedder) -> None:
    configured = CountingEmbedder(minilm)
    registry = VerifierRegistry(embedder=configured, load_embedder=pytest.fail)
    verifier = registry.get("embedhead")
    (probs,) = verifier.score([PAIR])
    assert configured.texts > 0  # the claim and the evidence sentences went through it
    before = configured.texts
    registry.get("embedhead-fp32").score([PAIR])
    assert configured.texts > before
    expected = EmbedHeadVerifier("int8", embedder=minilm).score([PAIR])[0]
    assert probs == expected


def test_an_embedder_with_other_vectors_is_not_given_to_embedhead(minilm: Embedder) -> None:
    asked: list[str] = []

    def load(name: str) -> Embedder:
        asked.append(name)
        return minilm

    hashing = HashingEmbedder()
    registry = VerifierRegistry(embedder=hashing, load_embedder=load)
    verifier = registry.get("embedhead")
    assert asked == ["minilm"]  # the backbone it was trained on, by name
    assert verifier.score([PAIR])[0].contradicted > 0.5
    registry.get("lexical")
    assert asked == ["minilm"]  # verifiers that do not embed need none


def test_embedhead_refuses_vectors_it_was_not_trained_on() -> None:
    with pytest.raises(ModelLoadError, match=MINILM_NAME):
        EmbedHeadVerifier("int8", embedder=HashingEmbedder())
    with pytest.raises(ModelLoadError, match="hashing-384"):
        EmbedHeadVerifier("int8", embedder=HashingEmbedder(384))


def test_the_guard_service_injects_its_embedder(tmp_path: Path, minilm: Embedder) -> None:
    """Through the served path: build_guard → registry → embedhead → the configured one."""
    configured = CountingEmbedder(minilm)
    service = build_guard(Settings(data=tmp_path, batch_window_ms=0), embedder=configured)
    try:
        assert service.parts.verifiers.embedder is configured
        report = service.guard_sync(
            "The warranty lasts 24 months.", "How long is the warranty?",
            [("system", "Every robot has a warranty of 12 months.")],
            local_policy("acme", verifier={"model": "embedhead"}),
        )  # fmt: skip
        assert report.verifier == "embedhead"
        assert report.claims[0].verdict == "contradicted"
        assert configured.texts > 0
    finally:
        service.close()
