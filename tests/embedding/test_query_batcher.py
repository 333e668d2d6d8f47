"""QueryBatcher: concurrent queries embedded together, an idle one at once, errors to
every waiter of the batch; and the engine's aretrieve, which uses it."""

import asyncio
import threading
import time

import numpy as np
import pytest

from quillian.components.concurrency import ThreadOffload
from quillian.components.embedding.batching import QueryBatcher
from quillian.engine import Engine
from quillian.testing.corpus import tiny_index


class SlowEmbedder:
    """Vectors from the text's length; each call takes 20 ms and is recorded."""

    def __init__(self, fail_on: str = "") -> None:
        self.batches: list[list[str]] = []
        self.fail_on = fail_on
        self.lock = threading.Lock()

    def __call__(self, texts):
        with self.lock:
            self.batches.append(list(texts))
        time.sleep(0.02)
        if self.fail_on in texts:
            raise RuntimeError(f"cannot embed {self.fail_on!r}")
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_concurrent_queries_share_calls_and_get_their_own_vectors():
    embedder = SlowEmbedder()
    offload = ThreadOffload(2)

    async def go():
        batcher = QueryBatcher(embedder, offload, max_batch=8)
        alone = await batcher.embed("x")
        texts = ["a" * n for n in range(1, 21)]
        vectors = await asyncio.gather(*(batcher.embed(t) for t in texts))
        return batcher, alone, texts, vectors

    batcher, alone, texts, vectors = asyncio.run(go())
    offload.close()
    assert embedder.batches[0] == ["x"] and alone.tolist() == [1.0, 1.0]
    assert [v[0] for v in vectors] == [len(t) for t in texts]
    assert batcher.calls == len(embedder.batches) < 1 + len(texts)
    assert max(len(b) for b in embedder.batches) == 8
    assert sorted(t for b in embedder.batches[1:] for t in b) == sorted(texts)


def test_an_error_reaches_every_waiter_of_its_batch_only():
    embedder = SlowEmbedder(fail_on="bad")
    offload = ThreadOffload(2)

    async def go():
        batcher = QueryBatcher(embedder, offload)
        first = asyncio.ensure_future(batcher.embed("first"))
        await asyncio.sleep(0)  # "first" runs alone; the next two wait together
        results = await asyncio.gather(
            batcher.embed("bad"), batcher.embed("fine"), return_exceptions=True
        )
        return await first, results, await batcher.embed("after")

    first, (bad, fine), after = asyncio.run(go())
    offload.close()
    assert first[0] == 5 and after[0] == 5
    assert isinstance(bad, RuntimeError) and isinstance(fine, RuntimeError)
    assert embedder.batches == [["first"], ["bad", "fine"], ["after"]]


@pytest.mark.parametrize("method", ["sa", "dense", "ppr", "bm25"])
def test_engine_aretrieve_at_once_equals_retrieve_one_by_one(tmp_path, method):
    tiny_index(tmp_path)
    engine = Engine.open(tmp_path, embedder="keyword")
    queries = [
        "Where was Charles Babbage born?",
        "Who worked with Charles Babbage?",
        "What is the capital of England?",
        "What was the Analytical Engine?",
    ] * 3
    expected = [[p.chunk_id for p in engine.retrieve(q, method, 2).passages] for q in queries]

    async def go():
        return await asyncio.gather(*(engine.aretrieve(q, method, 2) for q in queries))

    results = asyncio.run(go())
    engine.close()
    assert [[p.chunk_id for p in r.passages] for r in results] == expected
    assert engine._batcher.calls < len(queries) if method != "bm25" else engine._batcher.calls == 0
