"""Latency bench: what groundproxy adds to a chat completion, against LiteLLM's proxy.

One run, all on 127.0.0.1, six paths to the same instant fake upstream, which gives every
request a DISTINCT 5-claim answer (bench.answers: first sentences of other indexed
documents, ~30 % with a wrong value), so the verdict cache serves nothing; a last pass at
concurrency 1 repeats the first pass's answers and gives the cache-hit figure separately:
``direct`` (the upstream itself), ``litellm`` (the LiteLLM proxy server, from its own venv,
no database), ``gp-off`` and ``gp-on`` (one ``groundproxy serve`` process, a guard-off and a
guard-on tenant on one ~100k-chunk index, upstream through litellm) and ``gp-off-wire`` /
``gp-on-wire`` (the same, ``upstream.transport: openai``: the direct OpenAI-wire client).
Measured in the same run, interleaved so machine noise hits every path alike: p50/p99 at
concurrency 1 (round-robin, one request per path per round) and 16 (rounds of 1/4 of the
requests per path, rotating order), throughput at concurrency 16, time to first byte of
streams, and each server's RSS before and after.

    nice -n 5 .venv/bin/python -m bench.latency [--litellm-bin PATH] [--cache DIR]

LiteLLM proxy (not a project dependency; skipped with a message when absent):

    python3.11 -m venv /tmp/litellm-proxy-venv
    /tmp/litellm-proxy-venv/bin/pip install 'litellm[proxy]==1.108.7'

Writes bench/results/latency.txt and latency.json. Not part of the default test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench import harness as h
from bench.needs_data import require

RESULTS = Path(__file__).resolve().parent / "results"
PATHS = ("direct", "litellm", "gp-off", "gp-on", "gp-off-wire", "gp-on-wire")


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--litellm-bin",
        type=Path,
        default=Path(os.environ.get("LITELLM_BIN", "/tmp/litellm-proxy-venv/bin/litellm")),
    )
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "gp-latency-cache")
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument(
        "--real-budget-s",
        type=float,
        default=240.0,
        help="seconds of real-embedder ingest before synthetic filler",
    )
    ap.add_argument("--n1", type=int, default=200, help="requests per path at concurrency 1")
    ap.add_argument("--n16", type=int, default=400, help="requests per path at concurrency 16")
    ap.add_argument("--stream-n", type=int, default=60, help="streams per path for TTFB")
    ap.add_argument("--time-cap-s", type=float, default=180.0, help="cap per phase and path")
    ap.add_argument("--out", type=Path, default=RESULTS / "latency")
    return ap.parse_args()


WARM = 5
Question = Callable[[int, str], str]  # (request number, path) -> question


#: Guarded paths share one index and so one verdict cache: each asks its own answers
#: (lane), or the second to ask would measure the first one's cache hits.
LANES = {"gp-on-wire": 1}


def _plan(questions: list[str], a: argparse.Namespace) -> dict[str, Question]:
    """Which question (so which distinct answer) request ``i`` of each phase asks on each
    path: one sequence per lane (:data:`LANES`). ``c1-repeat`` asks c=1's again (cache hits)."""
    per_lane = len(questions) // (1 + max(LANES.values()))
    offsets = {"warm": 0, "c1": WARM, "c16": WARM + a.n1, "stream": WARM + a.n1 + a.n16}
    plan: dict[str, Question] = {
        k: (lambda i, path, o=o: questions[LANES.get(path, 0) * per_lane + o + i])
        for k, o in offsets.items()
    }
    plan["c1-repeat"] = plan["c1"]
    return plan


async def _check_claims(target: h.Target, question: str) -> int:
    async with httpx.AsyncClient(timeout=60) as c:
        r = await c.post(target.url, json=h.body(question=question), headers=target.headers)
        r.raise_for_status()
        return len(r.json()["groundproxy"]["claims"])


async def _c1(
    targets: list[h.Target], n: int, stream: bool, cap_s: float, q: Question
) -> dict[str, h.PhaseResult]:
    """Round-robin at concurrency 1: each round sends one request down every path."""
    res = {t.name: h.PhaseResult() for t in targets}
    t_end = time.perf_counter() + cap_s * len(targets)
    async with h.client(1) as c:
        for i in range(n):
            if time.perf_counter() > t_end:
                break
            order = targets[i % len(targets) :] + targets[: i % len(targets)]
            for t in order:
                t0 = time.perf_counter()
                await h.one_request(c, t, h.body(stream, question=q(i, t.name)), res[t.name])
                res[t.name].wall_s += time.perf_counter() - t0
    return res


async def _c16(
    targets: list[h.Target], n: int, cap_s: float, q: Question, rounds: int = 4
) -> dict[str, h.PhaseResult]:
    res = {t.name: h.PhaseResult() for t in targets}
    per = n // rounds
    for r in range(rounds):
        order = targets[r % len(targets) :] + targets[: r % len(targets)]
        for t in order:

            def payload(k: int, r: int = r, path: str = t.name) -> dict[str, Any]:
                return h.body(question=q(r * per + k, path))

            async with h.client(16) as c:
                part = await h.run_load(c, t, payload, 16, per, cap_s / rounds)
            res[t.name].add(part)
    return res


async def _warm(targets: list[h.Target], q: Question) -> None:
    async with h.client(4) as c:
        for t in targets:
            for i, stream in enumerate((False, True, False, True, False)):
                scratch = h.PhaseResult()
                await h.one_request(c, t, h.body(stream, question=q(i, t.name)), scratch)
                if scratch.errors:
                    raise RuntimeError(f"{t.name} warm-up failed: {scratch.error_samples}")


def _row(
    name: str,
    c1: h.PhaseResult,
    c16: h.PhaseResult,
    st: h.PhaseResult,
    c1r: h.PhaseResult,
    direct: dict[str, float],
    rss: tuple[float, float],
) -> dict[str, Any]:
    return {
        "path": name,
        "c1_p50_ms": h.median(c1.latencies_ms),
        "c1_p99_ms": h.pct(c1.latencies_ms, 99),
        "c1_added_p50_ms": h.median(c1.latencies_ms) - direct["c1_p50"],
        "c1_added_p99_ms": h.pct(c1.latencies_ms, 99) - direct["c1_p99"],
        "c1_guard_p50_ms": h.median(c1.guard_ms),
        "c1_repeat_added_p50_ms": h.median(c1r.latencies_ms) - direct["c1r_p50"],
        "c1_repeat_guard_p50_ms": h.median(c1r.guard_ms),
        "c16_p50_ms": h.median(c16.latencies_ms),
        "c16_p99_ms": h.pct(c16.latencies_ms, 99),
        "c16_added_p50_ms": h.median(c16.latencies_ms) - direct["c16_p50"],
        "c16_rps": c16.rps(),
        "ttfb_p50_ms": h.median(st.ttfb_ms),
        "ttfb_p99_ms": h.pct(st.ttfb_ms, 99),
        "stream_total_p50_ms": h.median(st.latencies_ms),
        "ok": {
            "c1": len(c1.latencies_ms),
            "c16": len(c16.latencies_ms),
            "stream": len(st.latencies_ms),
        },
        "errors": c1.errors + c16.errors + st.errors + c1r.errors,
        "error_samples": (c1.error_samples + c16.error_samples + st.error_samples)[:3],
        "rss_before_mb": rss[0],
        "rss_after_mb": rss[1],
    }


def _table(rows: list[dict[str, Any]]) -> list[str]:
    cols = [
        ("path", "path", "{}"),
        ("c1 p50", "c1_p50_ms", "{:.1f}"),
        ("c1 p99", "c1_p99_ms", "{:.1f}"),
        ("c1 +p50", "c1_added_p50_ms", "{:+.1f}"),
        ("c1 guard p50", "c1_guard_p50_ms", "{:.1f}"),
        ("c1 cache-hit +p50", "c1_repeat_added_p50_ms", "{:+.1f}"),
        ("c1 cache-hit guard p50", "c1_repeat_guard_p50_ms", "{:.1f}"),
        ("c16 p50", "c16_p50_ms", "{:.1f}"),
        ("c16 p99", "c16_p99_ms", "{:.1f}"),
        ("c16 +p50", "c16_added_p50_ms", "{:+.1f}"),
        ("c16 req/s", "c16_rps", "{:.1f}"),
        ("TTFB p50", "ttfb_p50_ms", "{:.1f}"),
        ("TTFB p99", "ttfb_p99_ms", "{:.1f}"),
        ("stream total p50", "stream_total_p50_ms", "{:.1f}"),
        ("RSS MB before", "rss_before_mb", "{:.0f}"),
        ("RSS MB after", "rss_after_mb", "{:.0f}"),
        ("errors", "errors", "{}"),
    ]
    lines = ["| " + " | ".join(c[0] for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(f.format(r[k]) for _, k, f in cols) + " |")
    return lines


def _ratios(by: dict[str, dict[str, Any]]) -> list[str]:
    d, ll = by["direct"], by.get("litellm")
    out = [
        "",
        "Ratios (ms are p50; 'added' = path − direct, same run):",
        "| path | c1 p50 / direct | c16 p50 / direct | c16 req/s / direct "
        "| c1 added / LiteLLM added | c16 req/s / LiteLLM |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in by.items():
        vs_ll = vs_ll_rps = "n/a"
        if ll is not None:
            vs_ll = f"{r['c1_added_p50_ms'] / ll['c1_added_p50_ms']:.2f}"
            vs_ll_rps = f"{r['c16_rps'] / ll['c16_rps']:.2f}"
        out.append(
            f"| {name} | {r['c1_p50_ms'] / d['c1_p50_ms']:.2f} "
            f"| {r['c16_p50_ms'] / d['c16_p50_ms']:.2f} "
            f"| {r['c16_rps'] / d['c16_rps']:.2f} | {vs_ll} | {vs_ll_rps} |"
        )
    return out


def _goals(by: dict[str, dict[str, Any]]) -> list[str]:
    """The goals of issue 13 (distinct answers, side by side in this run)."""
    ll = by.get("litellm")
    out = ["", "Goals (distinct 5-claim answers):"]
    for off_name in ("gp-off", "gp-off-wire"):
        off = by[off_name]
        if ll is None:
            out.append(f"- {off_name} adds ≤ 0.5× LiteLLM's p50: NOT MEASURED (no LiteLLM proxy)")
            continue
        ratio = off["c1_added_p50_ms"] / ll["c1_added_p50_ms"]
        out.append(
            f"- {off_name} adds ≤ 0.5× LiteLLM's p50 (c=1): "
            f"{'MET' if ratio <= 0.5 else 'NOT MET'}"
            f" ({off['c1_added_p50_ms']:.1f} vs {ll['c1_added_p50_ms']:.1f} ms: {ratio:.2f}×)"
        )
    for on_name in ("gp-on", "gp-on-wire"):
        on = by[on_name]
        added = on["c1_added_p50_ms"]
        out.append(
            f"- {on_name} adds p50 ≤ 50 ms (c=1): {'MET' if added <= 50 else 'NOT MET'} "
            f"({added:.1f} ms; guard time p50 {on['c1_guard_p50_ms']:.1f} ms)"
        )
        out.append(
            f"- {on_name} ≥ 40 guarded requests/s (c=16): "
            f"{'MET' if on['c16_rps'] >= 40 else 'NOT MET'} ({on['c16_rps']:.1f} req/s)"
        )
    return out


async def _measure(
    targets: list[h.Target], pids: dict[str, int], a: argparse.Namespace, plan: dict[str, Question]
) -> list[dict[str, Any]]:
    await _warm(targets, plan["warm"])
    rss0 = {n: h.rss_mb(p) for n, p in pids.items()}
    c1 = await _c1(targets, a.n1, False, a.time_cap_s, plan["c1"])
    c16 = await _c16(targets, a.n16, a.time_cap_s, plan["c16"])
    st = await _c1(targets, a.stream_n, True, a.time_cap_s, plan["stream"])
    c1r = await _c1(targets, a.n1, False, a.time_cap_s, plan["c1-repeat"])
    rss1 = {n: h.rss_mb(p) for n, p in pids.items()}
    d = c1["direct"].latencies_ms
    d16 = c16["direct"].latencies_ms
    direct = {
        "c1_p50": h.median(d),
        "c1_p99": h.pct(d, 99),
        "c16_p50": h.median(d16),
        "c1r_p50": h.median(c1r["direct"].latencies_ms),
    }
    return [
        _row(
            t.name,
            c1[t.name],
            c16[t.name],
            st[t.name],
            c1r[t.name],
            direct,
            (rss0.get(t.name, float("nan")), rss1.get(t.name, float("nan"))),
        )
        for t in targets
    ]


def main() -> None:
    a = _args()
    require()
    a.cache.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    index = h.build_index(a.cache, a.chunks, a.real_budget_s)
    print(f"index: {json.dumps(index)} (ready in {time.perf_counter() - t0:.0f} s)", flush=True)
    lanes = 1 + max(LANES.values())
    answers = h.index_answers(index, lanes * (WARM + a.n1 + a.n16 + a.stream_n))
    plan = _plan([x.question for x in answers], a)
    stack = h.start_stack(a.cache, "gp-latency-", answers)
    notes: list[str] = []
    try:
        up, gp = stack.procs
        targets = [h.Target("direct", f"http://127.0.0.1:{stack.up_port}/v1/chat/completions")]
        pids = {"direct": up.pid, **{name: gp.pid for name in PATHS[2:]}}
        if a.litellm_bin.is_file():
            ll_port, ll = h.start_litellm(a.litellm_bin, stack.work, stack.up_port)
            stack.procs.append(ll)
            pids["litellm"] = ll.pid
            targets.append(
                h.Target(
                    "litellm",
                    f"http://127.0.0.1:{ll_port}/v1/chat/completions",
                    {"authorization": f"Bearer {h.LITELLM_KEY}"},
                )
            )
        else:
            notes.append(f"LiteLLM proxy SKIPPED: {a.litellm_bin} not found (see --litellm-bin)")
            print(notes[-1], flush=True)
        targets += [
            stack.tenant("gp-off", "plain"),
            stack.tenant("gp-off-wire", "plainwire"),
            stack.tenant("gp-on-wire", "guardedwire"),
            stack.tenant("gp-on", "guarded"),
        ]
        claims = asyncio.run(_check_claims(targets[-1], plan["warm"](0, targets[-1].name)))
        rows = asyncio.run(_measure(targets, pids, a, plan))
    finally:
        stack.close()
    by = {r["path"]: r for r in rows}
    head = [
        f"bench/latency.py — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"{os.cpu_count()} CPU cores, SHARED with other jobs (load average at end: "
        f"{os.getloadavg()[0]:.1f}); bench run under nice; all on 127.0.0.1",
        f"index: {index['chunks']} chunks = {index['real_chunks']} real chunks "
        f"({index['real_documents']} ../shared/data contexts, real embedder) + "
        f"{index['filler_chunks']} synthetic filler chunks (random unit vectors)",
        f"answers: distinct, {claims} claims (the first); the 'cache-hit' columns repeat c=1's "
        "answers (verdict-cache hits)",
        f"requests per path: c=1 {a.n1}, c=16 {a.n16}, "
        f"streams {a.stream_n}; cap {a.time_cap_s:.0f} s per phase and path",
        "every gp-* path shares one groundproxy process, so their RSS is the same figure",
        "'c1 guard p50': the x-groundproxy-latency-ms header (time inside the guard); "
        "'+p50': path p50 − direct p50",
        *notes,
        "",
    ]
    lines = head + _table(rows) + _ratios(by) + _goals(by)
    text = "\n".join(lines) + "\n"
    print(text)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.with_suffix(".txt").write_text(text, encoding="utf-8")
    a.out.with_suffix(".json").write_text(
        json.dumps({"index": index, "claims": claims, "rows": rows, "notes": notes}, indent=1),
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
