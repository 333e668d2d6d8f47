"""Documents: the paginated list with each one's status, uploads (JSON texts or files)
that start an ingestion job, and exact deletion (a job too)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, File, HTTPException, Query, Response, UploadFile
from fastapi import Path as PathParam

from quillian.components.ingestion import (
    SUFFIXES,
    document_problem,
    read_documents,
    unpaired_surrogate,
)
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


async def _document_id(doc_id: Annotated[str, PathParam(description="the document's id")]) -> str:
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
    """Ingest documents given as JSON texts, in the background.

    Each document is stored or refused on its own: one with only blank text, or with
    text no store can hold (an unpaired surrogate escape such as ``"\\ud800"``), is
    listed in the job's failures (named by its position, from 0) and the others are
    ingested; the job then ends ``partial``. If none can be ingested, the upload is
    refused with each one's problem."""
    documents: list[Document] = []
    failures: list[JobFailure] = []
    for i, d in enumerate(body.documents):
        doc = Document(d.text, d.title, d.source or "api", dict(d.metadata))
        problem = "only blank text" if not doc.text.strip() else document_problem(doc)
        if problem is None:
            documents.append(doc)
        else:
            failures.append(_refused(doc, f"document {i}: {problem}"))
    return await _submit(workspace, response, documents, failures)


@router.post("/files", status_code=202, response_model=m.JobOut, responses=ACCEPTED)
async def upload_files(
    workspace: WritableWorkspaceDep,
    response: Response,
    files: Annotated[
        list[UploadFile], File(min_length=1, description=f"files: {', '.join(SUFFIXES)}")
    ],
) -> m.JobOut:
    """Ingest uploaded files (text, markdown, JSON or JSONL corpora) in the background.

    A file that cannot be read (binary, PDF, not UTF-8, malformed JSON), a malformed
    entry of a corpus (no ``text``, a field that is not a string), or an entry whose
    text no store can hold, is reported as a failure of the job (which then ends
    ``partial``) while the others, the file's other entries among them, are ingested;
    if none can be read, the upload is refused with each file's problem."""
    documents: list[Document] = []
    failures: list[JobFailure] = []
    for upload in files:
        name = Path(upload.filename or "upload.txt").name
        data = await upload.read()
        try:
            read, refused = await asyncio.to_thread(_read_upload, name, data)
        except InputError as exc:
            failures.append(JobFailure(_escaped(name), str(exc)))
            continue
        failures += [JobFailure(_escaped(name), reason) for reason in refused]
        for doc in read:
            problem = document_problem(doc)
            if problem is None:
                documents.append(doc)
            else:
                where = f"entry {doc.metadata['index']}: " if "index" in doc.metadata else ""
                failures.append(_refused(doc, f"{_escaped(name)}: {where}{problem}"))
    return await _submit(workspace, response, documents, failures)


async def _submit(
    workspace: Workspace, response: Response, documents: list[Document], failures: list[JobFailure]
) -> m.JobOut:
    """Start the job ingesting ``documents`` (``failures``: those refused at upload);
    with nothing to ingest, refuse the upload naming every problem."""
    if not documents:
        problems = "; ".join(_problem(f) for f in failures) or "no documents"
        raise InputError(f"nothing to ingest: {problems}")
    job = await asyncio.to_thread(workspace.jobs.submit_add, documents, failures)
    return _accepted(job, workspace, response)


def _problem(failure: JobFailure) -> str:
    named = failure.error.startswith(failure.source) or failure.source == "api"
    return failure.error if named else f"{failure.source}: {failure.error}"


def _refused(doc: Document, error: str) -> JobFailure:
    """The failure of a document refused at upload: its id where it has one (its title
    and text are Unicode), its title and source with any lone surrogate escaped."""
    has_id = unpaired_surrogate(doc.title + doc.text) is None
    return JobFailure(_escaped(doc.source), error, doc.id if has_id else "", _escaped(doc.title))


def _escaped(text: str) -> str:
    """``text`` with any lone surrogate written as an escape (a response cannot carry it)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


_TMP_MARK = "quillian-upload-"


def _read_upload(name: str, data: bytes) -> tuple[list[Document], list[str]]:
    """The documents in one uploaded file, read by the same readers as ``quillian index``,
    and why each malformed entry of a corpus was refused (the file's others are read)."""
    with tempfile.TemporaryDirectory(prefix=_TMP_MARK) as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        skipped: list[InputError] = []
        refused: list[InputError] = []
        try:
            docs = list(read_documents(path, on_skip=skipped.append, on_refused=refused.append))
        except InputError as exc:
            raise InputError(str(exc).replace(str(path), name)) from None
        reasons = [str(exc).replace(str(path), name) for exc in refused]
        if not docs:
            why = reasons or [str(skipped[0]) if skipped else "no documents"]
            raise InputError("; ".join(why).replace(str(path), name))
        return [Document(d.text, d.title, name, d.metadata) for d in docs], reasons


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
