"""Relation names read from a sentence's dependency parse, without an LLM.

Two mentions of one sentence are joined by their path in the dependency tree, and the
words on that path name the relation, when they do so plainly:

* a verb with its preposition: ``"He was born in Milwaukee"`` gives ``born in``,
  ``"It was founded in 1885 by Leland Stanford"`` gives ``founded by``, ``"X founded
  Y"`` gives ``founded``, ``"He completed his doctorate at Z"`` gives ``completed
  doctorate at`` (the verb's object joins the verb when the path goes on through a
  preposition);
* a noun between them: ``"X's doctoral advisor Y"`` and ``"his doctoral advisor was
  Y"`` give ``doctoral advisor``, the copular ``"X is the founder of Y"`` gives
  ``founder of``.

A predicate is lower case and short (at most :data:`MAX_WORDS` words); nouns,
adjectives and present-tense verbs by lemma, verbs in the past by the form the sentence
uses (``founded``, ``born``: the lemmas ``found`` and ``bear`` name other things). The
subject is the mention on the subject side of the path (a subject, a possessor, else
the first in the sentence), so ``"Y was founded by X"`` reads ``Y founded by X``. A
path that is long, crosses into another clause, or carries no content word gives
``None``: the caller keeps ``related_to``; a predicate is never made up.

The parse of a chunk is kept as a :class:`DependencyParse` so that an index can store it
with the chunk's mentions and name relations at every rebuild without the model.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import takewhile
from typing import Any, NamedTuple

__all__ = [
    "MAX_WORDS",
    "PARSE_VERSION",
    "TOPIC_PRONOUNS",
    "DependencyParse",
    "ParsedToken",
    "Reading",
    "parse_doc",
    "read_predicate",
]

#: Version of :class:`DependencyParse`'s encoding and of the words it keeps; a stored
#: parse of another version is read as missing, so the chunk is parsed again.
PARSE_VERSION = 1
#: The most words a predicate has; a longer reading is no predicate.
MAX_WORDS = 4
#: The most dependency edges between the two mentions' head words.
MAX_EDGES = 5

#: Edges a path may follow: argument and modifier links inside one clause. ``relcl``,
#: ``advcl``, ``ccomp``, ``conj`` between verbs and the like lead into another clause,
#: whose words do not relate the two mentions.
_PATH_DEPS = frozenset(
    {
        "nsubj", "nsubjpass", "dobj", "pobj", "prep", "agent", "attr", "poss", "appos",
        "compound", "acl", "dative", "pcomp", "oprd", "acomp", "nmod",
    }
)  # fmt: skip
#: Edges that make a mention the subject side of its relation.
_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "poss"})
#: Edges climbed from a mention without reading a word: a name in a list or an
#: apposition shares the role of the name it is attached to.
_SHARED_ROLE = frozenset({"conj", "appos"})
#: Modifiers read with a noun on the path: ``doctoral advisor``, ``county seat``.
_NOUN_MODIFIERS = frozenset({"amod", "compound"})
_CONTENT_TAGS = ("NN", "VB", "JJ")
#: Tags of the words a predicate is made of (proper nouns, pronouns, numbers,
#: determiners and punctuation on a path are read past, not written).
_WORD_TAGS = ("NN", "NNS", "VB", "JJ", "IN", "RP", "TO")
#: Singular third-person pronouns that stand for a passage's topic when the topic is
#: not named in the sentence (Wikipedia passages say "He was born in ..."); ``they``
#: is left out, as it more often means a group the passage mentions.
TOPIC_PRONOUNS = frozenset({"he", "she", "it", "his", "her", "its", "him"})


class ParsedToken(NamedTuple):
    """One token: its span in the chunk text, its head's index in the chunk's tokens
    (itself for a root), dependency label, fine-grained tag and normalised word."""

    start: int
    end: int
    head: int
    dep: str
    tag: str
    word: str


@dataclass(frozen=True, slots=True)
class DependencyParse:
    """A chunk's dependency parse, compactly: one line per token, fields tab-separated
    (:class:`ParsedToken`'s order). A string rather than a tuple of tokens, because an
    index holds every chunk's parse at once while it links them: about 3 KB for a
    600-character passage instead of a hundred objects.

    ``relative``: each line gives its token's start as the gap from the previous
    token's end, its end as its length, and its head as an offset from its own index,
    small numbers that repeat: a parse is most of what the spaCy extractor stores of a
    chunk, and with the compact form that record takes a quarter (100k short passages)
    to 38% (the 20 MB text) less room compressed (``research/extraction_forms.py``).

    ``elided``: a word that is its token's text in lower case (nine tokens in ten: most
    lemmas are the word itself), or empty for a whitespace token, is written empty, and
    read back from the chunk's text (:meth:`tokens` is given it). The 20 MB text's
    spaCy results took 0.67x the bytes compressed (``research/extraction_forms.py``).

    A parse stored before either form gives its fields as they are."""

    rows: str = ""
    version: int = PARSE_VERSION
    relative: bool = True
    elided: bool = False

    @classmethod
    def of(cls, tokens: Iterable[ParsedToken], text: str | None = None) -> DependencyParse:
        """The parse holding ``tokens``, its words elided where ``text`` (the chunk's
        text the tokens' spans are in) is given."""
        lines, end = [], 0
        for i, t in enumerate(tokens):
            gap, length, head = t.start - end, t.end - t.start, t.head - i
            word = t.word
            if text is not None:
                word = _elided(word, text[t.start : t.end])
            lines.append(f"{gap}\t{length}\t{head}\t{t.dep}\t{t.tag}\t{word}")
            end = t.end
        return cls("\n".join(lines), elided=text is not None and bool(lines))

    def tokens(self, text: str | None = None) -> list[ParsedToken]:
        """The tokens, in text order; ``text``, the chunk's text, is needed to read an
        :attr:`elided` parse."""
        if self.elided and text is None:
            raise ValueError("an elided parse is read with its chunk's text")
        out = []
        end = 0
        for i, line in enumerate(self.rows.split("\n") if self.rows else ()):
            start, stop, head, dep, tag, word = line.split("\t")
            if self.relative:
                first = end + int(start)
                end = first + int(stop)
                token = ParsedToken(first, end, i + int(head), dep, tag, word)
            else:
                token = ParsedToken(int(start), int(stop), int(head), dep, tag, word)
            if self.elided and text is not None:
                token = token._replace(word=_unelided(word, text[token.start : token.end]))
            out.append(token)
        return out


#: Written for a word that is empty where its token's text is not whitespace (no
#: spaCy lemma is), so that an elided parse reads every word back exactly.
_EMPTY_WORD = "\x00"


def _elided(word: str, surface: str) -> str:
    """``word`` as an elided parse writes it: empty where it is what
    :func:`_unelided` reads back from its token's text."""
    if word == _default_word(surface):
        return ""
    return word or _EMPTY_WORD


def _unelided(written: str, surface: str) -> str:
    if not written:
        return _default_word(surface)
    return "" if written == _EMPTY_WORD else written


def _default_word(surface: str) -> str:
    """The word an elided parse leaves unwritten: the token's text in lower case, or
    none for whitespace (:func:`parse_doc`)."""
    return "" if surface.isspace() else surface.lower()


def parse_doc(doc: Any, offset: int, first: int) -> list[ParsedToken]:
    """The tokens of a spaCy ``doc`` read from the chunk text at ``offset``, numbered
    from ``first`` (the count of the chunk's tokens before it)."""
    out = []
    for token in doc:
        if token.is_space:
            word = ""
        elif token.tag_ in ("VBD", "VBN") and token.lemma_ not in ("be", "have"):
            word = token.lower_
        else:
            word = token.lemma_.lower()
        start = offset + token.idx
        head = first + token.head.i
        out.append(ParsedToken(start, start + len(token), head, token.dep_, token.tag_, word))
    return out


class Reading(NamedTuple):
    """A predicate read between two mentions; ``forward`` when the first mention given
    is its subject."""

    predicate: str
    forward: bool


Span = tuple[int, int]


def read_predicate(
    tokens: Sequence[ParsedToken], a: Iterable[Span], b: Iterable[Span]
) -> Reading | None:
    """The predicate between the mentions at spans ``a`` and those at ``b`` (character
    offsets into the chunk, several per side: the shortest readable path wins), or
    ``None`` when no path between them reads as one."""
    heads_a = [h for h in (_head(tokens, s) for s in a) if h is not None]
    heads_b = [h for h in (_head(tokens, s) for s in b) if h is not None]
    best: tuple[int, Reading] | None = None
    for x in heads_a:
        for y in heads_b:
            found = _read(tokens, x, y)
            if found is not None and (best is None or found[0] < best[0]):
                best = found
    return best[1] if best else None


def _head(tokens: Sequence[ParsedToken], span: Span) -> int | None:
    """The token of ``span`` whose head lies outside it (the mention's head word)."""
    first = bisect_right(tokens, span[0], key=lambda t: t.end)
    inside = list(takewhile(lambda i: tokens[i].start < span[1], range(first, len(tokens))))
    for i in inside:
        if tokens[i].head not in inside or tokens[i].head == i:
            return i
    return None


def _climb(tokens: Sequence[ParsedToken], i: int) -> list[int]:
    """``i`` and its ancestors up to the root, after the shared-role edges at ``i``
    (from a name only: a date in apposition, ``"William I (24 April 1533 - ...)"``,
    does not share the name's role)."""
    while tokens[i].dep in _SHARED_ROLE and tokens[i].head != i and _name(tokens[i]):
        i = tokens[i].head
    chain = [i]
    while tokens[i].head != i and len(chain) <= MAX_EDGES + 1:
        i = tokens[i].head
        chain.append(i)
    return chain


def _read(tokens: Sequence[ParsedToken], x: int, y: int) -> tuple[int, Reading] | None:
    up_x, up_y = _climb(tokens, x), _climb(tokens, y)
    common = next((i for i in up_x if i in up_y), None)
    if common is None:
        return None
    side_x = up_x[: up_x.index(common)]
    side_y = up_y[: up_y.index(common)]
    if (not side_x and not side_y) or len(side_x) + len(side_y) > MAX_EDGES:
        return None
    if any(tokens[i].dep not in _PATH_DEPS for i in (*side_x, *side_y)):
        return None
    ends = [e for e in (up_x[0], up_y[0]) if e != common]
    if any(tokens[e].dep == "compound" or tokens[e].dep in _SHARED_ROLE for e in ends):
        return None  # "San Francisco rock band": a name modifying a noun
    subject_x = any(tokens[i].dep in _SUBJECT_DEPS for i in side_x)
    subject_y = any(tokens[i].dep in _SUBJECT_DEPS for i in side_y)
    if side_x and side_y and not (subject_x or subject_y):
        return None  # two modifiers of one word ("in Stanford, near Palo Alto")
    inner = sorted({*side_x[1:], *side_y[1:], common} - {up_x[0], up_y[0]})
    if any(t.dep == "neg" and t.head in inner for t in tokens):
        return None  # "X did not attend Y" names no relation of X to Y
    if any(tokens[i].dep in _PREPS and tokens[i].tag == "VBG" for i in inner):
        return None  # "including X": an example, not a relation
    if any(_name(tokens[i]) for i in inner):
        return None  # "Norway's actor Liv Ullmann": the relation is to the name passed
    kept = _words(tokens, inner)
    if not 0 < len(kept) <= MAX_WORDS or not any(_content(tokens[i]) for i in kept):
        return None
    if any(tokens[i].dep in _PREPS and tokens[i].head not in kept for i in kept):
        return None  # a preposition of a word left out ("influenced by his ... from")
    words = _HYPHEN.sub("-", " ".join(tokens[i].word for i in kept))
    forward = subject_x if subject_x != subject_y else tokens[x].start <= tokens[y].start
    return len(side_x) + len(side_y), Reading(words, forward)


def _words(tokens: Sequence[ParsedToken], path: list[int]) -> list[int]:
    """The tokens of the predicate's words, in text order (a preposition fronted before
    its verb, ``"With X he published"``, put after it).

    With a verb on the path (``be`` aside): the verbs, their objects on the path or
    written between the verb and its preposition (``completed doctorate at``), and the
    prepositions; a copular noun is left out (``"X is a film directed by Y"`` reads
    ``directed by``). Without one: the nouns, each with the modifier just before it
    (``doctoral advisor``), adjectives and prepositions. Proper nouns, numbers,
    pronouns, determiners and punctuation are read past, not written."""
    words = [i for i in path if _writable(tokens[i])]
    verbs = [i for i in words if tokens[i].tag.startswith("VB")]
    keep: set[int] = set()
    for i in words:
        t = tokens[i]
        if verbs and t.tag.startswith(("NN", "JJ")) and t.dep != "dobj":
            continue
        keep.add(i)
        if not verbs and t.tag.startswith("NN") and i > 0 and _modifier(tokens[i - 1], i):
            keep.add(i - 1)
    for v in verbs:
        preps = [j for j in path if tokens[j].head == v and tokens[j].dep in _PREPS]
        keep.update(
            j
            for j, o in enumerate(tokens)
            if o.head == v and _common_object(o) and any(v < j < p for p in preps)
        )
    return sorted(keep, key=lambda i: _place(tokens, i))


def _writable(token: ParsedToken) -> bool:
    return (
        token.word not in ("be", "")
        and token.tag.startswith(_WORD_TAGS)
        and not token.tag.startswith("NNP")
    )


def _content(token: ParsedToken) -> bool:
    """A verb, noun or adjective of three letters or more (not a cut-off ``co-``)."""
    return token.tag.startswith(_CONTENT_TAGS) and sum(c.isalpha() for c in token.word) >= 3


_PREPS = ("prep", "agent")
_HYPHEN = re.compile(r"\s*-\s*")


def _place(tokens: Sequence[ParsedToken], i: int) -> float:
    t = tokens[i]
    if t.dep in _PREPS and t.head > i:
        return t.head + 0.5
    return i


def _name(token: ParsedToken) -> bool:
    return token.tag in ("NNP", "NNPS")


def _modifier(token: ParsedToken, noun: int) -> bool:
    return token.head == noun and token.dep in _NOUN_MODIFIERS and token.tag in ("JJ", "NN")


def _common_object(token: ParsedToken) -> bool:
    return token.dep == "dobj" and token.tag in ("NN", "NNS")
