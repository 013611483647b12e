"""``EventStreamResponse``: a server-sent-events response that always closes its source.

uvicorn (ASGI 2.4) reports a client that hung up by raising from ``send()``; Starlette's
``StreamingResponse`` then leaves its body iterator suspended at a ``yield``, so the
iterator's ``finally`` blocks — closing the upstream stream, giving back the arrival hold's
place — would run only when the garbage collector finds it, seconds or minutes later, while
the upstream keeps generating for nobody. This response closes the iterator as soon as the
response ends, whatever ended it (shielded: the close must run inside a cancelled scope too).
"""

from __future__ import annotations

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

__all__ = ["EventStreamResponse"]


class EventStreamResponse(StreamingResponse):
    media_type = "text/event-stream"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            close = getattr(self.body_iterator, "aclose", None)
            if close is not None:
                with anyio.CancelScope(shield=True):
                    await close()
