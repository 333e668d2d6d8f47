"""Pure parsers for the Know3-RAG prompts (:mod:`quillian.components.prompts.know3`).

Each raises :class:`~quillian.components.llm.structured.ParseError` on output it cannot
read; the tasks in :mod:`quillian.methods.know3.tasks` decide what a failure after the
repair attempt means (no triples, a "no" verdict), and the transcript records it.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from quillian.components.extraction.text import first_sentence
from quillian.components.llm.structured import ParseError, extract_json
from quillian.types import normalize_name

__all__ = [
    "EXAMPLES_HINT",
    "GENERIC_WORDS",
    "ChainAnswer",
    "ExtractedTriple",
    "TripleList",
    "parse_chain_answer",
    "parse_reference",
    "parse_triple_list",
    "parse_verdict",
    "repeats_examples",
    "salvage_chain_answer",
]

#: Subjects and objects that name nothing a KG holds: pronouns and generic nouns (the
#: authors' forbidden list, spec section 8).
GENERIC_WORDS = frozenset(
    [
        "i",
        "me",
        "my",
        "mine",
        "you",
        "your",
        "yours",
        "he",
        "him",
        "his",
        "she",
        "her",
        "hers",
        "it",
        "its",
        "we",
        "us",
        "our",
        "ours",
        "they",
        "them",
        "their",
        "theirs",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "the",
        "a",
        "an",
        "one",
        "ones",
        "someone",
        "somebody",
        "something",
        "anyone",
        "anything",
        "everyone",
        "everything",
        "nobody",
        "nothing",
        "who",
        "whom",
        "whose",
        "which",
        "what",
        "book",
        "song",
        "album",
        "country",
        "city",
        "town",
        "company",
        "film",
        "movie",
        "people",
        "person",
        "man",
        "woman",
        "men",
        "women",
        "child",
        "children",
        "group",
        "team",
        "place",
        "thing",
        "things",
        "organization",
        "band",
        "show",
        "series",
        "work",
        "year",
        "years",
    ]
)


@dataclass(frozen=True)
class ExtractedTriple:
    """A ``(subject, predicate, object)`` as the model wrote it."""

    subject: str
    predicate: str
    object: str

    def sentence(self) -> str:
        return f"{self.subject} {self.predicate} {self.object}."


@dataclass(frozen=True)
class TripleList:
    """The triples read from one reply, why any item was dropped, and how the reply was
    read when it was not the JSON list asked for (``notes``)."""

    triples: tuple[ExtractedTriple, ...] = ()
    dropped: tuple[str, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())


_NONE = re.compile(r"^\W*none\W*$", re.IGNORECASE)
_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)


def parse_triple_list(raw: str, prompt: str = "") -> TripleList:
    """Prompt P4's reply: ``None``, or a JSON list of objects with ``subject``,
    ``predicate`` and ``object``. A reply that is neither, but holds ``{...}`` objects,
    is read object by object (the authors' code does the same), and
    :attr:`TripleList.notes` says so. Items missing a field, naming a pronoun or generic
    noun, or relating a thing to itself are dropped and listed in
    :attr:`TripleList.dropped`; a list-valued subject or object gives one triple per
    value."""
    text = raw.strip()
    if not text or _NONE.match(text):
        return TripleList()
    items, notes = _items(raw, prompt)
    triples: dict[ExtractedTriple, None] = {}
    dropped: list[str] = []
    for item in items:
        for triple in _expand(item, dropped):
            reason = _rejection(triple)
            if reason:
                dropped.append(f"{reason}: {triple.sentence()}")
            else:
                triples.setdefault(triple)
    return TripleList(tuple(triples), tuple(dropped), notes)


def _items(raw: str, prompt: str) -> tuple[list[Any], tuple[str, ...]]:
    """The reply's items, and a note when they were not read as one JSON list."""
    try:
        data = extract_json(raw, prompt)
    except ParseError:
        data = None
    if isinstance(data, list):
        return data, ()
    found: list[Any] = []
    skipped = 0
    for match in _OBJECT.findall(raw):
        try:
            found.append(json.loads(match))
        except json.JSONDecodeError:
            skipped += 1
    if not found and isinstance(data, dict):
        found = [data]
    if not found:
        raise ParseError("neither None nor a JSON list of triples", raw, prompt)
    unread = f", {skipped} unreadable skipped" if skipped else ""
    note = f"not a JSON list: read {len(found)} loose {{...}} object(s){unread}"
    return found, (note,)


def _strings(value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    return [str(v).strip() for v in values if isinstance(v, str | int | float) and str(v).strip()]


def _expand(item: Any, dropped: list[str]) -> list[ExtractedTriple]:
    if not isinstance(item, dict):
        dropped.append(f"not an object: {str(item)[:60]}")
        return []
    subjects, objects = _strings(item.get("subject")), _strings(item.get("object"))
    predicates = _strings(item.get("predicate"))
    if not subjects or not objects or not predicates:
        dropped.append(f"missing subject, predicate or object: {json.dumps(item)[:80]}")
        return []
    return [ExtractedTriple(s, predicates[0], o) for s in subjects for o in objects]


def _rejection(triple: ExtractedTriple) -> str:
    for end in (triple.subject, triple.object):
        if normalize_name(end) in GENERIC_WORDS or not normalize_name(end):
            return f"generic or pronoun {end!r}"
    if normalize_name(triple.subject) == normalize_name(triple.object):
        return "subject equals object"
    return ""


_VERDICT = re.compile(r"reliability of the passage is\W*(yes|no)\b", re.IGNORECASE)
#: P5's reply as its prompt asks for it, held where the backend can (``Decoding.grammar``):
#: reasoning of at most 480 characters, then the verdict sentence, so the verdict comes
#: within the task's 256 tokens and a reply cannot end without one.
VERDICT_GRAMMAR = (
    "start: REPLY\nREPLY: /(?s:.{0,480})The reliability of the passage is (yes|no)\\./\n"
)


def parse_verdict(raw: str, prompt: str = "") -> bool:
    """Prompt P5's reply: True for "The reliability of the passage is yes", False for
    "... no"; the last such sentence counts. Anything else is a parse error (the
    authors' code reads it as "no" silently; here it is recorded first)."""
    found = _VERDICT.findall(raw)
    if not found:
        raise ParseError('no "The reliability of the passage is yes/no" verdict', raw, prompt)
    return bool(found[-1].lower() == "yes")


@dataclass(frozen=True)
class ChainAnswer:
    """Prompt P1's reply: the whole reasoning and the answer after "The answer is"."""

    reasoning: str
    answer: str


_ANSWER_IS = re.compile(r"answer is\s*:?\s*", re.IGNORECASE)
#: P1's reply as its prompt asks for it: reasoning of at most 1,200 characters (the
#: few-shot ones are under 400), then "The answer is" and the answer, one line, and the
#: reply ends there.
ANSWER_GRAMMAR = "start: REPLY\nREPLY: /(?s:.{0,1200})The answer is [^\\n]{1,120}/\n"


def parse_chain_answer(raw: str, prompt: str = "") -> ChainAnswer:
    """The sentence after the last "answer is", without brackets, quotes, bold marks
    and a final period (the authors' parse, which takes the rest of the line). The
    answer ends where its sentence does: the local model runs on after it on the same
    line ("The answer is Alan Turing. The question asks ..."), and the rest is not
    the answer. Initials, abbreviations and dotted acronyms do not end it
    (:func:`~quillian.components.extraction.text.split_sentences`)."""
    matches = list(_ANSWER_IS.finditer(raw))
    if not matches:
        raise ParseError('no "The answer is ..." sentence', raw, prompt)
    tail = raw[matches[-1].end() :].strip().splitlines()
    answer = _clean(first_sentence(tail[0])) if tail else ""
    if not answer:
        raise ParseError('nothing after "The answer is"', raw, prompt)
    return ChainAnswer(raw.strip(), answer)


_WORD = re.compile(r"\w+")
#: Added to the prompt when an answer taken from the examples is refused (it does not
#: name the answer, which would only suggest it again).
EXAMPLES_HINT = (
    "Answer this question from its references or your own knowledge, not from the examples above."
)


def _words(text: str) -> str:
    """``text`` as its words, case-folded, one space apart and one on either side, so
    that a phrase occurs in a text exactly when its words occur there in order."""
    words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    return f" {' '.join(words)} "


def repeats_examples(answer: str, examples: str, turn: str) -> bool:
    """Whether ``answer`` repeats the prompt's few-shot examples instead of answering:
    its words occur, in order, in ``examples`` (the example turns) and not in ``turn``
    (the turn that asks: the question and its references). A yes or a no never does:
    the examples answer a yes/no question too, and whether the question asks one is
    :mod:`quillian.components.generation.polar`'s concern.

    The local 0.5B model, asked again after a refused "yes", named the subject of
    P1's third example ("Alan Turing") for 11 of 12 such HotpotQA questions, and gave
    the examples' "Princeton University" and "1746" elsewhere. A right answer that the
    examples happen to hold and the question and references do not (a country, say,
    answered from the model's own knowledge at turn 0) is refused once too; asked again,
    a model that gives it again keeps it (the task's fallback). The refusal's hint is
    :data:`EXAMPLES_HINT`."""
    words = _words(normalize_name(answer))
    if words.strip() in ("", "yes", "no"):
        return False
    return words in _words(examples) and words not in _words(turn)


def salvage_chain_answer(raw: str) -> ChainAnswer:
    """After two unusable replies: the last non-empty line as the answer ("" if none)."""
    lines = [line for line in raw.splitlines() if line.strip()]
    return ChainAnswer(raw.strip(), _clean(lines[-1]) if lines else "")


def _clean(text: str) -> str:
    text = text.strip().strip("*").strip()
    if len(text) >= 2 and text[0] + text[-1] in ("[]", '""', "''"):
        text = text[1:-1].strip()
    text = text.rstrip(".").strip().strip("*").strip()
    if len(text) >= 2 and text[0] + text[-1] in ("[]", '""', "''"):
        text = text[1:-1].strip()
    return text


#: P2's placeholder, which a small model copies before its paragraph.
_PLACEHOLDER = re.compile(r"^\[?reference[ _]paragraph\]?\s*:?\s*", re.IGNORECASE)


def parse_reference(raw: str, prompt: str = "") -> str:
    """Prompt P2's reply: the paragraph, without the brackets or quotes the prompt's
    ``"[reference_paragraph]"`` invites, nor that placeholder's name copied before the
    paragraph; non-empty."""
    text = _PLACEHOLDER.sub("", raw.strip(), count=1)
    if len(text) >= 2 and text[0] + text[-1] in ('""', "[]"):
        text = text[1:-1].strip()
    if len(text) >= 2 and text[0] + text[-1] in ('""', "[]"):
        text = text[1:-1].strip()
    if not text:
        raise ParseError("empty reference", raw, prompt)
    return text
