"""An incremental BM25 index whose scores equal bm25s's (its default: Lucene's BM25,
k1 = 1.5, b = 0.75, the same tokens), updated at the cost of what changed.

Rows (one per chunk, keyed by chunk id) live in segments (:mod:`.bm25_segments`) that
are written once. A build compares the chunk ids the index holds with the build's:
new chunks are tokenized into a new segment, missing ones become tombstones (``-1`` in
the row -> chunk position map written per build). N, the average length and each
term's document frequency count live rows only, and are computed at query time from
the postings a query reads. Segments merge as a binary counter does (the newest ones
while the segment before them holds at most twice their live rows), so there are
O(log n) of them and a row is rewritten O(log n) times; all of them merge into one,
tombstones dropped, when tombstones pass a quarter of the rows. Merging reads postings,
never text: nothing is tokenized twice.

``manifest.json`` names the segments and the position map; it is replaced atomically
after the new files are written, so a build killed mid-update leaves the previous
index whole, and a file an opened index maps is never modified (only unlinked once no
manifest names it).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from quillian.components.retrieval.bm25_segments import (
    Segment,
    merge_segments,
    segment_from_tokens,
    term_hash,
    tokenize,
)
from quillian.errors import IndexDamagedError, InputError
from quillian.stores.integrity import file_record, save_recorded, verify_files, walk_files
from quillian.stores.snapshot import ids_as_bytes, stable_numbers

__all__ = ["FORMAT", "MANIFEST", "BM25Update", "Moves", "SegmentedBM25", "update_bm25"]

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
FORMAT = "quillian-bm25-segments"
VERSION = 1
#: bm25s's defaults (``bm25s.BM25()``): Lucene's IDF and length normalisation.
K1, B = 1.5, 0.75
#: All segments merge into one when tombstones pass this share of the stored rows.
DEAD_SHARE = 0.25


@dataclass(frozen=True)
class BM25Update:
    """What one update did: rows added and tombstoned, segments merged, all compacted."""

    added: int
    removed: int
    merged: int
    compacted: bool


class SegmentedBM25:
    """The opened index: its segments and position map, memory-mapped."""

    def __init__(self, directory: Path, manifest: dict[str, Any]) -> None:
        self.manifest = manifest
        self.segments = [Segment.open(directory / s["name"]) for s in manifest["segments"]]
        self.positions: npt.NDArray[np.int32] = np.asarray(
            np.load(directory / manifest["positions"], mmap_mode="r")
        )
        sizes = [s.n_rows for s in self.segments]
        self.bases = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self.n_live = int(manifest["live"])
        self.avgdl = manifest["total_length"] / self.n_live if self.n_live else 0.0
        if int(self.bases[-1]) != len(self.positions):
            raise IndexDamagedError(
                str(directory / manifest["positions"]),
                f"{len(self.positions)} positions for {int(self.bases[-1])} rows",
            )

    @classmethod
    def load(cls, directory: Path) -> SegmentedBM25 | None:
        """The index in ``directory``, or None where it holds no segmented index. An
        update that swapped the manifest and retired its files between reading the
        manifest and mapping them is met by reading the new manifest."""
        for attempt in range(3):
            manifest = read_manifest(directory)
            if manifest is None:
                return None
            try:
                return cls(directory, manifest)
            except FileNotFoundError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _term_scores(
        self, term: str
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None:
        """Live rows holding ``term`` and its BM25 score in each, as bm25s computes it."""
        raw = term.encode("utf-8")
        hashed = term_hash(raw)
        rows, tfs, lengths = [], [], []
        for segment, base in zip(self.segments, self.bases, strict=False):
            i = segment.find(raw, hashed)
            if i < 0:
                continue
            local, tf = segment.postings(i)
            glob = local.astype(np.int64) + base
            live = self.positions[glob] >= 0
            rows.append(glob[live])
            tfs.append(tf[live])
            lengths.append(segment.lengths[local[live]])
        if not rows:
            return None
        glob = np.concatenate(rows)
        df = len(glob)
        if df == 0:
            return None
        n = self.n_live
        idf = np.float32(math.log(1 + (n - df + 0.5) / (df + 0.5)))
        dl = np.concatenate(lengths).astype(np.float64)
        tf32 = np.concatenate(tfs).astype(np.float32)
        tfc = tf32 / (K1 * ((1 - B) + B * dl / self.avgdl) + tf32)
        return glob, (np.float64(idf) * tfc).astype(np.float32)

    def search(self, query: str, k: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Chunk positions and BM25 scores of the top ``k`` (fewer when few chunks
        match), equal scores in chunk id order."""
        tokens = tokenize([query])[0]
        if not tokens or self.n_live == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        scores = np.zeros(len(self.positions), dtype=np.float32)
        found = {t: self._term_scores(t) for t in dict.fromkeys(tokens)}
        for token in tokens:  # each occurrence adds, in query order, as in bm25s
            if (hit := found[token]) is not None:
                scores[hit[0]] += hit[1]
        rows = np.flatnonzero(scores > 0)
        return self._top(rows, scores[rows], k)

    def _top(
        self, rows: npt.NDArray[np.int64], scores: npt.NDArray[np.float32], k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        if len(rows) > k:
            threshold = np.partition(scores, len(scores) - k)[len(scores) - k]
            keep = scores >= threshold
            rows, scores = rows[keep], scores[keep]
        order = np.lexsort((self.chunk_ids(rows), -scores))[:k]
        return self.positions[rows[order]].astype(np.int64), scores[order]

    def chunk_ids(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bytes_]:
        """The chunk id of each of ``rows``."""
        seg = np.searchsorted(self.bases, rows, "right") - 1
        out = np.empty(len(rows), dtype="S64")
        for s in np.unique(seg):
            at = seg == s
            out[at] = self.segments[s].ids[rows[at] - self.bases[s]]
        return out


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """The segmented index's manifest in ``directory``; None where there is none (no
    index yet, or one bm25s wrote)."""
    path = directory / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IndexDamagedError(str(path), f"unreadable: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None  # a bm25s index (its own params file is not named so)
    return manifest


class Moves(Protocol):
    """Where the rows of the chunk table an index was last brought to went in the
    build's (:class:`~quillian.index.chunk_table.ChunkMoves`)."""

    def added(self) -> npt.NDArray[np.int64]: ...
    def moved(self, rows: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.int64]: ...


def update_bm25(
    directory: Path,
    chunk_ids: Sequence[str],
    texts: Callable[[Sequence[int]], list[str]],
    *,
    table: str | None = None,
    since: str | None = None,
    moves: Moves | None = None,
) -> BM25Update:
    """Bring the index in ``directory`` to the chunks ``chunk_ids`` (in index order):
    ``texts(positions)`` gives the texts of the chunks it has to tokenize. Without a
    segmented index there (none, or one written by bm25s), every chunk is indexed into
    a fresh one.

    ``table`` names the chunk table of ``chunk_ids`` (kept in the manifest; None: not
    named); where the index was last brought to the table ``since`` and ``moves`` says
    where that table's rows went, its position map is carried through them: only the
    chunks added and gone are looked at, not every chunk's id matched again."""
    manifest = _reusable(directory)
    if manifest is None:
        return _build_fresh(directory, _unique(chunk_ids), texts, table)
    counter = _next_name(directory, manifest)
    _collect(directory, manifest)
    index = SegmentedBM25(directory, manifest)
    carried = None
    if moves is not None and since is not None and manifest.get("table") == since:
        carried = _carried(index, moves, chunk_ids)
    positions, added = carried or _match(index, _unique(chunk_ids))
    removed = int(((np.asarray(index.positions) >= 0) & (positions < 0)).sum())
    if (
        not len(added)
        and not removed
        and np.array_equal(positions, index.positions)
        and manifest.get("table") == table
    ):
        return BM25Update(0, 0, 0, False)
    segments = list(manifest["segments"])
    opened = list(index.segments)
    if len(added):
        name = f"seg-{counter:06d}"
        counter += 1
        segment_from_tokens(
            directory / name, [chunk_ids[i] for i in added], tokenize(texts(added.tolist()))
        )
        segments.append({"name": name})
        opened.append(Segment.open(directory / name))
        positions = np.concatenate([positions, added.astype(np.int32)])
    segments, opened, positions, merged, compacted, counter = _merge(
        directory, segments, opened, positions, counter
    )
    lengths = np.concatenate([np.asarray(s.lengths) for s in opened] or [np.zeros(0, np.int32)])
    _commit(directory, segments, positions, lengths, counter, manifest["files"], table)
    return BM25Update(len(added), removed, merged, compacted)


def _unique(chunk_ids: Sequence[str]) -> npt.NDArray[np.bytes_]:
    """The build's chunk ids as bytes, checked to be distinct."""
    if len(set(chunk_ids)) != len(chunk_ids):
        raise InputError("BM25: the build's chunk ids are not unique")
    return ids_as_bytes(chunk_ids)


def _carried(
    index: SegmentedBM25, moves: Moves, chunk_ids: Sequence[str]
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]] | None:
    """:func:`_match`'s answer from the position map carried through ``moves``: each
    live row's chunk where it went, a row whose chunk went kept where a chunk of the
    same id came (a changed document's chunk that stayed), and the chunks that came
    otherwise. None (logged) where the result does not cover each chunk once."""
    old = np.asarray(index.positions)
    positions = moves.moved(old).astype(np.int32)
    came = moves.added()
    went = np.flatnonzero((old >= 0) & (positions < 0))
    if len(went) and len(came):
        row_of = dict(zip(index.chunk_ids(went).tolist(), went.tolist(), strict=True))
        unmatched = []
        for at in came.tolist():
            row = row_of.get(chunk_ids[at].encode("utf-8"))
            if row is None:
                unmatched.append(at)
            else:
                positions[row] = at
        came = np.array(unmatched, dtype=np.int64)
    covered = np.bincount(positions[positions >= 0], minlength=len(chunk_ids))
    covered[came] += 1
    if len(covered) != len(chunk_ids) or not (covered == 1).all():
        logger.warning("BM25: the carried position map does not cover each chunk once")
        return None
    return positions, came


def _match(
    index: SegmentedBM25, want: npt.NDArray[np.bytes_]
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    """Each stored row's position among ``want`` (-1: dead, or no longer wanted), and the
    positions of the chunks no live row holds."""
    stored = np.concatenate([np.asarray(s.ids) for s in index.segments] or [want[:0]])
    positions = np.full(len(stored), -1, dtype=np.int32)
    if len(want) and len(stored):
        keys, stored_keys = _comparable(want, stored)
        order = np.argsort(keys)
        at = np.minimum(np.searchsorted(keys[order], stored_keys), len(want) - 1)
        found = (np.asarray(index.positions) >= 0) & (keys[order][at] == stored_keys)
        positions[found] = order[at[found]]
    covered = np.zeros(len(want), dtype=bool)
    covered[positions[positions >= 0]] = True
    return positions, np.flatnonzero(~covered)


def _comparable(
    want: npt.NDArray[np.bytes_], stored: npt.NDArray[np.bytes_]
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """``want`` and ``stored`` as keys that sort and compare as the ids do: the numbers
    of stable ids (:func:`~quillian.stores.snapshot.stable_numbers`) where both are
    stable ids of one head and width, as chunk ids are (a sort of 64-bit integers, four
    times faster than one of 22-byte strings); else the ids themselves."""
    if want.dtype.itemsize == stored.dtype.itemsize:
        a, b = stable_numbers(want), stable_numbers(stored)
        if a is not None and b is not None and a[0] == b[0]:
            return a[1], b[1]
    return want, stored


def _merge(
    directory: Path,
    segments: list[dict[str, Any]],
    opened: list[Segment],
    positions: npt.NDArray[np.int32],
    counter: int,
) -> tuple[list[dict[str, Any]], list[Segment], npt.NDArray[np.int32], int, bool, int]:
    """Merge segments by the rule in the module's docstring: all of them when
    tombstones pass :data:`DEAD_SHARE`, else the newest ones while the one before them
    holds at most twice their live rows. What is left, and its position map."""
    bases = np.concatenate([[0], np.cumsum([s.n_rows for s in opened], dtype=np.int64)])
    live = [int((positions[bases[i] : bases[i + 1]] >= 0).sum()) for i in range(len(opened))]
    compacted = len(positions) - sum(live) > DEAD_SHARE * len(positions)
    take = len(opened) if compacted else min(1, len(opened))
    if not compacted:
        acc = sum(live[-1:])
        while take < len(opened) and live[-1 - take] <= 2 * acc:
            acc += live[-1 - take]
            take += 1
        if take < 2:
            return segments, opened, positions, 0, False, counter
    first = len(opened) - take
    keep = [positions[bases[i] : bases[i + 1]] >= 0 for i in range(first, len(opened))]
    tail = positions[bases[first] :]
    positions = np.concatenate([positions[: bases[first]], tail[tail >= 0]])
    merging = opened[first:]
    segments, opened = segments[:first], opened[:first]
    if len(tail[tail >= 0]):
        name = f"seg-{counter:06d}"
        counter += 1
        merge_segments(directory / name, merging, keep)
        segments.append({"name": name})
        opened.append(Segment.open(directory / name))
    return segments, opened, positions, take, compacted, counter


def _commit(
    directory: Path,
    segments: list[dict[str, Any]],
    positions: npt.NDArray[np.int32],
    lengths: npt.NDArray[np.int32],
    counter: int,
    known: dict[str, Any],
    table: str | None = None,
) -> None:
    """Write the position map and swap in the manifest naming it (with each file's
    record: ``known`` ones kept, new ones made, and the chunk table it maps to where
    named); then unlink the files no manifest names any more."""
    name = f"positions-{counter:06d}.npy"
    save_recorded(directory / name, positions.astype(np.int32))
    alive = positions >= 0
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "method": "lucene",
        "k1": K1,
        "b": B,
        "segments": segments,
        "positions": name,
        "live": int(alive.sum()),
        "total_length": int(lengths[alive].sum()) if len(lengths) else 0,
        "next": counter + 1,
        "table": table,
    }
    names = [f"{s['name']}/{f}" for s in segments for f in walk_files(directory / s["name"])]
    manifest["files"] = {
        n: known[n] if n in known else file_record(directory / n) for n in [*names, name]
    }
    tmp = directory / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    os.replace(tmp, directory / MANIFEST)
    _collect(directory, manifest)


def _reusable(directory: Path) -> dict[str, Any] | None:
    """The stored index's manifest when its files are as written (each checked against
    the size and digest recorded when it was written; one this process wrote or read,
    its stamp unchanged since, by the digest it remembered); None when there is none, or
    a file is damaged (logged: the whole index is then built again)."""
    try:
        manifest = read_manifest(directory)
        if manifest is not None:
            # the files this process wrote or read as they are now are not read again
            # (each update read every file of the index: docs/scale.md, stop 95)
            verify_files(directory, manifest["files"], rebuild="the next build", known=True)
    except IndexDamagedError as exc:
        logger.warning("%s: indexing every chunk again", exc)
        return None
    return manifest


def _next_name(directory: Path, manifest: dict[str, Any]) -> int:
    """A number no file name in ``directory`` used (the manifest's next, or past the
    files a killed update left), so a name never comes back with other contents."""
    used = [
        int(m.group(1))
        for p in directory.iterdir()
        if (m := re.fullmatch(r"(?:seg|positions)-(\d+)(?:\.npy)?", p.name))
    ]
    return max([int(manifest["next"]), *(u + 1 for u in used)])


def _collect(directory: Path, manifest: dict[str, Any]) -> None:
    """Unlink what ``manifest`` does not name (the files an update killed before its
    swap left, or those a swap retired); opened indexes keep their mappings."""
    named = {MANIFEST, manifest["positions"], *(s["name"] for s in manifest["segments"])}
    for path in directory.iterdir():
        if path.name in named:
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _build_fresh(
    directory: Path,
    want: npt.NDArray[np.bytes_],
    texts: Callable[[Sequence[int]], list[str]],
    table: str | None = None,
) -> BM25Update:
    """Index every chunk into a fresh directory and swap it in for ``directory``."""
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    segments = []
    lengths = np.zeros(0, np.int32)
    ids = [w.decode() for w in want]
    if ids:
        segment_from_tokens(tmp / "seg-000001", ids, tokenize(texts(list(range(len(ids))))))
        segments.append({"name": "seg-000001"})
        lengths = np.asarray(Segment.open(tmp / "seg-000001").lengths)
    _commit(tmp, segments, np.arange(len(ids), dtype=np.int32), lengths, 2, {}, table)
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return BM25Update(len(ids), 0, 0, True)
