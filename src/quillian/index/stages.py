"""The build after ingestion, as an ordered list of stages over every stored chunk.

The default stages build SA-RAG's document graph, embed chunks and graph texts, and
index the chunks for BM25; :class:`EndpointTextStage` (each relation's text with its
endpoint names, for ``ppr``'s fact seeds) is a build option. A method
that needs more (its own graph, a trained model) appends stages of its own: a stage
reads what earlier stages left in :class:`BuildState` and writes its artifacts through
the state's storage.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, cast

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.base import Embedder
from quillian.components.extraction.base import Extraction, ExtractionIssue
from quillian.components.extraction.filters import drop_ambiguous_names
from quillian.components.graph.builder import GraphBuilder, KnowledgeGraph
from quillian.components.graph.incremental import (
    STATE_FILE,
    ChunkExtraction,
    ExtractionSource,
    ResolutionState,
    StaleState,
    resolve_entities,
)
from quillian.components.retrieval.bm25_incremental import update_bm25
from quillian.components.retrieval.context import endpoint_text
from quillian.components.retrieval.derived import ENTITY_FACTS, text_rows
from quillian.components.retrieval.keyed import check_distinct, vector_keys
from quillian.errors import ConfigError, IndexDamagedError, IndexIncompleteError
from quillian.index.artifacts import save_npy
from quillian.index.chunk_table import CatalogChanges, ChunkTable, rows_of
from quillian.index.distinct_texts import KEPT as KEPT_TEXTS
from quillian.index.distinct_texts import Carried, KeptTexts, kept_order
from quillian.index.distinct_texts import carried as carried_texts
from quillian.index.integrity import unchanged_since_build
from quillian.index.linking import ExtractionDelta
from quillian.index.state_tables import GraphTextIds, save_state_tables
from quillian.index.storage import Storage
from quillian.index.tables import (
    DistinctTexts,
    StoredTables,
    load_tables,
    save_array,
    save_tables,
    unique_first,
)
from quillian.index.text_keys import ChunkKeys, carried_text_keys, chunk_keys, text_keys
from quillian.stores.protocols import (
    GraphStore,
    SummarizedIds,
    VectorIndex,
    VerifiedOnUse,
    ids_summary,
)
from quillian.stores.snapshot import GraphSnapshot
from quillian.types import Chunk, Progress

__all__ = [
    "DEFAULT_STAGES",
    "RESOLUTION_FILE",
    "BM25Stage",
    "BuildStage",
    "BuildState",
    "EmbedStage",
    "EndpointTextStage",
    "GraphStage",
    "chunk_text",
    "keys_path",
    "run_stages",
]

logger = logging.getLogger(__name__)

#: A one-word entity name used by more documents than this, and no document's title, is
#: dropped before the graph is built (``drop_ambiguous_names``): "John" is not an entity.
AMBIGUOUS_MAX_DOCS = 3
#: The graph stage's entity-resolution state, at the index root.
RESOLUTION_FILE = STATE_FILE


def chunk_text(chunk: Chunk) -> str:
    """What is embedded and BM25-indexed for a chunk: its title, then its text."""
    return f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text


@dataclass
class BuildState:
    """What the stages share: the stores, every processed chunk (in index order), their
    extractions and the issues the extractor recorded for them, the (cached) embedder,
    and what earlier stages produced."""

    storage: Storage
    chunks: ChunkTable
    """Every processed chunk, in index order (a sequence of chunks given in its place
    is made a table of them)."""
    extractions: Sequence[Extraction]
    embedder: Embedder
    progress: Progress
    kg: KnowledgeGraph | None = None
    counts: dict[str, int] = field(default_factory=dict)
    extraction_issues: list[ExtractionIssue] = field(default_factory=list)
    filtered: Sequence[Extraction] | None = None
    """``extractions`` without ambiguous names (``drop_ambiguous_names`` with
    :data:`AMBIGUOUS_MAX_DOCS`) where the build computed them; None: the graph stage
    filters."""
    delta: ExtractionDelta | None = None
    """The chunks whose ``filtered`` extraction changed since the previous build."""
    text_ids: GraphTextIds | None = None
    """The graph's text ids by position, where the graph stage wrote its tables from the
    resolution state (else the embedding stage reads them from the tables)."""
    repair: bool = False
    """The build found a stored file damaged: files kept are checked whole, not on
    their first use (an update checks only what it reads)."""
    kept_keys: dict[str, npt.NDArray[np.int64]] | None = None
    """The keys by position the previous build brought each vector collection to, by
    collection (read when the build starts, before the graph stage rewrites the
    tables): the collection should hold these keys now."""
    pending: list[tuple[str, Future[object]]] = field(default_factory=list)
    """Writes a stage left on their way, by the stage's name: the later stages need not
    wait for them, the build does before it is complete (:func:`run_stages`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.chunks, ChunkTable):
            self.chunks = ChunkTable.of(self.chunks)
        if self.kept_keys is None:
            self.kept_keys = {} if self.repair else _kept_keys(self.storage.directory)

    def close(self) -> None:
        """Close the tables the graph stage opened, once the stages are done (not at a
        later garbage collection)."""
        if self.kg is not None and isinstance(self.kg.indexes, StoredTables):
            self.kg.indexes.close()

    def graph(self) -> KnowledgeGraph:
        if self.kg is None:
            raise IndexIncompleteError("a stage needs the graph before the graph stage ran")
        return self.kg


class BuildStage(Protocol):
    """One step of the build; ``name`` keys its time in the build report."""

    name: str

    def run(self, state: BuildState) -> None: ...


class GraphStage:
    """SA-RAG's heterogeneous graph from the extractions, written to the graph store.

    The entity resolution is kept at the index root (:data:`RESOLUTION_FILE`, local to
    the machine: a PostgreSQL workspace does not send it) and brought up to date by the
    build's :class:`ExtractionDelta`, replaying only the mentions the delta reaches; the
    tables and the snapshot are then written from it
    (:func:`~quillian.index.state_tables.save_state_tables`). Where there is no delta
    (or a fresh one), or the state was left by another build than the one the delta
    follows, the state is made anew from every chunk. Chunks given out of index order
    (a caller of its own) are built in memory instead (:class:`GraphBuilder`)."""

    name = "graph"

    def run(self, state: BuildState) -> None:
        extractions = state.filtered
        if extractions is None:
            extractions = drop_ambiguous_names(state.extractions, max_docs=AMBIGUOUS_MAX_DOCS)
        if not state.chunks.in_index_order():
            kg = _built_in_memory(state, extractions)
        else:
            kg = _built_from_resolution(state, extractions)
        state.kg = kg
        state.counts.update(
            entities=kg.n_entities,
            descriptions=len(kg.descriptions),
            relations=len(kg.relations),
            nodes=kg.snapshot.n_nodes,
            edges=kg.snapshot.n_edges,
        )
        state.progress("graph", 1, 1)


def _built_in_memory(state: BuildState, extractions: Sequence[Extraction]) -> KnowledgeGraph:
    builder = GraphBuilder()
    builder.add_all(extractions)
    store = state.storage.graph(fresh=True)
    try:
        kg = builder.build([c.id for c in state.chunks], store=store)
    finally:
        store.close()
    save_tables(state.storage.directory, kg, state.chunks)
    return kg


def _built_from_resolution(state: BuildState, extractions: Sequence[Extraction]) -> KnowledgeGraph:
    chunks, directory, delta = state.chunks, state.storage.directory, state.delta
    chunk_ids, doc_ids, indexes = chunks.ids, chunks.doc_ids, chunks.indexes

    def rows(positions: Iterable[int]) -> Iterator[ChunkExtraction]:
        """The chunks at ``positions``, with their extractions (only those are read,
        each when the caller reaches it)."""
        return (ChunkExtraction(doc_ids[i], indexes[i], extractions[i]) for i in positions)

    update, retitled, moved = None, None, None
    if delta is not None and not delta.fresh and delta.since is not None:
        touched = delta.added | delta.changed
        # their positions found among the chunks' keys at C speed, not by a pass in
        # Python over every chunk id (a key shared by another chunk is left out after)
        at = np.flatnonzero(np.isin(chunks.rows, rows_of(touched))).tolist() if touched else []
        update = (delta.removed, list(rows(i for i in at if chunk_ids[i] in touched)))
        retitled, moved = delta.retitled, (delta.added, delta.removed)

    def resolved(update: tuple[Iterable[str], list[ChunkExtraction]] | None) -> ResolutionState:
        return resolve_entities(
            directory / RESOLUTION_FILE,
            lambda: rows(range(len(chunk_ids))),
            update,
            since=(delta.since or "") if delta is not None else "",
            tag=delta.build if delta is not None else "",
            facts=ENTITY_FACTS,
            verified=unchanged_since_build(directory, RESOLUTION_FILE),
            source=extraction_source(chunks, extractions),
        )

    def written(resolution: ResolutionState) -> GraphSnapshot:
        # the snapshot written (on PostgreSQL, sent) while the later stages run: a reader
        # opens the graph and the tables of a build once its manifest says complete,
        # which the build writes last, and no reader's tables change under it (an
        # embedded index's are patched where it reads its snapshot of them)
        store = state.storage.graph(fresh=True)
        behind: list[Future[object]] = []
        try:
            return save_state_tables(
                directory,
                resolution,
                chunk_ids,
                chunks,
                store,
                retitled=retitled,
                moved=moved,
                text_ids_into=text_ids,
                behind=behind,
                in_place=state.storage.tables_in_place,
            )
        finally:
            if behind:  # still on its way while the later stages run: closed after it
                state.pending.append(("graph", _then_closed(behind[0], store)))
            else:
                store.close()

    text_ids: list[GraphTextIds] = []
    resolution = resolved(update)
    try:
        try:
            snapshot = written(resolution)
        except StaleState as err:  # a chunk the update did not reach, read for the tables
            logger.warning("graph resolution state stale (%s): building anew", err)
            resolution.close()
            resolution = resolved(None)
            snapshot = written(resolution)
    finally:
        resolution.close()
    state.text_ids = text_ids[0]
    kg, _ = load_tables(directory, snapshot, hold=False)  # no one else writes them now
    return kg


def _then_closed(write: Future[object], store: GraphStore) -> Future[object]:
    """A future done once ``write`` is and ``store`` is closed after it: the write's
    error, else the close's."""
    done: Future[object] = Future()

    def close(written: Future[object]) -> None:
        error = written.exception()
        try:
            store.close()
        except BaseException as exc:  # handed to whoever waits, after the write's own
            error = error or exc
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(None)

    write.add_done_callback(close)
    return done


def extraction_source(chunks: ChunkTable, extractions: Sequence[Extraction]) -> ExtractionSource:
    """The extractions of a build's ``chunks`` (in index order), found by their place
    (a bisection of the table's columns, no pass over every chunk), for the resolution
    state, which keeps none; :class:`StaleState` for a chunk that is not this build's."""
    doc_ids, indexes, ids = chunks.doc_ids, chunks.indexes, chunks.ids
    n = len(ids)

    def place(at: int) -> tuple[str, int]:
        return doc_ids[at], indexes[at]

    def read(wanted: Sequence[tuple[str, str, int]]) -> list[Extraction]:
        found = []
        for chunk_id, doc_id, index in wanted:
            at = bisect.bisect_left(range(n), (doc_id, index), key=place)
            if at == n or ids[at] != chunk_id:
                raise StaleState(f"chunk {chunk_id} is not this build's ({doc_id}, {index})")
            found.append(extractions[at])
        return found

    return read


def _carried_texts(state: BuildState) -> tuple[DistinctTexts, Carried, KeptTexts] | None:
    """The graph's distinct texts carried from those this process kept for the last
    build's tables (:mod:`~quillian.index.distinct_texts`), where the graph stage
    carried its rows from them; with what came and went, and the kept texts."""
    given = state.text_ids
    moves = given.moves if given is not None else None
    if given is None or moves is None:
        return None
    kept = KEPT_TEXTS.get(state.storage.directory, (moves.follows, state.embedder.model_id))
    tables = state.graph().indexes
    if kept is None or not isinstance(tables, StoredTables) or not tables.keyed:
        return None
    moved = carried_texts(kept, given.descriptions, given.relations, moves)
    if moved is None:
        logger.warning("distinct texts not carried: their rows do not follow the last build's")
        return None
    read = tables.texts_reader(moved.ids)
    texts = DistinctTexts(moved.ids, moved.description_rows, moved.relation_rows, read)
    return texts, moved, kept


def unique_texts(kg: KnowledgeGraph, text_ids: GraphTextIds | None = None) -> DistinctTexts:
    """The graph's distinct description and relation texts, and each row's among them
    (``text_ids``: the rows' text ids where the graph stage gave them)."""
    if isinstance(kg.indexes, StoredTables):  # read as text ids, not as rows decoded
        given = None if text_ids is None else (text_ids.descriptions, text_ids.relations)
        return kg.indexes.distinct_texts(given)
    descriptions = [d.text for d in kg.descriptions]
    relations = [r.description or f"{r.subject} {r.predicate} {r.object}" for r in kg.relations]
    return DistinctTexts.of(descriptions, relations)


class EmbedStage:
    """Chunk vectors, and vectors of the graph's distinct description and relation texts,
    each stored under a key derived from its content (:mod:`~.keyed`): the collections
    ``chunks`` and ``texts`` gain the vectors of new keys and lose those of keys no
    longer used, and ``tables/chunk_keys.npy`` and ``tables/text_keys.npy`` give each
    position's key (a chunk's in ``kg.chunk_ids`` order, a text's row)."""

    name = "embed"
    #: Texts per progress report (about 10 s of passages on two cores, with the time
    #: left shown from the second); wide enough that the embedding cache, which embeds
    #: each window shortest first, still batches texts of similar length.
    window = 1024

    def run(self, state: BuildState) -> None:
        carried = _carried_texts(state)
        texts = carried[0] if carried else unique_texts(state.graph(), state.text_ids)
        directory = state.storage.directory
        tables = directory / "tables"
        for what, rows in (
            ("description", texts.description_rows),
            ("relation", texts.relation_rows),
        ):
            save_array(tables, f"{what}_rows", rows)
            indptr, order = text_rows(rows, len(texts.ids))
            save_array(tables, f"{what}_text_indptr", indptr)
            save_array(tables, f"{what}_text_order", order)
        chunks, model_id = state.chunks, state.embedder.model_id

        def names(at: npt.NDArray[np.int64]) -> list[str]:
            return [f"{c.id}\n{chunk_text(c)}" for c in chunks.at(at.tolist())]

        delta = state.delta
        follows = delta is not None and not delta.fresh
        catalog = chunks.catalog or CatalogChanges(None)
        keyed = chunk_keys(
            directory,
            model_id,
            chunks.rows,
            names,
            tag=delta.build if delta is not None else "",
            since=delta.since if follows and delta is not None else None,
            retitled=rows_of(delta.retitled if delta is not None else ()),
            table=catalog.kept,
            follows=catalog.since,
            moves=catalog.moves,
        )
        check_distinct(keyed.keys, lambda i: names(np.array([i]))[0], "chunks")
        _embed_into(
            state,
            "chunks",
            keyed.keys,
            lambda at: [chunk_text(c) for c in chunks.at(at.tolist())],
            self.window,
            keyed,
        )
        model_id = state.embedder.model_id
        if carried is None:
            # the texts' keys kept by text id: only texts not met before are read and hashed
            keys = text_keys(directory, model_id, texts.ids, texts.read)
            check_distinct(keys, lambda i: texts.read(np.array([i]))[0], "texts")
            _embed_into(state, "texts", keys, texts.read, self.window)
            kept = KeptTexts.of(texts.ids, texts.description_rows, texts.relation_rows, keys)
        else:  # the kept texts' keys carried: only the new texts read and hashed
            _, moved, before = carried
            keys = carried_text_keys(
                directory,
                model_id,
                (moved.ids, moved.by_id),
                before.keys,
                moved.moved,
                moved.added,
                texts.read,
            )
            by_key = kept_order(before.by_key, moved.moved, moved.added, keys)
            check_distinct(keys, lambda i: texts.read(np.array([i]))[0], "texts", by_key)
            change = ChunkKeys(keys, before.keys, moved.added, before.keys[moved.moved < 0])
            _embed_into(state, "texts", keys, texts.read, self.window, change)
            kept = moved.kept(keys, by_key)
        if state.text_ids is not None and state.text_ids.tables is not None:
            KEPT_TEXTS.keep(directory, (state.text_ids.tables, model_id), kept)  # the next build's


class EndpointTextStage:
    """Vectors of each relation's text with its endpoint names (``endpoints``, by
    relation index, keyed by the text: ``tables/endpoint_keys.npy``), which triple
    seeding matches the question against.

    A build option, not a default stage (``quillian index --endpoint-texts``): it embeds
    one more text per relation (45-74% of a build's texts on the report's corpora), and
    the fact seeds that read it are off by default (docs/benchmarks.md, "Retrieval
    lift")."""

    name = "endpoint_texts"

    def run(self, state: BuildState) -> None:
        texts = [endpoint_text(r) for r in state.graph().relations]
        keys = vector_keys(state.embedder.model_id, texts)
        check_distinct(keys, texts.__getitem__, "endpoints")
        _embed_into(state, "endpoints", keys, lambda at: [texts[i] for i in at], EmbedStage.window)


#: The file of each keyed collection's position-to-key array, under ``tables/``.
KEYS_FILE = "{}_keys.npy"
_KEYS_NAME = {"chunks": "chunk", "texts": "text", "endpoints": "endpoint"}


def keys_path(directory: Path, collection: str) -> Path:
    """Where the build saves the keys of ``collection`` by position."""
    return directory / "tables" / KEYS_FILE.format(_KEYS_NAME.get(collection, collection))


def _embed_into(
    state: BuildState,
    collection: str,
    keys: npt.NDArray[np.int64],
    texts_at: Callable[[npt.NDArray[np.int64]], list[str]],
    window: int,
    change: ChunkKeys | None = None,
) -> None:
    """Bring the vector collection ``collection`` to ``keys`` (one per position, see
    :func:`vector_keys`): the keys it lacks embedded (``texts_at`` gives the texts of
    positions) and added, the keys no position uses deleted. Saves the keys by position.

    ``change``: where ``keys`` were carried from keys kept by position (distinct), what
    came and went: a collection that holds exactly the kept keys changes by those alone,
    no key compared with every other."""
    carried = change is not None and change.base is not None
    kept = change.base if change is not None and carried else _last_keys(state, collection)
    index, stored = _open_collection(state, collection, kept, distinct=carried)
    try:
        if stored is None and change is not None and carried:
            came, went = change.added, change.gone
            assert came is not None and went is not None  # set with base
            new = came[~np.isin(keys[came], went)]
            index.delete(np.setdiff1d(went, keys[came]))
        else:
            if stored is None:  # holds the kept keys
                stored = np.unique(cast(npt.NDArray[np.int64], kept))
            wanted, first, _ = unique_first(keys)
            new = first[~np.isin(wanted, stored, assume_unique=True)]
            new.sort()
            index.delete(np.setdiff1d(stored, wanted, assume_unique=True))
        for start in range(0, len(new), window):
            batch = new[start : start + window]
            index.add(keys[batch], state.embedder.embed(texts_at(batch)))
            state.progress(f"embed:{collection}", start + len(batch), len(new))
        index.flush()
    finally:
        index.close()
    save_npy(keys_path(state.storage.directory, collection), keys)  # a reader's kept


def _last_keys(state: BuildState, collection: str) -> npt.NDArray[np.int64] | None:
    """The keys by position the last build saved for ``collection`` (None: none)."""
    return (state.kept_keys or {}).get(collection)


def _open_collection(
    state: BuildState,
    collection: str,
    kept: npt.NDArray[np.int64] | None,
    *,
    distinct: bool = False,
) -> tuple[VectorIndex, npt.NDArray[np.int64] | None]:
    """The collection to update and the ids it holds: None where those are the keys
    ``kept`` (by position; ``distinct``: known to be, else made so to be summed up),
    else listed. Started anew when it holds another dimension (an index rebuilt with
    another embedding model) or a file of it is damaged (a build rewrites every damaged
    file)."""
    dim = state.embedder.dim
    index: VectorIndex | None = None
    try:
        index = state.storage.vectors(collection, dim)
        if state.repair and isinstance(index, VerifiedOnUse):
            index.verify()  # an update reads no vectors it keeps: those go unchecked
        if kept is not None and isinstance(index, SummarizedIds):
            if index.ids_summary() == ids_summary(kept if distinct else np.unique(kept)):
                return index, None  # holds what the last build left
            logger.info("vector collection %r: not as the last build left it", collection)
        listed = index.ids()  # checks the ids files left unchecked at the open
        if kept is not None and distinct and ids_summary(listed) == ids_summary(kept):
            return index, None  # summed up: no sort of either
        return index, listed
    except (ConfigError, IndexDamagedError) as exc:
        logger.warning("vector collection %r: %s; writing it anew", collection, exc)
        if index is not None:
            with contextlib.suppress(IndexDamagedError):
                index.close()
    index = state.storage.vectors(collection, dim, fresh=True)
    return index, index.ids()


def _kept_keys(directory: Path) -> dict[str, npt.NDArray[np.int64]]:
    """The keys by position of each collection the last build saved (one that does not
    read is left out: its collection is listed instead)."""
    kept = {}
    for collection in _KEYS_NAME:
        try:
            keys = np.load(keys_path(directory, collection), allow_pickle=False)
        except (OSError, ValueError, EOFError):
            continue
        if keys.dtype == np.int64 and keys.ndim == 1:
            kept[collection] = keys
    return kept


class BM25Stage:
    """A BM25 index over the chunk texts, updated in place: the chunks it does not hold
    yet are tokenized and appended, the ones no longer stored are tombstoned
    (:func:`~quillian.components.retrieval.bm25_incremental.update_bm25`)."""

    name = "bm25"

    def run(self, state: BuildState) -> None:
        chunks = state.chunks
        catalog = chunks.catalog or CatalogChanges(None)  # none: no table named
        update_bm25(
            state.storage.directory / "bm25",
            chunks.ids,
            lambda positions: [chunk_text(c) for c in chunks.at(positions)],
            table=catalog.kept,
            since=catalog.since,
            moves=catalog.moves,
        )
        state.progress("bm25", 1, 1)


DEFAULT_STAGES: tuple[BuildStage, ...] = (
    GraphStage(),
    EmbedStage(),
    BM25Stage(),
)


def run_stages(state: BuildState, stages: Sequence[BuildStage]) -> dict[str, float]:
    """Run ``stages`` in order, then wait for the writes they left on their way
    (:attr:`BuildState.pending`, each one's wait counted in its stage's seconds),
    raising the first error of one, where no stage raised first; returns each stage's
    seconds."""
    seconds: dict[str, float] = {}
    try:
        for stage in stages:
            start = time.perf_counter()
            stage.run(state)
            seconds[stage.name] = time.perf_counter() - start
    finally:  # every write waited for, whatever a stage raised
        errors = []
        for name, write in state.pending:
            start = time.perf_counter()
            errors.append(write.exception())
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start
        state.pending.clear()
    for error in errors:
        if error is not None:
            raise error
    return seconds
