"""``quillian serve``: the HTTP API over one or more indexes (see :mod:`quillian.server`)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from quillian.cli import keys as keys_cli
from quillian.cli.flags import KG_HELP, LLM_HELP
from quillian.engine import Engine
from quillian.errors import MissingExtraError
from quillian.server import ServerSettings, WorkspaceSpec
from quillian.server.keys import EVERY_WORKSPACE, read_keys

__all__ = ["mcp", "register", "serve"]


def serve(
    indexes: Annotated[
        list[str],
        typer.Argument(metavar="INDEX...", help="index directories, each DIR or NAME=DIR"),
    ],
    llm: Annotated[
        str | None, typer.Option(metavar="SPEC", help=f"answering model: {LLM_HELP}")
    ] = None,
    kg: Annotated[str | None, typer.Option(metavar="SPEC", help=KG_HELP)] = None,
    host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="port to bind")] = 8000,
    api_key: Annotated[
        str | None,
        typer.Option(
            metavar="KEY",
            help="an admin key (X-API-Key or a bearer token), valid on every workspace "
            "(default: $QUILLIAN_API_KEY; with neither this nor --keys the server is open)",
        ),
    ] = None,
    keys: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            envvar="QUILLIAN_KEYS",
            help="API keys per workspace with roles (made by `quillian keys add`); "
            "every route but /healthz and the web UI's files then needs a key",
        ),
    ] = None,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            metavar="ORIGIN", help="allow this browser origin (repeatable; default: CORS off)"
        ),
    ] = None,
    max_body_mb: Annotated[float, typer.Option(min=0.001, help="largest request body, MB")] = 32.0,
    timeout: Annotated[
        float, typer.Option(min=0.1, help="seconds a retrieval or answer may take")
    ] = 120.0,
    concurrency: Annotated[int, typer.Option(min=1, help="LLM calls in flight per workspace")] = 4,
    workers: Annotated[int, typer.Option(min=1, help="retrieval threads per workspace")] = 4,
    blas_threads: Annotated[
        int,
        typer.Option(
            min=0,
            help="threads of numpy's BLAS library (matrix products) while serving; "
            "0: the library's own, one per core",
        ),
    ] = 1,
    cache: Annotated[
        Path | None, typer.Option(metavar="FILE", help="LLM response cache (default: none)")
    ] = None,
    access_log: Annotated[
        bool, typer.Option(help="one JSON line per request on stderr (never the key)")
    ] = True,
    state_dir: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="where jobs are kept (default: server/ in each index)"),
    ] = None,
) -> None:
    """Serve indexes over HTTP: retrieval, answers (streamed), documents and jobs, graph
    browsing, OpenAI-compatible chat. The API is described at /docs and /openapi.json."""
    try:
        import uvicorn

        from quillian.server.app import create_app
    except ImportError as exc:  # the optional web stack
        raise MissingExtraError(exc.name or "fastapi", "serve") from None
    environ = os.environ
    settings = ServerSettings(
        workspaces=tuple(WorkspaceSpec.parse(text) for text in indexes),
        llm=llm,
        kg=kg,
        llm_api_key=environ.get("QUILLIAN_LLM_API_KEY") or environ.get("OPENAI_API_KEY", ""),
        cache_path=cache,
        concurrency=concurrency,
        workers=workers,
        blas_threads=blas_threads or None,
        api_key=api_key if api_key is not None else environ.get("QUILLIAN_API_KEY", ""),
        keys_file=keys,
        cors_origins=tuple(cors_origin or ()),
        max_request_bytes=int(max_body_mb * 1024 * 1024),
        request_timeout_s=timeout,
        state_dir=state_dir,
    )
    app = create_app(settings)
    _access_log(access_log)
    print(_access_line(settings), file=sys.stderr)
    uvicorn.run(app, host=host, port=port, access_log=False, log_level="info")


def _access_line(settings: ServerSettings) -> str:
    """Who may use the server, in one line for its start (never a key)."""
    names = ", ".join(w.name for w in settings.workspaces)
    given = []
    if settings.keys_file is not None:
        entries = read_keys(settings.keys_file)
        given.append(f"the {len(entries)} key(s) in {settings.keys_file}")
        served = {w.name for w in settings.workspaces} | {EVERY_WORKSPACE}
        stray = sorted({e.workspace for e in entries} - served)
        if stray:
            given[-1] += f" (some for workspaces not served here: {', '.join(stray)})"
    if settings.api_key:
        given.append("the admin key of --api-key / QUILLIAN_API_KEY")
    if not given:
        return (
            f"serving {names} OPEN: no API key is needed, anyone who reaches this address "
            "may read and change every workspace (--keys FILE or --api-key KEY to require one)"
        )
    return f"serving {names}; a key is needed: {' or '.join(given)}"


def _access_log(enabled: bool) -> None:
    """The server's access log: JSON lines on stderr, or nothing."""
    logger = logging.getLogger("quillian.server.access")
    logger.propagate = False
    if enabled:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    else:
        logger.disabled = True


def mcp(
    index: Annotated[Path, typer.Argument(metavar="INDEX", help="the index directory")],
    llm: Annotated[
        str | None, typer.Option(metavar="SPEC", help=f"answering model: {LLM_HELP}")
    ] = None,
    kg: Annotated[str | None, typer.Option(metavar="SPEC", help=KG_HELP)] = None,
    cache: Annotated[
        Path | None, typer.Option(metavar="FILE", help="LLM response cache (default: none)")
    ] = None,
    timeout: Annotated[float, typer.Option(min=0.1, help="seconds a tool call may take")] = 300.0,
) -> None:
    """Serve the tools retrieve, answer and entity over stdio (Model Context Protocol),
    for assistants that speak MCP."""
    try:
        from quillian.server.mcp import create_mcp
    except ImportError as exc:  # the optional MCP SDK
        raise MissingExtraError(exc.name or "mcp", "mcp") from None
    environ = os.environ
    engine = Engine.open(
        index,
        llm=llm,
        kg=kg,
        api_key=environ.get("QUILLIAN_LLM_API_KEY") or environ.get("OPENAI_API_KEY", ""),
        cache_path=cache,
    )
    create_mcp(engine, timeout_s=timeout).run("stdio")


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.command()(mcp)
    app.add_typer(keys_cli.app, name="keys")
