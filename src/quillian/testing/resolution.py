"""Random chunk extractions changed at random, for the property tests of the
incremental graph build (entity resolution and the tables written from it): surface
forms sharing name keys, names with no key, aliases joining entities, triples with and
without provenance, chunks past the per-chunk mention cap."""

from __future__ import annotations

import random
from collections.abc import Sequence

from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.graph.builder import GraphBuilder, KnowledgeGraph
from quillian.components.graph.incremental import ChunkExtraction, StaleState
from quillian.types import Provenance, Triple

__all__ = ["NAMES", "RandomCorpus", "random_entity", "random_extraction", "random_name"]

#: Surface forms sharing keys ("Paris", "paris", "The Paris."), names with no key, and
#: names that alias one another through entities carrying several names.
NAMES = [
    "Paris", "paris", "The Paris.", "Lyon", "France", "FR", "french republic",
    "Ada Lovelace", "Lovelace", "Countess", "Babbage", "Engine", "the engine",
    "Rome", "Italy", "Turing", "A. Turing", "?!", "",
]  # fmt: skip
TYPES = ["", "", "PER", "LOC"]
DESCRIPTIONS = ["", "", "a city", "a person", "a machine"]


def random_name(rng: random.Random) -> str:
    return rng.choice(NAMES) if rng.random() < 0.8 else f"Solo {rng.randrange(40)}"


def random_entity(rng: random.Random) -> ExtractedEntity:
    return ExtractedEntity(
        name=random_name(rng),
        type=rng.choice(TYPES),
        aliases=tuple(random_name(rng) for _ in range(rng.choice([0, 0, 1, 2]))),
        description=rng.choice(DESCRIPTIONS),
        is_topic=rng.random() < 0.15,
    )


def random_extraction(rng: random.Random, chunk_id: str, doc_id: str) -> Extraction:
    many = rng.random() < 0.05  # past the per-chunk mention cap, even the default 64
    entities = tuple(random_entity(rng) for _ in range(70 if many else rng.randrange(7)))
    triples = []
    for _ in range(rng.randrange(5)):
        known = [e.name for e in entities]
        subject, obj = (
            rng.choice(known) if known and rng.random() < 0.6 else random_name(rng) for _ in "so"
        )
        # no provenance: the same triple id in several chunks, the first kept; a source
        # elsewhere: another chunk's sentence, which may or may not be in the build
        source = chunk_id if rng.random() < 0.8 else f"c{rng.randrange(1, 40)}"
        prov = Provenance(doc_id, source, 0, 1, "s") if rng.random() < 0.7 else None
        # a description: none, its own, or its sentence (as spaCy's relations have)
        told = rng.choice(["", "x", "s"])
        triples.append(Triple(subject, rng.choice(["in", "of"]), obj, told, prov))
    return Extraction(chunk_id, doc_id, entities, tuple(triples))


class RandomCorpus:
    """The chunk list a clean build sees, changed at random."""

    def __init__(self, rng: random.Random, scale: int = 1) -> None:
        self.rng = rng
        self.scale = scale  # how many chunks a step may touch, times (3, 2, 4)
        self.chunks: dict[str, ChunkExtraction] = {}
        self._serial = 0

    def new(self) -> ChunkExtraction:
        taken = {(c.doc_id, c.index) for c in self.chunks.values()}
        while (place := (f"d{self.rng.randrange(5)}", self.rng.randrange(30))) in taken:
            pass
        self._serial += 1
        chunk_id = f"c{self._serial}"
        return ChunkExtraction(*place, random_extraction(self.rng, chunk_id, place[0]))

    def step(self) -> tuple[list[str], list[ChunkExtraction]]:
        ids = sorted(self.chunks)
        removed = self.rng.sample(ids, min(len(ids), self.rng.randrange(3 * self.scale + 1)))
        kept = [c for c in ids if c not in removed]
        changed = [
            ChunkExtraction(old.doc_id, old.index, random_extraction(self.rng, c, old.doc_id))
            for c in self.rng.sample(kept, min(len(kept), self.rng.randrange(2 * self.scale + 1)))
            for old in [self.chunks[c]]
        ]
        for chunk_id in removed:
            del self.chunks[chunk_id]
        self.chunks.update((c.chunk_id, c) for c in changed)
        for _ in range(self.rng.randrange(4 * self.scale + 1)):
            added = self.new()
            self.chunks[added.chunk_id] = added
            changed.append(added)
        return removed, changed

    def source(self, wanted: Sequence[tuple[str, str, int]]) -> list[Extraction]:
        """The chunks' extractions as the corpus holds them now (the resolution state's
        :data:`~quillian.components.graph.incremental.ExtractionSource`)."""
        found = []
        for chunk_id, doc_id, index in wanted:
            chunk = self.chunks.get(chunk_id)
            if chunk is None or (chunk.doc_id, chunk.index) != (doc_id, index):
                raise StaleState(f"chunk {chunk_id} is not the corpus's ({doc_id}, {index})")
            found.append(chunk.extraction)
        return found

    def clean(self, max_per_chunk: int) -> KnowledgeGraph:
        ordered = sorted(self.chunks.values(), key=lambda c: (c.doc_id, c.index))
        builder = GraphBuilder(max_per_chunk)
        builder.add_all(c.extraction for c in ordered)
        return builder.build([c.chunk_id for c in ordered])
