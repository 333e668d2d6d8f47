"""An in-memory :class:`~quillian.components.kg.base.ExternalGraph` for tests.

:class:`MemoryGraph` is built from entity names with descriptions and triples written
as name triples. Seeds rank descriptions by inner product with the query under an
embedder (by default :class:`~quillian.components.embedding.hashed.KeywordEmbedder`, so a test can
work the ranking out by hand: shared words). Every :meth:`MemoryGraph.triples` call is
recorded, so tests can assert which entities each activation round expanded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from quillian.components.embedding.base import Embedder
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.kg.base import KGTriple
from quillian.errors import InputError
from quillian.types import normalize_name

__all__ = ["MemoryGraph"]


class MemoryGraph:
    """Entities numbered in the order of ``entities``; triples kept in the given order."""

    def __init__(
        self,
        entities: Mapping[str, str],
        triples: Sequence[tuple[str, str, str]],
        *,
        aliases: Mapping[str, Sequence[str]] | None = None,
        embedder: Embedder | None = None,
        name: str = "memory",
    ) -> None:
        self.name = name
        self._names = list(entities)
        self._descriptions = [entities[n] for n in self._names]
        self._aliases = {self._names.index(n): list(a) for n, a in (aliases or {}).items()}
        index = {n: i for i, n in enumerate(self._names)}
        self._out: list[list[tuple[str, int]]] = [[] for _ in self._names]
        for head, relation, tail in triples:
            if head not in index or tail not in index:
                raise InputError(f"triple ({head}, {relation}, {tail}) names an unknown entity")
            self._out[index[head]].append((relation, index[tail]))
        self._embedder = embedder or KeywordEmbedder()
        self._vectors = self._embedder.embed(
            [d or n for d, n in zip(self._descriptions, self._names, strict=True)]
        )
        self.requests: list[tuple[tuple[int, ...], int]] = []
        """Every :meth:`triples` call: the entities asked for and the cap."""

    def __len__(self) -> int:
        return len(self._names)

    def _check(self, entity: int) -> int:
        if not 0 <= entity < len(self._names):
            raise InputError(f"entity {entity} outside 0..{len(self._names) - 1}")
        return int(entity)

    def id(self, name: str) -> int:
        """The entity named ``name`` (exactly); raises KeyError when there is none."""
        return self._names.index(name)

    def entity_name(self, entity: int) -> str:
        return self._names[self._check(entity)]

    def description(self, entity: int) -> str:
        return self._descriptions[self._check(entity)]

    def aliases(self, entity: int) -> list[str]:
        return list(self._aliases.get(self._check(entity), []))

    def lookup(self, name: str) -> list[int]:
        """Entities whose name or alias has the :func:`~quillian.types.normalize_name`
        key of ``name``, as every graph compares names."""
        key = normalize_name(name)
        if not key:
            return []
        return [
            i
            for i, n in enumerate(self._names)
            if key in {normalize_name(x) for x in (n, *self._aliases.get(i, []))}
        ]

    def seed_entities(self, query: str, k: int) -> list[tuple[int, float]]:
        """Top ``k`` by inner product with the description vectors; ties by entity id."""
        scores = self._vectors @ self._embedder.embed([query])[0]
        order = np.lexsort((np.arange(len(scores)), -scores))[:k]
        return [(int(i), float(scores[i])) for i in order]

    def triples(self, entities: Sequence[int], max_per_entity: int) -> dict[int, list[KGTriple]]:
        unique = tuple(dict.fromkeys(self._check(int(e)) for e in entities))
        self.requests.append((unique, max_per_entity))
        return {
            e: [
                KGTriple(e, rel, tail, self._names[e], self._names[tail])
                for rel, tail in self._out[e][:max_per_entity]
            ]
            for e in unique
        }
