"""Background ingestion: one worker per workspace runs its jobs in order, off the event
loop, reporting progress to the job record and to anyone watching it.

An ``add`` job ingests documents (already parsed and stored with the job) into the
workspace's index, each stored or refused on its own: a job whose documents were all
stored ends ``succeeded``, one where some were refused (at upload or while indexing,
each listed with its reason in ``failures``) ends ``partial``, and one where none could
be ``failed``. An error that is not about a document (a full disk, a lost database)
fails the job and leaves the index incomplete, for a rerun to resume. A ``delete`` job
removes documents exactly (see :meth:`~quillian.engine.Engine.delete_documents`).
Retrieval keeps being served from the index opened before the job; the engine opens the
new one when the job is done.

Cancelling a queued job drops it. Cancelling a running ``add`` job takes effect at the
next document (ingestion commits documents in batches of 64, so the batch in hand is
finished first): documents ingested so far stay (delete them if unwanted), the rest are
forgotten, and the index is rebuilt over what is stored. Once the rebuild stages run, a
job can no longer be cancelled. A restarted server takes unfinished jobs up again;
ingestion skips what was already stored, so a job resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

from quillian.engine import Engine
from quillian.errors import ConfigError, QuillianError
from quillian.index import BuildReport
from quillian.server.jobstore import Job, JobFailure, JobKind, JobState, JobStore
from quillian.server.privacy import PrivatePaths, hide_paths
from quillian.server.sharedjobs import SharedJobStore
from quillian.types import Document

__all__ = ["JobCancelled", "JobConflict", "JobRunner"]

logger = logging.getLogger(__name__)

#: Seconds between progress writes to the job store (the live record is in memory).
SAVE_EVERY_S = 0.5


class JobCancelled(QuillianError):
    """Raised from the progress callback to stop an ingestion between documents."""


class ServerStopping(JobCancelled):
    """Raised from the progress callback when the server stops: the job stays
    ``running`` on record, and the next server resumes it."""


class JobConflict(ConfigError):
    """A job cannot do what was asked in its present state (cancel while rebuilding)."""


def _outcome(job: Job) -> tuple[JobState, str]:
    """How a job that ran to its end finished: ``succeeded``; ``partial`` when some of
    its documents were refused (each listed in its failures); ``failed`` when all were."""
    if not job.failures:
        return JobState.SUCCEEDED, ""
    failed = len(job.failures)
    if job.kind == JobKind.ADD and failed >= job.documents_total:
        return JobState.FAILED, f"none of the {failed} document(s) could be ingested"
    return JobState.PARTIAL, ""


class JobRunner:
    """Runs one workspace's jobs one at a time and tells watchers about each change."""

    def __init__(
        self, engine: Engine, store: JobStore | SharedJobStore, *, private: PrivatePaths = ()
    ) -> None:
        self.engine = engine
        self.store = store
        self.private = private
        """The server's paths no recorded error may show (clients read the records)."""
        self._live: dict[str, Job] = {}
        self._saved: dict[str, float] = {}
        self._watchers: dict[str, set[asyncio.Queue[Job]]] = {}
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> list[Job]:
        """Start the worker and queue the jobs a stopped server left unfinished."""
        self._loop = asyncio.get_running_loop()
        resumed = self.take_up()
        self._worker = asyncio.create_task(self._work(), name="quillian-jobs")
        return resumed

    def take_up(self) -> list[Job]:
        """Queue the unfinished jobs of servers that stopped (this one's previous run;
        with shared records, any replica of the workspace); returns them."""
        return self._queue_resumed(self.store.take_up())

    async def adopt(self) -> list[Job]:
        """:meth:`take_up`, its reads off the event loop (a running replica adopting
        the jobs of one that stopped)."""
        if self._stopping:
            return []
        return self._queue_resumed(await asyncio.to_thread(self.store.take_up))

    def _queue_resumed(self, resumed: list[Job]) -> list[Job]:
        for job in resumed:
            job.resumed += 1
            if job.state == JobState.RUNNING:
                job.state = JobState.QUEUED
            self._live[job.id] = job
            self.store.save(job)
            self._queue.put_nowait(job.id)
        return resumed

    async def stop(self) -> None:
        """Stop taking jobs. An ingestion in flight stops at its next document (a
        rebuild stage in flight runs to its end on its thread); its record stays
        ``running`` and the next start resumes it."""
        self._stopping = True
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker

    # --- submitting and asking ---------------------------------------------------------

    def submit_add(self, documents: list[Document], failures: list[JobFailure]) -> Job:
        job = Job.new(JobKind.ADD, list(dict.fromkeys(d.id for d in documents)))
        job.failures = [replace(f, error=hide_paths(f.error, self.private)) for f in failures]
        job.documents_total += len(failures)
        job.documents_done = len(failures)
        return self._submit(job, documents)

    def submit_delete(self, doc_ids: list[str]) -> Job:
        return self._submit(Job.new(JobKind.DELETE, list(dict.fromkeys(doc_ids))), [])

    def _submit(self, job: Job, documents: list[Document]) -> Job:
        self.store.create(job, documents)
        self._live[job.id] = job
        if self._loop is not None:  # callers may be on a worker thread
            self._loop.call_soon_threadsafe(self._queue.put_nowait, job.id)
        else:
            self._queue.put_nowait(job.id)
        return replace(job)

    def get(self, job_id: str) -> Job | None:
        live = self._live.get(job_id)
        return replace(live) if live is not None else self.store.get(job_id)

    def page(self, offset: int, limit: int) -> tuple[int, list[Job]]:
        total, jobs = self.store.page(offset, limit)
        return total, [self._live.get(j.id, j) for j in jobs]

    def cancel(self, job_id: str) -> Job | None:
        """Cancel a job (see the module's notes); None when there is no such job."""
        job = self._live.get(job_id)
        if job is None:
            stored = self.store.get(job_id)
            if stored is None or stored.state.finished:
                return stored
            if self.store.ask_cancel(job_id):  # the replica running it acts on it
                return self.store.get(job_id)
            raise JobConflict(f"job {job_id} is not held by this server")
        if job.state == JobState.QUEUED:
            self._finish(job, JobState.CANCELLED)
        elif job.state == JobState.RUNNING:
            if job.kind != JobKind.ADD or job.stage not in ("", "ingest"):
                raise JobConflict(
                    f"job {job_id} is rebuilding the index ({job.stage or job.kind}) and "
                    "can no longer be cancelled"
                )
            job.state = JobState.CANCELLING
            self._changed(job, save=True)
        return replace(job)

    async def watch(self, job_id: str) -> AsyncIterator[Job]:
        """The job now, then at each change, until it has finished (a job another
        replica runs: its record, read every :data:`SAVE_EVERY_S` seconds)."""
        if job_id not in self._live and self.store.shared:
            async for recorded in self._watch_record(job_id):
                yield recorded
            return
        queue: asyncio.Queue[Job] = asyncio.Queue()
        self._watchers.setdefault(job_id, set()).add(queue)
        try:
            job = self.get(job_id)
            while job is not None:
                yield job
                if job.state.finished:
                    return
                job = await queue.get()
        finally:
            self._watchers[job_id].discard(queue)
            if not self._watchers[job_id]:
                del self._watchers[job_id]

    async def _watch_record(self, job_id: str) -> AsyncIterator[Job]:
        last: dict[str, Any] | None = None
        while True:
            job = await asyncio.to_thread(self.get, job_id)
            if job is None:
                return
            if job.as_dict() != last:
                last = job.as_dict()
                yield job
            if job.state.finished:
                return
            await asyncio.sleep(SAVE_EVERY_S)

    def counts(self) -> dict[str, int]:
        return self.store.counts()

    def running(self) -> Job | None:
        """The job this server is running now, else (with records shared by replicas)
        the newest job another replica runs (None: none)."""
        live = [j for j in self._live.values() if j.state in (JobState.RUNNING, JobState.QUEUED)]
        running = [j for j in live if j.state == JobState.RUNNING]
        if live:
            return replace((running or live)[0])
        if self.store.shared:
            _, recent = self.store.page(0, 20)
            return next((j for j in recent if j.state == JobState.RUNNING), None)
        return None

    # --- the worker -------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            job_id = await self._queue.get()
            job = self._live.get(job_id)
            if job is None or job.state.finished:
                continue
            try:
                await asyncio.to_thread(self._run, job)
            except Exception as exc:  # the job boundary: record it, serve the next
                logger.exception("job %s failed", job.id)
                error = hide_paths(f"{type(exc).__name__}: {exc}", self.private)
                self._finish(job, JobState.FAILED, error=error)
            with contextlib.suppress(QuillianError):
                await asyncio.to_thread(lambda: self.engine.index)  # open the new index

    def _run(self, job: Job) -> None:
        """Run ``job`` (on a worker thread)."""
        if job.state.finished:  # cancelled while it was being taken up
            return
        if job.state == JobState.CANCELLING:  # a restart found it stopping
            self._wind_up_cancel(job)
            return
        if self.store.shared:  # a cancel asked through another replica ends it here
            self._changed(job, save=True)
            if job.state.finished:
                return
        job.state = JobState.RUNNING
        self._changed(job, save=True)
        if job.kind == JobKind.DELETE:
            report = self.engine.delete_documents(job.doc_ids, on_progress=self._progress(job))
            job.documents_done = job.documents_total
        else:
            documents = self.store.documents(job.id)
            try:
                report = self.engine.add_documents(
                    documents, self.engine.index_settings(), on_progress=self._progress(job)
                )
            except ServerStopping:
                self.store.save(job)  # still running: the next server resumes it
                return
            except JobCancelled:
                self._wind_up_cancel(job)
                return
            self._record_ingest(job, report)
        job.report = {"counts": report.counts, "seconds": report.seconds}
        state, error = _outcome(job)
        self._finish(job, state, error=error)

    def _wind_up_cancel(self, job: Job) -> None:
        """Forget the documents not stored and rebuild the index over those that were."""
        forgotten = self.engine.forget_unfinished(job.doc_ids)
        job.documents_done = job.documents_total - len(forgotten)
        job.stage, job.stage_done, job.stage_total = "rebuild", 0, 0
        self._changed(job, save=True)
        report = self.engine.add_documents([], self.engine.index_settings())
        job.report = {"counts": report.counts, "forgotten": forgotten}
        self._finish(job, JobState.CANCELLED)

    def _record_ingest(self, job: Job, report: BuildReport) -> None:
        ingest = report.ingest
        if ingest is None:
            return
        job.failures += [
            JobFailure(f.source, hide_paths(f.error, self.private), f.doc_id, f.title)
            for f in ingest.failures
        ]
        job.documents_done = job.documents_total

    def _progress(self, job: Job) -> Callable[[str, int, int], None]:
        """The build's progress callback for ``job``: updates it and stops it when a
        cancel was asked for, between documents."""
        total_docs = job.documents_total

        def progress(stage: str, done: int, total: int) -> None:
            if stage == "ingest":
                if self._stopping:
                    raise ServerStopping(f"job {job.id} interrupted: the server stops")
                if job.state == JobState.CANCELLING:
                    raise JobCancelled(f"job {job.id} cancelled")
                # ``total`` counts the documents still to do: those stored by an earlier
                # run of this job, and files refused at upload, count as done
                job.documents_done = min(total_docs, total_docs - total + done)
            job.stage, job.stage_done, job.stage_total = stage, done, total
            self._changed(job)

        return progress

    # --- recording and telling -------------------------------------------------------

    def _finish(self, job: Job, state: JobState, *, error: str = "") -> None:
        job.state, job.error = state, error
        if state == JobState.SUCCEEDED:
            job.stage, job.stage_done, job.stage_total = "done", 1, 1
        self._changed(job, save=True)
        self._live.pop(job.id, None)
        self._saved.pop(job.id, None)

    def _cancel_asked(self, job: Job) -> None:
        """Act on a cancel asked through another replica, as :meth:`cancel` would
        (a job past its ingestion runs to its end)."""
        if job.state == JobState.RUNNING and job.kind == JobKind.ADD:
            if job.stage in ("", "ingest"):
                job.state = JobState.CANCELLING
        elif job.state == JobState.QUEUED:
            self._finish(job, JobState.CANCELLED)

    def _changed(self, job: Job, *, save: bool = False) -> None:
        now = time.time()
        if save or now - self._saved.get(job.id, 0.0) >= SAVE_EVERY_S:
            if self.store.save(job):  # another replica asked to cancel it
                self._cancel_asked(job)
            self._saved[job.id] = now
        else:
            job.updated = now
        watchers = list(self._watchers.get(job.id, ()))
        if watchers and self._loop is not None:
            snapshot = replace(job, failures=list(job.failures))
            for queue in watchers:
                self._loop.call_soon_threadsafe(queue.put_nowait, snapshot)
