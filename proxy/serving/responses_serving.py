"""``POST /v1/responses`` served: the Responses API, guarded like a chat answer.

Translated into one chat completion and back (:mod:`proxy.serving.responses`), guarded by
:meth:`proxy.serving.chat.ChatServing.complete` through the one guarded call. The verdict
rides in the ``x-groundproxy-*`` headers and the response's ``groundproxy`` object.
``stream: true`` is answered in buffer mode: the answer is guarded whole, then sent as the
Responses API's events (:mod:`proxy.streaming.responses_events`).
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.responses import JSONResponse, Response

from groundproxy.proxy.openai.chat_request import checked, parse_chat_request
from groundproxy.proxy.openai.requests import ResponsesRequest
from groundproxy.proxy.serving.call import Scope
from groundproxy.proxy.serving.chat import ChatServing, Completed
from groundproxy.proxy.serving.guarding import Held
from groundproxy.proxy.serving.headers import NO_BUFFERING
from groundproxy.proxy.serving.responses import to_chat, to_response
from groundproxy.proxy.streaming.event_stream import EventStreamResponse
from groundproxy.proxy.streaming.responses_events import response_events


class ResponsesServing:
    """The Responses API over chat completions (:class:`ChatServing`)."""

    def __init__(self, chat: ChatServing) -> None:
        self.chat = chat

    async def create(self, scope: Scope, data: dict[str, Any]) -> Response:
        checked(ResponsesRequest, data)  # wrong types: 400 naming the field
        req = parse_chat_request(to_chat(data))
        scope.model = req.model
        stream = bool(data.get("stream"))

        async def whole(held: Held) -> Completed:
            return await self.chat.complete(scope, req, deadline=stream)

        done = await self.chat.call.run(scope, whole)
        if isinstance(done, Response):
            return done  # 499: the client went away
        response = to_response(data, done.body, f"resp_{uuid.uuid4().hex}")
        if not stream:
            return JSONResponse(response, headers=done.headers)
        return EventStreamResponse(
            response_events(response),
            media_type="text/event-stream",
            headers={**done.headers, **NO_BUFFERING},
        )
