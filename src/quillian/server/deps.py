"""What routes receive through FastAPI's dependencies: the settings, the workspaces, the
caller's rights, and the workspace a path names.

Every request is checked here, in one place: :func:`authenticate` is a dependency of the
whole app, so every route (each router's, the UI page, the API's schema and docs) runs it
and only the paths in :data:`OPEN_PATHS` go without a key. A route reaches a workspace
only through :data:`WorkspaceDep` (read) or :data:`WritableWorkspaceDep` (write), or
:func:`open_workspace` where the workspace is named in the body, which check the key's
role on that workspace first. No or an unknown key is a 401, a known key without the
rights a 403; both are raised through the app's exception handlers, and neither names
the key presented.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from quillian.server.keys import EVERY_WORKSPACE, OPEN, Grant, KeyRing, Role, Unauthorized
from quillian.server.observability import Metrics
from quillian.server.settings import ServerSettings
from quillian.server.workspaces import Workspace, Workspaces

__all__ = [
    "OPEN_PATHS",
    "AdminDep",
    "Ctx",
    "GrantDep",
    "WorkspaceDep",
    "WritableWorkspaceDep",
    "authenticate",
    "context",
    "open_workspace",
]

#: The routes served without a key: liveness and the web UI's page (its other files are
#: a static mount, outside the routes). Neither holds data.
OPEN_PATHS = frozenset({"/healthz", "/"})

#: The grant on an open path: no workspace, no right.
_ANONYMOUS = Grant("anonymous", "", Role.READ)


class Context:
    """The app's state, as routes need it."""

    def __init__(self, settings: ServerSettings, workspaces: Workspaces, metrics: Metrics):
        self.settings = settings
        self.workspaces = workspaces
        self.metrics = metrics
        self.keys = KeyRing(settings.keys_file, settings.api_key)


def context(request: Request) -> Context:
    ctx: Context = request.app.state.quillian
    return ctx


Ctx = Annotated[Context, Depends(context)]


def _presented(request: Request) -> str:
    """The key of a request: ``X-API-Key``, else an ``Authorization: Bearer`` token."""
    given = request.headers.get("x-api-key", "")
    bearer = request.headers.get("authorization", "")
    if not given and bearer[:7].lower() == "bearer ":
        given = bearer[7:].strip()
    return given


def authenticate(request: Request, ctx: Ctx) -> Grant:
    """The rights of the request's key (every right on a server without keys); 401 for
    no key or an unknown one, except on :data:`OPEN_PATHS`. The key's id (never the key)
    is left for the access log."""
    if not ctx.keys.enabled:
        return OPEN
    if getattr(request.scope.get("route"), "path", None) in OPEN_PATHS:
        return _ANONYMOUS
    presented = _presented(request)
    grant = ctx.keys.identify(presented)
    if grant is None:
        raise Unauthorized("wrong API key" if presented else "an API key is required (X-API-Key)")
    request.state.key_id = grant.key_id
    return grant


GrantDep = Annotated[Grant, Depends(authenticate)]


def open_workspace(ctx: Context, grant: Grant, name: str, role: Role) -> Workspace:
    """Workspace ``name``, once the key may act on it with ``role`` (403 otherwise, the
    same for a workspace that does not exist, so a tenant learns no other's name)."""
    grant.check(name, role)
    return ctx.workspaces.get(name)


WorkspaceName = Annotated[str, Path(description="the workspace's name (GET /api/workspaces)")]


def workspace(ctx: Ctx, grant: GrantDep, ws: WorkspaceName) -> Workspace:
    return open_workspace(ctx, grant, ws, Role.READ)


def writable_workspace(ctx: Ctx, grant: GrantDep, ws: WorkspaceName) -> Workspace:
    return open_workspace(ctx, grant, ws, Role.WRITE)


def admin(grant: GrantDep) -> Grant:
    grant.check(EVERY_WORKSPACE, Role.ADMIN)
    return grant


WorkspaceDep = Annotated[Workspace, Depends(workspace)]
"""The workspace of the path, for a key that may read it."""
WritableWorkspaceDep = Annotated[Workspace, Depends(writable_workspace)]
"""The workspace of the path, for a key that may change it (upload, delete, cancel)."""
AdminDep = Annotated[Grant, Depends(admin)]
"""An admin key's grant (every workspace)."""
