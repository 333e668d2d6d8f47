"""Whether two source trees split the same corpora into the same sentences.

Run ``python research/sentence_spans.py CORPUS... --src TREE_BEFORE --src TREE_AFTER``
(each ``CORPUS`` a file ``quillian index`` reads: the bench's ``corpus.json`` files, the
20 MB text). For each tree, in its own process with its ``src/`` first on
``PYTHONPATH``, it reads every corpus, chunks it as ``quillian index`` does by default
(``IndexSettings``' chunker and sizes) and splits every chunk into sentences
(``text.split_sentences``, what every extractor's links and descriptions are made
from). Per corpus and tree: the documents, chunks and sentences, the longest sentence,
the sentences holding a paragraph break, the chunks after their document's first (where
a topic not named in the chunk is no longer linked to its names, ``5eb2bc5``), and a
SHA-256 of every chunk's id and its sentence spans; then, per corpus, whether the
trees' digests are equal and how many chunks' spans differ. Equal digests and no chunk
after a document's first mean every extractor makes the same links from the same
mentions in both trees, so their graphs and retrieval are the same on that corpus.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from proc_watch import python_env

__all__ = ["main", "spans_of"]

_PARAGRAPH = re.compile(r"\n[^\S\n]*\n")


def spans_of(corpus: Path) -> dict[str, Any]:
    """The sentences of ``corpus``'s chunks under the imported tree (see the module)."""
    from quillian.components.extraction.text import split_sentences
    from quillian.components.factories import make_chunker
    from quillian.components.ingestion.readers import read_documents
    from quillian.engine.indexing import IndexSettings

    settings = IndexSettings()
    chunker = make_chunker(settings.chunker, settings.chunk_size, settings.overlap)
    digest = hashlib.sha256()
    per_chunk: dict[str, str] = {}
    docs = chunks = later = sentences = longest = spanning = 0
    for doc in read_documents(corpus):
        docs += 1
        for chunk in chunker.chunk(doc):
            chunks += 1
            later += chunk.index > 0
            spans = split_sentences(chunk.text) if chunk.text.strip() else []
            sentences += len(spans)
            for start, end in spans:
                longest = max(longest, end - start)
                spanning += bool(_PARAGRAPH.search(chunk.text, start, end))
            line = f"{chunk.id} {spans}\n".encode()
            digest.update(line)
            per_chunk[chunk.id] = hashlib.sha256(line).hexdigest()[:16]
    return {
        "documents": docs,
        "chunks": chunks,
        "chunks_after_the_first": later,
        "sentences": sentences,
        "longest_sentence_chars": longest,
        "sentences_with_a_paragraph_break": spanning,
        "digest": digest.hexdigest(),
        "per_chunk": per_chunk,
    }


def _tree(src: Path, corpora: list[Path]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", *map(str, corpora)],
        env=python_env(src),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--src", type=Path, action="append", default=[])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps({str(c): spans_of(c) for c in args.corpora}))
        return
    if len(args.src) < 2:
        parser.error("give two trees or more (--src TREE --src TREE)")
    trees = {str(src): _tree(src, args.corpora) for src in args.src}
    first, *rest = trees.values()
    out: dict[str, Any] = {"corpora": {}}
    for corpus in map(str, args.corpora):
        chunks = first[corpus]["per_chunk"]
        out["corpora"][corpus] = {
            "trees": {
                t: {k: v for k, v in r[corpus].items() if k != "per_chunk"}
                for t, r in trees.items()
            },
            "same_sentences": all(r[corpus]["digest"] == first[corpus]["digest"] for r in rest),
            "chunks_that_differ": [
                sum(r[corpus]["per_chunk"].get(c) != d for c, d in chunks.items()) for r in rest
            ],
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
