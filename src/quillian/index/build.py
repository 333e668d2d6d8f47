"""Build, update and shrink an index.

Every step is resumable: documents carry an ingestion status, extractions and
embeddings are cached in the key-value store by chunk and text hash, so a killed build
redoes only what it had not stored. Extractions are stored every :data:`EXTRACT_BATCH`
chunks, so a killed build, or one stopped by an extractor's budget
(:class:`~quillian.errors.BudgetExhausted`), keeps its paid-for extractions. After
ingestion, the build stages (:mod:`quillian.index.stages`) rebuild the graph, vectors
and BM25 index over every stored chunk.

The cache holds only what depends on a chunk alone: a
:class:`~quillian.components.extraction.base.LinkingExtractor` stores its
``extract_local`` output. What depends on the corpus (title links, which title aliases
are safe, which names are too ambiguous) is brought up to date at each rebuild by
:func:`~quillian.index.linking.link_corpus`, from the previous build's results,
recomputing only the chunks the change touches, with the same result as recomputing
every chunk. So an index built in several runs, or with documents deleted, equals one
built at once from the same documents.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from quillian import __version__
from quillian.components.chunking.base import Chunker
from quillian.components.embedding.base import Embedder
from quillian.components.embedding.cache import CachedEmbedder
from quillian.components.extraction.base import (
    Extraction,
    Extractor,
    IssueRecorder,
    LinkingExtractor,
)
from quillian.components.extraction.serde import (
    extraction_from_json,
    extraction_to_json,
    stored_extraction,
    uncompressed,
)
from quillian.components.ingestion.pipeline import IngestReport, ingest
from quillian.errors import BudgetExhausted, ConfigError, InputError
from quillian.index.artifacts import building, drop_partials, settle
from quillian.index.chunk_catalog import processed_chunks
from quillian.index.integrity import (
    STORE_DB,
    check_database,
    drop_damaged_tables,
    files_intact,
    record_checked,
    unchanged_since_build,
)
from quillian.index.issues import issues_namespace, store_issues, stored_issues
from quillian.index.layout import (
    SCHEMA_VERSION,
    STAGES,
    index_directory,
    is_server_location,
    local_directory,
    location_name,
    manifest_if_any,
    read_manifest,
    write_manifest,
    writer_lock,
)
from quillian.index.linking import commit_links, link_corpus, linked_extractions
from quillian.index.stages import (
    AMBIGUOUS_MAX_DOCS,
    DEFAULT_STAGES,
    RESOLUTION_FILE,
    BuildStage,
    BuildState,
    run_stages,
)
from quillian.index.storage import Storage, check_vector_dtype, open_storage
from quillian.index.tables import TABLES_DB, stored_chunk_texts
from quillian.stores.protocols import DocStatus, KeyValueStore, iter_batches
from quillian.types import Chunk, Document, Progress, no_progress

__all__ = [
    "EXTRACT_BATCH",
    "BuildReport",
    "IngestStep",
    "build_index",
    "cache_namespace",
    "delete_documents",
    "linked_extractions",
]

#: Chunks per extractor call; each call's extractions are stored before the next.
EXTRACT_BATCH = 16
#: Manifest key listing the documents a delete is removing, written before it removes
#: anything and dropped when its rebuild is done: a delete or build run after a killed
#: delete finishes it first.
DELETING = "deleting"


IngestStep = Callable[[Storage, Progress], IngestReport]
"""Another executor's ingestion (:mod:`quillian.index.ray_build`): it stores documents,
chunks, statuses and per-chunk extractions (and may warm the embedding cache) in the
build's ``storage``, as the single-process ingestion does, and reports what it did."""


@dataclass
class BuildReport:
    """What a build did and how long each stage took."""

    ingest: IngestReport | None = None
    counts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    reused: bool = False
    """Nothing was new and the settings were unchanged: the stages did not run."""
    link_seconds: float = 0.0
    """Seconds spent reading, linking, settling and filtering the extractions (also
    counted in the graph stage's)."""
    relinked: int = 0
    """Chunks linked (or settled) anew: the others' results were the previous build's."""


def build_index(
    documents: Iterable[Document],
    out: str | Path,
    *,
    chunker: Chunker,
    extractor: Extractor,
    embedder: Embedder,
    config: dict[str, Any] | None = None,
    on_progress: Progress | None = None,
    stages: Sequence[BuildStage] = DEFAULT_STAGES,
    ingest_step: IngestStep | None = None,
) -> BuildReport:
    """Ingest ``documents`` into the index at ``out`` and (re)build its graph and indexes.

    Documents already processed in ``out`` are skipped; new ones are added. The
    ``stages`` then run over all stored chunks. The build holds the index's writer lock
    (:func:`~quillian.index.layout.writer_lock`): another build or delete of the same
    index waits for it.

    When the extractor raises :class:`~quillian.errors.BudgetExhausted`, the extractions
    finished so far are stored, the manifest stays ``building`` (the index does not
    open) and the error is re-raised; rerunning the build resumes, extracting only the
    chunks not stored yet.

    ``ingest_step``, when given, ingests in place of the single-process ingestion (and
    ``documents`` is not read): another executor, whose results the same stages build
    on.
    """
    with writer_lock(out), building():
        progress = on_progress or no_progress
        dropped = False  # the graph tables found damaged: written again
        if not is_server_location(out):
            drop_partials(index_directory(out))  # of a killed process's kept writes
            check_database(index_directory(out), up_to=None)
            dropped = drop_damaged_tables(index_directory(out))
        previous = manifest_if_any(out)
        manifest = _begin(out, previous, chunker, extractor, embedder, config)
        manifest[STAGES] = [stage.name for stage in stages]
        report = BuildReport()
        with open_storage(out, create=True) as storage:
            storage.vector_dtype = manifest["config"].get("vector_dtype")
            if pending := manifest.pop(DELETING, ()):  # a killed delete: finish removing
                _purge(storage, extractor, pending)
                write_manifest(out, manifest)
            start = time.perf_counter()

            def hook(docs: Sequence[Document], chunks: Sequence[list[Chunk]]) -> None:
                flat = [c for group in chunks for c in group]
                try:
                    extract_cached(flat, extractor, storage.kv)
                except BudgetExhausted as exc:
                    raise _BudgetStop(exc) from exc

            try:
                report.ingest = (
                    ingest_step(storage, progress)
                    if ingest_step
                    else ingest(
                        documents,
                        chunker=chunker,
                        doc_store=storage.documents,
                        status_store=storage.status,
                        process=hook,
                        on_progress=lambda d, n, _: progress("ingest", d, n),
                    )
                )
            except _BudgetStop as stop:
                raise stop.error from None
            report.seconds["ingest_extract"] = time.perf_counter() - start
            unchanged = _unchanged(previous, manifest, report, pending)
            if (
                unchanged
                and not dropped
                and files_intact(storage.directory, previous, location_name(out))
            ):
                # nothing new, nothing removed, the same settings and stages as the complete
                # build on disk: rebuilding would write the same index again
                # (documents refused by this build are new failures: counted anew)
                report.counts = {
                    **previous.get("counts", {}),
                    "failed_documents": _failed_documents(storage),
                }
                report.reused = True
                manifest.update(
                    state="complete",
                    counts=report.counts,
                    built_at=previous.get("built_at"),
                    build_seconds=previous.get("build_seconds", {}),
                )
                write_manifest(out, manifest)
            else:
                _rebuild(storage, extractor, embedder, progress, stages, report, repair=unchanged)
        if report.reused:  # recorded once the store is closed, as _finish does
            _record_reused(local_directory(out))
        else:
            _finish(out, manifest, report)
        return report


def _unchanged(
    previous: dict[str, Any], manifest: dict[str, Any], report: BuildReport, pending: Any
) -> bool:
    """Whether this build found the index complete and had nothing to change: no
    document added, none being deleted, and the same schema, version, settings and
    stages (an index of an older schema is rebuilt in the new one from its stored
    extractions)."""
    return (
        previous.get("state") == "complete"
        and not pending
        and report.ingest is not None
        and report.ingest.new == 0
        and all(
            previous.get(k) == manifest.get(k)
            for k in ("schema_version", "quillian_version", "config", STAGES)
        )
    )


def delete_documents(
    location: str | Path,
    doc_ids: Sequence[str],
    *,
    extractor: Extractor,
    embedder: Embedder,
    on_progress: Progress | None = None,
    stages: Sequence[BuildStage] = DEFAULT_STAGES,
) -> BuildReport:
    """Remove documents from the index and rebuild it over the rest.

    What only the removed documents supported goes; entities and relations that other
    chunks also state stay, with their other provenance; the cached vectors of texts
    no longer in the index go too. The result equals an index built without those
    documents. A document that failed to index can be removed as well (its status
    goes). Unknown ids raise :class:`InputError` and change nothing. The ids are
    recorded in the manifest (:data:`DELETING`) before anything is removed, so a killed
    delete is finished by the next delete or build. It holds the index's writer lock,
    as a build does.
    """
    with writer_lock(location, create=False), building():
        if not is_server_location(location):  # found damaged: written whole from the rest
            drop_damaged_tables(index_directory(location))
            drop_partials(index_directory(location))  # of a killed process's kept writes
        manifest = read_manifest(location)
        pending = [str(d) for d in manifest.get(DELETING, ())]
        report = BuildReport()
        with open_storage(location) as storage:
            storage.vector_dtype = manifest.get("config", {}).get("vector_dtype")
            found = storage.documents.get_documents(list(doc_ids))
            known = {*pending, *storage.status.get_status(list(doc_ids))}  # failed ones too
            unknown = [
                d for d, doc in zip(doc_ids, found, strict=True) if not doc and d not in known
            ]
            if unknown:
                raise InputError(f"no such document(s) in the index: {', '.join(unknown)}")
            manifest = {**manifest, "state": "building", DELETING: [*pending, *doc_ids]}
            write_manifest(location, manifest)
            _purge(storage, extractor, manifest[DELETING])
            report.deleted = list(doc_ids)
            _rebuild(storage, extractor, embedder, on_progress or no_progress, stages, report)
        del manifest[DELETING]
        _finish(location, manifest, report)
        return report


def _purge(storage: Storage, extractor: Extractor, doc_ids: Sequence[str]) -> None:
    """Remove documents with their chunks, stored extractions and statuses. Each step is
    idempotent and needs nothing an earlier one removes (the chunk ids are read first
    and the extractions go before the chunks), so a killed purge is finished by
    running it again."""
    ids = list(dict.fromkeys(doc_ids))
    chunk_ids = [c.id for d in ids for c in storage.documents.chunks_of(d)]
    storage.kv.delete_many(cache_namespace(extractor), chunk_ids)
    storage.kv.delete_many(issues_namespace(extractor), chunk_ids)
    storage.documents.delete_documents(ids)
    storage.status.delete(ids)


def _begin(
    out: str | Path,
    previous: dict[str, Any],
    chunker: Chunker,
    extractor: Extractor,
    embedder: Embedder,
    config: dict[str, Any] | None,
) -> dict[str, Any]:
    """The manifest of a build starting at ``out`` (state ``building``), written there,
    after the manifest ``previous`` found there (empty: none); an index built with
    another chunker or embedding model is refused before anything is written."""
    built = previous.get("config", {})
    # a build not told the vector dtype keeps the index's own (unrecorded: float32)
    asked = (config or {}).get("vector_dtype")
    dtype = asked or built.get("vector_dtype")
    for what, before, now in (
        ("chunker", built.get("chunker"), chunker.name),
        ("embedding model", built.get("embedder"), embedder.model_id),
        ("embedding dimension", built.get("embedding_dim"), embedder.dim),
        ("vector dtype", built and built.get("vector_dtype", "float32"), dtype or "float32"),
    ):
        if before and before != now:
            raise ConfigError(
                f"{location_name(out)} was built with {what} {before!r}, not {now!r}; "
                f"index into a new location to change the {what}"
            )
    if dtype and built.get("vector_dtype") != dtype:
        check_vector_dtype(out, dtype)  # a server whose pgvector has no float16
    manifest = {
        **previous,
        "schema_version": SCHEMA_VERSION,
        "quillian_version": __version__,
        "state": "building",
        "config": {
            **(config or {}),
            "chunker": chunker.name,
            "extractor": extractor.name,
            "embedder": embedder.model_id,
            "embedding_dim": embedder.dim,
            **({"vector_dtype": dtype} if dtype else {}),
        },
    }
    write_manifest(out, manifest)
    return manifest


def _rebuild(
    storage: Storage,
    extractor: Extractor,
    embedder: Embedder,
    progress: Progress,
    stages: Sequence[BuildStage],
    report: BuildReport,
    *,
    repair: bool = False,
) -> None:
    chunks = processed_chunks(storage, whole=repair)
    start = time.perf_counter()
    linked = link_corpus(
        storage.kv,
        chunks,
        extractor,
        lambda some: extract_cached(some, extractor, storage.kv),
        max_docs=AMBIGUOUS_MAX_DOCS,
        bm25=storage.directory / "bm25",
        commit=False,
        gone_texts=functools.partial(stored_chunk_texts, storage.directory),
    )
    cached = CachedEmbedder(embedder, storage.kv)
    issues = stored_issues(storage.kv, extractor, chunks.ids)
    state = BuildState(
        storage=storage,
        chunks=chunks,
        extractions=linked.extractions,
        embedder=cached,
        progress=progress,
        extraction_issues=issues,
        filtered=linked.filtered,
        delta=linked.delta,
        repair=repair,
    )
    extract_seconds = time.perf_counter() - start
    report.link_seconds, report.relinked = extract_seconds, linked.relinked
    try:
        report.seconds.update(run_stages(state, stages))
    finally:
        state.close()
        settle()  # what a stage wrote aside, before another writer may read it
    commit_links(storage.kv, extractor)
    _forget(storage.kv, cached.namespace)
    if isinstance(extractor, LinkingExtractor):  # linked extractions older versions cached
        _forget(storage.kv, f"extraction:{extractor.name}")
    storage.release_space(pack=linked.delta.fresh)
    if "graph" in report.seconds:  # reading the stored extractions is part of the graph
        report.seconds["graph"] += extract_seconds
    report.counts = {
        "documents": storage.documents.count_documents(),
        "chunks": len(chunks),
        **state.counts,
        "failed_documents": _failed_documents(storage),
    }
    if issues or isinstance(extractor, IssueRecorder):
        report.counts["extraction_issues"] = len(issues)
        report.counts["extraction_failures"] = sum(i.kind == "failed" for i in issues)


def _failed_documents(storage: Storage) -> int:
    """Documents that failed to index and are kept as failed (the build's count)."""
    return storage.status.counts([DocStatus.FAILED])[DocStatus.FAILED]


def _forget(kv: KeyValueStore, namespace: str) -> None:
    """Empty ``namespace`` once a build is complete: the embedding cache (the vectors a
    build's workers or an interrupted run computed, which the vector collections now
    hold: keeping them doubled the index's vectors, 72 MB on the 20 MB text of
    docs/scale.md, and the sweep of a full cache read every key at each update), or
    linked extractions an older version cached."""
    for batch in iter_batches(list(kv.keys(namespace)), 500):
        kv.delete_many(namespace, batch)


def _finish(location: str | Path, manifest: dict[str, Any], report: BuildReport) -> None:
    """Mark the build complete, its databases closed: their stamps recorded, so the next
    build or open skips checking them whole while no one writes them
    (:func:`~quillian.index.integrity.unchanged_since_build`), and the graph tables'
    digest with theirs."""
    manifest.update(
        state="complete",
        counts=report.counts,
        built_at=time.time(),
        build_seconds={k: round(v, 2) for k, v in report.seconds.items()},
    )
    write_manifest(location, manifest)
    record_checked(local_directory(location), (STORE_DB, RESOLUTION_FILE), (TABLES_DB,))


def _record_reused(directory: Path) -> None:
    """Record the databases as a build that reused the index leaves them: the store,
    checked when it began (or unchanged since a record), and the resolution state and
    graph tables only where they are unchanged since the last record (it neither
    checked nor wrote them). A build killed after it marked the index complete, but
    before its record, so leaves one for the next build to find."""
    state = [RESOLUTION_FILE] if unchanged_since_build(directory, RESOLUTION_FILE) else []
    tables = [TABLES_DB] if unchanged_since_build(directory, TABLES_DB) else []
    record_checked(directory, [STORE_DB, *state], tables)


class _BudgetStop(BaseException):
    """Carries :class:`BudgetExhausted` out of ``ingest``, which would otherwise record it
    as a failure of every document in the batch and go on. Like a Ctrl-C, it leaves the
    batch's documents PROCESSING, so the next build redoes them."""

    def __init__(self, error: BudgetExhausted) -> None:
        super().__init__(str(error))
        self.error = error


def cache_namespace(extractor: Extractor) -> str:
    """The key-value namespace of ``extractor``'s stored per-chunk results."""
    if isinstance(extractor, LinkingExtractor):
        return f"mentions:{extractor.name}"
    return f"extraction:{extractor.name}"


def extract_cached(
    chunks: Sequence[Chunk], extractor: Extractor, kv: KeyValueStore
) -> list[Extraction]:
    """Per-chunk results for ``chunks`` (``extract_local`` for a linking extractor, else
    ``extract``): stored ones read back, missing ones computed and stored.

    Missing chunks go to the extractor :data:`EXTRACT_BATCH` at a time and each batch is
    stored before the next; on :class:`BudgetExhausted` the extractions it carries are
    stored too, then it propagates.
    """
    namespace = cache_namespace(extractor)
    run = extractor.extract_local if isinstance(extractor, LinkingExtractor) else extractor.extract
    stale = extractor.stale if isinstance(extractor, StaleAware) else None
    cached = [
        None if raw is None else extraction_from_json(uncompressed(raw))
        for raw in kv.get_many(namespace, [c.id for c in chunks])
    ]
    if stale is not None:  # an older version's results: extracted and stored again
        cached = [None if e is None or stale(e) else e for e in cached]
    missing = [c for c, e in zip(chunks, cached, strict=True) if e is None]
    fresh: dict[str, Extraction] = {}

    def store(extractions: Iterable[Extraction]) -> None:
        batch = {e.chunk_id: e for e in extractions}
        if batch:
            kv.put_many(
                namespace,
                {cid: stored_extraction(extraction_to_json(e)) for cid, e in batch.items()},
            )
            store_issues(kv, extractor, list(batch))
            fresh.update(batch)

    for batch in iter_batches(missing, EXTRACT_BATCH):
        try:
            store(run(batch))
        except BudgetExhausted as exc:
            store(e for e in exc.done if isinstance(e, Extraction))
            raise
    return [fresh[c.id] if e is None else e for c, e in zip(chunks, cached, strict=True)]


@runtime_checkable
class StaleAware(Protocol):
    """An extractor that can tell a stored result of an older version of itself (one
    stored before a field it now needs existed): the build extracts it again and stores
    the new result in its place."""

    def stale(self, extraction: Extraction) -> bool: ...
