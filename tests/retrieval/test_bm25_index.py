"""The BM25 index on corpora bm25s cannot index on its own."""

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
