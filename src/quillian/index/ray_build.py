"""The Ray executor of a build's ingestion: the same index, the per-document work on Ray.

:class:`RayIngest` is an :data:`~quillian.index.build.IngestStep`: given to
:func:`~quillian.index.build.build_index`, it replaces the single-process ingestion,
and the build then runs the same stages over what it stored. The corpus is read as a
Ray dataset (:mod:`quillian.index.ray_read`), then two actor pools work on batches of
documents:

* :class:`Extract` (one extractor per actor, loaded once) chunks each document and
  extracts its chunks (``extract_local`` for a linking extractor), reading back the
  extractions already stored for a chunk instead;
* :class:`EmbedWrite` (one embedder per actor, loaded once) embeds the chunk texts and
  the texts the graph will embed (entity descriptions, relation texts) that the
  embedding cache lacks, and writes the batch: extractions, issues and cached vectors,
  then documents and chunks, then each document's status, last.

Every write is keyed by a content-derived id (document, chunk, text hash), so a task
Ray retries after a worker died writes nothing twice, and a document counts as done
only once its status says so: a rerun after a killed driver skips the documents marked
processed and redoes the rest, reading their stored extractions back. A PostgreSQL
index takes many writers, and each :class:`EmbedWrite` actor writes to it directly; an
embedded index (SQLite) takes one, a :class:`StoreWriter` actor all writes go through.
The build's stages then read every stored extraction and embedding from the caches.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from quillian.components.embedding.cache import embedding_key
from quillian.components.embedding.factory import make_embedder
from quillian.components.extraction.base import Extraction, Extractor, IssueRecorder
from quillian.components.extraction.serde import (
    extraction_from_json,
    extraction_to_json,
    issues_to_json,
    stored_extraction,
    uncompressed,
)
from quillian.components.factories import make_chunker
from quillian.components.ingestion.pipeline import IngestFailure, IngestReport, is_document_error
from quillian.index.build import cache_namespace
from quillian.index.issues import issues_namespace
from quillian.index.ray_read import document_of
from quillian.index.ray_records import EMBEDDINGS, StoreWriter, WriteBatch
from quillian.index.stages import chunk_text
from quillian.index.storage import Storage
from quillian.stores.protocols import DocStatus
from quillian.types import Chunk, Document, Progress

__all__ = ["RayIngest", "RayJob", "graph_texts", "job_for"]

logger = logging.getLogger(__name__)

#: Times Ray restarts a dead actor and retries its task before the job fails.
WORKER_RETRIES = 3


@dataclass(frozen=True)
class RayJob:
    """What the workers of one build need (sent to every actor, so kept small)."""

    location: str
    chunker: tuple[str, int, int]
    """The chunker's name, size and overlap (:func:`make_chunker`)."""
    extractor: Callable[[], Extractor]
    """Makes the extractor, once per actor: a picklable function."""
    embedder: str
    """The embedder's name (:func:`make_embedder`), loaded once per actor."""
    extraction_namespace: str
    issues_namespace: str | None
    """Where the extractor's issues go; None: it records none."""
    workers: int = 2
    """Actors per pool."""
    batch_size: int = 16
    """Documents per batch (each batch is written as one)."""
    extract_cpus: float = 0.5
    """CPUs an extraction actor holds (less for an LLM extractor, which waits)."""
    embed_cpus: float = 0.5
    """CPUs an embedding actor holds: the two pools of ``workers`` actors share the
    cluster's CPUs (2 workers with half a CPU each per pool fill two CPUs)."""
    many_writers: bool = False
    """The store takes many writers (PostgreSQL): actors write directly."""
    processed: frozenset[str] = field(default_factory=frozenset)
    """Documents already processed, skipped."""


def job_for(
    location: str,
    extractor: Extractor,
    make: Callable[[], Extractor],
    *,
    chunker: tuple[str, int, int],
    embedder: str,
    many_writers: bool,
    **options: Any,
) -> RayJob:
    """The job of a build whose driver holds ``extractor`` (made by ``make``)."""
    return RayJob(
        location,
        chunker,
        make,
        embedder,
        extraction_namespace=cache_namespace(extractor),
        issues_namespace=issues_namespace(extractor)
        if isinstance(extractor, IssueRecorder)
        else None,
        many_writers=many_writers,
        **options,
    )


def graph_texts(extraction: Extraction) -> list[str]:
    """The texts of one extraction the graph stage may embed: its entities'
    descriptions and its relations' texts (as :func:`~quillian.index.stages.unique_texts`
    words them)."""
    texts = [e.description for e in extraction.entities if e.description]
    texts += [t.description or f"{t.subject} {t.predicate} {t.object}" for t in extraction.triples]
    return texts


class _Sink:
    """Where a stage reads cached values and writes its batch: the store itself, or the
    single writer actor."""

    def __init__(self, job: RayJob, writer: Any) -> None:
        self.writer = writer
        self.local = StoreWriter(job.location) if writer is None else None

    def cached(self, namespace: str, keys: list[str]) -> list[bytes | None]:
        if self.local is not None:
            return self.local.cached(namespace, keys)
        import ray

        result: list[bytes | None] = ray.get(self.writer.cached.remote(namespace, keys))
        return result

    def write(self, batch: WriteBatch) -> None:
        if self.local is not None:
            self.local.write(batch)
            return
        import ray

        ray.get(self.writer.write.remote(batch))


def _rows(batch: dict[str, Any]) -> list[dict[str, Any]]:
    keys = list(batch)
    n = len(batch[keys[0]]) if keys else 0
    return [{k: _plain(batch[k][i]) for k in keys} for i in range(n)]


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _columns(rows: list[dict[str, Any]], keys: Sequence[str]) -> dict[str, list[Any]]:
    return {k: [r[k] for r in rows] for k in keys}


_EXTRACTED = ("doc_id", "title", "source", "status", "error", "doc", "chunks", "extractions")
_ISSUES = "issues"


class Extract:
    """Chunks and extracts a batch of documents (a Ray Data actor: one extractor each)."""

    def __init__(self, job: RayJob, writer: Any = None) -> None:
        self.job = job
        self.chunker = make_chunker(*job.chunker)
        self.extractor = job.extractor()
        self.sink = _Sink(job, writer)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        out: list[dict[str, Any]] = []
        todo: list[tuple[Document, list[Chunk]]] = []
        for row in _rows(batch):
            if row["refused"] or row["problem"] or row["fatal"]:
                continue
            doc = document_of(row)
            base = {"doc_id": doc.id, "title": doc.title, "source": doc.source, "error": ""}
            if doc.id in self.job.processed:
                out.append({**base, "status": "skipped"})
                continue
            try:
                todo.append((doc, self.chunker.chunk(doc)))
            except Exception as exc:  # one bad document must not stop the batch
                if not is_document_error(exc):
                    raise
                out.append({**base, "status": "failed", "error": _describe(exc)})
        extracted, issues, errors = self._extract(todo)
        for doc, chunks in todo:
            base = {"doc_id": doc.id, "title": doc.title, "source": doc.source}
            if doc.id in errors:
                out.append({**base, "status": "failed", "error": errors[doc.id]})
                continue
            out.append(
                {
                    **base,
                    "status": "new",
                    "error": "",
                    "doc": json.dumps(asdict(doc)),
                    "chunks": json.dumps([asdict(c) for c in chunks]),
                    "extractions": json.dumps([extracted[c.id] for c in chunks]),
                    _ISSUES: json.dumps({c.id: issues[c.id] for c in chunks if c.id in issues}),
                }
            )
        for row in out:
            for key in (*_EXTRACTED, _ISSUES):
                row.setdefault(key, "" if key != _ISSUES else "{}")
        return _columns(out, (*_EXTRACTED, _ISSUES))

    def _extract(
        self, todo: list[tuple[Document, list[Chunk]]]
    ) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        """Each chunk's extraction (stored, else extracted; as JSON), the issues of those
        extracted now, and the documents whose extraction failed, with the error."""
        chunks = [c for _, group in todo for c in group]
        stored = self.sink.cached(self.job.extraction_namespace, [c.id for c in chunks])
        extracted = {
            c.id: uncompressed(raw).decode() for c, raw in zip(chunks, stored, strict=True) if raw
        }
        missing = [(doc, [c for c in group if c.id not in extracted]) for doc, group in todo]
        missing = [(doc, group) for doc, group in missing if group]
        issues: dict[str, str] = {}
        errors: dict[str, str] = {}
        self._run(missing, extracted, issues, errors)
        return extracted, issues, errors

    def _run(
        self,
        todo: list[tuple[Document, list[Chunk]]],
        extracted: dict[str, str],
        issues: dict[str, str],
        errors: dict[str, str],
    ) -> None:
        """Extract ``todo`` in one call; when it fails, one document at a time."""
        if not todo:
            return
        run = getattr(self.extractor, "extract_local", self.extractor.extract)
        try:
            results = run([c for _, group in todo for c in group])
        except Exception as exc:  # the batch boundary: find the failing documents
            if not is_document_error(exc):
                raise
            if len(todo) == 1:
                errors[todo[0][0].id] = _describe(exc)
                return
            for one in todo:
                self._run([one], extracted, issues, errors)
            return
        extracted.update({e.chunk_id: extraction_to_json(e).decode() for e in results})
        if isinstance(self.extractor, IssueRecorder):
            by_chunk: dict[str, list[Any]] = {}
            for issue in self.extractor.take_issues():
                by_chunk.setdefault(issue.chunk_id, []).append(issue)
            issues.update({cid: issues_to_json(i).decode() for cid, i in by_chunk.items()})


class EmbedWrite:
    """Embeds what the cache lacks and writes a batch (a Ray Data actor: one embedder
    each); returns one small row per document for the driver's report."""

    def __init__(self, job: RayJob, writer: Any = None) -> None:
        self.job = job
        self.embedder = make_embedder(job.embedder)
        self.sink = _Sink(job, writer)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        rows = _rows(batch)
        write = WriteBatch(
            extraction_namespace=self.job.extraction_namespace,
            issues_namespace=self.job.issues_namespace,
        )
        texts: list[str] = []
        for row in rows:
            if row["status"] == "failed":
                write.failed.append((row["doc_id"], row["source"], row["error"]))
            if row["status"] != "new":
                continue
            chunks = [Chunk(**c) for c in json.loads(row["chunks"])]
            extractions = json.loads(row["extractions"])
            issues = json.loads(row[_ISSUES])
            write.documents.append(Document(**json.loads(row["doc"])))
            write.chunks.extend(chunks)
            for chunk, raw in zip(chunks, extractions, strict=True):
                write.extractions[chunk.id] = stored_extraction(raw.encode())
                write.issues[chunk.id] = issues[chunk.id].encode() if chunk.id in issues else None
                texts.append(chunk_text(chunk))
                texts.extend(graph_texts(extraction_from_json(raw.encode())))
            write.processed.append((row["doc_id"], row["source"]))
        write.embeddings = self._embed_missing(texts)
        self.sink.write(write)
        return _columns(
            [
                {
                    "doc_id": r["doc_id"],
                    "title": r["title"],
                    "source": r["source"],
                    "status": "processed" if r["status"] == "new" else r["status"],
                    "error": r["error"],
                    "chunks": len(json.loads(r["chunks"])) if r["status"] == "new" else 0,
                }
                for r in rows
            ],
            ("doc_id", "title", "source", "status", "error", "chunks"),
        )

    def _embed_missing(self, texts: list[str]) -> dict[str, bytes]:
        """Vectors of the distinct ``texts`` the embedding cache does not hold."""
        model = self.embedder.model_id
        by_key = {embedding_key(model, t): t for t in texts}
        keys = list(by_key)
        cached = self.sink.cached(EMBEDDINGS, keys)
        missing = [k for k, raw in zip(keys, cached, strict=True) if raw is None]
        if not missing:
            return {}
        order = sorted(missing, key=lambda k: len(by_key[k]))  # as the cache batches them
        vectors = np.asarray(self.embedder.embed([by_key[k] for k in order]), dtype=np.float32)
        return {k: vectors[i].tobytes() for i, k in enumerate(order)}


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class RayIngest:
    """An :data:`~quillian.index.build.IngestStep` running the ingestion on Ray, over
    ``documents`` (a Ray dataset of :mod:`~quillian.index.ray_read` rows, ``total`` of
    them storable: rows refused or holding a problem are left out by :class:`Extract`);
    ``unstorable`` are the documents no store can hold, marked failed by the driver."""

    def __init__(
        self,
        ray: Any,
        documents: Any,
        job: RayJob,
        *,
        total: int,
        unstorable: Sequence[IngestFailure] = (),
    ) -> None:
        self.ray = ray
        self.documents = documents
        self.job = job
        self.total = total
        self.unstorable = list(unstorable)

    def __call__(self, storage: Storage, progress: Progress) -> IngestReport:
        for failure in self.unstorable:
            storage.status.set_status(
                [failure.doc_id], DocStatus.FAILED, error=failure.error, source=failure.source
            )
        processed = frozenset(storage.status.ids_with_status(DocStatus.PROCESSED))
        job = replace(self.job, processed=processed)
        writer = self._writer(job)
        try:
            rows = self._run(job, writer, self.total, progress)
        finally:
            if writer is not None:
                self.ray.kill(writer)
        return _report(rows, self.unstorable)

    def _writer(self, job: RayJob) -> Any:
        if job.many_writers:
            return None
        actor = self.ray.remote(StoreWriter).options(
            num_cpus=0, max_restarts=WORKER_RETRIES, max_task_retries=WORKER_RETRIES
        )
        return actor.remote(job.location)

    def _run(
        self, job: RayJob, writer: Any, total: int, progress: Progress
    ) -> list[dict[str, Any]]:
        retries = {"max_restarts": WORKER_RETRIES, "max_task_retries": WORKER_RETRIES}

        def pool() -> dict[str, Any]:
            strategy = self.ray.data.ActorPoolStrategy(size=job.workers)
            return {"batch_size": job.batch_size, "compute": strategy, "batch_format": "numpy"}

        with warnings.catch_warnings():
            # Ray Data 2.60 deprecates passing the restart limits as keywords, and offers
            # no other way to bound them (its default: restart for ever)
            warnings.filterwarnings("ignore", message=".*ray_remote_args.*")
            data = self.documents.map_batches(
                Extract,
                fn_constructor_args=(job, writer),
                num_cpus=job.extract_cpus,
                **pool(),
                **retries,
            ).map_batches(
                EmbedWrite,
                fn_constructor_args=(job, writer),
                num_cpus=job.embed_cpus,
                **pool(),
                **retries,
            )
        rows: list[dict[str, Any]] = []
        for row in data.iter_rows():
            rows.append(dict(row))
            progress("ingest", len(rows), total)
        return rows


def _report(rows: list[dict[str, Any]], unstorable: Sequence[IngestFailure]) -> IngestReport:
    """The ingestion's report from each document's row (a document read twice counted
    once, as a duplicate)."""
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        seen.setdefault(row["doc_id"], row)
    statuses = [r["status"] for r in seen.values()]
    failures = [
        IngestFailure(r["doc_id"], r["title"], r["source"], r["error"])
        for r in seen.values()
        if r["status"] == "failed"
    ]
    return IngestReport(
        total=len(seen) + len(unstorable),
        new=statuses.count("processed"),
        skipped=statuses.count("skipped"),
        failed=len(failures) + len(unstorable),
        duplicates=len(rows) - len(seen),
        chunks=sum(int(r["chunks"]) for r in seen.values()),
        failures=(*unstorable, *failures),
    )
