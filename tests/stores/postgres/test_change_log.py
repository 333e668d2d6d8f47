"""The PostgreSQL change log beyond the contract: a writer's transaction still running
when a mark is taken is reported after it commits, and a workspace made before the log
gets it from its first mark."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("psycopg")
from quillian.stores.postgres import PgChangeLog, PgDocumentStore, PgStatusStore
from quillian.stores.protocols import DocStatus
from quillian.types import Chunk

pytestmark = pytest.mark.postgres


@pytest.fixture
def log(postgres_url: str) -> Iterator[PgChangeLog]:
    with PgChangeLog(postgres_url) as log:
        yield log


def _chunk(doc: str) -> Chunk:
    return Chunk(doc, 0, f"{doc} text", 0, 9, "T")


def test_a_transaction_running_at_a_mark_is_reported_once_committed(log: PgChangeLog) -> None:
    with log.workspace.connection("write") as conn:
        conn.execute(
            "INSERT INTO chunks (id, doc_id, idx, text, char_start, char_end, title)"
            " VALUES ('c-slow', 'doc-slow', 0, 't', 0, 1, 'T')"
        )
        mark = log.mark()  # taken while the insert is not committed
        since = log.changed_since(mark)
        assert since is not None and since[1] == []  # not visible yet
        middle = since[0]
    since = log.changed_since(mark)
    assert since is not None and since[1] == ["doc-slow"]
    since = log.changed_since(middle)  # the slow writer ran at that mark too
    assert since is not None and since[1] == ["doc-slow"]


def test_a_workspace_made_before_the_log_gets_it_from_the_first_mark(
    log: PgChangeLog,
) -> None:
    with log.workspace.connection("drop the log") as conn:
        conn.execute("DROP TRIGGER chunks_logged ON chunks")
        conn.execute("DROP TRIGGER doc_status_logged ON doc_status")
        conn.execute("DROP FUNCTION log_doc_change()")
        conn.execute("DROP TABLE doc_changes, doc_changes_meta")
    assert log.changed_since("0" * 32 + ":1:1:") is None
    log.forget("0" * 32 + ":1:1:")  # nothing to forget: no error
    with PgDocumentStore(log.workspace) as docs, PgStatusStore(log.workspace) as status:
        docs.put_chunks([_chunk("doc-before")])  # unlogged: no log yet
        mark = log.mark()
        docs.put_chunks([_chunk("doc-after")])
        status.set_status(["doc-status"], DocStatus.PROCESSED)
    since = log.changed_since(mark)
    assert since is not None and since[1] == ["doc-after", "doc-status"]


def test_a_mark_past_the_present_is_refused(log: PgChangeLog) -> None:
    """A workspace put back to an older copy keeps its log's id: a mark taken later
    names transactions it has not reached, and is refused."""
    mark = log.mark()
    name, _, snapshot = mark.partition(":")
    xmin, xmax, _ = snapshot.split(":")
    ahead = f"{name}:{int(xmin) + 10**6}:{int(xmax) + 10**6}:"
    assert log.changed_since(ahead) is None
    assert log.changed_since(mark) is not None


def test_an_update_on_a_workspace_patches_the_kept_chunks(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build's chunk list on PostgreSQL follows the workspace's log: a later build
    reads the changed documents only, and gets the table read whole."""
    from quillian.index.chunk_catalog import processed_chunks
    from quillian.index.chunk_table import ChunkTable
    from quillian.index.storage import open_storage

    passes = []
    original = PgDocumentStore.iter_chunk_heads
    monkeypatch.setattr(
        PgDocumentStore, "iter_chunk_heads", lambda self: passes.append(1) or original(self)
    )
    with open_storage(postgres_url, create=True) as storage:
        for doc in ("doc-b", "doc-a", "doc-c"):
            storage.documents.put_chunks([_chunk(doc)])
            storage.status.set_status([doc], DocStatus.PROCESSED)
        assert processed_chunks(storage).doc_ids == ["doc-a", "doc-b", "doc-c"]
        assert len(passes) == 1
        storage.documents.put_chunks([_chunk("doc-d")])
        storage.status.set_status(["doc-d"], DocStatus.PROCESSED)
        storage.status.set_status(["doc-b"], DocStatus.FAILED, error="x")
        table = processed_chunks(storage)
        assert len(passes) == 1  # patched: no pass over every chunk
        processed = set(storage.status.ids_with_status(DocStatus.PROCESSED))
        whole = ChunkTable.read(storage.documents, processed)
        assert (table.ids, table.doc_ids, table.titles) == (whole.ids, whole.doc_ids, whole.titles)
        assert table.doc_ids == ["doc-a", "doc-c", "doc-d"]
