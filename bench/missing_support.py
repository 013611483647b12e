"""``rules.missing_support`` swept over cached claims: how far the verifier's support must
reach for a claim whose number or name no passage states (a *missing* value) to be supported.

For each seeded row (``bench.verifier_pair``'s pools: ``--split train`` = held-out train
contexts, the data to choose on; ``--split eval`` to report only) the answer goes once
through stage 1 of the guard (claims, the row's context as request evidence, retrieval
windows, value rules) with ``embedhead`` scoring and ``crossencoder`` scoring the same
pairs. Each claim keeps its rule outcome and both models' probabilities; the verdict is then
re-decided for every ``missing_support`` in the sweep exactly as
:func:`guards.verdict.decide.decide_claim` does (the sweep's 1.0 column reproduces the
served verdicts: checked on every run) and the answer is hallucinated when any claim is not
supported. Printed: balanced accuracy per file and the mean, per verifier alone (the ladder
through the served path: ``bench.verifier_pair --missing-support``).

    python -m bench.missing_support --split train --rows 150 --work DIR
"""

from __future__ import annotations

import argparse
import pickle
import statistics
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.verifier_pair import DATA, Recorder, bench_policy, pool, stage_one
from groundproxy.guards.types import Probs
from groundproxy.guards.verdict.decide import Bars, contradiction_bar, decide_claim, model_threshold
from groundproxy.guards.verdict.stages import ScoredClaim, decide
from groundproxy.models.scoring import balanced_accuracy
from groundproxy.proxy.serving.guarding import build_guard
from groundproxy.proxy.settings import Settings

SWEEP = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.0)
MODELS = ("embedhead", "crossencoder")


def extract(split: str, n: int, work: Path) -> dict[str, Any]:
    """Per row: file, label, the served verdicts and per claim the stage-1 record with both
    models' probabilities; the models' thresholds and contradiction bars."""
    where = work / f"claims-{split}-{n}.pkl"
    if where.exists():
        cached: dict[str, Any] = pickle.loads(where.read_bytes())
        return cached
    policy = bench_policy(1.0)
    rows: list[dict[str, Any]] = []
    with build_guard(Settings(batch_window_ms=0)) as guard:
        a, b = (guard.verifier(m) for m in MODELS)
        for path in sorted((DATA / split).glob("*.jsonl")):
            for r in pool(path, split, n):
                rec = Recorder(a, b)
                v = stage_one(guard.parts.embedder, r, policy, rec)
                served = [c.verdict for c in decide(v, policy)]
                claims = _claims(v.claims, rec.b_probs)
                label = int(r["label_hallucinated"])
                rows.append({"file": path.stem, "label": label, "claims": claims, "served": served})
            print(f"{path.stem}: done", flush=True)
        taus = {m: model_threshold(guard.verifier(m)) for m in MODELS}
        bars = {m: contradiction_bar(guard.verifier(m)) for m in MODELS}
    out = {"rows": rows, "taus": taus, "bars": bars}
    where.write_bytes(pickle.dumps(out))
    return out


def _claims(claims: Sequence[ScoredClaim], b_probs: list[Probs]) -> list[dict[str, Any]]:
    k, out = 0, []
    for s in claims:
        n = len(s.evidence)
        probs = {MODELS[0]: list(s.probs), MODELS[1]: b_probs[k : k + n]}
        evidence = [replace(e, sentences=None) for e in s.evidence]  # vectors: not pickled
        out.append({"claim": s.claim, "evidence": evidence, "rule": s.rule, "probs": probs})
        k += n + (s.correction_probs is not None)
    return out


def verdicts(row: dict[str, Any], model: str, bars: Bars) -> list[str]:
    return [
        decide_claim(c["claim"], c["evidence"], c["probs"][model], c["rule"], bars).verdict
        for c in row["claims"]
    ]


def table(data: dict[str, Any], model: str) -> str:
    tau = data["taus"][model] or 0.6
    rows: list[dict[str, Any]] = data["rows"]
    lines = [f"{model} (threshold {tau}): balanced accuracy by rules.missing_support"]
    if model == MODELS[0]:  # the sweep's 1.0 reproduces what the guard served
        strict = Bars(tau, 0.9, data["bars"][model], 1.0)
        same = sum(verdicts(r, model, strict) == r["served"] for r in rows)
        lines.append(f"re-decided at 1.0 = the served verdicts on {same} of {len(rows)} rows")
    lines.append(f"{'file':24} {'rows':>4} " + " ".join(f"{s:>5}" for s in SWEEP))
    cols: list[list[float]] = [[] for _ in SWEEP]
    for f in sorted({r["file"] for r in rows}):
        mine = [r for r in rows if r["file"] == f]
        y = [r["label"] for r in mine]
        if len(set(y)) < 2:
            continue
        accs = []
        for s in SWEEP:
            bars = Bars(tau, 0.9, data["bars"][model], s)
            pred = [int(any(v != "supported" for v in verdicts(r, model, bars))) for r in mine]
            accs.append(balanced_accuracy(y, pred))
        for c, v in zip(cols, accs, strict=True):
            c.append(v)
        lines.append(f"{f:24} {len(mine):>4} " + " ".join(f"{v:>5.3f}" for v in accs))
    lines.append(f"{'MEAN':24} {'':>4} " + " ".join(f"{statistics.mean(c):>5.3f}" for c in cols))
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--split", choices=("train", "eval"), default="train")
    ap.add_argument("--rows", type=int, default=150)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    data = extract(args.split, args.rows, args.work)
    text = f"split {args.split}, {args.rows} seeded rows a file (fewer where fewer exist)\n\n"
    text += "\n".join(table(data, m) for m in MODELS)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
