"""The titles' safe aliases and gazetteer surfaces kept between builds, patched by the
titles that came and went.

Whether a title's alias candidate is safe depends on every other title
(:func:`~quillian.components.extraction.text.title_aliases`: no other distinct title
claims its normalised key), and the surfaces a linking extractor finds depend on the
titles and their safe aliases. Made from scratch, both read every title at every build
(1.6 s at 100k passages). :class:`TitleBook` keeps, per claimed key, how many distinct
titles claim it and which titles hold it as their alias candidate, in a key-value
namespace, one record per key; :func:`patched_context` brings the previous build's
aliases and surfaces up to date reading only the keys of the titles that came or went,
and recomputes only the titles those keys reach.

Which distinct titles came or went is itself a question about every title: a title
goes only with the last chunk holding it. :class:`TitleCounts` keeps how many chunks
hold each title, so a build that knows which chunks changed (the chunk catalog's
delta) reads the counts of their titles alone.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from quillian.components.extraction.text import Surfaces, parse_title, title_keys
from quillian.index.record_book import RecordBook
from quillian.types import normalize_name

__all__ = [
    "ContextChanges",
    "TitleBook",
    "TitleCounts",
    "TitlesDamaged",
    "clean_titles",
    "patched_context",
]

SurfacesOf = Callable[[str, str], Mapping[str, str]]
"""A title's surfaces given its safe alias (or ``""``), each naming the title."""


class TitlesDamaged(Exception):
    """A stored title key record does not read, or its count went below zero."""


@dataclass
class _Key:
    claims: int = 0
    holders: set[str] = field(default_factory=set)

    def to_json(self) -> bytes:
        data = {"claims": self.claims, "holders": sorted(self.holders)}
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> _Key:
        data = json.loads(raw)
        return cls(int(data["claims"]), set(data["holders"]))


def clean_titles(titles: Iterable[str]) -> set[str]:
    """The distinct titles, whitespace normalised, the empty one left out (as
    :func:`~quillian.components.extraction.text.title_aliases` reads them)."""
    return {t for t in map(_clean, titles) if t}


def _clean(title: str) -> str:
    return " ".join(title.split())


class TitleCounts(RecordBook[int]):
    """How many chunks hold each clean title, in ``namespace``, one record per title
    (its count in ASCII digits); a title no chunk holds has none."""

    damaged = TitlesDamaged

    def new(self) -> int:
        return 0

    def decode(self, raw: bytes) -> int:
        if not (raw.isdigit() and raw.isascii()):
            raise ValueError(f"{raw[:20]!r} is no count")
        return int(raw)

    def encode(self, record: int) -> bytes:
        return b"%d" % record

    def is_empty(self, record: int) -> bool:
        return record == 0

    def move(self, before: Iterable[str], after: Iterable[str]) -> tuple[set[str], set[str]]:
        """Count out the titles of chunks ``before`` (one per chunk, as stored) and
        count in those of ``after``; the distinct clean titles that came and went."""
        delta = Counter(t for t in map(_clean, after) if t)
        delta.subtract(t for t in map(_clean, before) if t)
        moved = [t for t, d in delta.items() if d]
        self.load(moved)
        came, went = set(), set()
        for title in moved:
            old = self.record(title)
            new = self.records[title] = old + delta[title]
            if new < 0:
                raise TitlesDamaged(f"{self.namespace} {title!r}: held by fewer than 0 chunks")
            if not old:
                came.add(title)
            elif not new:
                went.add(title)
        return came, went

    def rebuild(self, titles: Iterable[str]) -> None:
        """Every count made anew from ``titles`` (one per chunk) and written, the
        namespace's others deleted."""
        self.clear()
        self.records = dict(Counter(t for t in map(_clean, titles) if t))
        self.changed = set(self.records)
        self.write()


class TitleBook(RecordBook[_Key]):
    """The title key records of ``namespace`` that a build reads, changes and writes."""

    damaged = TitlesDamaged

    def new(self) -> _Key:
        return _Key()

    def decode(self, raw: bytes) -> _Key:
        return _Key.from_json(raw)

    def encode(self, record: _Key) -> bytes:
        return record.to_json()

    def is_empty(self, record: _Key) -> bool:
        return record.claims == 0

    def claim(self, title: str, sign: int) -> None:
        """Count ``title`` (clean) in (``sign`` 1) or out (-1) of the keys it claims,
        their records loaded first."""
        names = parse_title(title)
        alias_key = normalize_name(names.alias) if names.alias else ""
        for key in title_keys(names):
            record = self.record(key)
            record.claims += sign
            if record.claims < 0:
                raise TitlesDamaged(f"{self.namespace} {key!r}: claimed fewer than 0 times")
            if key == alias_key:
                (record.holders.add if sign > 0 else record.holders.discard)(title)

    def safe_alias(self, title: str) -> str:
        """``title``'s alias candidate where no other title claims its key, else ``""``
        (its key loaded)."""
        alias = parse_title(title).alias
        return alias if alias and self.records[normalize_name(alias)].claims == 1 else ""

    def rebuild(self, titles: Iterable[str]) -> None:
        """Every record made anew from ``titles`` (clean) and written, the namespace's
        others deleted."""
        self.clear()
        for title in titles:
            self.claim(title, +1)
        self.write()


@dataclass(frozen=True)
class ContextChanges:
    """What :func:`patched_context` changed: the surfaces that came, went or name
    another title, and the titles whose safe alias came, went or changed."""

    surfaces: frozenset[str]
    aliases: frozenset[str]


def patched_context(
    book: TitleBook,
    came: set[str],
    went: set[str],
    aliases: dict[str, str],
    surfaces: Surfaces,
    surfaces_of: SurfacesOf,
) -> ContextChanges:
    """Bring the safe aliases and the surfaces over the titles (``aliases``,
    ``surfaces``, changed in place) to the titles after the distinct titles ``came``
    and ``went`` (clean), with ``book`` (kept for the titles before, brought to those
    after here; written by the caller); what changed. Recomputed: the titles that came
    or went and those holding as alias candidate a key they claim, so the change costs
    what those titles are, not what the corpus holds."""
    if not came and not went:
        return ContextChanges(frozenset(), frozenset())
    claimed = {k for t in came | went for k in title_keys(parse_title(t))}
    book.load(claimed)
    for title in went:
        book.claim(title, -1)
    for title in came:
        book.claim(title, +1)
    # a holder is a title after; one that did not come was a title before too
    holders = {t for k in claimed for t in book.records[k].holders}
    recomputed = sorted(came | went | holders)
    was_surface: dict[str, str | None] = {}  # each changed key's value before
    was_alias = {title: aliases.get(title) for title in recomputed}

    def put(surface: str, title: str | None) -> None:
        was_surface.setdefault(surface, surfaces.get(surface))
        surfaces.put(surface, title)

    for title in recomputed:  # every old surface out first: a new title may take one
        if title not in came:
            for surface in surfaces_of(title, aliases.get(title, "")):
                if surfaces.get(surface) == title:
                    put(surface, None)
        aliases.pop(title, None)
    for title in recomputed:
        if title not in went:
            alias = book.safe_alias(title)
            if alias:
                aliases[title] = alias
            for surface, named in surfaces_of(title, alias).items():
                if surface not in surfaces:
                    put(surface, named)
    return ContextChanges(
        frozenset(s for s, before in was_surface.items() if surfaces.get(s) != before),
        frozenset(t for t, before in was_alias.items() if aliases.get(t) != before),
    )
