"""A PostgreSQL collection defers its deletes: a reader opened for an index snapshot
(``retired=True``) still finds what a later build deleted, until a flush purges the
rows retired longer ago than the grace period. A delete leaves the collection's rows
as they are (the retired ids go to a table of their own). A collection written before
deletes gains its column when opened, and rows an older Quillian retired in that column
are moved to the table by a writer's flush."""

import numpy as np
import pytest

from quillian.stores.postgres import PgVectorIndex
from quillian.testing.contracts import unit_vectors

pytestmark = pytest.mark.postgres

DIM = 8


def test_a_snapshot_reader_keeps_deleted_vectors_until_the_purge(postgres_url: str) -> None:
    x = unit_vectors(30, DIM, 0)
    with PgVectorIndex(postgres_url, "chunks", DIM) as writer:
        writer.add(np.arange(30), x)
    reader = PgVectorIndex(postgres_url, "chunks", retired=True)
    with PgVectorIndex(postgres_url, "chunks") as writer:
        writer.delete([3, 4])
        writer.flush()  # within the grace period: nothing purged
        assert len(writer) == 28 and writer.search(x[3], 1)[0][0, 0] != 3
        with pytest.raises(KeyError):
            writer.get([3])
    assert len(reader) == 30 and reader.search(x[3], 1)[0][0, 0] == 3
    np.testing.assert_allclose(reader.get([3, 4]), x[3:5], atol=1e-6)
    with PgVectorIndex(postgres_url, "chunks", grace_s=0) as writer:
        writer.delete([5])
        writer.flush()  # retired at least 0 s ago: purged
    reader.close()
    with PgVectorIndex(postgres_url, "chunks", retired=True) as later:
        assert len(later) == 27
        with pytest.raises(KeyError):
            later.get([4])


def test_the_purge_keeps_vectors_added_again(postgres_url: str) -> None:
    x = unit_vectors(4, DIM, 1)
    with PgVectorIndex(postgres_url, "texts", DIM, grace_s=0) as index:
        index.add([1, 2, 3], x[:3])
        index.delete([2, 3])
        index.add([2], x[3])  # revived with a new vector
        index.flush()
        np.testing.assert_array_equal(index.ids(), [1, 2])
    with PgVectorIndex(postgres_url, "texts", retired=True) as reader:
        np.testing.assert_array_equal(reader.ids(), [1, 2])
        np.testing.assert_allclose(reader.get([2]), x[3:], atol=1e-6)


def test_a_collection_written_before_deletes_gains_its_column(postgres_url: str) -> None:
    x = unit_vectors(5, DIM, 2)
    with PgVectorIndex(postgres_url, "chunks", DIM) as index:
        index.add(np.arange(5), x)
    index = PgVectorIndex(postgres_url, "chunks")  # the table as an older Quillian left it
    with index.workspace.connection("drop the column") as conn:
        conn.execute("ALTER TABLE vectors_chunks DROP COLUMN retired_at")
    index.close()
    with PgVectorIndex(postgres_url, "chunks") as index:
        index.delete([0])
        assert len(index) == 4 and index.search(x[1], 1)[0][0, 0] == 1


def test_the_purge_reads_the_retired_rows_by_an_index_of_their_own(postgres_url: str) -> None:
    """A writer's flush indexes the rows an older Quillian retired in the collection's
    column where the collection lacks the index (looking for them scanned every row:
    0.04 s a collection at 100k); a reader makes none."""
    x = unit_vectors(6, DIM, 3)
    with PgVectorIndex(postgres_url, "chunks", DIM) as index:
        index.add(np.arange(6), x)
    statement = "SELECT to_regclass('vectors_chunks_ret') IS NOT NULL"
    with PgVectorIndex(postgres_url, "chunks", retired=True) as reader:
        with reader.workspace.connection("drop the index, as an older Quillian had none") as conn:
            assert conn.execute(statement).fetchone() == (True,)  # the first flush's
            conn.execute("DROP INDEX vectors_chunks_ret")
        reader.flush()
        with reader.workspace.connection("look for the index") as conn:
            assert conn.execute(statement).fetchone() == (False,)
    with PgVectorIndex(postgres_url, "chunks", grace_s=0) as writer:
        writer.delete([1, 2])
        writer.flush()
        with writer.workspace.connection("plan the purge") as conn:
            assert conn.execute(statement).fetchone() == (True,)
            conn.execute("SET LOCAL enable_seqscan = off")
            plan = conn.execute(
                "EXPLAIN DELETE FROM vectors_chunks WHERE retired_at < now()"
            ).fetchall()
        assert any("vectors_chunks_ret" in line for (line,) in plan)
        np.testing.assert_array_equal(writer.ids(), [0, 3, 4, 5])


def row_versions(index: PgVectorIndex, ids: list[int]) -> list[tuple[str, str]]:
    """Where each of the collection's rows ``ids`` lies and which transaction wrote it."""
    with index.workspace.connection("read the rows' versions") as conn:
        rows = conn.execute(
            "SELECT ctid::text, xmin::text FROM vectors_chunks WHERE id = ANY(%s) ORDER BY id",
            (ids,),
        ).fetchall()
    return [(str(a), str(b)) for a, b in rows]


def test_a_delete_leaves_the_collections_rows_as_they_are(postgres_url: str) -> None:
    """A retired row is not written again (a new version of it went into the HNSW graph
    again: 1.8-2.0 ms a vector at 100k passages), and a search through HNSW (the exact
    scan's limit set below the collection) skips it and still ranks by score."""
    x = unit_vectors(40, DIM, 4)
    with PgVectorIndex(postgres_url, "chunks", DIM) as writer:
        writer.add(np.arange(40), x)
    with PgVectorIndex(postgres_url, "chunks", exact_limit=1) as writer:
        before = row_versions(writer, [3, 4, 5])
        writer.delete([3, 4])
        assert row_versions(writer, [3, 4, 5]) == before
        ids, scores = writer.search(x[3], 5)
        assert 3 not in ids[0] and 4 not in ids[0] and len(set(ids[0].tolist())) == 5
        assert np.all(np.diff(scores[0]) <= 0)
        assert len(writer) == 38 and writer.ids().tolist() == [
            i for i in range(40) if i not in (3, 4)
        ]
    with PgVectorIndex(postgres_url, "chunks", retired=True, exact_limit=1) as reader:
        assert reader.search(x[3], 1)[0][0, 0] == 3


def test_rows_an_older_quillian_retired_are_moved_by_a_writers_flush(postgres_url: str) -> None:
    x = unit_vectors(6, DIM, 5)
    with PgVectorIndex(postgres_url, "chunks", DIM) as writer:
        writer.add(np.arange(6), x)
        with writer.workspace.connection("retire as an older Quillian did") as conn:
            conn.execute("UPDATE vectors_chunks SET retired_at = now() WHERE id IN (1, 2)")
        assert writer.ids().tolist() == [0, 3, 4, 5]
        writer.add([2], x[2])  # revived
        writer.flush()  # within the grace period: moved, not purged
        with writer.workspace.connection("look for the retired rows") as conn:
            assert conn.execute(
                "SELECT count(*) FROM vectors_chunks WHERE retired_at IS NOT NULL"
            ).fetchone() == (0,)
            moved = conn.execute(
                "SELECT id FROM retired_vectors WHERE collection = 'chunks'"
            ).fetchall()
        assert moved == [(1,)]
        assert writer.ids().tolist() == [0, 2, 3, 4, 5]
    with PgVectorIndex(postgres_url, "chunks", retired=True) as reader:
        assert reader.ids().tolist() == list(range(6))
    with PgVectorIndex(postgres_url, "chunks", grace_s=0) as writer:
        writer.delete([0])
        writer.flush()
    with PgVectorIndex(postgres_url, "chunks", retired=True) as reader:
        assert reader.ids().tolist() == [2, 3, 4, 5]
