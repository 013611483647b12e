"""Two verifiers side by side through the served path, on the same (claim, evidence) pairs.

For each row: the answer goes through stage 1 of the guard (claims, the row's context as
request evidence, retrieval windows, value rules, verdict logic) once, with verifier A; every
pair A scores is scored by B too, and timed for each. Then each model's probabilities are put
in the claims' place and decided by the default policy (every-claim decision) with that
model's own threshold and contradiction bar: balanced accuracy per file, verifier ms per
claim, and the lexical baseline (seed 001, row level) beside.

``--split train``: only rows whose context is in the 15 % held out from training
(``training.prepare.in_validation``; the WiCE / FEVER rows whose claim was trained on
with other evidence left out) — rows neither shipped model trained on, the data to choose
on. ``--split eval``: seeded rows of ../shared/data/eval, to report only.

    python -m bench.verifier_pair --split train --rows 50 --work DIR [--a embedhead]
        [--b crossencoder] [--only FILE …] [--missing-support X]

Rows are pickled per file under ``--work`` (resumable); ``--table-only`` re-prints the
table from them.
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.accuracy import lexical_scores
from groundproxy.guards.pipeline import evidence_fn
from groundproxy.guards.types import Embedder, Pair, Probs, Verifier
from groundproxy.guards.verdict.decide import contradiction_bar, model_threshold
from groundproxy.guards.verdict.ladder import select
from groundproxy.guards.verdict.lexical import LexicalVerifier
from groundproxy.guards.verdict.stages import Verified, decide, verify
from groundproxy.models.scoring import balanced_accuracy
from groundproxy.policies.schema import Policy
from groundproxy.proxy.offline import eval_policy
from groundproxy.proxy.serving.guarding import build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.feedback import parse_labelled

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SHARED_CLAIMS = ("wice-oracle", "wice-article", "fever-nli", "fever-symmetric")
SEED = 1234


def pool(path: Path, split: str, n: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    if split == "train":
        from training.prepare import in_validation, training_rows

        seen = {str(r.get("response") or "") for r in training_rows(rows, path.stem, cap=10**9)}
        rows = [
            r
            for r in rows
            if in_validation(str(r.get("context") or ""))
            and (path.stem not in SHARED_CLAIMS or str(r.get("response") or "") not in seen)
        ]
    random.Random(SEED).shuffle(rows)
    return rows[:n]


class Recorder:
    """Verifier A for the guard; every batch it scores is scored by B too, both timed."""

    def __init__(self, a: Verifier, b: Verifier) -> None:
        self.a, self.b = a, b
        self.name = a.name
        self.contradiction_min = contradiction_bar(a)
        self.threshold = model_threshold(a)
        self.b_probs: list[Probs] = []
        self.ms = [0.0, 0.0]

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        t = time.perf_counter()
        out = self.a.score(pairs)
        self.ms[0] += 1000 * (time.perf_counter() - t)
        t = time.perf_counter()
        self.b_probs.extend(self.b.score(pairs))
        self.ms[1] += 1000 * (time.perf_counter() - t)
        return out


def as_b(v: Verified, b_probs: list[Probs], tau: float | None, bar: float) -> Verified:
    """``v`` with B's probabilities in A's place (the order A scored them: each claim's
    passages, then its correction pair if any) and B's threshold and bar."""
    k, claims = 0, []
    for s in v.claims:
        n = len(s.evidence)
        probs, k = b_probs[k : k + n], k + n
        corr = None
        if s.correction_probs is not None:
            corr, k = b_probs[k], k + 1
        claims.append(replace(s, probs=probs, correction_probs=corr))
    if k != len(b_probs):
        raise RuntimeError(f"scored {len(b_probs)} pairs, placed {k}")
    return replace(v, claims=claims, model_threshold=tau, contradiction_min=bar)


def bench_policy(missing_support: float | None) -> Policy:
    """The default policy on the request's context; ``missing_support`` replaces its
    ``rules.missing_support`` when given."""
    policy = eval_policy("default", "context")
    if missing_support is None:
        return policy
    rules = policy.rules.model_copy(update={"missing_support": missing_support})
    return policy.model_copy(update={"rules": rules})


def stage_one(embedder: Embedder, row: dict[str, Any], policy: Policy, rec: Recorder) -> Verified:
    """Stage 1 of the guard on a labelled row: its answer's claims against its context as
    request evidence, scored by ``rec`` (A, with B recorded on the same pairs)."""
    item = parse_labelled(row)
    evidence = evidence_fn(
        [("context", c) for c in item.context], policy, embedder, None, item.question
    )
    return verify(item.answer, question=item.question, policy=policy, verifier=rec,
                  evidence_for=evidence)  # fmt: skip


def extract(
    split: str, n: int, work: Path, names: tuple[str, str], only: list[str], policy: Policy
) -> None:
    files = sorted((DATA / split).glob("*.jsonl"), key=lambda p: p.stat().st_size)
    with build_guard(Settings(batch_window_ms=0)) as guard:
        a, b = guard.verifier(names[0]), guard.verifier(names[1])
        tau_b, bar_b = model_threshold(b), contradiction_bar(b)
        for path in [p for p in files if not only or p.stem in only]:
            where = work / f"{path.stem}.pkl"
            done: list[dict[str, Any]] = pickle.loads(where.read_bytes()) if where.exists() else []
            for r in pool(path, split, n)[len(done) :]:
                rec = Recorder(a, b)
                v = stage_one(guard.parts.embedder, r, policy, rec)
                res = [decide(v, policy), decide(as_b(v, rec.b_probs, tau_b, bar_b), policy)]
                zero = [_zero(res[0]), _zero(res[1])]
                per_claim = [[(c.verdict, c.uncertainty) for c in rs] for rs in res]
                done.append({"id": r.get("id"), "label": int(r["label_hallucinated"]),
                             "zero": zero, "claims": len(v.claims), "ms": rec.ms,
                             "per_claim": per_claim})  # fmt: skip
                where.write_bytes(pickle.dumps(done))
            print(f"{path.stem}: {len(done)} rows", flush=True)


def _zero(results: list[Any]) -> int:
    return int(any(r.verdict != "supported" for r in results))


@dataclass(frozen=True)
class Verdict:
    """One claim's cached verdict and uncertainty under a verifier."""

    verdict: str
    uncertainty: float


def ladder(row: dict[str, Any], share: float, margin: float) -> tuple[int, int, float]:
    """The ladder on one answer, from its per-claim verdicts under A and B: the claims A is
    unsure of (uncertainty ≥ ``margin``, most unsure first, at most ``share`` of the
    answer's claims, at least one when any qualifies) take B's verdict.

    Returns (hallucinated?, claims escalated, the answer's uncertainty after the ladder: the
    weakest supported claim's when every claim is supported, else the surest rejecting
    claim's — the served rule)."""
    a, b = row["per_claim"]
    if not a:
        return 0, 0, 0.0
    # the served selection (guards.verdict.ladder.select); every cached claim counts as eligible: a
    # value rule's mismatch has uncertainty 0 and never reaches a margin above it
    unsure = [Verdict(v, u) for v, u in a]
    picked = set(select(unsure, [True] * len(a), margin, share)[0])
    final = [b[i] if i in picked else a[i] for i in range(len(a))]
    rejecting = [u for v, u in final if v != "supported"]
    risk = min(rejecting) if rejecting else max(u for _, u in final)
    return int(bool(rejecting)), len(picked), risk


def ladder_table(split: str, work: Path, share: float, margin: float) -> str:
    """Balanced accuracy of A alone, the ladder (A, then B on A's unsure claims) and B on
    every claim; the share of claims escalated; the ROC-AUC with which each answer's
    uncertainty ranks A's and the ladder's own errors."""
    lines = [
        f"ladder: B on claims with A's uncertainty >= {margin}, at most {share:.0%} of an answer's",
        f"{'file':24} {'rows':>4} {'A':>7} {'ladder':>7} {'B':>7} {'escal.':>7} "
        f"{'AUROC A':>8} {'AUROC L':>8}",
    ]
    cols: list[list[float]] = [[], [], [], [], [], []]
    for where in sorted(work.glob("*.pkl")):
        rows = [r for r in pickle.loads(where.read_bytes()) if "per_claim" in r]
        y = [r["label"] for r in rows]
        if len(set(y)) < 2:
            continue
        lad = [ladder(r, share, margin) for r in rows]
        a_risk = [ladder(r, 0.0, 2.0)[2] for r in rows]
        acc = [
            balanced_accuracy(y, [r["zero"][0] for r in rows]),
            balanced_accuracy(y, [h for h, _, _ in lad]),
            balanced_accuracy(y, [r["zero"][1] for r in rows]),
        ]
        esc = sum(n for _, n, _ in lad) / max(1, sum(r["claims"] for r in rows))
        err_a = [int(r["zero"][0] != t) for r, t in zip(rows, y, strict=True)]
        err_l = [int(h != t) for (h, _, _), t in zip(lad, y, strict=True)]
        auc = [_auc(err_a, a_risk), _auc(err_l, [k for _, _, k in lad])]
        for c, v in zip(cols, [*acc, esc, *auc], strict=True):
            c.append(v)
        lines.append(
            f"{where.stem:24} {len(rows):>4} {acc[0]:>7.3f} {acc[1]:>7.3f} {acc[2]:>7.3f} "
            f"{esc:>7.1%} {auc[0]:>8.3f} {auc[1]:>8.3f}"
        )
    if cols[0]:
        m = [statistics.mean(c) for c in cols]
        lines.append(
            f"{'MEAN':24} {'':>4} {m[0]:>7.3f} {m[1]:>7.3f} {m[2]:>7.3f} {m[3]:>7.1%} "
            f"{m[4]:>8.3f} {m[5]:>8.3f}"
        )
    return "\n".join(lines) + "\n"


def _auc(errors: list[int], risk: list[float]) -> float:
    """ROC-AUC of ``risk`` for ``errors`` (nan when all or none are errors)."""
    if len(set(errors)) < 2:
        return float("nan")
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(errors, risk))


def table(split: str, work: Path, names: tuple[str, str]) -> str:
    head = f"{'file':24} {'rows':>4} {names[0]:>12} {names[1]:>12} {'lexical':>8} "
    lines = [head + f"{'ms/claim A':>10} {'ms/claim B':>10}"]
    means: list[list[float]] = [[], [], []]
    for where in sorted(work.glob("*.pkl")):
        rows = pickle.loads(where.read_bytes())
        y = [r["label"] for r in rows]
        if len(set(y)) < 2:
            continue
        src = {r["id"]: r for r in pool(DATA / split / f"{where.stem}.jsonl", split, 10**9)}
        lex, _ = lexical_scores([src[r["id"]] for r in rows], LexicalVerifier())
        accs = [balanced_accuracy(y, [r["zero"][i] for r in rows]) for i in (0, 1)]
        accs.append(balanced_accuracy(y, [int(p < 0.5) for p in lex]))
        claims = max(1, sum(r["claims"] for r in rows))
        ms = [sum(r["ms"][i] for r in rows) / claims for i in (0, 1)]
        for m, v in zip(means, accs, strict=True):
            m.append(v)
        lines.append(
            f"{where.stem:24} {len(rows):>4} {accs[0]:>12.3f} {accs[1]:>12.3f} {accs[2]:>8.3f} "
            f"{ms[0]:>10.1f} {ms[1]:>10.1f}"
        )
    if means[0]:
        m = [statistics.mean(v) for v in means]
        lines.append(f"{'MEAN':24} {'':>4} {m[0]:>12.3f} {m[1]:>12.3f} {m[2]:>8.3f}")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--split", choices=("train", "eval"), default="train")
    ap.add_argument("--rows", type=int, default=50)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--a", default="embedhead")
    ap.add_argument("--b", default="crossencoder")
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--missing-support",
        type=float,
        default=None,
        help="the policy's rules.missing_support (default: the shipped default policy's)",
    )
    ap.add_argument(
        "--ladder",
        nargs="+",
        type=float,
        metavar="SHARE MARGIN",
        default=None,
        help="also simulate the ladder: B on A's unsure claims (uncertainty >= MARGIN), "
        "at most SHARE of each answer's claims (rounded up); several MARGINs: one table each",
    )
    args = ap.parse_args()
    names = (args.a, args.b)
    args.work.mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        policy = bench_policy(args.missing_support)
        extract(args.split, args.rows, args.work, names, args.only, policy)
    text = table(args.split, args.work, names)
    if args.ladder:
        for margin in args.ladder[1:]:
            text += "\n" + ladder_table(args.split, args.work, args.ladder[0], margin)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
