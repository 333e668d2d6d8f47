"""What each chunk adds to the graph once its mentions are resolved, kept per chunk in
the entity-resolution state (:mod:`.incremental`), so an update derives again only the
chunks it replayed.

:meth:`GraphBuilder.add` gives a chunk's mentions (its entities by first occurrence,
the topic's weight or a mention's, ranks past the per-chunk cap left out), its
descriptions (deduplicated by entity and text) and its relation occurrences (a triple
whose ends are two entities). Only which occurrence of a triple id is kept (the first
in index order) crosses chunks; :func:`assemble` settles it.

Texts are referred to by id (:func:`~quillian.types.key64` of the text) and not stored
here at all: each is in its chunk's stored extraction, whose compact form lists its
descriptions and sentences once (:func:`~.compact.extraction_texts`), and the graph
tables hold those their rows refer to. A sentence naming many entities is the
provenance of every relation among them, and was the bulk of the state when each
occurrence carried its own copy (1.28 of 1.67 GB on the 20 MB text of docs/scale.md);
kept once in a table of texts, it was still a second copy of the extractions' (12 MB of
that text's 78 MB state).
"""

from __future__ import annotations

import functools
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
from quillian.components.graph.compact import extraction_texts
from quillian.stores.protocols import GraphStore
from quillian.types import Provenance, Triple, key64

__all__ = ["SCHEMA", "ChunkRows", "assemble", "delete", "derive", "insert"]

SCHEMA = """
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
#: to its chunk ``c``), its texts by id (``sentence`` NULL: no provenance;
#: ``description`` NULL: the sentence's text).
_TRIPLE_COLUMNS = (
    "t.s, t.p, t.o, t.description, coalesce(t.doc_id, c.doc_id),"
    " coalesce(t.source_chunk, c.chunk_id), t.start, t.end, t.sentence"
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
    """Forget the rows of ``chunk_ids``."""
    chunks = [(key64(c),) for c in chunk_ids]
    for table in _TABLES:
        conn.executemany(f"DELETE FROM {table} WHERE chunk = ?", chunks)


def insert(conn: sqlite3.Connection, rows: Iterable[ChunkRows]) -> None:
    """Store chunks' rows (their old rows deleted first)."""
    rows = list(rows)
    keys = [key64(r.chunk_id) for r in rows]
    text_id = functools.lru_cache(maxsize=4096)(key64)  # a sentence names many pairs
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
            (c, i, e, text_id(t))
            for c, r in zip(keys, rows, strict=True)
            for i, (e, t) in enumerate(r.descriptions)
        ),
    )
    conn.executemany(
        "INSERT INTO occurrences VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            (c, i, key64(t.id), s, o, *_columns(t, text_id, r))
            for c, r in zip(keys, rows, strict=True)
            for i, (s, o, t) in enumerate(r.occurrences)
        ),
    )


def _columns(t: Triple, text_id: Callable[[str], int], own: ChunkRows) -> tuple[Any, ...]:
    p = t.provenance
    if p is None:
        where: tuple[Any, ...] = (None,) * 5
    else:  # the document and chunk left out where they are the occurrence's own
        doc_id = None if p.doc_id == own.doc_id else p.doc_id
        chunk_id = None if p.chunk_id == own.chunk_id else p.chunk_id
        where = (doc_id, chunk_id, p.start, p.end, text_id(p.sentence))
    same = p is not None and p.sentence == t.description
    description = None if same else text_id(t.description)
    return (t.subject, t.predicate, t.object, description, *where)


def _triple(row: Sequence[Any], text: Callable[[int], str]) -> Triple:
    s, p, o, description, doc_id, chunk_id, start, end, sentence = row
    if sentence is None:
        return Triple(s, p, o, text(description), None)
    said = text(sentence)
    told = said if description is None else text(description)
    return Triple(s, p, o, told, Provenance(doc_id, chunk_id, start, end, said))


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
    ``entities``: the first occurrence of each triple id kept, as the builder does. The
    rows' texts are read from the chunks' stored extractions (every one: this is
    linear in the corpus anyway)."""
    texts = {
        key64(t): t
        for (raw,) in conn.execute("SELECT extraction FROM chunks")
        for t in extraction_texts(raw)
    }
    mentions = {
        (c, position[e]): w for c, e, w in _in_order(conn, "mentions", "t.entity, t.weight")
    }
    descriptions = [
        DescriptionRecord(position[e], texts[text], c)
        for c, e, text in _in_order(conn, "descriptions", "t.entity, t.text")
    ]
    kept: dict[int, tuple[int, int, Triple]] = {}
    for _, triple, s, o, *row in _in_order(
        conn, "occurrences", f"t.triple, t.subject, t.object, {_TRIPLE_COLUMNS}"
    ):
        if triple not in kept:
            kept[triple] = (position[s], position[o], _triple(row, texts.__getitem__))
    relations = [t for _, _, t in kept.values()]
    ends = [(s, o) for s, o, _ in kept.values()]
    builder = GraphBuilder.of(entities, descriptions, relations, ends, mentions, chunk_ids)
    return builder.build(chunk_ids, store=store)
