"""Verifier backends chosen by name from the policy (``verifier.model``).

``lexical``         the TF-IDF baseline of seeds 001/004 (guards.verdict.lexical)
``embedhead``       a head on frozen all-MiniLM-L6-v2 embeddings, ONNX int8
                    (models.embedhead_verifier; trained by training/)
``embedhead-fp32``  the same head, fp32 ONNX
``crossencoder``    all-MiniLM-L6-v2 fine-tuned as a three-label cross-encoder on every train
                    row (GPU), ONNX int8, shipped in ``models/crossencoder/`` and run as a
                    built verifier (models.built_verifier); opt-in: more accurate than
                    ``embedhead`` on held-out train rows, ~5x its guard time per claim
                    through a real server (figures in models/crossencoder/MODEL_CARD.md)
``default``         the shipped default verifier: ``embedhead`` (it beats ``lexical`` on the
                    eval files, verifier level, and changes no more right answers under
                    rewrite; figures in models/embedhead/MODEL_CARD.md)
``<name>``          a model built by ``groundproxy models build`` into the models folder
                    (models.built_verifier; int8 ONNX; ``<name>@fp32`` for its fp32 twin)

The models folder is ``$GROUNDPROXY_MODELS_DIR``, else ``<data dir>/_models`` (a tenant
name cannot start with '_', so it never clashes with a tenant's index folder).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import structlog

from groundproxy.errors import ModelLoadError
from groundproxy.guards.types import Embedder, Verifier

log = structlog.get_logger(__name__)


def _lexical() -> Verifier:
    from groundproxy.guards.verdict.lexical import LexicalVerifier

    return LexicalVerifier()


SHIPPED_MODELS = Path(__file__).resolve().parent


def _crossencoder() -> Verifier:
    from groundproxy.models.built_verifier import BuiltVerifier

    return BuiltVerifier(SHIPPED_MODELS / "crossencoder", "int8")


def _embedhead(embedder: Embedder) -> Verifier:
    from groundproxy.models.embedhead_verifier import EmbedHeadVerifier

    return EmbedHeadVerifier("int8", embedder=embedder)


def _embedhead_fp32(embedder: Embedder) -> Verifier:
    from groundproxy.models.embedhead_verifier import EmbedHeadVerifier

    return EmbedHeadVerifier("fp32", embedder=embedder)


_FACTORIES: dict[str, Callable[[], Verifier]] = {
    "lexical": _lexical,
    "crossencoder": _crossencoder,
}
# verifiers that embed: built with the registry's embedder (VerifierRegistry._head_embedder)
_EMBEDDING_FACTORIES: dict[str, Callable[[Embedder], Verifier]] = {
    "embedhead": _embedhead,
    "embedhead-fp32": _embedhead_fp32,
}
DEFAULT_VERIFIER = "embedhead"
_ALIASES: dict[str, str] = {"default": DEFAULT_VERIFIER}
BUILTIN_NAMES = frozenset([*_FACTORIES, *_EMBEDDING_FACTORIES, *_ALIASES])
FP32_SUFFIX = "@fp32"


def models_dir_for(data_dir: Path = Path("data"), models_dir: Path | None = None) -> Path:
    """Where built models live: ``models_dir`` (``Settings.models_dir``, i.e.
    ``GROUNDPROXY_MODELS_DIR``) when given, else ``<data dir>/_models``."""
    return models_dir if models_dir is not None else data_dir / "_models"


def built_models(models_dir: Path | None = None) -> list[str]:
    """Names of the models built into ``models_dir`` (folders holding a build.json)."""
    folder = models_dir if models_dir is not None else models_dir_for()
    if not folder.is_dir():
        return []
    return sorted(
        p.name
        for p in folder.iterdir()
        if not p.name.startswith(".") and (p / "build.json").is_file()
    )


def available(models_dir: Path | None = None) -> list[str]:
    return sorted([*BUILTIN_NAMES, *built_models(models_dir)])


def _built_factory(models_dir: Path, name: str) -> Callable[[], Verifier] | None:
    base, fp32 = (name[: -len(FP32_SUFFIX)], True) if name.endswith(FP32_SUFFIX) else (name, False)
    if base not in built_models(models_dir):
        return None

    def load() -> Verifier:
        from groundproxy.models.built_verifier import BuiltVerifier

        return BuiltVerifier(models_dir / base, "fp32" if fp32 else "int8")

    return load


class VerifierRegistry:
    """Loads each named verifier once per process; thread-safe. Names that are not
    built in are looked up in ``models_dir`` (default :func:`models_dir_for`).

    ``embedder`` is the configured embedder (the server's ``GROUNDPROXY_EMBEDDER``): a
    verifier that embeds (``embedhead``) is built with it when it gives the vectors the
    model was trained on; otherwise (e.g. a test double, or the int8 MiniLM whose vectors
    differ) with the one it was trained on, loaded by name through ``load_embedder``
    (default retrieval.embedder.load_embedder, one shared instance per process).
    """

    def __init__(
        self,
        models_dir: Path | None = None,
        *,
        embedder: Embedder | None = None,
        load_embedder: Callable[[str], Embedder] | None = None,
    ) -> None:
        self.models_dir = models_dir if models_dir is not None else models_dir_for()
        self.embedder = embedder
        self._load_embedder = load_embedder
        self._loaded: dict[str, Verifier] = {}
        self._lock = threading.Lock()

    def _head_embedder(self) -> Embedder:
        """The embedder for ``embedhead``: the configured one if it fits, else MiniLM."""
        from groundproxy.models.embedhead_verifier import fits

        if self.embedder is not None and fits(self.embedder):
            return self.embedder
        if self.embedder is not None:
            log.info(
                "verifier_embedder",
                configured=self.embedder.name,
                using="minilm",
                reason="embedhead was trained on all-MiniLM-L6-v2 vectors",
            )
        if self._load_embedder is not None:
            return self._load_embedder("minilm")
        from groundproxy.retrieval.embedder import load_embedder

        return load_embedder("minilm")

    def loaded(self) -> list[str]:
        """Names (as asked for, aliases resolved) of the verifiers loaded so far."""
        with self._lock:
            names = set(self._loaded)
        return sorted(n for n in {*names, *_ALIASES} if _ALIASES.get(n, n) in names)

    def _factory(self, key: str) -> Callable[[], Verifier] | None:
        embedding = _EMBEDDING_FACTORIES.get(key)
        if embedding is None:
            return _FACTORIES.get(key) or _built_factory(self.models_dir, key)

        def build() -> Verifier:
            return embedding(self._head_embedder())

        return build

    def get(self, name: str) -> Verifier:
        key = _ALIASES.get(name, name)
        with self._lock:
            if key in self._loaded:
                return self._loaded[key]
            factory = self._factory(key)
            if factory is None:
                raise ModelLoadError(
                    f"unknown verifier '{name}'; available: "
                    f"{', '.join(available(self.models_dir))} (built models are looked up in "
                    f"{self.models_dir})"
                )
            try:
                verifier = factory()
            except ModelLoadError:
                raise
            except Exception as exc:
                raise ModelLoadError(f"could not load verifier '{name}': {exc}") from exc
            self._loaded[key] = verifier
            return verifier
