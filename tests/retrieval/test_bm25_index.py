"""The BM25 index on corpora bm25s cannot index on its own, and bm25s imported only
where needed, without jax."""

import os
import subprocess
import sys

from quillian.components.retrieval.bm25_index import BM25Index


def test_a_corpus_of_stop_words_and_punctuation_matches_nothing(tmp_path):
    index = BM25Index.build(["the of and", "!!! ..."])
    index.save(tmp_path)
    loaded = BM25Index.load(tmp_path)
    for found in (index, loaded):
        ids, scores = found.search("what is it", 3)
        assert ids.size == 0 and scores.size == 0


def test_a_normal_corpus_round_trips(tmp_path):
    BM25Index.build(["Charles Babbage was born in London.", "Ada Lovelace"]).save(tmp_path)
    ids, scores = BM25Index.load(tmp_path).search("Where was Babbage born?", 2)
    assert ids.tolist() == [0] and scores[0] > 0


#: A jax whose backend cannot start, as on a machine with its CUDA plugin and no usable
#: device: bm25s ran ``jax.lax.top_k`` as it was imported, and the RuntimeError stopped
#: ``quillian serve``.
BROKEN_JAX = {
    "jax/__init__.py": "from jax import lax\n",
    "jax/lax.py": "def top_k(*args, **kwargs):\n"
    "    raise RuntimeError(\"Unable to initialize backend 'cuda'\")\n",
}

PROBE = """
import sys
from pathlib import Path
from quillian.components.retrieval.bm25_incremental import update_bm25
from quillian.components.retrieval.bm25_index import BM25Index
texts = ["Charles Babbage was born in London.", "Ada Lovelace"]
built = Path(sys.argv[1]) / "bm25s"
built.mkdir()
BM25Index.build(texts).save(built)
print(BM25Index.load(built).search("Where was Babbage born?", 2)[0].tolist())
incremental = Path(sys.argv[1]) / "incremental"
update_bm25(incremental, ["c0", "c1"], lambda at: [texts[i] for i in at])
del sys.modules["bm25s"]
print(BM25Index.load(incremental).search("Where was Babbage born?", 2)[0].tolist())
print("bm25s" in sys.modules, "jax" in sys.modules)
"""


def test_bm25s_is_imported_without_jax_and_only_for_an_index_it_wrote(tmp_path):
    fake = tmp_path / "site"
    for name, text in BROKEN_JAX.items():
        (fake / name).parent.mkdir(parents=True, exist_ok=True)
        (fake / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), *sys.path])}
    run = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
    # found by bm25s's own index and by the incremental one, which never imports bm25s
    assert run.stdout.split("\n")[:3] == ["[0]", "[0]", "False False"]
