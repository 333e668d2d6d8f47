"""Pure text helpers shared by the extractors: sentences, names, titles and dates.

Nothing here loads a model. Every span is a ``(start, end)`` pair of character
offsets into the text it was computed from, so ``text[start:end]`` is the sentence or
the name itself.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from quillian.types import normalize_name

__all__ = [
    "Span",
    "Surfaces",
    "TitleIndex",
    "TitleNames",
    "clean_name",
    "describe",
    "find_dates",
    "find_name",
    "first_sentence",
    "lead_description",
    "parse_title",
    "sentence_of",
    "split_long",
    "split_sentences",
    "title_aliases",
    "title_keys",
    "title_surface",
]

Span = tuple[int, int]

# --- sentences ---------------------------------------------------------------------------

# A candidate boundary: terminal punctuation, optional closing quotes/brackets, whitespace.
_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]*\s+")
# A paragraph break: a line holding only whitespace, with the whitespace around it.
_PARAGRAPH = re.compile(r"\n[^\S\n]*\n\s*")
# Words that end with a full stop without ending a sentence.
_ABBREVIATIONS = frozenset(
    {
        "st", "mr", "mrs", "ms", "dr", "jr", "sr", "prof", "gen", "col", "capt", "lt",
        "sgt", "rev", "hon", "no", "co", "inc", "ltd", "vs", "etc", "c", "ca", "d", "b",
        "fl", "r", "approx", "dept", "est", "fig", "vol", "op", "ed", "eds", "jan", "feb",
        "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "mt", "ft",
    }
)  # fmt: skip
_WORD_BEFORE = re.compile(r"([\w.]+)\.[\"'”’)\]]*\s*$")


def split_sentences(text: str) -> list[Span]:
    """Split ``text`` into sentence spans with punctuation rules (no model).

    A paragraph break (a blank line) always ends a sentence, with or without
    punctuation: a sentence never spans paragraphs (a list of headings or definitions
    separated by blank lines is one sentence each, not one sentence pairing all their
    names). Within a paragraph, a full stop ends a sentence unless it follows an initial
    (``John F. Kennedy``), a known abbreviation (``St.``, ``Jr.``, ``c.``) or a dotted
    acronym (``U.S.``). A piece that starts with a lower-case letter or a closing bracket
    is glued to the sentence before it in its paragraph, which repairs splits inside
    quoted titles (``"What is God?" was ...``). Spans exclude surrounding whitespace; a
    paragraph without a boundary gives one span.
    """
    spans: list[Span] = []
    start = 0
    for brk in _PARAGRAPH.finditer(text):
        spans += _paragraph_sentences(text, start, brk.start())
        start = brk.end()
    return spans + _paragraph_sentences(text, start, len(text))


def _paragraph_sentences(text: str, low: int, high: int) -> list[Span]:
    """:func:`split_sentences` within ``text[low:high]``, one paragraph."""
    spans: list[Span] = []
    start = low
    for match in _BOUNDARY.finditer(text, low, high):
        end = match.end()
        if end >= high or not _ends_sentence(text, match, low):
            continue
        spans.append((start, end))
        start = end
    spans.append((start, high))
    return _merge_fragments(text, [s for s in (_strip(text, a, b) for a, b in spans) if s])


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` by :func:`split_sentences` (``text`` stripped if
    it has no boundary)."""
    spans = split_sentences(text)
    return text[spans[0][0] : spans[0][1]] if spans else text.strip()


def _ends_sentence(text: str, match: re.Match[str], low: int) -> bool:
    if text[match.start()] != ".":
        return True
    word = _WORD_BEFORE.search(text, max(low, match.start() - 40), match.end())
    if word is None:
        return True
    token = word.group(1)
    if "." in token or (len(token) == 1 and token.isalpha()):
        return False
    return token.casefold() not in _ABBREVIATIONS


def _strip(text: str, start: int, end: int) -> Span | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if end > start else None


def _merge_fragments(text: str, spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for start, end in spans:
        first = text[start]
        if merged and (first.islower() or first in ")]},;:"):
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def sentence_of(spans: Sequence[Span], position: int) -> int:
    """Index of the sentence span containing ``position`` (the nearest one before it)."""
    return max(0, bisect_right(spans, position, key=lambda span: span[0]) - 1)


def describe(text: str, spans: Sequence[Span], indices: Iterable[int], limit: int) -> str:
    """The sentences at ``indices`` (in text order, each once), joined, up to ``limit`` chars.

    The first sentence is always kept whole, so a description is never empty.
    """
    parts: list[str] = []
    size = -1
    for i in sorted(set(indices)):
        sentence = text[spans[i][0] : spans[i][1]]
        if parts and size + 1 + len(sentence) > limit:
            break
        parts.append(sentence)
        size += 1 + len(sentence)
    return " ".join(parts)


def lead_description(text: str, spans: Sequence[Span], limit: int = 300) -> str:
    """The leading sentence(s) of ``text`` up to ``limit`` chars; the first one always whole."""
    return describe(text, spans, range(len(spans)), limit)


_SPACE = re.compile(r"\s+")


def split_long(text: str, limit: int) -> list[Span]:
    """Cut ``text`` into consecutive pieces of at most ``limit`` characters, for a model
    that refuses longer input (spaCy's ``nlp.max_length``).

    The pieces cover the text exactly (``"".join`` of them is ``text``), so an offset
    in a piece plus the piece's start is an offset in ``text``. Each cut falls, within
    the second half of a piece, after the last paragraph break, else after the last
    sentence end (:func:`split_sentences`'s boundary), else after the last whitespace,
    and only in text without any of those at exactly ``limit`` characters.
    A text within ``limit`` is one piece.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    spans: list[Span] = []
    start = 0
    while len(text) - start > limit:
        end = _cut(text, start + max(1, limit // 2), start + limit)
        spans.append((start, end))
        start = end
    spans.append((start, len(text)))
    return spans


def _cut(text: str, low: int, high: int) -> int:
    """The best place in ``(low, high]`` to end a piece (see :func:`split_long`)."""
    for pattern in (_PARAGRAPH, _BOUNDARY, _SPACE):
        ends = [m.end() for m in pattern.finditer(text, low, high)]
        if ends and ends[-1] > low:
            return ends[-1]
    return high


# --- names -------------------------------------------------------------------------------

_EDGE = "\"'`“”‘’.,;:!?()[]{}-–—/ \t\n"
_POSSESSIVE = re.compile(r"['’]s?$")
_ACRONYM_END = re.compile(r"(?:\b\w|\.\w+|\b(?:Jr|Sr|St|Bros|Inc|Co|Ltd))\.$")


def clean_name(text: str, start: int, end: int) -> tuple[str, int, int] | None:
    """Trim a mention ``text[start:end]`` to a usable entity name and its span.

    Drops surrounding quotes, brackets and punctuation, a trailing possessive
    (``Theodred's`` -> ``Theodred``) and a leading lower-case ``the``. A final full stop
    is kept only after an initial or abbreviation (``Noah Beery, Jr.``). Returns ``None``
    when nothing with a letter or digit is left.
    """
    changed = True
    while changed and start < end:
        before = (start, end)
        while start < end and text[start] in _EDGE:
            start += 1
        while end > start and text[end - 1] in _EDGE:
            if text[end - 1] == "." and _ACRONYM_END.search(text, start, end):
                break
            end -= 1
        possessive = _POSSESSIVE.search(text, start, end)
        if possessive and possessive.start() > start:
            end = possessive.start()
        if text.startswith("the ", start) and end - start > 4:
            start += 4
        changed = (start, end) != before
    name = text[start:end]
    if not any(ch.isalnum() for ch in name):
        return None
    return name, start, end


def find_name(text: str, name: str, *, ignore_case: bool = False) -> list[Span]:
    """Whole-word occurrences of ``name`` in ``text`` (case-sensitive by default).

    A hyphenated name also matches with spaces around its hyphens (``"Person-centered"``
    in ``"Person - centered therapy"``), as tokenised corpora write them.
    """
    name = name.strip()
    if not name:
        return []
    hay, needle = (text.lower(), name.lower()) if ignore_case else (text, name)
    if len(hay) != len(text):  # lower-casing changed offsets (rare non-ASCII letters)
        hay, needle = text, name
    spans = []
    at = hay.find(needle)
    while at >= 0:
        end = at + len(needle)
        if _boundary(text, at - 1) and _boundary(text, end):
            spans.append((at, end))
        at = hay.find(needle, at + 1)
    if "-" in name or "–" in name:
        spans = sorted({*spans, *_find_spaced(text, name, ignore_case)})
    return spans


def _boundary(text: str, index: int) -> bool:
    return index < 0 or index >= len(text) or not (text[index].isalnum() or text[index] == "_")


def _find_spaced(text: str, name: str, ignore_case: bool) -> list[Span]:
    parts = [re.escape(p.strip()) for p in re.split(r"\s*([-–])\s*", name)]
    body = "".join(p if i % 2 == 0 else r"\s*" + p + r"\s*" for i, p in enumerate(parts))
    body = r"\s+".join(body.split(r"\ "))
    pattern = re.compile(r"(?<!\w)" + body + r"(?!\w)", re.IGNORECASE if ignore_case else 0)
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


# --- titles ------------------------------------------------------------------------------

_PAREN_TITLE = re.compile(r"^(?P<base>.+?)\s*\((?P<qualifier>[^()]*)\)$")
_REGNAL = re.compile(r"^(?:[IVXLC]+|\d+(?:st|nd|rd|th)?)\.?$")


@dataclass(frozen=True, slots=True)
class TitleNames:
    """The names a passage title gives its topic entity.

    ``base`` is the title without its disambiguator: ``"Theodred II"`` for
    ``"Theodred II (Bishop of Elmham)"``, ``"Lambert"`` for ``"Lambert, Margrave of
    Tuscany"``; it equals ``title`` for a plain title. ``local_names`` are searched in the
    passage's own text to find mentions of the topic; ``alias`` is the candidate global
    alias (see :func:`title_aliases`), or ``""``.
    """

    title: str
    base: str
    local_names: tuple[str, ...]
    alias: str = ""


@lru_cache(maxsize=1 << 18)  # a corpus's titles: each build parses all of them, twice
def parse_title(title: str) -> TitleNames:
    """Split a Wikipedia-style title into its base name and alias candidate.

    Alias rule (aliases merge entities across the whole corpus, so they must be safe):

    * ``"Base (qualifier)"``: ``Base`` is a candidate alias when it has at least two
      words besides a leading article and does not end in a regnal number.
      ``"Coney Island Baby (film)"`` gives ``"Coney Island Baby"``; ``"Lloyd (film)"``
      and ``"The Bat (1959 film)"`` give none (a bare word names many things);
      ``"Theodred II (Bishop of Elmham)"`` gives none (``"Otto I"``, ``"William II"``,
      ``"Charles I"`` each title several passages of 2WikiMultihopQA); nor does a
      ``"(disambiguation)"`` page.
    * ``"Base, qualifier"``: never an alias. In 2WikiMultihopQA these are peerage
      styles (``"James Tuchet, 3rd/5th/6th/7th Earl of Castlehaven"``: the base names
      a whole line of holders), bare given names (``"Lambert, Margrave of Tuscany"``),
      ambiguous places (``"Cherry Creek, Colorado"``/``"..., Idaho"``) or song titles
      cut at a comma (``"I Love You, I Love You Not"``).

    The base is always a local name: in the passage itself ``"Lambert"`` is the topic.
    """
    title = " ".join(title.split())
    paren = _PAREN_TITLE.match(title)
    if paren:
        base = paren.group("base").strip()
        words = normalize_name(base).split()
        ok = (
            len(words) >= 2
            and not _REGNAL.match(base.split()[-1])
            and paren.group("qualifier").strip().casefold() != "disambiguation"
        )
        return TitleNames(title, base, _unique((title, base)), base if ok else "")
    if ", " in title:
        base = title.split(", ", 1)[0].strip()
        return TitleNames(title, base, _unique((title, base)))
    return TitleNames(title, title, (title,))


def title_aliases(titles: Iterable[str]) -> dict[str, str]:
    """Safe global alias per title, for titles extracted together.

    A candidate alias from :func:`parse_title` is dropped when its normalised form is
    also the title, base or candidate of another distinct title in ``titles``
    (``"Dark River (1990 film)"`` and ``"Dark River (2017 film)"`` keep no alias, and
    neither does ``"Hamlet (1948 film)"`` next to a passage titled ``"Hamlet"``).
    """
    parsed = {t: parse_title(t) for t in {" ".join(t.split()) for t in titles} if t}
    owners: Counter[str] = Counter()
    for names in parsed.values():
        owners.update(title_keys(names))
    return {
        title: names.alias
        for title, names in parsed.items()
        if names.alias and owners[normalize_name(names.alias)] == 1
    }


def title_keys(names: TitleNames) -> set[str]:
    """The normalised names a title claims among the corpus's titles (its own, its
    base's and its alias candidate's): an alias candidate is safe while no other
    title claims its key (:func:`title_aliases`)."""
    return {normalize_name(n) for n in (names.title, names.base, names.alias) if n}


def title_surface(title: str) -> str:
    """The surface a title gives :class:`TitleIndex` as itself (a plain title of at
    least two words besides an article, whitespace normalised), or ``""``."""
    title = " ".join(title.split())
    if parse_title(title).base == title and len(normalize_name(title).split()) >= 2:
        return title
    return ""


class TitleIndex:
    """Finds other passages' titles in a text: a gazetteer of the corpus's own titles.

    Indexed surfaces are plain titles of at least two words besides an article and
    the safe aliases of :func:`title_aliases`; bare-word titles (``"Lambert"``,
    ``"Love"``) and comma titles are left out, as for aliases. Each surface maps to its
    full title, so a match names the titled passage's topic entity.
    """

    def __init__(self, titles: Iterable[str], aliases: Mapping[str, str]) -> None:
        surfaces: dict[str, str] = {}
        for title in {" ".join(t.split()) for t in titles}:
            if surface := title_surface(title):
                surfaces.setdefault(surface, title)
        for title, alias in aliases.items():
            surfaces.setdefault(alias, title)
        self._index(surfaces)

    @classmethod
    def of_surfaces(cls, surfaces: Mapping[str, str]) -> TitleIndex:
        """The index finding ``surfaces`` (each with the title it names), as
        :attr:`surfaces` of another index gives them."""
        index = cls.__new__(cls)
        index._index(dict(surfaces))
        return index

    def _index(self, surfaces: dict[str, str]) -> None:
        self.surfaces: dict[str, str] = surfaces
        """Each surface the index finds (a text matches one only where the text contains
        it) and the title it names."""
        self._by_word: dict[str, list[tuple[str, str]]] = {}
        for surface, title in surfaces.items():
            first = _WORD.match(surface)
            if first is not None:
                self._by_word.setdefault(first.group(), []).append((surface, title))
        for candidates in self._by_word.values():
            candidates.sort(key=lambda c: -len(c[0]))

    def __len__(self) -> int:
        return sum(len(c) for c in self._by_word.values())

    def put(self, surface: str, title: str | None) -> None:
        """Find ``surface`` as naming ``title`` from now on (None: no longer find it).
        A text finds the same as with an index made of the surfaces after: at a word,
        the candidates stay longest first, and two of one length cannot both match
        there (equal lengths from one place are one string)."""
        first = _WORD.match(surface)
        if surface in self.surfaces:
            del self.surfaces[surface]
            if first is not None:
                candidates = self._by_word[first.group()]
                candidates.pop(next(i for i, c in enumerate(candidates) if c[0] == surface))
                if not candidates:
                    del self._by_word[first.group()]
        if title is None:
            return
        self.surfaces[surface] = title
        if first is not None:
            candidates = self._by_word.setdefault(first.group(), [])
            at = bisect_right(candidates, -len(surface), key=lambda c: -len(c[0]))
            candidates.insert(at, (surface, title))

    def find(self, text: str) -> list[tuple[int, int, str]]:
        """Non-overlapping ``(start, end, title)`` matches, the longest at each position."""
        found: list[tuple[int, int, str]] = []
        for word in _WORD.finditer(text):
            if found and word.start() < found[-1][1]:
                continue
            for surface, title in self._by_word.get(word.group(), ()):
                end = word.start() + len(surface)
                if text.startswith(surface, word.start()) and _boundary(text, end):
                    found.append((word.start(), end, title))
                    break
        return found


_WORD = re.compile(r"\w+")


class Surfaces(Mapping[str, str]):
    """The surfaces of a corpus's titles, each with the title it names (what
    :meth:`~quillian.components.extraction.base.SurfaceLinker.link_context` gives),
    changed in place by :meth:`put`, with the :class:`TitleIndex` that finds them made
    once and kept in step: an update that changes a few surfaces patches the index, not
    one made anew over every title's (about 25 ms at 100k passages)."""

    def __init__(self, surfaces: Mapping[str, str]) -> None:
        self._surfaces = dict(surfaces)
        self._index: TitleIndex | None = None

    def __getitem__(self, surface: str) -> str:
        return self._surfaces[surface]

    def __iter__(self) -> Iterator[str]:
        return iter(self._surfaces)

    def __len__(self) -> int:
        return len(self._surfaces)

    def put(self, surface: str, title: str | None) -> None:
        """``surface`` names ``title`` from now on (None: it is no surface)."""
        if self._index is not None:
            self._index.put(surface, title)  # the index holds this mapping's dict
        elif title is None:
            self._surfaces.pop(surface, None)
        else:
            self._surfaces[surface] = title

    def index(self) -> TitleIndex:
        """The index finding these surfaces (made at the first call)."""
        if self._index is None:
            self._index = TitleIndex.of_surfaces(self._surfaces)
            self._surfaces = self._index.surfaces
        return self._index


def _unique(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for n in names if n))


# --- dates -------------------------------------------------------------------------------

_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December|Jan\.|Feb\.|Mar\.|Apr\.|Aug\.|Sept?\.|Oct\.|Nov\.|Dec\.)"
)
_YEAR = r"\d{3,4}(?!\d)(?:\s*(?:AD|BC|CE|BCE)\b)?"
_DATE = re.compile(
    rf"(?<![\w])(?:\d{{1,2}}\s+{_MONTH},?\s+{_YEAR}"
    rf"|{_MONTH}\s+\d{{1,2}},?\s+{_YEAR}"
    rf"|{_MONTH},?\s+{_YEAR})"
)


def find_dates(text: str) -> list[Span]:
    """Spans of specific calendar dates: a month with a year, with or without the day.

    ``"11 November 875"``, ``"March 23, 1886"`` and ``"July 1967"`` match; bare years,
    decades, ranges of years and year-less days (``"17 October"``) do not.
    """
    return [(m.start(), m.end()) for m in _DATE.finditer(text)]
