"""groundproxy as a LiteLLM proxy guardrail (``mode: post_call``, streaming included).

Each answer the LiteLLM proxy is about to return goes to groundproxy's
``POST /v1/groundproxy/check`` under the tenant of ``api_key``; the tenant policy's action is
applied to the response: the returned text replaces the content (rewritten with corrections,
annotated with citations, flagged), a ``block`` raises LiteLLM's guardrail error, and the
verdict travels as the ``x-groundproxy-*`` response headers (non-streamed responses) and as
a ``groundproxy`` object on the response (on a stream's chunk with the ``finish_reason``:
its last, unless the client asked for a usage chunk). LiteLLM's config::

    guardrails:
      - guardrail_name: groundproxy
        litellm_params:
          guardrail: groundproxy.integrations.litellm.GroundproxyGuardrail
          mode: post_call
          default_on: true
          api_base: http://groundproxy:8080
          api_key: os.environ/GROUNDPROXY_API_KEY
          unreachable_fallback: fail_closed   # or fail_open: answer passes, marked unverified

Needs only litellm and httpx at run time (never the groundproxy server).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from litellm.exceptions import GuardrailRaisedException
from litellm.integrations.custom_guardrail import CustomGuardrail

from groundproxy.integrations.check_client import (
    CheckClient,
    CheckError,
    CheckQuery,
    CheckResult,
)

UNVERIFIED_HEADERS = {"x-groundproxy-action": "unverified"}


class GroundproxyGuardrail(CustomGuardrail):
    def __init__(
        self,
        api_key: str | None = None,
        api_base: str | None = None,
        unreachable_fallback: str = "fail_closed",
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        self.groundproxy = CheckClient(api_base, api_key, timeout_s=timeout or 30.0)
        self.fail_open = unreachable_fallback == "fail_open"
        super().__init__(timeout=timeout, **kwargs)

    async def _check(
        self, answer: str, data: dict[str, Any], logprobs: object = None
    ) -> CheckResult:
        """The verdict for one answer (``logprobs``: its choice's, when the upstream sent
        them); unreachable groundproxy → block, or with ``unreachable_fallback: fail_open``
        the answer unchanged and marked unverified."""
        try:
            query = CheckQuery(
                answer, messages=data.get("messages"), model=data.get("model"), logprobs=logprobs
            )
            return await self.groundproxy.check(query, request_id=data.get("litellm_call_id"))
        except CheckError as exc:
            if not self.fail_open:
                raise GuardrailRaisedException(
                    self.guardrail_name, str(exc), status_code=503
                ) from exc
            return CheckResult(answer, "unverified", {"unverified": True}, UNVERIFIED_HEADERS)

    def _refuse(self, result: CheckResult) -> GuardrailRaisedException:
        return GuardrailRaisedException(
            self.guardrail_name,
            result.answer,
            should_wrap_with_default_message=False,
            status_code=400,
            blocked_content=True,
        )

    async def async_post_call_success_hook(
        self, data: dict[str, Any], user_api_key_dict: Any, response: Any
    ) -> Any:
        """A non-streamed chat completion: check each choice's text, apply the action."""
        first: CheckResult | None = None
        for choice in getattr(response, "choices", None) or []:
            message: Any = getattr(choice, "message", None)
            text = getattr(message, "content", None)
            if not isinstance(text, str) or not text.strip():
                continue
            result = await self._check(text, data, getattr(choice, "logprobs", None))
            if result.blocked:
                raise self._refuse(result)
            message.content = result.answer
            first = first or result
        if first is None:
            return response
        hidden = getattr(response, "_hidden_params", None)
        if isinstance(hidden, dict):  # LiteLLM sends these as response headers
            hidden.setdefault("additional_headers", {}).update(first.headers)
        response.groundproxy = first.groundproxy
        return response

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: AsyncIterator[Any], request_data: dict[str, Any]
    ) -> AsyncGenerator[Any, None]:
        """A stream: held until the whole answer is checked (a claim can only be judged
        once complete), then replayed with each choice's text replaced by the returned text."""
        chunks = [chunk async for chunk in response]
        texts: dict[int, str] = {}
        for chunk in chunks:
            for choice in getattr(chunk, "choices", None) or []:
                piece = getattr(getattr(choice, "delta", None), "content", None)
                if isinstance(piece, str):
                    texts[choice.index] = texts.get(choice.index, "") + piece
        results: dict[int, CheckResult] = {}
        for index, text in texts.items():
            if text.strip():
                results[index] = await self._check(text, request_data)
                if results[index].blocked:
                    raise self._refuse(results[index])
        verdict = next(iter(results.values()), None)
        last = _verdict_chunk(chunks)
        answered: set[int] = set()
        for n, chunk in enumerate(chunks, start=1):
            for choice in getattr(chunk, "choices", None) or []:
                delta: Any = getattr(choice, "delta", None)
                if choice.index in results and isinstance(getattr(delta, "content", None), str):
                    # the whole returned text in the choice's first content delta
                    first = choice.index not in answered
                    delta.content = results[choice.index].answer if first else ""
                    answered.add(choice.index)
            if n == last and verdict is not None:
                chunk.groundproxy = verdict.groundproxy
            yield chunk


def _verdict_chunk(chunks: list[Any]) -> int:
    """The 1-based position of the chunk that carries the verdict: the last one with a
    ``finish_reason`` (LiteLLM drops a trailing usage chunk it asked the upstream for when
    the client did not: a verdict there would be lost), else the last chunk."""
    ends = [
        n
        for n, chunk in enumerate(chunks, start=1)
        if any(getattr(c, "finish_reason", None) for c in getattr(chunk, "choices", None) or [])
    ]
    return ends[-1] if ends else len(chunks)
