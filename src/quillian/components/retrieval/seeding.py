"""Seed entities for graph retrieval.

Two ways to find where activation starts:

* SA-RAG's (section 5.4): the top-k entity descriptions by cosine similarity to the
  query, and the entities they describe (``RetrievalContext.top_descriptions``).
* ``EntityLexicon.match`` links the entity names and aliases that occur verbatim in the
  query (greedy longest match over word n-grams), as HippoRAG links query entities.
  It needs no model and is exact where questions name their entities, which multi-hop
  questions almost always do. Names are keyed with their initials joined and spaced
  (``initials_spelled``), and a page's title without its qualifier names the page's
  entity (``page_aliases``; docs/sections/lift3.md).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from quillian.types import normalize_name

__all__ = [
    "LITERAL_TYPES",
    "EntityLexicon",
    "LexicalMatch",
    "initials_spelled",
    "is_literal",
    "lexicon_keys",
    "page_aliases",
    "title_base",
]

_TOKEN = re.compile(r"\w+(?:[-'’.&]\w+)*", re.UNICODE)
_POSSESSIVE = re.compile(r"['’]s?$")
_STOP_KEYS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "how",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "she",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "with",
        "you",
        "film",
        "song",
        "album",
        "book",
        "city",
        "country",
        "person",
        "people",
        "one",
        "first",
        "last",
        "name",
        "born",
        "died",
        "director",
        "father",
        "mother",
        "wife",
        "husband",
        "son",
        "daughter",
    ]
)


#: Entity types (spaCy's labels) of values rather than names.
LITERAL_TYPES = frozenset(["DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"])
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
#: Words a written date or number may hold besides digits: months, eras, ordinal and
#: plural suffixes ("1990s", "3rd"), a few connectives ("5th of May").
_MONTHS = "january february march april may june july august september october november december"
_FILLERS = "sept bc ad bce ce s st nd rd th of the and c ca"
_DATE_WORDS = frozenset([*_MONTHS.split(), *(m[:3] for m in _MONTHS.split()), *_FILLERS.split()])


def is_literal(name: str, entity_type: str = "") -> bool:
    """Whether an entity is a date, time or number rather than a name: its type is one
    of :data:`LITERAL_TYPES`, or its name holds a digit and no word but month names and
    date fillers ("4 December 1934", "1990s", "1,200"). An extractor that types nothing
    (an LLM's OpenIE) is judged by the name alone."""
    if entity_type.upper() in LITERAL_TYPES:
        return True
    if not any(ch.isdigit() for ch in name):
        return False
    return all(w.casefold() in _DATE_WORDS for w in _WORD.findall(name))


_INITIALS = re.compile(r"(?<![\w.])(?:[^\W\d_]\.\s?){2,}")


def initials_spelled(name: str) -> list[str]:
    """``name``, then its initials written the other ways: "D. P. Varma" also as "D.P.
    Varma" and the reverse (the same name, spelled with or without spaces)."""
    if not _INITIALS.search(name):
        return [name]

    def spell(sep: str) -> str:
        def join(m: re.Match[str]) -> str:
            tail = " " if m.group().endswith(" ") else ""
            return sep.join(f"{c}." for c in re.findall(r"[^\W\d_]", m.group())) + tail

        return _INITIALS.sub(join, name)

    return list(dict.fromkeys([name, spell(""), spell(" ")]))


_QUALIFIER = re.compile(r"^(.*\S)\s+\([^()]+\)$")


#: Strings whose derived values are kept (:func:`_qualified_base`, :func:`_base_key`,
#: :func:`_keys_of`): an update asks again of every qualified title (0.9k at 100k
#: passages) and of their bases' keys: 5.0 ms at 100k when each was worked out anew,
#: 0.9 ms kept (stop 90).
_KEPT_STRINGS = 1 << 16


def title_base(title: str) -> str | None:
    """A page title without its trailing qualifier ("L'Amour (music venue)" ->
    "L'Amour"), the way Wikipedia tells apart pages whose subjects share a name; None
    for a title with no qualifier."""
    title = title.strip()
    if not title.endswith(")"):  # most titles: no match tried (a build asks of every page)
        return None
    return _qualified_base(title)


@functools.lru_cache(maxsize=_KEPT_STRINGS)
def _qualified_base(title: str) -> str | None:
    found = _QUALIFIER.match(title)
    return found.group(1) if found else None


@functools.lru_cache(maxsize=_KEPT_STRINGS)
def _base_key(base: str) -> str:
    return normalize_name(base)


def page_aliases(pages: Iterable[tuple[int, str]]) -> list[tuple[int, list[str]]]:
    """``(entity, [base name])`` for each ``(entity, page title)`` whose title has a
    qualifier (:func:`title_base`), when no other page's title has the same base: a
    question names "L'Amour", not "L'Amour (music venue)", but a base two pages share
    ("Lilu (mythology)", "Lilu (ancient China)") does not say which one is meant."""
    by_key: dict[str, list[tuple[int, str]]] = {}
    for entity, title in pages:
        base = title_base(title)
        if base is not None and (key := _base_key(base)):
            by_key.setdefault(key, []).append((entity, base))
    return [(found[0][0], [found[0][1]]) for found in by_key.values() if len(found) == 1]


def lexicon_keys(names: Iterable[tuple[int, Iterable[str]]]) -> dict[str, int]:
    """The keys :class:`EntityLexicon` matches for ``(entity, [name, *aliases])`` pairs
    (each name normalised, with its initials spelled out), the first entity keeping a
    key."""
    keys: dict[str, int] = {}
    for entity, entity_names in names:
        for key in name_keys(entity_names):
            keys.setdefault(key, entity)
    return keys


def name_keys(names: Iterable[str]) -> list[str]:
    """The lexicon keys of one entity's names (:func:`lexicon_keys`), in order."""
    return [key for name in names for key in _keys_of(name)]


@functools.lru_cache(maxsize=_KEPT_STRINGS)
def _keys_of(name: str) -> tuple[str, ...]:
    return tuple(key for variant in initials_spelled(name) if (key := normalize_name(variant)))


@dataclass(frozen=True, slots=True)
class LexicalMatch:
    entity: int
    surface: str
    start: int
    end: int
    candidates: tuple[int, ...] = ()
    """Every entity the surface names, ``entity`` first (a resolver may find several)."""


def _namelike(surface: str) -> bool:
    """A capital letter (any script) or a digit: how a proper name shows in cased text."""
    return any(ch.isupper() or ch.isdigit() for ch in surface)


class EntityLexicon:
    """Normalised entity names and aliases mapped to entity indices.

    ``max_words`` bounds the n-gram length tried; keys shorter than ``min_chars`` and
    common question words never match, so "the" or "film" cannot seed a query. The
    names are a mapping held here, or (:meth:`over`) a resolver such as a large
    imported graph's :meth:`~quillian.components.kg.base.ExternalGraph.lookup`.
    """

    #: The longest n-gram tried by default.
    MAX_WORDS = 10

    def __init__(
        self,
        keys: Mapping[str, int],
        max_words: int = MAX_WORDS,
        min_chars: int = 3,
        require_capital: bool = True,
    ) -> None:
        self._keys = dict(keys)
        self._resolve: Callable[[str], Sequence[int]] = self._from_keys
        self._max_words = max_words
        self._min_chars = min_chars
        self._require_capital = require_capital

    @classmethod
    def over(cls, resolve: Callable[[str], Sequence[int]], max_words: int = 6) -> EntityLexicon:
        """A lexicon whose names ``resolve`` maps (a normalised key to the entities it
        names, best first) instead of a mapping held in memory."""
        lexicon = cls({}, max_words=max_words)
        lexicon._resolve = resolve
        return lexicon

    def _from_keys(self, key: str) -> Sequence[int]:
        found = self._keys.get(key)
        return () if found is None else (found,)

    @classmethod
    def from_names(cls, names: Iterable[tuple[int, Iterable[str]]]) -> EntityLexicon:
        """Build from ``(entity, [name, *aliases])`` pairs; the first entity keeps a key."""
        return cls(lexicon_keys(names))

    def __len__(self) -> int:
        return len(self._keys)

    def _usable(self, key: str) -> bool:
        return len(key) >= self._min_chars and key not in _STOP_KEYS

    def lookup(self, surface: str) -> int | None:
        found = self.candidates(surface)
        return found[0] if found else None

    def candidates(self, surface: str) -> tuple[int, ...]:
        """Every entity ``surface`` names (a trailing possessive dropped if need be)."""
        key = normalize_name(surface)
        if not self._usable(key):
            return ()
        found = tuple(self._resolve(key))
        if not found and _POSSESSIVE.search(surface):
            found = tuple(self._resolve(normalize_name(_POSSESSIVE.sub("", surface))))
        return found

    def match(self, text: str) -> list[LexicalMatch]:
        """Non-overlapping entity mentions in ``text``, longest first, left to right.

        With ``require_capital`` (the default), a mention must hold a capital letter or
        a digit where ``text`` has any case at all: proper names are capitalised, so
        "the border with" cannot link an extracted entity named "border with".
        """
        tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
        cased = self._require_capital and text != text.lower() and text != text.upper()
        # named[t]: tokens before t holding a capital or a digit. Every letter and digit
        # of the text is inside a token, so a span is name-like when it holds such a
        # token: one pass over the text instead of one per span tried
        named = [0]
        for start, end in tokens:
            named.append(named[-1] + _namelike(text[start:end]))
        matches: list[LexicalMatch] = []
        i = 0
        while i < len(tokens):
            found = None
            for j in range(min(len(tokens), i + self._max_words) - 1, i - 1, -1):
                start, end = tokens[i][0], tokens[j][1]
                if cased and named[j + 1] == named[i]:
                    continue
                entities = self.candidates(text[start:end])
                if entities:
                    found = LexicalMatch(entities[0], text[start:end], start, end, entities)
                    i = j + 1
                    break
            if found is None:
                i += 1
            else:
                matches.append(found)
        return matches
