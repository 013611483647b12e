"""Does a calibrated P(the verdict is wrong) rank a verifier's own errors better than the
decision margin? (issue 42 item 3; :class:`groundproxy.guards.verdict.uncertainty.Calibration`)

    python -m bench.calibration --rows 50 --eval-rows 100 --work DIR [--data ../shared/data]

Rows: the seeded pools of ``bench.verifier_pair`` — on TRAIN the rows neither shipped model
trained on (the rows ``training.calibration`` fits on), on EVAL the file's first rows of
the seeded shuffle. Each row's answer goes through stage 1 once with the fast verifier
(embedhead) and every pair it scores is scored by the strong one (crossencoder) too
(``bench.ladder``'s extraction, pickled per file under ``DIR/<split>``).

Per file, three uncertainties, each through the guard's own decision
(:func:`groundproxy.guards.verdict.stages.decide`):

- ``margin``: the decision margin (what is served without a calibration);
- ``calibrated``: P(wrong) from the verifier's Platt calibration. On TRAIN, leave one file
  out: the calibration of each file is fitted on the other files' claims; on EVAL the one
  fitted on every train claim (what ships) — eval is never used to choose;
- ``entropy``: the normalized entropy of the decided probabilities (the seed's).

for ``embedhead`` alone, ``crossencoder`` alone, and the ``ladder`` (the default policy's:
embedhead on every claim, the crossencoder on those it is unsure of, replayed through
:func:`groundproxy.guards.verdict.stages.climb`; both rungs calibrated, or neither). Answer level:
the AUROC of the answer's uncertainty (:func:`groundproxy.guards.verdict.uncertainty.answer_risk`;
entropy: its most uncertain claim's) for the zero-shot decision's errors; claim level: on
the rows whose answer is one claim, the AUROC of the claim's uncertainty for its verdict's
errors. Beside them, the expected calibration error (10 bins) of each verifier's P(supported)
before and after the calibration, over the labelled claims.

The recipes (:class:`training.calibration.Recipe`: Platt, or temperature
about the threshold in force; each class weighing the same per file or not) are compared on
TRAIN only, leave one train file out; the one with the best mean answer-level AUROC of the
ladder is reported in full, on TRAIN and then on EVAL (its calibration fitted on every
train claim). Figures: ``bench/results/calibration-train.txt``, ``calibration-eval.txt``.
On TRAIN no recipe ranks as well as the margin (the ladder: 0.625 at best vs 0.650), so no
verifier ships a calibration.
"""

from __future__ import annotations

import argparse
import dataclasses
import pickle
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sklearn.metrics import roc_auc_score

import bench.ladder as ladder_bench
import bench.verifier_pair as pair_bench
from bench.ladder import Replay, ladder_policy
from bench.text_table import table
from bench.verifier_pair import as_b
from groundproxy.guards.types import ClaimResult
from groundproxy.guards.verdict.decide import DEFAULT_THRESHOLD, contradiction_bar, model_threshold
from groundproxy.guards.verdict.ladder import Rungs
from groundproxy.guards.verdict.stages import Verified, climb, decide
from groundproxy.guards.verdict.uncertainty import Calibration, answer_risk
from groundproxy.proxy.offline import eval_policy, zero_shot_decision
from training.calibration import (
    ClaimRow,
    Recipe,
    decided,
    ece,
    fit_rows,
    labelled_claims,
)

VERIFIERS = ("embedhead", "crossencoder", "ladder")
RECIPES = (
    ("platt", False),
    ("platt", True),
    ("threshold", False),
    ("threshold", True),
)
Cals = dict[str, Calibration | None]
SCORES = ("margin", "calibrated", "entropy")
Bars = tuple[float | None, float]


@dataclasses.dataclass
class Row:
    file: str
    label: int
    fast: Verified
    strong: Verified
    b_probs: list[Any]


def load(work: Path, bars: Bars) -> list[Row]:
    rows = []
    for where in sorted(work.glob("*.pkl")):
        for r in pickle.loads(where.read_bytes()):
            v: Verified = r["verified"]
            rows.append(Row(where.stem, r["label"], v, as_b(v, r["b_probs"], *bars), r["b_probs"]))
    return rows


def claim_rows(rows: Sequence[Row], which: str) -> list[ClaimRow]:
    out: list[ClaimRow] = []
    for r in rows:
        v = r.fast if which == "embedhead" else r.strong
        claims = decided(v)
        out += labelled_claims(r.file, r.label, claims)
    return out


def _results(
    r: Row, which: str, cals: dict[str, Calibration | None], bars: Bars
) -> list[ClaimResult]:
    fast = dataclasses.replace(r.fast, ranker=cals["embedhead"])
    if which == "embedhead":
        return decide(fast, eval_policy("default", "context"))
    if which == "crossencoder":
        strong = dataclasses.replace(r.strong, ranker=cals["crossencoder"])
        return decide(strong, eval_policy("default", "context"))
    replay = Replay(r.fast, r.b_probs, bars)
    replay.error_ranker = cals["crossencoder"]  # type: ignore[attr-defined]
    policy = ladder_policy(0.7, 0.25)  # the default ladder (policies.schema.LadderPolicy)
    return decide(climb(fast, policy, Rungs(replay, replay)), policy)


def _cal(c: Calibration | None) -> Calibration:
    assert c is not None
    return c


def _auc(errors: list[int], scores: list[float]) -> float | None:
    return float(roc_auc_score(errors, scores)) if len(set(errors)) == 2 else None


def file_figures(
    rows: Sequence[Row], which: str, cals: dict[str, Calibration | None], bars: Bars
) -> dict[str, tuple[float | None, float | None]]:
    """score → (answer AUROC, claim AUROC) for one file's rows."""
    none: dict[str, Calibration | None] = {"embedhead": None, "crossencoder": None}
    plain = [_results(r, which, none, bars) for r in rows]
    calibrated = [_results(r, which, cals, bars) for r in rows]
    errors = [
        int(zero_shot_decision(len(res), any(c.verdict != "supported" for c in res)) != r.label)
        for r, res in zip(rows, plain, strict=True)
    ]
    one = [i for i, res in enumerate(plain) if len(res) == 1]
    claim_err = [int((plain[i][0].verdict == "supported") == bool(rows[i].label)) for i in one]
    pick: dict[str, Callable[[int], list[ClaimResult]]] = {
        "margin": lambda i: plain[i],
        "calibrated": lambda i: calibrated[i],
        "entropy": lambda i: plain[i],
    }
    out: dict[str, tuple[float | None, float | None]] = {}
    for score in SCORES:

        def u(i: int, score: str = score) -> list[float]:
            res = pick[score](i)
            return [c.probs.uncertainty() if score == "entropy" else c.uncertainty for c in res]

        answer = [
            max(u(i), default=0.0) if score == "entropy" else answer_risk(pick[score](i))
            for i in range(len(rows))
        ]
        out[score] = (_auc(errors, answer), _auc(claim_err, [u(i)[0] for i in one]))
    return out


def split_report(
    rows: Sequence[Row], cals_for: Callable[[str], dict[str, Calibration | None]], bars: Bars
) -> tuple[str, dict[str, dict[str, list[float]]]]:
    files = sorted({r.file for r in rows})
    means: dict[str, dict[str, list[float]]] = {
        f"{w} {lvl}": {s: [] for s in SCORES} for w in VERIFIERS for lvl in ("answer", "claim")
    }
    body = []
    for f in files:
        mine = [r for r in rows if r.file == f]
        cells = [f, str(len(mine)), str(sum(len(r.fast.claims) == 1 for r in mine))]
        for w in VERIFIERS:
            fig = file_figures(mine, w, cals_for(f), bars)
            for k, lvl in enumerate(("answer", "claim")):
                for s in SCORES:
                    v = fig[s][k]
                    cells.append("—" if v is None else f"{v:.3f}")
                    if v is not None:
                        means[f"{w} {lvl}"][s].append(v)
        body.append(cells)
    mean_cells = ["**mean**", "", ""]
    for w in VERIFIERS:
        for lvl in ("answer", "claim"):
            for s in SCORES:
                xs = means[f"{w} {lvl}"][s]
                mean_cells.append(f"{statistics.mean(xs):.3f}" if xs else "—")
    body.append(mean_cells)
    head = ["file", "rows", "1-claim"] + [
        f"{w[:5]} {lvl[0]} {s[:3]}"
        for w in VERIFIERS
        for lvl in ("answer", "claim")
        for s in SCORES
    ]
    return table(head, body), means


def ece_report(
    rows: Sequence[Row],
    cals_for: Callable[[str], dict[str, Calibration | None]],
    taus: dict[str, float],
) -> str:
    lines = []
    for w in ("embedhead", "crossencoder"):
        claims = claim_rows(rows, w)
        raw = [c.raw for c in claims]
        truth = [c.supported for c in claims]
        cal = [_cal(cals_for(c.file)[w]).p_supported(c.raw, taus[w]) for c in claims]
        lines.append(
            f"{w}: {len(claims)} labelled claims, ECE of P(supported) raw {ece(raw, truth):.4f}"
            f" → calibrated {ece(cal, truth):.4f}"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=50, help="train rows per file")
    ap.add_argument("--eval-rows", type=int, default=100)
    ap.add_argument("--data", type=Path, default=pair_bench.DATA, help="../shared/data")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    args = ap.parse_args()
    pair_bench.DATA = args.data
    names = ("embedhead", "crossencoder")
    if not args.table_only:
        for split, n in (("train", args.rows), ("eval", args.eval_rows)):
            (args.work / split).mkdir(parents=True, exist_ok=True)
            ladder_bench.SPLIT = split  # bench.ladder's extraction, on either split
            ladder_bench.extract(n, args.work / split, names, [])
    from groundproxy.proxy.offline import Settings, build_guard

    with build_guard(Settings(batch_window_ms=0)) as guard:
        verifiers = {w: guard.verifier(w) for w in names}
        taus = {w: model_threshold(v) or DEFAULT_THRESHOLD for w, v in verifiers.items()}
        bars: Bars = (taus["crossencoder"], contradiction_bar(verifiers["crossencoder"]))
    train = load(args.work / "train", bars)
    evals = load(args.work / "eval", bars)
    claims = {w: claim_rows(train, w) for w in names}
    files = sorted({r.file for r in train})

    def fitted(recipe: tuple[str, bool]) -> tuple[dict[str, Calibration], dict[str, Cals]]:
        """(every train claim's calibrations, each train file's leave-one-file-out ones)"""
        rec = {w: Recipe(recipe[0], recipe[1], taus[w]) for w in names}
        every = {w: fit_rows(claims[w], rec[w]) for w in names}
        held: dict[str, Cals] = {
            f: {w: fit_rows([c for c in claims[w] if c.file != f], rec[w]) for w in names}
            for f in files
        }
        return every, held

    # choose the recipe on TRAIN (leave one file out): the best mean answer-level AUROC of
    # the ladder's final uncertainty (what the default policy serves)
    choice_lines, best = [], None
    for recipe in RECIPES:
        _, held = fitted(recipe)
        _, means = split_report(train, held.__getitem__, bars)
        cells = {k: statistics.mean(v["calibrated"]) for k, v in means.items() if v["calibrated"]}
        margin = {k: statistics.mean(v["margin"]) for k, v in means.items() if v["margin"]}
        choice_lines += [
            f"{recipe[0]:9} balanced={recipe[1]!s:5}  "
            + "  ".join(f"{k} {cells[k]:.3f} (margin {margin[k]:.3f})" for k in cells),
            "    " + ece_report(train, held.__getitem__, taus).replace("\n", "; "),
        ]
        if best is None or cells["ladder answer"] > best[0]:
            best = (cells["ladder answer"], recipe)
    assert best is not None
    recipe = best[1]
    shipped, held = fitted(recipe)
    fit_text = ", ".join(f"{w} a={c.a:.3f} b={c.b:.3f}" for w, c in shipped.items())
    for split, rows in (("train", train), ("eval", evals)):
        n = args.rows if split == "train" else args.eval_rows

        def cals_for(f: str, split: str = split) -> Cals:
            return held[f] if split == "train" else dict(shipped)

        text, _ = split_report(rows, cals_for, bars)
        how = (
            "calibration fitted leave one train file out"
            if split == "train"
            else f"the calibration fitted on every train claim: {fit_text}"
        )
        parts = [
            f"$ python -m bench.calibration --rows {args.rows} --eval-rows {args.eval_rows} "
            "--work DIR",
            f"{split.upper()} (≤ {n} seeded rows a file; recipe {recipe[0]}, balanced="
            f"{recipe[1]}; {how}): AUROC of each uncertainty for the verifier's own errors — "
            "per verifier (embed: embedhead, cross: crossencoder, ladde: the default ladder, "
            "both rungs calibrated or neither), a: answer level, c: claim level (one-claim "
            "answers); mar: decision margin, cal: calibrated P(wrong), ent: entropy",
            "",
            text,
            "",
            ece_report(rows, cals_for, taus),
            "",
        ]
        if split == "train":
            parts += [
                "Recipes, leave one train file out (mean AUROC, calibrated vs margin); chosen:"
                " the best ladder answer-level mean",
                *choice_lines,
                "",
            ]
        out = "\n".join(parts)
        print(out)
        (args.out / f"calibration-{split}.txt").write_text(out, encoding="utf-8")


if __name__ == "__main__":
    main()
