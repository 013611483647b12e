"""Where a RAG request's guard time goes, stage by stage, in one process (no HTTP).

Distinct RAG requests (bench.rag_requests: distinct answers AND distinct contexts, or a
share of passages resent) are guarded through the served path (``GuardService.verify_sync``
+ ``finish``, ``embedhead``, no verdict cache) with the default 800 ms budget as a deadline
— a request past it counts as ``unverified`` —, two ways interleaved request by request:

- ``before``: the request-context path as it was before issue 30 (every sentence window of
  the context embedded, then the verifier embedding the chosen windows' sentences again;
  :func:`legacy_gather`, a copy of the old ``gather_evidence``);
- ``now``: BM25 pre-selection, only the candidates' sentences embedded (cache first), a cap
  within the budget (guards.evidence.request_evidence).

Stages (ms per request, from ``Verified.stage_ms``): split (answer → claims, context →
windows), pre-selection, embedding (claims and context sentences), verifier, rules, rest
(total − those). The embedder's LRU is cleared before every request, as a distinct request
finds it.

    nice -n 5 .venv/bin/python -m bench.rag_stages [--n 20] [--sizes 500,2000,8000]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

import groundproxy.guards.pipeline as pipeline
from bench.rag_requests import RagRequest, rag_requests
from groundproxy.errors import GuardTimeoutError
from groundproxy.guards.evidence.context import context_evidence, select_evidence
from groundproxy.guards.types import Claim, Embedder, Evidence, EvidenceSource
from groundproxy.policies.schema import Policy, local_policy
from groundproxy.proxy.serving.guarding import GuardService, build_guard
from groundproxy.proxy.settings import Settings

BUDGET_S = 0.8
STAGES = ("split", "preselect", "embed", "verifier", "rules", "rest", "total")
NEW_GATHER = pipeline.gather_evidence


def legacy_gather(
    claims: Sequence[Claim],
    context_messages: Any,
    policy: Policy,
    embedder: Embedder | None,
    index: EvidenceSource | None,
    question: str | None = None,
) -> list[list[Evidence]]:
    """The request-context evidence of the code before issue 30 (context only, no index):
    the claims and EVERY window of the context embedded in one call, top_k by cosine."""
    if not claims or embedder is None:
        return [[] for _ in claims]
    context = pipeline.as_request_context(context_messages)
    queries = [dataclasses.replace(c, text=pipeline.search_text(c.text, question)) for c in claims]
    began = time.perf_counter()
    windows = context_evidence(context.messages)
    began = context.timed("windows", began)
    vectors = embedder.encode([q.text for q in queries] + [w.text for w in windows])
    context.timed("embed", began)
    context.stats.passages = len(windows)
    top_k, min_score = policy.retrieval.top_k, policy.retrieval.min_score
    return select_evidence(
        queries, vectors[: len(queries)], windows, vectors[len(queries) :], top_k, min_score
    )


def guard_one(guard: GuardService, req: RagRequest, policy: Policy) -> dict[str, float]:
    """One request through stage 1 + 2 within the budget: stage ms, or unverified."""
    lru = getattr(guard.parts.raw_embedder, "lru", None)
    if lru is not None:
        lru.clear()
    deadline = time.monotonic() + BUDGET_S
    context = [("system", req.messages()[0]["content"]), ("user", req.question)]
    began = time.perf_counter()
    try:
        verified = guard.verify_sync(
            req.answer, req.question, context, policy, index=None, cache=False,
            stop=lambda: time.monotonic() >= deadline, deadline=deadline,
        )  # fmt: skip
        guard.finish(verified, policy)
    except GuardTimeoutError:
        return {"unverified": 1.0, "total": (time.perf_counter() - began) * 1000.0}
    total = (time.perf_counter() - began) * 1000.0
    s = verified.stage_ms
    row = {
        "split": s.get("split", 0.0) + s.get("windows", 0.0),
        "preselect": s.get("preselect", 0.0),
        "embed": s.get("embed", 0.0),
        "verifier": s.get("verifier", 0.0),
        "rules": s.get("rules", 0.0),
        "total": total,
        "unverified": 0.0,
        "capped": float(bool(verified.context and verified.context.capped)),
    }
    row["rest"] = max(0.0, total - sum(row[k] for k in STAGES[:5]))
    if verified.context is not None:
        row["embedded"] = float(verified.context.embedded)
        row["found"] = float(verified.context.found)
    return row


def run(guard: GuardService, n: int, words: int, reuse: float, seed: int) -> dict[str, list[Any]]:
    """Case ``seed`` (1..8: its own share of the source documents)."""
    policy = local_policy("bench", verifier={"model": "embedhead"})
    warm, requests = rag_requests(
        n + 2, words, reuse=reuse, seed=seed, start=seed * 1000, shard=(seed % 8, 8)
    )
    rows: dict[str, list[dict[str, float]]] = {"before": [], "now": []}
    for req in warm:  # the popular passages, sent once (cache) — both ways alike
        for gather in (legacy_gather, NEW_GATHER):
            pipeline.gather_evidence = gather
            guard_one(guard, req, policy)
    for i, req in enumerate(requests):
        for name, gather in (("before", legacy_gather), ("now", NEW_GATHER)):
            pipeline.gather_evidence = gather
            row = guard_one(guard, req, policy)
            if i >= 2:  # warm-up excluded
                rows[name].append(row)
    pipeline.gather_evidence = NEW_GATHER
    return rows


def report(label: str, rows: dict[str, list[dict[str, float]]]) -> list[str]:
    lines = [f"\n[{label}] ms per request, p50 (unverified = past the {BUDGET_S * 1000:.0f} ms "
             "budget); load " + f"{os.getloadavg()[0]:.1f}"]  # fmt: skip
    lines.append(f"{'path':<8}" + "".join(f"{s:>10}" for s in STAGES) + f"{'unverif.':>10}"
                 f"{'capped':>8}{'embedded':>10}{'found':>7}")  # fmt: skip
    for name, rs in rows.items():
        ok = [r for r in rs if not r["unverified"]]
        cells = "".join(f"{_p50([r[s] for r in ok]):>10.1f}" for s in STAGES)
        un = sum(int(r["unverified"]) for r in rs)
        capped = sum(int(r.get("capped", 0)) for r in rs)
        emb = _p50([r.get("embedded", float("nan")) for r in ok])
        found = _p50([r.get("found", float("nan")) for r in ok])
        lines.append(f"{name:<8}{cells}{un:>7}/{len(rs):<3}{capped:>7}{emb:>10.0f}{found:>7.0f}")
    return lines


def _p50(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def stages_table(n: int, sizes: Sequence[int]) -> list[str]:
    """The before/now stage table for contexts of ``sizes`` words, and 2,000 at 80 % reuse."""
    lines: list[str] = []
    with build_guard(Settings()) as guard:
        guard.warm_up(["embedhead"])
        cases = [(w, 0.0) for w in sizes] + [(2000, 0.8)]
        for seed, (words, reuse) in enumerate(cases, 1):
            rows = run(guard, n, words, reuse, seed)
            lines += report(f"{words} words, {reuse:.0%} reuse, n={n}", rows)
            print("\n".join(lines[-4:]), flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--sizes", default="500,2000,8000")
    args = ap.parse_args()
    lines = [f"bench.rag_stages — {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores"]
    lines += stages_table(args.n, [int(w) for w in args.sizes.split(",")])
    print("\n".join(lines))


if __name__ == "__main__":
    main()
