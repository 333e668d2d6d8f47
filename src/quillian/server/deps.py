"""What routes receive through FastAPI's dependencies: the settings, the workspaces and
the workspace a path names."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from quillian.server.failures import describe, private_paths
from quillian.server.observability import Metrics
from quillian.server.settings import ServerSettings
from quillian.server.workspaces import Workspace, Workspaces

__all__ = ["Ctx", "WorkspaceDep", "context", "workspace"]


class Context:
    """The app's state, as routes need it."""

    def __init__(self, settings: ServerSettings, workspaces: Workspaces, metrics: Metrics):
        self.settings = settings
        self.workspaces = workspaces
        self.metrics = metrics
        self.private = private_paths(settings)

    def describe(self, exc: BaseException) -> tuple[int, str]:
        """The status and message of ``exc`` for a client (no path of the server's)."""
        return describe(exc, self.private)


def context(request: Request) -> Context:
    ctx: Context = request.app.state.quillian
    return ctx


Ctx = Annotated[Context, Depends(context)]


def workspace(
    ctx: Ctx,
    ws: Annotated[str, Path(description="the workspace's name (GET /api/workspaces)")],
) -> Workspace:
    return ctx.workspaces.get(ws)


WorkspaceDep = Annotated[Workspace, Depends(workspace)]
