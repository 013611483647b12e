"""Validate response bodies and stream chunks against OpenAI's own OpenAPI spec
(``../shared/spec/openai-openapi.json``, OpenAPI 3.1 that still uses 3.0's ``nullable``).

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

SPEC = Path(__file__).resolve().parents[2] / "shared" / "spec" / "openai-openapi.json"


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
