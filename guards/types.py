"""Plain data shared by the guard pipeline, and the protocols its backends satisfy."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

# the policy's action names, defined once (re-exported for the guard's modules)
from groundproxy.policies.schema import ActionName as ActionName

Verdict = Literal["supported", "contradicted", "unverifiable"]
VERDICTS: tuple[Verdict, ...] = ("supported", "contradicted", "unverifiable")
AnswerAction = Literal["none", "annotate", "flag", "rewrite", "block", "unverified"]
Rung = Literal["fast", "strong", "judge"]
RUNGS: tuple[Rung, ...] = ("fast", "strong", "judge")
ClaimAction = Literal[
    "kept", "annotated", "flagged", "corrected", "removed", "blocked", "unverified"
]
# The least P(contradicted) a model-only ``contradicted`` needs (guards.verdict.decide); a verifier
# whose bar was not fitted on data carries this one.
CONTRADICTION_MIN = 0.5


@dataclass(frozen=True)
class Claim:
    """One atomic claim; ``span`` is [start, end) into the upstream's original answer."""

    text: str
    span: tuple[int, int]


@dataclass(frozen=True)
class Evidence:
    """One evidence passage: a chunk of a tenant document or of the request's own context.

    ``span`` is [start, end) into the source document (or the request message) text.
    ``doc`` for request context is ``request:<role>#<message index>``.
    """

    text: str
    doc: str
    chunk: str
    score: float
    span: tuple[int, int]
    content_hash: str = ""
    index_version: int = 0
    source: Literal["index", "request"] = "index"
    # the stored vectors of the index's evidence sentences (None: embedded live)
    sentences: SentenceVectors | None = field(default=None, compare=False, repr=False)

    # A passage's id, spelled here only. ``ref`` names it in text the client reads
    # (explanations, the "Sources:" block): ``handbook.md#c12``. ``citation_id`` is the id
    # of the ``x-groundproxy-citations`` header (DESIGN, Contracts): ``doc:`` + ``ref`` for
    # an index document, ``ref`` alone for the request's own messages (whose doc already
    # reads ``request:<role>#<i>``).

    @property
    def ref(self) -> str:
        """``<doc>#<chunk>``."""
        return f"{self.doc}#{self.chunk}"

    @property
    def citation_id(self) -> str:
        """``doc:<doc>#<chunk>`` for index documents, ``<doc>#<chunk>`` for request context."""
        return self.ref if self.source == "request" else f"doc:{self.ref}"


@dataclass(frozen=True)
class Probs:
    """Three-label probabilities for one (evidence, claim) pair; they sum to 1."""

    supported: float
    contradicted: float
    unverifiable: float

    def uncertainty(self) -> float:
        """Normalized entropy in [0, 1] (1 = uniform, 0 = certain)."""
        h = 0.0
        for p in (self.supported, self.contradicted, self.unverifiable):
            if p > 0.0:
                h -= p * math.log(p)
        return h / math.log(3.0)

    def as_dict(self) -> dict[str, float]:
        return {
            "supported": round(self.supported, 4),
            "contradicted": round(self.contradicted, 4),
            "unverifiable": round(self.unverifiable, 4),
        }


@dataclass(frozen=True)
class Pair:
    """What a verifier scores: does ``evidence`` support ``claim`` (asked as ``question``)?"""

    claim: str
    evidence: str
    question: str | None = None
    # where the evidence's sentence vectors may already be (the index's, from ingest)
    vectors: SentenceVectors | None = field(default=None, compare=False, repr=False)


@dataclass
class ClaimResult:
    claim: Claim
    verdict: Verdict
    probs: Probs
    # how likely this verdict is wrong, in [0, 1], higher = more likely
    # (guards.verdict.uncertainty): the decision margin for a verifier without a fitted ranker
    # (1 at the threshold)
    uncertainty: float
    citations: list[Evidence] = field(default_factory=list)
    action: ClaimAction = "kept"
    correction: str | None = None
    explanation: str = ""
    # P(supported) of the correction against the evidence it came from (used for the
    # trust score of a rewritten answer, where a corrected claim counts as supported).
    correction_support: float | None = None
    # request context and tenant documents disagreed on this claim's values (who won)
    conflict: str | None = None
    # the LLM judge's word on an escalated claim (guards.judge.opinion): {verdict, quote, reason,
    # model, ms, verifier_verdict[, cached]} or {skipped: reason, model}
    judge: dict[str, Any] | None = None
    # contradicted only by a passage's wording denying it (guards.rules.framing), neither by a value
    # rule nor by the verifier nor by a judge: unsure, so a rewrite flags it (guards.action)
    by_wording: bool = False
    # contradicted by the verifier alone (no value rule, no judge's quote): a removal needs
    # corroboration, so a rewrite flags it (guards.action); the trust floor still counts it
    by_verifier: bool = False
    # contradicted by a value rule (guards.rules.check: a wrong or denied value, not only a
    # passage's wording): a judge never overturns it (guards.judge.merge)
    by_rule: bool = False
    # a value rule and the judge disagree on it (the rule's verdict kept, both said in the
    # explanation): flagged rather than rewritten, and no trust-floor block (guards.action)
    disputed: bool = False
    # which rung of the verifier ladder decided it (guards.verdict.ladder): "fast" (verifier.model),
    # "strong" (verifier.ladder.strong) or "judge"; None when no verifier scored it
    rung: Rung | None = None
    rung_verifier: str | None = None  # the deciding rung's verifier (the judge's model)
    # the ladder wanted the strong rung for it but did not run it: "budget", "share", "error"
    rung_skipped: str | None = None


@dataclass
class ContextStats:
    """What the request's own context cost one answer (guards.evidence.request_evidence)."""

    passages: int = 0  # sentence windows in the request's context
    candidates: int = 0  # distinct windows pre-selected for some claim
    verified: int = 0  # distinct windows with vectors the claims were checked against
    sentences: int = 0  # distinct sentences of the candidates
    found: int = 0  # of those, vectors from the tenant's cache or index
    embedded: int = 0  # of those, embedded for this answer
    capped: bool = False  # the cap or the budget left candidates out: top-N verified

    def add(self, other: ContextStats) -> None:
        """Count ``other`` (another piece of the same answer) in too."""
        self.passages = max(self.passages, other.passages)
        self.candidates += other.candidates
        self.verified += other.verified
        self.sentences += other.sentences
        self.found += other.found
        self.embedded += other.embedded
        self.capped = self.capped or other.capped


@dataclass
class GuardReport:
    """Everything the proxy needs to build headers, body and the rewritten text."""

    original: str
    text: str
    claims: list[ClaimResult]
    trust: float
    action: AnswerAction
    blocked: bool = False
    unverified: bool = False
    latency_ms: float = 0.0
    verifier: str = ""
    adapter: dict[str, Any] | None = None  # the tenant adapter's decision (guards.adapter.combiner)
    context: ContextStats | None = None  # what the request's context cost (None: none used)
    judge: dict[str, Any] | None = None  # the judge's figures (guards.judge.judged.JudgeSummary)
    notes: list[str] = field(default_factory=list)  # said to the client (body ``notes``)

    @property
    def reported_trust(self) -> float | None:
        """The trust as the body and headers report it (header ``n/a``, body null) when
        there is nothing to trust or distrust: a verified answer without claims (an empty
        answer, a tool call alone, a greeting), or an answer none of whose claims was
        checked (``guard: false``, the guard failed or ran past its budget: 0.00 would
        read as "checked and untrusted"); else :attr:`trust`."""
        if not self.claims and not self.unverified:
            return None
        checked = any(r.action != "unverified" for r in self.claims)
        return None if self.unverified and not checked else self.trust


@runtime_checkable
class Verifier(Protocol):
    """Scores (evidence, claim) pairs. ``name`` identifies it in caches and reports;
    ``contradiction_min`` is the P(contradicted) its pair needs for a model-only
    ``contradicted`` (:data:`CONTRADICTION_MIN` unless fitted on data; the guard reads it
    through ``guards.verdict.decide.contradiction_bar``). A wrapper forwards both
    (:class:`WrappedVerifier`)."""

    @property
    def name(self) -> str: ...

    @property
    def contradiction_min(self) -> float: ...

    def score(self, pairs: Sequence[Pair]) -> list[Probs]: ...


class WrappedVerifier:
    """Base of a verifier that wraps ``inner`` (cache, micro-batcher …): its ``name`` and
    contradiction bar are the inner verifier's, read through the protocol, so a wrapper can
    never drop them. Subclasses implement ``score``."""

    def __init__(self, inner: Verifier) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def contradiction_min(self) -> float:
        return self.inner.contradiction_min

    @property
    def error_ranker(self) -> object:
        """The inner verifier's ranker of its own errors (guards.verdict.uncertainty), or None."""
        return getattr(self.inner, "error_ranker", None)

    @property
    def threshold(self) -> float | None:
        """The inner verifier's fitted P(supported) threshold, when it has one."""
        value = getattr(self.inner, "threshold", None)
        return value if isinstance(value, float | int) else None


class Embedder(Protocol):
    """Turns texts into L2-normalized float32 vectors of size ``dim``."""

    dim: int
    name: str

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


class SentenceVectors(Protocol):
    """Unit vectors of evidence sentences embedded ahead of time (at ingest), found by their
    exact text; ``embedder`` names the model that made them."""

    @property
    def embedder(self) -> str: ...

    def lookup(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32] | None]: ...


class EvidenceSource(Protocol):
    """A tenant's document index seen from the guard: top-k evidence for each query vector."""

    def search(
        self, vectors: npt.NDArray[np.float32], top_k: int, min_score: float
    ) -> list[list[Evidence]]: ...
