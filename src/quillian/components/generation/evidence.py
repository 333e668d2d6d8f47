"""What an answer rests on: passages, relations and knowledge-graph triples with their
source sentences, and the text forms the prompts take them in."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from quillian.components.kg.base import KGTriple
from quillian.components.retrieval.base import ActivationPath, ScoredPassage, UsedRelation
from quillian.components.retrieval.reasoning import reasoning_paths

__all__ = [
    "Evidence",
    "Reference",
    "context_values",
    "format_passages",
    "format_relations",
    "strongest",
    "with_memory",
]


T = TypeVar("T")


def _extend_unique(items: list[T], more: Iterable[T], key: Callable[[T], Hashable]) -> list[T]:
    """Append to ``items`` those of ``more`` whose key is new, in order; return them."""
    seen = {key(item) for item in items}
    new = []
    for item in more:
        k = key(item)
        if k not in seen:
            seen.add(k)
            new.append(item)
    items.extend(new)
    return new


@dataclass(frozen=True, slots=True)
class Reference:
    """A reference text given to the model that is not an indexed passage: one a
    knowledge model wrote (Know3-RAG), with who wrote it and its score."""

    text: str
    source: str
    """Who wrote it and for which query, e.g. ``answering model (kg)``."""
    score: float | None = None
    """Its KG-consistency score (lower is more consistent); None when unscored."""


@dataclass
class Evidence:
    """Passages, relations and KG triples gathered while answering, in the order first
    seen.

    A passage retrieved twice (say, by the original and the expanded query) is kept once.
    ``kg_triples`` are triples of an external knowledge graph that an LLM selected
    (KG-Infused RAG); they appear in :meth:`as_dict` only when there are some.
    """

    passages: list[ScoredPassage] = field(default_factory=list)
    relations: list[UsedRelation] = field(default_factory=list)
    kg_triples: list[KGTriple] = field(default_factory=list)
    paths: list[ActivationPath] = field(default_factory=list)
    """How retrieval reached the passages (SA); shown, never given to the model."""
    references: list[Reference] = field(default_factory=list)
    """Written references given to the model (Know3-RAG), in the order kept."""
    passages_read: bool = True
    """Whether the model read the passages; False where it read only the relations
    (KAGS: its passages are the kept relations' supporting passages)."""

    def add_paths(self, paths: Iterable[ActivationPath]) -> list[ActivationPath]:
        """Add activation paths to entities not seen yet; returns the new ones."""
        return _extend_unique(self.paths, paths, lambda p: p.entity)

    def add_passages(self, passages: Iterable[ScoredPassage]) -> list[ScoredPassage]:
        """Add passages not seen yet (by chunk); returns the ones that were new."""
        return _extend_unique(self.passages, passages, lambda p: p.chunk)

    def add_relations(self, relations: Iterable[UsedRelation]) -> list[UsedRelation]:
        """Add relations not seen yet (by relation id); returns the new ones."""
        return _extend_unique(self.relations, relations, lambda r: r.relation)

    def add_references(self, references: Iterable[Reference]) -> list[Reference]:
        """Add references whose text is new; returns the new ones."""
        return _extend_unique(self.references, references, lambda r: r.text)

    def add_kg_triples(self, triples: Iterable[KGTriple]) -> list[KGTriple]:
        """Add triples not seen yet (same head, relation and tail); returns the new ones."""
        return _extend_unique(self.kg_triples, triples, lambda t: (t.head, t.relation, t.tail))

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "passages": [
                {"chunk_id": p.chunk_id, "title": p.title, "score": round(p.score, 4)}
                for p in self.passages
            ],
            "relations": [
                {
                    "subject": r.subject,
                    "predicate": r.predicate,
                    "object": r.object,
                    "sentence": r.sentence or r.description,
                    "weight": round(r.weight, 4),
                    **({"hop": r.hop} if r.hop else {}),
                }
                for r in self.relations
            ],
        }
        if self.references:
            out["references"] = [
                {
                    "source": r.source,
                    "text": r.text,
                    "score": None if r.score is None else round(r.score, 4),
                }
                for r in self.references
            ]
        if not self.passages_read:
            out["passages_read"] = False
        if self.paths:  # as the API shows them: one mapping for every edge
            out["paths"] = [p.as_dict() for p in reasoning_paths(self.paths)]
        if self.kg_triples:
            out["kg_triples"] = [
                {
                    "head": t.subject_name,
                    "relation": t.relation,
                    "tail": t.object_name,
                    "head_id": t.fact[0],
                    "tail_id": t.fact[2],
                    "sentence": t.sentence,
                }
                for t in self.kg_triples
            ]
        return out


def _clean(text: str) -> str:
    return " ".join(text.split())


def format_passages(passages: Sequence[ScoredPassage], start: int = 1) -> str:
    """Numbered passages, ``[1] Title: text``, one per paragraph."""
    return "\n\n".join(
        f"[{i}] {p.title}: {_clean(p.text)}" if p.title else f"[{i}] {_clean(p.text)}"
        for i, p in enumerate(passages, start=start)
    )


def format_relations(relations: Sequence[UsedRelation]) -> str:
    """One relation per line, ``subject - predicate - object``."""
    return "\n".join(f"- {r.subject} - {r.predicate} - {r.object}" for r in relations)


def strongest(relations: Sequence[UsedRelation], limit: int) -> list[UsedRelation]:
    """The ``limit`` heaviest relations, heaviest first."""
    return sorted(relations, key=lambda r: -r.weight)[:limit]


def context_values(
    memory: str,
    passages: Sequence[ScoredPassage],
    relations: Sequence[UsedRelation] | None = None,
) -> dict[str, str]:
    """Prompt variables for knowledge: ``passages`` (numbered, after the summary of
    earlier steps when there is one) and, when given, ``relationships``."""
    values = {"passages": format_passages(passages)}
    if relations is not None:
        values["relationships"] = format_relations(relations) or "(none)"
    return with_memory(values, memory)


def with_memory(values: dict[str, str], memory: str) -> dict[str, str]:
    """``values`` with the summary of earlier steps put before the ``passages``."""
    if not memory:
        return values
    return {**values, "passages": f"Summary of earlier steps: {memory}\n\n{values['passages']}"}
