"""Build and open a self-contained index directory.

Layout (``SCHEMA_VERSION`` 1)::

    DIR/manifest.json        schema version, state (building | complete), config, counts
    DIR/store.sqlite         documents, chunks, ingestion status, extractions, embedding cache
    DIR/graph/               the graph snapshot (CSR arrays, memory-mapped)
    DIR/tables/              entities, descriptions, relations (JSONL) and row maps (.npy)
    DIR/vectors/chunks/      chunk embeddings (id = chunk position)
    DIR/vectors/texts/       embeddings of description and relation texts (deduplicated)
    DIR/bm25/                the BM25 index

Every stage is resumable: documents carry an ingestion status, extractions and
embeddings are cached in ``store.sqlite`` by chunk and text hash, so a killed build
redoes only what it had not stored. Extractions are stored every
:data:`EXTRACT_BATCH` chunks, so a killed build, or one stopped by an extractor's budget
(:class:`~quillian.errors.BudgetExhausted`), keeps its paid-for extractions. The
manifest says ``building`` until the last artifact is written; an index in that state
refuses to open for retrieval.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian import __version__
from quillian.components.chunking.base import Chunker
from quillian.components.embedding.base import Embedder
from quillian.components.embedding.cache import CachedEmbedder
from quillian.components.extraction.base import Extraction, Extractor
from quillian.components.extraction.filters import drop_ambiguous_names
from quillian.components.extraction.serde import (
    extraction_from_json,
    extraction_to_json,
    triple_from_dict,
)
from quillian.components.graph.builder import (
    DescriptionRecord,
    EntityRecord,
    GraphBuilder,
    KnowledgeGraph,
)
from quillian.components.graph.snapshot import GraphSnapshot
from quillian.components.ingestion.pipeline import IngestReport, ingest
from quillian.components.retrieval.bm25 import BM25Index
from quillian.components.retrieval.context import RetrievalContext
from quillian.errors import (
    BudgetExhausted,
    ConfigError,
    IndexIncompleteError,
    IndexMissingError,
    IndexSchemaError,
    InputError,
)
from quillian.stores.embedded.sqlite import (
    SqliteDocumentStore,
    SqliteKeyValueStore,
    SqliteStatusStore,
)
from quillian.stores.embedded.vectors import ExactVectorIndex
from quillian.stores.protocols import DocStatus, iter_batches
from quillian.types import Chunk, Document

__all__ = ["SCHEMA_VERSION", "BuildReport", "Index", "build_index", "open_index"]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
#: A one-word entity name used by more documents than this, and no document's title, is
#: dropped before the graph is built (``drop_ambiguous_names``): "John" is not an entity.
AMBIGUOUS_MAX_DOCS = 3
MANIFEST = "manifest.json"
#: Chunks per extractor call; each call's extractions are stored before the next.
EXTRACT_BATCH = 16
#: ``(stage, done, total)``; stages: ingest, extract, graph, embed, bm25.
StageProgress = Callable[[str, int, int], None]


@dataclass
class BuildReport:
    """What a build did and how long each stage took."""

    ingest: IngestReport | None = None
    counts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of an index directory, checked for schema version and state."""
    if not directory.is_dir():
        raise IndexMissingError(f"{directory}: no such index directory")
    path = directory / MANIFEST
    if not path.is_file():
        raise IndexMissingError(f"{directory}: not a Quillian index (no {MANIFEST})")
    try:
        manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IndexIncompleteError(f"{path}: unreadable manifest ({exc})") from exc
    version = manifest.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise IndexSchemaError(
            f"{directory}: index schema version {version!r} is newer than this Quillian "
            f"supports ({SCHEMA_VERSION}); upgrade Quillian to open it"
        )
    return manifest


def _write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    tmp = directory / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
    tmp.replace(directory / MANIFEST)


def _chunk_text(chunk: Chunk) -> str:
    return f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text


class _Stores:
    def __init__(self, directory: Path) -> None:
        db = directory / "store.sqlite"
        self.docs = SqliteDocumentStore(db)
        self.status = SqliteStatusStore(db)
        self.kv = SqliteKeyValueStore(db)

    def close(self) -> None:
        for store in (self.docs, self.status, self.kv):
            store.close()


def build_index(
    documents: Iterable[Document],
    out: str | Path,
    *,
    chunker: Chunker,
    extractor: Extractor,
    embedder: Embedder,
    config: dict[str, Any] | None = None,
    on_progress: StageProgress | None = None,
) -> BuildReport:
    """Ingest ``documents`` into the index at ``out`` and (re)build its graph and indexes.

    Documents already processed in ``out`` are skipped; new ones are added. The graph,
    vectors and BM25 index are rebuilt over all stored chunks.

    When the extractor raises :class:`~quillian.errors.BudgetExhausted`, the extractions
    finished so far are stored, the manifest stays ``building`` (the index does not
    open) and the error is re-raised; rerunning the build resumes, extracting only the
    chunks not stored yet.
    """
    directory = Path(out)
    previous: dict[str, Any] = {}
    if (directory / MANIFEST).exists():
        previous = read_manifest(directory)
        built_with = previous.get("config", {}).get("chunker")
        if built_with and built_with != chunker.name:
            raise ConfigError(
                f"{directory} was built with chunker {built_with!r}, not {chunker.name!r}; "
                "index into a new directory to change the chunking"
            )
    directory.mkdir(parents=True, exist_ok=True)
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
        },
    }
    _write_manifest(directory, manifest)
    progress = on_progress or (lambda stage, done, total: None)
    report = BuildReport()
    stores = _Stores(directory)
    try:
        cache = CachedEmbedder(embedder, stores.kv)
        namespace = f"extraction:{extractor.name}"
        t = time.perf_counter()

        def hook(docs: Sequence[Document], chunks: Sequence[list[Chunk]]) -> None:
            flat = [c for group in chunks for c in group]
            try:
                _extract(flat, extractor, stores.kv, namespace)
            except BudgetExhausted as exc:
                raise _BudgetStop(exc) from exc

        try:
            report.ingest = ingest(
                documents,
                chunker=chunker,
                doc_store=stores.docs,
                status_store=stores.status,
                process=hook,
                on_progress=lambda d, n, _: progress("ingest", d, n),
            )
        except _BudgetStop as stop:
            raise stop.error from None
        report.seconds["ingest_extract"] = time.perf_counter() - t
        chunks = _processed_chunks(stores)
        t = time.perf_counter()
        extractions = drop_ambiguous_names(
            _extract(chunks, extractor, stores.kv, namespace), max_docs=AMBIGUOUS_MAX_DOCS
        )
        builder = GraphBuilder()
        builder.add_all(extractions)
        kg = builder.build([c.id for c in chunks])
        _save_graph(directory, kg)
        report.seconds["graph"] = time.perf_counter() - t
        progress("graph", 1, 1)
        t = time.perf_counter()
        _embed_all(directory, kg, chunks, cache, progress)
        report.seconds["embed"] = time.perf_counter() - t
        t = time.perf_counter()
        _replace_dir(
            directory / "bm25", lambda p: BM25Index.build([_chunk_text(c) for c in chunks]).save(p)
        )
        report.seconds["bm25"] = time.perf_counter() - t
        progress("bm25", 1, 1)
        report.counts = {
            "documents": stores.docs.count_documents(),
            "chunks": len(chunks),
            "entities": kg.n_entities,
            "descriptions": len(kg.descriptions),
            "relations": len(kg.relations),
            "nodes": kg.snapshot.n_nodes,
            "edges": kg.snapshot.n_edges,
            "failed_documents": stores.status.counts().get(DocStatus.FAILED, 0),
        }
    finally:
        stores.close()
    manifest.update(
        state="complete",
        counts=report.counts,
        built_at=time.time(),
        build_seconds={k: round(v, 2) for k, v in report.seconds.items()},
    )
    _write_manifest(directory, manifest)
    return report


def _processed_chunks(stores: _Stores) -> list[Chunk]:
    processed = {r.doc_id for r in stores.status.with_status(DocStatus.PROCESSED)}
    chunks = [c for c in stores.docs.iter_chunks() if c.doc_id in processed]
    chunks.sort(key=lambda c: (c.doc_id, c.index))
    return chunks


class _BudgetStop(BaseException):
    """Carries :class:`BudgetExhausted` out of ``ingest``, which would otherwise record it
    as a failure of every document in the batch and go on. Like a Ctrl-C, it leaves the
    batch's documents PROCESSING, so the next build redoes them."""

    def __init__(self, error: BudgetExhausted) -> None:
        super().__init__(str(error))
        self.error = error


def _extract(
    chunks: Sequence[Chunk], extractor: Extractor, kv: SqliteKeyValueStore, namespace: str
) -> list[Extraction]:
    """Extractions for ``chunks``: cached ones read back, missing ones computed and stored.

    Missing chunks go to the extractor :data:`EXTRACT_BATCH` at a time and each batch is
    stored before the next; on :class:`BudgetExhausted` the extractions it carries are
    stored too, then it propagates.
    """
    cached = kv.get_many(namespace, [c.id for c in chunks])
    missing = [c for c, raw in zip(chunks, cached, strict=True) if raw is None]
    fresh: dict[str, Extraction] = {}

    def store(extractions: Iterable[Extraction]) -> None:
        batch = {e.chunk_id: e for e in extractions}
        if batch:
            kv.put_many(namespace, {cid: extraction_to_json(e) for cid, e in batch.items()})
            fresh.update(batch)

    for batch in iter_batches(missing, EXTRACT_BATCH):
        try:
            store(extractor.extract(batch))
        except BudgetExhausted as exc:
            store(e for e in exc.done if isinstance(e, Extraction))
            raise
    return [
        fresh[c.id] if raw is None else extraction_from_json(raw)
        for c, raw in zip(chunks, cached, strict=True)
    ]


def _replace_dir(target: Path, write: Callable[[Path], None]) -> None:
    """Write a directory artifact next to ``target`` and swap it in."""
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write(tmp)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


def _save_graph(directory: Path, kg: KnowledgeGraph) -> None:
    _replace_dir(directory / "graph", kg.snapshot.save)

    def tables(path: Path) -> None:
        _jsonl(path / "entities.jsonl", (asdict(e) for e in kg.entities))
        _jsonl(path / "descriptions.jsonl", (asdict(d) for d in kg.descriptions))
        _jsonl(path / "relations.jsonl", (asdict(r) for r in kg.relations))
        _jsonl(path / "chunks.jsonl", ({"id": c} for c in kg.chunk_ids))
        np.save(path / "relation_subject.npy", kg.relation_subject)
        np.save(path / "relation_object.npy", kg.relation_object)

    _replace_dir(directory / "tables", tables)


def _jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _unique_texts(
    kg: KnowledgeGraph,
) -> tuple[list[str], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Distinct description and relation texts, and each one's row among them."""
    rows: dict[str, int] = {}
    desc_rows = np.array(
        [rows.setdefault(d.text, len(rows)) for d in kg.descriptions], dtype=np.int64
    )
    rel_rows = np.array(
        [
            rows.setdefault(r.description or f"{r.subject} {r.predicate} {r.object}", len(rows))
            for r in kg.relations
        ],
        dtype=np.int64,
    )
    return list(rows), desc_rows, rel_rows


def _embed_all(
    directory: Path,
    kg: KnowledgeGraph,
    chunks: Sequence[Chunk],
    embedder: Embedder,
    progress: StageProgress,
) -> None:
    texts, desc_rows, rel_rows = _unique_texts(kg)
    np.save(directory / "tables" / "description_rows.npy", desc_rows)
    np.save(directory / "tables" / "relation_rows.npy", rel_rows)
    for name, items in (("chunks", [_chunk_text(c) for c in chunks]), ("texts", texts)):

        def write(path: Path, items: list[str] = items, name: str = name) -> None:
            index = ExactVectorIndex(path, embedder.dim)
            step = 8192  # a wide window: the cache embeds each window shortest first
            for start in range(0, len(items), step):
                batch = items[start : start + step]
                index.add(np.arange(start, start + len(batch)), embedder.embed(batch))
                progress(f"embed:{name}", start + len(batch), len(items))
            index.flush()
            index.close()

        _replace_dir(directory / "vectors" / name, write)


@dataclass
class Index:
    """An opened index: its manifest and the read-only retrieval context."""

    directory: Path
    manifest: dict[str, Any]
    context: RetrievalContext


def load_graph(directory: Path) -> KnowledgeGraph:
    tables = directory / "tables"
    return KnowledgeGraph(
        snapshot=GraphSnapshot.load(directory / "graph"),
        entities=[EntityRecord(**row) for row in _read_jsonl(tables / "entities.jsonl")],
        descriptions=[
            DescriptionRecord(**row) for row in _read_jsonl(tables / "descriptions.jsonl")
        ],
        chunk_ids=[row["id"] for row in _read_jsonl(tables / "chunks.jsonl")],
        relations=[triple_from_dict(row) for row in _read_jsonl(tables / "relations.jsonl")],
        relation_subject=np.load(tables / "relation_subject.npy"),
        relation_object=np.load(tables / "relation_object.npy"),
    )


def open_index(path: str | Path, embedder: Embedder) -> Index:
    """Open a complete index for retrieval; ``embedder`` must match the one it was built with."""
    directory = Path(path)
    manifest = read_manifest(directory)
    if manifest.get("state") != "complete":
        raise IndexIncompleteError(
            f"{directory}: index is incomplete (state {manifest.get('state')!r}); "
            "rerun `quillian index` to resume the build"
        )
    built_with = manifest.get("config", {}).get("embedder")
    if built_with and built_with != embedder.model_id:
        raise InputError(
            f"index was built with embedder {built_with!r} but {embedder.model_id!r} was given",
            path=str(directory),
        )
    kg = load_graph(directory)
    docs = SqliteDocumentStore(directory / "store.sqlite")
    try:
        chunks = docs.get_chunks(kg.chunk_ids)
    finally:
        docs.close()
    if any(c is None for c in chunks):
        raise IndexIncompleteError(f"{directory}: chunk table and graph disagree")
    context = RetrievalContext(
        kg=kg,
        embedder=embedder,
        chunk_vectors=ExactVectorIndex(directory / "vectors" / "chunks"),
        text_vectors=ExactVectorIndex(directory / "vectors" / "texts"),
        description_rows=np.load(directory / "tables" / "description_rows.npy"),
        relation_rows=np.load(directory / "tables" / "relation_rows.npy"),
        chunk_titles=[c.title for c in chunks if c is not None],
        chunk_texts=[c.text for c in chunks if c is not None],
        bm25=BM25Index.load(directory / "bm25"),
    )
    return Index(directory, manifest, context)
