"""OpenAI-compatible chat: ``GET /v1/models`` (one model per method, ``quillian-METHOD``,
with ``@WORKSPACE`` for any workspace but the first) and ``POST /v1/chat/completions``,
plain or streamed (``data: [DONE]`` at the end). The question is the last user message;
the citations, steps and subgraphs ride in the extra ``quillian`` field."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import JsonDict

from quillian.errors import ConfigError
from quillian.methods.table import METHODS, method_spec
from quillian.server import models as m
from quillian.server.answering import answer, answer_events
from quillian.server.deps import Ctx, GrantDep, open_workspace
from quillian.server.failures import NotFound
from quillian.server.keys import Forbidden, Grant, Role
from quillian.server.sse import DONE, SSE_HEADERS, EventStream, sse
from quillian.server.views import MODEL_PREFIX, model_id
from quillian.server.workspaces import Workspace

router = APIRouter(prefix="/v1", tags=["openai-compatible"])


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "quillian"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


#: What the conversation must hold: a user message with text (the question).
_USER_QUESTION: JsonDict = {
    "type": "object",
    "properties": {
        "role": {"const": "user"},
        "content": {"type": "string", "minLength": 1, "maxLength": 4000, "pattern": m.NOT_BLANK},
    },
    "required": ["role", "content"],
}


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    # temperature, max_tokens... are accepted; what is read has its type (strict)
    model_config = ConfigDict(extra="allow", strict=True)
    model: str = Field(description="quillian-METHOD or quillian-METHOD@WORKSPACE")
    messages: list[ChatMessageIn] = Field(
        min_length=1,
        description="the conversation; the question is its last user message with text",
        json_schema_extra={"contains": _USER_QUESTION},
    )
    stream: bool = False
    quillian: dict[str, Any] = Field(
        default_factory=dict, description="method options ({'k': 4}, 'retriever': 'ppr')"
    )


class ChatChoice(BaseModel):
    index: int = 0
    message: dict[str, str]
    finish_reason: str = "stop"


class ChatUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: ChatUsage
    quillian: m.AnswerResponse = Field(description="citations, steps, subgraphs, usage")


class ChunkDelta(BaseModel):
    role: str | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    finish_reason: str | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: ChatUsage | None = None
    quillian: m.AnswerResponse | None = Field(
        default=None, description="on the last chunk: citations, steps, subgraphs, usage"
    )


CHAT_EVENTS = EventStream(
    "A chat.completion, or with ``stream: true`` chat.completion.chunk events (or an "
    "error object) ending with ``data: [DONE]``.",
    ((None, ChatCompletionChunk), (None, m.OpenAIErrorBody)),
    done=True,
)


def model_ids(workspaces: list[str], shown: list[str] | None = None) -> list[str]:
    """The models: one per method and workspace of ``shown`` (default: all), the first
    workspace's unsuffixed."""
    return [
        model_id(name, None if ws == workspaces[0] else ws)
        for ws in (workspaces if shown is None else shown)
        for name in METHODS
    ]


@router.get("/models", response_model=ModelList)
def list_models(ctx: Ctx, grant: GrantDep) -> ModelList:
    """One model per method and workspace the key may read."""
    names = ctx.workspaces.names
    shown = [ws for ws in names if grant.sees(ws)]
    return ModelList(data=[ModelCard(id=name) for name in model_ids(names, shown)])


def _target(ctx: Ctx, grant: Grant, model: str) -> tuple[Workspace, str]:
    """The workspace and method a model names (an unknown one is a 404, as at OpenAI),
    for a key that may read that workspace."""
    name, _, ws = model.partition("@")
    unknown = f"unknown model {model!r}; models are quillian-METHOD (GET /v1/models)"
    if not name.startswith(MODEL_PREFIX):
        raise NotFound(unknown)
    try:
        method = method_spec(name.removeprefix(MODEL_PREFIX)).name
    except ConfigError:
        raise NotFound(unknown) from None
    if not ws and not grant.sees(ctx.workspaces.default):  # and not say its name
        raise Forbidden(
            f"API key {grant.key_id} has no access to the default workspace; "
            f"name yours: {name}@WORKSPACE (GET /v1/models)"
        )
    return open_workspace(ctx, grant, ws or ctx.workspaces.default, Role.READ), method


def _question(messages: list[ChatMessageIn]) -> str:
    """The last user message with text (a string, or its text parts)."""
    for message in reversed(messages):
        if message.role != "user":
            continue
        if isinstance(message.content, str):
            text = message.content
        else:
            parts = message.content or []
            text = "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
        if text.strip():
            return text
    raise ConfigError("the conversation has no user message with text to answer")


def _request(body: ChatRequest, method: str, stream: bool) -> m.AnswerRequest:
    options = dict(body.quillian)
    retriever = options.pop("retriever", None)
    return m.AnswerRequest(
        question=_question(body.messages),
        method=method,
        retriever=retriever,
        options=options,
        stream=stream,
    )


@router.post("/chat/completions", response_model=ChatCompletion, responses=CHAT_EVENTS.responses())
async def chat_completions(
    body: ChatRequest, ctx: Ctx, grant: GrantDep
) -> ChatCompletion | StreamingResponse:
    """Answer the last user message with the model's method (a key that may read the
    model's workspace)."""
    workspace, method = _target(ctx, grant, body.model)
    request = _request(body, method, body.stream)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    timeout = ctx.settings.request_timeout_s
    if not body.stream:
        result = await answer(workspace.engine, request, timeout)
        return ChatCompletion(
            id=completion_id,
            created=created,
            model=body.model,
            choices=[ChatChoice(message={"role": "assistant", "content": result.answer})],
            usage=_usage(result),
            quillian=result,
        )

    def chunk(delta: ChunkDelta, finish: str | None = None, **extra: Any) -> bytes:
        choice = ChunkChoice(delta=delta, finish_reason=finish)
        return sse(
            None,
            ChatCompletionChunk(
                id=completion_id, created=created, model=body.model, choices=[choice], **extra
            ),
        )

    async def events() -> AsyncIterator[bytes]:
        yield chunk(ChunkDelta(role="assistant"))
        async for event in answer_events(workspace.engine, request, timeout, ctx.describe):
            if isinstance(event.data, m.AnswerResponse):
                result = event.data
                yield chunk(ChunkDelta(content=result.answer))
                yield chunk(ChunkDelta(), "stop", usage=_usage(result), quillian=result)
            elif isinstance(event.data, m.StreamError):
                yield sse(None, m.openai_error(event.data.status, event.data.detail))
        yield DONE

    return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)


def _usage(result: m.AnswerResponse) -> ChatUsage:
    u = result.usage
    return ChatUsage(
        prompt_tokens=u.prompt_tokens,
        completion_tokens=u.completion_tokens,
        total_tokens=u.prompt_tokens + u.completion_tokens,
    )
