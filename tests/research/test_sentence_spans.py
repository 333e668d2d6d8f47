"""The sentence benchmark's account of a corpus's sentences."""

import json
from pathlib import Path

from sentence_spans import spans_of


def test_a_corpus_is_counted_chunk_by_chunk(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    docs = [
        {"title": "Ada", "text": "Ada was born in London. She met Charles Babbage."},
        {"title": "Glosses", "text": "joinery. the craft of a joiner\n\nloading. the labor"},
    ]
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    first = spans_of(corpus)
    assert (first["documents"], first["chunks"], first["sentences"]) == (2, 2, 4)
    assert first["sentences_with_a_paragraph_break"] == first["chunks_after_the_first"] == 0
    assert first["longest_sentence_chars"] == len("joinery. the craft of a joiner")
    assert len(first["per_chunk"]) == 2 and spans_of(corpus)["digest"] == first["digest"]
    docs[1]["text"] = "joinery. the craft of a joiner\n\nloading. the labour"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    assert spans_of(corpus)["digest"] != first["digest"]
