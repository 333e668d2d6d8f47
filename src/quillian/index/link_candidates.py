"""Which chunks' texts contain a surface, without reading every text: the candidates
come from the postings of the previous build's BM25 index
(:mod:`~quillian.components.retrieval.bm25_incremental`), then each is checked exactly.

A title surface is found in a text only as whole words (:class:`text.TitleIndex`:
it starts at a word start and ends at a word boundary), so every word of the surface
is a word of the text, and every such word of two or more ASCII characters that is not
a stop word is a BM25 term of the chunk (lower-cased, stemmed). The rows holding the
surface's rarest such term are the candidates; ``surface in text`` decides. Surfaces
with no such word, and chunks the BM25 index does not hold live (it is missing,
damaged, of bm25s's format, or a build was stopped before its BM25 stage), are scanned.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path

import numpy as np

from quillian.components.retrieval.bm25_incremental import SegmentedBM25, read_manifest
from quillian.components.retrieval.bm25_segments import term_hash, tokenize
from quillian.errors import IndexDamagedError
from quillian.stores.integrity import verify_files
from quillian.types import Chunk

__all__ = ["chunks_containing"]

logger = logging.getLogger(__name__)

_WORD = re.compile(r"\w+")
#: Chunks read at once where texts are scanned.
_PAGE = 1000


def chunks_containing(
    surfaces: Iterable[str],
    ids: Collection[str],
    read: Callable[[Sequence[str]], Sequence[Chunk]],
    bm25: Path | None,
) -> set[str]:
    """Those of the chunks ``ids`` whose text contains one of ``surfaces`` as whole
    words (where a title gazetteer can find it), and maybe some holding it only inside
    longer words; candidates read from the BM25 index in ``bm25`` (None: every text is
    scanned). ``read`` gives chunks by id: only the candidates' texts are read."""
    surfaces = [s for s in dict.fromkeys(surfaces) if s]
    if not surfaces or not ids:
        return set()
    index = _open(bm25) if bm25 is not None else None
    if index is None:
        return _scanned(surfaces, list(ids), read)
    live = _live_ids(index)
    unheld = [i for i in ids if i.encode() not in live]
    scanned: list[str] = []
    found: set[str] = set()
    for surface in surfaces:
        term = _rarest_term(index, surface)
        if term is None:
            scanned.append(surface)
            continue
        candidates = [cid for cid in dict.fromkeys(_rows_with(index, term)) if cid in ids]
        found |= _scanned([surface], candidates + unheld, read)
    if scanned:
        found |= _scanned(scanned, list(ids), read)
    return found


def _scanned(
    surfaces: Sequence[str], ids: Sequence[str], read: Callable[[Sequence[str]], Sequence[Chunk]]
) -> set[str]:
    """Those of ``ids`` whose text holds one of ``surfaces``, read a page at a time."""
    found: set[str] = set()
    for start in range(0, len(ids), _PAGE):
        found.update(
            c.id for c in read(ids[start : start + _PAGE]) if any(s in c.text for s in surfaces)
        )
    return found


def _open(directory: Path) -> SegmentedBM25 | None:
    """The BM25 index in ``directory`` with its files checked, or None (logged when it
    is damaged: the texts are scanned instead)."""
    try:
        manifest = read_manifest(directory)
        if manifest is None:
            return None
        verify_files(directory, manifest["files"], rebuild="the next build")
        return SegmentedBM25(directory, manifest)
    except (IndexDamagedError, OSError, KeyError, ValueError) as exc:
        logger.warning("BM25 index unusable for linking (%s): scanning the chunk texts", exc)
        return None


def _live_ids(index: SegmentedBM25) -> set[bytes]:
    """The chunk ids of the index's live rows."""
    ids = np.concatenate([np.asarray(s.ids) for s in index.segments] or [np.zeros(0, "S1")])
    return set(ids[np.asarray(index.positions) >= 0].tolist())


def _rarest_term(index: SegmentedBM25, surface: str) -> bytes | None:
    """The BM25 term of ``surface`` that fewest rows hold (see the module's docstring);
    None when no word of it is one."""
    best: tuple[int, bytes] | None = None
    for word in dict.fromkeys(_WORD.findall(surface)):
        if not word.isascii():
            continue
        tokens = tokenize([word])[0]
        if len(tokens) != 1:
            continue
        term = tokens[0].encode("utf-8")
        hashed = term_hash(term)
        count = 0
        for segment in index.segments:
            i = segment.find(term, hashed)
            if i >= 0:
                count += int(segment.indptr[i + 1] - segment.indptr[i])
        if best is None or count < best[0]:
            best = (count, term)
    return None if best is None else best[1]


def _rows_with(index: SegmentedBM25, term: bytes) -> list[str]:
    """The chunk ids of the live rows holding ``term``."""
    hashed = term_hash(term)
    out: list[str] = []
    for segment, base in zip(index.segments, index.bases, strict=False):
        i = segment.find(term, hashed)
        if i < 0:
            continue
        local, _ = segment.postings(i)
        rows = local.astype(np.int64)
        live = np.asarray(index.positions)[rows + int(base)] >= 0
        out += [b.decode() for b in np.asarray(segment.ids)[rows[live]].tolist()]
    return out
