"""Ingestion jobs: status with progress, a server-sent-events stream of it, cancel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from quillian.server import models as m
from quillian.server.deps import WorkspaceDep, WritableWorkspaceDep
from quillian.server.failures import NotFound
from quillian.server.jobstore import Job
from quillian.server.sse import SSE_HEADERS, EventStream, sse
from quillian.server.views import job_view
from quillian.server.workspaces import Workspace

router = APIRouter(prefix="/api/workspaces/{ws}/jobs", tags=["jobs"])

JOB_EVENTS = EventStream(
    "Server-sent events: ``progress`` (a JobOut) at each change, then ``done`` (the "
    "finished JobOut).",
    (("progress", m.JobOut), ("done", m.JobOut)),
)


def _job(workspace: Workspace, job_id: str) -> Job:
    job = workspace.jobs.get(job_id)
    if job is None:
        raise NotFound(f"no job {job_id!r} in workspace {workspace.name!r}")
    return job


@router.get("", response_model=m.JobPage)
def list_jobs(
    workspace: WorkspaceDep,
    offset: Annotated[int, Query(ge=0, le=m.MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> m.JobPage:
    """Jobs, newest first."""
    total, jobs = workspace.jobs.page(offset, limit)
    return m.JobPage(
        total=total,
        offset=offset,
        limit=limit,
        jobs=[job_view(j, workspace.name) for j in jobs],
    )


@router.get("/{job_id}", response_model=m.JobOut)
def get_job(job_id: str, workspace: WorkspaceDep) -> m.JobOut:
    """A job's state and progress: documents done of total, the current stage and its
    progress, failures with their errors."""
    return job_view(_job(workspace, job_id), workspace.name)


@router.get("/{job_id}/events", responses=JOB_EVENTS.responses(), response_class=StreamingResponse)
async def job_events(job_id: str, workspace: WorkspaceDep) -> StreamingResponse:
    """The job's progress as server-sent events, until it finishes."""
    _job(workspace, job_id)

    async def events() -> AsyncIterator[bytes]:
        async for job in workspace.jobs.watch(job_id):
            name = "done" if job.state.finished else "progress"
            yield sse(name, job_view(job, workspace.name))

    return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)


@router.post("/{job_id}/cancel", response_model=m.JobOut)
def cancel_job(job_id: str, workspace: WritableWorkspaceDep) -> m.JobOut:
    """Cancel a job: a queued one is dropped; a running ingestion stops at the next
    document, keeps what it stored and rebuilds the index over it (409 once it is
    rebuilding). A finished job is returned as it is."""
    job = workspace.jobs.cancel(job_id)
    if job is None:
        raise NotFound(f"no job {job_id!r} in workspace {workspace.name!r}")
    return job_view(job, workspace.name)
