"""What the learned answer-level decision adds per answer, beside the "every claim" one.

The same distinct 5-claim answers as ``bench.guard_stages`` (bench.answers), each verified
once through the served path (:meth:`GuardService.verify_sync`, ``embedhead``, no verdict
cache), then finished both ways on that same verification, interleaved:

- ``every_claim``: stage 2 as by default (:func:`guards.action.apply`);
- ``learned``: the shipped answer combiner (policy ``verifier.decision: learned``): the
  answer-level signals and features, the combiner, stage 2 (plus the token alignment when
  the combiner reads it);
- ``token alignment``: every claim's token alignment (:mod:`models.token_alignment`), what a
  tenant adapter that chose token features adds on top;
- ``upstream logprobs``: reading a chat choice's ``logprobs`` (a token per word) and each
  claim's mean / min over its span (:mod:`guards.verdict.logprobs`), what an adapter fitted with
  the logprob features adds when the request asked for them.

Last, what keeping token states costs the embedder (``OnnxEmbedder.keep_token_states``,
off until the guard switches it on for an adapter that reads the alignment): the same
distinct texts embedded with keeping off and on, interleaved, vector LRU cleared — the
answers' claims in batches of 5, and the documents' ~600-character ingest chunks in
batches of 64.

Three evidence paths: ``index`` (a ~300-document tenant index whose evidence sentences'
vectors and token states were stored at ingest, :mod:`retrieval.sentence_tokens`: the
alignment reads them), ``index-old`` (the same documents ingested with
``GROUNDPROXY_TOKEN_STATES=0``, as an index written before stored token states: the
sentences are embedded once more) and ``context`` (the same documents sent as request
context: the verifier just embedded those sentences, their token states are kept from that
pass). Each answer starts with the embedder's vector and token-state LRUs empty, as a
request with a distinct answer finds them. Ingest of the same documents with and without
stored token states is timed too, with the bytes each stores.

With ``--postgres`` a fourth path, ``postgres``: the same documents ingested into a real
PostgreSQL + pgvector server, whose evidence sentences' vectors and token states are stored
in the database at ingest (:mod:`retrieval.pg_sentences`) and read with one statement per
look-up. Every path also reports stage 1 (verify) per answer.

    .venv/bin/python -m bench.signal_cost [--n 40] [--docs 300] [--postgres] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.answers import distinct_answers
from bench.guard_latency import _docs, _pct
from groundproxy.guards import (
    answer_features,
    apply,
    apply_adapted,
    decide_claims,
    verified_logprobs,
)
from groundproxy.policies.schema import local_policy
from groundproxy.proxy.serving.guarding import build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.adapters import shipped_decision
from groundproxy.retrieval.chunker import chunk_text
from groundproxy.retrieval.generations import read_current
from groundproxy.retrieval.ingest import ingest_texts
from groundproxy.retrieval.sentence_split import split_sentences


def keeping_cost(embedder: Any, answers: list[Any], docs: list[tuple[str, str]]) -> list[str]:
    """Embed cost with token-state keeping off vs on, on the same distinct batches."""
    claims = [split_sentences(a.text) for a in answers]
    chunks = [c.text for _, text in docs for c in chunk_text(text)]
    batches = {
        "5 claims": claims,
        "64 ingest chunks": [chunks[i : i + 64] for i in range(0, len(chunks) - 63, 64)],
    }
    out = [f"{'embed, ms per batch':<39}{'off p50':>8}{'on p50':>8}{'on/off':>8}"]
    for name, groups in batches.items():
        ms: dict[bool, list[float]] = {False: [], True: []}
        for i, texts in enumerate(groups):
            for keep in (i % 2 == 0, i % 2 == 1):  # alternate which goes first
                embedder.lru.clear()
                embedder.token_lru.clear()
                embedder.keep_token_states = keep
                t = time.perf_counter()
                embedder.encode(texts)
                ms[keep].append(1000 * (time.perf_counter() - t))
        off, on = statistics.median(ms[False]), statistics.median(ms[True])
        out.append(f"{name + f' ({len(groups)} batches)':<39}{off:>8.2f}{on:>8.2f}{on / off:>8.3f}")
    embedder.keep_token_states = True
    return out


def ingest_both(work: Path, docs: list[tuple[str, str]], embedder: Any) -> list[str]:
    """Ingest ``docs`` with token states stored (tenants ``bench``, ``bench-2``) and not
    (``bench-old``, ``bench-old-2``), alternating, each with the embedder's LRUs cleared:
    mean seconds and the bytes of the sentence files of each."""
    out = [f"{'ingest (mean of 2)':<36}{'s':>8}{'sentence files, MiB':>22}"]
    ingest_texts(work, "warm-up", docs[:20], embedder)  # the first ingest's one-off costs
    took: dict[str, list[float]] = {"0": [], "1": []}
    size: dict[str, float] = {}
    for tenant, flag in (
        ("bench-old", "0"),
        ("bench", "1"),
        ("bench-2", "1"),
        ("bench-old-2", "0"),
    ):
        os.environ["GROUNDPROXY_TOKEN_STATES"] = flag
        for lru in (embedder.lru, embedder.token_lru):
            lru.clear()
        t = time.perf_counter()
        ingest_texts(work, tenant, docs, embedder)
        took[flag].append(time.perf_counter() - t)
        pointer = read_current(work / tenant, tenant)
        assert pointer is not None
        gen = work / tenant / pointer.generation
        size[flag] = sum(f.stat().st_size for f in gen.glob("sentences.*")) / 2**20
    os.environ.pop("GROUNDPROXY_TOKEN_STATES")
    for flag, label in (("0", "no token states"), ("1", "token states stored")):
        mean = statistics.fmean(took[flag])
        out.append(f"{f'{len(docs)} documents, {label}':<36}{mean:>8.1f}{size[flag]:>22.1f}")
    return out


def choice_logprobs(answer: str) -> dict[str, Any]:
    """What an upstream's chat choice carries for ``answer`` with ``logprobs: true``: a token
    per word here (real tokenizers cut finer: ~1.3 tokens per word)."""
    words = answer.split(" ")
    return {"content": [{"token": w if i == 0 else " " + w, "logprob": -0.1 * (i % 7)}
                        for i, w in enumerate(words)]}  # fmt: skip


LABELS = {
    "verify": "stage 1, verify",
    "every_claim": "stage 2, every_claim",
    "learned": "stage 2, learned",
    "features": "  signals + features",
    "added": "added by learned",
    "alignment": "token alignment (if used)",
    "logprobs": "upstream logprobs (if sent)",
}


def measure(
    guard: Any, path: str, index: str | None, answers: list[Any], docs: list[tuple[str, str]]
) -> list[str]:
    """The table rows of one evidence path: each answer verified once (LRUs empty), then
    finished both ways on that verification."""
    embedder: Any = guard.parts.embedder
    combiner = shipped_decision("embedhead")
    by_id = dict(docs)
    firsts = [(d, sents[0]) for d, text in docs if (sents := split_sentences(text))]
    ctx_on = index is None
    policy = local_policy(
        "bench",
        retrieval={"index": index, "use_request_context": ctx_on},
        latency_budget_ms=60_000,
    )
    parts: dict[str, list[float]] = {k: [] for k in LABELS}
    for i, a in enumerate(answers):
        context: list[tuple[str, str]] = []
        if ctx_on:  # the documents the answer's sentences come from, as context
            context = [("context", by_id[d]) for d, first in firsts if first in a.text]
        for lru in (embedder.lru, embedder.token_lru):
            lru.clear()
        started = time.perf_counter()
        verified = (
            guard.verify_sync(a.text, a.question, context, policy, cache=False, index=None)
            if ctx_on  # the request's context only, as eval's context mode
            else guard.verify_sync(a.text, a.question, context, policy, cache=False)
        )
        t0 = time.perf_counter()
        apply(verified, policy)
        t1 = time.perf_counter()
        alignment = guard.alignment(verified)
        t2 = time.perf_counter()
        answer_features(verified, decide_claims(verified, policy), alignment)
        t3 = time.perf_counter()
        apply_adapted(verified, policy, combiner, alignment)
        t4 = time.perf_counter()
        verified_logprobs(verified, choice_logprobs(a.text))
        t5 = time.perf_counter()
        base, t_align, t_feat, whole = (
            1000 * (t1 - t0), 1000 * (t2 - t1), 1000 * (t3 - t2), 1000 * (t4 - t3)
        )  # fmt: skip
        if i < 3:  # warm-up
            continue
        learned = whole + (t_align if combiner.uses_tokens else 0.0)
        parts["verify"].append(1000 * (t0 - started))
        parts["every_claim"].append(base)
        parts["learned"].append(learned)
        parts["alignment"].append(t_align)
        parts["features"].append(t_feat)
        parts["added"].append(learned - base)
        parts["logprobs"].append(1000 * (t5 - t4))
    return [
        f"{path:<10}{LABELS[name]:<30}{statistics.median(xs):>8.2f}{_pct(xs, 90):>8.2f}"
        f"{statistics.fmean(xs):>8.2f}"
        for name, xs in parts.items()
    ]


def postgres_rows(
    embedder: Any, answers: list[Any], docs: list[tuple[str, str]]
) -> tuple[list[str], list[str]]:
    """The ``postgres`` path: the same documents ingested into a real PostgreSQL + pgvector
    server (testing.pg) with the sentences stored in the database (retrieval.pg_sentences).
    (table rows, ingest row)."""
    from groundproxy.proxy.storage.backends import PostgresStorage
    from groundproxy.proxy.storage.backends import ingest_texts as ingest_into
    from groundproxy.testing.pg import start_postgres

    server = start_postgres()
    storage = PostgresStorage(server.create_database())
    try:
        storage.start()
        t = time.perf_counter()
        ingest_into(storage, "bench", docs, embedder)
        took = time.perf_counter() - t
        with storage.pool.connection() as conn:
            size = conn.execute("SELECT pg_total_relation_size('gp_sentences')").fetchone()[0]
        settings = Settings(data=Path(tempfile.mkdtemp(prefix="gp-signal-pg-")), batch_window_ms=0)
        with build_guard(settings, embedder=embedder, storage=storage) as guard:
            rows = measure(guard, "postgres", "bench", answers, docs)
        label = f"{len(docs)} documents, PostgreSQL"
        return rows, [f"{label:<36}{took:>8.1f}{int(size) / 2**20:>22.1f}"]
    finally:
        storage.close()
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--postgres", action="store_true", help="add the PostgreSQL path")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gp-signal-cost-"))
    docs = _docs(args.docs)
    combiner = shipped_decision("embedhead")
    lines = [
        f"signal cost: {args.n} distinct 5-claim answers, ~{args.docs} documents; ms per answer "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at start)",
        f"combiner: {len(combiner.features)} features, token alignment: {combiner.uses_tokens}",
        "",
        f"{'path':<10}{'part':<30}{'p50':>8}{'p90':>8}{'mean':>8}",
    ]
    with build_guard(Settings(data=work, batch_window_ms=0)) as guard:
        embedder: Any = guard.parts.embedder
        ingested = ingest_both(work, docs, embedder)
        answers = distinct_answers(docs, args.n + 3)
        for path, index in (("index", "bench"), ("index-old", "bench-old"), ("context", None)):
            lines += measure(guard, path, index, answers, docs)
        if args.postgres:
            rows, pg_ingest = postgres_rows(embedder, answers, docs)
            lines += rows
            ingested += pg_ingest
        lines += ["", *ingested, "", *keeping_cost(embedder, answers, docs)]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
