"""The verifier ladder (fast rung → strong rung on the claims it is unsure of) against the
fast rung alone, through the served path's stages, on seeded held-out TRAIN rows.

``extract``: each row's answer goes through stage 1 once with the fast verifier (claims, the
row's context as request evidence, windows, value rules); every pair it scores is scored by
the strong verifier too (:class:`bench.verifier_pair.Recorder`), both timed. What stage 1
found and the strong rung's probabilities are pickled per file under ``--work`` (resumable).

``table``: for each (``min_uncertainty``, ``max_share``) of the grid, the ladder's own
stage (:func:`groundproxy.guards.verdict.stages.climb`, the code the guard runs, with the strong
rung's recorded probabilities replayed and no time limit) puts the strong rung's
probabilities in place of the fast ones for the claims it picks; the default policy then
decides (every-claim). Balanced accuracy per file and mean, the share of claims the strong
rung scored, and the strong rung's ms per answer — beside the fast rung alone, the strong
rung on every claim and lexical.

    python -m bench.ladder --rows 40 --work DIR [--fast embedhead] [--strong crossencoder]
        [--only FILE …] [--table-only] [--out FILE] [--data ../shared/data]

``--split train`` only (the rows neither shipped model trained on,
:func:`bench.verifier_pair.pool`): margins and shares are chosen here, never on eval/.
"""

from __future__ import annotations

import argparse
import dataclasses
import pickle
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bench.verifier_pair as pair_bench
from bench.accuracy import lexical_scores
from bench.verifier_pair import Recorder, as_b, pool
from groundproxy.guards.pipeline import evidence_fn
from groundproxy.guards.types import Pair, Probs
from groundproxy.guards.verdict.decide import contradiction_bar, model_threshold
from groundproxy.guards.verdict.ladder import Rungs
from groundproxy.guards.verdict.lexical import LexicalVerifier
from groundproxy.guards.verdict.stages import Verified, claim_pairs, climb, decide, verify
from groundproxy.models.scoring import balanced_accuracy
from groundproxy.policies.schema import LadderPolicy, Policy
from groundproxy.proxy.offline import eval_policy
from groundproxy.proxy.serving.guarding import build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.feedback import parse_labelled

SPLIT = "train"
GRID_UNCERTAINTY = (0.3, 0.5, 0.6, 0.7, 0.8, 0.9)
GRID_SHARE = (0.25, 0.5, 1.0)


def _stripped(v: Verified) -> Verified:
    """``v`` without the evidence's stored vectors (not picklable, not needed to decide)."""
    claims = [
        dataclasses.replace(
            s, evidence=[dataclasses.replace(e, sentences=None) for e in s.evidence]
        )
        for s in v.claims
    ]
    return dataclasses.replace(v, claims=claims, ranker=None)


def extract(n: int, work: Path, names: tuple[str, str], only: list[str]) -> None:
    policy = eval_policy("default", "context")
    files = sorted((pair_bench.DATA / SPLIT).glob("*.jsonl"), key=lambda p: p.stat().st_size)
    with build_guard(Settings(batch_window_ms=0)) as guard:
        a, b = guard.verifier(names[0]), guard.verifier(names[1])
        for path in [p for p in files if not only or p.stem in only]:
            where = work / f"{path.stem}.pkl"
            done: list[dict[str, Any]] = pickle.loads(where.read_bytes()) if where.exists() else []
            for r in pool(path, SPLIT, n)[len(done) :]:
                item = parse_labelled(r)
                rec = Recorder(a, b)
                context = [("context", c) for c in item.context]
                evidence = evidence_fn(context, policy, guard.parts.embedder, None, item.question)
                v = verify(item.answer, question=item.question, policy=policy, verifier=rec,
                           evidence_for=evidence)  # fmt: skip
                done.append({"id": r.get("id"), "label": int(r["label_hallucinated"]),
                             "verified": _stripped(v), "b_probs": rec.b_probs,
                             "ms": rec.ms, "pairs": len(rec.b_probs)})  # fmt: skip
                where.write_bytes(pickle.dumps(done))
            print(f"{path.stem}: {len(done)} rows", flush=True)


def _zero(results: list[Any]) -> int:
    return int(any(r.verdict != "supported" for r in results))


class Replay:
    """The strong verifier, replayed: the probabilities it gave each (claim, evidence) pair
    at extraction (so the grid costs no model run)."""

    def __init__(self, v: Verified, b_probs: list[Probs], bars: tuple[float | None, float]) -> None:
        self.name = "replay"
        self.threshold, self.contradiction_min = bars
        pairs = [
            p for s in v.claims for _, p in claim_pairs(s.claim, s.evidence, s.rule, v.question)
        ]
        if len(pairs) != len(b_probs):
            raise RuntimeError(f"{len(pairs)} pairs, {len(b_probs)} recorded")
        self.known = {(p.claim, p.evidence): b for p, b in zip(pairs, b_probs, strict=True)}

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        return [self.known[(p.claim, p.evidence)] for p in pairs]


def ladder_policy(cut: float, share: float) -> Policy:
    base = eval_policy("default", "context")
    ladder = {"strong": "replay", "min_uncertainty": cut, "max_share": share, "budget_ms": 600_000}
    verifier = base.verifier.model_copy(update={"ladder": LadderPolicy(**ladder)})
    return base.model_copy(update={"verifier": verifier})


def ladder_row(
    row: dict[str, Any], bars: tuple[float | None, float], policy: Policy
) -> tuple[int, int, float]:
    """(prediction, claims the strong rung scored, its ms) of the ladder on one row, through
    the guard's own ladder stage (:func:`groundproxy.guards.verdict.stages.climb`)."""
    v: Verified = row["verified"]
    strong = Replay(v, row["b_probs"], bars)
    laddered = climb(v, policy, Rungs(strong, strong))
    picked = [s for s in laddered.claims if s.strong is not None]
    pairs = sum(len(s.evidence) + (s.correction_probs is not None) for s in picked)
    ms = row["ms"][1] * pairs / max(1, row["pairs"])
    return _zero(decide(laddered, policy)), len(picked), ms


def table(work: Path, names: tuple[str, str], strong_bars: tuple[float | None, float]) -> str:
    policy = eval_policy("default", "context")
    grid = [(c, s) for c in GRID_UNCERTAINTY for s in GRID_SHARE]
    cols = ["fast", "strong", "lexical", *(f"u{c}/s{s}" for c, s in grid)]
    accs: dict[str, list[float]] = {c: [] for c in cols}
    shares: dict[str, list[float]] = {c: [] for c in cols}
    ms: dict[str, list[float]] = {c: [] for c in cols}
    lines = [f"{'file':24} {'rows':>4} " + " ".join(f"{c:>11}" for c in cols)]
    for where in sorted(work.glob("*.pkl")):
        rows = pickle.loads(where.read_bytes())
        y = [r["label"] for r in rows]
        if len(set(y)) < 2:
            continue
        src = {
            r["id"]: r for r in pool(pair_bench.DATA / SPLIT / f"{where.stem}.jsonl", SPLIT, 10**9)
        }
        lex, _ = lexical_scores([src[r["id"]] for r in rows], LexicalVerifier())
        n_claims = max(1, sum(len(r["verified"].claims) for r in rows))
        preds: dict[str, list[int]] = {
            "fast": [_zero(decide(r["verified"], policy)) for r in rows],
            "strong": [
                _zero(decide(as_b(r["verified"], r["b_probs"], *strong_bars), policy)) for r in rows
            ],
            "lexical": [int(p < 0.5) for p in lex],
        }
        shares["strong"].append(1.0)
        for cut, share in grid:
            out = [ladder_row(r, strong_bars, ladder_policy(cut, share)) for r in rows]
            key = f"u{cut}/s{share}"
            preds[key] = [p for p, _, _ in out]
            shares[key].append(sum(k for _, k, _ in out) / n_claims)
            ms[key].append(statistics.mean(m for _, _, m in out))
        row = []
        for c in cols:
            acc = balanced_accuracy(y, preds[c])
            accs[c].append(acc)
            row.append(f"{acc:>11.3f}")
        lines.append(f"{where.stem:24} {len(rows):>4} " + " ".join(row))
    if accs["fast"]:
        lines.append(
            f"{'MEAN':24} {'':>4} " + " ".join(f"{statistics.mean(accs[c]):>11.3f}" for c in cols)
        )
        lines.append(
            f"{'share of claims':24} {'':>4} "
            + " ".join(f"{statistics.mean(shares[c]) if shares[c] else 0.0:>11.3f}" for c in cols)
        )
        lines.append(
            f"{'strong ms/answer':24} {'':>4} "
            + " ".join(f"{statistics.mean(ms[c]) if ms[c] else 0.0:>11.1f}" for c in cols)
        )
        wins = []
        for cut, share in grid:
            key = f"u{cut}/s{share}"
            pairs = list(zip(accs[key], accs["fast"], strict=True))
            better, worse = sum(a > b for a, b in pairs), sum(a < b for a, b in pairs)
            wins.append(f"{key}: better on {better}, worse on {worse}")
        lines.append("vs fast alone, files: " + "; ".join(wins))
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=40)
    ap.add_argument("--data", type=Path, default=pair_bench.DATA, help="../shared/data")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--fast", default="embedhead")
    ap.add_argument("--strong", default="crossencoder")
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    names = (args.fast, args.strong)
    pair_bench.DATA = args.data
    args.work.mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        extract(args.rows, args.work, names, args.only)
    with build_guard(Settings(batch_window_ms=0)) as guard:
        b = guard.verifier(args.strong)
        bars = (model_threshold(b), contradiction_bar(b))
    text = table(args.work, names, bars)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
