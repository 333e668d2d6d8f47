"""The HTTP server's ingestion job records in the workspace itself, shared by every
replica serving it (``quillian serve`` on several machines behind a load balancer).

A job is one row of ``server_jobs``: its id, state, the JSON body the server reads and
writes (this module does not interpret it), the replica that runs it (``owner``,
:func:`~.lease.holder_name`), that replica's last heartbeat, and whether another
replica was asked to cancel it. The documents of an ``add`` job are rows of
``server_job_documents``, written in the same transaction as the job, so any replica
can take the job up. A replica renews the heartbeat of the jobs it runs every
:data:`HEARTBEAT_S` seconds; a job whose owner stopped beating for :data:`ORPHAN_S`
seconds, or whose owner is a process of this host that no longer runs, is taken up by
the next replica that looks (:meth:`PgJobTable.claim_unfinished`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence

from quillian.errors import StoreError
from quillian.stores.postgres._pg import PgStore, Workspace
from quillian.stores.postgres.lease import holder_name, process_gone
from quillian.types import Document

__all__ = ["HEARTBEAT_S", "ORPHAN_S", "PgJobTable"]

logger = logging.getLogger(__name__)

#: Seconds between two renewals of the heartbeat of the jobs a replica runs.
HEARTBEAT_S = 5.0
#: Seconds without a heartbeat after which another replica takes a job up: several
#: heartbeats, and more than a connection's retry deadline would hide.
ORPHAN_S = 45.0

DDL = (
    'CREATE TABLE IF NOT EXISTS server_jobs (id text COLLATE "C" PRIMARY KEY, '
    "created double precision NOT NULL, state text NOT NULL, owner text NOT NULL, "
    "beat timestamptz NOT NULL DEFAULT now(), cancel boolean NOT NULL DEFAULT false, "
    "body text NOT NULL)",
    "CREATE INDEX IF NOT EXISTS server_jobs_by_created ON server_jobs (created DESC, id)",
    'CREATE TABLE IF NOT EXISTS server_job_documents (job_id text COLLATE "C" NOT NULL, '
    "position integer NOT NULL, text text NOT NULL, title text NOT NULL, "
    "source text NOT NULL, metadata text NOT NULL, PRIMARY KEY (job_id, position))",
)


class PgJobTable(PgStore):
    """Job rows (bodies as JSON text) of one workspace, run by this process;
    ``unfinished`` names the states of a job not finished yet."""

    def __init__(self, workspace: Workspace | str, unfinished: Sequence[str]) -> None:
        super().__init__(workspace)
        self.owner = holder_name()
        self.unfinished = list(unfinished)
        with self._conn("create the job tables") as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('quillian.server_jobs'))")
            for statement in DDL:
                conn.execute(statement)
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._beat_loop, name="quillian-job-beat", daemon=True)
        self._beat.start()

    def close(self) -> None:
        self._stop.set()
        if self._beat.is_alive():
            self._beat.join(HEARTBEAT_S + 1)
        super().close()

    def create(
        self,
        job_id: str,
        created: float,
        state: str,
        body: str,
        documents: Sequence[Document],
        *,
        owner: str | None = None,
    ) -> None:
        """Store a job with its documents, together or not at all; a job already
        stored is left as it is (so importing one twice is harmless)."""
        rows = [
            (job_id, i, d.text, d.title, d.source, json.dumps(d.metadata))
            for i, d in enumerate(documents)
        ]
        with self._conn("store a job") as conn:
            inserted = conn.execute(
                "INSERT INTO server_jobs (id, created, state, owner, body) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                (job_id, created, state, self.owner if owner is None else owner, body),
            ).rowcount
            if inserted and rows:
                with conn.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO server_job_documents VALUES (%s, %s, %s, %s, %s, %s)", rows
                    )

    def save(self, job_id: str, state: str, body: str) -> bool:
        """Record the job's state and body (this replica runs it); returns whether
        another replica asked to cancel it."""
        with self._conn("save a job") as conn:
            row = conn.execute(
                "UPDATE server_jobs SET state = %s, body = %s, owner = %s, beat = now() "
                "WHERE id = %s RETURNING cancel",
                (state, body, self.owner, job_id),
            ).fetchone()
        return bool(row and row[0])

    def get(self, job_id: str) -> tuple[str, bool] | None:
        """A job's body and whether a cancel was asked for (None: no such job)."""
        with self._conn("read a job", transaction=False) as conn:
            row = conn.execute(
                "SELECT body, cancel FROM server_jobs WHERE id = %s", (job_id,)
            ).fetchone()
        return None if row is None else (str(row[0]), bool(row[1]))

    def page(self, offset: int, limit: int) -> tuple[int, list[tuple[str, bool]]]:
        """Jobs newest first, ``limit`` from ``offset``, and how many there are."""
        with self._conn("list jobs") as conn:
            total = conn.execute("SELECT count(*) FROM server_jobs").fetchone()
            rows = conn.execute(
                "SELECT body, cancel FROM server_jobs ORDER BY created DESC, id LIMIT %s OFFSET %s",
                (limit, offset),
            ).fetchall()
        return int(total[0]) if total else 0, [(str(b), bool(c)) for b, c in rows]

    def counts(self) -> dict[str, int]:
        with self._conn("count jobs", transaction=False) as conn:
            rows = conn.execute("SELECT state, count(*) FROM server_jobs GROUP BY state").fetchall()
        return {str(state): int(n) for state, n in rows}

    def ask_cancel(self, job_id: str) -> bool:
        """Ask the replica running job ``job_id`` to cancel it; False where the job is
        not unfinished (or not there)."""
        with self._conn("ask to cancel a job") as conn:
            done = conn.execute(
                "UPDATE server_jobs SET cancel = true WHERE id = %s AND state = ANY(%s)",
                (job_id, self.unfinished),
            ).rowcount
        return bool(done)

    def claim_unfinished(self) -> list[tuple[str, bool]]:
        """Take up the unfinished jobs whose replica stopped (no heartbeat for
        :data:`ORPHAN_S` s, or a process of this host that no longer runs) or that
        have none (imported from an older server's records), oldest
        first: they are this replica's from now on. Returns their bodies and cancel
        flags."""
        with self._conn("take up unfinished jobs") as conn:
            rows = conn.execute(
                "SELECT id, owner, beat < now() - make_interval(secs => %s) FROM server_jobs "
                "WHERE state = ANY(%s) ORDER BY created, id FOR UPDATE SKIP LOCKED",
                (ORPHAN_S, self.unfinished),
            ).fetchall()
            ids = [
                job_id
                for job_id, owner, lapsed in rows
                if owner != self.owner and (not owner or lapsed or process_gone(owner))
            ]
            if not ids:
                return []
            claimed = conn.execute(
                "UPDATE server_jobs SET owner = %s, beat = now() WHERE id = ANY(%s) "
                "RETURNING id, body, cancel, created",
                (self.owner, ids),
            ).fetchall()
        claimed.sort(key=lambda r: (r[3], r[0]))
        return [(str(body), bool(cancel)) for _, body, cancel, _ in claimed]

    def documents(self, job_id: str) -> list[Document]:
        """The documents of job ``job_id``, as they were given."""
        with self._conn("read a job's documents", transaction=False) as conn:
            rows = conn.execute(
                "SELECT text, title, source, metadata FROM server_job_documents "
                "WHERE job_id = %s ORDER BY position",
                (job_id,),
            ).fetchall()
        return [
            Document(text, title, source, json.loads(meta)) for text, title, source, meta in rows
        ]

    def _beat_loop(self) -> None:
        """Renew the heartbeat of this replica's unfinished jobs until closed."""
        while not self._stop.wait(HEARTBEAT_S):
            try:
                with self._conn("renew the jobs' heartbeat", transaction=False) as conn:
                    conn.execute(
                        "UPDATE server_jobs SET beat = now() WHERE owner = %s AND state = ANY(%s)",
                        (self.owner, self.unfinished),
                    )
            except StoreError as exc:  # the server away: the next beat tries again
                logger.info("cannot renew the jobs' heartbeat yet (%s)", exc)
