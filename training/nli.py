"""NLI and fact-verification pairs for the cross-encoder (``../shared/data/nli``).

Only ``nli-permissive.jsonl.gz`` trains a shipped model (its sets are MIT, Apache-2.0,
BSD-3, CC BY-SA 4.0 or C-UDA licensed: see that folder's README); the restricted file is
refused here unless ``research=True`` names the result a research variant.

Rows become records shaped like :func:`training.prepare.collect_examples`'s, with
``source`` = ``nli:<set>`` so the sampler weights each set on its own (sets differ in size
and label balance: Breaking NLI is 87 % contradiction, MED has none). Three-way rows keep
their ``label3``; two-way rows (``label3`` null: DocNLI, FactCG) whose label is "not
entailed" get the set-valued target ``not_supported`` (the loss asks only that P(supported)
be low). A seeded sample of at most ``cap`` rows per set is read, and 5 % of each set's
contexts are held back (validation: no premise shared across the split).
"""

from __future__ import annotations

import gzip
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

from training.split import SEED, TARGETS, in_validation

PERMISSIVE = "nli-permissive.jsonl.gz"
RESTRICTED = "nli-restricted.jsonl.gz"
VAL_FRAC = 0.05


class RestrictedDataError(ValueError):
    """The restricted NLI file may not train a model that is not named a research variant."""


def read_rows(path: Path, research: bool = False) -> list[dict[str, Any]]:
    """Every row of one NLI file (gzip JSON lines)."""
    if path.name == RESTRICTED and not research:
        raise RestrictedDataError(
            f"{path.name} holds non-commercial or unlicensed sets: it may train only a model "
            "named as a research variant (pass --nli-research), never the default"
        )
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def target_of(row: dict[str, Any]) -> str:
    """``supported`` / ``contradicted`` / ``unverifiable``, or ``not_supported`` for a
    two-way row labelled not entailed."""
    label3 = row.get("label3")
    if label3 in ("supported", "contradicted", "unverifiable"):
        return str(label3)
    return "not_supported" if int(row["label_hallucinated"]) else "supported"


def by_set(rows: list[dict[str, Any]], cap: int) -> dict[str, list[dict[str, Any]]]:
    """Rows grouped by their ``source`` set, each a seeded sample of at most ``cap``."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if str(r.get("context") or "").strip() and str(r.get("response") or "").strip():
            groups[str(r["source"])].append(r)
    out: dict[str, list[dict[str, Any]]] = {}
    for name in sorted(groups):
        got = groups[name]
        if cap > 0 and len(got) > cap:
            got = random.Random(f"{SEED}:nli:{name}").sample(got, cap)
        out[name] = got
    return out


def nli_examples(
    path: Path, cap: int = 0, research: bool = False
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """(records, (claim, evidence) pairs) of one NLI file, ``cap`` rows per set (0: all)."""
    records: list[dict[str, Any]] = []
    pairs: list[tuple[str, str]] = []
    for name, rows in by_set(read_rows(path, research), cap).items():
        three_way = all(r.get("label3") is not None for r in rows)
        for r in rows:
            context = str(r["context"])
            target = target_of(r)
            records.append(
                {
                    "source": f"nli:{name}",
                    "split": "val" if in_validation(context, VAL_FRAC) else "train",
                    "target": TARGETS[target],
                    "hallucinated": int(r["label_hallucinated"]),
                    "three_way": three_way,
                    "row": str(r.get("id")),
                    "kind": "nli",
                }
            )
            pairs.append((str(r["response"]), context))
    return records, pairs


def mixed_weights(sources: list[str], base: Any, nli_share: float) -> Any:
    """Rescale per-row sampling weights so ``nli:*`` rows hold ``nli_share`` of the mass
    (the rest stays with the fact-check rows); ``base`` sums to 1 within each group."""
    import numpy as np

    w = np.asarray(base, dtype=np.float64).copy()
    is_nli = np.array([s.startswith("nli:") for s in sources])
    if is_nli.any() and (~is_nli).any():
        w[is_nli] *= nli_share / w[is_nli].sum()
        w[~is_nli] *= (1.0 - nli_share) / w[~is_nli].sum()
    return w / w.sum()
