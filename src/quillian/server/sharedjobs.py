"""Job records kept in a PostgreSQL workspace, so every replica serving it knows every
job: a job uploaded through one replica is run there (under the workspace's writer
lease) and can be read, watched and cancelled through any other, as a load balancer
that is not sticky sends the client's next request anywhere.

The replica that took a job runs it and writes its record (every
:data:`~quillian.server.jobs.SAVE_EVERY_S` seconds while it progresses); another
replica reads the record, so it shows the job as of its last save. A cancel asked
through another replica is a flag on the record, which the running replica finds at
its next save (within half a second while documents are ingested). A replica that
starts takes up the unfinished jobs of replicas that stopped (see
:class:`~quillian.stores.postgres.jobs.PgJobTable`), and so does a running one every
:data:`ADOPT_EVERY_S` seconds, so a job outlives the replica it was uploaded through.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from quillian.index.layout import server_backend
from quillian.server.jobstore import Job, JobState, JobStore
from quillian.types import Document

__all__ = ["ADOPT_EVERY_S", "SharedJobStore"]

logger = logging.getLogger(__name__)

#: Seconds between two looks for the jobs of replicas that stopped.
ADOPT_EVERY_S = 10.0
_UNFINISHED = [str(s) for s in JobState if not s.finished]


class SharedJobStore:
    """The job store of a PostgreSQL workspace (the interface of :class:`JobStore`).

    Jobs an older server kept in the local ``jobs.sqlite`` of ``legacy`` and left
    unfinished are copied in when it opens, so an upgrade loses none."""

    shared = True

    def __init__(self, location: str, legacy: Path | None = None) -> None:
        self._table: Any = server_backend().PgJobTable(location, _UNFINISHED)
        if legacy is not None and (legacy / "jobs.sqlite").is_file():
            self._import(JobStore(legacy))

    def _import(self, local: JobStore) -> None:
        try:
            for job in local.unfinished():  # no owner: the first replica to look runs it
                self.create(job, local.documents(job.id), owner="")
        finally:
            local.close()

    def create(self, job: Job, documents: list[Document], *, owner: str | None = None) -> None:
        """Store ``job`` with its ``documents``, together or not at all."""
        body = json.dumps(job.as_dict())
        self._table.create(job.id, job.created, str(job.state), body, documents, owner=owner)

    def save(self, job: Job) -> bool:
        """Record ``job`` (this replica runs it); whether another asked to cancel it."""
        job.updated = time.time()
        body = json.dumps(job.as_dict())
        return bool(self._table.save(job.id, str(job.state), body))

    def ask_cancel(self, job_id: str) -> bool:
        """Ask the replica running ``job_id`` to cancel it; False: not unfinished."""
        return bool(self._table.ask_cancel(job_id))

    def get(self, job_id: str) -> Job | None:
        found = self._table.get(job_id)
        return None if found is None else _job(*found)

    def page(self, offset: int, limit: int) -> tuple[int, list[Job]]:
        total, rows = self._table.page(offset, limit)
        return total, [_job(body, cancel) for body, cancel in rows]

    def unfinished(self) -> list[Job]:
        """The unfinished jobs of replicas that stopped, taken up by this one."""
        return [_job(body, cancel) for body, cancel in self._table.claim_unfinished()]

    def take_up(self) -> list[Job]:
        """The unfinished jobs this replica takes up (those of replicas that stopped)."""
        return self.unfinished()

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = self._table.counts()
        return counts

    def documents(self, job_id: str) -> list[Document]:
        documents: list[Document] = self._table.documents(job_id)
        return documents

    def close(self) -> None:
        self._table.close()


def _job(body: str, cancel: bool) -> Job:
    """The job of a stored body; one another replica was asked to cancel shows as
    cancelling until its replica acts on it."""
    job = Job.from_dict(json.loads(body))
    if cancel and job.state in (JobState.QUEUED, JobState.RUNNING):
        job.state = JobState.CANCELLING
    return job
