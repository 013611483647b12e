"""``groundproxy eval``: a verifier's answer-level metrics on a labelled JSONL file.

Rows as in ``../shared/data/README.md`` (context, query, response, label_hallucinated).
An answer is predicted hallucinated when any of its claims is not ``supported`` (or, with
``--decision learned`` or a tenant adapter, when the answer-level combiner rejects it); the
ROC-AUC uses 1 − trust as the hallucination score (the combiner's P(hallucinated) when one
decided). An answer with no claims (a question
back, a greeting) asserts nothing: the guard serves it untouched with trust 1.0, and eval
counts it as the guard serves it — not hallucinated (on the eval files 57 of 93 such
answers are labelled correct). ``--limit N`` scores N rows drawn with ``--seed`` (default
0) from the whole file, in file order — not the first N, which are often one source. The
lexical baseline (seeds 001/004) is always measured beside the chosen verifier, in the
same run.

Modes: ``context`` — the row's context is the only evidence; ``index`` — every context of
the file is ingested into one temporary tenant index and each response is checked
against what retrieval finds.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from groundproxy.errors import BadRequestError
from groundproxy.guards.types import Embedder, EvidenceSource
from groundproxy.policies.schema import Policy, local_policy
from groundproxy.proxy.serving.guarding import GuardService, build_guard
from groundproxy.proxy.settings import Settings


@dataclass(frozen=True)
class Row:
    id: str
    context: str
    query: str | None
    response: str
    label: int
    gold_doc: str | None = None  # the index document holding the answer (calibration)


T = TypeVar("T")


def read_rows(path: Path, limit: int | None = None) -> list[Row]:
    rows: list[Row] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadRequestError(f"cannot read {path}: {exc}") from exc
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            rows.append(
                Row(
                    str(d.get("id", n)),
                    d["context"] or "",
                    d.get("query"),
                    d["response"] or "",
                    int(d["label_hallucinated"]),
                    str(d["gold_doc"]) if d.get("gold_doc") else None,
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise BadRequestError(f"{path}:{n}: not a labelled row ({exc})") from exc
        if limit is not None and len(rows) >= limit:
            break
    if not rows:
        raise BadRequestError(f"{path}: no rows")
    return rows


def sample_rows(rows: Sequence[T], limit: int | None, seed: int = 0) -> list[T]:
    """``limit`` rows drawn with ``seed``, in file order; all of them without a limit."""
    if limit is None or limit >= len(rows):
        return list(rows)
    keep = sorted(random.Random(seed).sample(range(len(rows)), max(limit, 1)))
    return [rows[i] for i in keep]


def eval_policy(verifier: str, mode: str, decision: str = "every_claim") -> Policy:
    return local_policy(
        "eval",
        retrieval={"use_request_context": mode == "context"},
        verifier={"model": verifier, "decision": decision},
    )


def metrics(labels: Sequence[int], preds: Sequence[int], scores: Sequence[float]) -> dict[str, Any]:
    from sklearn.metrics import balanced_accuracy_score, f1_score, roc_auc_score

    auc = float(roc_auc_score(labels, scores)) if len(set(labels)) > 1 else math.nan
    return {
        "n": len(labels),
        "balanced_accuracy": round(float(balanced_accuracy_score(labels, preds)), 4),
        "f1_hallucinated": round(float(f1_score(labels, preds, pos_label=1, zero_division=0)), 4),
        "roc_auc": round(auc, 4),
    }


def score_rows(
    rows: Sequence[Row],
    policy: Policy,
    guard: GuardService,
    index: EvidenceSource | None,
    progress: Callable[[int], None] | None = None,
    per_row: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Each row guarded by the served path: ``index`` (index mode), else the row's context
    as the request's only evidence (context mode). ``per_row`` gets each row's id, label,
    score (1 − trust) and prediction."""
    labels, preds, scores = [], [], []
    started = time.perf_counter()
    for i, row in enumerate(rows):
        context = [("context", row.context)] if index is None else []
        report = guard.guard_sync(
            row.response, row.query, context, policy, index=index, cache=False
        )
        if report.adapter is not None:  # a tenant adapter or the learned decision decided
            hallucinated = report.adapter["decision"] == "reject"
            scores.append(float(report.adapter["p_hallucinated"]))
        else:  # no claims: served as is
            hallucinated = any(c.verdict != "supported" for c in report.claims)
            scores.append(1.0 - report.trust)
        labels.append(row.label)
        preds.append(int(hallucinated))
        if per_row is not None:
            per_row.append(
                {"id": row.id, "label": row.label, "score": scores[-1], "prediction": preds[-1]}
            )
        if progress is not None:
            progress(i)
    elapsed = time.perf_counter() - started
    out = metrics(labels, preds, scores)
    out["ms_per_example"] = round(1000.0 * elapsed / len(rows), 2)
    out["verifier"] = guard.verifier(policy.verifier.model).name
    return out


def _build_index(rows: Sequence[Row], embedder: Embedder, tmp: Path) -> EvidenceSource:
    from groundproxy.retrieval.ingest import ingest_texts
    from groundproxy.retrieval.tenant_index import TenantIndex

    seen: dict[str, str] = {}
    for row in rows:
        seen.setdefault(row.context, row.id)
    docs = [(doc_id, ctx) for ctx, doc_id in seen.items() if ctx.strip()]
    ingest_texts(tmp, "eval", docs, embedder)
    return TenantIndex.open(tmp, "eval")


@dataclass(frozen=True)
class EvalJob:
    """``groundproxy eval FILE``: its inputs. ``decision``: the policy's
    ``verifier.decision`` for the chosen verifier (the lexical baseline always decides
    "every claim"); ``out``: where ``rows.jsonl`` and the plots go."""

    path: Path
    verifier_name: str
    mode: str
    limit: int | None = None
    seed: int = 0
    out: Path | None = None
    decision: str = "every_claim"


def evaluate(
    job: EvalJob, log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)
) -> dict[str, Any]:
    """The chosen verifier and the lexical baseline on the job's rows. With ``job.out``:
    ``rows.jsonl`` (the chosen verifier's per-row results), ``roc.png`` and
    ``reliability.png`` (both verifiers) written there."""
    path, verifier_name, mode, seed = job.path, job.verifier_name, job.mode, job.seed
    rows = sample_rows(read_rows(path), job.limit, seed)
    chosen: list[dict[str, Any]] = []
    lexical: list[dict[str, Any]] = []
    with build_guard(Settings()) as guard, tempfile.TemporaryDirectory(prefix="gp-eval-") as tmp:
        verifier = guard.verifier(verifier_name)
        index = None
        if mode == "index":
            log(f"ingesting {len(rows)} contexts into a temporary index …")
            index = _build_index(rows, guard.parts.embedder, Path(tmp))
        log(f"scoring {len(rows)} rows with '{verifier.name}' ({mode} mode) …")
        with _bar(len(rows), verifier.name) as bar:
            policy = eval_policy(verifier_name, mode, job.decision)
            result = score_rows(rows, policy, guard, index, lambda _: bar.update(1), chosen)
        if guard.verifier("lexical") is verifier:
            base, lexical = dict(result), chosen
        else:
            log("scoring the lexical baseline …")
            with _bar(len(rows), "lexical") as bar:
                policy = eval_policy("lexical", mode)
                base = score_rows(rows, policy, guard, index, lambda _: bar.update(1), lexical)
    result.update(file=str(path), mode=mode, seed=seed, decision=job.decision, baseline=base)
    if job.out is not None:
        runs = {result["verifier"]: chosen, base["verifier"]: lexical}
        for written in write_outputs(job.out, path.stem, mode, runs):
            log(f"wrote {written}")
    return result


def _bar(total: int, name: str) -> Any:
    """A progress bar on stderr counting scored rows (shown even when stderr is no TTY)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=f"scoring ({name})", unit="row", file=sys.stderr)


def write_outputs(
    out: Path, dataset: str, mode: str, runs: dict[str, list[dict[str, Any]]]
) -> list[Path]:
    """``rows.jsonl`` for the first run (the chosen verifier), the plots for all of them."""
    import numpy as np

    from groundproxy.proxy.cli.plots import save_plots

    first = next(iter(runs.values()))
    out.mkdir(parents=True, exist_ok=True)
    rows_path = out / "rows.jsonl"
    rows_path.write_text("".join(json.dumps(r) + "\n" for r in first), encoding="utf-8")
    scores = {
        dataset: {
            name: ([r["label"] for r in rs], np.array([1.0 - r["score"] for r in rs]))
            for name, rs in runs.items()
        }
    }
    return [rows_path, *save_plots(scores, out, mode)]


def run_eval_command(args: argparse.Namespace) -> int:
    """``groundproxy eval``: the table on stdout (and the result as JSON with ``--json``)."""
    path, mode = args.file, args.mode
    job = EvalJob(path, args.verifier, mode, args.limit, args.seed, args.out, args.decision)
    result = evaluate(job)
    base = result["baseline"]
    print(f"{path.name} — {result['n']} rows, {mode} mode")
    print(f"{'verifier':<14}{'bal.acc':>9}{'F1(hal)':>9}{'ROC-AUC':>9}{'ms/ex':>9}")
    for r in (result, base):
        print(
            f"{r['verifier']:<14}{r['balanced_accuracy']:>9.3f}{r['f1_hallucinated']:>9.3f}"
            f"{r['roc_auc']:>9.3f}{r['ms_per_example']:>9.1f}"
        )
    if args.json:
        print(json.dumps(result))
    return 0
