"""Server-sent events: ``event: NAME`` and one line of JSON ``data`` per event, and how
a stream is published in the OpenAPI schema.

Every event a route sends is a pydantic model, so what is sent is what the schema says:
an :class:`EventStream` names each event and its data's model, and becomes the route's
``text/event-stream`` response, one schema per event (an object with ``event`` and a
``data`` string whose ``contentSchema`` is the model), as OpenAPI 3.1 describes a stream.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

__all__ = ["DONE", "SSE_HEADERS", "EventStream", "event_schemas", "sse"]

#: Headers of every event stream: no caching, no proxy buffering.
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

#: The OpenAI stream's last event.
DONE = b"data: [DONE]\n\n"

_REF = "#/components/schemas/{model}"


def sse(event: str | None, data: BaseModel) -> bytes:
    """One event; ``event`` None sends an unnamed one (the OpenAI stream's form).

    The JSON is ASCII, every other character escaped: a client that splits the stream
    with ``str.splitlines`` (httpx's ``iter_lines`` does) would break a line at a raw
    U+2028 or U+0085 in a passage or a title."""
    text = json.dumps(data.model_dump(mode="json"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


@dataclass(frozen=True)
class EventStream:
    """A stream's events: each name (None: unnamed) with its data's model (a name may
    come with several); ``done``: the stream ends with ``data: [DONE]``."""

    description: str
    events: tuple[tuple[str | None, type[BaseModel]], ...]
    done: bool = False

    def responses(self) -> dict[int | str, dict[str, Any]]:
        """The route's ``responses`` entry for its 200 (beside the JSON of its response
        model, where it has one)."""
        variants = [_event_schema(name, model) for name, model in self.events]
        if self.done:
            variants.append(
                {
                    "type": "object",
                    "properties": {"data": {"const": "[DONE]"}},
                    "required": ["data"],
                }
            )
        schema = variants[0] if len(variants) == 1 else {"oneOf": variants}
        content = {"text/event-stream": {"schema": schema}}
        return {200: {"description": self.description, "content": content}}


def _event_schema(name: str | None, model: type[BaseModel]) -> dict[str, Any]:
    data = {
        "type": "string",
        "contentMediaType": "application/json",
        "contentSchema": {"$ref": _REF.format(model=model.__name__)},
    }
    if name is None:
        return {"type": "object", "properties": {"data": data}, "required": ["data"]}
    return {
        "type": "object",
        "properties": {"event": {"const": name}, "data": data},
        "required": ["event", "data"],
    }


def event_schemas(streams: Iterable[EventStream]) -> dict[str, Any]:
    """The component schemas of the streams' models (and the models they hold), for
    ``components.schemas`` of the OpenAPI document."""
    models = {model for s in streams for _, model in s.events}
    ordered = sorted(models, key=lambda m: m.__name__)
    _, top = models_json_schema([(m, "serialization") for m in ordered], ref_template=_REF)
    defs: dict[str, Any] = top.get("$defs", {})
    return defs
