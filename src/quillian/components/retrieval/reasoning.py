"""How the answer was reached, as every edge shows it: a retrieval trace's activation
paths mapped once into reasoning paths (the API, MCP and the CLI all use
:func:`reasoning_paths`).

A trace's :class:`~quillian.components.retrieval.base.ActivationPath` lists the
relations from a seed to an entity of a returned passage, each in the direction it was
read (subject, predicate, object). A :class:`ReasoningPath` walks them in the direction
activation spread: from the seed, one step per hop, to the entity and on to the
passage's chunk, naming each entity by its content-derived id
(:func:`quillian.types.entity_id`) and each relation by its id and source sentence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from quillian.components.retrieval.base import ActivationPath, UsedRelation
from quillian.types import entity_id, normalize_name, relation_id

__all__ = ["PathEntity", "PathStep", "ReasoningPath", "reasoning_paths"]


@dataclass(frozen=True, slots=True)
class PathEntity:
    """An entity on a path: its content-derived id and its name."""

    entity: str
    name: str

    @classmethod
    def named(cls, name: str) -> PathEntity:
        return cls(entity_id(name), name)

    def as_dict(self) -> dict[str, str]:
        return {"entity": self.entity, "name": self.name}


@dataclass(frozen=True, slots=True)
class PathStep:
    """One hop: from ``source`` (nearer the seed) to ``target`` through a relation,
    given as it was read (``subject predicate object``, its sentence)."""

    hop: int
    source: PathEntity
    target: PathEntity
    relation: str
    subject: str
    predicate: str
    object: str
    sentence: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "hop": self.hop,
            "source": self.source.as_dict(),
            "target": self.target.as_dict(),
            "relation": self.relation,
            "subject": self.subject,
            "predicate": self.predicate,
            "object": self.object,
            "sentence": self.sentence,
        }


@dataclass(frozen=True, slots=True)
class ReasoningPath:
    """From a question's seed, step by step, to ``entity`` and the returned passage
    (``chunk_id``, ``title``) it is about; both empty where the entity is only
    mentioned by the returned passages. Activation also crosses links that are no
    relation (an entity to a passage naming it); a path whose first such link lies
    before its first relation starts where the relations start, not at the seed."""

    seed: PathEntity
    entity: PathEntity
    steps: tuple[PathStep, ...]
    chunk_id: str = ""
    title: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The path as plain data (what the API returns), written out field by field:
        ``dataclasses.asdict`` deep-copies every string and took a fifth of a served
        retrieval's time (``quillian.server.load`` on 2Wiki's 6,119 passages)."""
        return {
            "seed": self.seed.as_dict(),
            "entity": self.entity.as_dict(),
            "steps": [step.as_dict() for step in self.steps],
            "chunk_id": self.chunk_id,
            "title": self.title,
        }


def reasoning_paths(paths: Iterable[ActivationPath]) -> list[ReasoningPath]:
    """Each activation path with a relation, walked from its seed (see the module)."""
    return [_walk(path) for path in paths if path.relations]


def _walk(path: ActivationPath) -> ReasoningPath:
    steps: list[PathStep] = []
    here = path.entity
    for position in range(len(path.relations), 0, -1):
        relation = path.relations[position - 1]
        there, here = _ends(relation, here)
        steps.append(_step(relation, there, here, relation.hop or position))
        here = there
    steps.reverse()
    return ReasoningPath(
        seed=PathEntity.named(here),
        entity=PathEntity.named(path.entity),
        steps=tuple(steps),
        chunk_id=path.chunk_id,
        title=path.passage,
    )


def _ends(relation: UsedRelation, reached: str) -> tuple[str, str]:
    """``(source, target)`` of a relation that activation crossed to ``reached``:
    the other end first; as read (subject to object) when neither end is ``reached``."""
    key = normalize_name(reached)
    if normalize_name(relation.object) == key:
        return relation.subject, relation.object
    if normalize_name(relation.subject) == key:
        return relation.object, relation.subject
    return relation.subject, relation.object


def _step(relation: UsedRelation, source: str, target: str, hop: int) -> PathStep:
    sentence = relation.sentence or relation.description
    return PathStep(
        hop=hop,
        source=PathEntity.named(source),
        target=PathEntity.named(target),
        relation=relation_id(relation.subject, relation.predicate, relation.object, sentence),
        subject=relation.subject,
        predicate=relation.predicate,
        object=relation.object,
        sentence=sentence,
    )
