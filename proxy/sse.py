"""Server-sent events for ``stream: true`` responses (OpenAI's chunk format)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

_PIECE = re.compile(r"\S+\s*|\s+")


def sse(data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {payload}\n\n".encode()


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
