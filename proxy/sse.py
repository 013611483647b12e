"""Server-sent events for ``stream: true`` responses (OpenAI's chunk format)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from groundproxy.proxy.upstream import StreamDelta

_PIECE = re.compile(r"\S+\s*|\s+")


def sse(data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {payload}\n\n".encode()


class ChunkWriter:
    """The chunks of one incremental stream (sentence mode, relay): OpenAI's chunk fields,
    with the id, created time, usage and finish reason the upstream reports as it goes."""

    def __init__(self, chunk_id: str, model: str) -> None:
        self.base: dict[str, Any] = {
            "id": chunk_id, "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model,
        }  # fmt: skip
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None

    def note(self, d: StreamDelta) -> bool:
        """Take what an upstream delta says about the stream; True for choice 0's deltas."""
        if d.id:
            self.base["id"] = d.id
        if d.created:
            self.base["created"] = d.created
        if d.usage:
            self.usage = d.usage
        if d.index != 0:
            return False
        if d.finish_reason:
            self.finish = d.finish_reason
        return True

    def chunk(self, delta: dict[str, Any]) -> bytes:
        return sse({**self.base, "choices": [
            {"index": 0, "delta": delta, "finish_reason": None}
        ]})  # fmt: skip

    def last(self, finish_reason: str, groundproxy: dict[str, Any]) -> bytes:
        """The final chunk: finish reason, usage when known, and the ``groundproxy`` object."""
        out: dict[str, Any] = {**self.base, "choices": [
            {"index": 0, "delta": {}, "finish_reason": finish_reason}
        ]}  # fmt: skip
        if self.usage:
            out["usage"] = self.usage
        out["groundproxy"] = groundproxy
        return sse(out)


def _pieces(text: str, words_per_piece: int = 4) -> Iterator[str]:
    words = _PIECE.findall(text)
    for i in range(0, len(words), words_per_piece):
        yield "".join(words[i : i + words_per_piece])


def completion_to_chunks(body: dict[str, Any]) -> Iterator[bytes]:
    """Re-emit a whole (guarded) completion as SSE chunks; ``groundproxy`` rides in the
    last chunk before ``[DONE]``."""
    base = {
        "id": body.get("id"),
        "object": "chat.completion.chunk",
        "created": body.get("created"),
        "model": body.get("model"),
    }
    choices = body.get("choices") or []
    for choice in choices:
        idx = choice.get("index", 0)
        message = choice.get("message") or {}
        yield sse(
            {
                **base,
                "choices": [
                    {
                        "index": idx,
                        "delta": {"role": message.get("role", "assistant"), "content": ""},
                        "finish_reason": None,
                    }
                ],
            }
        )
        for piece in _pieces(message.get("content") or ""):
            yield sse(
                {
                    **base,
                    "choices": [{"index": idx, "delta": {"content": piece}, "finish_reason": None}],
                }
            )
    last: dict[str, Any] = {
        **base,
        "choices": [
            {"index": c.get("index", 0), "delta": {}, "finish_reason": c.get("finish_reason")}
            for c in choices
        ],
    }
    if body.get("usage"):
        last["usage"] = body["usage"]
    if "groundproxy" in body:
        last["groundproxy"] = body["groundproxy"]
    yield sse(last)
    yield sse("[DONE]")
