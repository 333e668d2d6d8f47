"""The corpus's linked extractions at the cost of what a build changes.

What the graph is built from depends on the corpus, not on each chunk alone: a
:class:`~quillian.components.extraction.base.LinkingExtractor` links every chunk over
every title, each topic keeps its title's alias only while it is safe among the titles
(:func:`~quillian.components.extraction.filters.settle_title_aliases`), and one-word
names used by too many documents are dropped
(:func:`~quillian.components.extraction.filters.drop_ambiguous_names`). Done from
scratch (:func:`linked_extractions`), that is linear in the corpus at every build.

:func:`link_corpus` gives exactly the same per-chunk results from the previous build's,
stored in the index's key-value store, recomputing only the chunks a change touches:

- a chunk is linked (and settled) again when it is new, when its text contains a
  title surface that came, went or names another title (a
  :class:`~quillian.components.extraction.base.SurfaceLinker`'s surfaces, candidates
  from the BM25 postings: :mod:`.link_candidates`), or when the safe alias of its title
  or of a topic it holds changed; a linking extractor that is no SurfaceLinker links
  every chunk again;
- each one-word name keeps the documents that count it, the chunks that name it and
  whether a topic protects it; a name that becomes, or stops being, ambiguous filters
  again only the chunks that name it.

The key-value store (not a file beside the index) holds this state because its writes
are per key on both backends: a PostgreSQL workspace patches the rows a build changed
where a file would be sent whole. Namespaces, per extractor name: ``linked:NAME`` (per
chunk: its title, settled extraction and, where the filter changed it, the filtered
one), ``linknames:NAME`` (per normalised name: documents counting it, chunks naming it,
topics protecting it) and ``linkmeta:NAME`` (the surfaces and safe aliases of the last
build, a fingerprint of the extractor and the filter's threshold, and whether the state
is complete, a key of its own that is removed before anything is written and put back
by :func:`commit_links`). A state marked incomplete (a build stopped while writing it), another
fingerprint or a record that does not read means every chunk is recomputed, logged once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quillian import __version__
from quillian.components.extraction.base import (
    Extraction,
    Extractor,
    LinkingExtractor,
    SurfaceLinker,
)
from quillian.components.extraction.filters import (
    drop_ambiguous_names,
    drop_names,
    name_use,
    settle_aliases,
    settle_title_aliases,
)
from quillian.components.extraction.serde import extraction_from_json, extraction_to_json
from quillian.components.extraction.text import title_aliases
from quillian.index.link_candidates import chunks_containing
from quillian.stores.protocols import KeyValueStore, iter_batches
from quillian.types import Chunk

__all__ = [
    "ExtractionDelta",
    "LinkedCorpus",
    "commit_links",
    "link_corpus",
    "linked_extractions",
]

logger = logging.getLogger(__name__)

#: The stored state's format; another one is recomputed.
FORMAT = 1
_STATE = "state"
_COMPLETE = "complete"
_BATCH = 512

ReadStored = Callable[[Sequence[Chunk]], Sequence[Extraction]]
"""The extractor's stored per-chunk results of the chunks given, in order (the build's
:func:`~quillian.index.build.extract_cached`)."""


def linked_extractions(
    chunks: Sequence[Chunk], extractor: Extractor, stored: Sequence[Extraction]
) -> list[Extraction]:
    """The extractions of the corpus ``chunks`` from their stored per-chunk results,
    from scratch: a linking extractor links them over every chunk title, and every
    topic keeps its title's alias only when it is safe among those titles."""
    titles = [c.title for c in chunks if c.title]
    if isinstance(extractor, LinkingExtractor):
        stored = extractor.link(chunks, stored, titles)
    return settle_title_aliases(stored, titles)


@dataclass(frozen=True, slots=True)
class ExtractionDelta:
    """The chunks whose filtered extraction (what the graph is built from) differs from
    the previous build's: ``added`` (new chunks), ``removed`` (gone) and ``changed``.
    ``fresh``: no previous state was usable, so every chunk is in ``added`` and a
    consumer rebuilds from scratch."""

    added: frozenset[str]
    removed: frozenset[str]
    changed: frozenset[str]
    fresh: bool = False

    @property
    def chunk_ids(self) -> frozenset[str]:
        """Every chunk id the delta names."""
        return self.added | self.removed | self.changed


@dataclass(frozen=True)
class LinkedCorpus:
    """A build's extractions, in chunk order: ``extractions`` linked and settled (what
    the KAG stages read), ``filtered`` without the ambiguous names (what the graph is
    built from), the ``delta`` of ``filtered`` since the last build, and how many
    chunks were linked or settled anew (``relinked``)."""

    extractions: list[Extraction]
    filtered: list[Extraction]
    delta: ExtractionDelta
    relinked: int


@dataclass
class _Record:
    title: str
    settled: Extraction
    filtered: Extraction


@dataclass
class _Name:
    """One normalised name's state: chunks of each document counting it, chunks naming
    it, topics protecting it."""

    docs: dict[str, int] = field(default_factory=dict)
    chunks: set[str] = field(default_factory=set)
    protected: int = 0

    def dropped(self, max_docs: int) -> bool:
        return max_docs > 0 and len(self.docs) > max_docs and self.protected == 0

    def to_json(self) -> bytes:
        data = {"docs": self.docs, "chunks": sorted(self.chunks), "protected": self.protected}
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> _Name:
        data = json.loads(raw)
        return cls(dict(data["docs"]), set(data["chunks"]), int(data["protected"]))


class _Damaged(Exception):
    """The stored state does not read, or contradicts itself."""


class _Spaces:
    def __init__(self, extractor: Extractor) -> None:
        self.records = f"linked:{extractor.name}"
        self.names = f"linknames:{extractor.name}"
        self.meta = f"linkmeta:{extractor.name}"


def link_corpus(
    kv: KeyValueStore,
    chunks: Sequence[Chunk],
    extractor: Extractor,
    read_stored: ReadStored,
    *,
    max_docs: int,
    bm25: Path | None = None,
    commit: bool = True,
) -> LinkedCorpus:
    """The linked, settled and filtered extractions of ``chunks`` (every processed
    chunk, in index order), equal to :func:`linked_extractions` then
    :func:`~quillian.components.extraction.filters.drop_ambiguous_names` with
    ``max_docs``, from the state the previous build stored in ``kv``; the state is
    brought up to date. ``bm25``: the BM25 index whose postings give the chunks a
    changed surface may occur in (None: the texts are scanned). Without ``commit``, the
    state stays marked unfinished until :func:`commit_links` (a build commits once its
    stages are done, so the next build's delta is relative to a graph that was built:
    a build stopped in its stages makes the next one recompute every chunk)."""
    spaces = _Spaces(extractor)
    titles = [c.title for c in chunks if c.title]
    context = {
        "surfaces": dict(extractor.link_surfaces(titles))
        if isinstance(extractor, SurfaceLinker)
        else {},
        "aliases": title_aliases(titles),
    }
    fingerprint = _fingerprint(extractor, max_docs)
    try:
        previous = _read_state(kv, spaces, fingerprint)
        if previous is not None:
            meta, records = previous
            out = _update(kv, spaces, chunks, extractor, read_stored, max_docs, bm25, meta,
                          records, context, fingerprint)  # fmt: skip
        else:
            out = _full(kv, spaces, chunks, extractor, read_stored, max_docs, context, fingerprint)
    except _Damaged as exc:
        logger.warning("stored linked extractions unusable (%s): linking every chunk", exc)
        out = _full(kv, spaces, chunks, extractor, read_stored, max_docs, context, fingerprint)
    if commit:
        commit_links(kv, extractor)
    return out


def commit_links(kv: KeyValueStore, extractor: Extractor) -> None:
    """Mark the state :func:`link_corpus` wrote as finished: the next build starts from
    it."""
    kv.put_many(_Spaces(extractor).meta, {_COMPLETE: b"1"})


def _fingerprint(extractor: Extractor, max_docs: int) -> dict[str, Any]:
    """What the stored state was made with: a non-linking extractor's results are its
    stored ones whatever its class (a delete reads them back through another)."""
    settings = extractor.link_settings() if isinstance(extractor, SurfaceLinker) else {}
    kind = "stored"
    if isinstance(extractor, LinkingExtractor):
        kind = "surfaces" if isinstance(extractor, SurfaceLinker) else "linking"
    return {
        "format": FORMAT,
        "quillian": __version__,
        "extractor": extractor.name,
        "kind": kind,
        "settings": json.loads(json.dumps(settings)),
        "max_docs": max_docs,
    }


def _read_state(
    kv: KeyValueStore, spaces: _Spaces, fingerprint: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, _Record]] | None:
    """The previous build's state, or None where there is none or it was made for
    another fingerprint; :class:`_Damaged` where it does not read."""
    raw, complete = kv.get_many(spaces.meta, [_STATE, _COMPLETE])
    if raw is None:
        logger.info("no stored linked extractions: linking every chunk")
        return None
    if complete != b"1":
        raise _Damaged("a build stopped before they were complete")
    try:
        meta = json.loads(raw)
    except ValueError as exc:
        raise _Damaged(f"{spaces.meta}: {exc}") from exc
    if not isinstance(meta, dict):
        raise _Damaged(f"{spaces.meta}: not an object")
    if meta.get("fingerprint") != fingerprint:
        logger.info("linked extractions stored for other settings: linking every chunk")
        return None
    records: dict[str, _Record] = {}
    for batch in iter_batches(list(kv.keys(spaces.records)), _BATCH):
        for key, value in zip(batch, kv.get_many(spaces.records, batch), strict=True):
            if value is None:
                continue
            try:
                records[key] = _read_record(value)
            except (ValueError, KeyError, TypeError) as exc:
                raise _Damaged(f"{spaces.records} {key}: {exc}") from exc
            if records[key].settled.chunk_id != key:
                raise _Damaged(
                    f"{spaces.records} {key}: holds chunk {records[key].settled.chunk_id}"
                )
    return meta, records


def _read_record(raw: bytes) -> _Record:
    title, settled, filtered = raw.split(b"\n", 2)
    first = extraction_from_json(settled)
    return _Record(json.loads(title), first, extraction_from_json(filtered) if filtered else first)


def _record(title: str, settled: Extraction, filtered: Extraction) -> bytes:
    parts = [json.dumps(title).encode(), extraction_to_json(settled)]
    parts.append(b"" if filtered == settled else extraction_to_json(filtered))
    return b"\n".join(parts)


def _link(
    chunks: Sequence[Chunk],
    extractor: Extractor,
    read_stored: ReadStored,
    titles: list[str],
    aliases: dict[str, str],
) -> list[Extraction]:
    """``chunks`` linked over ``titles`` and settled: :func:`linked_extractions` for
    some chunks of the corpus whose titles are ``titles``."""
    if not chunks:
        return []
    stored = read_stored(chunks)
    if isinstance(extractor, LinkingExtractor):
        stored = extractor.link(chunks, stored, titles)
    return settle_aliases(stored, aliases)


def _full(
    kv: KeyValueStore,
    spaces: _Spaces,
    chunks: Sequence[Chunk],
    extractor: Extractor,
    read_stored: ReadStored,
    max_docs: int,
    context: dict[str, Any],
    fingerprint: dict[str, Any],
) -> LinkedCorpus:
    """Every chunk from scratch; the state stored anew."""
    titles = [c.title for c in chunks if c.title]
    settled = _link(chunks, extractor, read_stored, titles, context["aliases"])
    filtered = drop_ambiguous_names(settled, max_docs=max_docs)
    names: dict[str, _Name] = {}
    for extraction in settled:
        _count(names, extraction, +1)
    _begin_write(kv, spaces)
    for space in (spaces.records, spaces.names):
        for batch in iter_batches(list(kv.keys(space)), _BATCH):
            kv.delete_many(space, batch)
    records = {
        c.id: _record(c.title, s, f) for c, s, f in zip(chunks, settled, filtered, strict=True)
    }
    _put(kv, spaces.records, records)
    _put(kv, spaces.names, {k: n.to_json() for k, n in names.items()})
    _end_write(kv, spaces, context, fingerprint)
    delta = ExtractionDelta(frozenset(records), frozenset(), frozenset(), fresh=True)
    return LinkedCorpus(settled, filtered, delta, len(chunks))


def _update(
    kv: KeyValueStore,
    spaces: _Spaces,
    chunks: Sequence[Chunk],
    extractor: Extractor,
    read_stored: ReadStored,
    max_docs: int,
    bm25: Path | None,
    meta: dict[str, Any],
    records: dict[str, _Record],
    context: dict[str, Any],
    fingerprint: dict[str, Any],
) -> LinkedCorpus:
    """The chunks a change touches recomputed over the previous build's state."""
    by_id = {c.id: c for c in chunks}
    removed = set(records) - set(by_id)
    fresh = {i for i, c in by_id.items() if i not in records or records[i].title != c.title}
    touched = fresh | _touched(by_id, extractor, bm25, meta, records, context, fresh)
    work = [i for i in by_id if i in touched]
    titles = [c.title for c in chunks if c.title]
    linked = _link([by_id[i] for i in work], extractor, read_stored, titles, context["aliases"])
    relinked = dict(zip(work, linked, strict=True))
    changed = {i for i, e in relinked.items() if i not in records or records[i].settled != e}
    names = _load_names(kv, spaces, {
        *(k for i in changed | removed if i in records for k in _keys(records[i].settled)),
        *(k for i in changed for k in _keys(relinked[i])),
    })  # fmt: skip
    before = {k: n.dropped(max_docs) for k, n in names.items()}
    for i in changed | removed:
        if i in records:
            _count(names, records[i].settled, -1)
    for i in changed:
        _count(names, relinked[i], +1)
    if any(n.protected < 0 or min(n.docs.values(), default=1) < 0 for n in names.values()):
        raise _Damaged(f"{spaces.names}: counts below zero")
    flipped = [k for k, n in names.items() if n.dropped(max_docs) != before[k]]
    refilter = changed | {i for k in flipped for i in names[k].chunks if i in by_id}

    def settled_of(i: str) -> Extraction:
        return relinked[i] if i in relinked else records[i].settled

    names.update(_load_names(kv, spaces, {
        k for i in refilter for k in name_use(settled_of(i)).named if k not in names
    }))  # fmt: skip
    drop = frozenset(k for k, n in names.items() if n.dropped(max_docs))
    filtered = {i: drop_names(settled_of(i), drop) for i in refilter}
    _store(kv, spaces, by_id, records, relinked, filtered, removed, names, context, fingerprint)
    out_settled = [settled_of(i) for i in by_id]
    out_filtered = [filtered[i] if i in filtered else records[i].filtered for i in by_id]
    delta = ExtractionDelta(
        added=frozenset(i for i in by_id if i not in records),
        removed=frozenset(removed),
        changed=frozenset(
            i for i in filtered if i in records and records[i].filtered != filtered[i]
        ),
    )
    return LinkedCorpus(out_settled, out_filtered, delta, len(work))


def _touched(
    chunks: dict[str, Chunk],
    extractor: Extractor,
    bm25: Path | None,
    meta: dict[str, Any],
    records: dict[str, _Record],
    context: dict[str, Any],
    fresh: set[str],
) -> set[str]:
    """The stored chunks whose link or settling the change of titles may change."""
    kept = {i: c for i, c in chunks.items() if i not in fresh}
    if isinstance(extractor, LinkingExtractor) and not isinstance(extractor, SurfaceLinker):
        return set(kept)
    old, new = meta["surfaces"], context["surfaces"]
    moved = [s for s in old.keys() | new.keys() if old.get(s) != new.get(s)]
    touched = chunks_containing(sorted(moved), kept, bm25)
    old, new = meta["aliases"], context["aliases"]
    realiased = {t for t in old.keys() | new.keys() if old.get(t) != new.get(t)}
    if realiased:
        touched.update(
            i
            for i, c in kept.items()
            if " ".join(c.title.split()) in realiased
            or not realiased.isdisjoint(_topics(records[i].settled))
        )
    return touched


def _topics(extraction: Extraction) -> set[str]:
    return {" ".join(e.name.split()) for e in extraction.entities if e.is_topic}


def _keys(extraction: Extraction) -> set[str]:
    use = name_use(extraction)
    return {*use.counted, *use.protected, *use.named}


def _count(names: dict[str, _Name], extraction: Extraction, sign: int) -> None:
    """Add (``sign`` 1) or take away (-1) what ``extraction`` gives the names' state."""
    use = name_use(extraction)
    for key in use.counted:
        name = names.setdefault(key, _Name())
        name.docs[extraction.doc_id] = name.docs.get(extraction.doc_id, 0) + sign
        if name.docs[extraction.doc_id] == 0:
            del name.docs[extraction.doc_id]
    for key in use.protected:
        names.setdefault(key, _Name()).protected += sign
    for key in use.named:
        chunks = names.setdefault(key, _Name()).chunks
        if sign > 0:
            chunks.add(extraction.chunk_id)
        else:
            chunks.discard(extraction.chunk_id)


def _load_names(kv: KeyValueStore, spaces: _Spaces, keys: Iterable[str]) -> dict[str, _Name]:
    out: dict[str, _Name] = {}
    for batch in iter_batches(sorted(set(keys)), _BATCH):
        for key, raw in zip(batch, kv.get_many(spaces.names, batch), strict=True):
            try:
                out[key] = _Name() if raw is None else _Name.from_json(raw)
            except (ValueError, KeyError, TypeError) as exc:
                raise _Damaged(f"{spaces.names} {key!r}: {exc}") from exc
    return out


def _store(
    kv: KeyValueStore,
    spaces: _Spaces,
    chunks: dict[str, Chunk],
    records: dict[str, _Record],
    relinked: dict[str, Extraction],
    filtered: dict[str, Extraction],
    removed: set[str],
    names: dict[str, _Name],
    context: dict[str, Any],
    fingerprint: dict[str, Any],
) -> None:
    """Write what changed: the state is marked incomplete until all of it is written."""
    changed = {}
    for i, chunk in chunks.items():
        if i not in relinked and i not in filtered:
            continue
        old = records.get(i)
        settled = relinked.get(i, old.settled if old else None)
        final = filtered.get(i, old.filtered if old else None)
        if settled is None or final is None:
            raise _Damaged(f"chunk {i} has no extraction")  # pragma: no cover
        if (
            old is None
            or old.title != chunk.title
            or old.settled != settled
            or old.filtered != final
        ):
            changed[i] = _record(chunk.title, settled, final)
    empty = [k for k, n in names.items() if not (n.docs or n.chunks or n.protected)]
    _begin_write(kv, spaces)
    _put(kv, spaces.records, changed)
    for batch in iter_batches(sorted(removed), _BATCH):
        kv.delete_many(spaces.records, batch)
    _put(kv, spaces.names, {k: n.to_json() for k, n in names.items() if k not in empty})
    for batch in iter_batches(empty, _BATCH):
        kv.delete_many(spaces.names, batch)
    _end_write(kv, spaces, context, fingerprint)


def _put(kv: KeyValueStore, space: str, items: Mapping[str, bytes]) -> None:
    for batch in iter_batches(list(items), _BATCH):
        kv.put_many(space, {k: items[k] for k in batch})


def _begin_write(kv: KeyValueStore, spaces: _Spaces) -> None:
    kv.delete_many(spaces.meta, [_COMPLETE])


def _end_write(
    kv: KeyValueStore, spaces: _Spaces, context: dict[str, Any], fingerprint: dict[str, Any]
) -> None:
    meta = {"fingerprint": fingerprint, **context}
    kv.put_many(spaces.meta, {_STATE: json.dumps(meta, ensure_ascii=False).encode()})
