"""On a PostgreSQL workspace the texts' and chunks' vector keys are kept in the
machine's local cache: an update there hashes only the texts and chunks it brings, and
a machine without the files (a fresh cache) keys every one again, to the same keys (a
real server; marked ``postgres``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from quillian.components.retrieval.keyed import vector_keys
from quillian.index import distinct_texts, graph_positions
from quillian.index import text_keys as text_keys_module
from quillian.index.layout import server_backend
from quillian.index.text_keys import CHUNK_KEYS_FILE, KEYS_FILE
from quillian.testing.corpus import build_tiny

pytest.importorskip("psycopg")

pytestmark = pytest.mark.postgres

CORPUS = {
    f"Person {i}": f"Person {i} was taught by Person {(i * 7) % 31} in Town {i % 5}."
    for i in range(31)
}
TITLES = list(CORPUS)


def test_the_keys_stay_in_the_machine_s_cache(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    hashed: list[str] = []

    def counted(model_id: str, texts: list[str]) -> npt.NDArray[np.int64]:
        hashed.extend(texts)
        return vector_keys(model_id, texts)

    monkeypatch.setattr(text_keys_module, "vector_keys", counted)
    build_tiny(postgres_url, CORPUS, titles=TITLES[:20])
    cache = server_backend().parse_location(postgres_url).cache
    assert (cache / KEYS_FILE).is_file() and (cache / CHUNK_KEYS_FILE).is_file()
    seen = set(hashed)
    hashed.clear()
    build_tiny(postgres_url, CORPUS, titles=TITLES[20:30])
    assert hashed and not seen & set(hashed)  # only the texts the update brought
    seen |= set(hashed)
    hashed.clear()
    for name in (KEYS_FILE, CHUNK_KEYS_FILE):  # another machine's cache: no keys kept there
        (cache / name).unlink()
    graph_positions.KEPT.clear()  # nor any in its memory
    distinct_texts.KEPT.clear()
    build_tiny(postgres_url, CORPUS, titles=TITLES[30:])
    assert seen < set(hashed)  # every text and chunk keyed again, the new one's too
    assert (cache / KEYS_FILE).is_file() and (cache / CHUNK_KEYS_FILE).is_file()
