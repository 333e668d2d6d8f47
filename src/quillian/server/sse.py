"""Server-sent events: ``event: NAME`` and one line of JSON ``data`` per event."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

__all__ = ["SSE_HEADERS", "sse"]

#: Headers of every event stream: no caching, no proxy buffering.
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse(event: str | None, data: BaseModel | dict[str, Any] | str) -> bytes:
    """One event; ``event`` None sends an unnamed one (the OpenAI stream's form).

    The JSON is ASCII, every other character escaped: a client that splits the stream
    with ``str.splitlines`` (httpx's ``iter_lines`` does) would break a line at a raw
    U+2028 or U+0085 in a passage or a title."""
    if isinstance(data, BaseModel):
        text = json.dumps(data.model_dump(mode="json"))
    elif isinstance(data, str):
        text = data
    else:
        text = json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()
