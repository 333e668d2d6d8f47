"""What a server serves and how: workspaces, model, limits, keys and CORS, resolved once
at the edge (flags and environment) into a frozen :class:`ServerSettings`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from quillian.components.llm.base import ChatModel
from quillian.errors import ConfigError
from quillian.index.layout import is_server_location, local_directory

__all__ = ["ServerSettings", "WorkspaceSpec"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class WorkspaceSpec:
    """A named index served by the process."""

    name: str
    location: str | Path
    """A directory, or a ``postgresql://...`` URL (kept as given)."""

    @classmethod
    def parse(cls, text: str) -> WorkspaceSpec:
        """``NAME=DIR`` or ``DIR`` (named after the directory); DIR may be a
        ``postgresql://...?workspace=W`` URL (named W when not named)."""
        name, sep, path = text.partition("=")
        if is_server_location(text):
            workspace = parse_qs(urlsplit(text).query).get("workspace", ["public"])[0]
            return cls._checked(workspace, text)
        if sep and is_server_location(path):
            return cls._checked(name, path)
        if not sep:
            name, path = Path(text).resolve().name, text
        return cls._checked(name, Path(path))

    @classmethod
    def _checked(cls, name: str, location: str | Path) -> WorkspaceSpec:
        if not _NAME.match(name):
            raise ConfigError(
                f"workspace name {name!r} must be 1-64 letters, digits, '.', '_' or '-' "
                "(name it with NAME=DIR)"
            )
        return cls(name, location)


@dataclass(frozen=True)
class ServerSettings:
    """Everything :func:`~quillian.server.app.create_app` needs."""

    workspaces: tuple[WorkspaceSpec, ...]
    llm: str | ChatModel | None = None
    """The chat model spec (or a chat model) for answering; None: retrieval only."""
    kg: str | None = None
    """The knowledge graph spec of the KG methods."""
    llm_api_key: str = field(default="", repr=False)
    cache_path: Path | None = None
    """The LLM response cache (None: none)."""
    concurrency: int = 4
    """LLM calls in flight per workspace."""
    workers: int = 4
    """Threads for CPU-bound retrieval per workspace."""
    blas_threads: int | None = 1
    """Threads of the BLAS libraries under numpy's matrix products while the server runs
    (None: the libraries' own, one per core): set for the process where a library keeps
    one setting (numpy's and scipy's OpenBLAS), and in each retrieval thread where it
    keeps one per thread (an OpenMP build). One: retrievals run concurrently on the
    :attr:`workers` threads, and a BLAS pool per product made them contend for its
    threads and the cores (docs/service.md, "Latency under load")."""
    retriever_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per retriever kind, configuration overrides (``{"sa": {"hops": 4}}``)."""
    api_key: str = field(default="", repr=False)
    """An admin key (every workspace, every action), given as ``X-API-Key`` or a bearer
    token. With it or :attr:`keys_file`, every route but ``/healthz`` and the web UI's
    files needs a key; with neither, the server is open."""
    keys_file: Path | None = None
    """The keys file: API keys per workspace with roles, stored hashed
    (see :mod:`quillian.server.keys`)."""
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
        if self.blas_threads is not None and self.blas_threads < 1:
            raise ConfigError(f"blas_threads must be 1 or more, got {self.blas_threads}")

    def state_for(self, workspace: WorkspaceSpec) -> Path:
        """The directory of a workspace's jobs."""
        if self.state_dir is not None:
            return self.state_dir / workspace.name
        return local_directory(workspace.location) / "server"
