"""Shared parts of the load benches (``bench.latency``, ``bench.soak``): the 5-claim answer,
a cached tenant index, policies, the server processes, /proc readings and an async load
runner. Everything runs on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import yaml

from bench.answers import Answer, distinct_answers, upstream_script
from bench.needs_data import SHARED, require
from groundproxy.guards.types import Embedder
from groundproxy.policies.keys import hash_key
from groundproxy.testing.processes import (
    REPO_ROOT,
    free_port,
    start_fake_upstream,
    start_process,
    start_proxy,
    stop_process,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

QUESTION = "Tell me about Arthur's Magazine and First for Women."
ANSWER = (
    "Arthur's Magazine was an American literary periodical. It was published in Philadelphia. "
    "It ran from 1844 to 1846. First for Women is a woman's magazine. "
    "It is published by Bauer Media Group in the USA."
)
FILLER_MARK = "[synthetic filler]"
INDEX = "bench"


def body(stream: bool = False, model: str = "bench", question: str = QUESTION) -> dict[str, Any]:
    return {
        "model": model,
        "stream": stream,
        "messages": [{"role": "user", "content": question}],
    }


def index_answers(info: dict[str, Any], n: int) -> list[Answer]:
    """``n`` distinct answers (bench.answers) from the real documents of the index
    :func:`build_index` described; :func:`start_stack` puts them in the upstream script."""
    docs = real_contexts()[: int(info["real_documents"])]
    return distinct_answers(docs, n)


# ---------------------------------------------------------------- index


def real_contexts() -> list[tuple[str, str]]:
    """Unique contexts from ../shared/data (eval then train), the answer's documents first."""
    require(SHARED)
    seen: dict[str, str] = {}
    files = sorted((SHARED / "eval").glob("*.jsonl")) + sorted((SHARED / "train").glob("*.jsonl"))
    first: list[tuple[str, str]] = []
    for path in files:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            ctx = json.loads(line).get("context")
            if not isinstance(ctx, str) or len(ctx) < 40 or ctx in seen:
                continue
            doc_id = f"{path.parent.name}-{path.stem}-{i}"
            seen[ctx] = doc_id
            if "Arthur's Magazine" in ctx or "First for Women" in ctx:
                first.append((doc_id, ctx))
    rest = [(d, c) for c, d in seen.items() if (d, c) not in first]
    return first + rest


class FillerAwareEmbedder:
    """The real embedder for real text; a seeded random unit vector for synthetic filler."""

    def __init__(self, real: Embedder) -> None:
        self.name = real.name
        self.dim = real.dim
        self._real = real
        self._rng = np.random.default_rng(0)

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        real = [i for i, t in enumerate(texts) if not t.startswith(FILLER_MARK)]
        if real:
            out[real] = self._real.encode([texts[i] for i in real])
        fill = [i for i, t in enumerate(texts) if t.startswith(FILLER_MARK)]
        if fill:
            v = self._rng.standard_normal((len(fill), self.dim)).astype(np.float32)
            out[fill] = v / np.linalg.norm(v, axis=1, keepdims=True)
        return out


def build_index(cache: Path, chunks: int, real_budget_s: float) -> dict[str, Any]:
    """A tenant index of ``chunks`` chunks under ``cache``/data (built once, then reused):
    real contexts embedded with the real embedder for up to ``real_budget_s``, then
    synthetic filler chunks (random unit vectors) up to ``chunks``."""
    info_path = cache / "index-info.json"
    if info_path.is_file():
        info: dict[str, Any] = json.loads(info_path.read_text(encoding="utf-8"))
        if info.get("chunks_requested") == chunks:
            return info
    from groundproxy.retrieval.embedder import load_embedder
    from groundproxy.retrieval.writer import IndexWriter

    data = cache / "data"
    if data.exists():
        import shutil

        shutil.rmtree(data)
    embedder = FillerAwareEmbedder(load_embedder())
    t0 = time.perf_counter()
    real_docs = 0
    with IndexWriter(data, INDEX, embedder) as writer:
        for doc_id, text in real_contexts():
            writer.upsert(doc_id, text)
            real_docs += 1
            if time.perf_counter() - t0 > real_budget_s or writer.chunks_added >= chunks:
                break
        real_chunks = writer.chunks_added
        real_s = time.perf_counter() - t0
        for i in range(chunks - real_chunks):
            writer.upsert(f"filler-{i}", f"{FILLER_MARK} chunk {i}: lorem ipsum dolor sit amet.")
        writer.commit()
        total = writer.chunks_added
    info = {
        "chunks_requested": chunks,
        "chunks": total,
        "real_documents": real_docs,
        "real_chunks": real_chunks,
        "real_embed_s": round(real_s, 1),
        "filler_chunks": total - real_chunks,
        "build_s": round(time.perf_counter() - t0, 1),
    }
    info_path.write_text(json.dumps(info), encoding="utf-8")
    return info


# ---------------------------------------------------------------- servers


#: The bench tenants, all on one index: guard on/off, through litellm or the direct
#: OpenAI-wire client (``upstream.transport: openai``).
TENANTS = {
    "plain": (False, "litellm"),
    "guarded": (True, "litellm"),
    "plainwire": (False, "openai"),
    "guardedwire": (True, "openai"),
}


def write_policies(folder: Path, upstream_port: int) -> dict[str, str]:
    """The :data:`TENANTS`, sharing one index; returns their keys."""
    folder.mkdir(parents=True, exist_ok=True)
    keys = {}
    for tenant, (guard, transport) in TENANTS.items():
        keys[tenant] = f"sk-bench-{tenant}"
        policy: dict[str, Any] = {
            "tenant": tenant,
            "keys": [hash_key(keys[tenant])],
            "guard": guard,
            "upstream": {
                "model": "openai/bench",
                "api_base": f"http://127.0.0.1:{upstream_port}/v1",
                "transport": transport,
            },
            # every tenant uses one index, so every policy says it is shared
            "retrieval": {
                "index": INDEX,
                "shared_with": sorted(set(TENANTS) - {tenant}),
            },
            "latency_budget_ms": 10000,
        }
        (folder / f"{tenant}.yaml").write_text(yaml.safe_dump(policy), "utf-8")
    return keys


def start_upstream(
    work: Path, answers: Sequence[Answer] = ()
) -> tuple[int, subprocess.Popen[bytes]]:
    port = free_port()
    script = work / "script.json"
    script.write_text(json.dumps(upstream_script(answers, ANSWER)), encoding="utf-8")
    return port, start_fake_upstream(port, script)


def start_groundproxy(work: Path, data: Path) -> tuple[int, subprocess.Popen[bytes]]:
    port = free_port()
    env = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    return port, start_proxy(port, work / "policies", data, env=env, log_path=work / "gp.log")


@dataclass
class Stack:
    """A fake upstream and one groundproxy process on a private copy of the cached index."""

    work: Path
    up_port: int = 0
    gp_port: int = 0
    keys: dict[str, str] = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def gp_url(self) -> str:
        return f"http://127.0.0.1:{self.gp_port}/v1/chat/completions"

    def tenant(self, name: str, tenant: str) -> Target:
        return Target(name, self.gp_url, {"authorization": f"Bearer {self.keys[tenant]}"})

    def close(self) -> None:
        for p in reversed(self.procs):
            stop_process(p)
        shutil.rmtree(self.work, ignore_errors=True)


def start_stack(cache: Path, prefix: str, answers: Sequence[Answer] = ()) -> Stack:
    """Start the upstream (answering ``answers`` to their questions, else the one fixed
    ANSWER) and groundproxy; the caller closes the stack (also on failure)."""
    stack = Stack(Path(tempfile.mkdtemp(prefix=prefix)))
    try:
        shutil.copytree(cache / "data", stack.work / "data")
        stack.up_port, up = start_upstream(stack.work, answers)
        stack.procs.append(up)
        stack.keys = write_policies(stack.work / "policies", stack.up_port)
        stack.gp_port, gp = start_groundproxy(stack.work, stack.work / "data")
        stack.procs.append(gp)
    except BaseException:
        stack.close()
        raise
    return stack


LITELLM_KEY = "sk-bench-master"


def start_litellm(
    binary: Path, work: Path, upstream_port: int
) -> tuple[int, subprocess.Popen[bytes]]:
    """The LiteLLM proxy (its own venv): one model → the fake upstream, master key, no DB."""
    from groundproxy.testing.processes import wait_http

    port = free_port()
    config = {
        "model_list": [
            {
                "model_name": "bench",
                "litellm_params": {
                    "model": "openai/bench",
                    "api_base": f"http://127.0.0.1:{upstream_port}/v1",
                    "api_key": "sk-fake",
                },
            }
        ],
        "general_settings": {"master_key": LITELLM_KEY},
        "litellm_settings": {"telemetry": False},
    }
    cfg = work / "litellm.yaml"
    cfg.write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONUNBUFFERED="1")
    log = open(work / "litellm.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [str(binary), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=work,
    )
    wait_http(f"http://127.0.0.1:{port}/health/liveliness", proc, timeout_s=180)
    return port, proc


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


# ---------------------------------------------------------------- load


@dataclass
class Target:
    name: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class PhaseResult:
    latencies_ms: list[float] = field(default_factory=list)
    ttfb_ms: list[float] = field(default_factory=list)
    guard_ms: list[float] = field(default_factory=list)  # x-groundproxy-latency-ms
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def count(self) -> int:
        return len(self.latencies_ms) + self.errors

    def rps(self) -> float:
        return len(self.latencies_ms) / self.wall_s if self.wall_s else 0.0

    def add(self, other: PhaseResult) -> None:
        self.latencies_ms += other.latencies_ms
        self.ttfb_ms += other.ttfb_ms
        self.guard_ms += other.guard_ms
        self.errors += other.errors
        self.error_samples = (self.error_samples + other.error_samples)[:5]
        self.wall_s += other.wall_s


def pct(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


async def one_request(
    client: httpx.AsyncClient, target: Target, payload: dict[str, Any], out: PhaseResult
) -> None:
    t0 = time.perf_counter()
    try:
        async with client.stream("POST", target.url, json=payload, headers=target.headers) as r:
            first: float | None = None
            data = b""
            async for piece in r.aiter_raw():
                if first is None and piece:
                    first = time.perf_counter()
                data += piece
        done = time.perf_counter()
        ok = r.status_code == 200 and (
            b"[DONE]" in data if payload.get("stream") else b'"choices"' in data
        )
        if not ok:
            out.errors += 1
            if len(out.error_samples) < 5:
                out.error_samples.append(f"{r.status_code} {data[:200]!r}")
            return
        out.latencies_ms.append((done - t0) * 1000)
        out.ttfb_ms.append(((first or done) - t0) * 1000)
        if "x-groundproxy-latency-ms" in r.headers:
            out.guard_ms.append(float(r.headers["x-groundproxy-latency-ms"]))
    except httpx.HTTPError as exc:
        out.errors += 1
        if len(out.error_samples) < 5:
            out.error_samples.append(f"{type(exc).__name__}: {exc}")


async def run_load(
    client: httpx.AsyncClient,
    target: Target,
    payload: dict[str, Any] | Callable[[int], dict[str, Any]],
    concurrency: int,
    max_requests: int,
    time_cap_s: float,
) -> PhaseResult:
    """``concurrency`` workers send requests back to back until ``max_requests`` were sent
    or ``time_cap_s`` passed; ``payload`` may be a function of the request's number."""
    out = PhaseResult()
    sent = 0
    deadline = time.perf_counter() + time_cap_s

    async def worker() -> None:
        nonlocal sent
        while sent < max_requests and time.perf_counter() < deadline:
            sent += 1
            this = payload(sent - 1) if callable(payload) else payload
            await one_request(client, target, this, out)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    out.wall_s = time.perf_counter() - t0
    return out


def client(concurrency: int, timeout_s: float = 60.0) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx.AsyncClient(timeout=timeout_s, limits=limits)


def ingest_samples(data: Path, tenant: str = "acme") -> None:
    """Index the three sample documents (testing/samples) for ``tenant`` under ``data``
    through the real ``groundproxy ingest`` command."""
    samples = REPO_ROOT / "testing" / "samples"
    docs = [str(samples / n) for n in ("handbook.md", "products.md", "privacy.html")]
    ingest = start_process(
        ["-m", "groundproxy.proxy", "ingest", "--tenant", tenant, "--data", str(data),
         "--no-progress", *docs]
    )  # fmt: skip
    if ingest.wait(timeout=600) != 0:
        raise RuntimeError("ingest of the sample documents failed")
