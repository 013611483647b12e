"""``groundproxy calibrate``: split-conformal thresholds for a tenant (seed 003).

Rows as in ``../shared/data/README.md`` plus an optional ``gold_doc`` (the id, in the
tenant's index, of the answer's document); shuffled (``--seed``), split into a calibration
part (``--cal-fraction``) and a held-out part.

**Verifier threshold.** Each response is guarded in context mode (its row's context is the
evidence, the tenant's policy settings) at threshold 0. An answer is *accepted* when every
claim is supported; a claim is supported iff its best P(supported) ≥ the threshold and its
rules and uncertainty pass, so an answer's score is the smallest P(supported) over its claims
(−1 when a rule or the uncertainty rejects a claim whatever the threshold; 1 with no
claims), and it is accepted at threshold t iff score ≥ t. Over the truly supported answers
(label 0) of the calibration part, the split-conformal threshold guarantees

    P(a truly supported answer is accepted) ≥ 1 − alpha

(marginally, over exchangeable rows; :mod:`guards.verdict.conformal`). The held-out part gives the
coverage, its exact BetaBinomial interval and the share of hallucinated answers rejected.

**Retrieval threshold.** Each row's query (its response when it has none) retrieves the
top-k chunks; the gold chunks are those of ``gold_doc`` in the tenant's index when rows
carry it, else of the row's own context (all contexts of the file are ingested into a
temporary index). Over calibration rows whose gold chunk is retrieved, the threshold on
the best gold chunk's retrieval score guarantees P(a gold chunk in the top-k is trusted)
≥ 1 − alpha. Held out: m1 = share of queries with a trusted chunk, m2 = share of retrieved
chunks trusted; m1 < 1 − alpha: the guarantee does not hold for this retriever (a warning).

Writes the tenant's calibration (``<data>/<tenant>/calibration.json`` or Postgres), read
when its policy says ``verifier.threshold: calibrated``.
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
from typing import Any

import structlog

from groundproxy.errors import BadRequestError
from groundproxy.guards import (
    beta_binomial_interval,
    conformal_threshold,
    coverage,
    model_threshold,
    resolve_threshold,
)
from groundproxy.guards.types import Embedder, EvidenceSource
from groundproxy.policies.loader import PolicyStore
from groundproxy.policies.schema import Policy
from groundproxy.proxy.cli.evaluate import Row, eval_policy, read_rows
from groundproxy.proxy.serving.guarding import GuardService, build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.backends import EmbeddedStorage, GuardStorage, started_storage

log = structlog.get_logger(__name__)
REJECTED = -1.0  # score of an answer a rule or the uncertainty rejects at any threshold


def split_rows(rows: Sequence[Row], cal_fraction: float, seed: int) -> tuple[list[Row], list[Row]]:
    if not 0.0 < cal_fraction < 1.0:
        raise BadRequestError("--cal-fraction must be in (0, 1)", param="cal_fraction")
    order = list(rows)
    random.Random(seed).shuffle(order)
    cut = round(len(order) * cal_fraction)
    return order[:cut], order[cut:]


def answer_score(row: Row, policy: Policy, guard: GuardService) -> float:
    """The largest threshold at which the whole answer is accepted (module docstring).

    The row is guarded by the served path (the row's context as the request's only
    evidence: same evidence floor, short claims searched with the question)."""
    context = [("context", row.context)]
    report = guard.guard_sync(
        row.response, row.query, context, policy, index=None, threshold=0.0, cache=False
    )
    if not report.claims:
        return 1.0
    return min(r.probs.supported if r.verdict == "supported" else REJECTED for r in report.claims)


def _r(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else round(x, 4)


def calibrate_verifier(
    cal: Sequence[Row],
    held: Sequence[Row],
    alpha: float,
    score: Callable[[Row], float],
    default_threshold: float,
) -> dict[str, Any]:
    cal_pos = [score(r) for r in cal if r.label == 0]
    held_scores = [(r.label, score(r)) for r in held]
    held_pos = [s for lab, s in held_scores if lab == 0]
    held_neg = [s for lab, s in held_scores if lab == 1]
    if not cal_pos:
        raise BadRequestError("the calibration part holds no supported (label 0) rows")
    ct = conformal_threshold(cal_pos, alpha)
    rejected = sum(1 for s in cal_pos if s <= REJECTED) / len(cal_pos)
    feasible = ct.threshold > REJECTED
    # In the pipeline the threshold is a probability: -inf (k = 0) or a rejected rank → 0.
    threshold = min(1.0, max(0.0, ct.threshold))
    lo, hi = beta_binomial_interval(len(held_pos), ct.n, ct.k)
    cov = coverage(held_pos, threshold) if feasible else coverage(held_pos, 0.0)
    return {
        "threshold": round(threshold, 6),
        "feasible": feasible,
        "n_calibration": ct.n,
        "k": ct.k,
        "guarantee": f"P(a truly supported answer is accepted) >= {1 - alpha:g}",
        "bound": {"lower": _r(ct.lower_bound), "upper_if_no_ties": _r(ct.upper_bound)},
        "calibration_rejected_by_rules": round(rejected, 4),
        "held_out": {
            "n_supported": len(held_pos),
            "n_hallucinated": len(held_neg),
            "coverage": _r(cov),
            "interval_95": [_r(lo), _r(hi)],
            "within_bound": bool(feasible and not math.isnan(cov) and cov >= lo),
            "hallucinated_rejected": _r(1.0 - coverage(held_neg, threshold)),
            "default_threshold": default_threshold,
            "coverage_at_default": _r(coverage(held_pos, default_threshold)),
            "hallucinated_rejected_at_default": _r(1.0 - coverage(held_neg, default_threshold)),
        },
    }


@dataclass(frozen=True)
class Retrieved:
    scores: list[float]
    gold: list[bool]


def _retrieve(
    rows: Sequence[Row],
    index: EvidenceSource,
    embedder: Embedder,
    top_k: int,
    gold_of: Callable[[Row], str],
) -> list[Retrieved]:
    queries = [(r.query or r.response or " ") for r in rows]
    vectors = embedder.encode(queries)
    hits = index.search(vectors, top_k, -1.0)
    return [
        Retrieved([e.score for e in h], [e.doc == gold_of(r) for e in h])
        for r, h in zip(rows, hits, strict=True)
    ]


def calibrate_retrieval(
    cal: Sequence[Retrieved], held: Sequence[Retrieved], alpha: float, top_k: int, source: str
) -> dict[str, Any]:
    gold_scores = [
        max(s for s, g in zip(r.scores, r.gold, strict=True) if g) for r in cal if any(r.gold)
    ]
    if not gold_scores:
        raise BadRequestError("no calibration query retrieved its gold document in the top-k")
    ct = conformal_threshold(gold_scores, alpha)
    t = ct.threshold
    n_held = len(held)
    trusted = [[s >= t for s in r.scores] for r in held]
    retrieved_gold = [r for r in held if any(r.gold)]
    covered = [
        any(g and s >= t for s, g in zip(r.scores, r.gold, strict=True)) for r in retrieved_gold
    ]
    n_chunks = sum(len(r.scores) for r in held)
    lo, hi = beta_binomial_interval(len(retrieved_gold), ct.n, ct.k)
    cov = sum(covered) / len(covered) if covered else math.nan
    m1 = sum(1 for tr in trusted if any(tr)) / n_held if n_held else math.nan
    return {
        "source": source,
        "top_k": top_k,
        "threshold": _r(t) if not math.isinf(t) else None,
        "n_calibration": ct.n,
        "k": ct.k,
        "guarantee": f"P(a gold chunk retrieved in the top-{top_k} is trusted) >= {1 - alpha:g}",
        "bound": {"lower": _r(ct.lower_bound), "upper_if_no_ties": _r(ct.upper_bound)},
        "held_out": {
            "n": n_held,
            "recall_at_k": _r(len(retrieved_gold) / n_held) if n_held else None,
            "coverage_given_retrieved": _r(cov),
            "interval_95": [_r(lo), _r(hi)],
            "within_bound": bool(not math.isnan(cov) and cov >= lo),
            "coverage": _r(sum(covered) / n_held) if n_held else None,
            "m1": _r(m1),
            "m2": _r(sum(sum(tr) for tr in trusted) / n_chunks) if n_chunks else None,
        },
    }


def _context_index(
    rows: Sequence[Row], embedder: Embedder, tmp: Path
) -> tuple[EvidenceSource, dict[str, str]]:
    from groundproxy.retrieval.ingest import ingest_texts
    from groundproxy.retrieval.names import sanitize_doc_id
    from groundproxy.retrieval.tenant_index import TenantIndex

    doc_of_context: dict[str, str] = {}
    for i, row in enumerate(rows):
        if row.context.strip() and row.context not in doc_of_context:
            doc_of_context[row.context] = sanitize_doc_id(f"ctx-{i}-{row.id}")
    ingest_texts(tmp, "calibrate", [(d, c) for c, d in doc_of_context.items()], embedder)
    return TenantIndex.open(tmp, "calibrate"), doc_of_context


def _tenant_policy(policies: Path | None, tenant: str, verifier: str | None) -> tuple[Policy, str]:
    """The tenant's policy settings when its file is there (the threshold is calibrated
    under the rules and uncertainty the proxy will use), else the defaults."""
    base: dict[str, Any] = {
        **eval_policy(verifier or "default", "context").model_dump(),
        "tenant": tenant,  # rows with gold_doc are searched for in the tenant's index
    }
    source = "defaults"
    if policies is not None and policies.is_dir():
        store = PolicyStore(policies)
        store.load()
        loaded = store.get(tenant)
        if loaded is not None:
            p = loaded.policy
            source = loaded.policy_id
            base.update(rules=p.rules.model_dump(), retrieval=p.retrieval.model_dump())
            v = p.verifier.model_dump()
            v["threshold"] = 0.6
            v["model"] = verifier or p.verifier.model
            base["verifier"] = v
    base["retrieval"]["use_request_context"] = True
    return Policy.model_validate(base), source


@dataclass(frozen=True)
class CalibrationJob:
    """``groundproxy calibrate --tenant T FILE --alpha A``: its inputs."""

    path: Path
    tenant: str
    alpha: float
    data: Path
    policies: Path | None = None
    verifier_name: str | None = None
    seed: int = 0
    cal_fraction: float = 0.5
    limit: int | None = None


def calibrate(
    job: CalibrationJob,
    storage: GuardStorage | None = None,
    say: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
) -> dict[str, Any]:
    """Run the calibration and write the tenant's calibration (into ``storage``, default the
    files under ``data``); returns its content."""
    from groundproxy.retrieval.names import validate_tenant

    path, tenant, alpha, data = job.path, job.tenant, job.alpha, job.data
    seed, cal_fraction = job.seed, job.cal_fraction
    storage = storage if storage is not None else EmbeddedStorage(data)
    validate_tenant(tenant)
    if not 0.0 < alpha < 1.0:
        raise BadRequestError("--alpha must be in (0, 1)", param="alpha")
    policy, policy_source = _tenant_policy(job.policies, tenant, job.verifier_name)
    rows = read_rows(path, job.limit)
    cal, held = split_rows(rows, cal_fraction, seed)
    with build_guard(Settings(data=data, batch_window_ms=0), storage=storage) as guard:
        embedder = guard.parts.embedder
        verifier = guard.verifier(policy.verifier.model)
        started = time.perf_counter()
        say(f"scoring {len(rows)} answers with '{verifier.name}' …")
        cache: dict[str, float] = {}

        def score(r: Row) -> float:
            if r.id not in cache:
                cache[r.id] = answer_score(r, policy, guard)
            return cache[r.id]

        served = resolve_threshold(policy, None, model_threshold(verifier))  # the default now
        result = calibrate_verifier(cal, held, alpha, score, served)
        top_k = policy.retrieval.top_k
        with tempfile.TemporaryDirectory(prefix="gp-calibrate-") as tmp:
            if any(r.gold_doc for r in rows):
                index: EvidenceSource = storage.indexes(embedder).get(policy.index_name)
                source = f"tenant index '{policy.index_name}' (gold_doc)"

                def gold_of(r: Row) -> str:
                    return r.gold_doc or ""
            else:
                say(f"ingesting {len({r.context for r in rows})} contexts into a temporary index …")
                index, doc_of = _context_index(rows, embedder, Path(tmp))
                source = "the rows' contexts (each row's own context is its gold document)"

                def gold_of(r: Row) -> str:
                    return doc_of.get(r.context, "")

            retrieval = calibrate_retrieval(
                _retrieve(cal, index, embedder, top_k, gold_of),
                _retrieve(held, index, embedder, top_k, gold_of),
                alpha,
                top_k,
                source,
            )
    warnings: list[str] = []
    m1 = retrieval["held_out"]["m1"]
    if m1 is not None and m1 < 1 - alpha:
        warnings.append(
            f"m1 = {m1:.3f} < 1 - alpha = {1 - alpha:g}: the retrieval guarantee does not hold "
            "for this retriever on this data (queries without any trusted chunk)"
        )
    if not result["feasible"]:
        warnings.append(
            f"{result['calibration_rejected_by_rules']:.1%} of supported calibration answers "
            "are rejected by rules or uncertainty at any threshold: coverage 1 - alpha is "
            "out of reach for this verifier; the threshold is set to 0"
        )
    content = {
        "tenant": tenant,
        "alpha": alpha,
        "threshold": result["threshold"],
        "n": result["n_calibration"],
        "verifier": verifier.name,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "file": str(path),
        "rows": len(rows),
        "seed": seed,
        "cal_fraction": cal_fraction,
        "policy": policy_source,
        "mode": "context",
        "verifier_calibration": result,
        "retrieval": retrieval,
        "warnings": warnings,
        "seconds": round(time.perf_counter() - started, 1),
    }
    out = storage.write_calibration(tenant, content)
    for w in warnings:
        log.warning("calibration_warning", tenant=tenant, warning=w)
    content["path"] = str(out)
    return content


def run_calibrate_command(args: argparse.Namespace, settings: Settings) -> int:
    """``groundproxy calibrate`` (without ``--fit``): the calibration into the storage the
    server uses (PostgreSQL when ``settings.database_url`` is set)."""
    if args.file is None:
        raise BadRequestError("calibrate needs a FILE of labelled rows (or --fit)")
    path, seed, cal_fraction = args.file, args.seed, args.cal_fraction
    alpha = 0.1 if args.alpha is None else args.alpha
    job = CalibrationJob(path, args.tenant, alpha, settings.data, settings.policies,
                         args.verifier, seed, cal_fraction, args.limit)  # fmt: skip
    with started_storage(settings.data, settings.database_url) as storage:
        c = calibrate(job, storage)
    v, r = c["verifier_calibration"], c["retrieval"]
    vh, rh = v["held_out"], r["held_out"]
    print(
        f"{path.name}: {c['rows']} rows, alpha={alpha:g}, verifier {c['verifier']}, "
        f"seed {seed}, calibration part {cal_fraction:g}"
    )
    print(
        f"verifier threshold {v['threshold']:.4f} from n={v['n_calibration']} supported "
        f"answers (k={v['k']}); {v['guarantee']}"
    )
    print(
        f"  held-out: coverage {rh_fmt(vh['coverage'])} on {vh['n_supported']} supported "
        f"answers, bound >= {v['bound']['lower']:.4f} (95% interval "
        f"{rh_fmt(vh['interval_95'][0])}-{rh_fmt(vh['interval_95'][1])}, within: "
        f"{vh['within_bound']}); hallucinated rejected {rh_fmt(vh['hallucinated_rejected'])}"
        f" (at 0.6: coverage {rh_fmt(vh['coverage_at_default'])}, rejected "
        f"{rh_fmt(vh['hallucinated_rejected_at_default'])})"
    )
    print(
        f"retrieval threshold {rh_fmt(r['threshold'])} (top-{r['top_k']}, n={r['n_calibration']}"
        f"); {r['guarantee']}"
    )
    print(
        f"  held-out: coverage|retrieved {rh_fmt(rh['coverage_given_retrieved'])} (95% interval"
        f" {rh_fmt(rh['interval_95'][0])}-{rh_fmt(rh['interval_95'][1])}), recall@k "
        f"{rh_fmt(rh['recall_at_k'])}, m1 {rh_fmt(rh['m1'])}, m2 {rh_fmt(rh['m2'])}"
    )
    for w in c["warnings"]:
        print(f"WARNING: {w}")
    print(f"wrote {c['path']}")
    if args.json:
        print(json.dumps(c))
    return 0


def rh_fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"
