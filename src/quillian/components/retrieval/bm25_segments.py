"""The files of an incremental BM25 index: segments of rows (one row per chunk), each
holding raw term frequencies and row lengths, so adding or removing rows never
rewrites what is stored (BM25's IDF and average length are computed at query time).

A segment is a folder of ``.npy`` files, written once and memory-mapped when opened:

- ``ids.npy``: each row's chunk id (bytes), its key across builds and its tie-break;
- ``lengths.npy``: each row's token count after stop words (BM25's document length);
- ``hashes.npy``, ``term_offsets.npy``, ``term_bytes.npy``: the segment's vocabulary,
  sorted by a 64-bit hash of each term's UTF-8 bytes then by the bytes (a query term is
  found by a binary search over the hashes and checked against its bytes);
- ``indptr.npy``, ``rows.npy``, ``tfs.npy``: postings per term (rows in order).

Offsets and frequencies are stored in the narrowest of a few widths their values fit
(:func:`~quillian.stores.mapped.narrowed`: a term's frequency in a chunk in 16 bits,
offsets in 32): half to a quarter of 64-bit integers' bytes. Readers take any width; a
segment written before holds 64 and 32 bits.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.errors import MissingExtraError
from quillian.stores.integrity import save_recorded
from quillian.stores.mapped import narrowed

__all__ = ["Segment", "merge_segments", "term_hash", "tokenize", "write_segment"]

_FILES = (
    "ids",
    "lengths",
    "hashes",
    "term_offsets",
    "term_bytes",
    "indptr",
    "rows",
    "tfs",
)


def _stemmer() -> Any:
    try:
        import Stemmer
    except ImportError:  # pragma: no cover - PyStemmer is a core dependency
        raise MissingExtraError("PyStemmer", "all") from None
    return Stemmer.Stemmer("english").stemWords


_STEM: Any = None


def stemmer() -> Any:
    """The Snowball English stemmer's ``stemWords`` (one per process)."""
    global _STEM
    if _STEM is None:
        _STEM = _stemmer()
    return _STEM


#: bm25s's English stop words (``bm25s.stopwords.STOPWORDS_EN``, NLTK's via Lucene's),
#: which ``bm25s.tokenize(..., stopwords="en")`` drops; a test checks they stay equal.
STOPWORDS_EN = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)
#: bm25s's (and scikit-learn's) word pattern.
_WORD = re.compile(r"(?u)\b\w\w+\b")


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """bm25s's tokens of each text (``bm25s.tokenize(texts, stopwords="en",
    stemmer=...)``): lower-cased words of two or more characters, stop words left out,
    then Snowball-stemmed (duplicates kept, in order). Done here rather than through
    bm25s, whose import (numba, scipy) costs seconds a build would pay for one chunk."""
    words = [[w for w in _WORD.findall(t.lower()) if w not in STOPWORDS_EN] for t in texts]
    unique = list({w: None for doc in words for w in doc})
    stems = dict(zip(unique, stemmer()(unique), strict=True))
    return [[stems[w] for w in doc] for doc in words]


def term_hash(term: bytes) -> int:
    """The 64-bit hash a segment sorts and finds its terms by."""
    return int.from_bytes(hashlib.blake2b(term, digest_size=8).digest(), "little")


@dataclass(frozen=True)
class Segment:
    """One segment's arrays, memory-mapped."""

    ids: npt.NDArray[np.bytes_]
    lengths: npt.NDArray[np.int32]
    hashes: npt.NDArray[np.uint64]
    term_offsets: npt.NDArray[np.int64]
    term_bytes: npt.NDArray[np.uint8]
    indptr: npt.NDArray[np.int64]
    rows: npt.NDArray[np.int32]
    tfs: npt.NDArray[np.int32]

    @classmethod
    def open(cls, folder: Path) -> Segment:
        # plain arrays over the mappings: numpy's memmap subclass costs per slice
        arrays = {n: np.asarray(np.load(folder / f"{n}.npy", mmap_mode="r")) for n in _FILES}
        return cls(**arrays)

    @property
    def n_rows(self) -> int:
        return len(self.ids)

    def term(self, i: int) -> bytes:
        return self.term_bytes[self.term_offsets[i] : self.term_offsets[i + 1]].tobytes()

    def terms(self) -> list[bytes]:
        blob = self.term_bytes.tobytes()
        offsets = self.term_offsets.tolist()
        return [blob[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]

    def find(self, term: bytes, hashed: int) -> int:
        """The index of ``term`` in this segment's vocabulary, or -1."""
        h = np.uint64(hashed)
        lo = int(np.searchsorted(self.hashes, h, "left"))
        hi = int(np.searchsorted(self.hashes, h, "right"))
        for i in range(lo, hi):
            if self.term(i) == term:
                return i
        return -1

    def postings(self, i: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        """The rows holding term ``i`` and its frequency in each."""
        start, end = int(self.indptr[i]), int(self.indptr[i + 1])
        return self.rows[start:end], self.tfs[start:end]


def write_segment(
    folder: Path,
    ids: npt.NDArray[np.bytes_],
    lengths: npt.NDArray[np.int32],
    terms: list[bytes],
    posting_terms: npt.NDArray[np.int64],
    posting_rows: npt.NDArray[np.int64],
    posting_tfs: npt.NDArray[np.int64],
) -> None:
    """Write a segment of ``len(ids)`` rows whose postings are the triples (index into
    ``terms``, row, term frequency); each (term, row) pair at most once."""
    folder.mkdir(parents=True)
    hashes = np.array([term_hash(t) for t in terms], dtype=np.uint64)
    order = sorted(range(len(terms)), key=lambda i: (int(hashes[i]), terms[i]))
    rank = np.empty(len(terms), dtype=np.int64)
    rank[order] = np.arange(len(terms))
    sorted_terms = [terms[i] for i in order]
    offsets = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in sorted_terms], out=offsets[1:])
    term_of = rank[posting_terms] if len(posting_terms) else np.zeros(0, np.int64)
    by = np.lexsort((posting_rows, term_of))
    indptr = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(np.bincount(term_of, minlength=len(terms)), out=indptr[1:])
    arrays: dict[str, npt.NDArray[Any]] = {
        "ids": np.asarray(ids, dtype=np.bytes_) if len(ids) else np.zeros(0, "S1"),
        "lengths": np.asarray(lengths, dtype=np.int32),
        "hashes": hashes[order] if len(terms) else np.zeros(0, np.uint64),
        "term_offsets": narrowed(offsets, np.int32),
        "term_bytes": np.frombuffer(b"".join(sorted_terms), dtype=np.uint8),
        "indptr": narrowed(indptr, np.int32),
        "rows": narrowed(np.asarray(posting_rows, dtype=np.int64)[by], np.uint16, np.int32),
        "tfs": narrowed(np.asarray(posting_tfs, dtype=np.int64)[by], np.uint16, np.int32),
    }
    for name, array in arrays.items():
        save_recorded(folder / f"{name}.npy", array)


def segment_from_tokens(folder: Path, ids: Sequence[str], tokens: Sequence[Sequence[str]]) -> None:
    """Write the segment of rows ``ids`` with these token lists: O(tokens)."""
    vocab: dict[str, int] = {}
    p_terms: list[int] = []
    p_rows: list[int] = []
    p_tfs: list[int] = []
    for row, doc in enumerate(tokens):
        for token, tf in Counter(doc).items():
            p_terms.append(vocab.setdefault(token, len(vocab)))
            p_rows.append(row)
            p_tfs.append(tf)
    write_segment(
        folder,
        np.array([i.encode() for i in ids], dtype=np.bytes_),
        np.array([len(doc) for doc in tokens], dtype=np.int32),
        [t.encode("utf-8") for t in vocab],
        np.array(p_terms, dtype=np.int64),
        np.array(p_rows, dtype=np.int64),
        np.array(p_tfs, dtype=np.int64),
    )


def merge_segments(
    folder: Path, segments: Sequence[Segment], live: Sequence[npt.NDArray[np.bool_]]
) -> None:
    """Write one segment of the ``live`` rows of ``segments``, in order (from their
    postings: nothing is tokenized again)."""
    vocab: dict[bytes, int] = {}
    parts: list[tuple[npt.NDArray[np.int64], ...]] = []
    base = 0
    for segment, keep in zip(segments, live, strict=True):
        uid = np.array([vocab.setdefault(t, len(vocab)) for t in segment.terms()], np.int64)
        new_row = np.cumsum(keep, dtype=np.int64) - 1 + base
        indptr = np.asarray(segment.indptr, dtype=np.int64)
        counts = indptr[1:] - indptr[:-1]
        terms = np.repeat(uid, counts) if len(uid) else np.zeros(0, np.int64)
        rows = np.asarray(segment.rows, dtype=np.int64)
        kept = keep[rows]
        tfs = np.asarray(segment.tfs, dtype=np.int64)
        parts.append((terms[kept], new_row[rows[kept]], tfs[kept]))
        base += int(keep.sum())
    write_segment(
        folder,
        np.concatenate([np.asarray(s.ids)[k] for s, k in zip(segments, live, strict=True)]),
        np.concatenate([np.asarray(s.lengths)[k] for s, k in zip(segments, live, strict=True)]),
        list(vocab),
        *(np.concatenate([p[i] for p in parts]).astype(np.int64) for i in range(3)),
    )
