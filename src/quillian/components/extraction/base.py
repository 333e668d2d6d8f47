"""What every knowledge-graph extractor produces: per-chunk entities and triples.

Extractors (spaCy NER, precomputed LLM extractions, LLM extraction later) all emit
:class:`Extraction` objects; :mod:`quillian.components.graph.builder` merges them into
one heterogeneous graph, so graph construction never depends on where triples came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from quillian.components.extraction.predicates import DependencyParse
from quillian.types import Chunk, Triple

__all__ = [
    "ISSUE_KINDS",
    "ExtractedEntity",
    "Extraction",
    "ExtractionIssue",
    "Extractor",
    "IssueRecorder",
    "LinkingExtractor",
    "SurfaceLinker",
]


@dataclass(frozen=True, slots=True)
class ExtractedEntity:
    """An entity mention found in one chunk.

    ``description`` is what the chunk says about the entity (SA-RAG's entity-description
    node); ``is_topic`` marks the entity a titled document is about (its title).
    ``start``/``end`` locate one mention in the chunk text (-1 when unknown).
    """

    name: str
    type: str = ""
    aliases: tuple[str, ...] = ()
    description: str = ""
    is_topic: bool = False
    start: int = -1
    end: int = -1


@dataclass(frozen=True, slots=True)
class Extraction:
    """Entities and relations extracted from one chunk.

    Every triple's subject and object name one of ``entities`` (by name or alias), and
    its provenance holds the chunk id and the source sentence with its span.
    ``parse`` is the chunk's dependency parse where an extractor keeps it between its
    per-chunk and its corpus-wide step (the spaCy extractor's
    :meth:`~quillian.components.extraction.base.LinkingExtractor.extract_local` output);
    ``None`` elsewhere.
    """

    chunk_id: str
    doc_id: str
    entities: tuple[ExtractedEntity, ...] = ()
    triples: tuple[Triple, ...] = ()
    parse: DependencyParse | None = None


#: What an :class:`ExtractionIssue` says was done with the result it is about.
ISSUE_KINDS = ("failed", "rejected", "repaired", "kept")


@dataclass(frozen=True, slots=True)
class ExtractionIssue:
    """A problem met extracting one chunk, kept with the index (spec B1: "recorded
    failures").

    ``task`` is the extraction step (``ner``, ``triples``, ``std`` for KAG's); ``kind``
    what was done: ``failed`` (the step's output stayed unusable after its repair
    attempt, so the chunk lacks what it would give), ``rejected`` (a result dropped,
    such as a triple naming no entity of the entity list), ``repaired`` (a result
    changed, such as a category outside the schema read as ``Others``) or ``kept`` (a
    result kept as it is though it breaks a rule, such as a triple outside the
    relations the schema allows its subject's class); ``raw`` the model's unusable
    text or the offending names.
    """

    chunk_id: str
    task: str
    kind: str
    message: str
    raw: str = ""


@runtime_checkable
class IssueRecorder(Protocol):
    """An extractor that records per-chunk :class:`ExtractionIssue` s; the index build
    takes them after each batch and stores them with the chunk's extraction."""

    def take_issues(self) -> list[ExtractionIssue]:
        """The issues recorded since the last call (and forgets them)."""
        ...


@runtime_checkable
class Extractor(Protocol):
    """Turns chunks into extractions, one per chunk, in order."""

    name: str

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]: ...


@runtime_checkable
class LinkingExtractor(Extractor, Protocol):
    """An extractor part of whose output depends on the corpus, not on the chunk alone
    (the spaCy extractor links the titles of the other passages it finds in a chunk).

    An index caches :meth:`extract_local` per chunk, which depends on the chunk alone,
    and calls :meth:`link` over every chunk at each rebuild, so a document indexed
    earlier is linked to titles that arrive later, and one deleted is unlinked.
    ``extract(chunks)`` equals ``link(chunks, extract_local(chunks), titles)`` for the
    titles the extractor knows.
    """

    def extract_local(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        """What depends on each chunk alone, in order (runs the model)."""
        ...

    def link(
        self, chunks: Sequence[Chunk], local: Sequence[Extraction], titles: Iterable[str]
    ) -> list[Extraction]:
        """Complete ``local`` (the :meth:`extract_local` output of ``chunks``) over a
        corpus whose titles are ``titles``; no model runs."""
        ...


@runtime_checkable
class SurfaceLinker(LinkingExtractor, Protocol):
    """A linking extractor whose :meth:`~LinkingExtractor.link` of a chunk depends on
    the corpus only through the surfaces of :meth:`link_context` that its text
    contains and the safe alias (:func:`text.title_aliases`) of its own title.

    So a build that changes the titles relinks only the chunks whose text contains a
    surface that came, went or names another title, and those whose title's alias
    changed (:mod:`quillian.index.linking`); :meth:`link_settings` names everything
    else that changes what :meth:`~LinkingExtractor.link` gives, so that a change of it
    relinks every chunk.
    """

    def link_context(self, titles: Iterable[str]) -> tuple[Mapping[str, str], Mapping[str, str]]:
        """Over a corpus whose titles are ``titles``: the safe alias of each title
        (:func:`text.title_aliases`), and each surface :meth:`~LinkingExtractor.link`
        finds in a text with the title it names."""
        ...

    def link_over(
        self,
        chunks: Sequence[Chunk],
        local: Sequence[Extraction],
        aliases: Mapping[str, str],
        surfaces: Mapping[str, str],
    ) -> list[Extraction]:
        """:meth:`~LinkingExtractor.link` over a corpus whose :meth:`link_context` is
        ``aliases`` and ``surfaces``."""
        ...

    def title_surfaces(self, title: str, alias: str) -> Mapping[str, str]:
        """The surfaces ``title`` gives :meth:`link_context`, each naming it, given
        ``alias``, its safe alias or ``""``: a title's surfaces do not depend on the
        other titles but through its alias, so an update patches them by the titles
        that came, went or changed alias."""
        ...

    def link_settings(self) -> dict[str, object]:
        """The settings and versions that change :meth:`~LinkingExtractor.link`'s
        output (JSON values)."""
        ...
