"""Indexing through the engine: the components a build uses, chosen by name, and the
build stages of the methods the index is for."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from quillian.components.chunking.base import Chunker
from quillian.components.embedding.base import Embedder
from quillian.components.embedding.factory import embedder_name, make_embedder
from quillian.components.extraction.base import Extraction, Extractor
from quillian.components.extraction.llm_budget import ExtractionBudget
from quillian.components.factories import make_chunker, make_extractor
from quillian.components.kag.schema import load_schema
from quillian.components.llm.tasks import TaskRunner
from quillian.errors import ConfigError, IndexIncompleteError, InputError
from quillian.index import DEFAULT_STAGES, BuildReport, BuildStage, build_index, read_manifest
from quillian.index import delete_documents as delete_from_index
from quillian.index.layout import has_manifest, has_stage, manifest_if_any
from quillian.index.stages import EndpointTextStage
from quillian.index.storage import vector_dtype
from quillian.methods.spec import ConfigurableStage
from quillian.methods.table import method_spec
from quillian.types import Chunk, Document, Progress

__all__ = [
    "BuildPlan",
    "IndexSettings",
    "build_plan",
    "check_settings",
    "delete_documents",
    "index_documents",
    "stages_for",
]


@dataclass(frozen=True)
class IndexSettings:
    """What a build uses, by name (the CLI's ``quillian index`` flags)."""

    chunker: str = "passage"
    chunk_size: int = 500
    overlap: int = 200
    extractor: str = "spacy"
    extractions: Path | None = None
    """Precomputed extractions (JSONL) for the ``precomputed`` extractor."""
    embedder: str | None = None
    """The embedder's name; None: the index's own, and for a new index
    :data:`~quillian.components.embedding.factory.DEFAULT_EMBEDDER`."""
    methods: tuple[str, ...] = ()
    """Methods whose own build stages run after the default ones, besides those the
    index was built for before (an update keeps every method's artifacts current)."""
    kag_schema: Path | None = None
    """KAG's typed schema (YAML or JSON); None: the index's own, else the shipped one."""
    kag_concepts: str | None = None
    """Where KAG's alignment takes concept chains from: ``wordnet`` or ``llm``."""
    kag_similar: float | None = None
    """The name cosine at which KAG links two entities ``similar``."""
    kag_typing: str | None = None
    """How KAG types entities an extractor left untyped: ``spacy`` NER or ``none``."""
    endpoint_texts: bool | None = None
    """Also embed each relation's text with its endpoint names (:class:`EndpointTextStage`,
    what ``ppr``'s ``triple_seeds`` match); None: as the index was built, no for a new
    one."""
    vector_dtype: str | None = None
    """What the vectors are stored in, ``int8``, ``float16`` or ``float32`` (a workspace
    has no ``int8``); None: as the index was built, for a new one
    :data:`~quillian.index.storage.DEFAULT_VECTOR_DTYPE` in a folder and
    :data:`~quillian.index.storage.WORKSPACE_VECTOR_DTYPE` in a workspace. Fixed when the
    index is made (another is refused, as another embedder is)."""

    def stage_options(self, previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What the methods' stages read, as recorded in the manifest: each option not
        given keeps the value the index was built with (``previous``, its manifest's
        config), else the stage's default (None)."""
        before = previous or {}
        given = {
            "kag_concepts": self.kag_concepts,
            "kag_similar": self.kag_similar,
            "kag_typing": self.kag_typing,
        }
        return {
            "kag_schema": str(self.kag_schema) if self.kag_schema else None,
            **{k: before.get(k) if v is None else v for k, v in given.items()},
        }


def stages_for(
    methods: Sequence[str],
    options: Mapping[str, Any] | None = None,
    runner: TaskRunner | None = None,
    *,
    endpoint_texts: bool = False,
) -> tuple[BuildStage, ...]:
    """The default stages (with ``endpoint_texts``, :class:`EndpointTextStage` after
    the embedding), then each named method's own, each stage once; a stage that takes
    build options (:class:`ConfigurableStage`) gets ``options`` and ``runner``."""
    stages = list(DEFAULT_STAGES)
    if endpoint_texts:
        stages.insert([s.name for s in stages].index("embed") + 1, EndpointTextStage())
    for name in methods:
        for stage in method_spec(name).index_stages:
            if isinstance(stage, ConfigurableStage):
                stage = stage.configured(options or {}, runner)
            if stage.name not in {s.name for s in stages}:
                stages.append(stage)
    return tuple(stages)


def index_documents(
    location: str | Path,
    documents: Iterable[Document],
    settings: IndexSettings = IndexSettings(),
    *,
    runner: TaskRunner | None = None,
    budget: ExtractionBudget | None = None,
    on_progress: Progress | None = None,
) -> BuildReport:
    """Add ``documents`` to the index at ``location`` (creating it) and rebuild it.

    Documents are read first: the extractors link each document's title in the others.
    An empty corpus (nothing to index at all) is refused with a clear error.
    """
    docs = list(documents)
    if not docs and not _has_index(location):
        raise InputError("nothing to index: the input holds no documents")
    check_settings(settings, runner)
    return build_index(
        docs,
        location,
        **build_plan(location, settings, [d.title for d in docs if d.title], runner, budget).args(),
        on_progress=on_progress,
    )


@dataclass(frozen=True)
class BuildPlan:
    """What an index is built with: :func:`~quillian.index.build_index`'s components,
    recorded settings and stages, made by :func:`build_plan` for either executor."""

    chunker: Chunker
    extractor: Extractor
    embedder: Embedder
    config: dict[str, Any]
    stages: tuple[BuildStage, ...]

    def args(self) -> dict[str, Any]:
        """The plan as :func:`~quillian.index.build_index`'s keyword arguments."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def build_plan(
    location: str | Path,
    settings: IndexSettings,
    titles: Sequence[str],
    runner: TaskRunner | None = None,
    budget: ExtractionBudget | None = None,
    *,
    extractor: Extractor | None = None,
) -> BuildPlan:
    """What :func:`~quillian.index.build_index` builds the index at ``location`` with
    (chunker, extractor, embedder, config, stages), from ``settings`` and what the index
    was built with before; ``titles`` are the corpus's document titles; ``extractor``,
    when given, is used instead of the one ``settings`` names. Both executors build from
    it: one definition of an index."""
    manifest = manifest_if_any(location)
    previous = manifest.get("config", {})
    endpoint_texts = settings.endpoint_texts
    if endpoint_texts is None:
        endpoint_texts = has_stage(manifest, EndpointTextStage.name)
    embedder = settings.embedder or embedder_name(previous if manifest else None)
    methods = tuple(dict.fromkeys([*previous.get("methods", ()), *settings.methods]))
    options = settings.stage_options(previous)
    extractor = extractor or make_extractor(
        settings.extractor,
        settings.extractions,
        titles,
        runner=runner,
        budget=budget,
        schema=settings.kag_schema,
    )
    return BuildPlan(
        chunker=make_chunker(settings.chunker, settings.chunk_size, settings.overlap),
        extractor=extractor,
        embedder=make_embedder(embedder),
        config={
            "embedder_name": embedder,
            "methods": list(methods),
            "chunk_size": settings.chunk_size,
            "overlap": settings.overlap,
            "vector_dtype": vector_dtype(
                settings.vector_dtype, previous if manifest else None, location
            ),
            **options,
        },
        stages=stages_for(methods, options, runner, endpoint_texts=endpoint_texts),
    )


def check_settings(settings: IndexSettings, runner: TaskRunner | None) -> None:
    """Refuse settings that cannot build, before anything is written."""
    if settings.kag_schema is not None:
        load_schema(settings.kag_schema)
    if settings.kag_concepts == "llm" and runner is None:
        raise ConfigError("KAG's llm concept completion needs a chat model (--llm SPEC)")


def delete_documents(
    location: str | Path, doc_ids: Sequence[str], *, on_progress: Progress | None = None
) -> BuildReport:
    """Remove documents from the index and rebuild it from the stored extractions of the
    rest (no model runs: spaCy's stored mentions are linked again without it)."""
    manifest = read_manifest(location)
    config = manifest.get("config", {})
    name = str(config.get("extractor", ""))
    # spaCy links titles at every rebuild from its stored mentions, with no model
    extractor = make_extractor(name) if name == "spacy" else StoredExtractions(name)
    return delete_from_index(
        location,
        doc_ids,
        extractor=extractor,
        embedder=make_embedder(embedder_name(config)),
        on_progress=on_progress,
        # the schema the index stored (kag/schema.*), not the file it was copied from
        stages=stages_for(
            config.get("methods", ()),
            {**config, "kag_schema": None},
            endpoint_texts=has_stage(manifest, EndpointTextStage.name),
        ),
    )


class StoredExtractions:
    """The extractor of a rebuild after a deletion: every extraction is already stored
    under ``name``, so being asked for one means the index is damaged."""

    def __init__(self, name: str) -> None:
        self.name = name

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        missing = ", ".join(c.id for c in chunks[:3])
        raise IndexIncompleteError(
            f"no stored {self.name!r} extraction for chunk(s) {missing}; rebuild the index"
        )


def _has_index(location: str | Path) -> bool:
    return has_manifest(location)
