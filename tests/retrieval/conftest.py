"""Shared fixtures of the retrieval tests: the real embedder (loaded once) and helpers."""

from __future__ import annotations

import pytest

from groundproxy.guards.types import Embedder
from groundproxy.retrieval.embedder import load_embedder
from groundproxy.testing.embedders import HASHING


@pytest.fixture(scope="session")
def minilm() -> Embedder:
    """The real all-MiniLM-L6-v2 embedder, loaded once per test session."""
    return load_embedder("minilm")


@pytest.fixture(scope="session")
def hashing() -> Embedder:
    """A fast lexical embedder for storage tests that don't need semantics."""
    return load_embedder(HASHING)
