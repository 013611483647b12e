"""``judge.labels``' writer: judged answers into the tenant's label store, bounded.

A judged answer's label carries, as its ``context``, the evidence passages its claims were
verified on (the citations: request passages and index chunks, each once, in answer order)
— never the request's whole context, which made a label as large as the prompt (~0.9 MB
with big contexts). Those passages are cut to :data:`MAX_LABEL_CONTEXT_CHARS` characters in
all. The tenant's store is bounded by ``judge.max_label_store_bytes``: once its label store
(``LabelStorage.feedback_bytes``: the embedded backend's ``feedback.jsonl``, Postgres's
records) is that large, judge labels are no longer written (a reviewer's own labels still
are: ``POST /v1/groundproxy/feedback``). ``/metrics`` says so:
``groundproxy_judge_labels_total{tenant,outcome}`` (``stored``, ``full``, ``failed``) and
``groundproxy_label_store_bytes{tenant}`` (the store's size, as last seen).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Literal, Protocol

import structlog

from groundproxy.guards.types import ClaimResult
from groundproxy.proxy.storage.backends import LabelStorage
from groundproxy.proxy.storage.feedback import Labelled

log = structlog.get_logger(__name__)

MAX_LABEL_CONTEXT_CHARS = 16_000  # of evidence text per judge label, all passages together

LabelOutcome = Literal["stored", "full", "failed"]


class LabelMetrics(Protocol):
    def observe_judge_label(self, tenant: str, outcome: str, store_bytes: int) -> None: ...


def label_context(claims: Sequence[ClaimResult], limit: int = MAX_LABEL_CONTEXT_CHARS) -> list[str]:
    """The evidence texts the answer's claims cite, each once, in order, at most ``limit``
    characters in all (the passage that crosses it is cut; later ones are left out)."""
    out: list[str] = []
    seen: set[str] = set()
    left = limit
    for result in claims:
        for ev in result.citations:
            text = ev.text
            if not text.strip() or text in seen:
                continue
            seen.add(text)
            out.append(text[:left])
            left -= len(out[-1])
            if left <= 0:
                return out
    return out


class JudgeLabels:
    """Writes judge labels into ``storage`` within a per-tenant size bound (module
    docstring); ``metrics`` counts each outcome and the store's size."""

    def __init__(self, storage: LabelStorage, metrics: LabelMetrics | None = None) -> None:
        self.storage = storage
        self.metrics = metrics

    def keep(self, tenant: str, item: Labelled, max_bytes: int) -> LabelOutcome:
        """Store ``item`` unless the tenant's store is full (blocking: call off the loop)."""
        outcome: LabelOutcome = "failed"
        size = 0
        try:
            size = self.storage.feedback_bytes(tenant)
            if size >= max_bytes:
                outcome = "full"
            else:
                self.storage.append_feedback(tenant, item)
                size += len(json.dumps(asdict(item), ensure_ascii=False).encode("utf-8")) + 1
                outcome = "stored"
        except Exception as exc:  # never the client's problem: logged and counted
            log.warning("judge_label_not_stored", error_type=type(exc).__name__)
        if outcome == "full":
            log.info("judge_label_store_full", tenant=tenant, bytes=size, max_bytes=max_bytes)
        if self.metrics is not None:
            self.metrics.observe_judge_label(tenant, outcome, size)
        return outcome
