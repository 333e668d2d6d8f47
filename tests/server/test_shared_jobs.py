"""Job records in a PostgreSQL workspace (a real PostgreSQL; marked ``postgres``): what
one replica records another reads; an unfinished job is taken up only once its replica
stopped; an older server's local records are brought in."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("psycopg")
from quillian.server.jobstore import Job, JobKind, JobState, JobStore
from quillian.server.sharedjobs import SharedJobStore
from quillian.testing.postgres import PostgresServer
from quillian.types import Document

pytestmark = pytest.mark.postgres

DOCS = [Document("Ada was born in London.\u2028Line two.", "Ada", "a.md", {"k": [1]})]


def test_what_one_replica_records_another_reads(postgres_url: str) -> None:
    a, b = SharedJobStore(postgres_url), SharedJobStore(postgres_url)
    try:
        job = Job.new(JobKind.ADD, ["doc-1"])
        a.create(job, DOCS)
        assert b.get(job.id) == job and b.documents(job.id) == DOCS
        assert b.take_up() == []  # its replica runs: nobody else takes it
        job.state, job.stage = JobState.RUNNING, "ingest"
        assert a.save(job) is False
        assert b.ask_cancel(job.id)
        assert b.get(job.id).state == JobState.CANCELLING  # shown as asked
        assert a.save(job) is True  # the running replica learns it at its next save
        job.state = JobState.CANCELLED
        a.save(job)
        assert not b.ask_cancel(job.id)  # finished: nothing to cancel
        assert b.counts() == {"cancelled": 1} and b.page(0, 10)[0] == 1
    finally:
        a.close()
        b.close()


def test_a_stopped_replicas_job_is_taken_up(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    store = SharedJobStore(postgres_url)
    try:
        job = Job.new(JobKind.ADD, ["doc-1"])
        store.create(job, DOCS, owner="elsewhere pid 1")  # another host, beat fresh
        assert store.take_up() == []
        workspace = postgres_url.split("workspace=")[1].split("&")[0]
        postgres_server.execute(
            f"UPDATE {workspace}.server_jobs SET beat = now() - interval '1 minute'"
        )
        (taken,) = store.take_up()
        assert taken.id == job.id and store.documents(job.id) == DOCS
        assert store.take_up() == []  # now this replica's own
    finally:
        store.close()


def test_an_older_servers_unfinished_jobs_are_brought_in(postgres_url: str, tmp_path: Path):
    local = JobStore(tmp_path / "server")
    queued, done = Job.new(JobKind.ADD, ["doc-1"]), Job.new(JobKind.DELETE, ["doc-2"])
    done.state = JobState.SUCCEEDED
    local.create(queued, DOCS)
    local.create(done, [])
    local.close()
    store = SharedJobStore(postgres_url, legacy=tmp_path / "server")
    try:
        (taken,) = store.take_up()
        assert taken.id == queued.id and store.documents(queued.id) == DOCS
        assert store.get(done.id) is None  # a finished one stays where it was
    finally:
        store.close()
    again = SharedJobStore(postgres_url, legacy=tmp_path / "server")  # imported once
    try:
        assert again.page(0, 10)[0] == 1
    finally:
        again.close()
