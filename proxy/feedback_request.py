"""The body of ``POST /v1/groundproxy/feedback`` as a client may send it.

Types and bounds (:mod:`proxy.openai.bounds`) are checked here, before anything is looked up or
stored: every text a label stores is bounded and free of control characters; ``context``
is at most ``MAX_CONTEXT_ITEMS`` strings; ``label_hallucinated`` is the integer 0 or 1 (not
``true``, not ``1.0``); a ``step_id`` has the server's form. What the fields mean together
(which label wins, an answer or an id) is :mod:`proxy.storage.feedback`'s and the route's.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, StringConstraints

from groundproxy.proxy.openai.bounds import (
    MAX_CLAIM_CHARS,
    MAX_CLAIMS,
    ContextItems,
    StoredNonEmpty,
    StoredText,
    storable,
)
from groundproxy.proxy.openai.chat_request import validated

Label = Literal["supported", "hallucinated"]
ClaimText = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_CLAIM_CHARS), AfterValidator(storable)
]


class LabelledClaim(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: ClaimText
    label: Label


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: StoredNonEmpty | None = None
    question: StoredText | None = None
    context: ContextItems | None = None  # a single string is taken as a list of one
    label: Label | None = None
    label_hallucinated: Annotated[StrictInt, Field(ge=0, le=1)] | None = None
    claims: Annotated[list[LabelledClaim], Field(min_length=1, max_length=MAX_CLAIMS)] | None = None
    # the ids the proxy returns: x-request-id as it echoes it, x-groundproxy-step-id
    request_id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{1,128}$")] | None = None
    step_id: Annotated[str, StringConstraints(pattern=r"^st_[0-9a-f]{16}$")] | None = None
    logprobs: dict[str, Any] | list[Any] | None = None


_MESSAGES = {
    "extra_forbidden": "'{param}' is not a field of feedback",
    "string_pattern_mismatch": "'{param}' is not an id the proxy returned "
    "(x-request-id: 1-128 of A-Za-z0-9._:-; x-groundproxy-step-id: st_ + 16 hex digits)",
}


def check_feedback(data: dict[str, Any]) -> FeedbackRequest:
    """``data`` checked (400 naming the first bad field)."""
    if isinstance(data.get("context"), str):
        data = {**data, "context": [data["context"]]}
    return validated(FeedbackRequest, data, _MESSAGES)
