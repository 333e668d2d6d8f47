"""A persistent response cache for chat models: same protocol, SQLite underneath.

The key is the SHA-256 of canonical JSON over the inner model id, the messages, the
decoding parameters and the prompt key (``"sa-rag.answer@1"``), so a new prompt version
or another temperature is a miss. Only successful calls are stored. Concurrent identical
requests share one call to the inner model; the callers that joined it get the response
marked ``cached=True`` because they spent no tokens.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quillian.components.llm.base import ChatMessage, ChatModel, ChatResponse, Decoding, Usage
from quillian.errors import ConfigError, StoreError

__all__ = ["CacheStats", "CachedChatModel", "chat_cache_key"]

logger = logging.getLogger(__name__)

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_responses (
    key TEXT PRIMARY KEY,
    model_id TEXT NOT NULL,
    prompt TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    truncated INTEGER NOT NULL,
    model TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def chat_cache_key(
    model_id: str, messages: Sequence[ChatMessage], decoding: Decoding, prompt: str
) -> str:
    """Hex SHA-256 of canonical JSON over everything that determines a reply (a
    decoding without a JSON schema, grammar or stop rule keys as it did before they
    existed)."""
    settings: dict[str, Any] = {
        "temperature": float(decoding.temperature),
        "top_p": float(decoding.top_p),
        "max_tokens": int(decoding.max_tokens),
    }
    if decoding.json_schema:
        settings["json_schema"] = decoding.json_schema
    if decoding.grammar:
        settings["grammar"] = decoding.grammar
    if decoding.stop:
        settings["stop"] = decoding.stop
    payload = {
        "model_id": model_id,
        "messages": [[m.role, m.content] for m in messages],
        "decoding": settings,
        "prompt": prompt,
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class CacheStats:
    """``hits``: served from the database; ``shared``: joined an identical call in
    flight; ``misses``: calls that reached the inner model."""

    hits: int = 0
    shared: int = 0
    misses: int = 0


class CachedChatModel:
    """Serves repeated chat calls from an SQLite database (WAL mode) at ``path``.

    Safe to use from several coroutines and threads; the database may be shared by
    several processes. The inner model is not closed by :meth:`close`.

    Args:
        inner: the model to call on a miss.
        path: the database file (created with its parent directories).
        busy_timeout: seconds to wait for another writer before reporting the
            database as locked.
    """

    def __init__(
        self, inner: ChatModel, path: str | os.PathLike[str], *, busy_timeout: float = 5.0
    ) -> None:
        if busy_timeout < 0:
            raise ConfigError(f"busy_timeout must be at least 0, got {busy_timeout}")
        self.inner = inner
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._inflight: dict[tuple[asyncio.AbstractEventLoop, str], asyncio.Task[ChatResponse]]
        self._inflight = {}
        self._stats = CacheStats()
        self._conn: sqlite3.Connection | None = self._open()

    def __repr__(self) -> str:
        return f"CachedChatModel({self.inner!r}, path={str(self.path)!r})"

    @property
    def model_id(self) -> str:
        """The inner model's id: caching does not change replies."""
        return self.inner.model_id

    @property
    def stats(self) -> CacheStats:
        """Hits, shared and misses since this object was opened."""
        with self._lock:
            return self._stats

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        prompt: str = "",
        decoding: Decoding | None = None,
    ) -> ChatResponse:
        """The stored reply for this exact call, or the inner model's (then stored)."""
        decoding = decoding or Decoding()
        key = chat_cache_key(self.model_id, messages, decoding, prompt)
        stored = self._get(key)
        if stored is not None:
            self._count(hits=1)
            return stored
        loop = asyncio.get_running_loop()
        with self._lock:
            task = self._inflight.get((loop, key))
            leader = task is None
            if task is None:
                task = loop.create_task(self._fetch(key, tuple(messages), prompt, decoding))
                self._inflight[(loop, key)] = task
                task.add_done_callback(lambda done: self._settle(loop, key, done))
        self._count(misses=int(leader), shared=int(not leader))
        response = await asyncio.shield(task)
        return response if leader else dataclasses.replace(response, cached=True)

    def close(self) -> None:
        """Close the database; later calls raise :class:`StoreError`."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> CachedChatModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------

    async def _fetch(
        self, key: str, messages: tuple[ChatMessage, ...], prompt: str, decoding: Decoding
    ) -> ChatResponse:
        response = await self.inner.chat(messages, prompt=prompt, decoding=decoding)
        self._put(key, prompt, response)
        return response

    def _settle(
        self, loop: asyncio.AbstractEventLoop, key: str, task: asyncio.Task[ChatResponse]
    ) -> None:
        with self._lock:
            self._inflight.pop((loop, key), None)
        if not task.cancelled():
            task.exception()  # retrieved, so an error nobody awaits is not logged as lost

    def _count(self, *, hits: int = 0, shared: int = 0, misses: int = 0) -> None:
        with self._lock:
            s = self._stats
            self._stats = CacheStats(s.hits + hits, s.shared + shared, s.misses + misses)

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the directory of the LLM cache {self.path}: {exc}"
            ) from exc
        try:
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self._db_error("open", exc) from exc
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, _SCHEMA_VERSION):
                raise StoreError(
                    f"the LLM cache {self.path} has schema version {version}, this Quillian "
                    f"reads {_SCHEMA_VERSION}; delete it or choose another cache path"
                )
            conn.execute(_SCHEMA)
            conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            conn.close()
            raise self._db_error("open", exc) from exc
        except StoreError:
            conn.close()
            raise
        logger.debug("LLM cache opened at %s", self.path)
        return conn

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"the LLM cache {self.path} is closed")
        return self._conn

    def _get(self, key: str) -> ChatResponse | None:
        with self._lock:
            try:
                row = (
                    self._connection()
                    .execute(
                        "SELECT text, prompt_tokens, completion_tokens, truncated, model "
                        "FROM llm_responses WHERE key = ?",
                        (key,),
                    )
                    .fetchone()
                )
            except sqlite3.Error as exc:
                raise self._db_error("read", exc) from exc
        if row is None:
            return None
        text, prompt_tokens, completion_tokens, truncated, model = row
        usage = Usage(prompt_tokens, completion_tokens)
        return ChatResponse(text, usage, cached=True, truncated=bool(truncated), model=model)

    def _put(self, key: str, prompt: str, response: ChatResponse) -> None:
        row = (
            key,
            self.model_id,
            prompt,
            response.text,
            response.usage.prompt_tokens,
            response.usage.completion_tokens,
            int(response.truncated),
            response.model,
            time.time(),
        )
        with self._lock:
            try:
                self._connection().execute(
                    "INSERT OR REPLACE INTO llm_responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row
                )
            except sqlite3.Error as exc:
                raise self._db_error("write", exc) from exc

    def _db_error(self, action: str, exc: sqlite3.Error) -> StoreError:
        said = str(exc)
        if "locked" in said or "busy" in said:
            return StoreError(
                f"cannot {action} the LLM cache {self.path}: it is locked by another process "
                f"(waited {self.busy_timeout:g}s); stop the other process or use another "
                "cache path"
            )
        return StoreError(
            f"cannot {action} the LLM cache {self.path}: {said}; if the file is corrupted, "
            "delete it (it only holds cached replies) or choose another cache path"
        )
