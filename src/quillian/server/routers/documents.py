"""Documents: the paginated list with each one's status, uploads (JSON texts or files)
that start an ingestion job, and exact deletion (a job too)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, File, HTTPException, Query, Response, UploadFile
from fastapi import Path as PathParam

from quillian.components.ingestion.readers import SUFFIXES, read_documents
from quillian.engine.documents import DocumentInfo
from quillian.errors import InputError
from quillian.server import models as m
from quillian.server.deps import WorkspaceDep, WritableWorkspaceDep
from quillian.server.failures import NotFound
from quillian.server.jobstore import Job, JobFailure
from quillian.server.views import job_view
from quillian.server.workspaces import Workspace
from quillian.types import Document

router = APIRouter(prefix="/api/workspaces/{ws}/documents", tags=["documents"])

ACCEPTED: dict[int | str, dict[str, Any]] = {
    202: {"description": "Accepted: the job, whose URL is in Location"}
}


def _document_id(doc_id: Annotated[str, PathParam(description="the document's id")]) -> str:
    """The path's document id; ``files`` is the upload's path, which takes only POST."""
    if doc_id == "files":
        raise HTTPException(405)
    return doc_id


DocId = Annotated[str, Depends(_document_id)]


def _accepted(job: Job, workspace: Workspace, response: Response) -> m.JobOut:
    response.status_code = 202
    response.headers["Location"] = f"/api/workspaces/{workspace.name}/jobs/{job.id}"
    return job_view(job, workspace.name)


@router.get("", response_model=m.DocumentPage)
async def list_documents(
    workspace: WorkspaceDep,
    offset: Annotated[int, Query(ge=0, le=m.MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> m.DocumentPage:
    """Documents ordered by id, each with its status (pending, processing, processed,
    failed with its error)."""
    page = await asyncio.to_thread(workspace.engine.documents, offset, limit)
    return m.DocumentPage(
        total=page.total,
        offset=offset,
        limit=limit,
        documents=[m.DocumentOut.model_validate(_fields(d)) for d in page.documents],
    )


@router.get("/{doc_id}", response_model=m.DocumentDetail)
async def get_document(doc_id: DocId, workspace: WorkspaceDep) -> m.DocumentDetail:
    """One document: its status, its text and its chunks' ids."""
    found = await asyncio.to_thread(workspace.engine.document, doc_id)
    if found is None:
        raise NotFound(f"no document {doc_id!r} in workspace {workspace.name!r}")
    return m.DocumentDetail.model_validate(
        {**_fields(found.info), "text": found.text, "chunk_ids": found.chunk_ids}
    )


def _fields(info: DocumentInfo) -> dict[str, Any]:
    return {
        "id": info.doc_id,
        "title": info.title,
        "source": info.source,
        "status": info.status,
        "error": info.error,
        "chunks": info.chunks,
        "characters": info.characters,
    }


@router.post("", status_code=202, response_model=m.JobOut, responses=ACCEPTED)
async def add_documents(
    body: m.DocumentsIn, workspace: WritableWorkspaceDep, response: Response
) -> m.JobOut:
    """Ingest documents given as JSON texts, in the background."""
    documents = [
        Document(d.text, d.title, d.source or "api", dict(d.metadata)) for d in body.documents
    ]
    blank = [i for i, d in enumerate(documents) if not d.text.strip()]
    if blank:
        raise InputError(f"document(s) {', '.join(map(str, blank))} have only blank text")
    job = await asyncio.to_thread(workspace.jobs.submit_add, documents, [])
    return _accepted(job, workspace, response)


@router.post("/files", status_code=202, response_model=m.JobOut, responses=ACCEPTED)
async def upload_files(
    workspace: WritableWorkspaceDep,
    response: Response,
    files: Annotated[
        list[UploadFile], File(min_length=1, description=f"files: {', '.join(SUFFIXES)}")
    ],
) -> m.JobOut:
    """Ingest uploaded files (text, markdown, JSON or JSONL corpora) in the background.

    A file that cannot be read (binary, PDF, not UTF-8, malformed JSON) is reported as a
    failure of the job while the others are ingested; if none can be read, the upload
    is refused with each file's problem."""
    documents: list[Document] = []
    failures: list[JobFailure] = []
    for upload in files:
        name = Path(upload.filename or "upload.txt").name
        data = await upload.read()
        try:
            documents += await asyncio.to_thread(_read_upload, name, data)
        except InputError as exc:
            failures.append(JobFailure(name, str(exc)))
    if not documents:
        problems = "; ".join(f"{f.source}: {f.error}" for f in failures) or "no files"
        raise InputError(f"nothing to ingest: {problems}")
    job = await asyncio.to_thread(workspace.jobs.submit_add, documents, failures)
    return _accepted(job, workspace, response)


_TMP_MARK = "quillian-upload-"


def _read_upload(name: str, data: bytes) -> list[Document]:
    """The documents in one uploaded file, read by the same readers as ``quillian index``."""
    with tempfile.TemporaryDirectory(prefix=_TMP_MARK) as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        skipped: list[InputError] = []
        try:
            docs = list(read_documents(path, on_skip=skipped.append))
        except InputError as exc:
            raise InputError(str(exc).replace(str(path), name)) from None
        if not docs:
            why = str(skipped[0]) if skipped else "no documents"
            raise InputError(why.replace(str(path), name))
        return [Document(d.text, d.title, name, d.metadata) for d in docs]


@router.delete("/{doc_id}", status_code=202, response_model=m.JobOut, responses=ACCEPTED)
async def delete_document(
    doc_id: DocId, workspace: WritableWorkspaceDep, response: Response
) -> m.JobOut:
    """Remove a document exactly: what only it supported goes, shared entities and
    relations keep their other provenance. Runs as a job."""
    known = await asyncio.to_thread(workspace.engine.known_documents, [doc_id])
    if not known:
        raise NotFound(f"no document {doc_id!r} in workspace {workspace.name!r}")
    job = await asyncio.to_thread(workspace.jobs.submit_delete, [doc_id])
    return _accepted(job, workspace, response)
