"""What an answer rests on: passages and relations with their source sentences, and the
text forms the prompts take them in."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from quillian.components.retrieval.base import ScoredPassage, UsedRelation

__all__ = [
    "Evidence",
    "context_values",
    "format_passages",
    "format_relations",
    "strongest",
]


@dataclass
class Evidence:
    """Passages and relations gathered while answering, in the order first seen.

    A passage retrieved twice (say, by the original and the expanded query) is kept once.
    """

    passages: list[ScoredPassage] = field(default_factory=list)
    relations: list[UsedRelation] = field(default_factory=list)

    def add_passages(self, passages: Iterable[ScoredPassage]) -> list[ScoredPassage]:
        """Add passages not seen yet; returns the ones that were new."""
        seen = {p.chunk for p in self.passages}
        new = []
        for p in passages:
            if p.chunk not in seen:
                seen.add(p.chunk)
                new.append(p)
        self.passages.extend(new)
        return new

    def add_relations(self, relations: Iterable[UsedRelation]) -> list[UsedRelation]:
        seen = {r.relation for r in self.relations}
        new = []
        for r in relations:
            if r.relation not in seen:
                seen.add(r.relation)
                new.append(r)
        self.relations.extend(new)
        return new

    def as_dict(self) -> dict[str, Any]:
        return {
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
                }
                for r in self.relations
            ],
        }


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
    knowledge = format_passages(passages)
    if memory:
        knowledge = f"Summary of earlier steps: {memory}\n\n{knowledge}"
    values = {"passages": knowledge}
    if relations is not None:
        values["relationships"] = format_relations(relations) or "(none)"
    return values
