"""A build brings each vector collection to its keys from what the previous build left
there: where the collection sums up its ids itself (PostgreSQL), the keys the previous
build saved are checked against that summary and no id is listed; a collection changed
behind the build's back fails the check, is listed and mended."""

import numpy as np
import pytest

from quillian.engine import IndexSettings, index_documents
from quillian.index.layout import local_directory
from quillian.index.stages import keys_path
from quillian.stores.protocols import ids_summary
from quillian.types import Document

pytest.importorskip("psycopg")
from quillian.stores.postgres import PgVectorIndex

SPACY = IndexSettings(extractor="spacy", embedder="keyword")
TEXTS = [
    "Ada Lovelace wrote the first program for the Analytical Engine.",
    "Charles Babbage designed the Analytical Engine in London.",
    "The Difference Engine was built from Babbage's plans in 1991.",
    "Alan Turing described a universal machine in 1936.",
    "Grace Hopper wrote the first compiler for the Harvard Mark I.",
]


@pytest.mark.postgres
def test_ids_summary_sums_up_the_ids_served(postgres_url: str) -> None:
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 2**63 - 1, size=40, dtype=np.int64)
    vectors = rng.normal(size=(40, 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with PgVectorIndex(postgres_url, "texts", 4) as index:
        assert index.ids_summary() == ids_summary(np.empty(0, np.int64)) == (0, 0, 0, 0)
        index.add(ids, vectors)
        index.delete(ids[:5])  # retired: not served by a writer, served by a reader
        assert index.ids_summary() == ids_summary(np.sort(ids[5:]))
        with PgVectorIndex(postgres_url, "texts", retired=True) as reader:
            assert reader.ids_summary() == ids_summary(np.sort(ids))


@pytest.mark.postgres
def test_the_id_sums_kept_by_triggers_follow_every_write(postgres_url: str) -> None:
    """Random adds (new ids, live ones replaced, retired ones revived), deletes (live,
    retired, unknown; some in the column an older Quillian retired in), purges and
    emptyings: the sums the triggers keep always equal
    the ids served, summed up from the table; a collection made before the triggers,
    or whose triggers were dropped, gets them with sums from every row."""
    rng = np.random.default_rng(11)
    pool = rng.integers(0, 2**63 - 1, size=60, dtype=np.int64)

    def vectors(n: int) -> np.ndarray:
        found = rng.normal(size=(n, 4)).astype(np.float32)
        return found / np.linalg.norm(found, axis=1, keepdims=True)

    index = PgVectorIndex(postgres_url, "sums", 4, grace_s=0)
    try:
        for step in range(40):
            chosen = rng.choice(pool, size=int(rng.integers(1, 12)), replace=True)
            match step % 8:
                case 3:
                    index.add(chosen, vectors(len(chosen)))
                    assert sum_rows(index) > 1
                    index.flush()  # purges every retired row (no grace) and folds the sums
                    assert sum_rows(index) == 1
                case 1:
                    with index._conn("retire as an older Quillian did, in the column") as conn:
                        conn.execute(
                            "UPDATE vectors_sums SET retired_at = now() WHERE id = ANY(%s)"
                            " AND retired_at IS NULL AND id NOT IN"  # live ones, as it found
                            " (SELECT id FROM retired_vectors WHERE collection = 'sums')",
                            (chosen.tolist(),),
                        )
                case 5:
                    with index._conn("drop the triggers") as conn:
                        for event in ("insert", "update", "delete"):
                            conn.execute(f"DROP TRIGGER id_sums_{event} ON vectors_sums")
                case 7 if step > 20:
                    index.close()
                    index = PgVectorIndex(postgres_url, "sums", 4, fresh=True, grace_s=0)
                case _ if rng.random() < 0.6:
                    index.add(chosen, vectors(len(chosen)))
                case _:
                    index.delete(np.concatenate([chosen, [7, 8]]))  # 7, 8: unknown
            assert index.ids_summary() == ids_summary(index.ids()), step
    finally:
        index.close()


def sum_rows(index: PgVectorIndex) -> int:
    """The rows of sums a collection's triggers have written since they were folded."""
    with index._conn("count the rows of sums") as conn:
        (rows,) = conn.execute(
            "SELECT count(*) FROM vector_id_sums WHERE collection = %s", (index.name,)
        ).fetchone()
    return int(rows)


@pytest.mark.model
@pytest.mark.postgres
@pytest.mark.parametrize("index_location", ["postgres"], indirect=True)
def test_an_update_lists_no_ids_unless_a_collection_changed_behind_it(
    index_location, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = index_location("synced")
    index_documents(location, [Document(t) for t in TEXTS[:3]], SPACY)
    listed: list[str] = []
    real = PgVectorIndex.ids

    def counted(index: PgVectorIndex) -> np.ndarray:
        listed.append(index.name)
        return real(index)

    monkeypatch.setattr(PgVectorIndex, "ids", counted)
    index_documents(location, [Document(TEXTS[3])], SPACY)
    assert listed == []
    chunks = np.unique(np.load(keys_path(local_directory(location), "chunks")))
    with PgVectorIndex(location, "chunks") as index:
        index.delete(chunks[:1])  # behind the build's back
    index_documents(location, [Document(TEXTS[4])], SPACY)
    assert listed == ["chunks"]
    wanted = np.unique(np.load(keys_path(local_directory(location), "chunks")))
    assert chunks[0] in wanted
    with PgVectorIndex(location, "chunks") as index:
        np.testing.assert_array_equal(real(index), wanted)  # the deleted vector added again
