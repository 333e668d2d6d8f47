"""Ingestion jobs on disk, so a restarted server knows them and resumes the unfinished.

A workspace's jobs live in ``jobs.sqlite`` in its state directory, one row each, and the
documents an ``add`` job ingests are rows of the same database, written in the same
transaction as the job: a job on record always has its documents. Text is stored as
SQLite text, so every string Python can encode as UTF-8 comes back exactly (line and
paragraph separators, control characters and NUL included). Jobs an older server left
with their documents in ``payloads/JOB.jsonl`` are still read.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from quillian.types import Document

__all__ = ["Job", "JobFailure", "JobKind", "JobState", "JobStore"]


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    CANCELLING = "cancelling"
    SUCCEEDED = "succeeded"
    PARTIAL = "partial"
    """Finished with some documents stored and some refused (see the job's failures)."""
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in _FINISHED


_FINISHED = frozenset({JobState.SUCCEEDED, JobState.PARTIAL, JobState.FAILED, JobState.CANCELLED})


class JobKind(StrEnum):
    ADD = "add"
    DELETE = "delete"


@dataclass(frozen=True)
class JobFailure:
    """A document (or an uploaded file) the job could not ingest, and why."""

    source: str
    error: str
    doc_id: str = ""
    title: str = ""


@dataclass
class Job:
    """One ingestion or deletion and where it stands."""

    id: str
    kind: JobKind
    state: JobState = JobState.QUEUED
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    documents_total: int = 0
    documents_done: int = 0
    stage: str = ""
    stage_done: int = 0
    stage_total: int = 0
    failures: list[JobFailure] = field(default_factory=list)
    error: str = ""
    doc_ids: list[str] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)
    resumed: int = 0
    """Times a restarted server took the job up again."""

    @classmethod
    def new(cls, kind: JobKind, doc_ids: list[str]) -> Job:
        return cls(uuid.uuid4().hex, kind, doc_ids=doc_ids, documents_total=len(doc_ids))

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": str(self.kind), "state": str(self.state)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        return cls(
            **{
                **data,
                "kind": JobKind(data["kind"]),
                "state": JobState(data["state"]),
                "failures": [JobFailure(**f) for f in data.get("failures", [])],
            }
        )


class JobStore:
    """Jobs by id in SQLite (one row of JSON each) and their documents as rows beside them."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(directory / "jobs.sqlite", check_same_thread=False)
        with self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, created REAL, "
                "state TEXT, body TEXT)"
            )
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS job_documents (job_id TEXT NOT NULL, "
                "position INTEGER NOT NULL, text TEXT NOT NULL, title TEXT NOT NULL, "
                "source TEXT NOT NULL, metadata TEXT NOT NULL, PRIMARY KEY (job_id, position))"
            )

    def create(self, job: Job, documents: list[Document]) -> None:
        """Store ``job`` with its ``documents``, together or not at all.

        Raises :class:`UnicodeEncodeError` for a string UTF-8 cannot hold (an unpaired
        surrogate): the edges refuse those first (:func:`~quillian.components.ingestion.
        unpaired_surrogate`)."""
        rows = [
            (job.id, i, d.text, d.title, d.source, json.dumps(d.metadata))
            for i, d in enumerate(documents)
        ]
        with self._lock, self._db:
            self._db.executemany("INSERT INTO job_documents VALUES (?, ?, ?, ?, ?, ?)", rows)
            self._db.execute(*self._upsert(job))

    #: Whether other servers read and write these records too (replicas of a workspace).
    shared = False

    def save(self, job: Job) -> bool:
        """Record ``job``; returns whether another server asked to cancel it (never,
        for records only this server keeps)."""
        with self._lock, self._db:
            self._db.execute(*self._upsert(job))
        return False

    def ask_cancel(self, job_id: str) -> bool:
        """Ask the server running job ``job_id`` to cancel it: only this server runs
        the jobs it keeps, so there is none to ask (False)."""
        return False

    def take_up(self) -> list[Job]:
        """The unfinished jobs this server takes up when it starts (all it keeps)."""
        return self.unfinished()

    @staticmethod
    def _upsert(job: Job) -> tuple[str, tuple[Any, ...]]:
        job.updated = time.time()
        body = json.dumps(job.as_dict())
        return (
            "INSERT OR REPLACE INTO jobs (id, created, state, body) VALUES (?, ?, ?, ?)",
            (job.id, job.created, str(job.state), body),
        )

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            row = self._db.execute("SELECT body FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return Job.from_dict(json.loads(row[0])) if row else None

    def page(self, offset: int, limit: int) -> tuple[int, list[Job]]:
        """Jobs newest first, ``limit`` from ``offset``, and how many there are."""
        with self._lock:
            total = self._db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
            rows = self._db.execute(
                "SELECT body FROM jobs ORDER BY created DESC, id LIMIT ? OFFSET ?",
                (limit, offset),
            ).fetchall()
        return total, [Job.from_dict(json.loads(r[0])) for r in rows]

    def unfinished(self) -> list[Job]:
        """Jobs a stopped server left queued, running or cancelling, oldest first."""
        states = [str(s) for s in JobState if not s.finished]
        with self._lock:
            rows = self._db.execute(
                f"SELECT body FROM jobs WHERE state IN ({','.join('?' * len(states))}) "
                "ORDER BY created, id",
                states,
            ).fetchall()
        return [Job.from_dict(json.loads(r[0])) for r in rows]

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        return {str(state): int(n) for state, n in rows}

    def documents(self, job_id: str) -> list[Document]:
        """The documents of job ``job_id``, as they were given."""
        with self._lock:
            rows = self._db.execute(
                "SELECT text, title, source, metadata FROM job_documents WHERE job_id = ? "
                "ORDER BY position",
                (job_id,),
            ).fetchall()
        if rows:
            return [
                Document(text, title, source, json.loads(meta))
                for text, title, source, meta in rows
            ]
        return self._legacy_documents(job_id)

    def _legacy_documents(self, job_id: str) -> list[Document]:
        """The documents of a job an older server stored as ``payloads/JOB.jsonl``: one
        JSON object a line, split on ``\\n`` only (JSON escapes it in strings; other line
        breaks such as U+2028 may stand in the text unescaped)."""
        path = self.directory / "payloads" / f"{job_id}.jsonl"
        if not path.is_file():
            return []
        lines = path.read_bytes().decode("utf-8").split("\n")
        return [Document(**json.loads(line)) for line in lines if line.strip()]

    def close(self) -> None:
        with self._lock:
            self._db.close()
