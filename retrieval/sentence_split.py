"""The verifier's evidence sentence splitter (moved to :mod:`groundproxy.guards.evidence.split`,
re-exported here for ingest and older imports)."""

from groundproxy.guards.evidence.split import (
    MAX_SENTENCE_CHARS,
    evidence_sentences,
    split_sentences,
)

__all__ = ["MAX_SENTENCE_CHARS", "evidence_sentences", "split_sentences"]
