"""Token-level alignment (models.token_alignment) and the embedder's token states."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from groundproxy.models.token_alignment import (
    NO_EVIDENCE,
    NOTHING_TO_ALIGN,
    TokenEmbedder,
    alignments,
    claim_alignment,
)
from groundproxy.retrieval.onnx_embedder import OnnxEmbedder
from groundproxy.retrieval.token_states import TokenStateLRU, TokenStates


def _states(tokens: list[str], basis: dict[str, int], dim: int = 8) -> TokenStates:
    eye = np.eye(dim, dtype=np.float16)
    return TokenStates(tuple(tokens), np.stack([eye[basis[t]] for t in tokens]))


BASIS = {"paris": 0, "is": 1, "the": 2, "capital": 3, "lyon": 4, ".": 5, "france": 6}


def test_claim_alignment_reads_content_pieces_only() -> None:
    claim = _states(["paris", "is", "the", "capital", "."], BASIS)
    same = _states(["the", "capital", "is", "paris"], BASIS)
    assert claim_alignment(claim, [same.states]) == pytest.approx((1.0, 1.0, 0.0))
    other = _states(["lyon", "is", "the", "capital"], BASIS)  # "paris" has no counterpart
    mean, low_min, low_share = claim_alignment(claim, [other.states])
    assert mean == pytest.approx(0.5) and low_min == 0.0 and low_share == pytest.approx(0.5)
    # evidence spread over several sentences counts as one
    paris = _states(["paris"], BASIS).states
    assert claim_alignment(claim, [other.states, paris])[0] == pytest.approx(1.0)


def test_claim_alignment_edge_cases() -> None:
    claim = _states(["paris", "capital"], BASIS)
    assert claim_alignment(claim, []) == NO_EVIDENCE
    assert claim_alignment(claim, [np.zeros((0, 8), np.float16)]) == NO_EVIDENCE
    only_stop = _states(["is", "the", "."], BASIS)
    assert claim_alignment(only_stop, [claim.states]) == NOTHING_TO_ALIGN


def test_token_state_lru_is_bounded_by_tokens() -> None:
    lru = TokenStateLRU(max_tokens=5)
    lru.put("a", _states(["paris", "is", "the"], BASIS))
    lru.put("b", _states(["capital", "lyon"], BASIS))
    assert lru.get("a") is not None and lru.get("b") is not None
    lru.put("c", _states(["france"], BASIS))  # 6 tokens > 5: the least recent ("a") goes
    assert lru.get("a") is None and lru.get("b") is not None and lru.get("c") is not None
    lru.put("d" * 3000, _states(["paris"], BASIS))  # a long text is never kept
    assert lru.get("d" * 3000) is None
    assert lru.hits == 4 and lru.misses == 2


def test_token_states_are_kept_only_while_switched_on_and_short() -> None:
    from groundproxy.retrieval.embedder import load_embedder

    fresh = load_embedder()  # as a server loads it: nothing has read token states yet
    assert isinstance(fresh, OnnxEmbedder)
    # one shared instance per process: a guard test run before this one may have switched
    # the keeping on (GuardService.alignment does); start from a server's first state
    fresh.keep_token_states = False
    first, long_text = "A first sentence about fees.", "Chunk of a long document. " * 100
    fresh.encode([first])
    assert fresh.token_lru.get(first) is None  # no alignment in use: no states made
    (asked,) = fresh.token_states([first])  # made on demand, by one more pass
    assert asked.tokens[:2] == ("a", "first")
    assert not fresh.keep_token_states and fresh.token_lru.get(first) is None  # not kept
    fresh.keep_token_states = True  # what the guard does when a token adapter is in force
    second = "A second sentence about fees."
    fresh.encode([second, long_text])  # from now on short texts keep theirs
    assert fresh.token_lru.get(second) is not None
    assert fresh.token_lru.get(long_text) is None  # an ingest-sized chunk never does
    (long_states,) = fresh.token_states([long_text])  # still available when asked for
    assert len(long_states.tokens) == fresh.max_seq_length - 2


def test_real_minilm_token_states_and_alignment(embedder: Any) -> None:
    assert isinstance(embedder, TokenEmbedder)
    assert isinstance(embedder, OnnxEmbedder)
    text = "The warranty lasts 12 months from the date of purchase."
    embedder.keep_token_states = True  # a reader of token states: the embedder keeps them
    embedder.lru.clear()  # its sentence vector is made now, not read from the vector LRU
    embedder.token_lru.clear()
    embedder.encode([text])  # the sentence-vector pass keeps its token states
    kept = embedder.token_lru.get(text)
    assert kept is not None and kept.tokens[:3] == ("the", "warrant", "##y")
    embedder.token_lru.clear()
    (fresh,) = embedder.token_states([text])  # not kept: one more pass, same numbers
    assert fresh.tokens == kept.tokens
    np.testing.assert_allclose(fresh.states.astype(np.float32), kept.states, atol=2e-3)
    norms = np.linalg.norm(fresh.states.astype(np.float32), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-2)

    right, wrong, invented = alignments(
        embedder,
        [
            ("The warranty lasts 12 months.", [text]),
            ("The warranty lasts 48 months.", [text]),
            ("The warranty was signed by Marie Curie in Warsaw.", [text]),
        ],
        "How long is the warranty?",
    )
    assert right[1] > 0.9  # every content piece has its twin in the evidence
    assert wrong[1] < right[1] and invented[0] < right[0] and invented[2] > 0.0
