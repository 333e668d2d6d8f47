"""A workspace counts its documents as they change (statement triggers adding rows of
counts, folded as they pile up), so counting them reads no document: random writes
(new documents, documents stored again, deletes of known and unknown ids) always leave
the count the table's own; a workspace without the triggers gets them, with a first
count from every row, from its next count (a real server; marked ``postgres``)."""

from __future__ import annotations

import random

import pytest

from quillian.types import Document

pytest.importorskip("psycopg")
from quillian.stores.postgres import PgDocumentStore
from quillian.stores.postgres import documents as pg_documents

pytestmark = pytest.mark.postgres


def counted_rows(store: PgDocumentStore) -> tuple[int, int]:
    """The table's own count and the rows of counts the triggers keep."""
    with store._conn("count every row") as conn:
        (every,) = conn.execute("SELECT count(*) FROM documents").fetchone() or (0,)
        (rows,) = conn.execute("SELECT count(*) FROM document_counts").fetchone() or (0,)
    return int(every), int(rows)


def test_the_count_kept_by_triggers_follows_every_write(postgres_url: str) -> None:
    rng = random.Random(5)
    store = PgDocumentStore(postgres_url)
    try:
        store.put_documents([Document(f"text {i}", f"title {i}") for i in range(5)])
        assert store.count_documents() == 5  # the first count makes the triggers
        with store._conn("drop the triggers, as a workspace made before them") as conn:
            for event in ("insert", "delete", "truncate"):
                conn.execute(f"DROP TRIGGER documents_counted_{event} ON documents")
        store.put_documents([Document("text 5", "title 5")])  # counted by no trigger
        assert store.count_documents() == 6  # made again, with the count of every row
        for step in range(120):
            chosen = [Document(f"text {i}", f"title {i}") for i in rng.sample(range(30), 4)]
            if rng.random() < 0.6:
                store.put_documents(chosen)  # some new, some stored again
            else:
                store.delete_documents([d.id for d in chosen] + ["no such document"])
            every, rows = counted_rows(store)
            assert store.count_documents() == every, step
            assert rows <= pg_documents._COUNT_ROWS + len(chosen)  # folded as they pile up
        with store._conn("empty the table") as conn:
            conn.execute("TRUNCATE documents CASCADE")
        assert store.count_documents() == 0
    finally:
        store.close()
