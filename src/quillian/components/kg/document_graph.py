"""An index's document graph seen as an :class:`~quillian.components.kg.base.ExternalGraph`.

KG-Infused RAG spreads activation over a pre-existing knowledge graph. An index already
holds one, extracted from its documents: entities with the descriptions chunks give of
them, and ``related_to`` relations each carrying a predicate and its source sentence.
This adapter lets that graph stand in for Wikidata5M (for example the MuSiQue index
built from recorded GPT-3.5 triples). It reads the :class:`RetrievalContext` only:

* entities are the index's entity nodes ``0..n_entities-1``; an entity's description is
  its distinct descriptions joined in index order, its aliases those merged into it;
* seeds are the entities of the descriptions most similar to the query (inner product
  of the index's description vectors, :meth:`RetrievalContext.top_descriptions`), each
  entity once at its best score, as in KG-Infused RAG eq. 3; an entity with no
  description cannot be a seed (Appendix C.2 drops such entities from its KG);
* an entity's triples are the relations whose subject it is, in extraction order,
  each ``(subject, predicate, object)`` once (the sentence of its first occurrence).
  Extracted relations have an arbitrary direction; ``inverse=True`` also yields
  relations whose object the entity is (``KGTriple.inverse``: shown as the fact
  ``<subject | predicate | object>``, leading to the subject), so activation can spread
  both ways.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import numpy as np
import numpy.typing as npt

from quillian.components.kg.base import KGTriple
from quillian.components.retrieval.context import RetrievalContext
from quillian.errors import InputError
from quillian.stores.snapshot import EdgeKind
from quillian.types import normalize_name

__all__ = ["DocumentGraph"]

#: Entities whose description vectors one read of the vector collection fetches (one
#: round trip on PostgreSQL instead of one per entity).
_VECTOR_BATCH = 1024


class DocumentGraph:
    """The ``related_to`` graph of an index, read-only, behind the ExternalGraph protocol."""

    def __init__(
        self, context: RetrievalContext, *, name: str = "document-graph", inverse: bool = False
    ) -> None:
        self.context = context
        self.name = name
        self.inverse = inverse

    def __len__(self) -> int:
        return self.context.kg.n_entities

    def __repr__(self) -> str:
        return f"DocumentGraph({self.name!r}, {len(self)} entities, inverse={self.inverse})"

    def _check(self, entity: int) -> int:
        e = int(entity)
        if not 0 <= e < len(self):
            raise InputError(f"entity {e} outside 0..{len(self) - 1}", field="entity")
        return e

    def entity_name(self, entity: int) -> str:
        return self.context.kg.entities[self._check(entity)].name

    def aliases(self, entity: int) -> list[str]:
        return list(self.context.kg.entities[self._check(entity)].aliases)

    @cached_property
    def _descriptions(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``(indptr, order)``: entity ``e``'s descriptions are
        ``order[indptr[e]:indptr[e+1]]``, in index order."""
        owners = np.asarray(self.context.description_entity, dtype=np.int64)
        order = np.argsort(owners, kind="stable").astype(np.int64)
        indptr = np.zeros(len(self) + 1, dtype=np.int64)
        np.cumsum(np.bincount(owners, minlength=len(self)), out=indptr[1:])
        return indptr, order

    def description(self, entity: int) -> str:
        e = self._check(entity)
        indptr, order = self._descriptions
        rows = order[indptr[e] : indptr[e + 1]].tolist()
        texts = dict.fromkeys(self.context.kg.descriptions[d].text.strip() for d in rows)
        return " ".join(t for t in texts if t)

    def description_embeddings(
        self, entities: Sequence[int], model_id: str
    ) -> npt.NDArray[np.float32] | None:
        """Each entity's description vector as the index holds it (the normalised mean of
        its descriptions' vectors; its name's vector when it has none), or None when the
        index was embedded by another model than ``model_id``. Linking an index to a
        graph embedded by the same model then embeds nothing."""
        ctx = self.context
        if ctx.embedder.model_id != model_id:
            return None
        indptr, order = self._descriptions
        rows = [
            np.unique(ctx.description_rows[order[indptr[e] : indptr[e + 1]]])
            for e in (self._check(e) for e in entities)
        ]
        out = np.zeros((len(entities), ctx.embedder.dim), dtype=np.float32)
        missing = [i for i, held in enumerate(rows) if not len(held)]
        for start in range(0, len(rows), _VECTOR_BATCH):  # one read per batch of entities
            part = rows[start : start + _VECTOR_BATCH]
            wanted = np.unique(np.concatenate([np.asarray(r, dtype=np.int64) for r in part]))
            if not len(wanted):
                continue
            vectors = ctx.text_vectors.get(wanted)
            for i, held in enumerate(part, start):
                if len(held):
                    out[i] = vectors[np.searchsorted(wanted, held)].mean(axis=0)
        if missing:
            names = [self.entity_name(entities[i]) for i in missing]
            out[missing] = ctx.embedder.embed(names)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32)

    @cached_property
    def _names(self) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for i, record in enumerate(self.context.kg.entities):
            for name in dict.fromkeys(normalize_name(n) for n in (record.name, *record.aliases)):
                if name:
                    found.setdefault(name, []).append(i)
        return found

    def lookup(self, name: str) -> list[int]:
        """Entities whose name or alias has the :func:`~quillian.types.normalize_name`
        key of ``name`` (the key the index matched entities by), in index order."""
        return list(self._names.get(normalize_name(name), []))

    def seed_entities(self, query: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` entities with the descriptions most similar to ``query``, best first."""
        if k <= 0:
            raise InputError(f"k must be greater than 0, got {k}", field="k")
        ctx = self.context
        total = len(ctx.description_rows)
        q = ctx.embed_query(query)
        fetch = k
        while True:
            best: dict[int, float] = {}
            for desc, score in ctx.top_descriptions(q, fetch):
                best.setdefault(int(ctx.description_entity[desc]), float(score))
            if len(best) >= k or fetch >= total:
                return list(best.items())[:k]
            fetch = min(total, fetch * 4)

    def triples(self, entities: Sequence[int], max_per_entity: int) -> dict[int, list[KGTriple]]:
        """Each entity's first ``max_per_entity`` distinct triples, in extraction order."""
        if isinstance(max_per_entity, bool) or max_per_entity < 0:
            raise InputError(f"max_per_entity must be >= 0, got {max_per_entity}")
        out: dict[int, list[KGTriple]] = {}
        for entity in dict.fromkeys(self._check(e) for e in entities):
            out[entity] = self._triples_of(entity, int(max_per_entity))
        return out

    def _triples_of(self, entity: int, cap: int) -> list[KGTriple]:
        kg = self.context.kg
        _, _, rels = kg.snapshot.neighbors(entity, EdgeKind.RELATED_TO)
        found: dict[tuple[str, int, bool], KGTriple] = {}
        for rel in sorted(set(rels.tolist())):
            if len(found) >= cap:
                break
            subject, obj = int(kg.relation_subject[rel]), int(kg.relation_object[rel])
            triple = kg.relations[rel]
            if subject == entity:
                other, inverse = obj, False
            elif self.inverse:
                other, inverse = subject, True
            else:
                continue
            sentence = triple.provenance.sentence if triple.provenance else ""
            found.setdefault(
                (triple.predicate, other, inverse),
                KGTriple(
                    entity,
                    triple.predicate,
                    other,
                    kg.entities[entity].name,
                    kg.entities[other].name,
                    sentence,
                    inverse,
                ),
            )
        return list(found.values())
