"""Server-sent events: ``event: NAME`` and one line of JSON ``data`` per event."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

__all__ = ["SSE_HEADERS", "sse"]

#: Headers of every event stream: no caching, no proxy buffering.
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse(event: str | None, data: BaseModel | dict[str, Any] | str) -> bytes:
    """One event; ``event`` None sends an unnamed one (the OpenAI stream's form)."""
    if isinstance(data, BaseModel):
        text = data.model_dump_json()
    elif isinstance(data, str):
        text = data
    else:
        text = json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()
