"""What a server serves and how: workspaces, model, limits, key and CORS, resolved once
at the edge (flags and environment) into a frozen :class:`ServerSettings`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quillian.components.llm.base import ChatModel
from quillian.errors import ConfigError

__all__ = ["ServerSettings", "WorkspaceSpec"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class WorkspaceSpec:
    """A named index served by the process."""

    name: str
    location: Path

    @classmethod
    def parse(cls, text: str) -> WorkspaceSpec:
        """``NAME=DIR`` or ``DIR`` (named after the directory)."""
        name, sep, path = text.partition("=")
        if not sep:
            name, path = Path(text).resolve().name, text
        if not _NAME.match(name):
            raise ConfigError(
                f"workspace name {name!r} must be 1-64 letters, digits, '.', '_' or '-' "
                "(name it with NAME=DIR)"
            )
        return cls(name, Path(path))


@dataclass(frozen=True)
class ServerSettings:
    """Everything :func:`~quillian.server.app.create_app` needs."""

    workspaces: tuple[WorkspaceSpec, ...]
    llm: str | ChatModel | None = None
    """The chat model spec (or a chat model) for answering; None: retrieval only."""
    kg: str | None = None
    """The knowledge graph spec of the KG methods."""
    llm_api_key: str = ""
    cache_path: Path | None = None
    """The LLM response cache (None: none)."""
    concurrency: int = 4
    """LLM calls in flight per workspace."""
    workers: int = 4
    """Threads for CPU-bound retrieval per workspace."""
    retriever_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per retriever kind, configuration overrides (``{"sa": {"hops": 4}}``)."""
    api_key: str = ""
    """When set, every route but ``/healthz`` needs it (``X-API-Key`` or a bearer token)."""
    cors_origins: tuple[str, ...] = ()
    """Origins allowed by CORS; empty: CORS off."""
    max_request_bytes: int = 32 * 1024 * 1024
    """Largest request body accepted (uploads included)."""
    request_timeout_s: float = 120.0
    """Longest a retrieval or an answer may take before the request fails (504)."""
    default_k: int = 8
    max_k: int = 100
    state_dir: Path | None = None
    """Where jobs and their payloads are kept (default: ``server/`` inside each index)."""

    def __post_init__(self) -> None:
        if not self.workspaces:
            raise ConfigError("serve at least one index")
        names = [w.name for w in self.workspaces]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"two workspaces are named {', '.join(dupes)}; use NAME=DIR")
        if self.max_request_bytes <= 0 or self.request_timeout_s <= 0:
            raise ConfigError("max_request_bytes and request_timeout_s must be positive")

    def state_for(self, workspace: WorkspaceSpec) -> Path:
        """The directory of a workspace's jobs."""
        if self.state_dir is not None:
            return self.state_dir / workspace.name
        return workspace.location / "server"
