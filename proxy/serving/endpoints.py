"""The endpoints' serving objects, made once from the app's dependencies at start-up.

One object per endpoint (chat, responses, completions, embeddings, check), each owning
what it uses and all going through one :class:`proxy.serving.call.GuardedCall`; routes
(:mod:`proxy.routes`) only parse, authenticate and hand a :class:`Scope` to them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from groundproxy.proxy.serving.call import GuardedCall
from groundproxy.proxy.serving.chat import ChatServing
from groundproxy.proxy.serving.check import CheckServing
from groundproxy.proxy.serving.completions import CompletionsServing
from groundproxy.proxy.serving.embeddings import EmbeddingsServing
from groundproxy.proxy.serving.responses_serving import ResponsesServing

if TYPE_CHECKING:
    from groundproxy.proxy.deps import Deps


@dataclass(frozen=True)
class Serving:
    deps: Deps
    chat: ChatServing
    responses: ResponsesServing
    completions: CompletionsServing
    embeddings: EmbeddingsServing
    check: CheckServing


def make_serving(deps: Deps) -> Serving:
    metrics = deps.metrics
    call = GuardedCall(deps.guard, deps.traces, metrics, deps.clock)
    chat = ChatServing(call, deps.upstream, metrics)
    return Serving(
        deps=deps,
        chat=chat,
        responses=ResponsesServing(chat),
        completions=CompletionsServing(call, deps.upstream, metrics),
        embeddings=EmbeddingsServing(call, deps.upstream, metrics),
        check=CheckServing(call),
    )
