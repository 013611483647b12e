"""Verifier backends chosen by name from the policy (``verifier.model``).

``lexical``         the TF-IDF baseline of seeds 001/004 (guards.lexical)
``embedhead``       a head on frozen all-MiniLM-L6-v2 embeddings, ONNX int8
                    (models.embedhead_verifier; trained by models/train)
``embedhead-fp32``  the same head, fp32 ONNX
``default``         the shipped default verifier; ``lexical`` until a trained model beats it
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from guards.errors import ModelLoadError
from guards.types import Verifier


def _lexical() -> Verifier:
    from guards.lexical import LexicalVerifier

    return LexicalVerifier()


def _embedhead() -> Verifier:
    from models.embedhead_verifier import EmbedHeadVerifier

    return EmbedHeadVerifier("int8")


def _embedhead_fp32() -> Verifier:
    from models.embedhead_verifier import EmbedHeadVerifier

    return EmbedHeadVerifier("fp32")


_FACTORIES: dict[str, Callable[[], Verifier]] = {
    "lexical": _lexical,
    "embedhead": _embedhead,
    "embedhead-fp32": _embedhead_fp32,
}
_ALIASES: dict[str, str] = {"default": "lexical"}


def available() -> list[str]:
    return sorted([*_FACTORIES, *_ALIASES])


class VerifierRegistry:
    """Loads each named verifier once per process; thread-safe."""

    def __init__(self) -> None:
        self._loaded: dict[str, Verifier] = {}
        self._lock = threading.Lock()

    def loaded(self) -> list[str]:
        """Names (as asked for, aliases resolved) of the verifiers loaded so far."""
        with self._lock:
            names = set(self._loaded)
        return sorted(n for n in {*names, *_ALIASES} if _ALIASES.get(n, n) in names)

    def get(self, name: str) -> Verifier:
        key = _ALIASES.get(name, name)
        with self._lock:
            if key in self._loaded:
                return self._loaded[key]
            factory = _FACTORIES.get(key)
            if factory is None:
                raise ModelLoadError(
                    f"unknown verifier '{name}'; available: {', '.join(available())}"
                )
            try:
                verifier = factory()
            except ModelLoadError:
                raise
            except Exception as exc:
                raise ModelLoadError(f"could not load verifier '{name}': {exc}") from exc
            self._loaded[key] = verifier
            return verifier
