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

from quillian.errors import ConfigError
from quillian.methods.table import METHODS, method_spec
from quillian.server import models as m
from quillian.server.answering import answer, answer_events
from quillian.server.deps import Ctx, GrantDep, open_workspace
from quillian.server.failures import describe
from quillian.server.keys import Forbidden, Grant, Role
from quillian.server.sse import SSE_HEADERS, sse
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


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature, max_tokens... are accepted
    model: str
    messages: list[ChatMessageIn] = Field(min_length=1)
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


CHAT_STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A chat.completion, or with ``stream: true`` chat.completion.chunk "
        "events ending with ``data: [DONE]``.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}


@router.get("/models", response_model=ModelList)
def list_models(ctx: Ctx, grant: GrantDep) -> ModelList:
    """One model per method and workspace the key may read."""
    default = ctx.workspaces.default
    return ModelList(
        data=[
            ModelCard(id=model_id(name, None if ws == default else ws))
            for ws in ctx.workspaces.names
            if grant.sees(ws)
            for name in METHODS
        ]
    )


def _target(ctx: Ctx, grant: Grant, model: str) -> tuple[Workspace, str]:
    name, _, ws = model.partition("@")
    if not name.startswith(MODEL_PREFIX):
        raise ConfigError(f"unknown model {model!r}; models are quillian-METHOD (GET /v1/models)")
    method = method_spec(name.removeprefix(MODEL_PREFIX)).name
    if not ws and not grant.sees(ctx.workspaces.default):  # and not say its name
        raise Forbidden(
            f"API key {grant.key_id} has no access to the default workspace; "
            f"name yours: {name}@WORKSPACE (GET /v1/models)"
        )
    return open_workspace(ctx, grant, ws or ctx.workspaces.default, Role.READ), method


def _question(messages: list[ChatMessageIn]) -> str:
    for message in reversed(messages):
        if message.role != "user":
            continue
        if isinstance(message.content, str):
            return message.content
        parts = message.content or []
        return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
    raise ConfigError("the conversation has no user message to answer")


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


@router.post("/chat/completions", response_model=ChatCompletion, responses=CHAT_STREAM)
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

    def chunk(delta: dict[str, str], finish: str | None = None, **extra: Any) -> bytes:
        return sse(
            None,
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": body.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            },
        )

    async def events() -> AsyncIterator[bytes]:
        yield chunk({"role": "assistant"})
        async for event in answer_events(workspace.engine, request, timeout, describe):
            if event.name == "final" and isinstance(event.data, m.AnswerResponse):
                result = event.data
                yield chunk({"content": result.answer})
                extra = {"usage": _usage(result).model_dump(), "quillian": result.model_dump()}
                yield chunk({}, "stop", **extra)
            elif event.name == "error":
                yield sse(None, {"error": {"message": event.data["detail"], "type": "error"}})  # type: ignore[index]
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)


def _usage(result: m.AnswerResponse) -> ChatUsage:
    u = result.usage
    return ChatUsage(
        prompt_tokens=u.prompt_tokens,
        completion_tokens=u.completion_tokens,
        total_tokens=u.prompt_tokens + u.completion_tokens,
    )
