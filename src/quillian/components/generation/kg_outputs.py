"""Pure parsers for KG-Infused RAG's outputs (Appendix E, Tables 13-18), and the triple
layout its prompts show.

Triple selection (Tables 13 and 14) must only copy triples from the given set. The
parser collects every ``<...>`` span (and bare lines holding a ``|``), matches each to a
given triple after normalising case, spaces and the separator (``<s | p | o>`` and
``<s, p, o>`` both match), and keeps only the matches. What matched nothing is recorded,
never turned into a triple. Every parser raises
:class:`~quillian.components.llm.structured.ParseError` (holding the raw text) on output
it cannot use.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from quillian.components.generation.outputs import parse_text
from quillian.components.kg.base import KGTriple
from quillian.components.llm.structured import ParseError, parse_json_as

__all__ = [
    "NONE",
    "Judgement",
    "TripleSelection",
    "format_triples",
    "parse_enhanced_passage",
    "parse_judgement",
    "parse_summary",
    "parse_triple_selection",
    "triple_key",
]

#: What a prompt shows for an empty list of triples.
NONE = "(none)"

TripleKey = tuple[str, str, str]


def format_triples(triples: Iterable[KGTriple]) -> str:
    """One ``<head | relation | tail>`` per line, each distinct text once; ``(none)``
    when there are none."""
    lines = dict.fromkeys(t.text() for t in triples)
    return "\n".join(lines) or NONE


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(text.split()).strip("\"'` ")


def triple_key(head: str, relation: str, tail: str) -> TripleKey:
    """What two spellings of a triple share when they are the same triple: each part
    NFKC-normalised, case-folded, spaces collapsed, surrounding quotes dropped."""
    return (_norm(head), _norm(relation), _norm(tail))


def _key(t: KGTriple) -> TripleKey:
    return triple_key(t.subject_name, t.relation, t.object_name)


@dataclass(frozen=True)
class TripleSelection:
    """The triples a selection kept, in the order the model wrote them.

    ``unmatched`` holds what looked like a triple but equals none of the given ones
    (invented, or altered); ``repeated`` counts triples copied from the previously
    selected ones (Table 14 asks not to), which are not selected again.
    """

    triples: tuple[KGTriple, ...] = ()
    unmatched: tuple[str, ...] = ()
    repeated: int = 0


_SPAN = re.compile(r"<([^<>\n]*)>")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_EMPTY = frozenset({"", "none", "n/a", "no triples", "no relevant triples"})


def _match(span: str, index: dict[TripleKey, list[KGTriple]]) -> list[KGTriple] | None:
    """The given triples ``span`` spells, trying every split of it into three parts at
    ``|`` and then at ``,`` (names may hold commas: "Paris, Texas")."""
    for sep in ("|", ","):
        cuts = [i for i, ch in enumerate(span) if ch == sep]
        for a, i in enumerate(cuts):
            for j in cuts[a + 1 :]:
                found = index.get(triple_key(span[:i], span[i + 1 : j], span[j + 1 :]))
                if found:
                    return found
    return None


def _attempts(raw: str) -> list[str]:
    """The ``<...>`` spans of ``raw``, plus bare lines (no span) that hold a ``|`` or
    at least two commas, without a list marker or wrapping brackets."""
    out: list[str] = []
    for line in raw.splitlines():
        spans = _SPAN.findall(line)
        if spans:
            out.extend(spans)
            continue
        bare = _BULLET.sub("", line).strip().strip("()[]").strip()
        if "|" in bare or bare.count(",") >= 2:
            out.append(bare)
    return out


def parse_triple_selection(
    raw: str,
    candidates: Sequence[KGTriple],
    previous: Sequence[KGTriple] = (),
    prompt: str = "",
    *,
    strict: bool = True,
) -> TripleSelection:
    """The ``candidates`` the model selected (Tables 13 and 14).

    A reply with no triple at all ("None", empty) is a valid empty selection. With
    ``strict``, a reply whose bracketed triples all match nothing raises ParseError (it
    is unusable, and a repair attempt may help); without, it is an empty selection with
    the spans in ``unmatched``. Bare lines count only when they match, or hold a ``|``.
    """
    index: dict[TripleKey, list[KGTriple]] = {}
    for t in candidates:
        index.setdefault(_key(t), []).append(t)
    known = {_key(t): [t] for t in previous}
    chosen: dict[TripleKey, list[KGTriple]] = {}
    unmatched: list[str] = []
    repeated = 0
    for attempt in _attempts(raw):
        found = _match(attempt, index)
        if found:
            chosen.setdefault(_key(found[0]), found)
        elif _match(attempt, known):
            repeated += 1
        elif _norm(attempt) not in _EMPTY and ("|" in attempt or f"<{attempt}>" in raw):
            unmatched.append(attempt.strip())
    triples = tuple(t for group in chosen.values() for t in group)
    if strict and not triples and unmatched:
        shown = "; ".join(f"<{u}>" for u in unmatched[:3])
        raise ParseError(
            f"none of the {len(unmatched)} triples written is in the given set ({shown}); "
            "copy triples exactly as given",
            raw,
            prompt,
        )
    return TripleSelection(triples, tuple(unmatched), repeated)


def _strip_label(raw: str, labels: tuple[str, ...]) -> str:
    text = raw.strip()
    for label in labels:
        if text.casefold().startswith(label):
            return text[len(label) :].lstrip(" :*\n").strip()
    return text


def parse_summary(raw: str, prompt: str = "") -> str:
    """Table 15's subgraph summary: free text, without a leading "Summary:" label."""
    return parse_text(_strip_label(raw, ("**summary", "summary")), prompt)


def parse_enhanced_passage(raw: str, prompt: str = "") -> str:
    """Table 17's fact-enhanced passage: free text, without a leading
    "Enhanced passage:" label."""
    return parse_text(_strip_label(raw, ("**enhanced passage", "enhanced passage")), prompt)


class Judgement(BaseModel):
    """Table 18's verdict: the ``_id`` of the best and of the worst output."""

    model_config = ConfigDict(extra="ignore")

    best_id: int
    worst_id: int

    @property
    def is_tie(self) -> bool:
        """Rule 4 of Table 18: the same id for both means no clear difference."""
        return self.best_id == self.worst_id


def parse_judgement(raw: str, n_outputs: int, prompt: str = "") -> Judgement:
    """The judge's JSON object; both ids must be ids of the ``n_outputs`` outputs."""
    judgement = parse_json_as(raw, Judgement, prompt)
    for name, value in (("best_id", judgement.best_id), ("worst_id", judgement.worst_id)):
        if not 0 <= value < n_outputs:
            raise ParseError(
                f"{name} {value} is not an output id (0..{n_outputs - 1})", raw, prompt
            )
    return judgement
