"""A workspace counts its documents and chunks as they change (statement triggers
adding rows of counts, folded as they pile up), so counting them reads no row of them:
random writes (new documents with their chunks, documents stored again, deletes of known
and unknown ids) always leave each count the table's own; a workspace without the
triggers gets them, with a first count from every row, from its next count (a real
server; marked ``postgres``)."""

from __future__ import annotations

import random

import pytest

from quillian.types import Chunk, Document

pytest.importorskip("psycopg")
from quillian.stores.postgres import PgDocumentStore
from quillian.stores.postgres import documents as pg_documents

pytestmark = pytest.mark.postgres


def every_row(store: PgDocumentStore) -> tuple[int, int, int]:
    """The tables' own counts, and the rows of counts the triggers keep."""
    with store._conn("count every row") as conn:
        (docs,) = conn.execute("SELECT count(*) FROM documents").fetchone() or (0,)
        (chunks,) = conn.execute("SELECT count(*) FROM chunks").fetchone() or (0,)
        (rows,) = conn.execute("SELECT count(*) FROM row_counts").fetchone() or (0,)
    return int(docs), int(chunks), int(rows)


def documents(numbers: list[int]) -> list[Document]:
    return [Document(f"text {i}", f"title {i}") for i in numbers]


def chunks(docs: list[Document]) -> list[Chunk]:
    return [Chunk(d.id, i, d.text, 0, len(d.text), d.title) for d in docs for i in range(2)]


def test_the_counts_kept_by_triggers_follow_every_write(postgres_url: str) -> None:
    rng = random.Random(5)
    store = PgDocumentStore(postgres_url)
    try:
        first = documents(list(range(5)))
        store.put_documents(first)
        store.put_chunks(chunks(first))
        # the first counts make the triggers
        assert (store.count_documents(), store.count_chunks()) == (5, 10)
        with store._conn("drop the triggers, as a workspace made before them") as conn:
            for table in ("documents", "chunks"):
                for event in ("insert", "delete", "truncate"):
                    conn.execute(f"DROP TRIGGER {table}_counted_{event} ON {table}")
        store.put_documents(documents([5]))  # counted by no trigger
        assert store.count_documents() == 6  # made again, with the count of every row
        for step in range(120):
            chosen = documents(rng.sample(range(30), 4))
            if rng.random() < 0.6:
                store.put_documents(chosen)  # some new, some stored again
                store.put_chunks(chunks(chosen))
            else:
                store.delete_documents([d.id for d in chosen] + ["no such document"])
            docs, stored_chunks, rows = every_row(store)
            assert (store.count_documents(), store.count_chunks()) == (docs, stored_chunks), step
            assert rows <= 2 * pg_documents._COUNT_ROWS + 4 * len(chosen)  # folded as they pile up
        with store._conn("empty the tables") as conn:
            conn.execute("TRUNCATE documents, chunks")
        assert (store.count_documents(), store.count_chunks()) == (0, 0)
    finally:
        store.close()
