"""Token-level alignment of a claim with its evidence, from the embedder's token states.

For each content word piece of the claim (not punctuation, not a stop word), its best cosine
with any word piece of the evidence the verifier reads for that claim — the candidate
sentences :func:`~groundproxy.models.evidence_text.evidence_candidates` picks from each of
the claim's passages, plus the user's question (BERTScore-style recall on the frozen
all-MiniLM-L6-v2 last layer). A claim whose words all have a close counterpart reads ~0.8-1;
an invented name or a swapped word leaves one piece far from everything (the minimum).

The claim's and the question's states come from
:meth:`~groundproxy.retrieval.onnx_embedder.OnnxEmbedder.token_states`, kept from the pass
that embedded them (the guard switches that keeping on while an adapter reading the
alignment is in force). An evidence sentence's come from the index's stored token states
(:mod:`groundproxy.retrieval.sentence_tokens`, made at ingest) where it has them, else from
the verifier's pass over the request's context sentences, else from one more pass. In the
common case this costs a few small matrix products, no model run. Measured in
``bench/signal_cost.py``.

Per claim: ``(mean, min, share below LOW)`` of the recall over its content pieces.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from groundproxy.models.evidence_text import clip_claim, evidence_candidates
from groundproxy.retrieval.token_states import TokenStates

LOW = 0.6  # a piece below this best cosine has no counterpart in the evidence
NO_EVIDENCE = (0.0, 0.0, 1.0)
NOTHING_TO_ALIGN = (1.0, 1.0, 0.0)
_PUNCT = re.compile(r"^(##)?[\W_]+$")
# Function words that need no counterpart (a shorter list than evidence_text.STOPWORDS:
# quantities such as "all", "only", "more", "one" carry the claim's meaning here).
_STOP_WORDS = (
    "a an the of to in on at by for with from as and or but is are was were be been being "
    "it its this that these those there their they he she his her him we our you your i "
    "has have had do does did not no so than then which who whom what when where how"
)
_STOP = frozenset(_STOP_WORDS.split())


@runtime_checkable
class TokenEmbedder(Protocol):
    """An embedder that also gives per-token states (the ONNX MiniLM one does)."""

    keep_token_states: bool

    def token_states(self, texts: Sequence[str]) -> list[TokenStates]: ...


@runtime_checkable
class StoredStates(Protocol):
    """Token states stored ahead of time, by exact text (an index's, from ingest)."""

    def token_states(self, texts: Sequence[str]) -> list[npt.NDArray[np.float16] | None]: ...


def claim_alignment(
    claim: TokenStates, evidence: Sequence[npt.NDArray[np.float16]]
) -> tuple[float, float, float]:
    """``(mean, min, share below LOW)`` of the claim's content pieces' best cosine with any
    row of the evidence sentences' states."""
    keep = [i for i, t in enumerate(claim.tokens) if not _PUNCT.match(t) and t not in _STOP]
    if not keep:
        return NOTHING_TO_ALIGN
    rows = [e for e in evidence if len(e)]
    if not rows:
        return NO_EVIDENCE
    ev = np.concatenate(rows).astype(np.float32)
    best = (claim.states[keep].astype(np.float32) @ ev.T).max(axis=1)
    return float(best.mean()), float(best.min()), float((best < LOW).mean())


def alignments(
    embedder: TokenEmbedder,
    claims: Sequence[tuple[str, Sequence[str]]],
    question: str | None,
    stores: Sequence[StoredStates] = (),
) -> list[tuple[float, float, float]]:
    """``(mean, min, share below LOW)`` for each ``(claim text, its passages)``: evidence
    sentences found in ``stores`` are read from there, every other text from one
    ``token_states`` call."""
    plan: list[tuple[str, list[str]]] = []
    for text, passages in claims:
        c = clip_claim(text) or "."
        cands: dict[str, None] = {}
        for p in passages:
            cands.update(dict.fromkeys(evidence_candidates(c, p)[0]))
        if question and question.strip() and cands:
            cands[question.strip()] = None
        plan.append((c, list(cands)))
    sentences = list(dict.fromkeys(t for _, cands in plan for t in cands))
    found: dict[str, npt.NDArray[np.float16]] = {}
    for store in stores:
        todo = [t for t in sentences if t not in found]
        if not todo:
            break
        found.update(
            (t, s) for t, s in zip(todo, store.token_states(todo), strict=True) if s is not None
        )
    live = list(dict.fromkeys([*(c for c, _ in plan), *(t for t in sentences if t not in found)]))
    states = dict(zip(live, embedder.token_states(live), strict=True))
    found.update((t, states[t].states) for t in live if t not in found)
    return [claim_alignment(states[c], [found[t] for t in cands]) for c, cands in plan]
