"""``POST /v1/responses``: the Responses API, guarded like a chat answer.

Translated into one chat completion and back (:mod:`proxy.serving.responses`). The verdict
rides in the ``x-groundproxy-*`` headers and the response's ``groundproxy`` object.
``stream: true`` is answered in buffer mode: the answer is guarded whole, then sent as the
Responses API's events (``response.created`` … ``response.output_text.delta`` …
``response.completed``, whose ``response`` carries ``groundproxy``).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from groundproxy.proxy.auth import Tenant
from groundproxy.proxy.body import JsonBody
from groundproxy.proxy.protocol import parse_chat_request
from groundproxy.proxy.serving.chat import guarded_completion
from groundproxy.proxy.serving.disconnect import ClientDisconnected, cancel_on_disconnect
from groundproxy.proxy.serving.headers import NO_BUFFERING
from groundproxy.proxy.serving.responses import message_item, to_chat, to_response
from groundproxy.proxy.state import Ready, RequestId, State
from groundproxy.proxy.streaming.event_stream import EventStreamResponse

router = APIRouter()
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
        yield ev("response.function_call_arguments.done", **ids, arguments=args)
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


@router.post("/v1/responses", response_model=None)
async def responses(
    request: Request, loaded: Tenant, data: JsonBody, services: Ready, state: State, rid: RequestId
) -> Response:
    req = parse_chat_request(to_chat(data))
    upstream, guard = services
    try:
        async with guard.arrival(
            loaded.policy
        ):  # reject: 429; queue: wait (proxy.serving.admission)
            done = await cancel_on_disconnect(
                request,
                guarded_completion(
                    req,
                    loaded,
                    upstream,
                    guard,
                    state.metrics,
                    rid,
                    deadline=bool(data.get("stream")),
                ),
            )
    except ClientDisconnected:
        return Response(status_code=499)
    response = to_response(data, done.body, f"resp_{uuid.uuid4().hex}")
    if not data.get("stream"):
        return JSONResponse(response, headers=done.headers)
    return EventStreamResponse(
        response_events(response),
        media_type="text/event-stream",
        headers={**done.headers, **NO_BUFFERING},
    )
