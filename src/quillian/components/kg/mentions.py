"""Linking free text to a knowledge graph: entity mentions, names, and relations.

Know3-RAG links a question, an answer and a reference to KG entities, and each
extracted triple's ends and predicate to KG ids (spec section 8). Offline, with the
linking Quillian already has:

* :func:`find_mentions`: the longest word spans of a text (left to right, not
  overlapping, holding a capital or a digit) whose :func:`~quillian.types.normalize_name`
  key is an entity's name or alias (:meth:`ExternalGraph.lookup`), found as the index's
  seeding finds them; a trailing possessive ("Quillian's") is tried without it.
* :func:`link_name`: one name (a triple's subject or object): its exact name or alias,
  else the longest mention inside it ("the director Steven Spielberg"), else the
  entities whose descriptions are nearest to it *and* whose names share at least half
  their words with it (description similarity alone links namesakes and strangers).
* :class:`RelationIndex`: a predicate to a KG relation: its exact name (by the same
  key), else one of its aliases (Wikidata5M's relation file lists several: "educated
  at" is also "alma mater"), else the relation whose sentence ``"{s} {relation} {o}."``
  is most similar to the triple's ``"{s} {predicate} {o}."``, among the ``shortlist``
  relations whose names are nearest the predicate (spec section 8.5, with a shortlist
  so a graph with thousands of predicates costs one small embedding batch per triple).
  It also ranks relations against a query for the related-entity search.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.base import Embedder
from quillian.components.kg.base import ExternalGraph
from quillian.components.kg.predicates import relation_key
from quillian.components.retrieval.seeding import EntityLexicon
from quillian.errors import ConfigError
from quillian.types import normalize_name

__all__ = ["Mention", "RelationIndex", "RelationMatch", "find_mentions", "link_name"]

#: Least share of words a name must have in common with an entity found by its
#: description alone (as :mod:`quillian.components.kg.link` asks of such candidates).
MIN_WORD_OVERLAP = 0.5


@dataclass(frozen=True)
class Mention:
    """A span of text and the entities it names; ``how`` is ``name`` (the first
    entity's name), ``alias`` (one of its other names), ``inner`` (a name or alias
    inside it) or ``description`` (then ``score`` is the best kept entity's description
    similarity)."""

    text: str
    entities: tuple[int, ...]
    how: str = "name"
    score: float | None = None

    def as_dict(self) -> dict[str, object]:
        """The link as a trace shows it."""
        return {
            "text": self.text,
            "how": self.how,
            "entities": list(self.entities),
            "score": None if self.score is None else round(self.score, 4),
        }


def _name_or_alias(text: str, entities: Sequence[int], graph: ExternalGraph) -> str:
    """``name`` when ``text`` is the first entity's name (by its key), else ``alias``."""
    key = normalize_name(text)
    return "name" if entities and normalize_name(graph.entity_name(entities[0])) == key else "alias"


def find_mentions(text: str, graph: ExternalGraph, *, max_candidates: int = 3) -> list[Mention]:
    """The entity mentions of ``text``, left to right, longest spans first, as the
    index's seeding finds them (:class:`~quillian.components.retrieval.seeding.EntityLexicon`:
    proper-name spans, no stop words, a trailing possessive dropped), resolved by the
    graph's own look-up; at most ``max_candidates`` entities per mention."""
    lexicon = EntityLexicon.over(graph.lookup)
    found = []
    for m in lexicon.match(text):
        entities = m.candidates[:max_candidates]
        found.append(Mention(m.surface, entities, _name_or_alias(m.surface, entities, graph)))
    return found


def _overlap(a: str, b: str) -> float:
    wa, wb = set(normalize_name(a).split()), set(normalize_name(b).split())
    return len(wa & wb) / len(wa | wb) if wa and wb else 0.0


def link_name(
    name: str, graph: ExternalGraph, *, max_candidates: int = 3, description_candidates: int = 5
) -> Mention | None:
    """The entities ``name`` refers to (see the module docstring), or None."""
    exact = graph.lookup(name)
    if exact:
        entities = tuple(exact[:max_candidates])
        return Mention(name, entities, _name_or_alias(name, entities, graph))
    inner = find_mentions(name, graph, max_candidates=max_candidates)
    if inner:
        best = max(inner, key=lambda m: len(m.text))
        return Mention(name, best.entities, "inner")
    if description_candidates <= 0:
        return None
    near = graph.seed_entities(name, description_candidates)
    kept = [
        (e, score)
        for e, score in near
        if max(_overlap(name, n) for n in (graph.entity_name(e), *graph.aliases(e)))
        >= MIN_WORD_OVERLAP
    ]
    if not kept:
        return None
    entities = tuple(e for e, _ in kept[:max_candidates])
    return Mention(name, entities, "description", kept[0][1])


@dataclass(frozen=True)
class RelationMatch:
    """A predicate mapped to relation ``relation``: ``how`` is ``exact`` (same name),
    ``alias`` (the same key as one of the relation's aliases; a name wins over another
    relation's alias, and of two relations with the same alias the first in the graph's
    order), ``folded`` (the first relation, in the graph's order, with the same
    :func:`~quillian.components.kg.predicates.relation_key`: "was produced in" for
    "produced in", where the embedding's pick was "was produced by") or ``embedding``
    (then ``similarity`` is the sentences' cosine)."""

    relation: int
    how: str
    similarity: float = 1.0


class RelationIndex:
    """The KG's relation names (and aliases), matched to predicates and ranked against
    queries. ``aliases[r]`` are relation ``r``'s other names (None: none)."""

    def __init__(
        self,
        names: Sequence[str],
        embedder: Embedder,
        *,
        shortlist: int = 8,
        aliases: Sequence[Sequence[str]] | None = None,
    ) -> None:
        if not names:
            raise ConfigError("the knowledge graph has no relations")
        if shortlist <= 0:
            raise ConfigError(f"shortlist must be greater than 0, got {shortlist}")
        if aliases is not None and len(aliases) != len(names):
            raise ConfigError(f"{len(aliases)} relation alias lists for {len(names)} relations")
        self.names = tuple(names)
        self.aliases = tuple(tuple(a) for a in aliases) if aliases else ((),) * len(self.names)
        self.embedder = embedder
        self.shortlist = shortlist
        self._keys: dict[str, int] = {}
        self._folded: dict[str, int] = {}
        self._alias_keys: dict[str, int] = {}
        for i, name in enumerate(self.names):
            self._keys.setdefault(_relation_key(name), i)
            self._folded.setdefault(relation_key(_readable(name)), i)
        for i, others in enumerate(self.aliases):
            for alias in others:
                key = _relation_key(alias)
                if key and key not in self._keys:
                    self._alias_keys.setdefault(key, i)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.names)

    @cached_property
    def vectors(self) -> npt.NDArray[np.float32]:
        """The relation names embedded (``_`` read as a space), one row per relation."""
        with self._lock:
            return self.embedder.embed([_readable(n) for n in self.names])

    def match(self, subject: str, predicate: str, obj: str) -> RelationMatch:
        exact = self._keys.get(_relation_key(predicate))
        if exact is not None:
            return RelationMatch(exact, "exact")
        alias = self._alias_keys.get(_relation_key(predicate))
        if alias is not None:
            return RelationMatch(alias, "alias")
        folded = self._folded.get(relation_key(predicate))
        if folded is not None:
            return RelationMatch(folded, "folded")
        near = self.rank(self.embedder.embed([_readable(predicate)])[0], self.shortlist)
        sentences = [f"{subject} {predicate} {obj}."] + [
            f"{subject} {_readable(self.names[r])} {obj}." for r, _ in near
        ]
        vectors = self.embedder.embed(sentences)
        similarity = vectors[1:] @ vectors[0]
        best = int(np.argmax(similarity))
        return RelationMatch(near[best][0], "embedding", float(similarity[best]))

    def rank(
        self, query: npt.NDArray[np.float32], k: int, among: npt.ArrayLike | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` relations (of ``among``, else all) whose names are most similar to
        the query vector, best first."""
        candidates = (
            np.arange(len(self.names))
            if among is None
            else np.unique(np.asarray(among, dtype=np.int64))
        )
        if not len(candidates) or k <= 0:
            return []
        scores = self.vectors[candidates] @ np.asarray(query, dtype=np.float32)
        best = np.argsort(-scores, kind="stable")[:k]
        return [(int(candidates[i]), float(scores[i])) for i in best]


def _readable(name: str) -> str:
    return " ".join(name.replace("_", " ").split())


def _relation_key(name: str) -> str:
    return normalize_name(_readable(name))
