"""Validate response bodies and stream chunks against OpenAI's own OpenAPI spec
(vendored in ``tests/data/spec/openai-openapi.json``, MIT, from openai/openai-openapi; OpenAPI
3.1 that still uses 3.0's ``nullable``).

The spec is loaded once and made a plain JSON Schema (draft 2020-12): ``nullable: true``
becomes a ``null`` alternative (on ``type``, ``enum``, or around a ``$ref``). ``$ref`` s
resolve against the spec's own ``components`` (the whole spec is the root resource).

    check("CreateChatCompletionResponse", body)     # raises SpecError naming every problem
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

SPEC = Path(__file__).resolve().parent / "data" / "spec" / "openai-openapi.json"


class SpecError(AssertionError):
    pass


def _nullable(node: Any) -> Any:
    """3.0 ``nullable`` → 2020-12 (recursively)."""
    if isinstance(node, list):
        return [_nullable(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _nullable(v) for k, v in node.items()}
    if out.pop("nullable", False) is not True:
        return out
    if "$ref" in out or ("type" not in out and ("allOf" in out or "oneOf" in out)):
        return {"anyOf": [out, {"type": "null"}]}
    kind = out.get("type")
    if isinstance(kind, str):
        out["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        out["type"] = [*kind, "null"]
    if isinstance(out.get("enum"), list) and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


@functools.cache
def _spec() -> dict[str, Any]:
    spec = json.loads(SPEC.read_text(encoding="utf-8"))
    return {"components": _nullable(spec["components"])}


@functools.cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    spec = _spec()
    if name not in spec["components"]["schemas"]:
        raise KeyError(f"no schema {name!r} in the spec")
    root = {**spec, "$ref": f"#/components/schemas/{name}"}
    return jsonschema.Draft202012Validator(root)


def problems(name: str, instance: Any) -> list[str]:
    """Every way ``instance`` breaks the schema ``name`` ([] when it validates)."""
    errors = sorted(_validator(name).iter_errors(instance), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors]


def check(name: str, instance: Any) -> None:
    """Raise :class:`SpecError` unless ``instance`` validates against ``name``."""
    found = problems(name, instance)
    if found:
        raise SpecError(f"{name}: " + "; ".join(found[:10]))


def sse_events(text: str) -> list[Any]:
    """The JSON payloads of an SSE body (``[DONE]`` left out)."""
    out = []
    for line in text.splitlines():
        if line.startswith("data: ") and line[6:].strip() != "[DONE]":
            out.append(json.loads(line[6:]))
    return out


def check_stream(text: str) -> list[dict[str, Any]]:
    """Every chunk of a chat stream validates (an ``error`` event as ``ErrorResponse``);
    returns the chunks."""
    chunks = []
    for event in sse_events(text):
        if "error" in event and "choices" not in event:
            check("ErrorResponse", event)
            continue
        check("CreateChatCompletionStreamResponse", event)
        chunks.append(event)
    return chunks


# What each OpenAI route answers: (the body's schema, each streamed event's schema).
ROUTES: dict[str, tuple[str, str | None]] = {
    "/chat/completions": ("CreateChatCompletionResponse", "CreateChatCompletionStreamResponse"),
    "/completions": ("CreateCompletionResponse", "CreateCompletionResponse"),
    "/responses": ("Response", "ResponseStreamEvent"),
    "/embeddings": ("CreateEmbeddingResponse", None),
    "/models": ("ListModelsResponse", None),
}
CHECKED: dict[str, int] = {}  # schema name → instances validated so far (this process)


def _route(path: str) -> tuple[str, str | None] | None:
    bare = path.removeprefix("/v1")
    if bare.startswith("/models/") and bare.count("/") == 2:
        return ("Model", None)
    return ROUTES.get(bare)


@functools.cache
def _event_schemas() -> dict[str, str]:
    """Responses stream event ``type`` → its schema (ResponseStreamEvent's alternatives)."""
    schemas = _spec()["components"]["schemas"]
    out = {}
    for alt in schemas["ResponseStreamEvent"]["anyOf"]:
        name = alt["$ref"].rsplit("/", 1)[1]
        kind = schemas[name].get("properties", {}).get("type", {})
        for value in kind.get("enum", []) + ([kind["const"]] if "const" in kind else []):
            out[value] = name
    return out


def _counted(name: str, instance: Any) -> None:
    if name == "ResponseStreamEvent":  # the one alternative its type names: precise errors
        if not isinstance(instance, dict) or instance.get("type") not in _event_schemas():
            raise SpecError(f"ResponseStreamEvent: unknown event {str(instance)[:200]}")
        name = _event_schemas()[instance["type"]]
    check(name, instance)
    CHECKED[name] = CHECKED.get(name, 0) + 1


def check_exchange(method: str, path: str, status: int, content_type: str, body: bytes) -> None:
    """Validate one HTTP answer the proxy gave: an OpenAI route's body or every streamed
    event against its schema, and any JSON error (any route) as ``ErrorResponse``."""
    route = _route(path)
    if "text/event-stream" in content_type:
        if route is None or route[1] is None:
            return
        for event in sse_events(body.decode("utf-8")):
            is_error = "error" in event and "choices" not in event and "type" not in event
            _counted("ErrorResponse" if is_error else route[1], event)
        return
    if not content_type.startswith("application/json") or method == "HEAD" or not body:
        return
    doc = json.loads(body)
    if status >= 400:
        if isinstance(doc, dict) and "error" in doc:
            _counted("ErrorResponse", doc)
        return
    if route is not None and method in ("GET", "POST"):
        _counted(route[0], doc)
