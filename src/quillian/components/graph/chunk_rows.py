"""What each chunk adds to the graph once its mentions are resolved, kept per chunk in
the entity-resolution state (:mod:`.incremental`), so an update derives again only the
chunks it replayed.

:meth:`GraphBuilder.add` gives a chunk's mentions (its entities by first occurrence,
the topic's weight or a mention's, ranks past the per-chunk cap left out), its
descriptions (deduplicated by entity and text) and its relation occurrences (a triple
whose ends are two entities). Only which occurrence of a triple id is kept (the first
in index order) crosses chunks; :func:`assemble` settles it.
"""

from __future__ import annotations

import sqlite3
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
from quillian.types import Provenance, Triple

__all__ = ["SCHEMA", "TRIPLE_COLUMNS", "ChunkRows", "assemble", "delete", "derive", "insert"]

SCHEMA = """
CREATE TABLE mentions (chunk_id TEXT NOT NULL, seq INTEGER NOT NULL,
    entity INTEGER NOT NULL, weight REAL NOT NULL, PRIMARY KEY (chunk_id, seq)) WITHOUT ROWID;
CREATE TABLE descriptions (chunk_id TEXT NOT NULL, seq INTEGER NOT NULL,
    entity INTEGER NOT NULL, text TEXT NOT NULL, PRIMARY KEY (chunk_id, seq)) WITHOUT ROWID;
CREATE TABLE occurrences (chunk_id TEXT NOT NULL, seq INTEGER NOT NULL,
    triple_id TEXT NOT NULL, subject INTEGER NOT NULL, object INTEGER NOT NULL,
    s TEXT NOT NULL, p TEXT NOT NULL, o TEXT NOT NULL, description TEXT,
    doc_id TEXT, source_chunk TEXT, start INTEGER, end INTEGER, sentence TEXT,
    PRIMARY KEY (chunk_id, seq)) WITHOUT ROWID;
"""
#: An occurrence's triple as the columns ``s`` to ``sentence`` (``doc_id`` NULL: no
#: provenance; ``description`` NULL: the same text as ``sentence``, not stored twice).
TRIPLE_COLUMNS = "s, p, o, description, doc_id, source_chunk, start, end, sentence"
_TABLES = ("mentions", "descriptions", "occurrences")


@dataclass(frozen=True, slots=True)
class ChunkRows:
    """One chunk's part of the graph, entities by row: mentions ``(row, weight)``,
    descriptions ``(row, text)``, relation occurrences ``(subject row, object row,
    triple)``, each in the order :meth:`GraphBuilder.add` meets them."""

    chunk_id: str
    mentions: list[tuple[int, float]]
    descriptions: list[tuple[int, str]]
    occurrences: list[tuple[int, int, Triple]]


def derive(
    extraction: Extraction,
    owner: Callable[[str], int],
    max_per_chunk: int,
    key: Callable[[str], str],
) -> ChunkRows:
    """The chunk's rows, ``owner`` giving the entity row of a name key, ``key`` the key
    of a name.

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
    return ChunkRows(extraction.chunk_id, list(mentions.items()), list(descriptions), occurrences)


def delete(conn: sqlite3.Connection, chunk_ids: Sequence[str]) -> None:
    """Forget the rows of ``chunk_ids``."""
    for table in _TABLES:
        conn.executemany(f"DELETE FROM {table} WHERE chunk_id = ?", ((c,) for c in chunk_ids))


def insert(conn: sqlite3.Connection, rows: Iterable[ChunkRows]) -> None:
    """Store chunks' rows (their old rows deleted first)."""
    rows = list(rows)
    conn.executemany(
        "INSERT INTO mentions VALUES (?, ?, ?, ?)",
        ((r.chunk_id, i, e, w) for r in rows for i, (e, w) in enumerate(r.mentions)),
    )
    conn.executemany(
        "INSERT INTO descriptions VALUES (?, ?, ?, ?)",
        ((r.chunk_id, i, e, t) for r in rows for i, (e, t) in enumerate(r.descriptions)),
    )
    conn.executemany(
        "INSERT INTO occurrences VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            (r.chunk_id, i, t.id, s, o, *_columns(t))
            for r in rows
            for i, (s, o, t) in enumerate(r.occurrences)
        ),
    )


def _columns(t: Triple) -> tuple[Any, ...]:
    p = t.provenance
    where = (None,) * 5 if p is None else (p.doc_id, p.chunk_id, p.start, p.end, p.sentence)
    same = p is not None and p.sentence == t.description
    return (t.subject, t.predicate, t.object, None if same else t.description, *where)


def _triple(row: Sequence[Any]) -> Triple:
    s, p, o, description, doc_id, chunk_id, start, end, sentence = row
    where = None if doc_id is None else Provenance(doc_id, chunk_id, start, end, sentence)
    return Triple(s, p, o, sentence if description is None else description, where)


def _in_order(conn: sqlite3.Connection, table: str, columns: str) -> sqlite3.Cursor:
    return conn.execute(
        f"SELECT t.chunk_id, {columns} FROM {table} t JOIN chunks c USING (chunk_id)"
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
        for c, e, text in _in_order(conn, "descriptions", "t.entity, t.text")
    ]
    kept: dict[str, tuple[int, int, Triple]] = {}
    columns = ", ".join(f"t.{c.strip()}" for c in TRIPLE_COLUMNS.split(","))
    for _, triple_id, s, o, *row in _in_order(
        conn, "occurrences", f"t.triple_id, t.subject, t.object, {columns}"
    ):
        if triple_id not in kept:
            kept[triple_id] = (position[s], position[o], _triple(row))
    relations = [t for _, _, t in kept.values()]
    ends = [(s, o) for s, o, _ in kept.values()]
    builder = GraphBuilder.of(entities, descriptions, relations, ends, mentions, chunk_ids)
    return builder.build(chunk_ids, store=store)
