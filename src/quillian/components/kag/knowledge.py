"""What KAG's solver reads from the typed graph: entity linking with type re-ranking
(spec section 3.3, Algorithm EL), typed and aligned type look-up, one-hop expansion,
exact and fuzzy SPO candidates, and the texts of chunks (the mutual index).

Scores are cosines of the embedder's normalised vectors; an exact (normalised) name
match scores 1.0. Linking keeps candidates at or above the caller's threshold: 0.9 for
the exact layer, 0.8 for the fuzzy layer (the authors' thresholds).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.base import Embedder
from quillian.components.kag.graph import SOURCE, TypedGraph, camel_case
from quillian.components.kag.schema import CHUNK, CONCEPT, Schema
from quillian.types import normalize_name

__all__ = ["CHUNK_PREDICATES", "KagKnowledge", "Linked", "TypeTarget"]

#: Predicates of a logical form that mean the mutual index (entity to chunk).
CHUNK_PREDICATES = frozenset({"supportchunks", "supportingchunks", "source", "sourcechunk"})
ISA = "isA"
BELONG_TO = "belongTo"


@dataclass(frozen=True, slots=True)
class Linked:
    """A graph node an entity mention links to, with its (type re-ranked) score."""

    node: int
    name: str
    label: str
    score: float


@dataclass(frozen=True, slots=True)
class TypeTarget:
    """A logical form's type, standardised: a schema class, a concept node, or neither
    (the generic ``Entity``)."""

    label: str | None = None
    concept: int | None = None

    @property
    def generic(self) -> bool:
        return self.label is None and self.concept is None


def _key(text: str) -> str:
    key = normalize_name(text).replace(" ", "")
    return key[:-1] if key.endswith("s") and len(key) > 3 else key


class KagKnowledge:
    """The typed graph with its name and description vectors, for the solver."""

    def __init__(
        self,
        graph: TypedGraph,
        schema: Schema,
        embedder: Embedder,
        *,
        chunk_text: Callable[[str], str] | None = None,
        name_vectors: npt.NDArray[np.float32] | None = None,
        desc_vectors: npt.NDArray[np.float32] | None = None,
    ) -> None:
        self.graph = graph
        self.schema = schema
        self.embedder = embedder
        self._chunk_text = chunk_text or (lambda chunk_id: "")
        self._names = name_vectors
        self._descs = desc_vectors

    @cached_property
    def entities(self) -> npt.NDArray[np.int64]:
        return np.array(self.graph.entity_nodes(), dtype=np.int64)

    @property
    def name_vectors(self) -> npt.NDArray[np.float32]:
        if self._names is None:
            self._names = self.embed([self.graph.nodes[i].name for i in self.entities])
        return self._names

    @property
    def desc_vectors(self) -> npt.NDArray[np.float32]:
        if self._descs is None:
            nodes = [self.graph.nodes[i] for i in self.entities]
            self._descs = self.embed([n.desc or n.name for n in nodes])
        return self._descs

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.embedder.dim), np.float32)
        return np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)

    def chunk_text_of(self, chunk_id: str) -> str:
        """The text of the chunk with id ``chunk_id``."""
        return self._chunk_text(chunk_id)

    def chunk_text(self, node: int) -> str:
        """The text of a chunk node (its id is the node's name)."""
        return self._chunk_text(self.graph.nodes[node].name)

    def value(self, node: int) -> str:
        """What a bound node stands for in answers: a chunk's text, else its name."""
        n = self.graph.nodes[node]
        return self.chunk_text(node) if n.label == CHUNK else n.name

    # --- types ----------------------------------------------------------------------

    @cached_property
    def _concepts(self) -> dict[str, int]:
        return {_key(n.name): i for i, n in enumerate(self.graph.nodes) if n.label == CONCEPT}

    @cached_property
    def _ancestors(self) -> dict[int, set[int]]:
        """Per entity, the concept nodes it belongs to and their isA ancestors."""
        parents: dict[int, list[int]] = {}
        for e in self.graph.edges:
            if e.predicate in (ISA, BELONG_TO):
                parents.setdefault(e.subject, []).append(e.object)
        out: dict[int, set[int]] = {}
        for node in parents:
            if self.graph.nodes[node].label == CONCEPT:
                continue
            seen: set[int] = set()
            todo = list(parents[node])
            while todo:
                c = todo.pop()
                if c not in seen:
                    seen.add(c)
                    todo.extend(parents.get(c, ()))
            out[node] = seen
        return out

    def standard_type(self, types: Sequence[str]) -> TypeTarget:
        """A logical form's type as a schema class, else a concept node (same name, or
        a concept name at cosine >= 0.9 when aligned), else generic."""
        for t in types:
            label = self.schema.canonical(t)
            if label and label not in (CHUNK, CONCEPT):
                return TypeTarget(label=label)
        for t in types:
            concept = self._concepts.get(_key(t))
            if concept is not None:
                return TypeTarget(concept=concept)
        if types and self._concepts:
            names, vectors = self._concept_vectors
            sims = vectors @ self.embed([types[0]])[0]
            best = int(np.argmax(sims))
            if sims[best] >= 0.9:
                return TypeTarget(concept=self._concepts[names[best]])
        return TypeTarget()

    @cached_property
    def _concept_vectors(self) -> tuple[list[str], npt.NDArray[np.float32]]:
        """Concept keys and the vectors of their names (embedded once)."""
        names = list(self._concepts)
        return names, self.embed([self.graph.nodes[self._concepts[n]].name for n in names])

    def has_type(self, node: int, target: TypeTarget, types: Sequence[str] = ()) -> bool:
        """Whether ``node`` is of the target class, belongs to the target concept (or
        one below it), or carries the type as its semantic type."""
        n = self.graph.nodes[node]
        if target.label is not None and n.label == target.label:
            return True
        if target.concept is not None and target.concept in self._ancestors.get(node, ()):
            return True
        keys = {_key(t) for t in types}
        return bool(n.semantic_type) and _key(n.semantic_type) in keys

    def nodes_of_type(
        self, types: Sequence[str], limit: int = 500, *, broaden: int = 0
    ) -> list[int]:
        """Entity nodes of a type-only reference (``s1:Image``). With ``broaden`` n, the
        type's concept is replaced by its n-th isA ancestor (the semantic reasoning of
        Algorithm A2: ``cataract patient`` isA ``visually impaired person``)."""
        target = self.standard_type(types)
        if broaden:
            if target.concept is None:
                return []
            concept: int | None = target.concept
            for _ in range(broaden):
                concept = self._parent_concept.get(concept) if concept is not None else None
            if concept is None:
                return []
            target, types = TypeTarget(concept=concept), ()
        found = [int(i) for i in self.entities if self.has_type(int(i), target, types)]
        return found[:limit]

    @cached_property
    def _parent_concept(self) -> dict[int, int]:
        return {
            e.subject: e.object
            for e in self.graph.edges
            if e.predicate == ISA and self.graph.nodes[e.subject].label == CONCEPT
        }

    # --- linking --------------------------------------------------------------------

    def link(
        self,
        name: str,
        types: Sequence[str] = (),
        query: str = "",
        *,
        threshold: float = 0.8,
        top_k: int = 5,
    ) -> list[Linked]:
        """Algorithm EL: exact name, name vectors, and (typed) description vectors;
        candidates at ``threshold`` or above, ordered by their type-match score (the
        authors' semantic-type re-rank: full score for the right class or concept,
        ``score * cos(semantic type, type)`` otherwise, 0.3 of it below 0.6 or without
        a semantic type). A score is the link's own, not the re-ranked one."""
        if not len(self.entities):
            return []
        scores: dict[int, float] = {n: 1.0 for n in self.graph.by_name(name)}
        target = self.standard_type(types)
        k = 10 if not target.generic else top_k
        sims = self.name_vectors @ self.embed([name])[0]
        for row in np.argsort(-sims)[:k]:
            node = int(self.entities[row])
            scores[node] = max(scores.get(node, 0.0), float(sims[row]))
        if not target.generic and query:
            dsims = self.desc_vectors @ self.embed([query])[0]
            for row in np.argsort(-dsims)[:top_k]:
                node = int(self.entities[row])
                scores[node] = max(scores.get(node, 0.0), float(dsims[row]))
        kept = {n: s for n, s in scores.items() if s >= threshold}
        order = (
            {n: self._type_score(n, s, target, types) for n, s in kept.items()}
            if not target.generic
            else kept
        )
        ranked = sorted(kept, key=lambda n: (-order[n], -kept[n], n))
        return [
            Linked(n, self.graph.nodes[n].name, self.graph.nodes[n].label, kept[n]) for n in ranked
        ][:top_k]

    def _type_score(
        self, node: int, score: float, target: TypeTarget, types: Sequence[str]
    ) -> float:
        if self.has_type(node, target, types):
            return score
        semantic = self.graph.nodes[node].semantic_type
        if not semantic or not types:
            return 0.3 * score
        cos = float(self.embed([semantic])[0] @ self.embed([types[0]])[0])
        return score * (cos if cos >= 0.6 else 0.3)

    # --- one hop ----------------------------------------------------------------------

    def one_hop(self, nodes: Sequence[int], *, chunks: bool = False) -> list[int]:
        """Edges touching ``nodes`` (relations; with ``chunks``, only ``source`` edges to
        their chunks), each once, in order."""
        out: dict[int, None] = {}
        for node in nodes:
            for e in self.graph.one_hop(node, with_source=chunks):
                edge = self.graph.edges[e]
                if chunks == (edge.predicate == SOURCE) and edge.predicate not in (ISA, BELONG_TO):
                    out[e] = None
        return list(out)

    @staticmethod
    def predicate_matches(edge_predicate: str, wanted: str) -> bool:
        """The exact layer's test: the same predicate up to case and word joining."""
        return camel_case(wanted).lower() == edge_predicate.lower()

    def rank_spo(self, question: str, edges: Sequence[int], top_k: int, floor: float) -> list[int]:
        """The fuzzy layer's candidates: edges by cosine of their text to the question."""
        if not edges:
            return []
        sims = self.embed([self.graph.spo_text(e) for e in edges]) @ self.embed([question])[0]
        order = np.argsort(-sims, kind="stable")[:top_k]
        return [edges[int(i)] for i in order if sims[int(i)] >= floor]
