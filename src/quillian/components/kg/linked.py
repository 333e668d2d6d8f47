"""One graph across sources: an imported knowledge graph joined to an index's document
graph through a saved :class:`~quillian.components.kg.link.Alignment`.

Two ways to cross:

* :class:`LinkedGraph` is an :class:`~quillian.components.kg.base.ExternalGraph` over
  the union, for KG-Infused RAG (``--kg DIR+index``). A linked document entity and its
  imported entity are one entity (numbered as the imported one); the other document
  entities follow, numbered ``len(external) + d``. An entity's triples are the imported
  graph's and the document graph's (with their source sentences), taken in turn, so
  activation that starts in one graph can continue in the other.
* :class:`LinkBridges` gives SA-RAG retrieval edges through the imported graph: two
  document entities linked to imported entities joined by a triple get a bridge,
  ``<name | relation | name>``, that spreading activation may cross both ways (see
  :class:`~quillian.components.retrieval.sa.SARetriever`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import numpy.typing as npt

from quillian.components.kg.base import ExternalGraph, KGTriple
from quillian.components.kg.link import Alignment
from quillian.components.kg.store import ImportedGraph
from quillian.errors import InputError

__all__ = ["Bridge", "LinkBridges", "LinkedGraph"]


class LinkedGraph:
    """The union of ``external`` and ``documents`` with linked entities merged."""

    def __init__(
        self, external: ImportedGraph, documents: ExternalGraph, alignment: Alignment
    ) -> None:
        self.external = external
        self.documents = documents
        self.alignment = alignment
        self.name = f"{external.name}+{documents.name}"
        self._n_ext = len(external)
        self._n = self._n_ext + len(documents)

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        return f"LinkedGraph({self.name!r}, {self._n} entities, {len(self.alignment)} links)"

    @cached_property
    def _canonical(self) -> npt.NDArray[np.int64]:
        """Union number of each document entity."""
        out = np.arange(len(self.documents), dtype=np.int64) + self._n_ext
        out[self.alignment.source] = self.alignment.target
        return out

    def canonical(self, document_entity: int) -> int:
        """The union number of a document entity (its imported twin's when linked)."""
        return int(self._canonical[document_entity])

    def _check(self, entity: int) -> int:
        e = int(entity)
        if not 0 <= e < self._n:
            raise InputError(f"entity {e} outside 0..{self._n - 1}", field="entity")
        return e

    def _documents_of(self, entity: int) -> list[int]:
        if entity >= self._n_ext:
            return [entity - self._n_ext]
        return [d for d, _ in self.alignment.sources_of(entity)]

    def entity_name(self, entity: int) -> str:
        e = self._check(entity)
        if e < self._n_ext:
            return self.external.entity_name(e)
        return self.documents.entity_name(e - self._n_ext)

    def description(self, entity: int) -> str:
        e = self._check(entity)
        if e < self._n_ext:
            text = self.external.description(e)
            if text:
                return text
        return " ".join(self.documents.description(d) for d in self._documents_of(e)).strip()

    def aliases(self, entity: int) -> list[str]:
        e = self._check(entity)
        names = self.external.aliases(e) if e < self._n_ext else []
        for d in self._documents_of(e):
            names += [self.documents.entity_name(d), *self.documents.aliases(d)]
        own = self.entity_name(e)
        return [n for n in dict.fromkeys(names) if n != own]

    def lookup(self, name: str) -> list[int]:
        found = self.external.lookup(name)
        found += [self.canonical(d) for d in self.documents.lookup(name)]
        return list(dict.fromkeys(found))

    def seed_entities(self, query: str, k: int) -> list[tuple[int, float]]:
        """The best ``k`` of both graphs' seeds, linked twins counted once at their
        better score. Scores are inner products in each graph's embedding space, so
        they compare when both graphs use the same embedder (``minilm`` by default)."""
        best: dict[int, float] = {}
        for entity, score in self.external.seed_entities(query, k):
            best[entity] = max(score, best.get(entity, score))
        for entity, score in self.documents.seed_entities(query, k):
            union = self.canonical(entity)
            best[union] = max(score, best.get(union, score))
        ranked = sorted(best.items(), key=lambda item: (-item[1], item[0]))
        return ranked[:k]

    def triples(self, entities: Sequence[int], max_per_entity: int) -> dict[int, list[KGTriple]]:
        """Each entity's triples from both graphs, alternating between them, at most
        ``max_per_entity``; tails are union numbers."""
        unique = list(dict.fromkeys(self._check(e) for e in entities))
        external = self.external.triples([e for e in unique if e < self._n_ext], max_per_entity)
        docs = sorted({d for e in unique for d in self._documents_of(e)})
        from_docs = self.documents.triples(docs, max_per_entity)
        out: dict[int, list[KGTriple]] = {}
        for e in unique:
            name = self.entity_name(e)
            ours = [replace(t, head=e, head_name=name) for t in external.get(e, [])]
            theirs = [
                replace(t, head=e, head_name=name, tail=self.canonical(t.tail))
                for d in self._documents_of(e)
                for t in from_docs.get(d, [])
            ]
            out[e] = _interleave(ours, theirs, max_per_entity)
        return out


def _interleave(first: list[KGTriple], second: list[KGTriple], cap: int) -> list[KGTriple]:
    """Alternate the two lists, each fact once, at most ``cap``."""
    seen: set[tuple[int, str, int]] = set()
    out: list[KGTriple] = []
    for i in range(max(len(first), len(second))):
        for source in (first, second):
            if i < len(source) and len(out) < cap:
                key = source[i].fact
                if key not in seen:
                    seen.add(key)
                    out.append(source[i])
    return out


@dataclass(frozen=True)
class Bridge:
    """An edge between two document entities through the imported graph."""

    source: int
    target: int
    subject: str
    """The imported triple, with the imported graph's names."""
    predicate: str
    object: str
    confidence: float
    """Product of the two link scores."""


class LinkBridges:
    """Bridges between document entities through an imported graph's triples.

    For the linked document entities among those given, their imported twins' outgoing
    triples (at most ``max_per_entity`` each) whose tail is linked too become bridges,
    in both directions.
    """

    def __init__(
        self, external: ImportedGraph, alignment: Alignment, *, max_per_entity: int = 16
    ) -> None:
        if max_per_entity <= 0:
            raise InputError(f"max_per_entity must be greater than 0, got {max_per_entity}")
        self.external = external
        self.alignment = alignment
        self.max_per_entity = max_per_entity
        self.name = external.name

    def bridges(self, entities: npt.ArrayLike) -> list[Bridge]:
        """Bridges touching ``entities`` (document entity numbers)."""
        twins: dict[int, list[tuple[int, float]]] = {}
        for d in np.asarray(entities, dtype=np.int64).tolist():
            link = self.alignment.target_of(d)
            if link is not None:
                twins.setdefault(link[0], []).append((d, link[1]))
        if not twins:
            return []
        heads, rels, tails = self.external.neighbours(list(twins), self.max_per_entity)
        names = self.external.relation_names
        out: dict[tuple[int, ...], Bridge] = {}
        for h, r, t in zip(heads.tolist(), rels.tolist(), tails.tolist(), strict=True):
            ends = self.alignment.sources_of(t)
            if not ends:
                continue
            subject, obj = self.external.entity_name(h), self.external.entity_name(t)
            for d, score in twins[h]:
                for other, other_score in ends:
                    if other == d:
                        continue
                    for a, b in ((d, other), (other, d)):
                        bridge = Bridge(a, b, subject, names[r], obj, score * other_score)
                        out.setdefault((a, b, h, r, t), bridge)
        return list(out.values())
