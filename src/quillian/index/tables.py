"""The graph tables of an index in one SQLite database, read a row at a time.

``tables/graph.sqlite`` holds the entities, descriptions, relations and chunks (in
index order) of the knowledge graph. Every text (a description, a relation's text, a
source sentence, a chunk's title and text) is stored once in ``texts`` and referred to
by its row; a source sentence that is its chunk's text between the provenance offsets
is not stored again at all. Beside it, ``tables/*.npy`` hold what retrieval derives
from the whole graph (:mod:`quillian.components.retrieval.derived`), computed once by
the build and memory-mapped at open, and the database holds the entity lexicon's keys
and the alias ids, looked up by an index.

Why SQLite: it is in the standard library, reads one row by its id without parsing the
rest (JSON Lines had to be read whole at open), writes in one transaction (a killed
build leaves no half table, and the file is swapped in whole as before), and is one
file, so the manifest's checksum and a PostgreSQL index's ``files`` table mirror it as
they did the JSONL files.

An opened database is read through one connection shared by the server's threads under
a lock, opened ``immutable`` (no journal or lock file is looked for: the file is never
written once swapped in). The connection holds the file open, so an opened index keeps
reading the build it was opened at when a later build replaces ``tables/``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar, overload

import numpy as np
import numpy.typing as npt

from quillian.components.graph.builder import DescriptionRecord, EntityRecord, KnowledgeGraph
from quillian.components.retrieval import derived
from quillian.index.artifacts import replace_dir
from quillian.stores.integrity import damaged
from quillian.stores.mapped import load_mapped
from quillian.stores.snapshot import GraphSnapshot
from quillian.types import Chunk, Provenance, Triple

__all__ = ["TABLES_DB", "StoredTables", "fingerprint", "load_tables", "save_tables"]

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

DDL = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE texts (id INTEGER PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE entities (pos INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,
    aliases TEXT NOT NULL);
CREATE TABLE descriptions (pos INTEGER PRIMARY KEY, entity INTEGER NOT NULL,
    text INTEGER NOT NULL, chunk_id TEXT NOT NULL);
CREATE TABLE sources (id INTEGER PRIMARY KEY, doc_id TEXT NOT NULL, chunk_id TEXT NOT NULL,
    chunk INTEGER NOT NULL);
CREATE TABLE relations (pos INTEGER PRIMARY KEY, subject TEXT NOT NULL,
    predicate TEXT NOT NULL, object TEXT NOT NULL, description INTEGER, source INTEGER,
    start INTEGER, end INTEGER, sentence INTEGER);
CREATE TABLE chunks (pos INTEGER PRIMARY KEY, id TEXT NOT NULL, title INTEGER,
    text INTEGER);
CREATE TABLE names (key TEXT PRIMARY KEY, entity INTEGER NOT NULL, titled INTEGER NOT NULL)
    WITHOUT ROWID;
CREATE TABLE alias_ids (id TEXT PRIMARY KEY, entity INTEGER NOT NULL) WITHOUT ROWID;
"""

T = TypeVar("T")


def save_tables(directory: Path, kg: KnowledgeGraph, chunks: Sequence[Chunk]) -> None:
    """Write ``kg``'s tables (``chunks``: its chunks, in ``kg.chunk_ids`` order) and what
    retrieval derives from them under ``tables/``, swapped in whole."""
    replace_dir(directory / "tables", lambda path: _write(path, kg, chunks))


def _write(path: Path, kg: KnowledgeGraph, chunks: Sequence[Chunk]) -> None:
    pages = derived.page_entities(kg)
    relation_chunks = derived.relation_chunks(kg)
    conn = sqlite3.connect(path / Path(TABLES_DB).name, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = OFF")  # a new file in a folder swapped in whole
        conn.executescript(DDL)
        conn.execute("BEGIN")
        _TableWriter(conn, chunks).write(kg, relation_chunks, pages)
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
    }
    for name, array in arrays.items():
        np.save(path / f"{name}.npy", array)


class _TableWriter:
    """Writes the tables in batches, each distinct text once."""

    def __init__(self, conn: sqlite3.Connection, chunks: Sequence[Chunk]) -> None:
        self.conn = conn
        self.chunks = chunks
        self.texts: dict[str, int] = {}
        self._pending: list[tuple[int, str]] = []

    def text(self, text: str) -> int | None:
        """The row of ``text`` in ``texts`` (None for an empty one)."""
        if not text:
            return None
        row = self.texts.get(text)
        if row is None:
            row = self.texts[text] = len(self.texts)
            self._pending.append((row, text))
            if len(self._pending) >= BATCH:
                self.flush_texts()
        return row

    def flush_texts(self) -> None:
        self.conn.executemany("INSERT INTO texts VALUES (?, ?)", self._pending)
        self._pending.clear()

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
                (i, cid, self.text(c.title), self.text(c.text))
                for i, (cid, c) in enumerate(zip(kg.chunk_ids, self.chunks, strict=True))
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
            "INSERT INTO descriptions VALUES (?, ?, ?, ?)",
            ((i, d.entity, self.text(d.text), d.chunk_id) for i, d in enumerate(kg.descriptions)),
        )
        sources: dict[tuple[str, str, int], int] = {}
        self.insert(
            "INSERT INTO relations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self._relation(i, t, int(relation_chunks[i]), sources)
                for i, t in enumerate(kg.relations)
            ),
        )
        self.insert(
            "INSERT INTO sources VALUES (?, ?, ?, ?)",
            ((row, doc, cid, chunk) for (doc, cid, chunk), row in sources.items()),
        )
        names, titled = derived.name_keys(kg, pages, titles)
        self.insert(
            "INSERT INTO names VALUES (?, ?, ?)",
            [(k, e, 0) for k, e in names.items()] + [(k, e, 1) for k, e in titled.items()],
        )
        self.insert("INSERT INTO alias_ids VALUES (?, ?)", kg._alias_ids.items())
        self.flush_texts()
        counts = {
            "entities": kg.n_entities,
            "descriptions": len(kg.descriptions),
            "relations": len(kg.relations),
            "chunks": len(kg.chunk_ids),
        }
        meta = [("counts", json.dumps(counts)), (FINGERPRINT, fingerprint(self.conn))]
        self.conn.executemany("INSERT INTO meta VALUES (?, ?)", meta)

    def _relation(
        self, pos: int, t: Triple, chunk: int, sources: dict[tuple[str, str, int], int]
    ) -> tuple[Any, ...]:
        p = t.provenance
        head = (pos, t.subject, t.predicate, t.object, self.text(t.description))
        if p is None:
            return (*head, None, None, None, None)
        source = sources.setdefault((p.doc_id, p.chunk_id, chunk), len(sources))
        if not p.sentence:
            sentence: int | None = None
        elif chunk >= 0 and self.chunks[chunk].text[p.start : p.end] == p.sentence:
            sentence = IN_CHUNK
        else:
            sentence = self.text(p.sentence)
        return (*head, source, p.start, p.end, sentence)


def fingerprint(conn: sqlite3.Connection) -> str:
    """The :data:`FINGERPRINT` of the entity and description tables written on
    ``conn``: a hash of their rows (texts, not text rows) as SQLite's JSON arrays, one a
    line, computed by SQLite (no Python pass over the rows)."""
    digest = hashlib.sha256()
    for sql in (
        "SELECT json_array(pos, name, type, aliases) AS line FROM entities ORDER BY pos",
        "SELECT json_array(d.pos, d.entity, t.text, d.chunk_id) AS line FROM descriptions d"
        " JOIN texts t ON t.id = d.text ORDER BY d.pos",
    ):
        (lines,) = conn.execute(f"SELECT group_concat(line, char(10)) FROM ({sql})").fetchone()
        digest.update((lines or "").encode() + b"\n\n")
    return digest.hexdigest()[:16]


class _Database:
    """One read-only connection to a tables database, shared by threads under a lock;
    a damaged file raises :class:`~quillian.errors.IndexDamagedError` naming it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        uri = path.absolute().as_uri() + "?immutable=1"
        try:
            self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            self._conn.execute("SELECT value FROM meta WHERE key = 'counts'").fetchone()
        except sqlite3.Error as exc:
            raise damaged(path, f"unreadable tables: {exc}") from exc
        self._lock = threading.Lock()

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._lock:
                return self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise damaged(self.path, f"unreadable tables: {exc}") from exc

    def close(self) -> None:
        self._conn.close()


class _Rows(Sequence[T]):
    """A table's rows by position: indexing reads one row (the last
    :data:`CACHE_ROWS` kept), iteration streams them in pages."""

    def __init__(
        self, db: _Database, select: str, decode: Callable[[tuple[Any, ...]], T], count: int
    ) -> None:
        self._db, self._select, self._decode, self._count = db, select, decode, count
        self._row = lru_cache(maxsize=CACHE_ROWS)(self._read)

    def _read(self, pos: int) -> T:
        (row,) = self._db.query(f"{self._select} WHERE pos = ?", (pos,))
        return self._decode(row)

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
        for start in range(0, self._count, BATCH):
            rows = self._db.query(
                f"{self._select} WHERE pos >= ? AND pos < ? ORDER BY pos", (start, start + BATCH)
            )
            yield from map(self._decode, rows)


class StoredTables:
    """An index's tables database and stored arrays, opened (a
    :class:`~quillian.components.graph.builder.GraphIndexes`)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory / "tables"
        self.db = _Database(directory / TABLES_DB)
        (raw,) = self.db.query("SELECT value FROM meta WHERE key = 'counts'")
        self.counts: dict[str, int] = json.loads(raw[0])
        self._arrays: dict[str, npt.NDArray[Any] | None] = {}
        self._lock = threading.Lock()
        self.chunk_texts: _Rows[str] = self._rows(
            "SELECT t.text FROM chunks c LEFT JOIN texts t ON t.id = c.text", "chunks", _first
        )
        self.chunk_titles: _Rows[str] = self._rows(
            "SELECT t.text FROM chunks c LEFT JOIN texts t ON t.id = c.title", "chunks", _first
        )

    def _rows(self, select: str, table: str, decode: Callable[[tuple[Any, ...]], T]) -> _Rows[T]:
        return _Rows(self.db, select, decode, self.counts[table])

    def graph(self, snapshot: GraphSnapshot) -> KnowledgeGraph:
        """The knowledge graph over ``snapshot`` whose tables these are."""
        return KnowledgeGraph(
            snapshot=snapshot,
            entities=self._rows("SELECT name, type, aliases FROM entities", "entities", _entity),
            descriptions=self._rows(
                "SELECT d.entity, t.text, d.chunk_id FROM descriptions d "
                "JOIN texts t ON t.id = d.text",
                "descriptions",
                _description,
            ),
            chunk_ids=self._rows("SELECT id FROM chunks", "chunks", _first),
            relations=self._rows(
                "SELECT r.subject, r.predicate, r.object, d.text, s.doc_id, s.chunk_id, "
                "s.chunk, r.start, r.end, r.sentence, t.text FROM relations r "
                "LEFT JOIN texts d ON d.id = r.description "
                "LEFT JOIN sources s ON s.id = r.source "
                "LEFT JOIN texts t ON t.id = r.sentence",
                "relations",
                self._relation,
            ),
            relation_subject=self.array("relation_subject"),  # type: ignore[arg-type]
            relation_object=self.array("relation_object"),  # type: ignore[arg-type]
            indexes=self,
        )

    def graph_texts(self) -> tuple[list[str], list[str]]:
        """Each description's text, and each relation's text as embedded (its
        description, else its subject, predicate and object), by position: two queries,
        no row decoded."""
        descriptions = self.db.query(
            "SELECT t.text FROM descriptions d JOIN texts t ON t.id = d.text ORDER BY d.pos"
        )
        relations = self.db.query(
            "SELECT coalesce(t.text, r.subject || ' ' || r.predicate || ' ' || r.object)"
            " FROM relations r LEFT JOIN texts t ON t.id = r.description ORDER BY r.pos"
        )
        return [r[0] for r in descriptions], [r[0] for r in relations]

    def _relation(self, row: tuple[Any, ...]) -> Triple:
        subject, predicate, obj, description, doc, cid, chunk, start, end, ref, text = row
        provenance = None
        if doc is not None:
            if ref == IN_CHUNK:
                text = self.chunk_texts[chunk][start:end]
            provenance = Provenance(doc, cid, start, end, text or "")
        return Triple(subject, predicate, obj, description or "", provenance)

    def array(self, name: str) -> npt.NDArray[Any] | None:
        """The stored array ``name``, memory-mapped (None when the build stored none)."""
        with self._lock:
            if name not in self._arrays:
                path = self.directory / f"{name}.npy"
                self._arrays[name] = load_mapped(path) if path.is_file() else None
            return self._arrays[name]

    def entity_by_alias(self, alias_id: str) -> int | None:
        found = self.db.query("SELECT entity FROM alias_ids WHERE id = ?", (alias_id,))
        return int(found[0][0]) if found else None

    def names(self, titled: bool) -> Callable[[str], Sequence[int]]:
        """The entity a lexicon key names, if any (one indexed lookup, cached)."""
        where = "" if titled else " AND titled = 0"
        sql = f"SELECT entity FROM names WHERE key = ?{where}"

        @lru_cache(maxsize=1 << 16)
        def resolve(key: str) -> tuple[int, ...]:
            return tuple(int(r[0]) for r in self.db.query(sql, (key,)))

        return resolve


def _first(row: tuple[Any, ...]) -> Any:
    return row[0] if row[0] is not None else ""


def _entity(row: tuple[Any, ...]) -> EntityRecord:
    name, kind, aliases = row
    return EntityRecord(name, kind, json.loads(aliases))


def _description(row: tuple[Any, ...]) -> DescriptionRecord:
    entity, text, chunk_id = row
    return DescriptionRecord(int(entity), text, chunk_id)


def load_tables(directory: Path, snapshot: GraphSnapshot) -> tuple[KnowledgeGraph, StoredTables]:
    """The knowledge graph whose tables :func:`save_tables` wrote under ``directory``,
    over ``snapshot``, and the opened tables (chunk titles and texts by position)."""
    tables = StoredTables(directory)
    return tables.graph(snapshot), tables
