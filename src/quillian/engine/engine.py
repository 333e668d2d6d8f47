"""The one seam the edges hold: an :class:`Engine` turns an index location, an LLM spec,
a knowledge-graph spec and options into retrievers and running methods.

The CLI, the benchmarks, DPO data and the server ask the engine, never the components:
what a method needs is read from the method table (:mod:`quillian.methods.table`), so
no edge wires retrievers, graphs and models itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from quillian.components.concurrency import ThreadOffload
from quillian.components.embedding.base import Embedder
from quillian.components.embedding.batching import QueryBatcher
from quillian.components.embedding.cache import CachedEmbedder
from quillian.components.embedding.factory import DEFAULT_EMBEDDER, embedder_name, make_embedder
from quillian.components.factories import (
    EMBEDS_QUERY,
    RETRIEVERS,
    SA_RETRIEVERS,
    make_retriever,
)
from quillian.components.kg.base import ExternalGraph
from quillian.components.kg.spec import GraphSpec, make_bridges, make_graph
from quillian.components.kg.store import read_manifest as read_graph_manifest
from quillian.components.llm.accounting import Ledger
from quillian.components.llm.base import ChatModel
from quillian.components.llm.prompts import PromptRegistry
from quillian.components.llm.spec import LLMSession
from quillian.components.llm.tasks import TaskRunner
from quillian.components.prompts import default_registry
from quillian.components.retrieval.base import RetrievalResult, Retriever, check_k
from quillian.config import build_config
from quillian.engine.documents import (
    DocumentPage,
    DocumentText,
    forget_unfinished,
    get_document,
    known_documents,
    list_documents,
    settings_of,
)
from quillian.engine.indexing import IndexSettings, delete_documents, index_documents
from quillian.engine.kge import open_knowledge
from quillian.errors import ConfigError, QuillianError
from quillian.index import BuildReport, Index, open_index, read_manifest
from quillian.index.layout import generation, index_location, local_directory, location_name
from quillian.methods.base import AnswerResult, PipelineBase, RunObserver
from quillian.methods.know3.check import KGECheck, Verification, verify_answer
from quillian.methods.know3.config import Know3Config
from quillian.methods.know3.knowledge import Know3Knowledge
from quillian.methods.spec import MethodSpec
from quillian.methods.table import method_spec
from quillian.stores.embedded.sqlite import SqliteKeyValueStore
from quillian.types import Document, Progress

__all__ = ["MAX_QUESTION_CHARS", "Engine", "EngineOptions"]

logger = logging.getLogger(__name__)

#: Embedders computed without a model: never cached.
MODEL_FREE_EMBEDDERS = ("hash", "keyword")

#: The longest question (characters) the engine takes unless told otherwise
#: (:attr:`EngineOptions.max_question_chars`), and the HTTP and MCP edges take: about a
#: thousand tokens, a few seconds of prompt for the local model on a CPU, where a
#: 100,000-character question ran 8.5 minutes.
MAX_QUESTION_CHARS = 4000


@dataclass(frozen=True)
class EngineOptions:
    """How an engine reaches its model and runs work."""

    llm: str | ChatModel | None = None
    """The LLM spec (``local``, ``openai:MODEL``, ``http://host:port/v1#MODEL``,
    ``scripted:routes.json``) or a chat model; None: retrieval only."""
    kg: str | None = None
    """The knowledge graph spec of the KG methods (see :mod:`quillian.components.kg.spec`)."""
    api_key: str = ""
    cache_path: Path | None = None
    """The LLM response cache (SQLite); None: no cache."""
    prompt_overrides: tuple[Path, ...] = ()
    concurrency: int = 4
    """LLM calls in flight at once."""
    workers: int = 4
    """Threads for CPU-bound retrieval and graph work."""
    blas_threads: int | None = None
    """Threads of the BLAS library under numpy's matrix products in each of those
    (None: the library's own; a server sets 1, see
    :attr:`~quillian.server.settings.ServerSettings.blas_threads`)."""
    embedder: str | None = None
    """The embedder's name; None: the one the index (else the imported graph) was built
    with."""
    retriever_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per retriever kind, config overrides (``{"sa-paper": {"hops": 4}}``)."""
    embedding_cache: Path | None = None
    """An SQLite file keeping every text the engine embeds (questions, above all), so a
    question asked again loads no embedding model; None: no cache."""
    on_progress: Progress | None = None
    """Reports long steps the engine starts on demand (loading a local model)."""
    lazy_model: bool = False
    """Load a local model on the first call the response cache misses, not when the
    engine's ``async with`` starts (a one-shot command; a server keeps False)."""
    max_question_chars: int = MAX_QUESTION_CHARS
    """The longest question (characters) retrieval and answering take; a longer one is
    refused before any work."""
    refresh_s: float | None = 1.0
    """At most how often (seconds) the opened index is checked for a newer complete
    build written by another process (``quillian index`` beside a server), which is
    then opened in its place; None: never."""
    pin_vectors: bool = False
    """Hold a PostgreSQL index's vectors in memory from the build opened (a server
    replica: it answers from that build while another process rebuilds the workspace);
    False: search them on the server."""


class Engine:
    """Retrieval and answering over one index (or none, for methods that need none).

    Open it with :meth:`open`; use ``async with engine:`` around answering, which starts
    the LLM session (and closes its cache and clients at the end). Retrieval needs no
    session. The index, graph and retrievers are opened on first use and kept; when
    another process completes a build of the index, the next use after
    :attr:`EngineOptions.refresh_s` opens it in their place (while that build runs, the
    opened index keeps serving the build it was opened at).
    """

    def __init__(self, location: str | Path | None, options: EngineOptions) -> None:
        self.location = index_location(location) if location is not None else None
        self.options = options
        self.prompts = _prompts(options.prompt_overrides)
        self._index: Index | None = None
        self._graph: ExternalGraph | None = None
        self._retrievers: dict[tuple[str, bool], Retriever] = {}
        self._knowledge: Know3Knowledge | None = None
        self._session: LLMSession | None = None
        self._sessions = contextlib.AsyncExitStack()  # knowledge models' sessions
        self._runners: dict[str, TaskRunner] = {}
        self._runners_lock = asyncio.Lock()
        self._offload = ThreadOffload(options.workers, options.blas_threads)
        self._batcher = QueryBatcher(self._embed_queries, self._offload)
        self._opening = threading.RLock()  # two questions at once open things once
        # one thread opens a newer build at a time (two opening at once also met CPython
        # 3.11.7's "AST constructor recursion depth mismatch" in numpy's header parsing)
        self._checking = threading.Lock()
        self._checked = 0.0  # when it last looked (time.monotonic)
        self._embedding_cache: SqliteKeyValueStore | None = None
        #: The embedders made, by name: a newer build opened with the same embedder reuses
        #: its loaded model, so the first queries after a build do not pay for loading
        #: it again (under load, seconds of every client's requests stalled behind it).
        self._embedders: dict[str, Embedder] = {}
        if options.kg is not None:
            GraphSpec.parse(options.kg)  # a malformed spec fails now, not mid-answer

    @classmethod
    def open(cls, location: str | Path | None = None, **options: Any) -> Engine:
        """An engine over the index at ``location`` (checked now: it must exist)."""
        if location is not None:
            read_manifest(location)
        return cls(location, EngineOptions(**options))

    # --- what is opened on demand ---------------------------------------------------

    @property
    def index(self) -> Index:
        """The opened index, with the embedder it was built with."""
        self._check_newer()
        with self._opening:
            if self._index is None:
                if self.location is None:
                    raise ConfigError("this needs an index; give its directory")
                self._index = self._open_index()
                self._checked = time.monotonic()
            return self._index

    def _check_newer(self) -> None:
        """Open the index again when another process completed a build of it since it was
        opened (looked at no more often than ``refresh_s``). The new index is opened
        before it replaces the old, so calls in flight and those arriving meanwhile use
        the old one; if it cannot be opened (a build began again), the old one serves on."""
        opened, every = self._index, self.options.refresh_s
        if opened is None or every is None or self.location is None:
            return
        if time.monotonic() - self._checked < every or not self._checking.acquire(blocking=False):
            return
        try:
            self._open_newer(opened)
        except QuillianError as exc:
            logger.warning("%s: keeping the index opened earlier: %s", self._name(), exc)
        finally:
            self._checking.release()

    def refresh(self) -> bool:
        """Open the index's newest complete build now, if it is not the one opened: the
        first open, or a newer build in place of the opened one, which serves the calls
        in flight and those arriving meanwhile (a server's watcher calls this when the
        manifest's generation changes, so no request pays for the open). Returns whether
        a build was opened; raises :class:`~quillian.errors.QuillianError` when it
        cannot be (incomplete, damaged, the server away), the opened one serving on."""
        if self.location is None:
            return False
        with self._checking:
            opened = self._index
            if opened is None:
                with self._opening:
                    if self._index is not None:
                        return False
                    self._index = self._open_index()
                    self._checked = time.monotonic()
                return True
            return self._open_newer(opened)

    @property
    def opened_generation(self) -> int | None:
        """The manifest generation of the opened index (None: none opened yet)."""
        opened = self._index
        return None if opened is None else generation(opened.manifest)

    def _open_newer(self, opened: Index) -> bool:
        """Open the stored build in place of ``opened`` if it is complete and newer;
        whether it did (the caller holds ``_checking``)."""
        assert self.location is not None
        self._checked = time.monotonic()
        manifest = read_manifest(self.location)
        if manifest.get("state") != "complete":
            return False
        if generation(manifest) == generation(opened.manifest):
            return False
        newer = self._open_index()
        with self._opening:
            if self._index is not opened:
                return False
            self._forget()
            self._index = newer
        logger.info("%s: opened the build another process completed", self._name())
        return True

    def _open_index(self) -> Index:
        assert self.location is not None
        return open_index(self.location, self.embedder(), pin_vectors=self.options.pin_vectors)

    def _name(self) -> str:
        return location_name(self.location) if self.location is not None else "(no index)"

    def embedder(self) -> Embedder:
        """The embedder named in the options, else the index's own; behind the
        ``embedding_cache`` when the options give one."""
        name = self.options.embedder or self._built_embedder()
        with self._opening:
            embedder = self._embedders.get(name)
            if embedder is None:
                embedder = self._embedders[name] = make_embedder(name)
        if self.options.embedding_cache is None or name in MODEL_FREE_EMBEDDERS:
            return embedder  # hashing a text is faster than reading its vector back
        with self._opening:
            if self._embedding_cache is None:
                self._embedding_cache = SqliteKeyValueStore(self.options.embedding_cache)
        return CachedEmbedder(embedder, self._embedding_cache, namespace="texts")

    @property
    def graph(self) -> ExternalGraph:
        """The knowledge graph of the KG methods (``kg`` option)."""
        self._check_newer()
        with self._opening:
            if self._graph is None:
                if self.options.kg is None:
                    raise ConfigError("this method needs a knowledge graph (--kg)")
                spec = GraphSpec.parse(self.options.kg)
                context = self.index.context if spec.documents else None
                self._graph = make_graph(self.options.kg, context, self._directory())
            return self._graph

    def retriever(self, kind: str, *, crossing: bool | None = None) -> Retriever:
        """The retriever ``kind`` over the index. SA retrievers cross into the linked
        graph when the ``kg`` option joins one (``DIR+index``), unless ``crossing`` is
        False; ``crossing=True`` insists on it."""
        if kind not in RETRIEVERS:
            raise ConfigError(f"unknown retriever {kind!r}; choose one of {', '.join(RETRIEVERS)}")
        can_cross = kind in SA_RETRIEVERS and self.joins_graph()
        if crossing and not can_cross:
            raise ConfigError("only SA retrievers cross, into a graph joined by --kg DIR+index")
        crossing = can_cross if crossing is None else crossing
        key = (kind, crossing)
        self._check_newer()
        with self._opening:
            if key not in self._retrievers:
                bridges = make_bridges(self.options.kg, self._directory()) if crossing else None
                self._retrievers[key] = make_retriever(
                    self.index.context,
                    kind,
                    bridges=bridges,
                    **self.options.retriever_options.get(kind, {}),
                )
            return self._retrievers[key]

    @property
    def knowledge(self) -> Know3Knowledge:
        """The graph a KG-embedding method reads with its trained model (see
        :func:`quillian.engine.kge.open_knowledge`)."""
        self._check_newer()
        with self._opening:
            if self._knowledge is None:
                self._knowledge = open_knowledge(
                    self.options.kg,
                    lambda: self.index,
                    self._directory(),
                    self.embedder(),
                )
            return self._knowledge

    def _built_embedder(self) -> str:
        """The embedder the index was built with, else the imported graph's, else the
        default."""
        if self.location is not None:
            return embedder_name(read_manifest(self.location).get("config", {}))
        directory = GraphSpec.parse(self.options.kg).directory if self.options.kg else None
        if directory is not None:
            recorded = read_graph_manifest(directory).get("embedder", {})
            return str(recorded.get("name") or DEFAULT_EMBEDDER)
        return DEFAULT_EMBEDDER

    def joins_graph(self) -> bool:
        """Whether the ``kg`` option joins an imported graph to the index (``DIR+index``)."""
        if self.options.kg is None:
            return False
        spec = GraphSpec.parse(self.options.kg)
        return spec.directory is not None and spec.documents

    # --- documents ------------------------------------------------------------------

    def add_documents(
        self,
        documents: Iterable[Document],
        settings: IndexSettings,
        on_progress: Progress | None = None,
    ) -> BuildReport:
        """Index ``documents`` into this engine's index; later calls see them."""
        location = self._location()
        report = index_documents(location, documents, settings, on_progress=on_progress)
        self._reopen()
        return report

    def delete_documents(
        self, doc_ids: Sequence[str], on_progress: Progress | None = None
    ) -> BuildReport:
        """Remove documents from this engine's index (see
        :func:`quillian.engine.delete_documents`); later calls no longer see them."""
        report = delete_documents(self._location(), doc_ids, on_progress=on_progress)
        self._reopen()
        return report

    def documents(self, offset: int = 0, limit: int = 50) -> DocumentPage:
        """A page of this engine's documents with their ingestion status."""
        return list_documents(self._location(), offset, limit)

    def document(self, doc_id: str) -> DocumentText | None:
        """One document with its status, text and chunk ids (None: not in the index)."""
        return get_document(self._location(), doc_id)

    def known_documents(self, doc_ids: Sequence[str]) -> list[str]:
        """Those of ``doc_ids`` this engine's index holds or records as failed."""
        return known_documents(self._location(), doc_ids)

    def forget_unfinished(self, doc_ids: Sequence[str]) -> list[str]:
        """Forget documents of a stopped ingestion that never got stored (see
        :func:`quillian.engine.documents.forget_unfinished`)."""
        return forget_unfinished(self._location(), doc_ids)

    def index_settings(self) -> IndexSettings:
        """The settings this engine's index was built with (to add documents alike)."""
        return settings_of(self._location())

    def _directory(self) -> Path | None:
        """The index's files on this machine (a server index's local cache), if any."""
        return None if self.location is None else local_directory(self.location)

    def _location(self) -> str | Path:
        if self.location is None:
            raise ConfigError("this engine has no index location")
        return self.location

    def _reopen(self) -> None:
        """After this engine wrote its index: open the build it completed in place of the
        one opened before, if any (so that one serves until the new one is open, and
        never a half-built index); if it cannot be opened (another writer began
        meanwhile), the one opened before serves on until that writer's build completes
        (:meth:`_check_newer`). It takes turns with :meth:`refresh`, so a server's
        watcher does not open the same build beside it."""
        with self._checking:
            opened = self._index
            if opened is None or self.location is None:
                return
            try:
                newer = self._open_index()
            except QuillianError as exc:
                logger.warning("%s: keeping the index opened earlier: %s", self._name(), exc)
                return
            with self._opening:
                self._forget()
                self._index = newer
                self._checked = time.monotonic()

    def _forget(self) -> None:
        """Drop what was opened from the index, so the next use reads it anew."""
        with self._opening:
            self._index, self._graph, self._knowledge = None, None, None
            self._retrievers.clear()

    # --- retrieval ----------------------------------------------------------------------

    def retrieve(
        self,
        query: str,
        method: str = "sa",
        k: int = 8,
        query_vector: npt.NDArray[np.float32] | None = None,
    ) -> RetrievalResult:
        """Top-``k`` passages for ``query`` and the trace that led to them."""
        self._check_question(query)
        check_k(k)
        return self.retriever(method).retrieve(query, k, query_vector)

    async def aretrieve(self, query: str, method: str = "sa", k: int = 8) -> RetrievalResult:
        """:meth:`retrieve` off the event loop, on the engine's worker threads. Queries
        retrieved at the same time are embedded together (:class:`QueryBatcher`)."""
        self._check_question(query)
        check_k(k)
        retriever = await self._offload(self.retriever, method)
        vector = await self._batcher.embed(query) if method in EMBEDS_QUERY else None
        return await self._offload(retriever.retrieve, query, k, vector)

    def _embed_queries(self, queries: Sequence[str]) -> npt.NDArray[np.float32]:
        """Query vectors from the opened index's embedder (the retrievers' own)."""
        return self.index.context.embedder.embed(list(queries))

    # --- answering ----------------------------------------------------------------------

    def method(self, name: str) -> MethodSpec:
        return method_spec(name)

    def pipeline(
        self, method: str, *, retriever: str | None = None, **options: Any
    ) -> PipelineBase:
        """The method's pipeline over this engine's index, graph and model."""
        spec = method_spec(method)
        kind = retriever or spec.retriever
        return spec.build(
            self.runner.for_method(spec.name),
            self.retriever(kind) if kind else None,
            graph=self.graph if spec.needs_graph else None,
            options=options,
            offload=self._offload,
            knowledge=self.knowledge if spec.needs_kge else None,
            knowledge_models=self.runner_for,
        )

    async def answer(
        self,
        question: str,
        method: str = "sa-rag",
        *,
        retriever: str | None = None,
        observer: RunObserver | None = None,
        **options: Any,
    ) -> AnswerResult:
        """Answer ``question`` with ``method``; ``options`` are the method's options;
        ``observer`` sees each retrieval (with its trace) and step as it happens."""
        self._check_question(question)
        pipeline = await self._offload(self.pipeline, method, retriever=retriever, **options)
        return await pipeline.answer(question, observer)

    async def verify(self, question: str, answer: str, **options: Any) -> Verification:
        """The KG-embedding verdict on ``answer`` (any method's): its triples scored
        against the KG and judged against θ at turn 0. ``options``: Know3-RAG's
        ``theta0``, ``theta_c``, ``threshold``, ``aggregation``."""
        config: Know3Config = build_config("--verify", Know3Config, options)
        knowledge = await self._offload(lambda: self.knowledge)
        check = KGECheck(self.runner, knowledge, offload=self._offload)
        return await verify_answer(
            check, question, answer, threshold=config.theta(0), how=config.how
        )

    async def runner_for(self, llm: str) -> TaskRunner:
        """A task runner on another model (a Know3-RAG knowledge model), its session
        opened once and kept until the engine's ``async with`` ends."""
        if isinstance(self.options.llm, str) and llm == self.options.llm:
            return self.runner
        async with self._runners_lock:
            if llm not in self._runners:
                session = await self._sessions.enter_async_context(self.session_for(llm))
                self._runners[llm] = TaskRunner(session.model, self.prompts)
            return self._runners[llm]

    @property
    def session(self) -> LLMSession:
        if self._session is None:
            raise ConfigError("answering needs a model: open the engine with llm=SPEC (--llm)")
        return self._session

    @property
    def runner(self) -> TaskRunner:
        return TaskRunner(self.session.model, self.prompts)

    def ledger(self) -> Ledger:
        """Calls, tokens and seconds per prompt so far."""
        return self.session.ledger()

    async def __aenter__(self) -> Self:
        if self.options.llm is not None:
            session = LLMSession(
                self.options.llm,
                api_key=self.options.api_key,
                cache_path=self.options.cache_path,
                concurrency=self.options.concurrency,
                on_progress=self.options.on_progress,
                lazy=self.options.lazy_model,
            )
            self._session = await session.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        session, self._session = self._session, None
        try:
            await self._sessions.aclose()
            self._runners.clear()
            if session is not None:
                await session.__aexit__(*exc_info)
        finally:
            self.close()

    def close(self) -> None:
        """Release the worker threads and the embedding cache."""
        self._offload.close()
        with self._opening:
            if self._embedding_cache is not None:
                self._embedding_cache.close()
                self._embedding_cache = None

    def session_for(self, llm: str) -> contextlib.AbstractAsyncContextManager[LLMSession]:
        """Another LLM session with this engine's key, cache and concurrency (a judge)."""
        return LLMSession(
            llm,
            api_key=self.options.api_key,
            cache_path=self.options.cache_path,
            concurrency=self.options.concurrency,
            on_progress=self.options.on_progress,
            lazy=self.options.lazy_model,
        )

    def _check_question(self, question: str) -> None:
        """Refuse an empty question, or one longer than ``max_question_chars``."""
        if not isinstance(question, str) or not question.strip():
            raise ConfigError("the question is empty")
        limit = self.options.max_question_chars
        if len(question) > limit:
            raise ConfigError(
                f"the question has {len(question):,} characters, more than the limit of "
                f"{limit:,}: shorten it, or raise the limit (max_question_chars; "
                "--max-question-chars on the command line)"
            )


def _prompts(overrides: Sequence[Path]) -> PromptRegistry:
    prompts = default_registry()
    for path in overrides:
        prompts.override_from_file(path)
    return prompts
