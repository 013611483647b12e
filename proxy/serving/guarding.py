"""The guard service: the pipeline (:mod:`proxy.serving.pipeline`) with its life around it —
warm-up, admission at a request's arrival, metrics, shutdown. :func:`build_guard` wires a
guard outside the app (the CLI's ``check``, ``eval``, ``calibrate``, the benchmarks) from
:func:`proxy.serving.guard_build.guard_inputs`; the app's comes from :class:`proxy.deps.Deps`'
parts (:func:`assemble_guard`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Unpack

import structlog

from groundproxy.errors import GroundproxyError
from groundproxy.guards.types import Embedder, GuardReport, Verifier
from groundproxy.policies.schema import Policy, local_policy
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.serving.admission import Held, take_place
from groundproxy.proxy.serving.guard_build import GuardInputs, Meters, build_parts, guard_inputs
from groundproxy.proxy.serving.judging import JudgeService, rate_limiter
from groundproxy.proxy.serving.pipeline import (
    Context,
    GuardPipeline,
    VerifyOptions,
    off_loop,
)
from groundproxy.proxy.serving.rungs import warm_strong
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.backends import GuardStorage, LabelStorage
from groundproxy.proxy.storage.judge_labels import JudgeLabels

log = structlog.get_logger(__name__)

__all__ = ["GuardService", "Held", "VerifyOptions", "assemble_guard", "build_guard", "off_loop"]


class GuardService(GuardPipeline):
    """Guards answers with the parts :func:`assemble_guard` was given."""

    def __enter__(self) -> GuardService:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def warm_up(self, verifier_names: Sequence[str], strong: Sequence[str] = ()) -> list[str]:
        """Load the policies' verifiers (and their ladders' ``strong`` ones) up front; a bad
        name is reported, not fatal (the tenants using it get their policy's
        ``on_guard_error`` behaviour; a bad strong one, fast verdicts marked ``error``)."""
        errors = warm_strong(self.parts, strong)
        registry = self.parts.verifiers
        for name in verifier_names:
            try:
                registry.get(name)
            except GroundproxyError as exc:
                errors.append(exc.message)
                log.error("verifier_not_loaded", verifier=name, error=exc.message)
        for name in verifier_names:
            if name in registry.loaded():  # one full guard: no lazy-import cost later
                self.guard_sync(
                    "The warranty lasts 12 months. It covers 3 parts made by Acme in Paris.",
                    "How long is the warranty?",
                    [("system", "The warranty lasts 12 months from purchase.")],
                    local_policy("warmup", verifier={"model": name, "ladder": {"strong": "none"}}),
                    index=None,
                    cache=False,
                )
        return errors

    @property
    def meters(self) -> Meters:
        """The ladder's strong verifiers' cost meters (``GuardParts.meters``)."""
        return self.parts.meters

    def verifier(self, name: str) -> Verifier:
        """The verifier ``name``, micro-batched when batching is on (``GuardParts.verifier``)."""
        return self.parts.verifier(name)

    def close(self) -> None:
        """Stop the micro-batching workers (calls still queued fail as guard errors)."""
        self.parts.batching.close()

    def guard_sync(
        self, answer: str, question: str | None, context: Context, policy: Policy,
        logprobs: object = None, **options: Unpack[VerifyOptions],
    ) -> GuardReport:  # fmt: skip
        """Stage 1 and the decision, in the caller's thread (the CLI, eval, calibrate,
        benchmarks); ``options`` as :meth:`verify_sync`'s, ``logprobs`` as :meth:`finish`'s."""
        verified = self.verify_sync(answer, question, context, policy, **options)
        return self.finish(verified, policy, logprobs)

    def decides_per_answer(self, policy: Policy) -> bool:
        """Is an answer-level decision in force (the tenant's adapter, or ``verifier.decision:
        learned``)? It needs the whole answer, so ``stream: sentence`` streams are guarded in
        buffer mode instead (proxy.routes.chat)."""
        if policy.verifier.decision == "learned":
            return True
        if self.adapters is None:
            return False
        try:
            return self.adapters.get(policy.tenant) is not None
        except GroundproxyError:  # unreadable: buffer mode, where on_guard_error decides
            return True

    @contextlib.asynccontextmanager
    async def arrival(self, policy: Policy) -> AsyncIterator[Held]:
        """A guarded request's admission, before its upstream call: ``on_overload: reject``
        past the budget raises OverloadedError (429, :meth:`admit`); ``queue`` holds the
        request until a guard starting now would end within the budget, at most
        ``max_queue_ms`` (:meth:`proxy.serving.admission.GuardQueue.hold`); the others reserve a
        place without waiting (:meth:`proxy.serving.admission.GuardQueue.reserve`). The place is
        given back when the request ends without its guard having taken it over — or, for a
        stream handed on with :meth:`Held.detach`, when the stream ends."""
        if not policy.guard:
            yield Held(None)
            return
        self.admit(policy)  # on_overload: reject → 429 here, before the upstream is called
        held = Held(await take_place(self.parts.queue, self.parts.metrics, policy))
        try:
            yield held
        finally:
            if not held.detached:
                held.release()


def build_guard(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    metrics: Metrics | None = None,
    models_dir: Path | None = None,
    storage: GuardStorage | None = None,
    labels: LabelStorage | None = None,
) -> GuardService:
    """A guard outside the app, from :func:`proxy.serving.guard_build.guard_inputs` (the
    parts ``settings`` name, each replaceable: ``embedder``, ``storage`` …)."""
    inputs = guard_inputs(
        settings, embedder=embedder, metrics=metrics, models_dir=models_dir, storage=storage,
        labels=labels,
    )  # fmt: skip
    return assemble_guard(settings, inputs)


def assemble_guard(settings: Settings, inputs: GuardInputs) -> GuardService:
    """The guard over ``inputs`` (built by the caller: :class:`proxy.deps.Deps`,
    :func:`build_guard`): its parts (:func:`proxy.serving.guard_build.build_parts`), the
    judge over ``inputs.judge`` (its rate limit shared by ``--workers N``), the labels'
    sink and the tenants' adapters from ``inputs.storage``."""
    parts = build_parts(settings, inputs)
    limiter = rate_limiter(settings.data, settings.workers)  # shared by --workers N
    judge = JudgeService(inputs.judge, parts.metrics, limiter=limiter)
    labels = inputs.labels
    sink = JudgeLabels(labels, parts.metrics) if labels is not None else None
    return GuardService(parts, inputs.storage.adapters(), judge, labels=sink)
