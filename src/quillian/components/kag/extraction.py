"""KAG's extraction with an LLM (spec section 2.2, Algorithm B1): per chunk, typed
entities with a description and a semantic type (``kag.ner``), triples constrained by
the entity list (``kag.triples``), and official names (``kag.std``), each a typed task
with a strict JSON parser, one repair attempt and recorded failures.

Entities come out as :class:`ExtractedEntity` with ``type`` written
``"<Class>/<semantic type>"`` (the typed graph builder splits it) and the official name
as an alias. A category outside the schema becomes ``Others`` (recorded); a triple
naming no entity of the list is dropped (recorded); a chunk whose NER stays unusable
is indexed without entities, and the failure is kept in :attr:`KAGExtractor.failures`.
Every issue (:class:`~quillian.components.extraction.base.ExtractionIssue`) is also
handed to the index build (:meth:`KAGExtractor.take_issues`), which stores it with the
chunk's extraction and writes it to the KAG stage's ``kag/extraction_issues.jsonl``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Sequence

from quillian.components.extraction.base import ExtractedEntity, Extraction, ExtractionIssue
from quillian.components.extraction.llm import _run_sync
from quillian.components.kag import tasks
from quillian.components.kag.graph import camel_case
from quillian.components.kag.schema import OTHERS, Schema, default_schema
from quillian.components.llm.tasks import TaskFailed, TaskRunner, Transcript
from quillian.errors import ConfigError
from quillian.types import Chunk, Provenance, Triple, normalize_name

__all__ = ["BLOCK_RELATIONS", "KAGExtractionIssue", "KAGExtractor"]

#: The relations every entity class of the shipped schema has (its shared block): a
#: class with no others leaves its triples' predicates free, as OpenIE writes them.
BLOCK_RELATIONS = frozenset({"synonyms", "officialName", "source"})

logger = logging.getLogger(__name__)


#: A problem in one chunk's extraction (the shared type; the name is kept for callers).
KAGExtractionIssue = ExtractionIssue


class KAGExtractor:
    """NER, then triples over the entity list, then official names, per chunk."""

    def __init__(
        self, runner: TaskRunner, schema: Schema | None = None, *, concurrency: int = 4
    ) -> None:
        if concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
        self.runner = runner
        self.schema = schema or default_schema()
        self.concurrency = concurrency
        self.issues: list[ExtractionIssue] = []
        self._taken = 0
        keys = "+".join(runner.prompt_key(t.prompt) for t in (tasks.NER, tasks.TRIPLES, tasks.STD))
        # the schema's classes and their descriptions are in the prompts: a changed
        # schema is a new extractor
        digest = hashlib.sha256(self.schema.describe().encode()).hexdigest()[:8]
        self.name = f"kag-llm:{runner.model.model_id}:{self.schema.namespace}-{digest}:{keys}"

    @property
    def failures(self) -> list[ExtractionIssue]:
        return [i for i in self.issues if i.kind == "failed"]

    def take_issues(self) -> list[ExtractionIssue]:
        """The issues recorded since the last call (:attr:`issues` keeps them all)."""
        taken, self._taken = self.issues[self._taken :], len(self.issues)
        return taken

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        if not chunks:
            return []
        return _run_sync(lambda: self.aextract(chunks))

    async def aextract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        gate = asyncio.Semaphore(self.concurrency)

        async def one(chunk: Chunk) -> Extraction:
            async with gate:
                return await self.extract_one(chunk)

        return list(await asyncio.gather(*(one(c) for c in chunks)))

    def _issue(self, chunk: Chunk, task: str, message: str, kind: str, raw: str = "") -> None:
        self.issues.append(ExtractionIssue(chunk.id, task, kind, message, raw))
        if kind == "failed":
            logger.warning("KAG extraction of %s, %s: %s", chunk.id, task, message)

    async def extract_one(self, chunk: Chunk) -> Extraction:
        passage = f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text
        transcript = Transcript()
        try:
            found = await self.runner.run(
                tasks.NER, transcript, schema=self.schema.describe(), passage=passage
            )
        except TaskFailed as exc:
            self._issue(chunk, "ner", str(exc), "failed", exc.raw)
            return Extraction(chunk.id, chunk.doc_id)
        entities: dict[str, tasks.NerEntity] = {}
        for ent in found:
            if self.schema.entity_type(ent.category) == OTHERS and ent.category != OTHERS:
                self._issue(
                    chunk,
                    "ner",
                    f"{ent.name!r}: category {ent.category!r} is not in the schema; using Others",
                    "repaired",
                    ent.category,
                )
            entities.setdefault(normalize_name(ent.name), ent)
        listed = [{"name": e.name, "category": e.category} for e in entities.values()]
        triples = await self._triples(chunk, transcript, passage, listed, entities)
        official = await self._official(chunk, transcript, passage, listed)
        return Extraction(
            chunk.id,
            chunk.doc_id,
            tuple(
                ExtractedEntity(
                    e.name,
                    f"{self.schema.entity_type(e.category)}/{e.type}".rstrip("/"),
                    aliases=tuple(
                        a for a in [official.get(key, "")] if a and normalize_name(a) != key
                    ),
                    description=e.description,
                    is_topic=key == normalize_name(chunk.title),
                )
                for key, e in entities.items()
            ),
            tuple(
                Triple(
                    s,
                    p,
                    o,
                    f"{s} {p} {o}",
                    Provenance(chunk.doc_id, chunk.id, 0, len(chunk.text), chunk.text),
                )
                for s, p, o in triples
            ),
        )

    async def _triples(
        self,
        chunk: Chunk,
        transcript: Transcript,
        passage: str,
        listed: list[dict[str, str]],
        entities: dict[str, tasks.NerEntity],
    ) -> list[tuple[str, str, str]]:
        names = set(entities)
        try:
            triples = await self.runner.run(
                tasks.TRIPLES,
                transcript,
                entities=json.dumps(listed, ensure_ascii=False),
                passage=passage,
            )
        except TaskFailed as exc:
            self._issue(chunk, "triples", str(exc), "failed", exc.raw)
            return []
        kept: list[tuple[str, str, str]] = []
        for s, p, o in triples:
            if normalize_name(s) not in names and normalize_name(o) not in names:
                self._issue(
                    chunk,
                    "triples",
                    f"({s}, {p}, {o}) names no entity of the entity list",
                    "rejected",
                    json.dumps([s, o], ensure_ascii=False),
                )
            else:
                kept.append((s, self._schema_predicate(chunk, (s, p, o), entities), o))
        return kept

    def _schema_predicate(
        self, chunk: Chunk, triple: tuple[str, str, str], entities: dict[str, tasks.NerEntity]
    ) -> str:
        """The triple's predicate as the schema spells it, when it names a relation the
        subject's class declares (``works for`` -> ``worksFor``); a class that declares
        relations of its own (beyond the synonym, official-name and source block every
        class has) records a triple outside them, or one whose object is of another
        class than the relation's target, and keeps it as extracted."""
        s, p, o = triple
        subject, obj = entities.get(normalize_name(s)), entities.get(normalize_name(o))
        source = self.schema.entity_type(subject.category) if subject else OTHERS
        declared = self.schema.classes[source].relations
        if not set(declared) - BLOCK_RELATIONS:
            return p
        wanted = camel_case(p).lower()
        relation = next((r for r in declared if r.lower() == wanted), None)
        if relation is None:
            allowed = ", ".join(sorted(set(declared) - BLOCK_RELATIONS))
            self._issue(
                chunk,
                "triples",
                f"({s}, {p}, {o}): {p!r} is not a relation of {source} ({allowed}); kept",
                "kept",
                p,
            )
            return p
        target = self.schema.relation_target(source, relation)
        found = self.schema.entity_type(obj.category) if obj else None
        if found is not None and target is not None and found != target:
            self._issue(
                chunk,
                "triples",
                f"({s}, {relation}, {o}): {relation} of {source} points to {target}, "
                f"{o!r} is {found}; kept",
                "kept",
                found,
            )
        return relation

    async def _official(
        self, chunk: Chunk, transcript: Transcript, passage: str, listed: list[dict[str, str]]
    ) -> dict[str, str]:
        if not listed:
            return {}
        try:
            names = await self.runner.run(
                tasks.STD,
                transcript,
                entities=json.dumps(listed, ensure_ascii=False),
                passage=passage,
            )
        except TaskFailed as exc:
            self._issue(chunk, "std", str(exc), "failed", exc.raw)
            return {}
        return {normalize_name(n.name): n.official_name for n in names}
