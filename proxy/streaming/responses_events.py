"""A whole (guarded) Responses API response as the Responses API's stream events.

``response.created`` … ``response.output_text.delta`` … ``response.completed`` (or
``response.incomplete``), each an ``event:`` line and a JSON ``data`` line with its
``sequence_number``; the last event's ``response`` carries ``groundproxy``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from groundproxy.proxy.openai.shape import message_item

_PIECE = re.compile(r"\S+\s*|\s+")
Json = dict[str, Any]


class _Events:
    """Numbered Responses API events (``event:`` line and JSON ``data``)."""

    def __init__(self) -> None:
        self.seq = 0

    def __call__(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _item_events(ev: _Events, index: int, item: Json) -> Iterator[bytes]:
    ids = {"item_id": item["id"], "output_index": index}
    if item["type"] == "message":
        text = item["content"][0]["text"] if item["content"] else ""
        yield ev("response.output_item.added", output_index=index,
                 item=message_item("", status="in_progress") | {"id": item["id"]})  # fmt: skip
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        yield ev("response.content_part.added", **ids, content_index=0, part=part)
        for piece in _PIECE.findall(text):
            yield ev("response.output_text.delta", **ids, content_index=0, delta=piece, logprobs=[])
        yield ev("response.output_text.done", **ids, content_index=0, text=text, logprobs=[])
        yield ev("response.content_part.done", **ids, content_index=0, part=item["content"][0])
    else:  # function_call
        added = {**item, "arguments": "", "status": "in_progress"}
        yield ev("response.output_item.added", output_index=index, item=added)
        args = item.get("arguments") or ""
        yield ev("response.function_call_arguments.delta", **ids, delta=args)
        yield ev(
            "response.function_call_arguments.done", **ids, name=item.get("name"), arguments=args
        )
    yield ev("response.output_item.done", output_index=index, item=item)


def response_events(response: Json) -> Iterator[bytes]:
    """The whole (guarded) response as the Responses API's stream events."""
    ev = _Events()
    start = {**response, "status": "in_progress", "output": []}
    for known_at_the_end in ("groundproxy", "usage"):  # the spec's usage is never null
        start.pop(known_at_the_end, None)
    yield ev("response.created", response=start)
    yield ev("response.in_progress", response=start)
    for index, item in enumerate(response["output"]):
        yield from _item_events(ev, index, item)
    done = "response.completed" if response["status"] == "completed" else "response.incomplete"
    yield ev(done, response=response)
