"""What routes receive through FastAPI's dependencies: the settings, the workspaces, the
caller's rights, and the workspace a path names.

The middleware (:mod:`quillian.server.observability`) lets in only requests with a key
the server knows, or to an open path, and leaves the key's :class:`Grant` in the
request's state. What the key may do is checked here: a route reaches a workspace only
through :data:`WorkspaceDep` (read) or :data:`WritableWorkspaceDep` (upload, delete,
cancel), or :func:`open_workspace` where the workspace is named in the body, and each
checks the key's role on that workspace first (403 otherwise, raised through the app's
exception handlers). Lists show what :meth:`Grant.sees`; :data:`AdminDep` is for what
spans every workspace.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from quillian.errors import IndexDamagedError, IndexIncompleteError
from quillian.server.failures import describe
from quillian.server.jobstore import Job
from quillian.server.keys import EVERY_WORKSPACE, Grant, KeyRing, Role, Unauthorized
from quillian.server.observability import Metrics
from quillian.server.privacy import private_paths
from quillian.server.settings import ServerSettings
from quillian.server.workspaces import Workspace, Workspaces

__all__ = [
    "AdminDep",
    "Ctx",
    "GrantDep",
    "WorkspaceDep",
    "WritableWorkspaceDep",
    "context",
    "grant",
    "open_workspace",
]


class Context:
    """The app's state, as routes need it."""

    def __init__(self, settings: ServerSettings, workspaces: Workspaces, metrics: Metrics):
        self.settings = settings
        self.workspaces = workspaces
        self.metrics = metrics
        self.keys = KeyRing(settings.keys_file, settings.api_key)
        self.private = private_paths(settings)

    def describe(self, exc: BaseException, workspace: str | None = None) -> tuple[int, str]:
        """The status and message of ``exc`` for a client (no path of the server's), met
        serving ``workspace`` where known; an index incomplete because this server's own
        job is building it (one resumed after a restart) says so."""
        job = self._building(exc, workspace)
        if job is not None:
            return 503, (
                f"workspace {workspace} is being built by job {job.id} ({job.stage or 'queued'}"
                f"{' after a restart' if job.resumed else ''}); it answers again when the job "
                "is done: retry shortly"
            )
        return describe(exc, self.private, workspace)

    def _building(self, exc: BaseException, workspace: str | None) -> Job | None:
        if not isinstance(exc, IndexIncompleteError) or isinstance(exc, IndexDamagedError):
            return None
        if workspace is None or workspace not in self.workspaces.names:
            return None
        return self.workspaces.get(workspace).jobs.running()


async def context(request: Request) -> Context:
    ctx: Context = request.app.state.quillian
    return ctx


# The dependencies are coroutines although none awaits: FastAPI runs a plain function
# dependency on a worker thread, and those thread hops took a tenth of a served
# retrieval's time (``quillian.server.load``); each is a look-up that never blocks.
Ctx = Annotated[Context, Depends(context)]


async def grant(request: Request) -> Grant:
    """The rights of the request's key, as the middleware found them (a request it did
    not see has none)."""
    found = getattr(request.state, "grant", None)
    if not isinstance(found, Grant):
        raise Unauthorized("an API key is required (X-API-Key)")
    return found


GrantDep = Annotated[Grant, Depends(grant)]


def open_workspace(ctx: Context, grant: Grant, name: str, role: Role) -> Workspace:
    """Workspace ``name``, once the key may act on it with ``role`` (403 otherwise, the
    same for a workspace that does not exist, so a tenant learns no other's name)."""
    grant.check(name, role)
    return ctx.workspaces.get(name)


WorkspaceName = Annotated[str, Path(description="the workspace's name (GET /api/workspaces)")]


async def workspace(ctx: Ctx, grant: GrantDep, ws: WorkspaceName) -> Workspace:
    return open_workspace(ctx, grant, ws, Role.READ)


async def writable_workspace(ctx: Ctx, grant: GrantDep, ws: WorkspaceName) -> Workspace:
    return open_workspace(ctx, grant, ws, Role.WRITE)


async def admin(grant: GrantDep) -> Grant:
    grant.check(EVERY_WORKSPACE, Role.ADMIN)
    return grant


WorkspaceDep = Annotated[Workspace, Depends(workspace)]
"""The workspace of the path, for a key that may read it."""
WritableWorkspaceDep = Annotated[Workspace, Depends(writable_workspace)]
"""The workspace of the path, for a key that may change it (upload, delete, cancel)."""
AdminDep = Annotated[Grant, Depends(admin)]
"""An admin key's grant (every workspace)."""
