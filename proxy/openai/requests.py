"""The OpenAI request fields each route types, checked before anything is done with them.

The proxy forwards most of a request as the client sent it, but what it reads, translates
or would pass on malformed must have OpenAI's type (``shared/spec/openai-openapi.json``):
a wrong one is a 400 naming the field, never a 500 later (``/v1/responses`` with
``"tools": 5`` was one) and never a value the upstream gets to choke on
(``max_output_tokens: "lots"`` was forwarded). Unknown fields still pass through
(``extra="allow"``); these models only check, the routes keep the body as sent.

Integers and booleans are strict (``"2"`` is not ``n``; ``1`` is not ``true``); numbers
have the spec's ranges; lists and maps have bounds (``tools`` ≤ 128 as OpenAI documents,
``metadata`` ≤ 16 pairs, ``stop`` ≤ 4, inputs ≤ 2048).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, StrictBool, StrictInt, Tag

from groundproxy.proxy.openai.bounds import MAX_TEXT, ModelName

Json = dict[str, Any]
Temperature = Annotated[float, Field(ge=0, le=2)]
TopP = Annotated[float, Field(ge=0, le=1)]
Penalty = Annotated[float, Field(ge=-2, le=2)]
Count = Annotated[StrictInt, Field(ge=1, le=128)]
Tokens = Annotated[StrictInt, Field(ge=0)]
Metadata = Annotated[dict[str, Annotated[str, Field(max_length=512)]], Field(max_length=16)]
Stop = str | Annotated[list[str], Field(max_length=4)]
User = Annotated[str, Field(max_length=MAX_TEXT)]


class _Checked(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class StreamOptions(_Checked):
    include_usage: StrictBool | None = None


class _Sampling(_Checked):
    """What chat and text completions share."""

    stream: StrictBool | None = None
    stream_options: StreamOptions | None = None
    n: Count | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    max_tokens: Tokens | None = None
    seed: StrictInt | None = None
    stop: Stop | None = None
    user: User | None = None
    logit_bias: dict[str, StrictInt | float] | None = None


class ChatFunction(_Checked):
    name: str
    description: str | None = None
    parameters: Json | None = None
    strict: StrictBool | None = None


class ChatTool(_Checked):
    type: str
    function: ChatFunction | None = None


class ChatOptions(_Sampling):
    """``POST /v1/chat/completions``: the fields beside ``model`` / ``messages``."""

    max_completion_tokens: Tokens | None = None
    logprobs: StrictBool | None = None
    top_logprobs: Annotated[StrictInt, Field(ge=0, le=20)] | None = None
    response_format: Annotated[Json, Field(min_length=1)] | None = None
    tools: Annotated[list[ChatTool], Field(max_length=128)] | None = None
    tool_choice: str | Json | None = None
    parallel_tool_calls: StrictBool | None = None
    metadata: Metadata | None = None
    store: StrictBool | None = None


class CompletionsRequest(_Sampling):
    """``POST /v1/completions``."""

    model: ModelName
    prompt: Any = None  # its forms are the route's (proxy.serving.completions.prompt_list)
    logprobs: Annotated[StrictInt, Field(ge=0, le=5)] | None = None
    echo: StrictBool | None = None
    suffix: str | None = None
    best_of: Annotated[StrictInt, Field(ge=0, le=20)] | None = None


class EmbeddingsRequest(_Checked):
    """``POST /v1/embeddings``."""

    model: ModelName
    input: (
        Annotated[str, Field(min_length=1)]
        | Annotated[list[str], Field(min_length=1, max_length=2048)]
        | Annotated[list[StrictInt], Field(min_length=1)]
        | Annotated[list[list[StrictInt]], Field(min_length=1, max_length=2048)]
    )
    encoding_format: Literal["float", "base64"] | None = None
    dimensions: Annotated[StrictInt, Field(ge=1)] | None = None
    user: User | None = None


class InputItem(_Checked):
    """One item of a Responses ``input``: a message, or a type :func:`proxy.serving.responses.
    to_chat` refuses by name (a function call and its output have their own models)."""

    type: str = "message"
    role: Literal["user", "assistant", "system", "developer"] | None = None
    content: str | list[Json] | None = None
    name: str | None = None
    arguments: str | None = None
    call_id: str | None = None
    output: str | list[Json] | None = None


class FunctionCallItem(_Checked):
    """A ``function_call`` input item: the spec's ``FunctionToolCall`` requires ``call_id``,
    ``name`` and ``arguments`` (a null one is a 400 naming it, never a tool call with no
    name sent upstream)."""

    type: Literal["function_call"]
    call_id: str
    name: Annotated[str, Field(min_length=1)]
    arguments: str


class FunctionCallOutputItem(_Checked):
    type: Literal["function_call_output"]
    call_id: str | None = None
    output: str | list[Json] | None = None


def _item_kind(item: Any) -> str:
    kind = item.get("type", "message") if isinstance(item, dict) else None
    return kind if kind in ("function_call", "function_call_output") else "other"


Item = Annotated[
    Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[InputItem, Tag("other")],
    Discriminator(_item_kind),
]


class ResponsesTool(_Checked):
    type: str
    name: str | None = None
    description: str | None = None
    parameters: Json | None = None
    strict: StrictBool | None = None


class PlainFormat(_Checked):
    # json_schema is listed so that an unknown type's error names all three (it never
    # lands here: _format_kind sends it to JsonSchemaFormat)
    type: Literal["text", "json_object", "json_schema"]


class JsonSchemaFormat(_Checked):
    """``text.format`` of type ``json_schema``: the spec requires ``name`` (letters,
    digits, ``_`` and ``-``, at most 64) and ``schema``."""

    type: Literal["json_schema"]
    name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
    schema_: Json = Field(alias="schema")
    description: str | None = None
    strict: StrictBool | None = None


def _format_kind(fmt: Any) -> str:
    return "json_schema" if isinstance(fmt, dict) and fmt.get("type") == "json_schema" else "plain"


TextFormat = Annotated[
    Annotated[JsonSchemaFormat, Tag("json_schema")] | Annotated[PlainFormat, Tag("plain")],
    Discriminator(_format_kind),
]


class TextConfig(_Checked):
    format: TextFormat | None = None


class FunctionChoice(_Checked):
    """``tool_choice`` naming a function (``custom``: a custom tool): ``name`` is required."""

    type: Literal["function", "custom"]
    name: Annotated[str, Field(min_length=1)]


class McpChoice(_Checked):
    type: Literal["mcp"]
    server_label: str
    name: str | None = None


class AllowedChoice(_Checked):
    type: Literal["allowed_tools"]
    mode: Literal["auto", "required"]
    tools: list[Json]


class HostedChoice(_Checked):
    """A built-in tool (``ToolChoiceTypes``). The other types are listed so that an unknown
    type's error names every one (they never land here: :func:`_choice_kind` routes them)."""

    type: Literal[
        "file_search", "web_search_preview", "computer", "computer_use_preview",
        "computer_use", "web_search_preview_2025_03_11", "image_generation", "code_interpreter",
        "function", "custom", "mcp", "allowed_tools",
    ]  # fmt: skip


def _choice_kind(choice: Any) -> str:
    if not isinstance(choice, dict):
        return "mode"
    kind = choice.get("type")
    if kind in ("function", "custom"):
        return "function"
    return kind if kind in ("mcp", "allowed_tools") else "hosted"


#: the spec's ``ToolChoiceParam``: a mode, or an object of a known type with the fields
#: that type requires (an unknown type: 400 naming ``tool_choice.type``)
ToolChoice = Annotated[
    Annotated[Literal["none", "auto", "required"], Tag("mode")]
    | Annotated[FunctionChoice, Tag("function")]
    | Annotated[McpChoice, Tag("mcp")]
    | Annotated[AllowedChoice, Tag("allowed_tools")]
    | Annotated[HostedChoice, Tag("hosted")],
    Discriminator(_choice_kind),
]


class ResponsesRequest(_Checked):
    """``POST /v1/responses``: what :func:`proxy.serving.responses.to_chat` translates."""

    model: ModelName
    input: Annotated[str, Field(min_length=1)] | Annotated[list[Item], Field(min_length=1)]
    instructions: str | None = None
    max_output_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    tools: Annotated[list[ResponsesTool], Field(max_length=128)] | None = None
    tool_choice: ToolChoice | None = None
    text: TextConfig | None = None
    metadata: Metadata | None = None
    user: User | None = None
    parallel_tool_calls: StrictBool | None = None
    store: StrictBool | None = None
    stream: StrictBool | None = None
    previous_response_id: str | None = None
