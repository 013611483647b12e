"""Guard latency: what the guard adds to a chat completion, measured through real processes.

One run, side by side: a fake upstream that answers instantly, one `groundproxy serve`
process with two tenants on the same index of ~300 documents built from
../shared/data/eval contexts — `plain` (guard off) and `guarded` (guard on) — and direct
calls to the upstream. Every request gets a DISTINCT 5-claim answer (bench.answers: first
sentences of other indexed documents, ~30 % with a wrong value), so the verdict cache
serves nothing; a second pass repeats the same answers and gives the cache-hit figure
separately. Requests are interleaved (direct, plain, guarded) so machine noise hits all
three alike. Prints p50/p90 latency and the guard's added time, per pass.

``--verifiers a,b`` runs one guarded tenant per verifier (``verifier: {model: a}``, …) on the
same answers, interleaved with the others, so verifiers compare side by side under the same
machine load; each also gets its guard time per claim (header ÷ claims). ``a:s`` names the
ladder's strong rung too (``verifier: {model: a, ladder: {strong: s}}``): ``embedhead:none``
is the fast rung alone, ``embedhead`` the default ladder.

    .venv/bin/python -m bench.guard_latency [--n 100] [--docs 300] [--index DIR]
        [--verifiers embedhead:none,embedhead,crossencoder:none]

``--index`` copies a tenant index folder built from the same documents (e.g. bench.guard_stages
``--data D`` → ``D/bench``) instead of ingesting them again.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.answers import distinct_answers, upstream_script
from bench.needs_data import SHARED, require
from groundproxy.policies.keys import hash_key
from groundproxy.testing.processes import free_port, start_fake_upstream, start_proxy, stop_process

EVAL = SHARED / "eval"
QUESTION = "Tell me about Arthur's Magazine and First for Women."
ANSWER = (
    "Arthur's Magazine was an American literary periodical. It was published in Philadelphia. "
    "It ran from 1844 to 1846. First for Women is a woman's magazine. "
    "It is published by Bauer Media Group in the USA."
)


def _docs(n: int) -> list[tuple[str, str]]:
    require(EVAL)
    seen: dict[str, str] = {}
    for name in ("halueval-qa.jsonl", "halueval-dialogue.jsonl", "wice-oracle.jsonl"):
        for line in (EVAL / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            seen.setdefault(row["context"], row["id"])
            if len(seen) >= n:
                return [(doc_id, ctx) for ctx, doc_id in seen.items()]
    return [(doc_id, ctx) for ctx, doc_id in seen.items()]


def _pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1] if len(xs) > 1 else xs[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--index", type=Path, default=None)
    ap.add_argument("--verifiers", default="", help="one guarded tenant per verifier name")
    args = ap.parse_args()
    verifiers = [v for v in args.verifiers.split(",") if v] or [None]

    from groundproxy.retrieval.embedder import load_embedder
    from groundproxy.retrieval.ingest import ingest_texts

    work = Path(tempfile.mkdtemp(prefix="gp-bench-"))
    (work / "policies").mkdir()
    script = work / "script.json"
    docs = _docs(args.docs)
    answers = distinct_answers(docs, args.n + 5)
    script.write_text(json.dumps(upstream_script(answers, ANSWER)), encoding="utf-8")
    if args.index is not None:
        shutil.copytree(args.index, work / "data" / "shared")
        print(f"index: copied from {args.index}")
    else:
        t0 = time.perf_counter()
        res = ingest_texts(work / "data", "shared", docs, load_embedder())
        print(
            f"index: {len(docs)} documents, {res.chunks_added} chunks, "
            f"built in {time.perf_counter() - t0:.1f} s"
        )

    up_port, gp_port = free_port(), free_port()
    guarded = {_tenant(v): v for v in verifiers}
    tenants = ["plain", *guarded]
    for tenant in tenants:
        policy: dict[str, Any] = {
            "tenant": tenant,
            "keys": [hash_key(f"key-{tenant}")],
            "guard": tenant != "plain",
            "upstream": {"model": "openai/bench", "api_base": f"http://127.0.0.1:{up_port}/v1"},
            "retrieval": {
                "index": "shared",  # all use one index: all say it is shared
                "shared_with": [t for t in tenants if t != tenant],
            },
            "latency_budget_ms": 10000,
        }
        if guarded.get(tenant):
            policy["verifier"] = _verifier(guarded[tenant])
        (work / "policies" / f"{tenant}.yaml").write_text(yaml.safe_dump(policy), "utf-8")
    upstream = start_fake_upstream(up_port, script)
    proxy = start_proxy(gp_port, work / "policies", work / "data", timeout_s=600)
    passes: dict[str, Times] = {}
    try:
        with httpx.Client(timeout=30) as http:
            targets = _targets(up_port, gp_port, list(guarded))
            for name in ("distinct", "repeat (cache hits)"):
                passes[name] = _pass(http, targets, [a.question for a in answers])
    finally:
        stop_process(proxy)
        stop_process(upstream)
    for name, times in passes.items():
        _report(name, times, args.n)


Times = dict[str, list[float]]
Targets = dict[str, tuple[str, dict[str, str]]]


def _tenant(verifier: str | None) -> str:
    return "guarded" if verifier is None else f"guarded-{verifier.replace(':', '-')}"


def _verifier(spec: str) -> dict[str, Any]:
    """``model`` or ``model:strong`` → the policy's ``verifier`` block."""
    model, _, strong = spec.partition(":")
    return {"model": model, "ladder": {"strong": strong}} if strong else {"model": model}


def _targets(up_port: int, gp_port: int, guarded: list[str]) -> Targets:
    gp = f"http://127.0.0.1:{gp_port}/v1/chat/completions"
    targets = {
        "direct": (f"http://127.0.0.1:{up_port}/v1/chat/completions", {}),
        "plain": (gp, {"authorization": "Bearer key-plain"}),
    }
    for tenant in guarded:
        targets[tenant] = (gp, {"authorization": f"Bearer key-{tenant}"})
    return targets


def _pass(http: httpx.Client, targets: Targets, questions: list[str]) -> Times:
    """One request per question down every path (the first 5 rounds are warm-up). The
    guarded tenants take turns at going first: an answer a tenant guarded before warms what
    the process shares (claim vectors, index searches), so a fixed order would favour the
    later ones."""
    times: Times = {name: [] for name in targets}
    guarded = [name for name in targets if name.startswith("guarded")]
    for i, question in enumerate(questions):
        body = {"model": "bench", "messages": [{"role": "user", "content": question}]}
        turn = i % len(guarded) if guarded else 0
        order = [n for n in targets if n not in guarded] + guarded[turn:] + guarded[:turn]
        for name in order:
            url, headers = targets[name]
            t = time.perf_counter()
            r = http.post(url, json=body, headers=headers)
            dt = (time.perf_counter() - t) * 1000
            if r.status_code != 200:
                raise RuntimeError(f"{name}: {r.status_code} {r.text[:300]}")
            if i >= 5:  # warm-up excluded
                times[name].append(dt)
                if name.startswith("guarded"):
                    guard_ms = float(r.headers["x-groundproxy-latency-ms"])
                    claims = len(r.json()["groundproxy"]["claims"])
                    times.setdefault(f"{name} guard (header)", []).append(guard_ms)
                    times.setdefault(f"{name} guard/claim", []).append(guard_ms / max(1, claims))
                    times.setdefault("claims", []).append(float(claims))
    return times


def _report(name: str, times: Times, n: int) -> None:
    claims = statistics.median(times.pop("claims", [0]))
    print(f"\n[{name}] {n} requests per path, interleaved; median {claims:.0f} claims/answer")
    print(f"{'path':<34}{'p50 ms':>9}{'p90 ms':>9}")
    for path, xs in times.items():
        print(f"{path:<34}{statistics.median(xs):>9.1f}{_pct(xs, 90):>9.1f}")
    for name in [t for t in times if t.startswith("guarded") and " " not in t]:
        added = [g - p for g, p in zip(times[name], times["plain"], strict=True)]
        label = f"{name} − plain"
        print(f"{label:<34}{statistics.median(added):>9.1f}{_pct(added, 90):>9.1f}")
    proxy_cost = [p - d for p, d in zip(times["plain"], times["direct"], strict=True)]
    print(
        f"{'plain − direct':<34}{statistics.median(proxy_cost):>9.1f}{_pct(proxy_cost, 90):>9.1f}"
    )


if __name__ == "__main__":
    main()
