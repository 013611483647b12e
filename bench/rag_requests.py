"""Distinct RAG requests for the request-context benchmarks (bench.rag_latency, bench.rag_stages).

A RAG request carries its retrieved passages in the system message and asks a question;
the answer states ``claims`` sentences. Passages are ~``passage_words``-word runs of whole
sentences cut from real documents (news articles and summaries of ../shared/data/train:
HaluEval summarization, FRANK), each passage used by one request only — unless ``reuse`` is
set: that share of each request's passages then comes from a small pool of popular
passages (sent once before the measured requests, as a RAG app resends its common chunks).
The answer's sentences are taken from the request's own passages, never one used before
(so neither the verdict cache nor the embedder's LRU sees a claim twice); about
``wrong_share`` of the answers have one sentence with a changed number and one sentence
from a passage NOT in the context (an unsupported claim). Every request has a distinct tag
``[r-<i>]`` in its question, which the fake upstream's script matches.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundproxy.retrieval.sentence_split import split_sentences

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
SOURCES = ("train/halueval-summarization.jsonl", "train/frank.jsonl")
SYSTEM = "Answer the question from these retrieved documents only.\n\n"
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class RagRequest:
    tag: str
    question: str
    passages: tuple[str, ...]
    answer: str

    @property
    def context(self) -> str:
        return "\n\n".join(self.passages)

    def messages(self) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": SYSTEM + self.context},
            {"role": "user", "content": self.question},
        ]

    def body(self, model: str = "bench") -> dict[str, Any]:
        return {"model": model, "messages": self.messages()}


def _passages(words: int, shard: tuple[int, int] = (0, 1)) -> Iterator[list[str]]:
    """Runs of whole sentences of ~``words`` words from the source documents, in order;
    ``shard`` (k, of): only the distinct documents numbered k modulo ``of`` (benchmark cases
    on one server draw from disjoint documents, so no case finds another's sentences)."""
    seen: set[str] = set()
    for name in SOURCES:
        for line in (SHARED / name).read_text(encoding="utf-8").splitlines():
            doc = json.loads(line).get("context") or ""
            if doc in seen:
                continue
            seen.add(doc)
            if (len(seen) - 1) % shard[1] != shard[0]:
                continue
            run: list[str] = []
            count = 0
            for sentence in split_sentences(doc):
                run.append(sentence)
                count += len(sentence.split())
                if count >= words:
                    yield run
                    run, count = [], 0


def _changed(sentence: str, rng: random.Random) -> str:
    m = _NUMBER.search(sentence)
    if m is None:
        return sentence
    return f"{sentence[: m.start()]}{int(m.group(0)) + rng.randint(2, 9)}{sentence[m.end() :]}"


def rag_requests(
    n: int,
    context_words: int,
    *,
    reuse: float = 0.0,
    claims: int = 5,
    passage_words: int = 400,
    wrong_share: float = 0.3,
    seed: int = 11,
    start: int = 0,
    shard: tuple[int, int] = (0, 1),
) -> tuple[list[RagRequest], list[RagRequest]]:
    """(warm-up requests that send the popular pool once — empty without ``reuse`` —,
    ``n`` measured requests) with contexts of ~``context_words`` words (``shard``: see
    :func:`_passages`)."""
    per = max(1, round(context_words / passage_words))
    size = max(context_words // per, 40)
    rng = random.Random(seed)
    source = _passages(size, shard)
    used: set[str] = set()
    pool = [next(source) for _ in range(max(3 * per, 10))] if reuse > 0 else []
    warm = [_request(f"w-{start + i}", pool[i : i + per], [], rng, used, claims, 0.0)
            for i in range(0, len(pool), per)]  # fmt: skip
    out: list[RagRequest] = []
    for i in range(n):
        k = round(reuse * per)
        chosen = rng.sample(pool, k) if k else []
        fresh = [next(source) for _ in range(per - k)]
        outsider = next(source)
        passages = chosen + fresh
        rng.shuffle(passages)
        out.append(_request(f"r-{start + i}", passages, outsider, rng, used, claims, wrong_share))
    return warm, out


def _request(
    tag: str,
    passages: list[list[str]],
    outsider: list[str],
    rng: random.Random,
    used: set[str],
    claims: int,
    wrong_share: float,
) -> RagRequest:
    """One request: its answer from unused sentences of its passages (module docstring)."""
    pickable = [s for p in passages for s in p if s not in used and 6 <= len(s.split()) <= 40]
    picked = rng.sample(pickable, min(claims, len(pickable)))
    used.update(picked)
    if picked and outsider and rng.random() < wrong_share:
        k = rng.randrange(len(picked))
        picked[k] = _changed(picked[k], rng)
        picked[-1] = rng.choice(outsider)
    question = f"[{tag}] What do the documents say about this?"
    return RagRequest(tag, question, tuple(" ".join(p) for p in passages), " ".join(picked))


def upstream_script(requests: list[RagRequest], default: str = "I do not know.") -> dict[str, Any]:
    """The fake upstream's script: each request's tag → its answer."""
    rules = [{"match": f"[{r.tag}]", "answer": r.answer} for r in requests]
    return {"default": default, "rules": rules}
