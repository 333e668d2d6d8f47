"""Open-IE predicates folded: the spellings of one relation given one key.

A document graph's predicates are the extractor's phrases: MuSiQue's GPT-3.5 triples
say "located in" 696 times and "is located in" 178 times, "stars", "starring" and
"starred", "is part of" and "part of". A predicate in an answer matches the KG's
relation by name only when it is spelled as one of them, so
:class:`~quillian.components.kg.mentions.RelationIndex` tries the folded key before
embedding similarity. Folding the relations a KG-embedding model learns was measured
too and is not the default (``triples_from_knowledge_graph(kg, fold=True)``;
``python research/kge_predicates.py``): it did not tell held-out facts from
corrupted ones better on that graph.

:func:`relation_key` normalises a predicate as ReVerb does (Fader et al., EMNLP 2011,
section 5: "we normalize [relation phrases] by removing inflection, auxiliary verbs,
adjectives, and adverbs"), with three departures, each to stay deterministic and free
of a tagger: inflection is removed by the Snowball stemmer that BM25 already uses (so
"located" and "locates" meet; irregular forms such as "became" and "become" stay
apart, and the stemmer's own conflations, "founded" and "found", meet); auxiliaries,
determiners and adverbs are closed word lists rather than part-of-speech tags;
adjectives are kept (dropping them would fold "largest city of" into "city of").
A predicate that is nothing but auxiliaries ("is", "was a") keeps its verb's lemma
("be"), so the copula stays a relation of its own. Negation is kept: "not" is none of
the dropped words.

:class:`FoldedPredicates` numbers the distinct keys of a list of predicates and names
each relation by its most frequent spelling (the first seen among equals), so relation
names stay readable phrases for the relation index's embeddings.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

import Stemmer

__all__ = ["FoldedPredicates", "relation_key", "spelling"]

#: Auxiliary and modal verbs, each with the lemma a predicate made of them alone keeps.
_AUXILIARIES = {
    **dict.fromkeys(("am", "is", "are", "was", "were", "be", "been", "being", "'s"), "be"),
    **dict.fromkeys(("has", "have", "had", "having"), "have"),
    **dict.fromkeys(("do", "does", "did"), "do"),
    **dict.fromkeys(("will", "would", "shall", "should"), "will"),
    **dict.fromkeys(("can", "could"), "can"),
    **dict.fromkeys(("may", "might"), "may"),
    "must": "must",
}
_DETERMINERS = frozenset(
    "a an the this that these those its his her their our my your some any".split()  # noqa: SIM905
)
#: Adverbs of time, manner and degree that open-IE extractors leave in relation phrases
#: ("is also known as", "was formerly part of", "officially known as").
_ADVERBS = frozenset(
    "also again already currently eventually finally first formerly initially just later "  # noqa: SIM905
    "mainly now officially often once originally previously primarily recently since "
    "still subsequently then usually".split()
)
#: Words in any script (letters and digits, with an inner apostrophe).
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
_EMPTY = "related to"

_stemmer = Stemmer.Stemmer("english")


def spelling(predicate: str) -> str:
    """``predicate`` lower-cased with its spaces collapsed (``"related to"`` if empty):
    how a relation named after it is written."""
    return " ".join(predicate.lower().split()) or _EMPTY


@lru_cache(maxsize=65536)
def relation_key(predicate: str) -> str:
    """The relation ``predicate`` is counted as: lower-cased words without determiners,
    listed adverbs and auxiliaries, each stemmed (``"is located in"`` and ``"located
    in"`` are ``"locat in"``); a predicate of auxiliaries only keeps the last one's
    lemma (``"is a"`` is ``"be"``); a predicate with no word is ``"related to"``."""
    words = [
        w for w in _WORD.findall(predicate.lower()) if w not in _DETERMINERS and w not in _ADVERBS
    ]
    content = [w for w in words if w not in _AUXILIARIES]
    if not content:
        return _AUXILIARIES[words[-1]] if words else _EMPTY
    return " ".join(_stemmer.stemWords(content))


class FoldedPredicates:
    """Predicates numbered by :func:`relation_key`: ``ids[i]`` is the relation of the
    ``i``-th predicate given, ``names[r]`` relation ``r``'s most frequent spelling."""

    def __init__(self, predicates: Iterable[str]) -> None:
        spelled = [spelling(p) for p in predicates]
        numbers: dict[str, int] = {}
        self.ids = [numbers.setdefault(relation_key(p), len(numbers)) for p in spelled]
        counts: list[Counter[str]] = [Counter() for _ in numbers]
        for relation, phrase in zip(self.ids, spelled, strict=True):
            counts[relation][phrase] += 1
        # Counter.most_common keeps first-seen order among equal counts
        self.names = tuple(c.most_common(1)[0][0] for c in counts)
        self.keys = tuple(numbers)
