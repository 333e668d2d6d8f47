"""What each chunk adds to the graph once its mentions are resolved, kept per chunk in
the entity-resolution state (:mod:`.incremental`), so an update derives again only the
chunks it replayed.

:meth:`GraphBuilder.add` gives a chunk's mentions (its entities by first occurrence,
the topic's weight or a mention's, ranks past the per-chunk cap left out), its
descriptions (deduplicated by entity and text) and its relation occurrences (a triple
whose ends are two entities). Only which occurrence of a triple id is kept (the first
in index order) crosses chunks; :func:`assemble` settles it.

Texts are referred to by id (:func:`~quillian.types.key64` of the text) and not stored
here at all: each is in its chunk's extraction, which the state reads from the build's
linking records (:data:`~.incremental.ExtractionSource`), listing its descriptions and
sentences once (:func:`~.compact.extraction_texts`), and the graph tables hold those
their rows refer to. A sentence naming many entities is the
provenance of every relation among them, and was the bulk of the state when each
occurrence carried its own copy (1.28 of 1.67 GB on the 20 MB text of docs/scale.md);
kept once in a table of texts, it was still a second copy of the extractions' (12 MB of
that text's 78 MB state).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
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
from quillian.types import Triple, key64

__all__ = [
    "SCHEMA",
    "ChunkRows",
    "assemble",
    "delete",
    "derive",
    "insert",
    "triple_columns",
]

SCHEMA = """
CREATE TABLE mentions (chunk INTEGER NOT NULL, seq INTEGER NOT NULL,
    entity INTEGER NOT NULL, weight REAL NOT NULL, PRIMARY KEY (chunk, seq)) WITHOUT ROWID;
CREATE TABLE descriptions (chunk INTEGER NOT NULL, seq INTEGER NOT NULL,
    entity INTEGER NOT NULL, text INTEGER NOT NULL, PRIMARY KEY (chunk, seq)) WITHOUT ROWID;
CREATE TABLE occurrences (chunk INTEGER NOT NULL, seq INTEGER NOT NULL,
    triple INTEGER NOT NULL, subject INTEGER NOT NULL, object INTEGER NOT NULL,
    at INTEGER NOT NULL, PRIMARY KEY (chunk, seq)) WITHOUT ROWID;
CREATE INDEX occurrences_triple ON occurrences (triple);
"""
#: An occurrence's triple is the one at index ``at`` of its chunk's extraction:
#: its words, texts and provenance are read from there (:func:`triple_columns`), not
#: kept again in its row.
_TABLES = ("mentions", "descriptions", "occurrences")


@dataclass(frozen=True, slots=True)
class ChunkRows:
    """One chunk's part of the graph, entities by row: mentions ``(row, weight)``,
    descriptions ``(row, text)``, relation occurrences ``(subject row, object row,
    triple, its index in the extraction)``, each in the order :meth:`GraphBuilder.add`
    meets them; the chunk's id and its document's."""

    chunk_id: str
    doc_id: str
    mentions: list[tuple[int, float]]
    descriptions: list[tuple[int, str]]
    occurrences: list[tuple[int, int, Triple, int]]


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
    for at, triple in enumerate(extraction.triples):
        subject, obj = key(triple.subject), key(triple.object)
        if subject and obj and (ends := (owner(subject), owner(obj)))[0] != ends[1]:
            occurrences.append((*ends, triple, at))
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
        "INSERT INTO occurrences VALUES (?, ?, ?, ?, ?, ?)",
        (
            (c, i, key64(t.id), s, o, at)
            for c, r in zip(keys, rows, strict=True)
            for i, (s, o, t, at) in enumerate(r.occurrences)
        ),
    )


def triple_columns(
    t: Triple, doc_id: str, chunk_id: str, text_id: Callable[[str], int]
) -> tuple[Any, ...]:
    """The columns ``s, p, o, description, doc_id, source_chunk, start, end, sentence``
    of a triple of the chunk ``chunk_id`` of document ``doc_id``, its texts by id
    (``text_id``): ``sentence`` NULL where it has no provenance, ``description`` NULL
    where it is the sentence's text, ``doc_id`` and ``source_chunk`` NULL where the
    provenance names the triple's own document and chunk (as most often)."""
    p = t.provenance
    if p is None:
        where: tuple[Any, ...] = (None,) * 5
    else:
        doc = None if p.doc_id == doc_id else p.doc_id
        chunk = None if p.chunk_id == chunk_id else p.chunk_id
        where = (doc, chunk, p.start, p.end, text_id(p.sentence))
    same = p is not None and p.sentence == t.description
    description = None if same else text_id(t.description)
    return (t.subject, t.predicate, t.object, description, *where)


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
    extractions: Mapping[int, Extraction],
    store: GraphStore | None,
) -> KnowledgeGraph:
    """The graph of the stored rows, ``position`` giving each entity row's place in
    ``entities``: the first occurrence of each triple id kept, as the builder does. The
    rows' texts and triples are read from the chunks' ``extractions`` (every one, by
    chunk key: this is linear in the corpus anyway)."""
    texts = {key64(t): t for e in extractions.values() for t in extraction_texts(e)}
    mentions = {
        (c, position[e]): w for c, e, w in _in_order(conn, "mentions", "t.entity, t.weight")
    }
    descriptions = [
        DescriptionRecord(position[e], texts[text], c)
        for c, e, text in _in_order(conn, "descriptions", "t.entity, t.text")
    ]
    kept: dict[int, tuple[int, int, Triple]] = {}
    for _, triple, s, o, chunk, at in _in_order(
        conn, "occurrences", "t.triple, t.subject, t.object, t.chunk, t.at"
    ):
        if triple not in kept:
            kept[triple] = (position[s], position[o], extractions[chunk].triples[at])
    relations = [t for _, _, t in kept.values()]
    ends = [(s, o) for s, o, _ in kept.values()]
    builder = GraphBuilder.of(entities, descriptions, relations, ends, mentions, chunk_ids)
    return builder.build(chunk_ids, store=store)
