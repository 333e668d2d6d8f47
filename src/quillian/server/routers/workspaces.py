"""The workspaces served and the methods they answer with."""

from __future__ import annotations

from fastapi import APIRouter

from quillian.components.factories import RETRIEVERS
from quillian.methods.table import METHODS
from quillian.server import models as m
from quillian.server.deps import Ctx, GrantDep, WorkspaceDep
from quillian.server.views import method_view
from quillian.server.workspaces import Workspace

router = APIRouter(prefix="/api", tags=["workspaces"])


def _info(workspace: Workspace) -> m.WorkspaceInfo:
    manifest = workspace.manifest()
    config = manifest.get("config", {})
    assert isinstance(config, dict)
    counts = manifest.get("counts", {})
    return m.WorkspaceInfo(
        name=workspace.name,
        state=str(manifest.get("state", "")),
        counts=counts if isinstance(counts, dict) else {},
        embedder=str(config.get("embedder_name", config.get("embedder", ""))),
        extractor=str(config.get("extractor", "")),
        methods_built=list(config.get("methods", [])),
        jobs=workspace.jobs.counts(),
    )


@router.get("/workspaces", response_model=list[m.WorkspaceInfo])
def list_workspaces(ctx: Ctx, grant: GrantDep) -> list[m.WorkspaceInfo]:
    """The workspaces (named indexes) this server serves that the key may read."""
    return [_info(ws) for ws in ctx.workspaces if grant.sees(ws.name)]


@router.get("/workspaces/{ws}", response_model=m.WorkspaceInfo)
def get_workspace(workspace: WorkspaceDep) -> m.WorkspaceInfo:
    """One workspace: its index's state, counts and build settings, its jobs by state."""
    return _info(workspace)


@router.get("/methods", response_model=m.MethodList)
def list_methods(ctx: Ctx) -> m.MethodList:
    """The question-answering methods, their options, and the retrievers."""
    return m.MethodList(
        methods=[method_view(spec) for spec in METHODS.values()],
        retrievers=list(RETRIEVERS),
        answering=ctx.settings.llm is not None,
    )
