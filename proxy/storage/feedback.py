"""Reviewers' labels for a tenant: ``<data>/<tenant>/feedback.jsonl`` (append-only).

One JSON object a line (also the format of a labels file for ``groundproxy calibrate
--fit FILE``, where the rows of ``../shared/data`` are accepted as well)::

    {"id": "fb-…", "created": 1700000000.0, "label_hallucinated": 0 | 1,
     "answer": "…", "question": "…" | null, "context": ["evidence text", …],
     "request_id": "…" | null, "step_id": "…" | null,
     "claims": [{"text": "…", "label": "supported" | "hallucinated"}] | null,
     "logprobs": [{"token": "…", "logprob": -0.1}, …] | null,
     "source": "reviewer" | "judge", "key": "sha256 prefix of the key" | null}

``source``: who gave the label — ``reviewer`` (an admin key's ``POST
/v1/groundproxy/feedback``, or a labels file given to ``calibrate --fit``) or ``judge``
(``judge.labels``: a judged answer, which any client key of the tenant can cause). ``key``:
the first 16 hex digits of the sha256 of the key whose request made the label (never the
key). A record without ``source`` (written before it existed) counts as a reviewer's.

``logprobs``: the upstream's tokens of the answer with their logprobs, as the response's
``choices[i].logprobs`` carried them (that object, its ``content`` list, or a legacy
completions choice's); an adapter fitted on enough such answers may read them
(:mod:`groundproxy.guards.verdict.logprobs`).

An answer is labelled hallucinated (1) or not (0) directly, or through its claims: any
claim labelled ``hallucinated`` makes the answer 1, all ``supported`` make it 0. Each
append is one ``write`` of one line, flushed and fsynced, under a per-process lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from groundproxy.errors import BadRequestError, ConflictError, NotFoundError
from groundproxy.guards import TokenLogprob, parse_logprobs
from groundproxy.proxy.storage.sqlite_traces import LabelRef, TraceStore
from groundproxy.proxy.storage.trace_node import StoredNode
from groundproxy.retrieval.names import validate_tenant

FEEDBACK_FILE = "feedback.jsonl"
MAX_TEXT = 100_000
_LOCK = threading.Lock()
SOURCES = ("reviewer", "judge")
# The fingerprint of the key whose request is being served (set where the key is checked,
# proxy.auth): a judge label records it, so a fit can count a key's labels (label_count).
CALLER: ContextVar[str | None] = ContextVar("groundproxy_caller_key", default=None)


def key_fingerprint(key: str) -> str:
    """What a label stores of a key: the first 16 hex digits of its sha256."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Labelled:
    """One labelled answer."""

    answer: str
    label_hallucinated: int
    question: str | None = None
    context: list[str] = field(default_factory=list)
    id: str = ""
    created: float = 0.0
    request_id: str | None = None
    step_id: str | None = None
    claims: list[dict[str, str]] | None = None
    logprobs: list[dict[str, Any]] | None = None  # [{"token", "logprob"}] (guards.verdict.logprobs)
    source: str = "reviewer"  # "reviewer" (admin key, labels file) or "judge" (judge.labels)
    key: str | None = None  # key_fingerprint of the key whose request made the label


def feedback_path(data_dir: Path, tenant: str) -> Path:
    return Path(data_dir) / validate_tenant(tenant) / FEEDBACK_FILE


def _text(d: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    v = d.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str) or (required and not v.strip()):
        raise BadRequestError(f"'{key}' must be a non-empty string", param=key)
    if len(v) > MAX_TEXT:
        raise BadRequestError(f"'{key}' is longer than {MAX_TEXT} characters", param=key)
    return v


def _claims(d: Mapping[str, Any]) -> list[dict[str, str]] | None:
    raw = d.get("claims")
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        raise BadRequestError("'claims' must be a non-empty list", param="claims")
    out = []
    for i, c in enumerate(raw):
        if not isinstance(c, dict) or c.get("label") not in ("supported", "hallucinated"):
            raise BadRequestError(
                f"claims[{i}] needs a 'text' and a 'label' of supported or hallucinated",
                param=f"claims.{i}",
            )
        out.append({"text": _text(c, "text", required=True) or "", "label": str(c["label"])})
    return out


def logprob_tokens(raw: Any) -> tuple[TokenLogprob, ...] | None:
    """A request field ``logprobs`` (a response choice's: :func:`guards.parse_logprobs`) as
    ``(token, logprob)`` pairs; None when absent, BadRequestError when malformed."""
    if raw is None:
        return None
    tokens = parse_logprobs(raw)
    if tokens is None:
        raise BadRequestError(
            '\'logprobs\' must be a response choice\'s logprobs: {"content": [{"token", '
            '"logprob"}, …]} (or that list), each logprob a number ≤ 0',
            param="logprobs",
        )
    return tokens


def _logprobs(d: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    tokens = logprob_tokens(d.get("logprobs"))
    return None if tokens is None else [{"token": t, "logprob": lp} for t, lp in tokens]


def answer_label(d: Mapping[str, Any], claims: Sequence[Mapping[str, str]] | None) -> int:
    """``label_hallucinated`` (0/1), ``label`` (supported/hallucinated), else the claims."""
    named = None
    if d.get("label") is not None:
        if d["label"] not in ("supported", "hallucinated"):
            raise BadRequestError("'label' must be supported or hallucinated", param="label")
        named = int(d["label"] == "hallucinated")
    if d.get("label_hallucinated") is not None:
        v = d["label_hallucinated"]
        if v not in (0, 1) or isinstance(v, bool | float | str):
            raise BadRequestError(
                "'label_hallucinated' must be the integer 0 or 1", param="label_hallucinated"
            )
        if named is not None and named != v:
            raise BadRequestError(
                f"'label' ({d['label']}) and 'label_hallucinated' ({v}) disagree: give one",
                param="label",
            )
        return int(v)
    if named is not None:
        return named
    if claims:
        return int(any(c["label"] == "hallucinated" for c in claims))
    raise BadRequestError("give 'label', 'label_hallucinated' or labelled 'claims'", param="label")


def parse_labelled(d: Any) -> Labelled:
    """A labelled answer from a feedback record or a ``../shared/data`` row."""
    if not isinstance(d, dict):
        raise BadRequestError("a labelled answer must be a JSON object")
    answer = _text(d, "answer") if "answer" in d else _text(d, "response")
    if not answer or not answer.strip():
        raise BadRequestError("'answer' must be a non-empty string", param="answer")
    question = _text(d, "question") if "question" in d else _text(d, "query")
    context = d.get("context")
    if isinstance(context, str):
        context = [context]
    if context is None:
        context = []
    if not isinstance(context, list) or not all(isinstance(c, str) for c in context):
        raise BadRequestError("'context' must be a string or a list of strings", param="context")
    claims = _claims(d)
    return Labelled(
        answer=answer,
        label_hallucinated=answer_label(d, claims),
        question=question or None,
        context=[c for c in context if c.strip()],
        id=str(d.get("id") or ""),
        created=float(d["created"]) if isinstance(d.get("created"), int | float) else 0.0,
        request_id=_text(d, "request_id"),
        step_id=_text(d, "step_id"),
        claims=claims,
        logprobs=_logprobs(d),
        source=_source(d),
        key=_text(d, "key"),
    )


def _source(d: Mapping[str, Any]) -> str:
    found = d.get("source", "reviewer")
    if found not in SOURCES:
        raise BadRequestError(f"'source' must be one of {', '.join(SOURCES)}", param="source")
    return str(found)


def label_target(store: TraceStore, by: LabelRef, ref: str, not_before: float) -> StoredNode:
    """The one stored answer of the tenant a label names. A ``step_id`` is the server's
    own (``x-groundproxy-step-id``): it names one answer. A ``request_id`` is the client's
    (``x-request-id`` is echoed): it binds only while exactly one answer within retention
    carries it — a second answer sent with the same id makes it ambiguous (409), so a
    duplicate id never moves a reviewer's label onto another answer."""
    found = store.labelled(by, ref, not_before)
    if not found:
        raise NotFoundError(f"no guarded answer with {by} {ref!r} for this tenant")
    if len(found) > 1:
        raise ConflictError(
            f"request id {ref!r} names more than one guarded answer of this tenant (request "
            "ids are chosen by clients): label the answer by its step_id "
            "(x-groundproxy-step-id)",
            param=by,
        )
    return found[0]


def stamped(item: Labelled) -> Labelled:
    """``item`` as a backend stores it: a new id and the time now."""
    return Labelled(
        **{**asdict(item), "id": f"fb-{uuid.uuid4().hex[:16]}", "created": round(time.time(), 3)}
    )


def append(data_dir: Path, tenant: str, item: Labelled) -> Labelled:
    """Append one record (id and time set here); returns it."""
    stored = stamped(item)
    path = feedback_path(data_dir, tenant)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(asdict(stored), ensure_ascii=False) + "\n").encode("utf-8")
    with _LOCK:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
    return stored


def read_labelled(path: Path) -> list[Labelled]:
    """Every record of a feedback or labels file (a missing file: none)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise BadRequestError(f"cannot read {path}: {exc}") from exc
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(parse_labelled(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise BadRequestError(f"{path}:{n}: not JSON ({exc})") from exc
        except BadRequestError as exc:
            raise BadRequestError(f"{path}:{n}: {exc.message}") from exc
    return out
