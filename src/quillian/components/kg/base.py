"""What KG-Infused RAG needs from a pre-existing knowledge graph.

An :class:`ExternalGraph` is read-only: entities are dense integer ids with a name,
aliases and a description; triples are directed ``head -relation-> tail``. Backends:
an imported graph (Wikidata5M files, RDF, WordNet) stored as memory-mapped CSR arrays,
and the document graph of an index seen through the same protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["ExternalGraph", "KGTriple"]


@dataclass(frozen=True, slots=True)
class KGTriple:
    """One triple met while expanding ``head``, leading to ``tail``, with the endpoints'
    names; ``sentence`` is the source sentence when the graph was built from documents
    ("" for curated graphs).

    ``inverse`` marks a fact read from its object's side (a document graph walked both
    ways): the fact is ``<tail | relation | head>``, and prompts, evidence and
    de-duplication see it in that order, while activation still moves on to ``tail``.
    """

    head: int
    relation: str
    tail: int
    head_name: str
    tail_name: str
    sentence: str = ""
    inverse: bool = False

    @property
    def fact(self) -> tuple[int, str, int]:
        """``(subject, relation, object)`` as the fact states it."""
        if self.inverse:
            return (self.tail, self.relation, self.head)
        return (self.head, self.relation, self.tail)

    @property
    def subject_name(self) -> str:
        return self.tail_name if self.inverse else self.head_name

    @property
    def object_name(self) -> str:
        return self.head_name if self.inverse else self.tail_name

    def text(self) -> str:
        """The form prompts show: ``<subject | relation | object>``."""
        return f"<{self.subject_name} | {self.relation} | {self.object_name}>"


@runtime_checkable
class ExternalGraph(Protocol):
    """A read-only knowledge graph for KG-guided spreading activation."""

    name: str

    def __len__(self) -> int:
        """Number of entities."""
        ...

    def entity_name(self, entity: int) -> str: ...

    def description(self, entity: int) -> str: ...

    def aliases(self, entity: int) -> list[str]: ...

    def lookup(self, name: str) -> list[int]:
        """Entities whose name or alias equals ``name``, compared by
        :func:`quillian.types.normalize_name`."""
        ...

    def seed_entities(self, query: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` entities whose descriptions score highest against ``query`` by inner
        product of embeddings, best first (KG-Infused RAG eq. 3)."""
        ...

    def triples(self, entities: Sequence[int], max_per_entity: int) -> dict[int, list[KGTriple]]:
        """Each entity's outgoing 1-hop triples, at most ``max_per_entity`` each, in a
        deterministic order."""
        ...
