"""A scripted OpenAI-compatible upstream, run as a real HTTP server process.

Used by ``groundproxy demo`` (when no ``OPENAI_API_KEY`` is set), by the end-to-end
tests and by the benchmarks. Answers come from a JSON script: a list of
``{"match": "substring of the last user message", "answer": "..."}``; the first match wins,
else the default answer. A rule may answer with tool calls too:
``"tool_calls": [{"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}]``
(``answer`` then is optional prose beside them; ``finish_reason`` is ``tool_calls``), or with
a legacy ``"function_call": {"name": ..., "arguments": ...}``. Answers carry
``system_fingerprint``. A rule may also script an odd answer: ``"body"`` is sent as the 200
body as it is (a JSON value, or a string sent verbatim: ``NaN``, broken JSON) to a plain
request — chat, ``/v1/completions`` (matched on the prompt) or ``/v1/embeddings`` (on the
input) — and ``"chunks"`` (each a JSON value or a verbatim string) are a stream's events
before ``[DONE]``. ``logprobs: true`` adds one logprob per word (the rule's ``"logprob"``,
default -0.5), and streams send a final
``choices: []`` usage chunk when ``stream_options.include_usage`` is set.
Model names switch on failure modes for tests:

- ``fail-500`` → HTTP 500 with an OpenAI error body
- ``fail-400`` → HTTP 400
- ``slow-<seconds>`` → sleeps before answering (``/v1/completions`` too)
- ``bad-json`` → a 200 whose body is not JSON (also to a streamed request)
- ``echo-key`` → HTTP 401 whose message echoes the ``Authorization`` header it received
  (and another key-shaped string), as some providers do
- ``cut-stream`` → a stream that stops mid-answer without ``[DONE]``
- ``drip-<seconds>`` → a stream that waits ``<seconds>`` before each word
- ``fail-429`` / ``fail-503`` → HTTP 429 / 503 with an OpenAI error body and ``retry-after: 7``
- ``fail-401`` / ``fail-403`` / ``fail-404`` / ``fail-409`` / ``fail-422`` → that status with
  the error body OpenAI sends for it (a wrong key: 401 ``invalid_api_key`` quoting a key; a
  wrong model name: 404 ``model_not_found``; :data:`CLIENT_ERRORS`)
- ``huge-error`` → HTTP 503 whose OpenAI error message is 3 MB of key-shaped text (the
  size that froze litellm's secret redaction on the event loop), ``retry-after: 7``

``POST /v1/embeddings`` answers a small deterministic vector per input (``embedding_body``;
base64 when ``encoding_format`` asks for it);
``POST /v1/completions`` (legacy text completions) answers the script's answer for the
prompt as ``choices[0].text`` (streamed too).

``GET /_stats`` counts requests ``started``/``finished``, those whose client went away while
waiting or streaming (``disconnected``), and ``inflight`` (for fault tests).

``GET /_last`` returns the last request body it received, ``GET /_last_headers`` its
headers (for pass-through tests).

Run: ``python -m groundproxy.testing.fake_upstream --port 8099 [--script FILE]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from groundproxy.testing.fake_bodies import (
    DEFAULT_ANSWER,
    completion_body,
    embedding_body,
    pick_rule,
    stream_chunks,
    text_completion_body,
)

HUGE_ERROR_BYTES = 3_000_000


def _huge_error() -> Response:
    """``huge-error``: a 3 MB OpenAI error body of key-shaped words (worst case for regexes)."""
    words = " ".join(f"token=sk-{i:012d}abcdefgh" for i in range(HUGE_ERROR_BYTES // 28))
    body = json.dumps({"error": {"message": words, "type": "overloaded", "param": None,
                                 "code": "overloaded"}})  # fmt: skip
    return Response(
        body, status_code=503, media_type="application/json", headers={"retry-after": "7"}
    )


# ``fail-NNN`` models: what OpenAI itself answers with that status (message, type, code)
CLIENT_ERRORS: dict[int, tuple[str, str, str | None]] = {
    401: (
        "Incorrect API key provided: sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz012345. You can find "
        "your API key at https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        "invalid_api_key",
    ),
    403: ("Project does not have access to model gpt-5.", "invalid_request_error", None),
    404: (
        "The model `gpt-4o-typo` does not exist or you do not have access to it.",
        "invalid_request_error",
        "model_not_found",
    ),
    409: ("Another request is updating this resource.", "invalid_request_error", "conflict"),
    422: ("Unprocessable: tools[0].function.name is empty.", "invalid_request_error", None),
}


def _status_error(status: int) -> JSONResponse:
    """``fail-429`` / ``fail-503``: an OpenAI error body and a ``retry-after`` header;
    ``fail-401`` … ``fail-422``: OpenAI's own error body for that status."""
    if status in CLIENT_ERRORS:
        message, kind, code = CLIENT_ERRORS[status]
        error = {"message": message, "type": kind, "param": None, "code": code}
        return JSONResponse({"error": error}, status_code=status)
    kind = "rate_limit_exceeded" if status == 429 else "overloaded"
    error = {"message": f"upstream says {kind}", "type": kind, "param": None, "code": kind}
    return JSONResponse({"error": error}, status_code=status, headers={"retry-after": "7"})


async def _stream(
    answer: str, model: str, cut: bool, drip_s: float, rule: dict[str, Any], body: dict[str, Any]
) -> AsyncIterator[bytes]:
    async for data in stream_chunks(answer, model, cut, drip_s, rule, body):
        yield f"data: {json.dumps(data)}\n\n".encode()
    if not cut:
        yield b"data: [DONE]\n\n"


async def _counted(stream: AsyncIterable[Any], stats: dict[str, int]) -> AsyncIterator[Any]:
    """Counts a stream the client abandoned (the generator is cancelled or closed early)."""
    finished = False
    try:
        async for piece in stream:
            yield piece
        finished = True
    finally:
        stats["inflight"] -= 1
        stats["finished" if finished else "disconnected"] += 1


async def _sleep_unless_disconnected(request: Request, seconds: float) -> bool:
    """Sleep; return False early if the client went away."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await request.is_disconnected():
            return False
        await asyncio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    return True


def _echo_key(request: Request) -> JSONResponse:
    received = request.headers.get("authorization", "")
    message = (
        f"Incorrect API key provided: {received}. Another project's key "
        "sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2 was also rejected."
    )
    return JSONResponse(
        {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        },
        status_code=401,
    )


def _verbatim(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _scripted(rule: dict[str, Any], stream: bool) -> Response | None:
    """A rule's scripted ``body`` (plain) or ``chunks`` (stream), sent as they are."""
    if stream and "chunks" in rule:

        async def events() -> AsyncIterator[bytes]:
            for chunk in rule["chunks"]:
                yield f"data: {_verbatim(chunk)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")
    if not stream and "body" in rule:
        return Response(_verbatim(rule["body"]), media_type="application/json")
    return None


def _as_chat(text: Any) -> dict[str, Any]:
    """A prompt or an embeddings input as a chat body, for the rules' ``match``."""
    text = text if isinstance(text, str) else " ".join(map(str, text or []))
    return {"messages": [{"role": "user", "content": text}]}


def build_app(script: list[dict[str, Any]], default: str = DEFAULT_ANSWER) -> Starlette:
    state: dict[str, Any] = {"last": None, "headers": None}
    stats = {"started": 0, "finished": 0, "disconnected": 0, "inflight": 0}

    async def chat(request: Request) -> Response:
        body = await request.json()
        state["last"], state["headers"] = body, dict(request.headers)
        model = str(body.get("model", ""))
        stats["started"] += 1
        stats["inflight"] += 1
        failing = ("fail-500", "fail-400", "fail-429", "fail-503", "bad-json", "echo-key",
                   "huge-error")  # fmt: skip
        if body.get("stream") and model not in failing:
            resp = await _answer(request, body, model)
            if isinstance(resp, StreamingResponse):
                resp.body_iterator = _counted(resp.body_iterator, stats)
                return resp
        else:
            resp = await _answer(request, body, model)
        stats["inflight"] -= 1
        stats["finished" if resp.status_code != 499 else "disconnected"] += 1
        return resp

    async def _answer(request: Request, body: dict[str, Any], model: str) -> Response:
        if model == "fail-500":
            return JSONResponse(
                {
                    "error": {
                        "message": "upstream exploded",
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                },
                status_code=500,
            )
        if model == "echo-key":
            return _echo_key(request)
        if model == "huge-error":
            return _huge_error()
        if model in ("fail-429", "fail-503") or model in {f"fail-{n}" for n in CLIENT_ERRORS}:
            return _status_error(int(model.removeprefix("fail-")))
        if model == "fail-400":
            return JSONResponse(
                {
                    "error": {
                        "message": "bad temperature",
                        "type": "invalid_request_error",
                        "param": "temperature",
                        "code": None,
                    }
                },
                status_code=400,
            )
        if model.startswith("slow-") and not await _sleep_unless_disconnected(
            request, float(model.removeprefix("slow-"))
        ):
            return Response(status_code=499)
        if model == "bad-json":
            return Response(b"{this is not json", media_type="application/json")
        rule = pick_rule(script, body, default)
        scripted = _scripted(rule, bool(body.get("stream")))
        if scripted is not None:
            return scripted
        answer = str(rule.get("answer") or "")
        if body.get("stream"):
            return StreamingResponse(
                _stream(
                    answer,
                    model,
                    cut=model == "cut-stream",
                    drip_s=float(model.removeprefix("drip-")) if model.startswith("drip-") else 0,
                    rule=rule,
                    body=body,
                ),
                media_type="text/event-stream",
            )
        return JSONResponse(completion_body(answer, model, rule, bool(body.get("logprobs"))))

    async def models(_: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": "demo-model", "object": "model", "created": 0, "owned_by": "fake"}],
            }
        )

    async def last(_: Request) -> Response:
        return JSONResponse(state["last"])

    async def last_headers(_: Request) -> Response:
        return JSONResponse(state["headers"])

    async def embeddings(request: Request) -> Response:
        body = await request.json()
        state["last"], state["headers"] = body, dict(request.headers)
        model = str(body.get("model", ""))
        if model.startswith("fail-"):
            status = int(model.removeprefix("fail-"))
            return _status_error(
                status if status in CLIENT_ERRORS else 429 if status == 429 else 503
            )
        scripted = _scripted(pick_rule(script, _as_chat(body.get("input")), default), False)
        if scripted is not None:
            return scripted
        return JSONResponse(
            embedding_body(body.get("input", ""), model, body.get("encoding_format"))
        )

    async def completions(request: Request) -> Response:
        body = await request.json()
        state["last"], state["headers"] = body, dict(request.headers)
        model = str(body.get("model", ""))
        if model.startswith("slow-") and not await _sleep_unless_disconnected(
            request, float(model.removeprefix("slow-"))
        ):
            return Response(status_code=499)
        rule = pick_rule(script, _as_chat(body.get("prompt", "")), default)
        scripted = _scripted(rule, bool(body.get("stream")))
        if scripted is not None:
            return scripted
        answer = str(rule.get("answer") or "")
        if not body.get("stream"):
            return JSONResponse(text_completion_body(answer, model))

        async def chunks() -> AsyncIterator[bytes]:
            async for data in stream_chunks(answer, model, cut=False):
                choice = data["choices"][0]
                text = choice["delta"].get("content", "")
                data["object"] = "text_completion"
                data["choices"] = [{"index": 0, "text": text, "logprobs": None,
                                    "finish_reason": choice["finish_reason"]}]  # fmt: skip
                yield f"data: {json.dumps(data)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    async def get_stats(_: Request) -> Response:
        return JSONResponse(stats)

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/_last", last),
            Route("/_last_headers", last_headers),
            Route("/_stats", get_stats),
        ]
    )


def load_script(path: Path | None) -> tuple[list[dict[str, Any]], str]:
    if path is None:
        return [], DEFAULT_ANSWER
    data = json.loads(path.read_text(encoding="utf-8"))
    return list(data.get("rules", [])), str(data.get("default", DEFAULT_ANSWER))


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    p = argparse.ArgumentParser(description="scripted OpenAI-compatible upstream")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8099)
    p.add_argument("--script", type=Path, default=None)
    args = p.parse_args(argv)
    rules, default = load_script(args.script)
    uvicorn.run(build_app(rules, default), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
