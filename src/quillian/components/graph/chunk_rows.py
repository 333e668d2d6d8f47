"""What each chunk adds to the graph once its mentions are resolved, kept per chunk in
the entity-resolution state (:mod:`.incremental`), so an update derives again only the
chunks it replayed.

:meth:`GraphBuilder.add` gives a chunk's mentions (its entities by first occurrence,
the topic's weight or a mention's, ranks past the per-chunk cap left out), its
descriptions (deduplicated by entity and text) and its relation occurrences (a triple
whose ends are two entities). Only which occurrence of a triple id is kept (the first
in index order) crosses chunks; :func:`assemble` settles it.

Texts are stored once (``texts``, by a 64-bit hash of the text, with the number of rows
that refer to it) and referred to by id: a sentence naming many entities is the
provenance of every relation among them, and was the bulk of the state when each
occurrence carried its own copy (1.28 of 1.67 GB on the 20 MB text of docs/scale.md).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from quillian.components.extraction.base import Extraction
from quillian.components.graph.builder import (
    MENTION_WEIGHT,
    TOPIC_WEIGHT,
    DescriptionRecord,
    EntityRecord,
    GraphBuilder,
    KnowledgeGraph,
)
from quillian.stores.protocols import GraphStore
from quillian.types import Provenance, Triple, key64

__all__ = ["SCHEMA", "ChunkRows", "assemble", "delete", "derive", "insert"]

SCHEMA = """
CREATE TABLE texts (id INTEGER PRIMARY KEY, text TEXT NOT NULL, refs INTEGER NOT NULL);
CREATE TABLE mentions (chunk INTEGER NOT NULL, seq INTEGER NOT NULL,
    entity INTEGER NOT NULL, weight REAL NOT NULL, PRIMARY KEY (chunk, seq)) WITHOUT ROWID;
CREATE TABLE descriptions (chunk INTEGER NOT NULL, seq INTEGER NOT NULL,
    entity INTEGER NOT NULL, text INTEGER NOT NULL, PRIMARY KEY (chunk, seq)) WITHOUT ROWID;
CREATE TABLE occurrences (chunk INTEGER NOT NULL, seq INTEGER NOT NULL,
    triple INTEGER NOT NULL, subject INTEGER NOT NULL, object INTEGER NOT NULL,
    s TEXT NOT NULL, p TEXT NOT NULL, o TEXT NOT NULL, description INTEGER,
    doc_id TEXT, source_chunk TEXT, start INTEGER, end INTEGER, sentence INTEGER,
    PRIMARY KEY (chunk, seq)) WITHOUT ROWID;
CREATE INDEX occurrences_triple ON occurrences (triple);
"""
#: An occurrence's provenance, where it has one (``sentence`` not NULL), names a
#: document and a chunk: ``doc_id`` NULL where that is its chunk's document,
#: ``source_chunk`` NULL where it is its own chunk (as is most often the case).
#: An occurrence's triple as the columns ``s`` to ``sentence`` of alias ``t`` (joined
#: to its chunk ``c``), its texts read (``sentence`` NULL: no provenance;
#: ``description`` NULL: the sentence's text).
_TRIPLE_COLUMNS = (
    "t.s, t.p, t.o, (SELECT text FROM texts WHERE id = t.description),"
    " coalesce(t.doc_id, c.doc_id), coalesce(t.source_chunk, c.chunk_id), t.start, t.end,"
    " (SELECT text FROM texts WHERE id = t.sentence)"
)
_TABLES = ("mentions", "descriptions", "occurrences")


@dataclass(frozen=True, slots=True)
class ChunkRows:
    """One chunk's part of the graph, entities by row: mentions ``(row, weight)``,
    descriptions ``(row, text)``, relation occurrences ``(subject row, object row,
    triple)``, each in the order :meth:`GraphBuilder.add` meets them; the chunk's id
    and its document's."""

    chunk_id: str
    doc_id: str
    mentions: list[tuple[int, float]]
    descriptions: list[tuple[int, str]]
    occurrences: list[tuple[int, int, Triple]]


def derive(
    doc_id: str,
    extraction: Extraction,
    owner: Callable[[str], int],
    max_per_chunk: int,
    key: Callable[[str], str],
) -> ChunkRows:
    """The rows of the chunk of document ``doc_id``, ``owner`` giving the entity row of
    a name key, ``key`` the key of a name.

    A mention's entity is the final owner of its name key, as in the builder: that key
    was either known (its owner then) or given to the entity the mention joined, and a
    key's owner never changes (``setdefault``)."""
    mentions: dict[int, float] = {}
    descriptions: dict[tuple[int, str], None] = {}
    ordered = sorted(extraction.entities, key=lambda e: not e.is_topic)
    for rank, entity in enumerate(ordered):
        if not (name := key(entity.name)):
            continue
        row = owner(name)
        if entity.is_topic or rank < max_per_chunk:
            weight = TOPIC_WEIGHT if entity.is_topic else MENTION_WEIGHT
            mentions[row] = max(weight, mentions.get(row, 0.0))
        if entity.description:
            descriptions.setdefault((row, entity.description), None)
    occurrences = []
    for triple in extraction.triples:
        subject, obj = key(triple.subject), key(triple.object)
        if subject and obj and (ends := (owner(subject), owner(obj)))[0] != ends[1]:
            occurrences.append((*ends, triple))
    chunk_id = extraction.chunk_id
    return ChunkRows(chunk_id, doc_id, list(mentions.items()), list(descriptions), occurrences)


def delete(conn: sqlite3.Connection, chunk_ids: Sequence[str]) -> None:
    """Forget the rows of ``chunk_ids``, and the texts no other row refers to."""
    gone: Counter[int] = Counter()
    chunks = [(key64(c),) for c in chunk_ids]
    for chunk in chunks:
        for refs in (
            conn.execute("SELECT text FROM descriptions WHERE chunk = ?", chunk),
            conn.execute("SELECT description, sentence FROM occurrences WHERE chunk = ?", chunk),
        ):
            gone.update(i for row in refs for i in row if i is not None)
    for table in _TABLES:
        conn.executemany(f"DELETE FROM {table} WHERE chunk = ?", chunks)
    conn.executemany("UPDATE texts SET refs = refs - ? WHERE id = ?", _swapped(gone))
    conn.executemany("DELETE FROM texts WHERE id = ? AND refs <= 0", ((i,) for i in gone))


def insert(conn: sqlite3.Connection, rows: Iterable[ChunkRows]) -> None:
    """Store chunks' rows (their old rows deleted first)."""
    rows = list(rows)
    keys = [key64(r.chunk_id) for r in rows]
    texts = _Texts()
    conn.executemany(
        "INSERT INTO mentions VALUES (?, ?, ?, ?)",
        (
            (c, i, e, w)
            for c, r in zip(keys, rows, strict=True)
            for i, (e, w) in enumerate(r.mentions)
        ),
    )
    conn.executemany(
        "INSERT INTO descriptions VALUES (?, ?, ?, ?)",
        (
            (c, i, e, texts.id(t))
            for c, r in zip(keys, rows, strict=True)
            for i, (e, t) in enumerate(r.descriptions)
        ),
    )
    conn.executemany(
        "INSERT INTO occurrences VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            (c, i, key64(t.id), s, o, *_columns(t, texts, r))
            for c, r in zip(keys, rows, strict=True)
            for i, (s, o, t) in enumerate(r.occurrences)
        ),
    )
    conn.executemany(
        "INSERT INTO texts VALUES (?, ?, ?)"
        " ON CONFLICT (id) DO UPDATE SET refs = refs + excluded.refs",
        ((i, texts.text[i], n) for i, n in texts.refs.items()),
    )


class _Texts:
    """The texts an insert refers to, by id, with how many rows refer to each."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.text: dict[int, str] = {}
        self.refs: Counter[int] = Counter()

    def id(self, text: str) -> int:
        """``text``'s id (the first 8 bytes of its BLAKE2b digest, signed), counted."""
        found = self.ids.get(text)
        if found is None:
            found = self.ids[text] = key64(text)
            self.text[found] = text
        self.refs[found] += 1
        return found


def _swapped(counts: Counter[int]) -> Iterable[tuple[int, int]]:
    return ((n, i) for i, n in counts.items())


def _columns(t: Triple, texts: _Texts, own: ChunkRows) -> tuple[Any, ...]:
    p = t.provenance
    if p is None:
        where: tuple[Any, ...] = (None,) * 5
    else:  # the document and chunk left out where they are the occurrence's own
        doc_id = None if p.doc_id == own.doc_id else p.doc_id
        chunk_id = None if p.chunk_id == own.chunk_id else p.chunk_id
        where = (doc_id, chunk_id, p.start, p.end, texts.id(p.sentence))
    same = p is not None and p.sentence == t.description
    description = None if same else texts.id(t.description)
    return (t.subject, t.predicate, t.object, description, *where)


def _triple(row: Sequence[Any]) -> Triple:
    s, p, o, description, doc_id, chunk_id, start, end, sentence = row
    where = None if sentence is None else Provenance(doc_id, chunk_id, start, end, sentence)
    return Triple(s, p, o, sentence if description is None else description, where)


def _in_order(conn: sqlite3.Connection, table: str, columns: str) -> sqlite3.Cursor:
    """``columns`` of ``table`` (alias ``t``) in index order."""
    return conn.execute(
        f"SELECT c.chunk_id, {columns} FROM {table} t JOIN chunks c USING (chunk)"
        " ORDER BY c.doc_id, c.idx, t.seq"
    )


def assemble(
    conn: sqlite3.Connection,
    entities: list[EntityRecord],
    position: dict[int, int],
    chunk_ids: Sequence[str],
    store: GraphStore | None,
) -> KnowledgeGraph:
    """The graph of the stored rows, ``position`` giving each entity row's place in
    ``entities``: the first occurrence of each triple id kept, as the builder does."""
    mentions = {
        (c, position[e]): w for c, e, w in _in_order(conn, "mentions", "t.entity, t.weight")
    }
    descriptions = [
        DescriptionRecord(position[e], text, c)
        for c, e, text in _in_order(
            conn, "descriptions", "t.entity, (SELECT text FROM texts WHERE id = t.text)"
        )
    ]
    kept: dict[int, tuple[int, int, Triple]] = {}
    for _, triple, s, o, *row in _in_order(
        conn, "occurrences", f"t.triple, t.subject, t.object, {_TRIPLE_COLUMNS}"
    ):
        if triple not in kept:
            kept[triple] = (position[s], position[o], _triple(row))
    relations = [t for _, _, t in kept.values()]
    ends = [(s, o) for s, o, _ in kept.values()]
    builder = GraphBuilder.of(entities, descriptions, relations, ends, mentions, chunk_ids)
    return builder.build(chunk_ids, store=store)
