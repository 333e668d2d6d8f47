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
