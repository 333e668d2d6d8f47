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
topics protecting it), ``linktitles:NAME`` (per normalised title key: how many titles
claim it and which hold it as their alias candidate, :mod:`.link_titles`, so the
surfaces and safe aliases are patched by the titles that came and went),
``linktitlecounts:NAME`` (per title: how many chunks hold it, so which distinct titles
came and went is read from the changed chunks' titles alone), ``linkchunks:NAME`` (the
last build's chunk ids and their titles, in :data:`BUCKETS` buckets by a CRC-32 of the
id, so an update rewrites the buckets of the chunks that came, went or changed title,
not the corpus's list), ``linkaliases:NAME`` and ``linksurfaces:NAME`` (the safe
aliases by title and the surfaces by surface of the last build, in as many buckets, so
an update rewrites the buckets of those it changed) and ``linkmeta:NAME`` (a random id
of the last build (:attr:`ExtractionDelta.build`), the digest of the chunk catalog's
table it linked, a fingerprint of the extractor and the filter's threshold, and
whether the state is complete, a key of its own that is removed before anything is
written and put back by :func:`commit_links`). A state marked incomplete
(a build stopped while writing it), another fingerprint, or a record the update reads
that does not read means every chunk is recomputed, logged once; a record a later stage
reads that does not read is recomputed alone (only the records a build needs are read).

Which chunks came, went or changed title is itself a pass over every chunk, the
previous build's (read from the buckets) against this one's. Where this build's chunks
were patched by the chunk catalog (:mod:`.chunk_catalog`) from the very table the
state was linked over, the catalog's delta (the changed documents' chunks and titles,
before and after) answers it instead, and only those chunks' buckets are read.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import uuid
import zlib
from collections import OrderedDict
from collections.abc import (
    Callable,
    Collection,
    Container,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

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
from quillian.components.extraction.serde import (
    compressed,
    extraction_from_json,
    extraction_to_json,
)
from quillian.components.extraction.text import Surfaces, title_aliases
from quillian.errors import IndexDamagedError
from quillian.index.chunk_table import CatalogChanges, ChunkTable
from quillian.index.link_candidates import chunks_containing
from quillian.index.link_names import NameBook, NamesDamaged, names_of
from quillian.index.link_titles import (
    ContextChanges,
    TitleBook,
    TitleCounts,
    TitlesDamaged,
    clean_titles,
    patched_context,
)
from quillian.stores.protocols import KeyValueStore, iter_batches
from quillian.types import Chunk

__all__ = [
    "ExtractionDelta",
    "LinkedCorpus",
    "commit_links",
    "inflate_record",
    "link_corpus",
    "linked_extractions",
]

logger = logging.getLogger(__name__)

#: The stored state's format; another one is recomputed.
FORMAT = 4
_STATE = "state"
_COMPLETE = "complete"
#: The meta's mark that the title book (``linktitles:NAME``) follows its titles.
_TITLE_BOOK = "title_book"
#: The meta's mark that the title counts (``linktitlecounts:NAME``) follow its titles.
_TITLE_COUNTS = "title_counts"
#: The meta's digest of the chunk catalog's table the state was linked over (None: the
#: table was not kept): the next build whose table is that one patched takes the
#: catalog's delta as its own.
_CATALOG = "catalog"
#: The meta's count of the buckets its chunk ids and titles are kept in
#: (``linkchunks:NAME``); a meta without it keeps them in lists of its own (an older
#: build's), read once and then kept in buckets.
_BUCKETED = "chunk_buckets"
#: The meta's count of the buckets its safe aliases (``linkaliases:NAME``, by title)
#: and surfaces (``linksurfaces:NAME``, by surface) are kept in: an update rewrites the
#: buckets of those it changed, where the meta that held them whole (730 kB at 100k
#: passages) was written at each update. A meta without it holds them itself (an older
#: build's): read once, then kept in buckets.
_CONTEXT = "context_buckets"
#: Buckets of chunk ids and titles: a 100k-chunk corpus keeps about 100 in each, so an
#: update that adds or deletes a document rewrites a few kB, where the list it replaces
#: (5 MB at 100k) was written whole at each update.
BUCKETS = 1024
_BATCH = 512

ReadStored = Callable[[Sequence[Chunk]], Sequence[Extraction]]
"""The extractor's stored per-chunk results of the chunks given, in order (the build's
:func:`~quillian.index.build.extract_cached`)."""
ReadTexts = Callable[[Sequence[str]], Mapping[str, str]]
"""The texts of those of the chunk ids given that it has, by id."""


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
    consumer rebuilds from scratch. ``build`` names this build's linking state and
    ``since`` the previous one's, which the delta is relative to (None when fresh): a
    consumer that keeps state of its own tags it with ``build`` and patches it only
    where it carries ``since`` (a build that never committed its linking state left it
    for a delta the next build does not see)."""

    added: frozenset[str]
    removed: frozenset[str]
    changed: frozenset[str]
    fresh: bool = False
    build: str = ""
    since: str | None = None
    retitled: frozenset[str] = frozenset()
    """The chunks of ``since`` whose title changed (their id names their text, not the
    title a document given its own id may change), whatever their extraction did."""

    @property
    def chunk_ids(self) -> frozenset[str]:
        """Every chunk id the delta names."""
        return self.added | self.removed | self.changed


@dataclass(frozen=True)
class LinkedCorpus:
    """A build's extractions, in chunk order: ``extractions`` linked and settled (what
    the KAG stages read), ``filtered`` without the ambiguous names (what the graph is
    built from), the ``delta`` of ``filtered`` since the last build, and how many
    chunks were linked or settled anew (``relinked``). After an update, the chunks it
    did not touch are decoded from their stored records when first read."""

    extractions: Sequence[Extraction]
    filtered: Sequence[Extraction]
    delta: ExtractionDelta
    relinked: int


class _Texts:
    """Chunks' texts by id, which records are compressed against (:func:`_deflate`),
    read when a record needs one: this build's chunks from its table, the others (the
    chunks that went) from ``gone``; the last :data:`_TEXTS_KEPT` kept."""

    def __init__(self, table: ChunkTable, current: Container[str], gone: ReadTexts) -> None:
        self.table, self.current, self.gone = table, current, gone
        self._kept: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def prefetch(self, chunk_ids: Iterable[str]) -> None:
        """Read the texts of ``chunk_ids`` not kept, a batch at a time."""
        with self._lock:
            wanted = [i for i in dict.fromkeys(chunk_ids) if i not in self._kept]
        here = [i for i in wanted if i in self.current]
        found = {c.id: c.text for c in self.table.chunks(here)} if here else {}
        if gone := [i for i in wanted if i not in self.current]:
            found.update(self.gone(gone))
        with self._lock:
            self._kept.update(found)
            while len(self._kept) > _TEXTS_KEPT:
                self._kept.popitem(last=False)

    def get(self, chunk_id: str) -> str | None:
        """The text of ``chunk_id`` (None where neither source holds it)."""
        with self._lock:
            if chunk_id in self._kept:
                self._kept.move_to_end(chunk_id)
                return self._kept[chunk_id]
        self.prefetch([chunk_id])
        with self._lock:
            return self._kept.get(chunk_id)


class _Record:
    """One chunk's stored record: a checksum binding it to its key (so damage, or a
    record under another chunk's key, shows at the read), its title, and its settled
    and filtered extractions, compressed, decoded each time they are asked for: kept
    decoded, the records a stage reads through held the whole corpus's extractions
    (over 3 GB on the 20 MB text of docs/scale.md), and a build reads most once. A
    record compressed against its chunk's text (:func:`_deflate`) reads that text from
    ``texts``; one written before, compressed alone, is read as it is."""

    def __init__(self, key: str, raw: bytes, texts: _Texts) -> None:
        crc, body = raw[:8], raw[9:]
        if raw[8:9] != b"\n" or int(crc, 16) != _checksum(key, body):
            raise ValueError("checksum mismatch")
        title, self._packed = body.split(b"\n", 1)
        self.key = key
        self.title = json.loads(title)
        if not isinstance(self.title, str):
            raise TypeError("title is not a string")
        self._texts = texts

    @property
    def needs_text(self) -> bool:
        """Whether the record is compressed against its chunk's text."""
        return _has_dictionary(self._packed)

    def _parts(self) -> tuple[bytes, bytes]:
        text = self._texts.get(self.key) if self.needs_text else ""
        if text is None:  # a chunk that went, its text not in the last build's tables
            raise _Damaged(f"the text of chunk {self.key}, its record's dictionary, is gone")
        try:
            settled, filtered = inflate_record(self._packed, text).split(b"\n", 1)
        except (zlib.error, ValueError) as exc:  # checksummed: written so
            raise self._damaged(exc) from exc
        return settled, filtered

    @property
    def settled(self) -> Extraction:
        return self._decode(self._parts()[0])

    @property
    def filtered(self) -> Extraction:
        settled, filtered = self._parts()
        return self._decode(filtered or settled)

    def _decode(self, raw: bytes) -> Extraction:
        try:
            return extraction_from_json(raw)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise self._damaged(exc) from exc

    def _damaged(self, exc: Exception) -> IndexDamagedError:
        return IndexDamagedError(f"the linked extraction of chunk {self.key}", str(exc))


class _InOrder(Sequence[Extraction]):
    """Each chunk's extraction in index order: this build's where it computed one,
    else the stored record's (``stored``), decoded when first read."""

    def __init__(
        self,
        ids: Sequence[str],
        computed: Mapping[str, Extraction],
        stored: Callable[[str], Extraction],
        prefetch: Callable[[Sequence[str]], None] = lambda _: None,
    ) -> None:
        self._ids, self._computed, self._stored = ids, computed, stored
        self._prefetch = prefetch

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> Extraction: ...
    @overload
    def __getitem__(self, index: slice) -> list[Extraction]: ...
    def __getitem__(self, index: int | slice) -> Extraction | list[Extraction]:
        if isinstance(index, slice):
            return list(_InOrder(self._ids[index], self._computed, self._stored, self._prefetch))
        return self._of(self._ids[index])

    def __iter__(self) -> Iterator[Extraction]:
        for batch in iter_batches(self._ids, _BATCH):  # records read a batch at a time
            self._prefetch([i for i in batch if i not in self._computed])
            yield from map(self._of, batch)

    def _of(self, chunk_id: str) -> Extraction:
        found = self._computed.get(chunk_id)
        return self._stored(chunk_id) if found is None else found

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


class _Damaged(Exception):
    """The stored state does not read, or contradicts itself."""


class _Stored:
    """The previous build's records by chunk id: which chunks it held and their titles
    (kept in its meta), each record read from the store when first asked for, its
    checksum checked then. An update reads the records of the chunks it touches, not
    the corpus's; a record that does not read is :class:`_Damaged`."""

    def __init__(
        self, kv: KeyValueStore, space: str, titles: Mapping[str, str], texts: _Texts
    ) -> None:
        self.kv, self.space, self.titles, self.texts = kv, space, titles, texts
        self.read: dict[str, _Record] = {}

    def __contains__(self, chunk_id: object) -> bool:
        return chunk_id in self.titles

    def __iter__(self) -> Iterator[str]:
        return iter(self.titles)

    def __getitem__(self, chunk_id: str) -> _Record:
        if chunk_id not in self.read:
            self.load([chunk_id])
        return self.read[chunk_id]

    def get(self, chunk_id: str) -> _Record | None:
        return self[chunk_id] if chunk_id in self.titles else None

    def load(self, chunk_ids: Iterable[str]) -> None:
        """Read the records of ``chunk_ids`` (those the build held) not read yet."""
        wanted = [i for i in dict.fromkeys(chunk_ids) if i in self.titles and i not in self.read]
        for batch in iter_batches(wanted, _BATCH):
            for key, value in zip(batch, self.kv.get_many(self.space, batch), strict=True):
                if value is None:
                    raise _Damaged(f"{self.space} {key}: missing")
                try:
                    self.read[key] = _Record(key, value, self.texts)
                except (ValueError, TypeError) as exc:
                    raise _Damaged(f"{self.space} {key}: {exc}") from exc

    def ready(self, chunk_ids: Collection[str]) -> None:
        """Read the records of ``chunk_ids`` not read yet, and the texts those
        compressed against theirs need (a batch: :class:`_Texts` keeps only so many)."""
        self.load(chunk_ids)
        self.texts.prefetch(i for i in chunk_ids if i in self.read and self.read[i].needs_text)

    def load_all(self) -> None:
        """Read every record (an older state, whose meta keeps no titles: read for
        their titles, no text needed)."""
        self.load(self.titles)


def link_corpus(
    kv: KeyValueStore,
    chunks: Sequence[Chunk],
    extractor: Extractor,
    read_stored: ReadStored,
    *,
    max_docs: int,
    bm25: Path | None = None,
    commit: bool = True,
    gone_texts: ReadTexts | None = None,
) -> LinkedCorpus:
    """The linked, settled and filtered extractions of ``chunks`` (every processed
    chunk, in index order), equal to :func:`linked_extractions` then
    :func:`~quillian.components.extraction.filters.drop_ambiguous_names` with
    ``max_docs``, from the state the previous build stored in ``kv``; the state is
    brought up to date. ``bm25``: the BM25 index whose postings give the chunks a
    changed surface may occur in (None: the texts are scanned). Without ``commit``, the
    state stays marked unfinished until :func:`commit_links` (a build commits once its
    stages are done, so the next build's delta is relative to a graph that was built:
    a build stopped in its stages makes the next one recompute every chunk).
    ``gone_texts``: the texts of chunks of the last build that are not among
    ``chunks`` (the build reads its last graph tables), which their records are
    compressed against (:func:`_deflate`); where it does not give one (None: never),
    that record does not read, and every chunk is recomputed."""
    linker = _Linker(kv, extractor, read_stored, max_docs, bm25, chunks, gone_texts or _none)
    try:
        previous = linker.read_state()
        out = linker.full() if previous is None else linker.update(*previous)
    except (_Damaged, NamesDamaged, TitlesDamaged) as exc:
        logger.warning("stored linked extractions unusable (%s): linking every chunk", exc)
        out = linker.full()
    if commit:
        commit_links(kv, extractor)
    return out


def commit_links(kv: KeyValueStore, extractor: Extractor) -> None:
    """Mark the state :func:`link_corpus` wrote as finished: the next build starts from
    it."""
    kv.put_many(f"linkmeta:{extractor.name}", {_COMPLETE: b"1"})


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


class _Linker:
    """One build's pass: the corpus, the extractor and where the state is stored."""

    def __init__(
        self,
        kv: KeyValueStore,
        extractor: Extractor,
        read_stored: ReadStored,
        max_docs: int,
        bm25: Path | None,
        chunks: Sequence[Chunk],
        gone_texts: ReadTexts,
    ) -> None:
        self.kv, self.extractor, self.read_stored = kv, extractor, read_stored
        self.max_docs, self.bm25 = max_docs, bm25
        self.table = ChunkTable.of(chunks)
        #: each chunk's title by id (texts are read only for the chunks linked)
        self.titles_of = self.table.titles_by_id()
        self.texts = _Texts(self.table, self.titles_of, gone_texts)
        # the safe aliases and surfaces over the titles: made from scratch by full(),
        # patched from the previous build's by update() (read by read_state())
        self.aliases: dict[str, str] = {}
        self.surfaces = Surfaces({})
        #: what update() changed of them, the buckets it writes; None (full(), or
        #: read from an older meta that held them): every bucket is written
        self.context_changes: ContextChanges | None = None
        self.context_read_whole = True
        self.aliases_space = f"linkaliases:{extractor.name}"
        self.surfaces_space = f"linksurfaces:{extractor.name}"
        self.fingerprint = _fingerprint(extractor, max_docs)
        self.records_space = f"linked:{extractor.name}"
        self.names_space = f"linknames:{extractor.name}"
        self.titles_space = f"linktitles:{extractor.name}"
        self.counts_space = f"linktitlecounts:{extractor.name}"
        self.meta_space = f"linkmeta:{extractor.name}"
        self.chunks_space = f"linkchunks:{extractor.name}"
        #: the previous build's buckets of chunk ids and titles, where it kept them so
        #: (None: every bucket is written)
        self.buckets: dict[int, dict[str, str]] | None = None
        self.build = uuid.uuid4().hex

    @functools.cached_property
    def titles(self) -> list[str]:
        """The chunks' titles, the empty ones left out."""
        return [t for t in self.table.titles if t]

    def read_state(self) -> tuple[dict[str, Any], _Stored] | None:
        """The previous build's state, or None where there is none or it was made for
        another fingerprint; :class:`_Damaged` where its meta does not read (a record
        is read, and found damaged, when the update asks for it)."""
        raw, complete = self.kv.get_many(self.meta_space, [_STATE, _COMPLETE])
        if raw is None:
            logger.info("no stored linked extractions: linking every chunk")
            return None
        if complete != b"1":
            raise _Damaged("a build stopped before they were complete")
        try:
            meta = json.loads(raw)
        except ValueError as exc:
            raise _Damaged(f"{self.meta_space}: {exc}") from exc
        if not isinstance(meta, dict):
            raise _Damaged(f"{self.meta_space}: not an object")
        if meta.get("fingerprint") != self.fingerprint:
            logger.info("linked extractions stored for other settings: linking every chunk")
            return None
        self._read_context(meta)
        if _BUCKETED in meta:
            if meta[_BUCKETED] != BUCKETS:
                raise _Damaged(f"{self.meta_space}: {meta[_BUCKETED]!r} buckets, not {BUCKETS}")
            catalog = self.table.catalog
            if (
                catalog is not None
                and catalog.since is not None
                and meta.get(_CATALOG) == catalog.since
                and meta.get(_TITLE_BOOK) == 1
                and meta.get(_TITLE_COUNTS) == 1
            ):  # linked over the table this one was patched from: its delta is ours
                changed = catalog.before.keys() | catalog.after.keys()
                self.buckets = self._read_buckets(
                    self.chunks_space, sorted({_bucket(i) for i in changed})
                )
                previous = _Previous(self.titles_of, catalog)
                return meta, _Stored(self.kv, self.records_space, previous, self.texts)
            self.buckets = self._read_buckets(self.chunks_space, range(BUCKETS))
            titles_of: dict[str, str] = {}
            for bucket in self.buckets.values():
                titles_of.update(bucket)
            return meta, _Stored(self.kv, self.records_space, titles_of, self.texts)
        if not isinstance(chunk_ids := meta.get("chunks"), list):
            raise _Damaged(f"{self.meta_space}: no chunk list")
        titles = meta.get("titles")
        if titles is None:  # kept by older builds in the records only
            records = _Stored(self.kv, self.records_space, dict.fromkeys(chunk_ids, ""), self.texts)
            records.load_all()
            records.titles = {i: records.read[i].title for i in chunk_ids}
            return meta, records
        if not isinstance(titles, list) or len(titles) != len(chunk_ids):
            raise _Damaged(f"{self.meta_space}: the titles do not match the chunks")
        titles_of = dict(zip(chunk_ids, titles, strict=True))
        return meta, _Stored(self.kv, self.records_space, titles_of, self.texts)

    def _read_buckets(self, space: str, which: Sequence[int]) -> dict[int, dict[str, str]]:
        """The buckets ``which`` of ``space`` (chunk ids and titles, titles and safe
        aliases, surfaces and titles); :class:`_Damaged` where one is missing or does
        not read."""
        buckets: dict[int, dict[str, str]] = {}
        for batch in iter_batches(which, _BATCH):
            keys = [_bucket_key(b) for b in batch]
            for b, key, raw in zip(batch, keys, self.kv.get_many(space, keys), strict=True):
                where = f"{space} {key}"
                if raw is None:
                    raise _Damaged(f"{where}: missing")
                try:
                    bucket = json.loads(raw)
                except ValueError as exc:
                    raise _Damaged(f"{where}: {exc}") from exc
                if not isinstance(bucket, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in bucket.items()
                ):
                    raise _Damaged(f"{where}: not an object of strings")
                buckets[b] = bucket
        return buckets

    def link(self, ids: Sequence[str]) -> list[Extraction]:
        """The chunks ``ids`` linked over the corpus's titles and settled."""
        return self._linked(self.table.chunks(ids)) if ids else []

    def _linked(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        """The ``chunks`` (texts and all) linked over the corpus's titles and settled."""
        if not chunks:
            return []
        stored = self.read_stored(chunks)
        aliases = self.aliases
        if isinstance(self.extractor, SurfaceLinker):
            stored = self.extractor.link_over(chunks, stored, aliases, self.surfaces)
        elif isinstance(self.extractor, LinkingExtractor):
            stored = self.extractor.link(chunks, stored, self.titles)
        return settle_aliases(stored, aliases)

    def full(self) -> LinkedCorpus:
        """Every chunk from scratch; the state stored anew."""
        if isinstance(self.extractor, SurfaceLinker):
            aliases, surfaces = self.extractor.link_context(self.titles)
        else:
            aliases, surfaces = title_aliases(self.titles), {}
        self.aliases, self.surfaces = dict(aliases), Surfaces(surfaces)
        self.context_read_whole = True
        ids = self.table.ids  # the chunks' texts are what the records need too
        chunks = self.table.chunks(ids) if ids else []
        settled = self._linked(chunks)
        filtered = drop_ambiguous_names(settled, max_docs=self.max_docs)
        names = NameBook(self.kv, self.names_space, self.max_docs)
        for extraction in settled:
            names.count(extraction, +1)
        self.kv.delete_many(self.meta_space, [_COMPLETE])
        for space in (self.records_space, self.names_space, self.chunks_space):
            for batch in iter_batches(list(self.kv.keys(space)), _BATCH):
                self.kv.delete_many(space, batch)
        TitleBook(self.kv, self.titles_space).rebuild(clean_titles(self.titles))
        TitleCounts(self.kv, self.counts_space).rebuild(self.titles)
        records = {
            c.id: _record(c.id, self.titles_of[c.id], s, f, c.text)
            for c, s, f in zip(chunks, settled, filtered, strict=True)
        }
        self._put(self.records_space, records)
        names.write()
        self.buckets = None
        self._end_write(())
        delta = ExtractionDelta(
            frozenset(records), frozenset(), frozenset(), fresh=True, build=self.build
        )
        return LinkedCorpus(settled, filtered, delta, len(records))

    def update(self, meta: dict[str, Any], records: _Stored) -> LinkedCorpus:
        """The chunks a change touches recomputed over the previous build's state."""
        previous = records.titles
        counts = TitleCounts(self.kv, self.counts_space)
        if isinstance(previous, _Previous):  # the catalog's delta: changed chunks alone
            catalog = previous.catalog
            removed = set(catalog.before.keys() - catalog.after.keys())
            fresh = {i for i, title in catalog.after.items() if catalog.before.get(i) != title}
            came, went = counts.move(catalog.before.values(), catalog.after.values())
            added: Iterable[str] = catalog.after.keys() - catalog.before.keys()
        else:
            removed = set(records) - self.titles_of.keys()
            fresh = {i for i, title in self.titles_of.items() if previous.get(i) != title}
            before, after = clean_titles(previous.values()), clean_titles(self.titles)
            came, went = after - before, before - after
            if meta.get(_TITLE_COUNTS) == 1:
                counts.move(previous.values(), self.titles)
            else:  # a state stored before the counts: made from the titles
                counts.rebuild(self.titles)
            added = (i for i in self.table.ids if i not in records)
        book = TitleBook(self.kv, self.titles_space)
        if meta.get(_TITLE_BOOK) != 1:  # a state stored before the book: made from its titles
            book.rebuild(clean_titles(previous.values()))
        surfaces_of = (
            self.extractor.title_surfaces
            if isinstance(self.extractor, SurfaceLinker)
            else lambda _title, _alias: {}
        )
        changes = patched_context(book, came, went, self.aliases, self.surfaces, surfaces_of)
        self.context_changes = changes
        touched = fresh | self.touched(records, fresh, changes)
        work = self.table.ids_among(touched)
        relinked = dict(zip(work, self.link(work), strict=True))
        records.ready([*work, *removed])
        changed = {i for i, e in relinked.items() if i not in records or records[i].settled != e}
        names = NameBook(self.kv, self.names_space, self.max_docs)
        names.load(
            {k for i in changed | removed if i in records for k in names_of(records[i].settled)}
        )
        names.load({k for i in changed for k in names_of(relinked[i])})
        for i in changed | removed:
            if i in records:
                names.count(records[i].settled, -1)
        for i in changed:
            names.count(relinked[i], +1)
        refilter = changed | {i for i in names.flipped() if i in self.titles_of}
        records.ready(refilter)

        def settled_of(i: str) -> Extraction:
            return relinked[i] if i in relinked else records[i].settled

        names.load({k for i in refilter for k in name_use(settled_of(i)).named})
        drop = names.drop()
        filtered = {i: drop_names(settled_of(i), drop) for i in refilter}
        self._store(records, relinked, filtered, removed | fresh, names, book, counts)
        delta = ExtractionDelta(
            added=frozenset(added),
            removed=frozenset(removed),
            changed=frozenset(
                i for i in filtered if i in records and records[i].filtered != filtered[i]
            ),
            build=self.build,
            since=since if isinstance(since := meta.get("build"), str) else None,
            retitled=frozenset(i for i in fresh if i in records),
        )
        ids = self.table.ids
        later = _Later(self, records, names)
        return LinkedCorpus(
            _InOrder(ids, relinked, lambda i: later.record(i).settled, later.prefetch),
            _InOrder(ids, filtered, lambda i: later.record(i).filtered, later.prefetch),
            delta,
            len(work),
        )

    def touched(self, records: _Stored, fresh: set[str], changes: ContextChanges) -> set[str]:
        """The stored chunks whose link or settling the change of titles (``changes``
        of the surfaces and safe aliases) may change."""
        kept = _Kept(self.titles_of, fresh)
        if isinstance(self.extractor, LinkingExtractor) and not isinstance(
            self.extractor, SurfaceLinker
        ):
            return set(kept)
        touched = chunks_containing(sorted(changes.surfaces), kept, self.table.chunks, self.bm25)
        realiased = set(changes.aliases)
        if realiased:
            for part in iter_batches(list(kept), _BATCH):  # texts kept a batch at a time
                records.ready(part)
                touched.update(
                    i
                    for i in part
                    if " ".join(self.titles_of[i].split()) in realiased
                    or not realiased.isdisjoint(_topics(records[i].settled))
                )
        return touched

    def _store(
        self,
        records: _Stored,
        relinked: dict[str, Extraction],
        filtered: dict[str, Extraction],
        moved: set[str],
        names: NameBook,
        book: TitleBook,
        counts: TitleCounts,
    ) -> None:
        """Write what changed (``moved``: the chunks that came, went or changed title);
        the state is marked unfinished until all of it is."""
        changed = {}
        written = (relinked.keys() | filtered.keys()) & self.titles_of.keys()
        self.texts.prefetch(written)
        for i in written:
            title, old = self.titles_of[i], records.get(i)
            settled = relinked[i] if i in relinked else records[i].settled
            final = filtered[i] if i in filtered else records[i].filtered
            if old is None or (old.title, old.settled, old.filtered) != (title, settled, final):
                changed[i] = _record(i, title, settled, final, self.texts.get(i))
        self.kv.delete_many(self.meta_space, [_COMPLETE])
        self._put(self.records_space, changed)
        removed = sorted(i for i in moved if i not in self.titles_of)
        for batch in iter_batches(removed, _BATCH):
            self.kv.delete_many(self.records_space, batch)
        names.write()
        book.write()
        counts.write()
        self._end_write(moved)

    def heal(self, chunk_id: str, names: NameBook) -> _Record:
        """The record of ``chunk_id``, which the update did not touch, linked again and
        stored in place of one that does not read: its settled extraction is what it
        was (the update did not reach it), its filtered one drops the names ambiguous
        now."""
        (settled,) = self.link([chunk_id])
        names.load(name_use(settled).named)
        final = drop_names(settled, names.drop())
        raw = _record(chunk_id, self.titles_of[chunk_id], settled, final, self.texts.get(chunk_id))
        self._put(self.records_space, {chunk_id: raw})
        return _Record(chunk_id, raw, self.texts)

    def _put(self, space: str, items: Mapping[str, bytes]) -> None:
        for batch in iter_batches(list(items), _BATCH):
            self.kv.put_many(space, {k: items[k] for k in batch})

    def _end_write(self, moved: Iterable[str]) -> None:
        """Write the chunk ids and titles, then the meta: the buckets of the chunks
        ``moved`` (came, went or changed title) where the previous build's were read,
        else every bucket."""
        touched: set[int] = set()
        if self.buckets is None:  # every bucket, the empty ones too
            self.buckets = {b: {} for b in range(BUCKETS)}
            moved, touched = self.titles_of, set(self.buckets)
        for chunk_id in moved:
            b = _bucket(chunk_id)
            title = self.titles_of.get(chunk_id)
            if title is None:
                self.buckets[b].pop(chunk_id, None)
            else:
                self.buckets[b][chunk_id] = title
            touched.add(b)
        buckets = self.buckets
        self._put(self.chunks_space, {_bucket_key(b): _json(buckets[b]) for b in sorted(touched)})
        catalog = self.table.catalog
        meta = {
            "fingerprint": self.fingerprint,
            _BUCKETED: BUCKETS,
            "build": self.build,
            _TITLE_BOOK: 1,
            _TITLE_COUNTS: 1,
            _CATALOG: None if catalog is None else catalog.kept,
            _CONTEXT: BUCKETS,
        }
        self._write_context()
        self.kv.put_many(self.meta_space, {_STATE: json.dumps(meta, ensure_ascii=False).encode()})
        _remember_context(self.meta_space, self.build, self.aliases, self.surfaces)

    def _write_context(self) -> None:
        """Write the buckets of the safe aliases (by title) and the surfaces (by
        surface) that this build changed, each read and patched; every bucket, the
        empty ones too, where the build made them anew or read them from an older
        meta."""
        spaces: tuple[tuple[str, Mapping[str, str]], ...] = (
            (self.aliases_space, self.aliases),
            (self.surfaces_space, self.surfaces),
        )
        changes = self.context_changes
        if changes is None or self.context_read_whole:
            for space, mapping in spaces:
                buckets: dict[int, dict[str, str]] = {b: {} for b in range(BUCKETS)}
                for key, value in mapping.items():
                    buckets[_bucket(key)][key] = value
                self._put(space, {_bucket_key(b): _json(buckets[b]) for b in range(BUCKETS)})
            return
        for (space, mapping), keys in zip(spaces, (changes.aliases, changes.surfaces), strict=True):
            touched = sorted({_bucket(k) for k in keys})
            patched = self._read_buckets(space, touched)
            for key in keys:
                bucket = patched[_bucket(key)]
                if key in mapping:
                    bucket[key] = mapping[key]
                else:
                    bucket.pop(key, None)
            self._put(space, {_bucket_key(b): _json(patched[b]) for b in touched})

    def _read_context(self, meta: dict[str, Any]) -> None:
        """The safe aliases and the surfaces of the build ``meta`` names: this process's
        own where it wrote them, else read from their buckets (or from ``meta``, where an
        older build kept them there); :class:`_Damaged` where they do not read."""
        self.context_read_whole = False
        known = _recall_context(self.meta_space, meta.get("build"))
        if known is not None:
            self.aliases, self.surfaces = known
            return
        if meta.get(_CONTEXT) == BUCKETS:
            read = []
            for space in (self.aliases_space, self.surfaces_space):
                merged: dict[str, str] = {}
                for bucket in self._read_buckets(space, range(BUCKETS)).values():
                    merged.update(bucket)
                read.append(merged)
            self.aliases, self.surfaces = read[0], Surfaces(read[1])
            return
        if not all(isinstance(meta.get(k), dict) for k in ("aliases", "surfaces")):
            raise _Damaged(f"{self.meta_space}: no aliases or surfaces")
        self.aliases, self.surfaces = dict(meta["aliases"]), Surfaces(meta["surfaces"])
        self.context_read_whole = True  # kept in buckets from this build on


class _Previous(Mapping[str, str]):
    """The previous build's titles by chunk id, where its table is the catalog's table
    before ``catalog`` and this build's titles are ``now``: a chunk of no changed
    document has its title now."""

    def __init__(self, now: Mapping[str, str], catalog: CatalogChanges) -> None:
        self.now, self.catalog = now, catalog

    def __getitem__(self, chunk_id: str) -> str:
        before = self.catalog.before
        if chunk_id in before:
            return before[chunk_id]
        if chunk_id in self.catalog.after:
            raise KeyError(chunk_id)
        return self.now[chunk_id]

    def __iter__(self) -> Iterator[str]:  # every chunk: only for a rare full pass
        yield from self.catalog.before
        yield from (i for i in self.now if i not in self.catalog.after)

    def __len__(self) -> int:
        return len(self.now) - len(self.catalog.after) + len(self.catalog.before)


class _Kept(Collection[str]):
    """The chunks of ``titles`` (by id) but those of ``fresh``, without a copy."""

    def __init__(self, titles: Mapping[str, str], fresh: set[str]) -> None:
        self.titles, self.fresh = titles, fresh

    def __contains__(self, chunk_id: object) -> bool:
        return chunk_id in self.titles and chunk_id not in self.fresh

    def __iter__(self) -> Iterator[str]:
        return (i for i in self.titles if i not in self.fresh)

    def __len__(self) -> int:
        return len(self.titles) - len(self.fresh & self.titles.keys())


class _Later:
    """The records of the chunks an update did not touch, as the build's stages read
    them after it: a record that does not read then is linked again and stored
    (:meth:`_Linker.heal`), not an error, as the update would have done had it read it."""

    def __init__(self, linker: _Linker, records: _Stored, names: NameBook) -> None:
        self.linker, self.records, self.names = linker, records, names

    def prefetch(self, chunk_ids: Sequence[str]) -> None:
        try:
            self.records.ready(chunk_ids)
        except _Damaged:  # read one by one: the others are kept, the damaged one healed
            for chunk_id in chunk_ids:
                self.record(chunk_id)

    def record(self, chunk_id: str) -> _Record:
        try:
            return self.records[chunk_id]
        except _Damaged as exc:
            logger.warning("stored linked extraction unusable (%s): linking its chunk again", exc)
            healed = self.records.read[chunk_id] = self.linker.heal(chunk_id, self.names)
            return healed


def _record(
    key: str, title: str, settled: Extraction, filtered: Extraction, text: str | None
) -> bytes:
    """The stored record: its checksum, the title, then both extractions compressed
    against the chunk's ``text`` (:func:`_deflate`). Compressed because a linked
    extraction repeats its sentences in every relation (the description and the
    provenance): a 20 MB text's records took 1.3 GB as JSON, 63 MB compressed (33 MB
    and 6 MB for 20k short passages)."""
    pair = extraction_to_json(settled) + b"\n"
    if filtered != settled:
        pair += extraction_to_json(filtered)
    body = json.dumps(title).encode() + b"\n" + _deflate(pair, text or "")
    return b"%08x\n" % _checksum(key, body) + body


#: zlib's window: a preset dictionary's last 32 KB are all it can refer to.
_WINDOW = 1 << 15
#: Chunks' texts kept by :class:`_Texts`: a batch of records read at once, and more.
_TEXTS_KEPT = 2 * _BATCH


def _deflate(pair: bytes, text: str) -> bytes:
    """A record's extractions compressed by zlib with the chunk's ``text`` (its last
    32 KB) as the preset dictionary: most of a record's texts are sentences of its
    chunk, which zlib then writes as references into the dictionary. The 20 MB text's
    records took 10.1 MB compressed alone, 5.0 MB so (docs/scale.md, stop 82)."""
    if not text:
        return compressed(pair)
    deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zdict=text.encode()[-_WINDOW:])
    return deflate.compress(pair) + deflate.flush()


def inflate_record(packed: bytes, text: str) -> bytes:
    """What :func:`_deflate` compressed (a stored record's part after its title),
    given the chunk's text where it used one."""
    if not _has_dictionary(packed):
        return zlib.decompress(packed)
    inflate = zlib.decompressobj(zdict=text.encode()[-_WINDOW:])
    pair = inflate.decompress(packed) + inflate.flush()
    if not inflate.eof:
        raise zlib.error("the record ends before its stream")
    return pair


def _has_dictionary(packed: bytes) -> bool:
    """Whether a zlib stream was compressed with a preset dictionary (the header's
    FDICT bit, RFC 1950)."""
    return len(packed) > 1 and bool(packed[1] & 0x20)


def _none(_chunk_ids: Sequence[str]) -> Mapping[str, str]:
    return {}


def _bucket(chunk_id: str) -> int:
    """The bucket of ``chunk_id``'s title (the same in every process, unlike ``hash``)."""
    return zlib.crc32(chunk_id.encode()) % BUCKETS


def _bucket_key(bucket: int) -> str:
    return f"{bucket:04d}"


def _json(bucket: dict[str, str]) -> bytes:
    return json.dumps(bucket, ensure_ascii=False).encode()


#: The safe aliases and surfaces of the last builds this process wrote, by the meta's
#: namespace and the build's id (a random id of each build): the next update of the
#: same index in this process (``quillian serve``) takes them instead of reading every
#: bucket. Taken out when recalled, so an update that fails midway leaves none behind.
_CONTEXTS: OrderedDict[tuple[str, str], tuple[dict[str, str], Surfaces]] = OrderedDict()
_CONTEXTS_LOCK = threading.Lock()
_CONTEXTS_MAX = 4


def _remember_context(space: str, build: str, aliases: dict[str, str], surfaces: Surfaces) -> None:
    with _CONTEXTS_LOCK:
        _CONTEXTS[space, build] = (aliases, surfaces)
        while len(_CONTEXTS) > _CONTEXTS_MAX:
            _CONTEXTS.popitem(last=False)


def _recall_context(space: str, build: object) -> tuple[dict[str, str], Surfaces] | None:
    if not isinstance(build, str):
        return None
    with _CONTEXTS_LOCK:
        return _CONTEXTS.pop((space, build), None)


def _checksum(key: str, body: bytes) -> int:
    """CRC-32 of a record's key and body: reading every record's checksum costs a
    fraction of decoding them (an update decodes only the records it changes)."""
    return zlib.crc32(body, zlib.crc32(key.encode()))


def _topics(extraction: Extraction) -> set[str]:
    return {" ".join(e.name.split()) for e in extraction.entities if e.is_topic}
