"""The graph tables of an index in one SQLite database, read a row at a time.

``tables/graph.sqlite`` holds the entities, descriptions, relations and chunks of the
knowledge graph. Every text (a description, a relation's text, a source sentence, a
chunk's title) is stored once in ``texts``, keyed by a 64-bit hash of the text, with the
number of rows that refer to it; a source sentence that is its chunk's text between the
provenance offsets is not stored again at all. A chunk's text is its row's ``body``,
compressed where long (:mod:`quillian.stores.packed`): it is the corpus's text again,
and no other row shares it (layout ``keyed-2``; ``keyed-1`` kept it in ``texts``).
Beside it, ``tables/*.npy`` hold what retrieval derives from the whole graph
(:mod:`quillian.components.retrieval.derived`), computed by the build and
memory-mapped at open, and the database holds the entity lexicon's keys and the alias
ids, looked up by an index.

Rows are keyed by ids an update does not move (an entity's row in the resolution state,
a chunk's hash of its id), never by their place in index order: ``*_order.npy`` give
each position's row, and ``entity_positions.npy`` each entity row's position. So a
build that adds or deletes a few documents patches the rows it changed
(:mod:`quillian.index.state_tables`) instead of writing every row again, and only the
order arrays, numpy arrays, are written whole. An index written before this
layout (``meta`` without :data:`LAYOUT`) has rows keyed by position and no order
arrays, and is read as it is.

Why SQLite: it is in the standard library, reads one row by its id without parsing the
rest (JSON Lines had to be read whole at open), writes in one transaction (a killed
build leaves no half table), and is one file, which a PostgreSQL index's ``files``
table mirrors by blocks.

Two ways of writing it, and of reading it:

* **Patched where it is** (an embedded index, whose readers are on this machine): the
  database is in SQLite's write-ahead-log mode
  (:func:`~quillian.stores.embedded.sqlite.wal_mode`), and an update
  patches it in one write transaction, never copying it (70 MB at 100k passages), each
  array beside it replaced whole by a rename. A reader holds one read transaction
  while the index is open, so it keeps reading the rows of the build it was opened at
  however many updates commit meanwhile, and maps every array when it opens, so a
  later rename does not change what it reads. The index's checks of it are SQLite's
  (:func:`~quillian.index.integrity.check_tables_database`), not a digest of its
  bytes.
* **Copied and swapped in** (a PostgreSQL index's local cache, whose copies on other
  machines are replaced by a rename as they are fetched; a database written whole):
  a new ``tables/`` folder is written and swapped in whole, its database in no journal
  mode, read ``immutable`` (no journal or lock file is looked for: the file is never
  written once swapped in). The connection holds the file open, so an opened index
  keeps reading the build it was opened at when a later build replaces ``tables/``.

An opened database is read through one connection shared by the server's threads under
a lock.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import sqlite3
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar, overload

import numpy as np
import numpy.typing as npt

from quillian.components.extraction.assemble import RELATED_TO
from quillian.components.graph.builder import (
    DescriptionRecord,
    EntityRecord,
    KnowledgeGraph,
)
from quillian.components.retrieval import derived
from quillian.index.artifacts import replace_dir, save_npy
from quillian.stores.embedded.row_counts import keep_counts
from quillian.stores.embedded.sqlite import wal_bytes, wal_mode
from quillian.stores.integrity import damaged
from quillian.stores.mapped import load_mapped, narrowed
from quillian.stores.packed import UnpackedTexts, pack_text, unpack_text
from quillian.stores.snapshot import GraphSnapshot, distinct_order
from quillian.types import Chunk, Provenance, Triple, key64

__all__ = [
    "COUNTED",
    "KEYED_WHOLE_TEXTS",
    "KEY_ARRAYS",
    "TABLES_DB",
    "TITLED_INDEX",
    "DistinctTexts",
    "StoredTables",
    "entity_name",
    "fingerprint",
    "load_tables",
    "order_arrays",
    "patched_fingerprint",
    "relation_words",
    "save_array",
    "save_tables",
    "stored_chunk_texts",
    "text_functions",
    "text_of",
]

#: The database, relative to the index directory.
TABLES_DB = "tables/graph.sqlite"
#: Rows inserted per ``executemany``.
BATCH = 4096
#: Rows of each table kept decoded in memory after a read.
CACHE_ROWS = 4096
#: The ``meta`` key of a hash of the entity and description tables, the numbering and
#: texts an entity alignment refers to (:func:`quillian.components.kg.link.index_fingerprint`).
FINGERPRINT = "entity_fingerprint"
#: A source sentence stored as its chunk's text between the provenance offsets.
IN_CHUNK = -1
#: The arrays beside the tables that hold 64-bit keys (hashes of chunk ids and texts):
#: every other integer array holds rows or positions, stored in 32 bits
#: (:func:`save_array`).
KEY_ARRAYS = frozenset({"chunk_order", "chunk_keys", "text_keys"})

#: The ``meta`` key naming the layout of rows keyed by ids (absent: keyed by position).
LAYOUT = "layout"
#: Rows keyed by ids, a chunk's text its row's ``body``, a description's chunk its
#: ``chunk`` key alone (its node id is computed from its entity's, its chunk's id and
#: its text, not stored), a text found in a chunk's text kept as that span of it
#: (:func:`text_of`), a relation's words NULL where its row implies them
#: (:func:`relation_words`); the layout every build writes.
KEYED = "keyed-5"
#: The layouts before, read but never patched (a build writes such tables whole again):
#: every relation's words in its row (``keyed-4``), every text kept whole
#: (``keyed-3``), a description's chunk id and node id also in its row (``keyed-2``),
#: and a chunk's text also in ``texts`` (``keyed-1``).
KEYED_WORDS = "keyed-4"
KEYED_WHOLE_TEXTS = "keyed-3"
KEYED_BODIES = "keyed-2"
KEYED_TEXTS = "keyed-1"
#: The layouts whose chunk rows are keyed by their ids' keys and hold their bodies.
_BODY_LAYOUTS = (KEYED, KEYED_WORDS, KEYED_WHOLE_TEXTS, KEYED_BODIES)

#: The index of the keys only pages' titles give (rewritten at each patch).
TITLED_INDEX = "names_titled ON names (titled) WHERE titled = 1"

#: The tables whose rows SQLite counts as they change (what an update's carried
#: positions are checked against: one row read each, not every page,
#: :mod:`~quillian.stores.embedded.row_counts`).
COUNTED = ("descriptions", "relations")
DDL = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE texts (id INTEGER PRIMARY KEY, text TEXT, refs INTEGER NOT NULL,
    chunk INTEGER, start INTEGER, end INTEGER);
CREATE INDEX texts_chunk ON texts (chunk);
CREATE TABLE chunks (row INTEGER PRIMARY KEY, id TEXT NOT NULL, title INTEGER,
    body NOT NULL);
CREATE TABLE entities (row INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,
    aliases TEXT NOT NULL);
CREATE TABLE descriptions (row INTEGER PRIMARY KEY, entity INTEGER NOT NULL,
    text INTEGER NOT NULL, chunk INTEGER NOT NULL, seq INTEGER NOT NULL);
CREATE INDEX descriptions_chunk ON descriptions (chunk);
CREATE TABLE sources (id INTEGER PRIMARY KEY, doc_id TEXT NOT NULL, chunk_id TEXT NOT NULL);
CREATE UNIQUE INDEX sources_key ON sources (chunk_id, doc_id);
CREATE TABLE relations (row INTEGER PRIMARY KEY, subject TEXT,
    predicate TEXT, object TEXT, description INTEGER, source INTEGER,
    start INTEGER, end INTEGER, sentence INTEGER, triple INTEGER NOT NULL,
    chunk INTEGER NOT NULL, seq INTEGER NOT NULL, subject_entity INTEGER NOT NULL,
    object_entity INTEGER NOT NULL, source_chunk INTEGER);
CREATE INDEX relations_triple ON relations (triple);
CREATE INDEX relations_chunk ON relations (chunk);
CREATE INDEX relations_source ON relations (source);
CREATE TABLE names (key TEXT PRIMARY KEY, entity INTEGER NOT NULL, titled INTEGER NOT NULL)
    WITHOUT ROWID;
CREATE INDEX names_entity ON names (entity);
CREATE INDEX {TITLED_INDEX};
CREATE TABLE alias_ids (id TEXT PRIMARY KEY, entity INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX alias_ids_entity ON alias_ids (entity);
"""

T = TypeVar("T")

logger = logging.getLogger(__name__)


def entity_name(row: str) -> str:
    """SQL for the name of the tables' entity whose row is the SQL ``row``: what a
    relation's NULL subject or object stands for (:func:`relation_words`)."""
    return f"(SELECT ne.name FROM main.entities ne WHERE ne.row = {row})"


def relation_words(alias: str, implied: bool = True) -> tuple[str, str, str]:
    """SQL for the subject, predicate and object of the ``relations`` row ``alias``.
    ``implied`` (layout :data:`KEYED`): a row keeps NULL for a subject or object that is
    its entity's name, and for the predicate :data:`~quillian.components.extraction.
    assemble.RELATED_TO` (nine of ten relations of the 20 MB text name both entities so
    and are co-occurrences: 7 MB of its tables, docs/scale.md), read back from the
    entity's row; else each is the row's own. An entity's name changes only when the
    resolution makes it again, and a patch then writes again every relation naming it
    (:mod:`quillian.index.state_tables`), so a NULL always reads as the name it stood for."""
    words = tuple(f"{alias}.{column}" for column in ("subject", "predicate", "object"))
    if not implied:
        return words  # type: ignore[return-value]  # three
    subject, predicate, obj = words
    return (
        f"coalesce({subject}, {entity_name(f'{alias}.subject_entity')})",
        f"coalesce({predicate}, '{RELATED_TO}')",
        f"coalesce({obj}, {entity_name(f'{alias}.object_entity')})",
    )


def _unimplied_words(triple: Triple, subject: str, obj: str) -> tuple[str | None, ...]:
    """A relation's subject, predicate and object as a :data:`KEYED` row keeps them:
    NULL where its entities' names (``subject``, ``obj``) and :data:`RELATED_TO` imply
    them (:func:`relation_words`)."""
    return (
        None if triple.subject == subject else triple.subject,
        None if triple.predicate == RELATED_TO else triple.predicate,
        None if triple.object == obj else triple.object,
    )


def text_of(alias: str) -> str:
    """SQL for the text of the ``texts`` row ``alias`` (NULL where a left join found
    none): its ``text``, or for a span (``chunk`` not NULL) its chunk's text between
    its offsets, the chunk read only then (needs :func:`text_functions` on the
    connection)."""
    return (
        f"CASE WHEN {alias}.chunk IS NULL THEN {alias}.text ELSE substr(chunk_text("
        f"{alias}.chunk, (SELECT sc.body FROM chunks sc WHERE sc.row = {alias}.chunk)),"
        f" {alias}.start + 1, {alias}.end - {alias}.start) END"
    )


def text_functions(conn: sqlite3.Connection, texts: UnpackedTexts | None = None) -> None:
    """Give ``conn`` what :func:`text_of` calls: ``chunk_text(row, body)``, a chunk's
    text from its row's body, the recent ones kept (in ``texts`` where given: a reader
    that also reads chunks' texts in Python keeps one cache for both)."""
    conn.create_function("chunk_text", 2, texts or UnpackedTexts(), deterministic=True)


def first_seen(
    descriptions: Sequence[str], relations: Sequence[str]
) -> tuple[list[str], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct texts of ``descriptions`` then ``relations`` in the order first met,
    and each one's index among them (what the embedding stage embeds once each)."""
    rows: dict[str, int] = {}
    desc_rows = np.array([rows.setdefault(t, len(rows)) for t in descriptions], dtype=np.int64)
    rel_rows = np.array([rows.setdefault(t, len(rows)) for t in relations], dtype=np.int64)
    return list(rows), desc_rows, rel_rows


@dataclass(frozen=True)
class DistinctTexts:
    """The distinct texts of a graph's descriptions then relations in the order first
    met (:func:`first_seen`), as their ids (:func:`~quillian.types.key64` of each), each
    row's index among them, and :attr:`read`, which gives the texts at positions of
    :attr:`ids` (only those asked for are read)."""

    ids: npt.NDArray[np.int64]
    description_rows: npt.NDArray[np.int64]
    relation_rows: npt.NDArray[np.int64]
    read: Callable[[npt.NDArray[np.int64]], list[str]]

    @classmethod
    def of(cls, descriptions: Sequence[str], relations: Sequence[str]) -> DistinctTexts:
        """The distinct texts of these rows' texts, held in memory."""
        texts, desc_rows, rel_rows = first_seen(descriptions, relations)
        ids = np.fromiter(map(key64, texts), dtype=np.int64, count=len(texts))
        return cls(ids, desc_rows, rel_rows, lambda at: [texts[i] for i in at.tolist()])


def save_tables(directory: Path, kg: KnowledgeGraph, chunks: Sequence[Chunk]) -> None:
    """Write ``kg``'s tables (``chunks``: its chunks, in ``kg.chunk_ids`` order) and what
    retrieval derives from them under ``tables/``, swapped in whole."""
    replace_dir(directory / "tables", lambda path: _write(path, kg, chunks))


def _write(path: Path, kg: KnowledgeGraph, chunks: Sequence[Chunk]) -> None:
    pages = derived.page_entities(kg)
    relation_chunks = derived.relation_chunks(kg)
    chunk_rows = np.fromiter(map(key64, kg.chunk_ids), dtype=np.int64, count=len(kg.chunk_ids))
    orders = order_arrays(
        chunk_rows,
        np.arange(kg.n_entities, dtype=np.int64),
        np.arange(len(kg.descriptions), dtype=np.int64),
        np.arange(len(kg.relations), dtype=np.int64),
    )
    conn = sqlite3.connect(path / Path(TABLES_DB).name, isolation_level=None)
    try:
        text_functions(conn)
        conn.execute("PRAGMA journal_mode = OFF")  # a new file in a folder swapped in whole
        conn.executescript(DDL)
        conn.execute("BEGIN")
        _TableWriter(conn, chunks, chunk_rows.tolist()).write(kg, relation_chunks, pages)
        conn.execute("INSERT INTO meta VALUES (?, ?)", (FINGERPRINT, fingerprint(conn, orders)))
        keep_counts(conn, COUNTED)  # after the rows, which go in uncounted
        conn.execute("COMMIT")
    finally:
        conn.close()
    arrays: dict[str, npt.NDArray[Any]] = {
        "relation_subject": kg.relation_subject,
        "relation_object": kg.relation_object,
        "page_entities": pages,
        "description_entity": derived.description_entities(kg),
        "literal_entities": derived.literal_entities(kg),
        "entity_chunks": derived.entity_chunks(kg),
        **derived.hop_arrays(kg, pages, relation_chunks),
        **orders,
    }
    for name, array in arrays.items():
        save_array(path, name, array)


def unique_first(
    keys: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """``np.unique(keys, return_index=True, return_inverse=True)``: the distinct keys in
    order, each one's first position and each position's distinct key, from one
    unstable sort (equal keys side by side in any order: the first position is the
    least of theirs), where numpy's takes a stable one, about twice as slow on 64-bit
    keys in no order."""
    order = np.argsort(keys)
    if not len(keys):
        return keys[order], order, order
    ordered = keys[order]
    step = ordered[1:] != ordered[:-1]
    starts = np.flatnonzero(np.concatenate(([True], step)))
    inverse = np.empty(len(keys), np.intp)
    inverse[order] = np.cumsum(np.concatenate(([0], step)), dtype=np.intp)
    return ordered[starts], np.minimum.reduceat(order, starts), inverse


def save_array(directory: Path, name: str, array: npt.NDArray[Any]) -> None:
    """Store the array ``name`` beside the tables in ``directory``: one of rows or
    positions in 32 bits where its values fit (each is under the count of some table's
    rows), half the bytes of numpy's default; a key array (:data:`KEY_ARRAYS`) as it
    is. Readers index with either width. Replaced by a rename (:func:`save_npy`), so
    a reader that mapped the file before keeps reading it."""
    if array.dtype == np.int64 and name not in KEY_ARRAYS:
        array = narrowed(array, np.int32)
    save_npy(directory / f"{name}.npy", array)


def order_arrays(
    chunks: npt.NDArray[np.int64],
    entities: npt.NDArray[np.int64],
    descriptions: npt.NDArray[np.int64],
    relations: npt.NDArray[np.int64],
) -> dict[str, npt.NDArray[np.int64]]:
    """The arrays giving each position's row (``*_order``: chunks, entities,
    descriptions, relations, given in that order) and each entity row's position
    (``entity_positions``, -1 where no entity has the row), by file name."""
    top = int(entities.max()) + 1 if len(entities) else 0
    positions = np.full(top, -1, dtype=np.int64)
    positions[entities] = np.arange(len(entities), dtype=np.int64)
    return {
        "chunk_order": chunks,
        "entity_order": entities,
        "description_order": descriptions,
        "relation_order": relations,
        "entity_positions": positions,
    }


class _TableWriter:
    """Writes the tables in batches, each distinct text once (keyed by
    :func:`~quillian.types.key64`, with its number of references); rows keyed by
    position, chunks by the key of their id."""

    def __init__(self, conn: sqlite3.Connection, chunks: Sequence[Chunk], rows: list[int]) -> None:
        self.conn = conn
        self.chunks = chunks
        self.rows = rows
        self.texts: dict[str, int] = {}
        self.refs: Counter[int] = Counter()

    def text(self, text: str) -> int | None:
        """The id of ``text`` in ``texts``, counted (None for an empty one)."""
        if not text:
            return None
        found = self.texts.get(text)
        if found is None:
            found = self.texts[text] = key64(text)
        self.refs[found] += 1
        return found

    def insert(self, sql: str, rows: Iterable[tuple[Any, ...]]) -> None:
        batch: list[tuple[Any, ...]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= BATCH:
                self.conn.executemany(sql, batch)
                batch.clear()
        if batch:
            self.conn.executemany(sql, batch)

    def write(
        self,
        kg: KnowledgeGraph,
        relation_chunks: npt.NDArray[np.int64],
        pages: npt.NDArray[np.int64],
    ) -> None:
        titles = [c.title for c in self.chunks]
        self.insert(
            "INSERT INTO chunks VALUES (?, ?, ?, ?)",
            (
                (row, cid, self.text(c.title), pack_text(c.text))
                for row, cid, c in zip(self.rows, kg.chunk_ids, self.chunks, strict=True)
            ),
        )
        self.insert(
            "INSERT INTO entities VALUES (?, ?, ?, ?)",
            (
                (i, e.name, e.type, json.dumps(e.aliases, ensure_ascii=False))
                for i, e in enumerate(kg.entities)
            ),
        )
        self.insert(
            "INSERT INTO descriptions VALUES (?, ?, ?, ?, ?)",
            (
                (i, d.entity, self.text(d.text), key64(d.chunk_id), i)
                for i, d in enumerate(kg.descriptions)
            ),
        )
        sources: dict[tuple[str, str], int] = {}
        subjects, objects = kg.relation_subject.tolist(), kg.relation_object.tolist()
        self.insert(
            "INSERT INTO relations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    *self._relation(
                        i,
                        t,
                        int(relation_chunks[i]),
                        sources,
                        (kg.entities[subjects[i]].name, kg.entities[objects[i]].name),
                    ),
                    key64(t.id),
                    0,
                    i,
                    subjects[i],
                    objects[i],
                    self.rows[relation_chunks[i]] if relation_chunks[i] >= 0 else None,
                )
                for i, t in enumerate(kg.relations)
            ),
        )
        self.insert(
            "INSERT INTO sources VALUES (?, ?, ?)",
            ((row, doc, cid) for (doc, cid), row in sources.items()),
        )
        names, titled = derived.name_keys(kg, pages, titles)
        self.insert(
            "INSERT INTO names VALUES (?, ?, ?)",
            [(k, e, 0) for k, e in names.items()] + [(k, e, 1) for k, e in titled.items()],
        )
        self.insert("INSERT INTO alias_ids VALUES (?, ?)", kg._alias_ids.items())
        self.insert(
            "INSERT INTO texts (id, text, refs) VALUES (?, ?, ?)",
            ((i, text, self.refs[i]) for text, i in self.texts.items()),
        )
        counts = {
            "entities": kg.n_entities,
            "descriptions": len(kg.descriptions),
            "relations": len(kg.relations),
            "chunks": len(kg.chunk_ids),
        }
        meta = [("counts", json.dumps(counts)), (LAYOUT, KEYED)]
        self.conn.executemany("INSERT INTO meta VALUES (?, ?)", meta)

    def _relation(
        self,
        pos: int,
        t: Triple,
        chunk: int,
        sources: dict[tuple[str, str], int],
        names: tuple[str, str],
    ) -> tuple[Any, ...]:
        p = t.provenance
        head = (pos, *_unimplied_words(t, *names), self.text(t.description))
        if p is None:
            return (*head, None, None, None, None)
        source = sources.setdefault((p.doc_id, p.chunk_id), len(sources))
        if not p.sentence:
            sentence: int | None = None
        elif chunk >= 0 and self.chunks[chunk].text[p.start : p.end] == p.sentence:
            sentence = IN_CHUNK
        else:
            sentence = self.text(p.sentence)
        return (*head, source, p.start, p.end, sentence)


def fingerprint(conn: sqlite3.Connection, orders: dict[str, npt.NDArray[np.int64]]) -> str:
    """The :data:`FINGERPRINT` of the entity and description tables written on
    ``conn``, whose positions ``orders`` gives (:func:`order_arrays`): a hash of their
    rows (texts, not text ids) as SQLite's JSON arrays, one a line, computed by SQLite
    (no Python pass over the rows), and of the order arrays."""
    digest = hashlib.sha256()
    for sql in (
        "SELECT json_array(row, name, type, aliases) AS line FROM entities ORDER BY row",
        f"SELECT json_array(d.row, d.entity, {text_of('t')}, c.id) AS line FROM descriptions d"
        " JOIN texts t ON t.id = d.text JOIN chunks c ON c.row = d.chunk ORDER BY d.row",
    ):
        (lines,) = conn.execute(f"SELECT group_concat(line, char(10)) FROM ({sql})").fetchone()
        digest.update((lines or "").encode() + b"\n\n")
    return _with_orders(digest, orders)


def patched_fingerprint(
    before: str, changed: Iterable[str], orders: dict[str, npt.NDArray[np.int64]]
) -> str:
    """The :data:`FINGERPRINT` of tables patched from tables of fingerprint ``before``:
    a hash of it, of the entity and description rows the patch ``changed`` (their rows
    as text, before and after) and of the order arrays. It differs from the fingerprint
    of the same tables written whole: an alignment made against either is re-linked
    once against the other. A patch that changed no entity or description row keeps
    ``before`` (its caller does not call this): no position moved either."""
    digest = hashlib.sha256(before.encode() + b"\n")
    for line in changed:
        digest.update(line.encode() + b"\n")
    return _with_orders(digest, orders)


def _with_orders(digest: Any, orders: dict[str, npt.NDArray[np.int64]]) -> str:
    for name in ("entity_order", "description_order"):
        digest.update(np.ascontiguousarray(orders[name], dtype=np.int64).tobytes())
    return str(digest.hexdigest()[:16])


def stored_chunk_texts(directory: Path, chunk_ids: Sequence[str]) -> dict[str, str]:
    """The texts of those of ``chunk_ids`` whose rows the graph tables under the index
    ``directory`` hold (the last build's), by id; none where there are no tables, or of
    a layout whose chunk rows are not keyed by their ids' keys and hold their bodies."""
    path = directory / TABLES_DB
    if not path.is_file() or not chunk_ids:
        return {}
    uri = path.absolute().as_uri() + "?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True)) as conn:
            found = conn.execute(f"SELECT value FROM meta WHERE key = '{LAYOUT}'").fetchone()
            if found is None or found[0] not in _BODY_LAYOUTS:
                return {}
            texts: dict[str, str] = {}
            for batch in range(0, len(chunk_ids), _PARAMS):
                rows = [key64(i) for i in chunk_ids[batch : batch + _PARAMS]]
                marks = ",".join("?" * len(rows))
                for cid, body in conn.execute(
                    f"SELECT id, body FROM chunks WHERE row IN ({marks})", rows
                ):
                    texts[cid] = unpack_text(body)
            return texts
    except sqlite3.Error as exc:
        logger.warning("the last build's chunk texts unreadable (%s): %s", path, exc)
        return {}


def _connected(path: Path, texts: UnpackedTexts, in_place: bool, hold: bool) -> sqlite3.Connection:
    """A connection reading the tables database at ``path``: through its write-ahead
    log where it is ``in_place`` (in one read transaction where ``hold``), else as an
    immutable file; its meta read once."""
    uri = path.absolute().as_uri() + ("?mode=ro" if in_place else "?immutable=1")
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
    try:
        text_functions(conn, texts)
        if in_place and hold:
            conn.execute("BEGIN")  # the snapshot, taken by the first read
        conn.execute("SELECT value FROM meta WHERE key = 'counts'").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


class _Database:
    """One read-only connection to a tables database, shared by threads under a lock;
    a damaged file raises :class:`~quillian.errors.IndexDamagedError` naming it. A
    database patched where it is
    (:func:`~quillian.stores.embedded.sqlite.wal_mode`) is read, where ``hold``, in one
    read transaction held until :meth:`close`: every query sees the rows of the update
    that was last to commit when it opened (in a folder it may not write, with its log
    empty: as an immutable file)."""

    def __init__(self, path: Path, texts: UnpackedTexts, *, hold: bool = True) -> None:
        self.path = path
        in_place = wal_mode(path)
        try:
            try:
                self._conn = _connected(path, texts, in_place, hold)
            except sqlite3.OperationalError:
                # a folder this process may not write: SQLite cannot make the file of
                # shared memory a reader of the log needs. Where the log is empty, the
                # database holds every commit, read as a file no one writes.
                if not in_place or wal_bytes(path):
                    raise
                self._conn = _connected(path, texts, False, False)
        except sqlite3.Error as exc:
            raise damaged(path, f"unreadable tables: {exc}") from exc
        self._lock = threading.Lock()
        # closed once the last user lets go (the connection's own statement cache holds
        # it in a reference cycle, which only a garbage collection, in whatever later
        # call it falls, would otherwise end: its read transaction, held, keeps the
        # pages of later updates in the log until then)
        self._closed = weakref.finalize(self, self._conn.close)

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._lock:
                return self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise damaged(self.path, f"unreadable tables: {exc}") from exc

    def close(self) -> None:
        self._closed()


class _Rows(Sequence[T]):
    """A table's rows by position: indexing reads one row (the last
    :data:`CACHE_ROWS` kept), iteration streams them in pages. ``order`` gives each
    position's row key (None: the key is the position)."""

    def __init__(
        self,
        db: _Database,
        select: tuple[str, str],
        decode: Callable[[tuple[Any, ...]], T],
        count: int,
        key: str,
        order: npt.NDArray[np.int64] | None,
    ) -> None:
        self._db, self._decode, self._count = db, decode, count
        self._columns, self._source = select
        self._select = f"SELECT {self._columns} FROM {self._source}"
        self._key, self._order = key, order
        # the cache holds what a row is read by, not this object: no reference cycle,
        # so the rows (and the connection they share) go when their last user does,
        # not at a later garbage collection, in whatever call it falls
        self._row = lru_cache(maxsize=CACHE_ROWS)(
            functools.partial(_read_row, db, f"{self._select} WHERE {key} = ?", decode, order)
        )

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        pos = index + self._count if index < 0 else index
        if not 0 <= pos < self._count:
            raise IndexError(f"row {index} of {self._count}")
        return self._row(pos)

    def __iter__(self) -> Iterator[T]:
        key = self._key
        for start in range(0, self._count, BATCH):
            end = min(start + BATCH, self._count)
            if self._order is None:
                rows = self._db.query(
                    f"{self._select} WHERE {key} >= ? AND {key} < ? ORDER BY {key}", (start, end)
                )
                yield from map(self._decode, rows)
                continue
            keys = self._order[start:end].tolist()
            found: dict[int, tuple[Any, ...]] = {}
            for part in range(0, len(keys), _PARAMS):
                wanted = keys[part : part + _PARAMS]
                marks = ",".join("?" * len(wanted))
                found.update(
                    (r[0], r[1:])
                    for r in self._db.query(
                        f"SELECT {key}, {self._columns} FROM {self._source}"
                        f" WHERE {key} IN ({marks})",
                        tuple(wanted),
                    )
                )
            yield from (self._decode(found[k]) for k in keys)


def _read_row(
    db: _Database,
    sql: str,
    decode: Callable[[tuple[Any, ...]], T],
    order: npt.NDArray[np.int64] | None,
    pos: int,
) -> T:
    """The row at position ``pos`` (its key: the position, or ``order``'s)."""
    key = pos if order is None else int(order[pos])
    (row,) = db.query(sql, (key,))
    return decode(row)


#: The array giving each position's row, by table.
_ORDER_ARRAYS = {
    "chunks": "chunk_order",
    "entities": "entity_order",
    "descriptions": "description_order",
    "relations": "relation_order",
}
#: SQLite host parameters per statement (its default limit is 32,766).
_PARAMS = 500


class StoredTables:
    """An index's tables database and stored arrays, opened (a
    :class:`~quillian.components.graph.builder.GraphIndexes`). ``hold``: a database
    patched where it is is read in one read transaction held while the tables are
    open (an index opened for retrieval, which updates must not change under it);
    False for the build that wrote them, which no one else writes while it runs, so
    that no snapshot of it is kept after (a reader's snapshot keeps the pages of later
    updates in SQLite's log)."""

    def __init__(self, directory: Path, *, hold: bool = True) -> None:
        self.directory = directory / "tables"
        #: The chunks' texts last read: relations' sentences (in Python), spans (in SQL).
        self._chunk_bodies = UnpackedTexts()
        self.db = _Database(directory / TABLES_DB, self._chunk_bodies, hold=hold)
        meta = dict(
            self.db.query("SELECT key, value FROM meta WHERE key IN (?, ?)", ("counts", LAYOUT))
        )
        self.counts: dict[str, int] = json.loads(meta["counts"])
        # every array mapped now, while the folder holds those of the rows just read: an
        # update replaces them by renames, and the mappings keep the files opened
        self._arrays: dict[str, npt.NDArray[Any] | None] = {
            path.name[: -len(".npy")]: load_mapped(path)
            for path in sorted(self.directory.glob("*.npy"))
        }
        #: Rows keyed by ids, placed by the order arrays (else by position).
        layout = meta.get(LAYOUT)
        self.keyed = layout in (KEYED, KEYED_WORDS, KEYED_WHOLE_TEXTS, KEYED_BODIES, KEYED_TEXTS)
        #: A chunk's text is its row's body (else a text of ``texts``).
        self._bodies = layout in (KEYED, KEYED_WORDS, KEYED_WHOLE_TEXTS, KEYED_BODIES)
        #: A description's chunk id, read from its chunk's row (else its own).
        self._description_chunk = (
            ("dc.id", " JOIN chunks dc ON dc.row = d.chunk")
            if layout in (KEYED, KEYED_WORDS, KEYED_WHOLE_TEXTS)
            else ("d.chunk_id", "")
        )
        #: The SQL of a ``texts`` row's text (a span read from its chunk, or whole).
        self._text: Callable[[str], str] = (
            text_of if layout in (KEYED, KEYED_WORDS) else "{}.text".format
        )
        #: The SQL of a relation row's words (some implied by its row, or all its own).
        self._words: Callable[[str], tuple[str, str, str]] = functools.partial(
            relation_words, implied=layout == KEYED
        )
        self._key = "row" if self.keyed else "pos"
        self.chunk_texts: _Rows[str] = (
            self._rows("c.body", "chunks c", _unpacked)
            if self._bodies
            else self._rows("t.text", "chunks c LEFT JOIN texts t ON t.id = c.text", _first)
        )
        self.chunk_titles: _Rows[str] = self._rows(
            self._text("t"), "chunks c LEFT JOIN texts t ON t.id = c.title", _first
        )

    def close(self) -> None:
        """Close the database now (else once no one holds these tables): a build's own
        reader, whose rows no stage reads after it ends."""
        self.db.close()

    def _order(self, table: str) -> npt.NDArray[np.int64] | None:
        if not self.keyed:
            return None
        name = _ORDER_ARRAYS[table]
        order = self.array(name)
        if order is None or len(order) != self.counts[table]:
            raise damaged(self.directory, f"{name}.npy missing or of another build")
        return order

    def _rows(self, columns: str, source: str, decode: Callable[[tuple[Any, ...]], T]) -> _Rows[T]:
        """The rows of ``SELECT columns FROM source``: ``source`` is a table and its
        one-letter alias, then any joins."""
        table, alias = source.split()[:2]
        key = f"{alias}.{self._key}"
        return _Rows(
            self.db, (columns, source), decode, self.counts[table], key, self._order(table)
        )

    def entity_position(self, row: int) -> int:
        """The position of the entity keyed ``row`` (the row itself before the keyed
        layout)."""
        if not self.keyed:
            return row
        positions = self.array("entity_positions")
        if positions is None or not 0 <= row < len(positions) or positions[row] < 0:
            raise damaged(self.directory, f"entity row {row} has no position")
        return int(positions[row])

    def graph(self, snapshot: GraphSnapshot) -> KnowledgeGraph:
        """The knowledge graph over ``snapshot`` whose tables these are."""
        key = self._key
        chunk = f"pc.{key} = r.source_chunk" if self.keyed else f"pc.{key} = s.chunk"
        chunk_text = ("pc.row, pc.body", "") if self._bodies else ("NULL, ct.text", _CHUNK_TEXT)
        return KnowledgeGraph(
            snapshot=snapshot,
            entities=self._rows("e.name, e.type, e.aliases", "entities e", _entity),
            descriptions=self._rows(
                f"d.entity, {self._text('t')}, {self._description_chunk[0]}",
                "descriptions d JOIN texts t ON t.id = d.text" + self._description_chunk[1],
                self._description,
            ),
            chunk_ids=self._rows("c.id", "chunks c", _first),
            relations=self._rows(
                f"{', '.join(self._words('r'))}, {self._text('d')}, s.doc_id, s.chunk_id, "
                f"r.start, r.end, r.sentence, {self._text('t')}, {chunk_text[0]}",
                "relations r "
                "LEFT JOIN texts d ON d.id = r.description "
                "LEFT JOIN sources s ON s.id = r.source "
                "LEFT JOIN texts t ON t.id = r.sentence "
                f"LEFT JOIN chunks pc ON {chunk} AND r.sentence = {IN_CHUNK}" + chunk_text[1],
                functools.partial(_relation, self._chunk_bodies),
            ),
            relation_subject=self.array("relation_subject"),  # type: ignore[arg-type]
            relation_object=self.array("relation_object"),  # type: ignore[arg-type]
            indexes=self,
        )

    def graph_texts(self) -> tuple[list[str], list[str]]:
        """Each description's text, and each relation's text as embedded (its
        description, else its subject, predicate and object), by position: two queries,
        no row decoded."""
        key = self._key
        descriptions = self.db.query(
            f"SELECT d.{key}, {self._text('t')} FROM descriptions d"
            f" JOIN texts t ON t.id = d.text ORDER BY d.{key}"
        )
        relations = self.db.query(
            f"SELECT r.{key}, coalesce({self._text('t')}, {_words_text(self._words('r'))})"
            f" FROM relations r LEFT JOIN texts t ON t.id = r.description ORDER BY r.{key}"
        )
        return (
            self._by_position(descriptions, "descriptions"),
            self._by_position(relations, "relations"),
        )

    def distinct_texts(
        self, text_ids: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None
    ) -> DistinctTexts:
        """:func:`first_seen` of :meth:`graph_texts`, from the rows' text ids read as
        integers (a text's id is its :func:`~quillian.types.key64`: equal ids, equal
        texts), each distinct text read only when asked for, not every row's text.
        ``text_ids``: the descriptions' and relations' text ids by position, where the
        caller has them (the build that wrote these tables), else read here."""
        if not self.keyed:
            return DistinctTexts.of(*self.graph_texts())
        made: dict[int, str] = {}  # a relation without a description: its triple's words
        if text_ids is None:
            text_ids = self._text_ids(made)
        ids = np.concatenate(text_ids)
        distinct, first, inverse = unique_first(ids)
        met = np.argsort(first)  # the distinct ids in the order first met (no two equal)
        rank = np.empty(len(distinct), np.int64)
        rank[met] = np.arange(len(distinct))
        rows = rank[inverse.reshape(-1)]
        n = len(text_ids[0])
        in_order = distinct[met]
        return DistinctTexts(in_order, rows[:n], rows[n:], self.texts_reader(in_order, made))

    def texts_reader(
        self, ids: npt.NDArray[np.int64], made: dict[int, str] | None = None
    ) -> Callable[[npt.NDArray[np.int64]], list[str]]:
        """What gives the texts of the distinct text ids ``ids`` at some of their
        positions, read from the tables (``made``: the words of the relations without a
        description, by their id, where the caller has them; else read when asked)."""
        made = {} if made is None else made

        def read(at: npt.NDArray[np.int64]) -> list[str]:
            wanted = ids[at].tolist()
            stored = dict(
                self.db.query(
                    f"SELECT t.id, {self._text('t')} FROM texts t"
                    " WHERE t.id IN (SELECT value FROM json_each(?))",
                    (json.dumps(wanted),),
                )
            )
            if not made and any(i not in stored for i in wanted):
                self._text_ids(made)
            return [stored[i] if i in stored else made[i] for i in wanted]

        return read

    def _text_ids(
        self, made: dict[int, str]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The descriptions' and relations' text ids by position, read from the rows;
        ``made`` takes the words of each relation without a description, by their id."""
        relations = self.db.query(
            "SELECT r.description, CASE WHEN r.description IS NULL"
            f" THEN {_words_text(self._words('r'))} END FROM relations r ORDER BY r.row"
        )
        relation_ids = []
        for text_id, text in relations:
            if text_id is None:
                text_id = key64(text)
                made[text_id] = text
            relation_ids.append(text_id)
        descriptions = self.db.query("SELECT text FROM descriptions ORDER BY row")
        description_ids = [text_id for (text_id,) in descriptions]
        return (
            self._in_position("descriptions", np.array(description_ids, dtype=np.int64)),
            self._in_position("relations", np.array(relation_ids, dtype=np.int64)),
        )

    def _in_position(self, table: str, values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """``values``, one per row of ``table`` (keyed layout) in key order, in position
        order."""
        positions = self._row_positions(table, len(values))
        if positions is None:
            raise damaged(self.directory, f"{table} is not keyed by rows")
        out = np.empty_like(values)
        out[positions] = values
        return out

    def _by_position(self, rows: list[tuple[Any, ...]], table: str) -> list[str]:
        """The texts of ``(key, text)`` rows given in key order, in position order."""
        positions = self._row_positions(table, len(rows))
        if positions is None:
            return [text for _, text in rows]
        out: list[str] = [""] * len(rows)
        for pos, (_, text) in zip(positions.tolist(), rows, strict=True):
            out[pos] = text
        return out

    def _row_positions(self, table: str, n: int) -> npt.NDArray[np.int64] | None:
        """The position of each of ``table``'s ``n`` rows taken in key order (None in
        the layout keyed by position); damaged where the table has another count."""
        order = self._order(table)
        if order is None:
            return None
        if n != len(order):
            raise damaged(self.directory, f"{n} {table} but {len(order)} positions")
        return distinct_order(order)

    def _description(self, row: tuple[Any, ...]) -> DescriptionRecord:
        entity, text, chunk_id = row
        return DescriptionRecord(self.entity_position(int(entity)), text, chunk_id)

    def array(self, name: str) -> npt.NDArray[Any] | None:
        """The stored array ``name``, memory-mapped when the tables were opened (None
        when the build stored none)."""
        return self._arrays.get(name)

    def entity_by_alias(self, alias_id: str) -> int | None:
        found = self.db.query("SELECT entity FROM alias_ids WHERE id = ?", (alias_id,))
        return self.entity_position(int(found[0][0])) if found else None

    def names(self, titled: bool) -> Callable[[str], Sequence[int]]:
        """The entity a lexicon key names, if any (one indexed lookup, cached)."""
        where = "" if titled else " AND titled = 0"
        sql = f"SELECT entity FROM names WHERE key = ?{where}"

        @lru_cache(maxsize=1 << 16)
        def resolve(key: str) -> tuple[int, ...]:
            return tuple(self.entity_position(int(r[0])) for r in self.db.query(sql, (key,)))

        return resolve


def _relation(chunk_texts: UnpackedTexts, row: tuple[Any, ...]) -> Triple:
    subject, predicate, obj, description, doc, cid, start, end, ref, text, chunk, body = row
    provenance = None
    if doc is not None:
        if ref == IN_CHUNK:
            whole = chunk_texts(chunk, body) if chunk is not None else unpack_text(body or "")
            text = whole[start:end]
        provenance = Provenance(doc, cid, start, end, text or "")
    return Triple(subject, predicate, obj, description or "", provenance)


def _words_text(words: tuple[str, str, str]) -> str:
    """SQL: a relation's words as one text (what a relation without a description
    embeds), from :func:`relation_words`."""
    return " || ' ' || ".join(words)


def _first(row: tuple[Any, ...]) -> Any:
    return row[0] if row[0] is not None else ""


def _unpacked(row: tuple[Any, ...]) -> str:
    return unpack_text(row[0])


#: The join of a chunk's text in the layout that kept it in ``texts``.
_CHUNK_TEXT = " LEFT JOIN texts ct ON ct.id = pc.text"


def _entity(row: tuple[Any, ...]) -> EntityRecord:
    name, kind, aliases = row
    return EntityRecord(name, kind, json.loads(aliases))


def load_tables(
    directory: Path, snapshot: GraphSnapshot, *, hold: bool = True
) -> tuple[KnowledgeGraph, StoredTables]:
    """The knowledge graph whose tables :func:`save_tables` wrote under ``directory``,
    over ``snapshot``, and the opened tables (chunk titles and texts by position).
    ``hold``: see :class:`StoredTables`."""
    tables = StoredTables(directory, hold=hold)
    return tables.graph(snapshot), tables
