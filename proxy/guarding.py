"""Runs the guard for one answer: off the event loop, inside the policy's latency budget.

Failures follow the policy: ``on_guard_error: annotate`` returns the answer marked
unverified (fail-open, visibly); ``block`` refuses. Past ``latency_budget_ms`` the answer is
returned marked unverified — never a hang.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import structlog

from groundproxy.guards.cache import CachingVerifier, VerdictCache
from groundproxy.guards.errors import GroundproxyError, GuardTimeoutError
from groundproxy.guards.pipeline import run_guard, unverified_report
from groundproxy.guards.types import Embedder, EvidenceSource, GuardReport, Verifier
from groundproxy.models.batching import BatchingEmbedder, BatchingVerifier, BatchOptions
from groundproxy.models.registry import VerifierRegistry, models_dir_for
from groundproxy.policies.schema import Policy, local_policy
from groundproxy.proxy.metrics import METRICS
from groundproxy.proxy.storage import EmbeddedStorage, Storage

log = structlog.get_logger(__name__)


class GuardService:
    """Process-wide guard resources: embedder, verifiers, tenant indexes.

    With ``batch_window_ms > 0`` the embedder's and the verifiers' calls from concurrent
    guards are micro-batched (models.batching; batch sizes in ``groundproxy_batch_size``).
    """

    def __init__(
        self,
        data_dir: Path,
        embedder: Embedder,
        *,
        batch_window_ms: float = 0.0,
        batch_max: int = 64,
        storage: Storage | None = None,
    ) -> None:
        self._window_s = batch_window_ms / 1000.0
        self._batch_max = batch_max
        self._batching: list[BatchingEmbedder | BatchingVerifier] = []
        self._batched_verifiers: dict[str, BatchingVerifier] = {}
        self._batch_lock = threading.Lock()
        self._in_flight = 0  # guards running now: the most callers a batch can wait for
        if self._window_s > 0:
            batched = BatchingEmbedder(embedder, self._options("embedder"))
            self._batching.append(batched)
            embedder = batched
        self.embedder = embedder
        self.verifiers = VerifierRegistry(models_dir_for(data_dir))
        storage = storage or EmbeddedStorage(data_dir)  # Postgres when the setting names one
        self.indexes = storage.indexes(embedder)
        self.calibrations = storage.calibrations()  # verifier.threshold: calibrated
        # Tenant-scoped LRU of verifier outputs; stats() → logs (and metrics exporters).
        self.verdict_cache = VerdictCache()

    def warm_up(self, verifier_names: Sequence[str]) -> list[str]:
        """Load the policies' verifiers up front; a bad name is reported, not fatal (the
        tenants using it get their policy's ``on_guard_error`` behaviour)."""
        errors: list[str] = []
        for name in verifier_names:
            try:
                self.verifiers.get(name)
            except GroundproxyError as exc:
                errors.append(exc.message)
                log.error("verifier_not_loaded", verifier=name, error=exc.message)
        for name in verifier_names:
            if name in self.verifiers.loaded():
                self._warm_run(name)
        return errors

    def _warm_run(self, verifier_name: str) -> None:
        """One full guard on a tiny sample: first requests pay no lazy-import cost."""
        policy = local_policy("warmup", verifier={"model": verifier_name})
        run_guard(
            "The warranty lasts 12 months. It covers 3 parts made by Acme in Paris.",
            question="How long is the warranty?",
            context_messages=[("system", "The warranty lasts 12 months from purchase.")],
            policy=policy,
            verifier=self.verifier(verifier_name),
            embedder=self.embedder,
            index=None,
        )

    def verifier(self, name: str) -> Verifier:
        """The verifier ``name``, micro-batched across requests when batching is on."""
        inner = self.verifiers.get(name)
        if self._window_s <= 0:
            return inner
        with self._batch_lock:
            batched = self._batched_verifiers.get(name)
            if batched is None or batched.inner is not inner:
                batched = BatchingVerifier(inner, self._options("verifier"))
                self._batched_verifiers[name] = batched
                self._batching.append(batched)
            return batched

    def _options(self, model: str) -> BatchOptions:
        observe = functools.partial(METRICS.observe_model_batch, model)
        return BatchOptions(self._window_s, self._batch_max, observe, lambda: self._in_flight)

    def close(self) -> None:
        """Stop the micro-batching workers (calls still queued fail as guard errors)."""
        with self._batch_lock:
            batching, self._batching = self._batching, []
        for b in batching:
            b.close()

    def _index_for(self, policy: Policy) -> EvidenceSource | None:
        index = self.indexes.get(policy.index_name)
        return index if index.count > 0 else None

    def guard_sync(
        self,
        answer: str,
        question: str | None,
        context: Sequence[tuple[str, str]],
        policy: Policy,
    ) -> GuardReport:
        verifier = self.verifier(policy.verifier.model)
        cached = CachingVerifier(verifier, self.verdict_cache, policy.tenant)
        with self._batch_lock:
            self._in_flight += 1
        try:
            report = run_guard(
                answer,
                question=question,
                context_messages=context,
                policy=policy,
                verifier=cached,
                embedder=self.embedder,
                index=self._index_for(policy),
                threshold=self.calibrations.threshold_for(policy, verifier.name),
            )
        finally:
            with self._batch_lock:
                self._in_flight -= 1
        stats = self.verdict_cache.stats()
        log.info(
            "verdict_cache",
            hits=cached.hits,
            misses=cached.misses,
            hit_rate=stats["hit_rate"],
            size=stats["size"],
        )
        return report

    async def guard(
        self,
        answer: str,
        question: str | None,
        context: Sequence[tuple[str, str]],
        policy: Policy,
    ) -> GuardReport:
        """Guard in a worker thread; budget and errors handled per the policy."""
        if not policy.guard:
            return unverified_report(answer, policy, "guard disabled by policy")
        budget_s = policy.latency_budget_ms / 1000.0
        call = functools.partial(self.guard_sync, answer, question, list(context), policy)
        started = time.perf_counter()
        try:
            with anyio.fail_after(budget_s):
                report = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
            METRICS.observe_guard(policy.tenant, report, time.perf_counter() - started)
            return report
        except TimeoutError:
            log.warning("guard_budget_exceeded", budget_ms=policy.latency_budget_ms)
            exc: Exception = GuardTimeoutError(
                f"guard exceeded the latency budget of {policy.latency_budget_ms} ms"
            )
        except Exception as err:
            log.warning(
                "guard_failed",
                error_type=type(err).__name__,
                error=err.message if isinstance(err, GroundproxyError) else str(err)[:200],
            )
            exc = err
        report = self._on_error(answer, policy, exc)
        METRICS.observe_guard(policy.tenant, report, time.perf_counter() - started)
        return report

    @staticmethod
    def _on_error(answer: str, policy: Policy, exc: Exception) -> GuardReport:
        reason = exc.message if isinstance(exc, GroundproxyError) else type(exc).__name__
        report = unverified_report(answer, policy, reason)
        if policy.on_guard_error == "block" and not isinstance(exc, GuardTimeoutError):
            report.text = policy.actions.refusal
            report.action = "block"
            report.blocked = True
        return report
