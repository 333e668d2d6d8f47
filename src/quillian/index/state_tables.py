"""The graph stage's outputs written straight from the entity-resolution state.

:func:`~quillian.index.tables.save_tables` writes ``tables/`` from a
:class:`~quillian.components.graph.builder.KnowledgeGraph` held in memory, a Python
object per entity, description and relation. :func:`save_state_tables` writes the same
tables, arrays and graph snapshot from the rows an
:class:`~quillian.components.graph.incremental.ResolutionState` keeps per chunk and per
entity: the state database is attached to the new tables database and the tables are
filled by ``INSERT ... SELECT`` (positions by window functions in index order, the first
occurrence of each triple id kept), the snapshot and the derived arrays by numpy over
the few integer columns read back. What only Python computes (an entity's node id, its
lexicon keys, whether it is a literal) the state computed when a replay made the entity.

Python still passes over the chunks (their texts and titles are not in the state) and
the descriptions (a description's node id hashes its entity's position, which any
earlier entity moves).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.components.graph.builder import GraphEdges, GraphShape, graph_edges, write_graph
from quillian.components.graph.incremental import ResolutionState
from quillian.components.retrieval import derived
from quillian.components.retrieval.seeding import lexicon_keys, page_aliases
from quillian.errors import InputError
from quillian.index.artifacts import replace_dir
from quillian.index.tables import DDL, FINGERPRINT, IN_CHUNK, TABLES_DB, fingerprint
from quillian.stores.protocols import GraphStore
from quillian.stores.snapshot import GraphSnapshot
from quillian.types import Chunk, stable_ids

__all__ = ["save_state_tables"]

#: Working tables, in the connection's temporary database: the chunks by position,
#: each entity row's position, the distinct texts, the kept relations by position. In
#: a file, so a large corpus's do not stay in memory (as fast at 20k passages).
_TEMP = """
PRAGMA temp_store = FILE;
CREATE TEMP TABLE chunk_pos (id TEXT PRIMARY KEY, pos INTEGER NOT NULL,
    title TEXT NOT NULL, text TEXT NOT NULL);
CREATE TEMP TABLE ent (row INTEGER PRIMARY KEY, pos INTEGER NOT NULL);
CREATE TEMP TABLE corder (chunk_id TEXT PRIMARY KEY, ord INTEGER NOT NULL) WITHOUT ROWID;
CREATE TEMP TABLE tx (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
CREATE TEMP TABLE rel (pos INTEGER PRIMARY KEY, subject INTEGER NOT NULL,
    object INTEGER NOT NULL, s TEXT, p TEXT, o TEXT, description INTEGER, doc_id TEXT,
    source_chunk TEXT, start INTEGER, end INTEGER, sentence INTEGER, chunk INTEGER NOT NULL,
    in_chunk INTEGER NOT NULL);
CREATE TEMP TABLE kept (pos INTEGER PRIMARY KEY, chunk_id TEXT NOT NULL,
    seq INTEGER NOT NULL);
CREATE TEMP TABLE titled (key TEXT PRIMARY KEY, entity INTEGER NOT NULL);
"""

#: Entity positions (the creating mentions' order), and each stored chunk's place in
#: index order (so no join below reads the state's chunk rows, which hold extractions).
_ENTITIES = """
INSERT INTO ent SELECT row, ROW_NUMBER() OVER (ORDER BY doc_id, idx, seq) - 1
FROM st.entities
"""
_CHUNK_ORDER = """
INSERT INTO corder SELECT chunk_id, ROW_NUMBER() OVER (ORDER BY doc_id, idx) FROM st.chunks
"""

#: The first occurrence of each triple id in index order, numbered in that order (by
#: its key alone: the rows are wide), then the kept rows with their ends by position,
#: their chunk's position (-1: no provenance, or a chunk not indexed) and whether their
#: sentence is that chunk's text between the offsets. Texts stay ids of the state's
#: ``texts`` (a relation's description: its own, else its sentence's).
_RELATIONS = (
    """INSERT INTO kept
    SELECT ROW_NUMBER() OVER (ORDER BY ord, seq) - 1, chunk_id, seq FROM (
        SELECT o.chunk_id, o.seq, c.ord, ROW_NUMBER() OVER (
            PARTITION BY o.triple_id ORDER BY c.ord, o.seq) AS nth
        FROM st.occurrences o JOIN corder c USING (chunk_id)
    ) WHERE nth = 1""",
    """INSERT INTO rel
    SELECT k.pos, es.pos, eo.pos, o.s, o.p, o.o, coalesce(o.description, o.sentence),
        o.doc_id, o.source_chunk,
        o.start, o.end, o.sentence,
        CASE WHEN o.doc_id IS NULL THEN -1 ELSE coalesce(cp.pos, -1) END,
        o.doc_id IS NOT NULL AND ts.text != '' AND cp.pos IS NOT NULL AND o.start >= 0
            AND o.end >= o.start
            AND substr(cp.text, o.start + 1, o.end - o.start) = ts.text
    FROM kept k
    JOIN st.occurrences o ON o.chunk_id = k.chunk_id AND o.seq = k.seq
    LEFT JOIN st.texts ts ON ts.id = o.sentence
    JOIN ent es ON es.row = o.subject
    JOIN ent eo ON eo.row = o.object
    LEFT JOIN chunk_pos cp ON cp.id = o.source_chunk""",
)

#: Where the texts are (column ``t``); an empty one is stored as no text.
_TEXTS = (
    "SELECT title AS t FROM chunk_pos",
    "SELECT text AS t FROM chunk_pos",
    "SELECT x.text AS t FROM st.descriptions d JOIN st.texts x ON x.id = d.text",
    "SELECT x.text AS t FROM rel r JOIN st.texts x ON x.id = r.description",
    "SELECT x.text AS t FROM rel r JOIN st.texts x ON x.id = r.sentence"
    " WHERE r.doc_id IS NOT NULL AND NOT r.in_chunk",
)

_TABLES = (
    "INSERT INTO texts SELECT id, text FROM tx",
    """INSERT INTO chunks SELECT cp.pos, cp.id, tt.id, tb.id FROM chunk_pos cp
    LEFT JOIN tx tt ON tt.text = cp.title LEFT JOIN tx tb ON tb.text = cp.text""",
    """INSERT INTO entities SELECT e.pos, s.name, s.type, s.aliases
    FROM ent e JOIN st.entities s ON s.row = e.row""",
    """INSERT INTO descriptions
    SELECT ROW_NUMBER() OVER (ORDER BY c.ord, d.seq) - 1, e.pos, t.id, d.chunk_id
    FROM st.descriptions d JOIN corder c USING (chunk_id)
    JOIN ent e ON e.row = d.entity JOIN st.texts x ON x.id = d.text
    JOIN tx t ON t.text = x.text""",
    # a source: a (document, chunk id, chunk) some relation reads, numbered by its first
    """CREATE TEMP TABLE src AS
    SELECT ROW_NUMBER() OVER (ORDER BY min(pos)) - 1 AS id, doc_id, source_chunk, chunk
    FROM rel WHERE doc_id IS NOT NULL GROUP BY doc_id, source_chunk, chunk""",
    "CREATE INDEX temp.src_key ON src (doc_id, source_chunk, chunk)",
    "INSERT INTO sources SELECT id, doc_id, source_chunk, chunk FROM src",
    f"""INSERT INTO relations SELECT r.pos, r.s, r.p, r.o, td.id, src.id, r.start, r.end,
        CASE WHEN r.doc_id IS NULL OR xs.text = '' THEN NULL
            WHEN r.in_chunk THEN {IN_CHUNK} ELSE ts.id END
    FROM rel r LEFT JOIN st.texts xd ON xd.id = r.description
    LEFT JOIN tx td ON td.text = xd.text
    LEFT JOIN src ON src.doc_id = r.doc_id AND src.source_chunk = r.source_chunk
        AND src.chunk = r.chunk
    LEFT JOIN st.texts xs ON xs.id = r.sentence
    LEFT JOIN tx ts ON ts.text = xs.text AND NOT r.in_chunk""",
    """INSERT INTO names SELECT k.key, min(e.pos), 0
    FROM st.entity_keys k JOIN ent e ON e.row = k.row GROUP BY k.key""",
    """INSERT INTO alias_ids SELECT a.id, min(e.pos)
    FROM st.entity_alias_ids a JOIN ent e ON e.row = a.row GROUP BY a.id""",
)


def save_state_tables(
    directory: Path,
    state: ResolutionState,
    chunk_ids: Sequence[str],
    chunks: Sequence[Chunk],
    store: GraphStore | None = None,
) -> GraphSnapshot:
    """Write under ``directory/tables`` what :func:`~quillian.index.tables.save_tables`
    writes for the graph :class:`~quillian.components.graph.builder.GraphBuilder` makes
    of ``state``'s extractions (``chunk_ids``: the chunk nodes' order, ``chunks``: those
    chunks), swapped in whole; returns that graph's snapshot, written to ``store``
    (empty) where one is given."""
    if state.facts.version != derived.ENTITY_FACTS.version:
        raise InputError(
            f"the resolution state keeps the entity facts {state.facts.version!r}, not"
            f" {derived.ENTITY_FACTS.version!r}: the tables need them"
        )
    if len(chunk_ids) != len(chunks):
        raise InputError(f"{len(chunk_ids)} chunk ids but {len(chunks)} chunks")
    written: list[GraphSnapshot] = []
    replace_dir(
        directory / "tables",
        lambda path: written.append(_write(path, state.path, chunk_ids, chunks, store)),
    )
    return written[0]


def _write(
    path: Path,
    state_path: Path,
    chunk_ids: Sequence[str],
    chunks: Sequence[Chunk],
    store: GraphStore | None,
) -> GraphSnapshot:
    db = path / Path(TABLES_DB).name
    conn = sqlite3.connect(db.absolute().as_uri(), uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = OFF")  # a new file in a folder swapped in whole
        conn.executescript(DDL + _TEMP)
        conn.execute("ATTACH DATABASE ? AS st", (state_path.absolute().as_uri() + "?mode=ro",))
        conn.execute("BEGIN")
        _fill(conn, chunk_ids, chunks)
        graph = _Graph(conn, chunk_ids)
        snapshot = write_graph(graph.node_ids, graph.edges(), store)
        pages = derived.chunk_pages(snapshot, graph.n_entities, graph.chunk_offset, len(chunk_ids))
        _titled_names(conn, pages, [c.title for c in chunks])
        counts = {
            "entities": graph.n_entities,
            "descriptions": len(graph.description_entity),
            "relations": len(graph.relation_chunk),
            "chunks": len(chunk_ids),
        }
        meta = [("counts", json.dumps(counts)), (FINGERPRINT, fingerprint(conn))]
        conn.executemany("INSERT INTO meta VALUES (?, ?)", meta)
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE st")
    finally:
        conn.close()
    for name, array in graph.arrays(snapshot, pages).items():
        np.save(path / f"{name}.npy", array)
    return snapshot


def _fill(conn: sqlite3.Connection, chunk_ids: Sequence[str], chunks: Sequence[Chunk]) -> None:
    """The tables but ``names``' titled keys and ``meta``, from the attached state."""
    conn.executemany(
        "INSERT INTO chunk_pos VALUES (?, ?, ?, ?)",
        (
            (chunk_id, pos, c.title, c.text)
            for pos, (chunk_id, c) in enumerate(zip(chunk_ids, chunks, strict=True))
        ),
    )
    conn.execute(_ENTITIES)
    conn.execute(_CHUNK_ORDER)
    for sql in _RELATIONS:
        conn.execute(sql)
    for select in _TEXTS:
        conn.execute(f"INSERT OR IGNORE INTO tx (text) SELECT t FROM ({select}) WHERE t != ''")
    for sql in _TABLES:
        conn.execute(sql)


class _Graph:
    """The columns of the written tables the snapshot and the arrays are made of."""

    def __init__(self, conn: sqlite3.Connection, chunk_ids: Sequence[str]) -> None:
        rows = conn.execute(
            "SELECT s.node_id, s.literal FROM ent e JOIN st.entities s ON s.row = e.row"
            " ORDER BY e.pos"
        ).fetchall()
        self.n_entities = len(rows)
        self.literal = np.array([r[1] for r in rows], dtype=np.bool_).reshape(-1)
        node_ids = [r[0] for r in rows]
        described = conn.execute(
            "SELECT CAST(d.entity AS TEXT), d.chunk_id, t.text FROM descriptions d"
            " JOIN texts t ON t.id = d.text ORDER BY d.pos"
        ).fetchall()
        node_ids += stable_ids("desc", described)  # DescriptionRecord.node_id
        self.description_entity = np.array([int(r[0]) for r in described], dtype=np.int64)
        self.chunk_offset = len(node_ids)
        node_ids.extend(chunk_ids)
        self.node_ids = node_ids
        mentions = conn.execute(
            "SELECT cp.pos, e.pos, m.weight FROM st.mentions m JOIN corder c USING (chunk_id)"
            " JOIN chunk_pos cp ON cp.id = m.chunk_id JOIN ent e ON e.row = m.entity"
            " ORDER BY c.ord, m.seq"
        ).fetchall()
        m = np.array(mentions, dtype=np.float64).reshape(-1, 3)
        self.mention_chunk = m[:, 0].astype(np.int64)
        self.mention_entity = m[:, 1].astype(np.int64)
        self.mention_weight = m[:, 2].astype(np.float32)
        r = np.array(
            conn.execute("SELECT subject, object, chunk FROM rel ORDER BY pos").fetchall(),
            dtype=np.int64,
        ).reshape(-1, 3)
        self.relation_subject = r[:, 0].copy()
        self.relation_object = r[:, 1].copy()
        self.relation_chunk = r[:, 2].copy()
        self.n_chunks = len(chunk_ids)

    def arrays(
        self, snapshot: GraphSnapshot, pages: npt.NDArray[np.int64]
    ) -> dict[str, npt.NDArray[Any]]:
        """What :func:`~quillian.index.tables.save_tables` derives and stores beside the
        tables, by file name."""
        return {
            "relation_subject": self.relation_subject.astype(np.int32),
            "relation_object": self.relation_object.astype(np.int32),
            "page_entities": pages,
            "description_entity": self.description_entity.astype(np.int32),
            "literal_entities": self.literal,
            "entity_chunks": derived.entity_chunk_counts(
                snapshot, self.n_entities, self.chunk_offset
            ),
            **derived.relation_hops(
                self.relation_subject,
                self.relation_object,
                self.n_entities,
                self.n_chunks,
                pages,
                self.relation_chunk,
            ),
        }

    def edges(self) -> GraphEdges:
        shape = GraphShape(self.n_entities, len(self.description_entity), self.n_chunks)
        return graph_edges(
            shape,
            self.mention_chunk,
            self.mention_entity,
            self.mention_weight,
            self.description_entity,
            self.relation_subject,
            self.relation_object,
        )


def _titled_names(
    conn: sqlite3.Connection, pages: npt.NDArray[np.int64], titles: Sequence[str]
) -> None:
    """Add to ``names`` the keys only the pages' base titles give
    (:func:`~quillian.components.retrieval.derived.name_keys`)."""
    found = np.flatnonzero(pages >= 0)
    titled = [(e, titles[i]) for i, e in zip(found.tolist(), pages[found].tolist(), strict=True)]
    extra = lexicon_keys(page_aliases(titled))
    conn.executemany("INSERT INTO titled VALUES (?, ?)", extra.items())
    conn.execute(
        "INSERT INTO names SELECT key, entity, 1 FROM titled"
        " WHERE key NOT IN (SELECT key FROM main.names)"
    )
