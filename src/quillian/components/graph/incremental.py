"""Entity resolution that costs what changed: :class:`GraphBuilder`'s result after a
delta of chunks, replaying only the mentions the delta can reach.

:class:`GraphBuilder` resolves mentions greedily in index order (chunks by document id
and chunk index; in a chunk its entities, topic first, then each triple's subject and
object): a mention joins the entity of its first known name key, else creates one.
Mentions whose keys are not connected (through one extracted entity carrying several
keys) never meet, so the entities of a connected component of keys depend only on that
component's mentions, in index order. An update therefore takes the keys of the chunks
it removes, changes or adds (their old and new extractions), closes them over the
mentions still stored, drops the entities owning those keys and replays the closure's
mentions in index order; every other entity keeps its row. The entities' positions are
their creating mentions' order, so a graph built from the state is the clean build's,
node for node (:meth:`ResolutionState.graph`).

The state is one SQLite file (:data:`STATE_FILE`, at an index's root): each chunk's
order key, the keys its extraction names and a digest of that extraction, a key ->
chunk index, the entity rows and each key's entity. It keeps no copy of the
extractions: it reads them from where the build has them (an :data:`ExtractionSource`,
the linking's records), each checked against its digest, so an extraction that is not
the one the state resolved raises :class:`StaleState` and the caller builds anew (the
20 MB text's state: 53.5 -> 42.9 MB, docs/scale.md). A missing, damaged or
foreign-version file opens as None, and the caller builds anew
(:meth:`ResolutionState.create`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.extraction.serde import extraction_to_json
from quillian.components.graph import chunk_rows
from quillian.components.graph.builder import EntityRecord, KnowledgeGraph
from quillian.errors import InputError
from quillian.stores.embedded.row_counts import keep_counts
from quillian.stores.packed import pack_text, unpack_text
from quillian.stores.protocols import GraphStore, iter_batches
from quillian.types import entity_id, key64, normalize_name

__all__ = [
    "NO_FACTS",
    "STATE_FILE",
    "STATE_VERSION",
    "ChunkExtraction",
    "EntityFacts",
    "ExtractionSource",
    "ResolutionState",
    "StaleState",
    "TablesChanges",
    "extraction_digest",
    "resolve_entities",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: A name's key (:func:`normalize_name` keeps its lately computed keys itself).
_key = normalize_name

STATE_FILE = "graph_resolution.sqlite"
#: Bumped whenever the schema or the resolution rule changes: another version reads as
#: no state (a full build).
STATE_VERSION = 11  # 9: no table of texts; 10: an occurrence names its triple by index;
# 11: no copy of the extractions (a digest and the keys of each)
#: The state's tables whose rows SQLite counts as they change (what the graph tables'
#: patch checks its positions against, :mod:`~quillian.stores.embedded.row_counts`).
COUNTED = ("mentions", "entities")
_BATCH = 500  # SQLite host parameters per statement
_STREAM = 256  # chunks a state creation holds decoded at once

_SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE chunks (
    chunk INTEGER PRIMARY KEY, chunk_id TEXT NOT NULL UNIQUE, doc_id TEXT NOT NULL,
    idx INTEGER NOT NULL, digest INTEGER NOT NULL, keys NOT NULL);
CREATE INDEX chunks_order ON chunks (doc_id, idx);
CREATE TABLE chunk_keys (key TEXT NOT NULL, chunk INTEGER NOT NULL,
    PRIMARY KEY (key, chunk)) WITHOUT ROWID;
CREATE TABLE entities (
    row INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,
    aliases TEXT NOT NULL, doc_id TEXT NOT NULL, idx INTEGER NOT NULL,
    seq INTEGER NOT NULL, node_id TEXT NOT NULL, literal INTEGER NOT NULL);
CREATE INDEX entities_order ON entities (doc_id, idx, seq);
CREATE TABLE entity_keys (row INTEGER NOT NULL, key TEXT NOT NULL,
    PRIMARY KEY (row, key)) WITHOUT ROWID;
CREATE INDEX entity_keys_key ON entity_keys (key);
CREATE TABLE entity_alias_ids (row INTEGER NOT NULL, id TEXT NOT NULL,
    PRIMARY KEY (row, id)) WITHOUT ROWID;
CREATE INDEX entity_alias_ids_id ON entity_alias_ids (id);
CREATE TABLE changed_chunks (chunk_id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE changed_entities (row INTEGER PRIMARY KEY);
CREATE TABLE key_owner (key TEXT PRIMARY KEY, row INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX key_owner_row ON key_owner (row);
"""


@dataclass(frozen=True, slots=True)
class EntityFacts:
    """What the graph tables take of each entity besides its name, type and aliases,
    computed when a replay makes the entity (so writing the tables passes over no
    entity in Python): whether it is a ``literal`` (a date, a number), and the lexicon
    ``keys`` of its names. ``version`` names the rule; a state made under another is
    read as no state."""

    version: str
    literal: Callable[[str, str], bool]
    keys: Callable[[Sequence[str]], Iterable[str]]


#: No facts: a state only :meth:`ResolutionState.graph` reads.
NO_FACTS = EntityFacts("none", lambda name, type_: False, lambda names: ())


@dataclass(frozen=True, slots=True)
class TablesChanges:
    """The log :meth:`ResolutionState.tables_changes` gives: the digest of the tables
    database it is relative to ("": none, so the tables are written whole), the chunk
    ids removed or replayed and the entity rows dropped or made since."""

    tables: str
    chunks: list[str]
    entities: list[int]


#: Gives the extractions of stored chunks, each named by its id and its place in index
#: order ``(chunk id, doc_id, index)``, in the order asked for; :class:`StaleState`
#: where it holds no such chunk.
ExtractionSource = Callable[[Sequence[tuple[str, str, int]]], Sequence[Extraction]]


class StaleState(Exception):
    """The state resolved another extraction of a chunk than its source gives now (or
    the source lacks the chunk): it must be made anew."""


def _no_source(chunks: Sequence[tuple[str, str, int]]) -> Sequence[Extraction]:
    raise StaleState("the resolution state was given no source of extractions to read")


def extraction_digest(extraction: Extraction) -> int:
    """A 64-bit digest of ``extraction`` as the state resolved it (its compact form,
    without the parse a linking extractor keeps)."""
    form = extraction_to_json(replace(extraction, parse=None))
    return int.from_bytes(hashlib.blake2b(form, digest_size=8).digest(), "big", signed=True)


#: Separates a chunk's keys where they are stored (a key is a normalised name: no
#: control characters).
_KEY_SEP = "\x1f"


@dataclass(frozen=True, slots=True)
class ChunkExtraction:
    """One chunk's extraction with its place in index order, ``(doc_id, index)``."""

    doc_id: str
    index: int
    extraction: Extraction

    @property
    def chunk_id(self) -> str:
        return self.extraction.chunk_id


def _ordered(extraction: Extraction) -> list[ExtractedEntity]:
    """The chunk's entities in the order :meth:`GraphBuilder.add` resolves them."""
    return sorted(extraction.entities, key=lambda e: not e.is_topic)


def _mention_keys(entity: ExtractedEntity) -> list[str]:
    return [k for n in (entity.name, *entity.aliases) if (k := _key(n))]


def _ends(extraction: Extraction) -> Iterator[tuple[int, str, str]]:
    """Each triple's index and its ends' keys, for triples :meth:`GraphBuilder.add`
    keeps (both ends named)."""
    for i, triple in enumerate(extraction.triples):
        subject, obj = _key(triple.subject), _key(triple.object)
        if subject and obj:
            yield i, subject, obj


def _groups(extraction: Extraction) -> list[set[str]]:
    """The key sets of the chunk's mentions: an entity's name and aliases together,
    and each triple end alone."""
    groups = [set(_mention_keys(e)) for e in extraction.entities if _key(e.name)]
    for _, subject, obj in _ends(extraction):
        groups += [{subject}, {obj}]
    return groups


def _keys(extraction: Extraction) -> set[str]:
    return set().union(*_groups(extraction))


@dataclass
class _Entity:
    """An entity created by a replay, with its creating mention's order key."""

    record: EntityRecord
    order: tuple[str, int, int]


class _Everything:
    """The set of every key."""

    def __contains__(self, key: object) -> bool:
        return True


_ALL = _Everything()


class _Replay:
    """GraphBuilder's greedy resolution, restricted to the mentions of a set of keys
    closed under mention connectivity (:data:`_ALL`: every mention)."""

    def __init__(self, keys: set[str] | _Everything) -> None:
        self._keys = keys
        self.owner: dict[str, int] = {}
        self.entities: list[_Entity] = []

    def chunk(self, doc_id: str, index: int, extraction: Extraction) -> None:
        ordered = _ordered(extraction)
        for rank, entity in enumerate(ordered):
            keys = _mention_keys(entity)
            if _key(entity.name) and keys[0] in self._keys:
                self._resolve(entity, keys, (doc_id, index, rank))
        base = len(ordered)
        triples = extraction.triples
        for i, subject, obj in _ends(extraction):
            ends = ((triples[i].subject, subject), (triples[i].object, obj))
            for side, (name, key) in enumerate(ends):
                if key in self._keys and key not in self.owner:
                    order = (doc_id, index, base + 2 * i + side)
                    self._resolve(ExtractedEntity(name), [key], order)

    def _resolve(
        self, entity: ExtractedEntity, keys: list[str], order: tuple[str, int, int]
    ) -> None:
        index = next((self.owner[k] for k in keys if k in self.owner), None)
        if index is None:
            index = len(self.entities)
            self.entities.append(_Entity(EntityRecord(entity.name.strip(), entity.type), order))
        record = self.entities[index].record
        if not record.type and entity.type:
            record.type = entity.type
        known = {_key(n) for n in (record.name, *record.aliases)}
        for name in (entity.name, *entity.aliases):
            key = _key(name)
            if key and key not in known:
                record.aliases.append(name.strip())
                known.add(key)
            if key:
                self.owner.setdefault(key, index)


def _batches(items: Sequence[T]) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), _BATCH):
        yield items[start : start + _BATCH]


def _marks(n: int) -> str:
    return ",".join("?" * n)


class ResolutionState:
    """The persisted entity resolution of an index's last graph build."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        max_entities_per_chunk: int,
        facts: EntityFacts = NO_FACTS,
        source: ExtractionSource | None = None,
    ) -> None:
        self._conn = conn
        self.max_entities_per_chunk = max_entities_per_chunk
        self.facts = facts
        self._source = source or _no_source
        #: chunks whose extraction from the source this state has digested: stored by
        #: it, or read and found the same (a build's whole tables write, after making
        #: the state, reads every chunk again and need not digest it again)
        self._checked: set[str] = set()

    @property
    def path(self) -> Path:
        """The state's file."""
        for _, name, file in self._conn.execute("PRAGMA database_list"):
            if name == "main":
                return Path(file)
        raise InputError("the resolution state has no main database")  # pragma: no cover

    # ----- opening and creating -------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: Path,
        max_entities_per_chunk: int = 64,
        tag: str | None = None,
        facts: EntityFacts = NO_FACTS,
        verified: bool = False,
        source: ExtractionSource | None = None,
    ) -> ResolutionState | None:
        """The state at ``path``, or None where it is missing, damaged, of another
        version or resolution setting, or (given ``tag``) left by another build; checked
        by SQLite's ``quick_check`` unless ``verified`` (known to be as a build left it).
        ``source`` gives the stored chunks' extractions when the state reads them."""
        if not path.is_file():
            return None
        try:
            conn = sqlite3.connect(path, isolation_level=None)
            try:
                meta = dict(conn.execute("SELECT name, value FROM meta").fetchall())
                checked = ("ok",) if verified else conn.execute("PRAGMA quick_check(1)").fetchone()
            except sqlite3.DatabaseError:
                conn.close()
                raise
        except sqlite3.DatabaseError as err:
            logger.warning("graph resolution state %s unreadable (%s): building anew", path, err)
            return None
        wanted = {
            "version": str(STATE_VERSION),
            "max_per_chunk": str(max_entities_per_chunk),
            "facts": facts.version,
        }
        if tag is not None:
            wanted["tag"] = tag
        problem = "damaged" if checked is None or checked[0] != "ok" else None
        if problem is None and any(meta.get(k) != v for k, v in wanted.items()):
            problem = f"of another version or build ({meta})"
        if problem:
            logger.warning("graph resolution state %s %s: building anew", path, problem)
            conn.close()
            return None
        return cls(conn, max_entities_per_chunk, facts, source)

    @classmethod
    def create(
        cls,
        path: Path,
        chunks: Iterable[ChunkExtraction],
        max_entities_per_chunk: int = 64,
        tag: str = "",
        facts: EntityFacts = NO_FACTS,
        source: ExtractionSource | None = None,
    ) -> ResolutionState:
        """A new state at ``path`` (replacing any file there) resolved over ``chunks``,
        which ``source`` gives again when the state reads them (chunks out of index
        order are read back so).
        The file is written aside and renamed into place, so a failure leaves no half
        state behind. ``chunks`` is read once, :data:`_STREAM` at a time, so memory
        holds a batch of extractions, not the corpus's (3.3 GB on the 20 MB text of
        docs/scale.md): see :meth:`_resolve_all`."""
        partial = path.with_name(path.name + ".partial")
        _remove_database(partial)
        conn = sqlite3.connect(partial, isolation_level=None)
        try:
            conn.executescript(_SCHEMA + chunk_rows.SCHEMA)
            conn.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [
                    ("version", str(STATE_VERSION)),
                    ("max_per_chunk", str(max_entities_per_chunk)),
                    ("tag", tag),
                    ("facts", facts.version),
                    ("tables", ""),
                ],
            )
            state = cls(conn, max_entities_per_chunk, facts, source)
            conn.execute("BEGIN")
            state._resolve_all(chunks)
            keep_counts(conn, COUNTED)  # after the rows, which go in uncounted
            conn.execute("COMMIT")
            # rows went in by chunk id, in no order of their keys, which leaves pages
            # part full: packed, the 20 MB text's state takes 191 MB, not 212
            # (docs/scale.md, "Vectors stored in float16 (stop 72)")
            conn.execute("VACUUM")
            conn.close()
        except BaseException:
            conn.close()
            _remove_database(partial)
            raise
        _remove_database(path)
        partial.replace(path)
        conn = sqlite3.connect(path, isolation_level=None)
        return cls(conn, max_entities_per_chunk, facts, source)

    def close(self) -> None:
        self._conn.close()

    # ----- the update ------------------------------------------------------------------

    def apply(
        self, removed: Iterable[str], changed: Iterable[ChunkExtraction], tag: str = ""
    ) -> int:
        """Remove the chunks ``removed``, add or replace those in ``changed``, and
        resolve again the entities they can reach; one transaction. Returns the number
        of chunks whose mentions were replayed. :class:`StaleState` (the state left as
        it was) where a chunk the update reads is not the one the state resolved."""
        changed = list(changed)
        gone = sorted(set(removed) | {c.chunk_id for c in changed})
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            keep_counts(conn, COUNTED)  # a state made before: counted once here
            # a chunk's keys are those it stored, each row found by the table's key
            keyed = [(k, key64(c)) for c, keys in self._stored_keys(gone) for k in keys]
            touched = {k for k, _ in keyed}
            conn.executemany("DELETE FROM chunk_keys WHERE key = ? AND chunk = ?", keyed)
            for batch in _batches(gone):
                conn.execute(f"DELETE FROM chunks WHERE chunk_id IN ({_marks(len(batch))})", batch)
            chunk_rows.delete(conn, gone)
            touched |= self._store(changed)
            keys, chunks = self._closure(touched)
            entities = self._replay_into(keys, chunks)
            conn.executemany(
                "INSERT OR IGNORE INTO changed_chunks VALUES (?)",
                ((c,) for c in itertools.chain(gone, (c.chunk_id for c in chunks))),
            )
            conn.executemany(
                "INSERT OR IGNORE INTO changed_entities VALUES (?)", ((r,) for r in entities)
            )
            conn.execute("UPDATE meta SET value = ? WHERE name = 'tag'", (tag,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            self._checked.clear()  # the rows it stored are gone: their digests unread
            raise
        return len(chunks)

    def _store(self, chunks: Sequence[ChunkExtraction]) -> set[str]:
        """Store ``chunks`` with their keys; returns the keys."""
        ids: set[str] = set()
        places: dict[tuple[str, int], str] = {}
        for c in chunks:
            stored = self._conn.execute("SELECT 1 FROM chunks WHERE chunk_id = ?", (c.chunk_id,))
            if c.chunk_id in ids or stored.fetchone():
                raise InputError(f"chunk {c.chunk_id} given twice")
            ids.add(c.chunk_id)
            place = (c.doc_id, c.index)
            row = self._conn.execute(
                "SELECT chunk_id FROM chunks WHERE doc_id = ? AND idx = ?", place
            ).fetchone()
            other = places.get(place) or (row[0] if row else None)
            if other is not None:
                raise InputError(
                    f"chunks {other} and {c.chunk_id} share one place in index order"
                    f" (document {c.doc_id}, chunk {c.index})"
                )
            places[place] = c.chunk_id
        keys = [(c.chunk_id, _keys(c.extraction)) for c in chunks]
        self._checked.update(ids)
        self._conn.executemany(
            "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?)",
            (
                (
                    key64(c.chunk_id),
                    c.chunk_id,
                    c.doc_id,
                    c.index,
                    extraction_digest(c.extraction),
                    pack_text(_KEY_SEP.join(sorted(found))),
                )
                for c, (_, found) in zip(chunks, keys, strict=True)
            ),
        )
        self._conn.executemany(
            "INSERT INTO chunk_keys VALUES (?, ?)",
            ((k, key64(chunk_id)) for chunk_id, found in keys for k in found),
        )
        return set().union(*(found for _, found in keys))

    def _stored_keys(self, chunk_ids: Sequence[str]) -> Iterator[tuple[str, list[str]]]:
        """The keys each of the stored chunks ``chunk_ids`` names."""
        for batch in _batches(chunk_ids):
            rows = self._conn.execute(
                f"SELECT chunk_id, keys FROM chunks WHERE chunk_id IN ({_marks(len(batch))})",
                batch,
            )
            for chunk_id, packed in rows.fetchall():
                keys = unpack_text(packed)
                yield chunk_id, keys.split(_KEY_SEP) if keys else []

    def _closure(self, touched: set[str]) -> tuple[set[str], list[ChunkExtraction]]:
        """The keys connected to ``touched`` through stored mentions, and the chunks
        holding any of them, in index order."""
        keys, frontier = set(touched), sorted(touched)
        chunks: dict[str, ChunkExtraction] = {}
        while frontier:
            found: set[str] = set()
            for batch in _batches(frontier):
                found.update(
                    c
                    for (c,) in self._conn.execute(
                        "SELECT c.chunk_id FROM chunk_keys k CROSS JOIN chunks c USING (chunk)"
                        f" WHERE k.key IN ({_marks(len(batch))})",
                        batch,
                    )
                )
            chunks.update(self._load(sorted(found - chunks.keys())))
            reached = set(frontier)
            new: set[str] = set()
            for chunk_id in found:
                for group in _groups(chunks[chunk_id].extraction):
                    if group & reached:
                        new |= group - keys
            keys |= new
            frontier = sorted(new)
        return keys, sorted(chunks.values(), key=lambda c: (c.doc_id, c.index))

    def _stored_in_order(self) -> Iterator[ChunkExtraction]:
        """Every stored chunk in index order, decoded :data:`_BATCH` at a time."""
        for batch in _batches(self.chunk_ids()):
            found = dict(self._load(batch))
            yield from (found[c] for c in batch)

    def _load(self, chunk_ids: Sequence[str]) -> Iterator[tuple[str, ChunkExtraction]]:
        return self._stored("chunk_id", chunk_ids)

    def _stored(self, column: str, keys: Sequence[T]) -> Iterator[tuple[T, ChunkExtraction]]:
        """The extractions of the stored chunks whose ``column`` (``chunk_id`` or
        ``chunk``, their key) is one of ``keys``, each with its key."""
        for batch in _batches(keys):
            found = self._conn.execute(
                f"SELECT {column}, chunk_id, doc_id, idx, digest FROM chunks"
                f" WHERE {column} IN ({_marks(len(batch))})",
                batch,
            ).fetchall()
            read = self._read([row[1:] for row in found])
            yield from ((row[0], c) for row, (_, c) in zip(found, read, strict=True))

    def _read(
        self, rows: Sequence[tuple[str, str, int, int]]
    ) -> Iterator[tuple[str, ChunkExtraction]]:
        """The extractions of the stored chunks ``rows`` (id, document, index and
        digest) from the source, each checked against its digest (once a state)."""
        found = self._source([(c, d, i) for c, d, i, _ in rows])
        if len(found) != len(rows):
            raise StaleState(f"the source gave {len(found)} extractions for {len(rows)} chunks")
        checked = self._checked
        for (chunk_id, doc_id, index, digest), extraction in zip(rows, found, strict=True):
            if extraction.chunk_id != chunk_id or (
                chunk_id not in checked and extraction_digest(extraction) != digest
            ):
                raise StaleState(f"chunk {chunk_id}'s extraction is not the one the state resolved")
            checked.add(chunk_id)
            yield chunk_id, ChunkExtraction(doc_id, index, extraction)

    def chunk_extractions(self, rows: Sequence[int]) -> list[tuple[int, ChunkExtraction]]:
        """The extractions of the stored chunks keyed ``rows`` (:func:`~quillian.types.
        key64` of their ids), as the state resolved them (:class:`StaleState` where the
        source gives another); a key the state does not hold is left out."""
        return list(self._stored("chunk", rows))

    def _resolve_all(self, chunks: Iterable[ChunkExtraction]) -> None:
        """Store ``chunks`` in an empty state and resolve every mention. In index order
        (as the graph stage gives them) each batch is resolved and its rows derived as
        it is stored, since a key's owner is settled by the first chunk naming it and
        a new state's entity rows are their creation order. Out of order, the rows are
        derived from the stored chunks read back in index order."""
        replay = _Replay(_ALL)
        last, in_order = ("", -1), True
        for batch in iter_batches(chunks, _STREAM):
            self._store(batch)
            places = [(c.doc_id, c.index) for c in batch]
            in_order = in_order and all(a < b for a, b in itertools.pairwise([last, *places]))
            last = places[-1]
            if in_order:
                self._resolve_batch(replay, batch)
        if not in_order:
            for table in ("mentions", "descriptions", "occurrences"):
                self._conn.execute(f"DELETE FROM {table}")
            replay = _Replay(_ALL)
            for batch in iter_batches(self._stored_in_order(), _STREAM):
                self._resolve_batch(replay, batch)
        self._insert_entities(range(len(replay.entities)), replay.entities)
        self._conn.executemany("INSERT INTO key_owner VALUES (?, ?)", replay.owner.items())

    def _resolve_batch(self, replay: _Replay, batch: Sequence[ChunkExtraction]) -> None:
        """Resolve the next chunks in index order and store their rows."""
        for chunk in batch:
            replay.chunk(chunk.doc_id, chunk.index, chunk.extraction)
        cap, owner = self.max_entities_per_chunk, replay.owner.__getitem__
        chunk_rows.insert(
            self._conn,
            (chunk_rows.derive(c.doc_id, c.extraction, owner, cap, _key) for c in batch),
        )

    def _replay_into(self, keys: set[str], chunks: Sequence[ChunkExtraction]) -> set[int]:
        """Drop the entities owning ``keys`` and create them again from ``chunks``'
        mentions, in index order. An entity created again by the same mention (name
        and order key) keeps its row; the others take new rows. Returns the rows
        dropped or made."""
        conn = self._conn
        (top,) = conn.execute("SELECT coalesce(max(row), -1) FROM entities").fetchone()
        rows: set[int] = set()
        for batch in _batches(sorted(keys)):
            marks = _marks(len(batch))
            found = conn.execute(f"SELECT row FROM key_owner WHERE key IN ({marks})", batch)
            rows.update(r for (r,) in found)
            conn.execute(f"DELETE FROM key_owner WHERE key IN ({marks})", batch)
        for numbers in _batches(sorted(rows)):
            for table in ("entity_keys", "entity_alias_ids"):
                conn.execute(f"DELETE FROM {table} WHERE row IN ({_marks(len(numbers))})", numbers)
        old: dict[tuple[str, str, int, int], int] = {}
        for numbers in _batches(sorted(rows)):
            marks = _marks(len(numbers))
            found = conn.execute(
                f"SELECT row, name, doc_id, idx, seq FROM entities WHERE row IN ({marks})", numbers
            )
            old.update(((name, *order), row) for row, name, *order in found)
            conn.execute(f"DELETE FROM entities WHERE row IN ({marks})", numbers)
        replay = _Replay(keys)
        for chunk in chunks:
            replay.chunk(chunk.doc_id, chunk.index, chunk.extraction)
        fresh = itertools.count(top + 1)
        ids = []
        for entity in replay.entities:
            row = old.pop((entity.record.name, *entity.order), None)
            ids.append(next(fresh) if row is None else row)
        self._insert_entities(ids, replay.entities)
        owner = {k: ids[i] for k, i in replay.owner.items()}
        conn.executemany("INSERT INTO key_owner VALUES (?, ?)", owner.items())
        self._derive(chunks, owner)
        return rows | set(ids)

    def _insert_entities(self, rows: Sequence[int], entities: Sequence[_Entity]) -> None:
        """Store the entities a replay made, at ``rows``, with what the graph tables
        take of each (:class:`EntityFacts`)."""
        conn, facts = self._conn, self.facts
        records = [e.record for e in entities]
        conn.executemany(
            "INSERT INTO entities VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    row,
                    r.name,
                    r.type,
                    json.dumps(r.aliases, ensure_ascii=False),
                    *e.order,
                    r.node_id,
                    facts.literal(r.name, r.type),
                )
                for row, r, e in zip(rows, records, entities, strict=True)
            ),
        )
        conn.executemany(
            "INSERT OR IGNORE INTO entity_keys VALUES (?, ?)",
            (
                (row, key)
                for row, r in zip(rows, records, strict=True)
                for key in facts.keys([r.name, *r.aliases])
            ),
        )
        conn.executemany(
            "INSERT OR IGNORE INTO entity_alias_ids VALUES (?, ?)",
            (
                (row, entity_id(alias))
                for row, r in zip(rows, records, strict=True)
                for alias in r.aliases
                if _key(alias)
            ),
        )

    def _derive(self, chunks: Sequence[ChunkExtraction], owner: dict[str, int]) -> None:
        """Store again the rows of ``chunks``, whose keys ``owner`` gives in part."""
        rest = sorted(set().union(*(_keys(c.extraction) for c in chunks)) - owner.keys())
        owner = dict(owner)
        for batch in _batches(rest):
            owner.update(
                self._conn.execute(
                    f"SELECT key, row FROM key_owner WHERE key IN ({_marks(len(batch))})", batch
                )
            )
        chunk_rows.delete(self._conn, [c.chunk_id for c in chunks])
        cap = self.max_entities_per_chunk
        chunk_rows.insert(
            self._conn,
            (
                chunk_rows.derive(c.doc_id, c.extraction, owner.__getitem__, cap, _key)
                for c in chunks
            ),
        )

    # ----- reading ---------------------------------------------------------------------

    def chunk_ids(self) -> list[str]:
        """The stored chunks' ids, in index order."""
        return [
            c for (c,) in self._conn.execute("SELECT chunk_id FROM chunks ORDER BY doc_id, idx")
        ]

    # ----- the tables written from it ---------------------------------------------------

    def tables_changes(self) -> TablesChanges:
        """What changed since the graph tables marked by :meth:`mark_tables` were
        written: each update adds the chunks it removed or replayed and the entity
        rows it dropped or made, until the next mark empties the log."""
        conn = self._conn
        (tables,) = conn.execute("SELECT value FROM meta WHERE name = 'tables'").fetchone()
        chunks = [c for (c,) in conn.execute("SELECT chunk_id FROM changed_chunks")]
        entities = [r for (r,) in conn.execute("SELECT row FROM changed_entities")]
        return TablesChanges(tables, chunks, entities)

    def mark_tables(self, digest: str) -> None:
        """Record that the tables database of digest ``digest`` now holds this state's
        graph, and empty the log of changes. Until it is called, every later update's
        changes add to the log, so a tables write that never finished is made good by
        the next."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("UPDATE meta SET value = ? WHERE name = 'tables'", (digest,))
            conn.execute("DELETE FROM changed_chunks")
            conn.execute("DELETE FROM changed_entities")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def positions(self) -> npt.NDArray[np.int64]:
        """Each entity position's row (``positions()[i]`` is the row of the clean
        build's ``i``-th entity): rows stay while positions follow the index order."""
        rows = self._conn.execute("SELECT row FROM entities ORDER BY doc_id, idx, seq")
        return np.fromiter((r for (r,) in rows), dtype=np.int64)

    def _records(self) -> tuple[list[EntityRecord], dict[int, int]]:
        """The entities in the clean build's order, and each row's position."""
        position: dict[int, int] = {}
        records: list[EntityRecord] = []
        rows = self._conn.execute(
            "SELECT row, name, type, aliases FROM entities ORDER BY doc_id, idx, seq"
        )
        for row, name, type_, aliases in rows:
            position[row] = len(records)
            records.append(EntityRecord(name, type_, json.loads(aliases)))
        return records, position

    def entities(self) -> tuple[list[EntityRecord], dict[str, int]]:
        """The entities in the clean build's order, and each key's entity position."""
        records, position = self._records()
        owner = {k: position[r] for k, r in self._conn.execute("SELECT key, row FROM key_owner")}
        return records, owner

    def graph(
        self, chunk_ids: Sequence[str] | None = None, store: GraphStore | None = None
    ) -> KnowledgeGraph:
        """The graph :meth:`GraphBuilder.build` makes of the stored extractions in index
        order (same arguments), from the stored per-chunk rows. Still linear in the
        corpus (every row read; the next step writes the tables from the rows)."""
        records, position = self._records()
        stored = self.chunk_ids()
        chunks = stored if chunk_ids is None else chunk_ids
        extractions = {key64(c): e.extraction for c, e in self._load(stored)}
        return chunk_rows.assemble(self._conn, records, position, chunks, extractions, store)


def _remove_database(path: Path) -> None:
    """Remove the SQLite file ``path`` and then its rollback journal. A journal left by
    a writer killed mid-transaction is "hot": beside a new file of the same name, SQLite
    would play it back into that file, so it goes with its file; the file goes first,
    so a stop between the two leaves a journal with no file, which nothing reads."""
    path.unlink(missing_ok=True)
    path.with_name(path.name + "-journal").unlink(missing_ok=True)


def resolve_entities(
    path: Path,
    everything: Callable[[], Iterable[ChunkExtraction]],
    delta: tuple[Iterable[str], Iterable[ChunkExtraction]] | None,
    *,
    since: str,
    tag: str,
    max_entities_per_chunk: int = 64,
    facts: EntityFacts = NO_FACTS,
    verified: bool = False,
    source: ExtractionSource | None = None,
) -> ResolutionState:
    """The entity resolution of a graph build, for the graph stage to call.

    ``delta`` is what changed since the build tagged ``since`` (the ids of chunks
    removed, and the filtered extractions of chunks added or changed); the state at
    ``path`` that build left is updated by it. Where there is no such state (missing,
    damaged, another version or build's) or no delta, the state is built anew from
    ``everything()``, the filtered extractions of every chunk. Either way the state is
    tagged ``tag``, and its :meth:`ResolutionState.graph` is the clean build's graph.
    ``verified``: the caller knows the file is as that build left it, so SQLite's check
    of every page is skipped. ``source`` gives the extractions of stored chunks (those
    of this build: the state keeps none); one the state did not resolve (a delta that
    missed it) makes the state anew.
    """
    if delta is not None:
        state = ResolutionState.open(path, max_entities_per_chunk, since, facts, verified, source)
        if state is not None:
            removed, changed = delta
            try:
                replayed = state.apply(removed, changed, tag=tag)
            except (sqlite3.DatabaseError, StaleState) as err:  # damage quick_check missed
                state.close()
                logger.warning(
                    "graph resolution state %s unreadable (%s): building anew", path, err
                )
            else:
                logger.info("entity resolution: %d chunks replayed", replayed)
                return state
    state = ResolutionState.create(
        path, everything(), max_entities_per_chunk, tag=tag, facts=facts, source=source
    )
    logger.info("entity resolution: every chunk resolved")
    return state
