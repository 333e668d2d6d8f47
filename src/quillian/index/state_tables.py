"""The graph stage's outputs written straight from the entity-resolution state, whole or
patched by what changed.

:func:`~quillian.index.tables.save_tables` writes ``tables/`` from a
:class:`~quillian.components.graph.builder.KnowledgeGraph` held in memory, a Python
object per entity, description and relation. :func:`save_state_tables` writes the same
graph from the rows an :class:`~quillian.components.graph.incremental.ResolutionState`
keeps per chunk and per entity, the state database attached to the tables database:

* **whole** (a new state, or tables the state's log does not follow): every table
  filled by ``INSERT ... SELECT`` (the first occurrence of each triple id in index
  order kept);
* **patched** (the tables the state last marked, and its log of changed chunks and
  entity rows since, :meth:`~.ResolutionState.tables_changes`): the previous
  ``graph.sqlite`` copied and only the rows of those chunks and entities, the relations
  whose triple ids they hold and the lexicon keys they name deleted and inserted again;
  texts and sources no row refers to any more are deleted (texts keep a count of their
  references). Rows are keyed by ids an update does not move (see
  :mod:`quillian.index.tables`), so the rows of other documents are not touched.

Either way the positions (index order), the snapshot and the derived arrays are then
computed by numpy from the rows' integer columns (:class:`_Graph`). Those columns are
kept beside the state (:class:`_Columns`), so a patch reads back only the rows it
wrote; a whole write reads every row's. What only Python computes (an entity's node
id, its lexicon keys, whether it is a literal) the state computed when a replay made
the entity.
The state's log is emptied only once the tables are swapped in, so a build stopped
before that is made good by the next patch (a patch is idempotent: it rewrites the rows
of the logged ids from the state as it is).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import json
import logging
import shutil
import sqlite3
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import Future
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from quillian.components.concurrency import in_thread
from quillian.components.extraction.assemble import RELATED_TO
from quillian.components.graph.builder import (
    description_node_id,
    write_graph,
)
from quillian.components.graph.chunk_rows import triple_columns
from quillian.components.graph.compact import extraction_texts
from quillian.components.graph.incremental import ResolutionState, TablesChanges
from quillian.components.retrieval import derived
from quillian.components.retrieval.seeding import lexicon_keys, page_aliases
from quillian.errors import InputError
from quillian.index.artifacts import (
    KeptInProcess,
    load_arrays,
    recall,
    remember,
    replace_dir,
    save_arrays,
    write_later,
)
from quillian.index.chunk_table import ChunkTable, rows_of
from quillian.index.distinct_texts import TextMoves
from quillian.index.graph_positions import KEPT as KEPT_GRAPH
from quillian.index.graph_positions import Changed, Entities, GraphPositions, GraphTextIds
from quillian.index.integrity import recorded_digest
from quillian.index.tables import (
    COUNTED,
    DDL,
    FINGERPRINT,
    IN_CHUNK,
    KEYED,
    LAYOUT,
    TABLES_DB,
    TITLED_INDEX,
    entity_name,
    fingerprint,
    patched_fingerprint,
    relation_words,
    save_array,
    text_functions,
    text_of,
)
from quillian.stores.embedded.files import fsync_path
from quillian.stores.embedded.row_counts import keep_counts, row_count
from quillian.stores.embedded.sqlite import wal_bytes, wal_mode
from quillian.stores.id_map import stable_bytes, stable_numbers
from quillian.stores.integrity import copy_with_digest, file_digest
from quillian.stores.packed import pack_text
from quillian.stores.protocols import GraphStore, SnapshotWriter
from quillian.stores.snapshot import GraphSnapshot, ids_as_bytes
from quillian.types import Chunk, key64

__all__ = ["COLUMNS_SUFFIX", "GraphTextIds", "columns_path", "save_state_tables"]

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: The ``meta`` key of a random id of each tables database written from a state, so no
#: two are the same file.
GENERATION = "generation"
#: What precedes a generation where the resolution state follows its tables by it
#: (tables patched in place), rather than by a digest of their bytes.
GENERATION_MARK = "generation:"
#: A database patched where it is is copied instead, its log folded in, where its
#: write-ahead log outgrows this share of its size (:func:`_log_outgrown`)...
LOG_SHARE = 0.25
#: ...and this many bytes.
LOG_FLOOR = 16 << 20
#: The suffix of the resolution state's file name that names the file of the graph's
#: integer columns beside it (:func:`columns_path`).
COLUMNS_SUFFIX = ".columns"
#: The id of the empty text (an empty description or sentence is stored as no text).
_EMPTY = key64("")
#: State chunks whose extractions are read for their texts and triples at once.
_READ_BATCH = 256

#: Working tables of a whole write, in the connection's temporary database (in a file,
#: so a large corpus's do not stay in memory): the chunks with their positions and
#: keys, each entity row's position, each stored chunk's place in index order, the kept
#: relations.
_TEMP = """
PRAGMA temp_store = FILE;
CREATE TEMP TABLE chunk_pos (id TEXT PRIMARY KEY, pos INTEGER NOT NULL,
    row INTEGER NOT NULL, title TEXT NOT NULL, title_id INTEGER NOT NULL,
    body NOT NULL);
CREATE TEMP TABLE ent (row INTEGER PRIMARY KEY, pos INTEGER NOT NULL);
CREATE TEMP TABLE corder (chunk INTEGER PRIMARY KEY, ord INTEGER NOT NULL);
CREATE TEMP TABLE kept (pos INTEGER PRIMARY KEY, chunk INTEGER NOT NULL,
    seq INTEGER NOT NULL);
"""

#: The texts counted by one step, and those that may have no reference left; the texts
#: and triples of the state's chunks read so far (the state keeps them only in its
#: chunks' extractions, :mod:`~quillian.components.graph.chunk_rows`), and the state's
#: occurrences with their triples' columns (``occ``, for those chunks).
_COUNTS = """
CREATE TEMP TABLE counted (id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
CREATE TEMP TABLE uncounted (id INTEGER PRIMARY KEY);
CREATE TEMP TABLE stexts (id INTEGER PRIMARY KEY, text TEXT NOT NULL, chunk INTEGER NOT NULL);
CREATE TEMP TABLE striples (chunk INTEGER NOT NULL, at INTEGER NOT NULL,
    s TEXT NOT NULL, p TEXT NOT NULL, o TEXT NOT NULL, description INTEGER,
    doc_id TEXT, source_chunk TEXT, start INTEGER, end INTEGER, sentence INTEGER,
    PRIMARY KEY (chunk, at)) WITHOUT ROWID;
CREATE TEMP VIEW occ AS SELECT so.chunk, so.seq, so.triple, so.subject, so.object,
    x.s, x.p, x.o, x.description, x.doc_id, x.source_chunk, x.start, x.end, x.sentence
    FROM st.occurrences so JOIN striples x ON x.chunk = so.chunk AND x.at = so.at;
"""

#: Entity positions (the creating mentions' order), each stored chunk's place in index
#: order, and the first occurrence of each triple id in that order.
_ORDER = (
    "INSERT INTO ent SELECT row, ROW_NUMBER() OVER (ORDER BY doc_id, idx, seq) - 1"
    " FROM st.entities",
    "INSERT INTO corder SELECT chunk, ROW_NUMBER() OVER (ORDER BY doc_id, idx) FROM st.chunks",
    """INSERT INTO kept
    SELECT ROW_NUMBER() OVER (ORDER BY ord, seq) - 1, chunk, seq FROM (
        SELECT o.chunk, o.seq, c.ord, ROW_NUMBER() OVER (
            PARTITION BY o.triple ORDER BY c.ord, o.seq) AS nth
        FROM st.occurrences o JOIN corder c USING (chunk)
    ) WHERE nth = 1""",
)

#: The document and chunk the provenance of the state's occurrence ``o`` names (NULL
#: in the state where they are its own: see :mod:`~quillian.components.graph.chunk_rows`).
_SOURCE_DOC = "coalesce(o.doc_id, (SELECT sc.doc_id FROM st.chunks sc WHERE sc.chunk = o.chunk))"
_SOURCE_CHUNK = (
    "coalesce(o.source_chunk, (SELECT sc.chunk_id FROM st.chunks sc WHERE sc.chunk = o.chunk))"
)
#: The sources of the occurrences ``{occurrences}`` (alias ``o``) that have a provenance.
_SOURCES = (
    "INSERT OR IGNORE INTO sources (doc_id, chunk_id) SELECT DISTINCT "
    + _SOURCE_DOC
    + ", "
    + _SOURCE_CHUNK
    + " FROM {occurrences} WHERE o.sentence IS NOT NULL"
)

#: One relation row from the occurrence ``o`` (its provenance chunk ``cp`` where that
#: chunk is indexed, its source ``src``; its sentence is read from the chunk where the
#: text between its offsets has the sentence's id; its words NULL where its entities'
#: names and :data:`~quillian.components.extraction.assemble.RELATED_TO` imply them,
#: :func:`~quillian.index.tables.relation_words`, the entities written first), given the
#: row key (``{row}``) and the rows the occurrences come from (``{occurrences}``).
_RELATION = """
    SELECT {row}, nullif(o.s, {subject_name}), nullif(o.p, :related),
        nullif(o.o, {object_name}),
        CASE WHEN coalesce(o.description, o.sentence) = :empty THEN NULL
            ELSE coalesce(o.description, o.sentence) END,
        src.id, o.start, o.end,
        CASE WHEN o.sentence IS NULL OR o.sentence = :empty THEN NULL
            WHEN cp.row IS NOT NULL AND o.start >= 0 AND o.end >= o.start
                AND key64(substr(chunk_text(cp.row, cp.body), o.start + 1, o.end - o.start))
                    = o.sentence
            THEN {in_chunk} ELSE o.sentence END,
        o.triple, o.chunk, o.seq, o.subject, o.object, cp.row
    FROM {occurrences}
    LEFT JOIN main.chunks cp ON cp.row = coalesce(key64(o.source_chunk), o.chunk)
        AND o.sentence IS NOT NULL
    LEFT JOIN main.sources src ON src.doc_id = {source_doc} AND src.chunk_id = {source_chunk}
        AND o.sentence IS NOT NULL
"""

#: Text references of the rows just inserted into a table (``{where}`` picks them), for
#: the counts in ``texts``: chunk titles, description texts, relation texts and
#: sentences (not those read from their chunk). A chunk's text is its row's own.
_TEXT_REFS = {
    "chunks": ("SELECT title AS id FROM main.chunks {where}",),
    "descriptions": ("SELECT text AS id FROM main.descriptions {where}",),
    "relations": (
        "SELECT description AS id FROM main.relations {where}",
        "SELECT sentence FROM main.relations {where}",
    ),
}


def save_state_tables(
    directory: Path,
    state: ResolutionState,
    chunk_ids: Sequence[str],
    chunks: Sequence[Chunk],
    store: GraphStore | None = None,
    *,
    retitled: Collection[str] | None = None,
    moved: tuple[Collection[str], Collection[str]] | None = None,
    text_ids_into: list[GraphTextIds] | None = None,
    behind: list[Future[object]] | None = None,
    in_place: bool = False,
) -> GraphSnapshot:
    """Write under ``directory/tables`` the graph
    :class:`~quillian.components.graph.builder.GraphBuilder` makes of ``state``'s
    extractions (``chunk_ids``: the chunk nodes' order, ``chunks``: those chunks),
    patched from the tables there where the state's log follows them, else whole;
    swapped in whole, then marked in the state. Returns that graph's snapshot, written
    to ``store`` (empty) where one is given.

    ``retitled``: the chunks whose title changed since the build the state's log
    follows (:attr:`~quillian.index.linking.ExtractionDelta.retitled`, of the delta the
    state followed), so a patch compares only their titles; None: every chunk's title
    is compared with the one the tables hold. ``moved``: the chunks that came and went
    since that build (``added``, ``removed`` of the same delta); with ``retitled``, a
    patch reads only their rows of the tables' chunks, not every row (where the tables
    do not hold what they say, a warning, and every row is compared).
    ``text_ids_into``: where given, the graph's text ids by position are appended to it
    (what the embedding stage keys, so it need not read them from the tables).
    ``behind``: where given, the snapshot's write to ``store`` is appended to it as a
    future rather than waited for before the tables are swapped in (for a store whose
    readers read the graph and the tables of a generation the build marks last: the
    caller waits for it, and closes the store after it, before the build is complete);
    else it ends before they are.

    ``in_place`` (a store whose readers hold a read transaction of the tables database,
    :attr:`~quillian.index.storage.Storage.tables_in_place`): the database is kept in
    SQLite's write-ahead-log mode and, where the state's log follows it, patched where
    it is in one transaction, not copied into a new folder (the arrays beside it each
    replaced whole); the state then follows it by its :data:`GENERATION`, not by a
    digest of its bytes (see :func:`_follows_in_place`). Where readers' snapshots kept
    the log from being copied back, the file alone lacks the build's pages; a store
    that sends its files elsewhere sends the database as its readers see it
    (:func:`~quillian.stores.embedded.wal_image.wal_image`), not a copy made here."""
    if state.facts.version != derived.ENTITY_FACTS.version:
        raise InputError(
            f"the resolution state keeps the entity facts {state.facts.version!r}, not"
            f" {derived.ENTITY_FACTS.version!r}: the tables need them"
        )
    if len(chunk_ids) != len(chunks):
        raise InputError(f"{len(chunk_ids)} chunk ids but {len(chunks)} chunks")
    table = ChunkTable.of(chunks)
    changes = state.tables_changes()
    kept = columns_path(state.path)
    before = _Columns.load(kept, changes.tables) if changes.tables else None
    written: list[tuple[GraphSnapshot, str, _Columns, GraphPositions]] = []

    previous = directory / TABLES_DB
    patchable = in_place and _follows_in_place(previous, changes.tables)
    if patchable and not _log_outgrown(previous):
        for left in (directory / "tables").glob("*.tmp"):  # by an update that stopped
            left.unlink(missing_ok=True)
        writer = _Writer(directory / "tables", state, chunk_ids, table, retitled, moved)
        written.append(writer.run(None, None, changes, store, before, behind, in_place=True))
    else:
        # the tables' digest as the last build recorded it, where they are unchanged since
        known = None if patchable or not changes.tables else recorded_digest(directory, TABLES_DB)

        def write(path: Path) -> None:
            writer = _Writer(path, state, chunk_ids, table, retitled, moved)
            written.append(
                writer.run(
                    previous,
                    known,
                    changes,
                    store,
                    before,
                    behind,
                    in_place=in_place,
                    folded=patchable,
                )
            )

        replace_dir(directory / "tables", write)
    snapshot, digest, columns, graph = written[0]
    if text_ids_into is not None:
        rows_moved, follows = graph.row_moves, changes.tables
        text_moves = TextMoves(*rows_moved, follows) if rows_moved and follows else None
        text_ids_into.append(dataclasses.replace(graph.text_ids, tables=digest, moves=text_moves))
    state.mark_tables(digest)
    KEPT_GRAPH.keep(state.path, digest, (graph, snapshot))  # for this process's next patch

    def save() -> None:
        try:
            columns.save(kept, digest)
        except OSError as exc:  # the tables are written: the next patch reads every row
            logger.warning("graph columns not kept at %s (%s)", kept, exc)

    # for this process's next patch at once, the file once updates pause
    write_later(kept, save, *columns.kept(digest))
    return snapshot


def columns_path(state_path: Path) -> Path:
    """Where the graph's integer columns are kept beside the resolution state at
    ``state_path``: machine-local like it (see :class:`_Columns`)."""
    return state_path.with_name(state_path.name + COLUMNS_SUFFIX)


class _Writer:
    """One tables database written from the state, whole or patched, with its arrays."""

    def __init__(
        self,
        path: Path,
        state: ResolutionState,
        chunk_ids: Sequence[str],
        chunks: ChunkTable,
        retitled: Collection[str] | None = None,
        moved: tuple[Collection[str], Collection[str]] | None = None,
    ) -> None:
        self.path, self.state, self.state_path = path, state, state.path
        self.chunk_ids, self.chunks, self.retitled = chunk_ids, chunks, retitled
        self.moved = moved
        self.chunks_read: set[int] = set()  # the state's chunks in stexts and striples
        same = chunk_ids is chunks.ids or list(chunk_ids) == chunks.ids
        self.chunk_rows = chunks.rows if same else rows_of(chunk_ids)

    def run(
        self,
        previous: Path | None,
        previous_digest: str | None,
        changes: TablesChanges,
        store: GraphStore | None,
        before: _Columns | None,
        behind: list[Future[object]] | None = None,
        *,
        in_place: bool = False,
        folded: bool = False,
    ) -> tuple[GraphSnapshot, str, _Columns, GraphPositions]:
        """Write the database and arrays; returns the snapshot, the mark the state
        follows the database by (its digest, or with ``in_place`` its generation), its
        columns and the graph's positions (to keep for the next patch). The
        ``previous`` database is patched only when it is the one the state's log
        follows, byte for byte (not damaged, not another build's), from its columns
        kept ``before`` where there are some; ``previous`` None: the database already
        here is patched where it is (``in_place``, :func:`_follows_in_place` checked).
        ``previous_digest``: its digest where known, else it is read as it is copied.
        ``in_place``: the database is left in write-ahead-log mode and marked by its
        generation. ``folded``: ``previous`` is a database patched where it is that the
        state follows (:func:`_follows_in_place`), copied with its log folded in
        (:func:`_log_outgrown`) by SQLite's backup, not byte for byte. ``behind``:
        where given, the snapshot's write to ``store`` (in a thread of its own) is
        appended to it, not waited for, once the tables are written."""
        db = self.path / Path(TABLES_DB).name
        patch = previous is None
        flushing: threading.Thread | None = None
        if previous is not None and changes.tables:
            if folded:  # the state follows it by its generation, checked
                patch = _backup(previous, db)
            elif previous_digest is None:
                patch = copy_with_digest(previous, db) == changes.tables
                if not patch and db.is_file():  # marked by a build that hashed with BLAKE2b
                    patch = file_digest(db, "blake2b") == changes.tables
            elif patch := previous_digest == changes.tables:
                shutil.copyfile(previous, db)
            why = f"{previous} is not the state's"
            if patch and (layout := _layout(db)) != KEYED:  # patched in this layout only
                patch, why = False, f"{previous} has layout {layout}"
            if not patch:
                db.unlink(missing_ok=True)
                logger.info("graph tables written whole: %s", why)
            else:  # the copy on its way to the disk while the patch runs: the commit's
                # sync then waits for the pages the patch wrote (0.035 s of an add at
                # 100k passages where it waited for the whole copy)
                flushing = threading.Thread(target=fsync_path, args=(db,), name="sync tables")
                flushing.start()
        writing: Future[object] | None = None  # the snapshot's write, while the rest goes on
        try:
            conn = sqlite3.connect(db.absolute().as_uri(), uri=True, isolation_level=None)
            try:
                conn.create_function("key64", 1, _key64, deterministic=True)
                text_functions(conn)  # chunk_text: a chunk's text from its row's body
                conn.create_function("desc_node", 3, description_node_id, deterministic=True)
                if previous is not None:  # a file in a folder swapped in whole
                    conn.execute("PRAGMA journal_mode = OFF")
                if not patch:
                    _script(conn, DDL + _TEMP)
                else:
                    conn.execute("PRAGMA temp_store = FILE")
                conn.execute(
                    "ATTACH DATABASE ? AS st", (self.state_path.absolute().as_uri() + "?mode=ro",)
                )
                # in place: the write lock taken at once (readers go on from their
                # snapshots, SQLite's write-ahead log keeping them)
                conn.execute("BEGIN IMMEDIATE" if previous is None else "BEGIN")
                _script(conn, _COUNTS)
                carried = None
                if not patch:
                    self._fill(conn)
                    keep_counts(conn, COUNTED)
                    touched: list[str] | None = None
                    columns = _Columns.read(conn)
                else:
                    keep_counts(conn, COUNTED)  # tables written before: counted once here
                    touched = self._patch(conn, changes)
                    changed = _Columns.changed(conn)
                    if carried := self._carried(conn, changed, changes.tables):
                        columns = _Columns.of(carried[0])
                    else:
                        columns = (before and before.patched(conn, changed)) or _Columns.read(conn)
                graph, snapshot, writing = self._graph(columns, carried, store)
                if graph.whole:  # the columns kept are the positions' own: one copy in memory
                    columns = _Columns.of(graph)
                pages = graph.pages()
                titled = _titled_names(
                    conn,
                    pages,
                    self.chunks,
                    graph.entity_order,
                    KEPT_TITLED.get(self.state_path, changes.tables) if patch else None,
                )
                generation = self._meta(conn, graph, touched)
                conn.execute("COMMIT")
                conn.execute("DETACH DATABASE st")
                if not patch:  # written whole, rows keyed by hashes: its pages packed again
                    conn.execute("VACUUM")
                if in_place:
                    _settle_log(conn)
            finally:
                conn.close()
                if flushing is not None:
                    flushing.join()
            for name, array in graph.arrays(pages).items():
                save_array(self.path, name, array)
            mark = GENERATION_MARK + generation if in_place else file_digest(db)
            KEPT_TITLED.keep(self.state_path, mark, titled)  # for this process's next patch
        except BaseException:
            if writing is not None:  # the snapshot's write ended before the folder is left
                writing.exception()
            raise
        if writing is not None:
            if behind is not None:  # the build waits for it before it is complete
                behind.append(writing)
            else:  # ended before the folder is swapped in; raises what the write raised
                writing.result()
        return snapshot.result(), mark, columns, graph

    def _graph(
        self,
        columns: _Columns,
        carried: tuple[GraphPositions, Callable[[], GraphSnapshot]] | None,
        store: GraphStore | None,
    ) -> tuple[GraphPositions, Future[GraphSnapshot], Future[object] | None]:
        """The graph's positions and its snapshot (written to ``store`` where one is
        given): those ``carried`` from the last build's, else made from ``columns``.
        A store that takes a snapshot whole gets it from a thread of its own, which
        makes it (a carry of the last one's arrays, or the snapshot of every edge) and
        writes it, and whose future is returned: its copies, its files' writes and
        syncs, and on PostgreSQL its sending, run while this thread finishes the tables
        (an add at 100k passages 0.295 -> 0.256 s, docs/scale.md, stop 86; the carry
        moved there too, a delete's growth from 20k 1.76x -> 1.65x over every round
        taken, stop 93). The snapshot's own future is set as soon as it is made:
        :meth:`run` returns it."""
        if carried is not None:
            graph, make = carried
        else:
            graph = GraphPositions.read(columns, self.chunk_ids, self.chunk_rows)
            if store is not None and not isinstance(store, SnapshotWriter):
                return graph, _done(write_graph(graph.node_ids, graph.edges(), store)), None
            make = functools.partial(_snapshot_of, graph)
        if isinstance(store, SnapshotWriter):
            made: Future[GraphSnapshot] = Future()
            made.set_running_or_notify_cancel()

            def make_and_write() -> object:
                try:
                    built = make()
                except BaseException as exc:
                    made.set_exception(exc)
                    raise
                made.set_result(built)
                return store.write_snapshot(built)

            return graph, made, in_thread(make_and_write, name="write graph")
        if store is not None:  # a store that takes nodes and edges by id
            return graph, _done(write_graph(graph.node_ids, graph.edges(), store)), None
        return graph, _done(make()), None

    def _carried(
        self, conn: sqlite3.Connection, changed: Changed, previous: str | None
    ) -> tuple[GraphPositions, Callable[[], GraphSnapshot]] | None:
        """The graph's positions carried from those this process kept for the tables
        of digest ``previous`` by what the patch ``changed``, and what makes their
        snapshot (the kept one carried, or where its edges disagree, a warning and the
        snapshot of every edge); None where there are none kept for them, or they do
        not carry (a warning where the rows' counts disagree)."""
        kept = KEPT_GRAPH.get(self.state_path, previous) if previous else None
        if kept is None:
            return None
        before, snapshot = kept
        entities = _patched_entities(conn, before.entities, changed)
        if entities is None:
            return None
        moves = self.chunks.catalog.moves if self.chunks.catalog is not None else None
        chunk_moves = None
        if moves is not None and self.chunk_rows is self.chunks.rows:
            chunk_moves = moves.every()
        carried = before.carried(entities, changed, self.chunk_ids, self.chunk_rows, chunk_moves)
        if carried is None:
            return None
        after, nodes = carried
        if not _Columns.of(after).count(conn):
            return None

        def made() -> GraphSnapshot:
            e = after.edges(nodes.changed)
            try:
                return snapshot.carried(
                    after.node_ids,
                    nodes.kinds,
                    nodes.nodes,
                    nodes.relations,
                    nodes.changed,
                    (e.sources, e.targets, e.edge_kinds, e.weights, e.relations),
                )
            except ValueError as exc:
                logger.warning("graph snapshot not carried (%s): built again", exc)
                return _snapshot_of(after)

        return after, made

    def _meta(
        self, conn: sqlite3.Connection, graph: GraphPositions, touched: list[str] | None
    ) -> str:
        """Write the tables' counts, layout, fingerprint and a new :data:`GENERATION`;
        returns that generation."""
        generation = uuid.uuid4().hex
        counts = {
            "entities": graph.n_entities,
            "descriptions": len(graph.description_entity),
            "relations": len(graph.relation_chunk),
            "chunks": len(self.chunk_ids),
        }
        orders = graph.orders
        if touched is None:
            mark = fingerprint(conn, orders)
        else:
            (before,) = conn.execute(
                "SELECT value FROM meta WHERE key = ?", (FINGERPRINT,)
            ).fetchone()
            mark = patched_fingerprint(before, touched, orders) if touched else before
        rows = [
            ("counts", json.dumps(counts)),
            (LAYOUT, KEYED),
            (GENERATION, generation),
            (FINGERPRINT, mark),
        ]
        conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", rows)
        return generation

    def _read_chunks(self, conn: sqlite3.Connection, chunks: str) -> None:
        """The texts and triples of the state's chunks whose keys ``chunks`` (a SELECT)
        gives, from their extractions as the state resolved them
        (:meth:`~quillian.components.graph.incremental.ResolutionState.chunk_extractions`),
        into ``stexts`` and ``striples`` (a chunk already read is not read again)."""
        read = self.chunks_read
        wanted = [c for (c,) in conn.execute(chunks).fetchall() if c not in read]
        read.update(wanted)
        for start in range(0, len(wanted), _READ_BATCH):
            found = self.state.chunk_extractions(wanted[start : start + _READ_BATCH])
            stored = [
                (
                    row,
                    extraction_texts(c.extraction),
                    [triple_columns(t, c.doc_id, c.chunk_id, key64) for t in c.extraction.triples],
                )
                for row, c in found
            ]
            conn.executemany(
                "INSERT OR IGNORE INTO stexts VALUES (?, ?, ?)",
                ((key64(t), t, c) for c, texts, _ in stored for t in texts),
            )
            conn.executemany(
                "INSERT INTO striples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                ((c, at, *row) for c, _, rows in stored for at, row in enumerate(rows)),
            )

    # ----- whole ----------------------------------------------------------------------

    def _fill(self, conn: sqlite3.Connection) -> None:
        """Every table but ``names``' titled keys and ``meta``, from the attached state."""
        conn.executemany(
            "INSERT INTO chunk_pos VALUES (?, ?, ?, ?, ?, ?)",
            (
                (cid, pos, row, c.title, key64(c.title), pack_text(c.text))
                for pos, (cid, row, c) in enumerate(
                    zip(self.chunk_ids, self.chunk_rows.tolist(), self.chunks, strict=True)
                )
            ),
        )
        for sql in _ORDER:
            conn.execute(sql)
        conn.execute(
            "INSERT INTO chunks SELECT row, id, nullif(title_id, :e), body FROM chunk_pos",
            {"e": _EMPTY},
        )
        conn.execute(
            "INSERT OR IGNORE INTO texts (id, text, refs)"
            " SELECT title_id, title, 0 FROM chunk_pos WHERE title != ''"
        )
        conn.execute("INSERT INTO entities SELECT row, name, type, aliases FROM st.entities")
        conn.execute(
            """INSERT INTO descriptions
            SELECT ROW_NUMBER() OVER (ORDER BY c.ord, d.seq) - 1, d.entity, d.text,
                d.chunk, d.seq
            FROM st.descriptions d JOIN corder c USING (chunk)"""
        )
        self._read_chunks(conn, "SELECT chunk FROM st.chunks")
        occurrences = "kept k JOIN occ o ON o.chunk = k.chunk AND o.seq = k.seq"
        conn.execute(_SOURCES.format(occurrences=occurrences))
        conn.execute(
            "INSERT INTO relations" + _relation(row="k.pos", occurrences=occurrences),
            {"empty": _EMPTY, "related": RELATED_TO},
        )
        _insert_state_texts(conn, "SELECT text FROM main.descriptions")
        _insert_state_texts(
            conn, "SELECT description FROM main.relations UNION SELECT sentence FROM main.relations"
        )
        for table in _TEXT_REFS:
            _count_texts(conn, table, "", 1)
        conn.execute(
            "INSERT INTO names SELECT key, row, 0 FROM (SELECT k.key AS key, e.row AS row,"
            " min(e.pos) FROM st.entity_keys k JOIN ent e ON e.row = k.row GROUP BY k.key)"
        )
        conn.execute(
            "INSERT INTO alias_ids SELECT id, row FROM (SELECT a.id AS id, e.row AS row,"
            " min(e.pos) FROM st.entity_alias_ids a JOIN ent e ON e.row = a.row GROUP BY a.id)"
        )

    # ----- patched --------------------------------------------------------------------

    def _patch(self, conn: sqlite3.Connection, changes: TablesChanges) -> list[str]:
        """Bring the copied tables up to the state by the log ``changes``; returns the
        entity and description rows changed, as text (for the fingerprint)."""
        _script(
            conn,
            """CREATE TEMP TABLE cc (chunk_id TEXT PRIMARY KEY, row INTEGER NOT NULL);
            CREATE TEMP TABLE ce (row INTEGER PRIMARY KEY);
            CREATE TEMP TABLE ct (triple INTEGER PRIMARY KEY);
            CREATE TEMP TABLE ck (key TEXT PRIMARY KEY) WITHOUT ROWID;
            CREATE TEMP TABLE ca (id TEXT PRIMARY KEY) WITHOUT ROWID;
            CREATE TEMP TABLE unsourced (id INTEGER PRIMARY KEY);""",
        )
        # tables written before kept an index no query reads now: its pages reused
        conn.execute("DROP INDEX IF EXISTS relations_source_chunk")
        # the titled keys, settled again at each patch, are found by an index
        # of theirs (tables written before scan every key once to make it: 0.04 s at
        # 100k passages, then 0.5 ms instead of 4.7 ms)
        conn.execute(f"CREATE INDEX IF NOT EXISTS {TITLED_INDEX}")
        conn.executemany("INSERT INTO cc VALUES (?, ?)", ((c, key64(c)) for c in changes.chunks))
        conn.executemany("INSERT INTO ce VALUES (?)", ((r,) for r in changes.entities))
        touched: list[str] = []
        self._patch_chunks(conn)
        # entities: the logged rows, as the state has them now; their old and new
        # lexicon keys and alias ids settled again below
        touched += _lines(
            conn,
            "SELECT json_array(row, name, type, aliases) FROM entities"
            " WHERE row IN (SELECT row FROM ce)",
        )
        conn.execute(
            "INSERT OR IGNORE INTO ck SELECT key FROM names WHERE entity IN"
            " (SELECT row FROM ce) AND titled = 0"
        )
        conn.execute(
            "INSERT OR IGNORE INTO ca SELECT id FROM alias_ids WHERE entity IN (SELECT row FROM ce)"
        )
        conn.execute("DELETE FROM entities WHERE row IN (SELECT row FROM ce)")
        conn.execute(
            "INSERT INTO entities SELECT row, name, type, aliases FROM st.entities"
            " WHERE row IN (SELECT row FROM ce)"
        )
        touched += _lines(
            conn,
            "SELECT json_array(row, name, type, aliases) FROM entities"
            " WHERE row IN (SELECT row FROM ce)",
        )
        conn.execute(
            "INSERT OR IGNORE INTO ck SELECT key FROM st.entity_keys WHERE row IN"
            " (SELECT row FROM ce)"
        )
        conn.execute(
            "INSERT OR IGNORE INTO ca SELECT id FROM st.entity_alias_ids WHERE row"
            " IN (SELECT row FROM ce)"
        )
        touched += self._patch_descriptions(conn)
        self._patch_relations(conn)
        self._patch_lexicon(conn)
        conn.execute("DELETE FROM texts WHERE id IN (SELECT id FROM uncounted) AND refs <= 0")
        conn.execute(
            "DELETE FROM sources WHERE id IN (SELECT id FROM unsourced) AND NOT EXISTS"
            " (SELECT 1 FROM relations r WHERE r.source = sources.id)"
        )
        return touched

    def _patch_chunks(self, conn: sqlite3.Connection) -> None:
        """The chunks table to ``chunk_ids``: those gone deleted, those new inserted, and
        those whose title changed written again (a chunk's id names its text, not the
        title a document given its own id may change)."""
        told = self._told_chunks(conn)
        gone, new = told if told is not None else self._compared_chunks(conn)
        conn.execute("CREATE TEMP TABLE dc (row INTEGER PRIMARY KEY)")
        conn.executemany("INSERT INTO dc VALUES (?)", ((r,) for r in gone.tolist()))
        # relations whose provenance names a chunk that goes or comes: settled again
        named = [i for (i,) in conn.execute("SELECT id FROM chunks WHERE row IN dc")]
        named += [self.chunk_ids[i] for i in new.tolist()]
        conn.executemany(
            "INSERT OR IGNORE INTO ct SELECT r.triple FROM sources s"
            " CROSS JOIN relations r ON r.source = s.id WHERE s.chunk_id = ?",
            ((chunk_id,) for chunk_id in named),
        )
        _count_texts(conn, "chunks", "WHERE row IN (SELECT row FROM dc)", -1)
        # texts kept as spans of a chunk that goes are kept whole (rows of other chunks
        # may read them; those no row reads are deleted after); a chunk written again
        # (its title changed) keeps its row and text
        again = json.dumps(self.chunk_rows[new].tolist())
        conn.execute(
            f"UPDATE texts SET text = {text_of('texts')}, chunk = NULL, start = NULL,"
            " end = NULL WHERE chunk IN (SELECT row FROM dc)"
            " AND chunk NOT IN (SELECT value FROM json_each(?))",
            (again,),
        )
        conn.execute("DELETE FROM chunks WHERE row IN (SELECT row FROM dc)")
        conn.execute("CREATE TEMP TABLE nc (row INTEGER PRIMARY KEY)")
        rows = [
            (int(self.chunk_rows[i]), self.chunk_ids[i], c.title, c.text)
            for i, c in zip(new.tolist(), self.chunks.at(new.tolist()), strict=True)
        ]
        _insert_texts(conn, [title for _, _, title, _ in rows if title])
        conn.executemany(
            "INSERT INTO chunks VALUES (:row, :id, nullif(:title, :e), :body)",
            (
                {"row": row, "id": cid, "title": key64(title), "body": pack_text(text), "e": _EMPTY}
                for row, cid, title, text in rows
            ),
        )
        conn.executemany("INSERT INTO nc VALUES (?)", ((r,) for r, *_ in rows))
        _count_texts(conn, "chunks", "WHERE row IN (SELECT row FROM nc)", 1)

    def _told_chunks(
        self, conn: sqlite3.Connection
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
        """The rows of the chunks gone or retitled, and the positions of those added or
        retitled, as the delta tells them; None where there is no delta, or the tables
        do not hold what it says (every removed or retitled chunk, no added one, and as
        many others as the build keeps)."""
        if self.moved is None or self.retitled is None:
            return None
        added, removed = (rows_of(ids) for ids in self.moved)
        retitled = rows_of(self.retitled)
        gone = np.unique(np.concatenate([removed, retitled]))
        came = np.unique(np.concatenate([added, retitled]))
        new = np.flatnonzero(np.isin(self.chunk_rows, came))
        held = [
            conn.execute(
                "SELECT count(*) FROM chunks WHERE row IN (SELECT value FROM json_each(?))",
                (json.dumps(rows.tolist()),),
            ).fetchone()[0]
            for rows in (gone, added)
        ]
        # as many as the build that wrote them counted (the tables are byte for byte
        # that build's: see run), not counted again (0.003 s at 100k passages)
        counts = conn.execute("SELECT value ->> 'chunks' FROM meta WHERE key = 'counts'").fetchone()
        kept = (int(counts[0]) if counts and counts[0] is not None else -1) - len(gone)
        if (*held, len(new), kept + len(came)) != (
            len(gone),
            0,
            len(came),
            len(self.chunk_ids),
        ):
            logger.warning("graph tables' chunks are not the delta's: every chunk compared")
            return None
        return gone, new

    def _compared_chunks(
        self, conn: sqlite3.Connection
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The rows of the chunks the tables hold and the build does not (or with
        another title than the build's), and the positions of the build's chunks the
        tables do not hold (so)."""
        stored = np.array(
            conn.execute("SELECT row, coalesce(title, ?) FROM chunks", (_EMPTY,)).fetchall(),
            dtype=np.int64,
        ).reshape(-1, 2)
        same = np.isin(self.chunk_rows, stored[:, 0], assume_unique=True)
        if self.retitled is not None:  # only those titles changed: written again
            same &= ~np.isin(self.chunk_rows, rows_of(self.retitled))
        else:  # every chunk's title against the one the tables hold
            titles = np.fromiter(
                map(key64, self.chunks.titles), dtype=np.int64, count=len(self.chunks)
            )
            known = stored[np.isin(stored[:, 0], self.chunk_rows, assume_unique=True)]
            known = known[np.argsort(known[:, 0])]
            where = np.searchsorted(known[:, 0], self.chunk_rows[same])
            same[np.flatnonzero(same)[known[where, 1] != titles[same]]] = False
        keep = self.chunk_rows[same]
        return np.setdiff1d(stored[:, 0], keep, assume_unique=True), np.flatnonzero(~same)

    def _patch_descriptions(self, conn: sqlite3.Connection) -> list[str]:
        """The descriptions of the logged chunks, as the state has them now."""
        where = "WHERE chunk IN (SELECT row FROM cc)"
        before = _lines(conn, _DESCRIPTION_LINES)
        _count_texts(conn, "descriptions", where, -1)
        conn.execute(f"DELETE FROM descriptions {where}")
        (top,) = conn.execute("SELECT coalesce(max(row), -1) FROM descriptions").fetchone()
        conn.execute(
            """INSERT INTO descriptions
            SELECT :top + ROW_NUMBER() OVER (ORDER BY cc.chunk_id, d.seq), d.entity, d.text,
                cc.row, d.seq
            FROM cc CROSS JOIN st.descriptions d ON d.chunk = cc.row""",
            {"top": top},
        )
        self._read_chunks(conn, "SELECT row FROM cc")
        _insert_state_texts(
            conn, "SELECT d.text FROM cc CROSS JOIN st.descriptions d ON d.chunk = cc.row"
        )
        _count_texts(conn, "descriptions", where, 1)
        return before + _lines(conn, _DESCRIPTION_LINES)

    def _patch_relations(self, conn: sqlite3.Connection) -> None:
        """The relations of every triple id the logged chunks held or hold: each one's
        first occurrence in index order, found again."""
        conn.execute(
            "INSERT OR IGNORE INTO ct SELECT triple FROM relations"
            " WHERE chunk IN (SELECT row FROM cc)"
        )
        conn.execute(
            "INSERT OR IGNORE INTO ct SELECT o.triple FROM cc"
            " CROSS JOIN st.occurrences o ON o.chunk = cc.row"
        )
        where = "WHERE triple IN (SELECT triple FROM ct)"
        conn.execute(
            f"INSERT OR IGNORE INTO unsourced SELECT source FROM relations {where}"
            " AND source IS NOT NULL"
        )
        _count_texts(conn, "relations", where, -1)
        conn.execute(f"DELETE FROM relations {where}")
        _script(conn, _FIRST)
        found = "first f CROSS JOIN occ o ON o.chunk = f.chunk AND o.seq = f.seq"
        self._read_chunks(conn, "SELECT DISTINCT chunk FROM first")
        _insert_state_texts(
            conn,
            f"SELECT o.description FROM {found} UNION SELECT o.sentence FROM {found}",
        )
        conn.execute(_SOURCES.format(occurrences=found))
        (top,) = conn.execute("SELECT coalesce(max(row), -1) FROM relations").fetchone()
        conn.execute(
            "INSERT INTO relations"
            + _relation(
                row=f"{int(top)} + ROW_NUMBER() OVER (ORDER BY f.triple)", occurrences=found
            ),
            {"empty": _EMPTY, "related": RELATED_TO},
        )
        _count_texts(conn, "relations", where, 1)

    def _patch_lexicon(self, conn: sqlite3.Connection) -> None:
        """The lexicon keys and alias ids the logged entities held or hold: each one's
        first entity in index order, found again (a titled key among them deleted too);
        the other titled keys are settled after (:func:`_titled_names`)."""
        conn.execute("DELETE FROM names WHERE key IN (SELECT key FROM ck)")
        conn.execute(
            "INSERT INTO names SELECT key, row, 0 FROM (SELECT k.key, e.row, ROW_NUMBER()"
            " OVER (PARTITION BY k.key ORDER BY e.doc_id, e.idx, e.seq) AS nth"
            " FROM ck CROSS JOIN st.entity_keys k USING (key)"
            " CROSS JOIN st.entities e ON e.row = k.row)"
            " WHERE nth = 1"
        )
        conn.execute("DELETE FROM alias_ids WHERE id IN (SELECT id FROM ca)")
        conn.execute(
            "INSERT INTO alias_ids SELECT id, row FROM (SELECT a.id, e.row, ROW_NUMBER()"
            " OVER (PARTITION BY a.id ORDER BY e.doc_id, e.idx, e.seq) AS nth"
            " FROM ca CROSS JOIN st.entity_alias_ids a USING (id)"
            " CROSS JOIN st.entities e ON e.row = a.row)"
            " WHERE nth = 1"
        )


#: The first occurrence in index order of each triple id in ``ct``.
_FIRST = """
CREATE TEMP TABLE first (triple INTEGER PRIMARY KEY, chunk INTEGER NOT NULL,
    seq INTEGER NOT NULL);
INSERT INTO first SELECT triple, chunk, seq FROM (
    SELECT o.triple, o.chunk, o.seq, ROW_NUMBER() OVER (
        PARTITION BY o.triple ORDER BY c.doc_id, c.idx, o.seq) AS nth
    FROM ct CROSS JOIN st.occurrences o USING (triple)
    CROSS JOIN st.chunks c ON c.chunk = o.chunk
) WHERE nth = 1
"""

#: The rows of the logged chunks' descriptions as the fingerprint takes them (a chunk
#: gone from the tables still named, by the log).
_DESCRIPTION_LINES = (
    f"SELECT json_array(d.row, d.entity, {text_of('t')}, cc.chunk_id) FROM cc"
    " CROSS JOIN descriptions d ON d.chunk = cc.row JOIN texts t ON t.id = d.text"
    " ORDER BY d.row"
)


def _relation(row: str, occurrences: str) -> str:
    """:data:`_RELATION` given the row key and the occurrences' rows."""
    return _RELATION.format(
        row=row,
        occurrences=occurrences,
        subject_name=entity_name("o.subject"),
        object_name=entity_name("o.object"),
        in_chunk=IN_CHUNK,
        source_doc=_SOURCE_DOC,
        source_chunk=_SOURCE_CHUNK,
    )


def _follows_in_place(db: Path, mark: str | None) -> bool:
    """Whether the tables database ``db`` may be patched where it is by the log the
    resolution state keeps since it marked ``mark``: a database in write-ahead-log
    mode, of the keyed layout, whose :data:`GENERATION` is the one marked (a database
    another build wrote, or written whole since, has another; one copied over it from
    elsewhere is not in that mode or has another). Its bytes are not read whole: the
    index's checks of it are SQLite's (:func:`~quillian.index.integrity.check_tables_database`)."""
    if not mark or not mark.startswith(GENERATION_MARK) or not wal_mode(db):
        return False
    try:
        found = _meta_values(db, GENERATION, LAYOUT)
    except sqlite3.Error as exc:
        logger.warning("graph tables written whole: %s unreadable (%s)", db, exc)
        return False
    follows = found.get(LAYOUT) == KEYED and GENERATION_MARK + str(found.get(GENERATION)) == mark
    if not follows:
        logger.info("graph tables written whole: %s is not the state's", db)
    return follows


def _log_outgrown(db: Path) -> bool:
    """Whether the write-ahead log of the database ``db`` patched where it is holds more
    than :data:`LOG_SHARE` of the database's size (at least :data:`LOG_FLOOR` bytes):
    readers' snapshots kept it from being emptied (an index served throughout its
    updates always has one), so the update copies the database, its log folded in, and
    swaps it in whole, as an update did before it was patched where it is. The copy
    costs what the log's growth since the last one amortizes."""
    log = wal_bytes(db)
    outgrown = log > max(LOG_FLOOR, int(db.stat().st_size * LOG_SHARE))
    if outgrown:
        logger.info("graph tables copied and swapped in whole: %d bytes in their log", log)
    return outgrown


def _backup(source: Path, target: Path) -> bool:
    """Copy the database ``source`` (in write-ahead-log mode, as of its last commit) to
    ``target`` by SQLite's online backup; whether it could be read (else a warning, and
    the tables are written whole)."""
    try:
        uri = source.absolute().as_uri() + "?mode=ro"
        with (
            closing(sqlite3.connect(uri, uri=True)) as src,
            closing(sqlite3.connect(target)) as out,
        ):
            src.backup(out)
    except sqlite3.Error as exc:
        target.unlink(missing_ok=True)
        logger.warning("graph tables written whole: %s unreadable (%s)", source, exc)
        return False
    return True


def _settle_log(conn: sqlite3.Connection) -> None:
    """Leave ``conn``'s database in write-ahead-log mode with its log copied back into
    it and emptied where no reader's snapshot still needs it (else as far as the
    oldest reader allows, without waiting for any: the next update's checkpoint goes on
    from there)."""
    conn.execute("PRAGMA main.journal_mode = WAL").fetchall()
    conn.execute("PRAGMA busy_timeout = 0")
    conn.execute("PRAGMA main.wal_checkpoint(TRUNCATE)").fetchall()


def _layout(db: Path) -> str | None:
    """The layout a tables database names (:data:`~quillian.index.tables.LAYOUT`)."""
    return _meta_values(db, LAYOUT).get(LAYOUT)


def _meta_values(db: Path, *keys: str) -> dict[str, Any]:
    """The values the tables database ``db`` keeps in ``meta`` under ``keys`` (those it
    has), read through a read-only connection."""
    marks = ", ".join("?" * len(keys))
    with closing(sqlite3.connect(db.absolute().as_uri() + "?mode=ro", uri=True)) as conn:
        return dict(conn.execute(f"SELECT key, value FROM meta WHERE key IN ({marks})", keys))


def _script(conn: sqlite3.Connection, sql: str) -> None:
    """Run ``sql``'s statements one by one (``executescript`` would commit first)."""
    for statement in sql.split(";"):
        if statement.strip():
            conn.execute(statement)


def _key64(text: str | None) -> int | None:
    return None if text is None else key64(text)


def _lines(conn: sqlite3.Connection, sql: str) -> list[str]:
    return [str(line) for (line,) in conn.execute(sql)]


def _count_texts(conn: sqlite3.Connection, table: str, where: str, sign: int) -> None:
    """Add ``sign`` to the reference count of every text the rows of ``table`` that
    ``where`` picks refer to."""
    refs = " UNION ALL ".join(sql.format(where=where) for sql in _TEXT_REFS[table])
    conn.execute("DELETE FROM counted")
    conn.execute(
        f"INSERT INTO counted SELECT id, count(*) FROM ({refs}) WHERE id IS NOT NULL"
        f" AND id != {IN_CHUNK} GROUP BY id"
    )
    # texts new to the database come with their rows, at 0 (see _insert_texts)
    conn.execute(
        "UPDATE texts SET refs = refs + ? * (SELECT n FROM counted c WHERE c.id = texts.id)"
        " WHERE id IN (SELECT id FROM counted)",
        (sign,),
    )
    if sign < 0:
        conn.execute("INSERT OR IGNORE INTO uncounted SELECT id FROM counted")


def _insert_texts(conn: sqlite3.Connection, texts: Iterable[str]) -> None:
    """Add the ``texts`` the database lacks, with no reference counted yet (and as
    candidates to delete, should no row count them)."""
    rows = [(key64(t), t) for t in set(texts)]
    conn.executemany("INSERT OR IGNORE INTO texts (id, text, refs) VALUES (?, ?, 0)", rows)
    conn.executemany("INSERT OR IGNORE INTO uncounted VALUES (?)", ((i,) for i, _ in rows))


def _insert_state_texts(conn: sqlite3.Connection, ids: str) -> None:
    """Add the state's texts whose ids ``ids`` (a SELECT) gives that the database lacks,
    with no reference counted yet (from those read, :meth:`_Writer._read_chunks`): a
    text found in the text of the chunk it was read from as that span of it."""
    new = f"x.id IN ({ids}) AND x.id != :e AND x.id NOT IN (SELECT id FROM main.texts)"
    conn.execute(
        f"INSERT OR IGNORE INTO uncounted SELECT x.id FROM stexts x WHERE {new}", {"e": _EMPTY}
    )
    conn.execute(
        f"""INSERT INTO texts
        SELECT id, CASE WHEN at > 0 THEN NULL ELSE text END, 0,
            CASE WHEN at > 0 THEN chunk END, CASE WHEN at > 0 THEN at - 1 END,
            CASE WHEN at > 0 THEN at - 1 + length(text) END
        FROM (SELECT x.id, x.text, x.chunk, CASE WHEN c.row IS NULL THEN 0
                ELSE instr(chunk_text(c.row, c.body), x.text) END AS at
            FROM stexts x LEFT JOIN main.chunks c ON c.row = x.chunk WHERE {new})""",
        {"e": _EMPTY},
    )


#: What :class:`_Columns` reads of each table: every row, or after a patch the rows of
#: the logged chunks (``cc``) and triples (``ct``).
_COLUMN_ROWS = {
    "descriptions": (
        # a description's node id is computed, not stored: from its entity's node id,
        # its chunk's id and its text
        "SELECT d.row, d.chunk, d.seq, d.entity, d.text,"
        f" desc_node(e.node_id, c.id, {text_of('t')})"
        " FROM descriptions d JOIN st.entities e ON e.row = d.entity"
        " JOIN chunks c ON c.row = d.chunk JOIN texts t ON t.id = d.text {where}"
        " ORDER BY d.row",
        "WHERE d.chunk IN (SELECT row FROM cc)",
    ),
    "relations": (
        "SELECT r.row, r.triple, r.chunk, r.seq, r.subject_entity, r.object_entity,"
        " coalesce(r.source_chunk, 0), r.source_chunk IS NULL,"
        " coalesce(r.description, key64(" + " || ' ' || ".join(relation_words("r")) + "))"
        " FROM relations r {where} ORDER BY r.row",
        "WHERE r.triple IN (SELECT triple FROM ct)",
    ),
    "mentions": (
        "SELECT chunk, seq, entity, weight FROM st.mentions {where}",
        "WHERE chunk IN (SELECT row FROM cc)",
    ),
}
_COLUMNS_VERSION = "4"
#: The entities in index order (their creating mentions' order; the row settles a tie,
#: as the order index does), with what the snapshot and the arrays take of each.
_ENTITY_ORDER = (
    "SELECT row, node_id, literal FROM st.entities {where} ORDER BY doc_id, idx, seq, row"
)


@dataclass(frozen=True)
class _Columns:
    """The columns the positions, the snapshot and the arrays are made of, rows in key
    order: the descriptions' (row, chunk, seq, entity, text) and node ids, the
    relations' (row, triple, chunk, seq, subject, object, source chunk or 0, 1 where it
    has none, the text embedded: its description or its triple's words), the state's
    mentions (chunk key, seq, entity) and their weights; and the state's entity rows in
    index order, with their node ids and whether each is a literal.

    Kept in a file beside the resolution state (:func:`columns_path`: machine-local
    like the state, never synchronised with the index's files) with the digest of the
    tables database they were read from, they let the next patch of those tables read
    back only the rows it wrote: the other rows' columns are the kept ones. Written
    after the state marks the tables, without a sync: columns of other tables (a build
    stopped between the two), a file that does not read, or patched columns that do not
    count what the tables hold, and every row is read again."""

    descriptions: npt.NDArray[np.int64]
    description_nodes: npt.NDArray[np.bytes_]
    relations: npt.NDArray[np.int64]
    mentions: npt.NDArray[np.int64]
    weights: npt.NDArray[np.float64]
    entities: npt.NDArray[np.int64]
    entity_nodes: npt.NDArray[np.bytes_]
    literal: npt.NDArray[np.bool_]

    @classmethod
    def read(cls, conn: sqlite3.Connection, patched: bool = False) -> _Columns:
        """The columns of every row, or (``patched``) of the rows the patch wrote (the
        logged entities' among them, in index order)."""
        rows = {
            table: conn.execute(sql.format(where=where if patched else "")).fetchall()
            for table, (sql, where) in _COLUMN_ROWS.items()
        }
        where = "WHERE row IN (SELECT row FROM ce)" if patched else ""
        entities = conn.execute(_ENTITY_ORDER.format(where=where)).fetchall()
        described, mentioned = rows["descriptions"], rows["mentions"]
        width = _WIDTHS
        return cls(
            np.array([r[:5] for r in described], dtype=np.int64).reshape(-1, width["descriptions"]),
            _node_ids(r[5] for r in described),
            np.array(rows["relations"], dtype=np.int64).reshape(-1, width["relations"]),
            np.array([r[:3] for r in mentioned], dtype=np.int64).reshape(-1, width["mentions"]),
            np.array([r[3] for r in mentioned], dtype=np.float64),
            np.array([r[0] for r in entities], dtype=np.int64),
            _node_ids(r[1] for r in entities),
            np.array([r[2] for r in entities], dtype=np.bool_).reshape(-1),
        )

    @classmethod
    def load(cls, path: Path, tables: str) -> _Columns | None:
        """The columns kept at ``path`` for the tables database of digest ``tables``;
        None where there are none for it that read."""

        def read(kept: Any) -> _Columns | None:
            if str(kept["meta"][0]) != f"{_COLUMNS_VERSION} {tables}":
                return None  # another layout, or other tables
            return cls(**{name: _stacked(kept, name) for name in _COLUMN_NAMES})

        known = recall(path)
        columns: _Columns | None
        if isinstance(known, tuple) and known[0] == tables:
            columns = cast(_Columns, known[1])  # kept by this process, the file as it left it
        else:
            columns = load_arrays(path, read, "graph columns", "the patch reads every row")
        if columns is None:
            return None
        # each table's columns were stacked, so only the arrays kept apart can disagree
        lengths = {name: len(getattr(columns, name)) for name in _COLUMN_NAMES}
        if (lengths["description_nodes"], lengths["weights"], lengths["entity_nodes"]) != (
            lengths["descriptions"],
            lengths["mentions"],
            lengths["entities"],
        ) or lengths["literal"] != lengths["entities"]:
            logger.warning("graph columns kept in %s have the lengths %s", path, lengths)
            return None
        columns.remember(path, tables)
        return columns

    def remember(self, path: Path, tables: str) -> None:
        """Keep these columns in this process as what ``path`` holds for the tables of
        digest ``tables`` (:func:`~quillian.index.artifacts.remember`)."""
        remember(path, *self.kept(tables))

    def kept(self, tables: str) -> tuple[tuple[str, _Columns], list[npt.NDArray[Any]]]:
        """What :meth:`remember` keeps for the tables of digest ``tables``, and its
        arrays."""
        return (tables, self), [getattr(self, name) for name in _COLUMN_NAMES]

    def patched(self, conn: sqlite3.Connection, changed: Changed) -> _Columns | None:
        """These columns after :meth:`_Writer._patch`, which wrote ``changed``: the rows
        of the logged chunks and triples read again, the others kept; None unless they
        count what the tables and the state hold."""
        new = changed.rows
        assert isinstance(new, _Columns)
        keep_d = ~np.isin(self.descriptions[:, 1], changed.chunks)
        keep_r = ~np.isin(self.relations[:, 1], changed.triples)
        keep_m = ~np.isin(self.mentions[:, 0], changed.chunks)
        descriptions = np.concatenate([self.descriptions[keep_d], new.descriptions])
        by_d = np.argsort(descriptions[:, 0], kind="stable")
        relations = np.concatenate([self.relations[keep_r], new.relations])
        entities = _patched_entities(
            conn, Entities(self.entities, self.entity_nodes, self.literal), changed
        )
        if entities is None:
            return None
        merged = _Columns(
            descriptions[by_d],
            np.concatenate([self.description_nodes[keep_d], new.description_nodes])[by_d],
            relations[np.argsort(relations[:, 0], kind="stable")],
            np.concatenate([self.mentions[keep_m], new.mentions]),
            np.concatenate([self.weights[keep_m], new.weights]),
            entities.rows,
            entities.nodes,
            entities.literal,
        )
        return merged if merged.count(conn) else None

    @classmethod
    def of(cls, graph: GraphPositions) -> _Columns:
        """The columns of the graph's positions, rows in index order (shared with them)."""
        return cls(
            graph.descriptions,
            graph.description_nodes,
            graph.relations,
            graph.mentions,
            graph.mention_weights,
            graph.entities.rows,
            graph.entities.nodes,
            graph.entities.literal,
        )

    def count(self, conn: sqlite3.Connection) -> bool:
        """Whether these columns count the rows the tables and the state hold (a
        warning where not)."""
        counted = (
            len(self.descriptions),
            len(self.relations),
            len(self.mentions),
            len(self.entities),
        )
        held = tuple(
            row_count(conn, table, schema)
            for schema, table in (
                ("main", "descriptions"),
                ("main", "relations"),
                ("st", "mentions"),
                ("st", "entities"),
            )
        )
        if counted != held:
            logger.warning("graph columns patched to %s rows, not %s: read again", counted, held)
        return counted == held

    @staticmethod
    def changed(conn: sqlite3.Connection) -> Changed:
        """What :meth:`_Writer._patch` wrote again, with its rows' columns."""

        def keys(sql: str) -> npt.NDArray[np.int64]:
            return np.array([k for (k,) in conn.execute(sql)], np.int64)

        return Changed(
            keys("SELECT row FROM cc"),
            keys("SELECT triple FROM ct"),
            keys("SELECT row FROM ce"),
            _Columns.read(conn, patched=True),
        )

    def save(self, path: Path, tables: str) -> None:
        """Keep these columns at ``path`` for the tables database of digest ``tables``,
        each column as its runs where that is smaller (:func:`_in_runs`), each integer
        column in the narrowest type that holds it (written aside, then renamed into
        place)."""
        arrays: dict[str, npt.NDArray[Any]] = {"meta": np.array([f"{_COLUMNS_VERSION} {tables}"])}
        for name in _COLUMN_NAMES:
            array = getattr(self, name)
            parts = [array] if array.ndim == 1 else [array[:, i] for i in range(array.shape[1])]
            for i, part in enumerate(parts):
                key = f"{name}.{i}"
                if part.dtype.kind == "S":
                    arrays.update(_numbered(key, part))
                    continue
                arrays.update(
                    _in_runs(key, part, _RUNS[key]) if key in _RUNS else {key: _narrow(part)}
                )
        save_arrays(path, arrays)
        self.remember(path, tables)


_COLUMN_NAMES = (
    "descriptions",
    "description_nodes",
    "relations",
    "mentions",
    "weights",
    "entities",
    "entity_nodes",
    "literal",
)
_WIDTHS = {"descriptions": 5, "relations": 9, "mentions": 3}
#: The columns kept in runs where that is smaller (:func:`_in_runs`), and whether as
#: runs of equal steps (True) or of equal values (False). Steps: the rows of
#: descriptions and relations (counting up in key order but where a patch deleted
#: some), sequence numbers in a chunk, the entity rows in index order (counting up in
#: a state made whole). Values: the chunk keys of descriptions, relations, their
#: sources and mentions, a relation's subject (the sentence's first name, paired with
#: each other) and the text it embeds, a description's text, the flags, the mentions'
#: weights. The others (objects, entities described or mentioned, triple ids, node
#: ids) follow no order.
_RUNS = {
    "descriptions.0": True,
    "descriptions.1": False,
    "descriptions.2": True,
    "descriptions.4": False,
    "relations.0": True,
    "relations.2": False,
    "relations.3": True,
    "relations.4": False,
    "relations.6": False,
    "relations.7": False,
    "relations.8": False,
    "mentions.0": False,
    "mentions.1": True,
    "weights.0": False,
    "entities.0": True,
    "literal.0": False,
}


def _stacked(kept: Any, name: str) -> npt.NDArray[Any]:
    """One kept array, its columns stacked again (integers widened to int64)."""
    width = _WIDTHS.get(name)
    parts = [_from_runs(kept, f"{name}.{i}") for i in range(width or 1)]
    if width is None:
        return parts[0].astype(np.int64) if parts[0].dtype.kind == "i" else parts[0]
    return np.stack([p.astype(np.int64) for p in parts], axis=1)


def _node_ids(ids: Iterable[str]) -> npt.NDArray[np.bytes_]:
    """Node ids as UTF-8 bytes, in one fixed-width array (what :meth:`IdMap.from_bytes` takes)."""
    return ids_as_bytes(ids if isinstance(ids, Sequence) else list(ids))


def _inserted(
    kept: npt.NDArray[np.bytes_], at: Sequence[int], new: npt.NDArray[np.bytes_]
) -> npt.NDArray[np.bytes_]:
    """``new`` inserted into ``kept`` at ``at``, in the wider of their byte widths
    (:func:`numpy.insert` would cut ``new`` to ``kept``'s)."""
    wide = np.promote_types(kept.dtype, new.dtype)
    return np.insert(kept.astype(wide), at, new.astype(wide))


def _patched_entities(
    conn: sqlite3.Connection, entities: Entities, changed: Changed
) -> Entities | None:
    """``entities`` (in index order) after a patch that wrote ``changed``: the rows it
    wrote again taken out and put in again where they now go, at their places in index
    order; None (a warning) where a kept row is not in the state."""
    new = changed.rows
    keep = ~np.isin(entities.rows, changed.entities)
    try:
        at = _entity_places(conn, entities.rows[keep], new.entities)
    except LookupError as exc:  # a kept entity the state no longer holds
        logger.warning("graph columns name %s: read again", exc)
        return None
    return Entities(
        np.insert(entities.rows[keep], at, new.entities),
        _inserted(entities.nodes[keep], at, new.entity_nodes),
        np.insert(entities.literal[keep], at, new.literal),
    )


def _entity_places(
    conn: sqlite3.Connection, kept: npt.NDArray[np.int64], new: npt.NDArray[np.int64]
) -> list[int]:
    """Where each of the entity rows ``new`` (in index order) goes among the rows
    ``kept`` (in index order, none of ``new``): found by bisection on their order keys,
    each read by row from the state, so a patch reads a few keys per new entity, not
    every entity's. :class:`LookupError` where a kept row is not in the state."""
    order_key = "SELECT doc_id, idx, seq, row FROM st.entities WHERE row = ?"

    def key(row: int) -> tuple[str, int, int, int]:
        found: tuple[str, int, int, int] | None = conn.execute(order_key, (int(row),)).fetchone()
        if found is None:
            raise LookupError(f"entity row {row}, not in the state")
        return found

    places, low = [], 0
    for row in new.tolist():  # in order: each goes at or after the one before
        low = bisect.bisect_left(kept, key(row), lo=low, key=key)
        places.append(low)
    return places


def _in_runs(key: str, column: npt.NDArray[Any], steps: bool) -> dict[str, npt.NDArray[Any]]:
    """``column`` as kept under ``key``: as runs of equal values (``.runs``,
    ``.lengths``), or (``steps``, for integers) runs of equal steps from its first value
    (``.first`` beside them), where that is smaller; else whole, narrowed. Steps between
    64-bit keys may wrap around; the sum that reads them wraps back."""
    values, first = column, None
    if steps and column.dtype.kind == "i" and len(column):
        wide = column.astype(np.int64, copy=False)
        with np.errstate(over="ignore"):
            values, first = np.diff(wide), wide[:1]
    if column.ndim != 1 or not len(values):
        return {key: _narrow(column)}
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    runs = {
        f"{key}.runs": _narrow(values[starts]),
        f"{key}.lengths": _narrow(np.diff(np.append(starts, len(values)))),
    }
    if first is not None:
        runs[f"{key}.first"] = first
    size = sum(a.nbytes for a in runs.values())
    if size < len(column):  # smaller than the column whole in any width
        return runs
    whole = _narrow(column)
    return runs if size < whole.nbytes else {key: whole}


def _numbered(key: str, ids: npt.NDArray[np.bytes_]) -> dict[str, npt.NDArray[Any]]:
    """Node ids as kept under ``key``: where all are stable ids of one head (an index's
    entities', its descriptions'), the head (``.head``) and each id's 64-bit number
    (``.numbers``), 8 bytes an id instead of 20 or 21 (the 20 MB text of docs/scale.md:
    5.2 MB of its columns' 11.2 MB in 2.0 MB); else as they are."""
    numbered = stable_numbers(ids) if len(ids) else None
    if numbered is None:
        return {key: ids}
    head, numbers = numbered
    return {f"{key}.head": np.array([head], np.bytes_), f"{key}.numbers": numbers}


def _from_runs(kept: Any, key: str) -> npt.NDArray[Any]:
    """The column :func:`_in_runs` or :func:`_numbered` kept under ``key``."""
    if f"{key}.numbers" in kept.files:
        return stable_bytes(bytes(kept[f"{key}.head"][0]), kept[f"{key}.numbers"])
    if f"{key}.runs" not in kept.files:
        return np.asarray(kept[key])
    values = np.repeat(kept[f"{key}.runs"], kept[f"{key}.lengths"])
    if f"{key}.first" not in kept.files:
        return values
    with np.errstate(over="ignore"):
        return np.cumsum(np.concatenate([kept[f"{key}.first"], values.astype(np.int64)]))


def _narrow(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """An integer column in the narrowest signed type that holds it (row numbers and
    sequence numbers beside 64-bit keys); any other array as it is."""
    if array.dtype.kind != "i" or not array.size:
        return array
    low, high = int(array.min()), int(array.max())
    for kind in (np.int8, np.int16, np.int32):
        if np.iinfo(kind).min <= low and high <= np.iinfo(kind).max:
            return array.astype(kind)
    return array


@dataclass(frozen=True)
class TitledKeys:
    """The titled keys a build settled in ``names`` (:func:`_titled_names`): the
    qualified pages it read them from, as ``(entity row, title)`` in index order, and
    each key's entity row."""

    pages: list[tuple[int, str]]
    keys: dict[str, int]


#: The titled keys of each index's tables (by its resolution state's path), under the
#: mark the state follows those tables by: what the next patch in this process settles
#: the keys it changed against.
KEPT_TITLED: KeptInProcess[TitledKeys] = KeptInProcess()


def _titled_names(
    conn: sqlite3.Connection,
    pages: npt.NDArray[np.int64],
    chunks: ChunkTable,
    entity_order: npt.NDArray[np.int64],
    before: TitledKeys | None = None,
) -> TitledKeys:
    """Bring ``names``' titled keys to those only the pages' base titles give
    (:func:`~quillian.components.retrieval.derived.name_keys`), by entity row: a titled
    key a patch left (:meth:`_Writer._patch_lexicon` deletes those of the keys whose
    names it settles again) stays where a page still gives it to the same entity, the
    others go, and those missing are added where no name holds the key. Only a title
    with a qualifier has a base (:func:`~quillian.components.retrieval.seeding.title_base`):
    the table's positions of those (:attr:`ChunkTable.qualified`) are the only pages
    looked up. Returns the keys settled.

    ``before``: the keys the tables held before the patch (which left its keys to
    settle again in ``ck``), where known: only the keys whose entity changed, came or
    went, and those of ``ck``, are settled, and the keys are worked out again only
    where a qualified page changed (at 100k passages, 0.9k pages and 0.8k keys: 10.1
    ms of a delete when every key was written again, 1.7 ms now; 3.0 and 1.3 ms at 20k,
    ``research/update_stages.py --functions``)."""
    qualified = chunks.qualified
    entities = pages[qualified]
    paged = entities >= 0
    titles = chunks.titles
    titled = list(
        zip(
            entity_order[entities[paged]].tolist(),
            [titles[i] for i in qualified[paged].tolist()],
            strict=True,
        )
    )
    if before is not None and before.pages == titled:
        now = before
    else:
        now = TitledKeys(titled, lexicon_keys(page_aliases(titled)))
    conn.execute("CREATE TEMP TABLE titled (key TEXT PRIMARY KEY, entity INTEGER NOT NULL)")
    if before is None:
        conn.executemany("INSERT INTO titled VALUES (?, ?)", now.keys.items())
        conn.execute(
            "DELETE FROM main.names WHERE titled = 1 AND NOT EXISTS"
            " (SELECT 1 FROM temp.titled t WHERE t.key = names.key AND t.entity = names.entity)"
        )
    else:
        settled = {key for (key,) in conn.execute("SELECT key FROM ck")}
        if now is not before:
            old, new = before.keys, now.keys
            settled.update(key for key, row in new.items() if old.get(key) != row)
            settled.update(key for key in old if key not in new)
        keys = now.keys
        conn.executemany(
            "INSERT INTO titled VALUES (?, ?)",
            ((key, keys[key]) for key in settled if key in keys),
        )
        conn.execute("CREATE TEMP TABLE settled (key TEXT PRIMARY KEY) WITHOUT ROWID")
        conn.executemany("INSERT INTO settled VALUES (?)", ((key,) for key in settled))
        conn.execute(
            "DELETE FROM main.names WHERE titled = 1 AND key IN (SELECT key FROM settled)"
            " AND NOT EXISTS (SELECT 1 FROM temp.titled t"
            " WHERE t.key = names.key AND t.entity = names.entity)"
        )
    conn.execute(
        "INSERT INTO names SELECT key, entity, 1 FROM titled"
        " WHERE key NOT IN (SELECT key FROM main.names)"
    )
    return now


def _snapshot_of(graph: GraphPositions) -> GraphSnapshot:
    """The snapshot of every edge of ``graph``."""
    return graph.edges().snapshot(graph.node_ids)


def _done(value: T) -> Future[T]:
    """A future that holds ``value``."""
    future: Future[T] = Future()
    future.set_result(value)
    return future
