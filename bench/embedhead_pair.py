"""bench.verifier_pair with a candidate embedhead (a folder written by ``training.fit
--out DIR``) served beside the shipped one under the name ``embedhead-candidate``.

    python -m bench.embedhead_pair --candidate DIR --split train --rows 50 --work WORK \\
        [--a embedhead] [--b embedhead-candidate] [--data ../shared/data]

The candidate is the served ``EmbedHeadVerifier`` (int8 ONNX, checksums from its
meta.json, the same features and embedder) read from ``DIR`` instead of models/embedhead;
every other argument goes to :mod:`bench.verifier_pair` unchanged. Used to choose a
retrained fast rung on held-out train rows (issue 42) without replacing the shipped files.
"""

from __future__ import annotations

import sys
from pathlib import Path

CANDIDATE = "embedhead-candidate"


def register(model_dir: Path) -> None:
    """Serve the head in ``model_dir`` as :data:`CANDIDATE` in this process's registry."""
    from groundproxy.guards.types import Embedder, Verifier
    from groundproxy.models import registry
    from groundproxy.models.embedhead_verifier import EmbedHeadVerifier

    def factory(embedder: Embedder) -> Verifier:
        return EmbedHeadVerifier("int8", embedder=embedder, model_dir=model_dir)

    registry._EMBEDDING_FACTORIES[CANDIDATE] = factory


def main() -> None:
    argv = sys.argv[1:]
    if "--candidate" not in argv:
        raise SystemExit(
            "usage: python -m bench.embedhead_pair --candidate DIR [verifier_pair args]"
        )
    at = argv.index("--candidate")
    register(Path(argv[at + 1]))
    rest = argv[:at] + argv[at + 2 :]
    if "--b" not in rest:
        rest += ["--b", CANDIDATE]
    from bench import verifier_pair

    if "--data" in rest:  # a worktree's ../shared is not the checkout's
        at = rest.index("--data")
        verifier_pair.DATA = Path(rest[at + 1])
        rest = rest[:at] + rest[at + 2 :]

    sys.argv = [sys.argv[0], *rest]
    verifier_pair.main()


if __name__ == "__main__":
    main()
