"""What Know3-RAG reads from its knowledge graph: linking, triple scores, related entities.

:class:`Know3Knowledge` joins a graph (names, aliases, descriptions, look-ups), the
ComplEx model trained on it with its per-head reference means
(:class:`~quillian.components.kge.confidence.TripleConfidence`), and the graph's
relation names (:class:`~quillian.components.kg.mentions.RelationIndex`). Everything
here is CPU work a pipeline runs off the event loop.

Related-entity search (Algorithm 1, spec section 6), for each linked query entity e:

1. the local relation r* is the one of e's relations whose name is most similar to the
   query. The paper scores cos([e; r], q); for unit vectors e, r, q that is
   (e·q + r·q)/2 against [q; q], and e·q is the same for every r, so the ranking is
   that of r·q;
2. up to ``local_tails`` tails of e along r*, the best by ComplEx score f(e, r*, t);
3. the ``global_relations`` relations of the whole KG most similar to the query (the
   authors' code ranks all relations; ranked over e's own, r* would always be among
   them and the step would never run); unless r* is among them, the single
   (r, x) with the highest f(e, r, x) over every entity x other than e;
4. the facts found are verbalised into e's description, and each new entity joins the
   list with its own description.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.base import Embedder
from quillian.components.generation.know3_outputs import ExtractedTriple
from quillian.components.kg.base import ExternalGraph
from quillian.components.kg.mentions import (
    Mention,
    RelationIndex,
    find_mentions,
    link_name,
)
from quillian.components.kge.confidence import MAX_SCORE, Aggregation, TripleConfidence, aggregate
from quillian.types import normalize_name

__all__ = [
    "EntityCard",
    "Know3Knowledge",
    "ScoredTriple",
    "TextScore",
    "format_entities",
]


@dataclass(frozen=True)
class ScoredTriple:
    """An extracted triple, how it was linked, and its relative score (None: its ends or
    predicate did not link, or its head has no KG triple)."""

    triple: ExtractedTriple
    head: int | None = None
    relation: int | None = None
    tail: int | None = None
    linked: str = ""
    """The KG triple it was read as, ``<head | relation | tail>`` ("" if none)."""
    relation_how: str = ""
    score: float | None = None
    note: str = ""
    """Why it was not scored."""
    subject_link: Mention | None = None
    """How the subject was linked (its candidates, and by name, alias, inner mention or
    description vector with its similarity); None: it was not."""
    object_link: Mention | None = None
    """The same for the object."""

    def as_dict(self) -> dict[str, object]:
        return {
            "triple": [self.triple.subject, self.triple.predicate, self.triple.object],
            "linked": self.linked,
            "subject_link": None if self.subject_link is None else self.subject_link.as_dict(),
            "object_link": None if self.object_link is None else self.object_link.as_dict(),
            "relation_match": self.relation_how,
            "score": None if self.score is None else round(self.score, 4),
            "note": self.note,
        }


@dataclass(frozen=True)
class TextScore:
    """A text's triples and their aggregate relative score (None: nothing scorable)."""

    triples: tuple[ScoredTriple, ...]
    score: float | None
    entities: int
    """Entities linked in the text (orders unscorable references)."""
    mentions: tuple[str, ...] = ()
    """The text's spans linked to KG entities."""
    dropped: tuple[str, ...] = ()
    """Items of the triple list dropped before linking, each with why (a pronoun or
    generic noun, a missing field, an unreadable list)."""
    parse_notes: tuple[str, ...] = ()
    """How the triple list was read when it was not the JSON list asked for."""

    @property
    def rank_key(self) -> float:
        """Lower ranks first; an unscorable text ranks after every scored one, ties
        going to the text with more linked entities (the authors' code)."""
        return self.score if self.score is not None else MAX_SCORE - self.entities


@dataclass
class EntityCard:
    """A related entity as prompts show it: its label and its (enriched) description."""

    entity: int
    label: str
    description: str
    source: str = "question"
    """question, local (a KG neighbour) or global (predicted by the KGE model)."""
    facts: list[str] = field(default_factory=list)


def format_entities(cards: Sequence[EntityCard], limit: int) -> list[str]:
    """``{label}: {description}`` per card, the description (facts appended) cut at
    ``limit`` characters."""
    lines = []
    for card in cards:
        description = " ".join([card.description.strip(), *card.facts]).strip()
        if len(description) > limit:
            description = description[: limit - 3].rstrip() + "..."
        lines.append(f"{card.label}: {description}" if description else card.label)
    return lines


class Know3Knowledge:
    """A graph with its trained ComplEx model, for linking and scoring text."""

    def __init__(
        self,
        graph: ExternalGraph,
        confidence: TripleConfidence,
        relations: RelationIndex,
        embedder: Embedder,
        *,
        name: str = "",
    ) -> None:
        self.graph = graph
        self.confidence = confidence
        self.relations = relations
        self.embedder = embedder
        self.name = name or graph.name

    def __repr__(self) -> str:
        size = f"{len(self.graph)} entities, {len(self.relations)} relations"
        return f"Know3Knowledge({self.name!r}, {size})"

    # --- linking and scoring -----------------------------------------------------------

    def mentions(self, text: str) -> list[Mention]:
        return find_mentions(text, self.graph)

    def score_text(
        self, triples: Sequence[ExtractedTriple], mentions: Sequence[Mention], how: Aggregation
    ) -> TextScore:
        """Link and score ``triples`` read from a text whose mentions are ``mentions``."""
        known = {normalize_name(m.text): m for m in mentions}
        scored = tuple(self.score_triple(t, known) for t in triples)
        values = [s.score for s in scored if s.score is not None]
        entities = len({e for m in mentions for e in m.entities[:1]})
        names = tuple(dict.fromkeys(m.text for m in mentions))
        return TextScore(scored, aggregate(values, how), entities, names)

    def _link(self, name: str, known: dict[str, Mention]) -> Mention | None:
        return known.get(normalize_name(name)) or link_name(name, self.graph)

    def score_triple(self, triple: ExtractedTriple, known: dict[str, Mention]) -> ScoredTriple:
        """The triple's ends linked (a mention of the text first), its predicate mapped,
        and the best-scoring reading among its candidate entities (the most
        KG-consistent reading counts: an ambiguous name is not held against it)."""
        subject, obj = self._link(triple.subject, known), self._link(triple.object, known)
        if subject is None or obj is None:
            missing = triple.subject if subject is None else triple.object
            return ScoredTriple(
                triple,
                note=f"no KG entity for {missing!r}",
                subject_link=subject,
                object_link=obj,
            )
        match = self.relations.match(triple.subject, triple.predicate, triple.object)
        best: ScoredTriple | None = None
        unscored: ScoredTriple | None = None
        for h in subject.entities:
            for t in obj.entities:
                if h == t:
                    continue
                score = self.confidence.relative(h, match.relation, t)
                linked = self.fact_text(h, match.relation, t)
                candidate = ScoredTriple(
                    triple,
                    h,
                    match.relation,
                    t,
                    linked,
                    match.how,
                    score,
                    "" if score is not None else "its head has no KG triple",
                    subject,
                    obj,
                )
                if score is None:
                    unscored = unscored or candidate
                elif best is None or score < (best.score or 0.0):
                    best = candidate
        if best is not None:
            return best
        same = "both ends are the same KG entity"
        return unscored or ScoredTriple(triple, note=same, subject_link=subject, object_link=obj)

    def fact_text(self, head: int, relation: int, tail: int) -> str:
        name = self.graph.entity_name
        return f"<{name(head)} | {self.relations.names[relation]} | {name(tail)}>"

    # --- related-entity search (Algorithm 1) --------------------------------------------

    def embed(self, text: str) -> npt.NDArray[np.float32]:
        return self.embedder.embed([text])[0]

    def related_entities(
        self,
        query: str,
        *,
        local_tails: int = 3,
        global_relations: int = 3,
        max_entities: int = 5,
    ) -> list[EntityCard]:
        """E = E^q ∪ E^l ∪ E^g for ``query`` (see the module docstring), as cards."""
        q = self.embed(query)
        heads = list(dict.fromkeys(m.entities[0] for m in self.mentions(query)))[:max_entities]
        cards = {e: self._card(e, "question") for e in heads}
        top = [r for r, _ in self.relations.rank(q, global_relations)]
        for e in heads:
            relations, tails = self.confidence.out_edges(e)
            local: int | None = None
            if len(relations):
                local = self.relations.rank(q, 1, among=relations)[0][0]
                along = tails[relations == local]
                for tail, _ in self.confidence.top_tails(e, local, local_tails, among=along):
                    self._add_fact(cards, e, local, tail, "local")
            if local is not None and local in top:
                continue
            predicted = [
                (score, r, tail) for r in top for tail, score in self.confidence.top_tails(e, r, 1)
            ]
            if predicted:
                _, r, tail = max(predicted)
                self._add_fact(cards, e, r, tail, "global")
        return list(cards.values())

    def _card(self, entity: int, source: str) -> EntityCard:
        return EntityCard(
            entity, self.graph.entity_name(entity), self.graph.description(entity), source
        )

    def _add_fact(
        self, cards: dict[int, EntityCard], head: int, relation: int, tail: int, source: str
    ) -> None:
        name = self.graph.entity_name
        relation_text = self.relations.names[relation].replace("_", " ")
        cards[head].facts.append(f"{name(head)} {relation_text} {name(tail)}.")
        if tail not in cards:
            cards[tail] = self._card(tail, source)
