"""Which way a chat request is answered, chosen in one place: :func:`choose_mode`.

- ``buffer``: the whole answer is guarded, then sent (JSON, or re-sent as stream chunks);
- ``sentence``: each sentence is sent once verified (:mod:`proxy.serving.sentence`);
- ``relay``: an unguarded policy's stream, relayed as it comes (:mod:`proxy.serving.relay`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from groundproxy.proxy.openai.chat_request import ChatCompletionRequest
from groundproxy.proxy.openai.shape import is_json_request
from groundproxy.proxy.serving.headers import Mode

if TYPE_CHECKING:
    from groundproxy.proxy.serving.call import Scope
    from groundproxy.proxy.serving.guarding import GuardService


def asks_buffer(headers: Mapping[str, str]) -> bool:
    """The request header ``x-groundproxy-stream: buffer``: a client that reads the verdict
    from the headers only (LangChain keeps headers, never unknown body fields) asks for a
    sentence-mode tenant's stream to be guarded whole first (never the other way round)."""
    return headers.get("x-groundproxy-stream", "").strip().lower() == "buffer"


def choose_mode(req: ChatCompletionRequest, scope: Scope, guard: GuardService) -> Mode:
    """The mode of one chat request. Only a streamed request with one choice streams
    incrementally: relayed when the policy does not guard (``guard: false``), sentence by
    sentence under ``stream: sentence`` — unless the answer is JSON (``response_format``:
    guarded whole), the client asks for ``x-groundproxy-stream: buffer``, or an
    answer-level decision is in force (the tenant's adapter or ``verifier.decision:
    learned`` needs the whole answer). Everything else is buffered."""
    extra = req.passthrough()
    n = extra.get("n")
    single = n is None or (isinstance(n, int) and n <= 1)
    if not req.stream or not single:
        return "buffer"
    policy = scope.policy
    if not policy.guard:
        return "relay"
    if policy.stream != "sentence" or is_json_request(extra):
        return "buffer"
    if asks_buffer(scope.request.headers) or guard.decides_per_answer(policy):
        return "buffer"
    return "sentence"
