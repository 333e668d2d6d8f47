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

from quillian.components.extraction.text import parse_title, title_keys
from quillian.stores.protocols import KeyValueStore, iter_batches
from quillian.types import normalize_name

__all__ = ["TitleBook", "TitleCounts", "TitlesDamaged", "clean_titles", "patched_context"]

_BATCH = 512

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


class TitleCounts:
    """How many chunks hold each clean title, in ``namespace``, one record per title
    (its count in ASCII digits); a title no chunk holds has none."""

    def __init__(self, kv: KeyValueStore, namespace: str) -> None:
        self.kv, self.namespace = kv, namespace
        self.counts: dict[str, int] = {}
        self.changed: set[str] = set()

    def load(self, titles: Iterable[str]) -> None:
        """Read the counts of ``titles`` not read yet (an absent one is 0)."""
        wanted = sorted(set(titles) - self.counts.keys())
        for batch in iter_batches(wanted, _BATCH):
            for title, raw in zip(batch, self.kv.get_many(self.namespace, batch), strict=True):
                if raw is not None and not (raw.isdigit() and raw.isascii()):
                    raise TitlesDamaged(f"{self.namespace} {title!r}: {raw[:20]!r} is no count")
                self.counts[title] = 0 if raw is None else int(raw)

    def move(self, before: Iterable[str], after: Iterable[str]) -> tuple[set[str], set[str]]:
        """Count out the titles of chunks ``before`` (one per chunk, as stored) and
        count in those of ``after``; the distinct clean titles that came and went."""
        delta = Counter(t for t in map(_clean, after) if t)
        delta.subtract(t for t in map(_clean, before) if t)
        moved = [t for t, d in delta.items() if d]
        self.load(moved)
        came, went = set(), set()
        for title in moved:
            old = self.counts[title]
            new = self.counts[title] = old + delta[title]
            if new < 0:
                raise TitlesDamaged(f"{self.namespace} {title!r}: held by fewer than 0 chunks")
            if not old:
                came.add(title)
            elif not new:
                went.add(title)
            self.changed.add(title)
        return came, went

    def rebuild(self, titles: Iterable[str]) -> None:
        """Every count made anew from ``titles`` (one per chunk) and written, the
        namespace's others deleted."""
        for batch in iter_batches(list(self.kv.keys(self.namespace)), _BATCH):
            self.kv.delete_many(self.namespace, batch)
        self.counts = dict(Counter(t for t in map(_clean, titles) if t))
        self.changed = set(self.counts)
        self.write()

    def write(self) -> None:
        """Write the changed counts (a title counted 0 is deleted)."""
        gone = sorted(t for t in self.changed if not self.counts[t])
        kept = sorted(t for t in self.changed if self.counts[t])
        for batch in iter_batches(gone, _BATCH):
            self.kv.delete_many(self.namespace, batch)
        for batch in iter_batches(kept, _BATCH):
            self.kv.put_many(self.namespace, {t: b"%d" % self.counts[t] for t in batch})
        self.changed = set()


class TitleBook:
    """The title key records of ``namespace`` that a build reads, changes and writes."""

    def __init__(self, kv: KeyValueStore, namespace: str) -> None:
        self.kv, self.namespace = kv, namespace
        self.keys: dict[str, _Key] = {}
        self.changed: set[str] = set()

    def load(self, keys: Iterable[str]) -> None:
        """Read the records of ``keys`` not read yet (an absent one is empty)."""
        wanted = sorted(set(keys) - self.keys.keys())
        for batch in iter_batches(wanted, _BATCH):
            for key, raw in zip(batch, self.kv.get_many(self.namespace, batch), strict=True):
                try:
                    self.keys[key] = _Key() if raw is None else _Key.from_json(raw)
                except (ValueError, KeyError, TypeError) as exc:
                    raise TitlesDamaged(f"{self.namespace} {key!r}: {exc}") from exc

    def claim(self, title: str, sign: int) -> None:
        """Count ``title`` (clean) in (``sign`` 1) or out (-1) of the keys it claims,
        their records loaded first."""
        names = parse_title(title)
        alias_key = normalize_name(names.alias) if names.alias else ""
        for key in title_keys(names):
            record = self.keys.setdefault(key, _Key())
            record.claims += sign
            if record.claims < 0:
                raise TitlesDamaged(f"{self.namespace} {key!r}: claimed fewer than 0 times")
            if key == alias_key:
                (record.holders.add if sign > 0 else record.holders.discard)(title)
            self.changed.add(key)

    def safe_alias(self, title: str) -> str:
        """``title``'s alias candidate where no other title claims its key, else ``""``
        (its key loaded)."""
        alias = parse_title(title).alias
        return alias if alias and self.keys[normalize_name(alias)].claims == 1 else ""

    def rebuild(self, titles: Iterable[str]) -> None:
        """Every record made anew from ``titles`` (clean) and written, the namespace's
        others deleted."""
        for batch in iter_batches(list(self.kv.keys(self.namespace)), _BATCH):
            self.kv.delete_many(self.namespace, batch)
        self.keys = {}
        for title in titles:
            self.claim(title, +1)
        self.write()

    def write(self) -> None:
        """Write the changed records (one no title claims any more is deleted)."""
        gone = sorted(k for k in self.changed if self.keys[k].claims == 0)
        kept = sorted(k for k in self.changed if self.keys[k].claims > 0)
        for batch in iter_batches(gone, _BATCH):
            self.kv.delete_many(self.namespace, batch)
        for batch in iter_batches(kept, _BATCH):
            self.kv.put_many(self.namespace, {k: self.keys[k].to_json() for k in batch})
        self.changed = set()


def patched_context(
    book: TitleBook,
    came: set[str],
    went: set[str],
    aliases: Mapping[str, str],
    surfaces: Mapping[str, str],
    surfaces_of: SurfacesOf,
) -> tuple[dict[str, str], dict[str, str]]:
    """The safe aliases and the surfaces over the titles after the distinct titles
    ``came`` and ``went`` (clean), from those before (``aliases``, ``surfaces``) and
    ``book`` (kept for the titles before, brought to those after here; written by the
    caller). Recomputed: the titles that came or went and those holding as alias
    candidate a key they claim."""
    aliases, surfaces = dict(aliases), dict(surfaces)
    if not came and not went:
        return aliases, surfaces
    claimed = {k for t in came | went for k in title_keys(parse_title(t))}
    book.load(claimed)
    for title in went:
        book.claim(title, -1)
    for title in came:
        book.claim(title, +1)
    # a holder is a title after; one that did not come was a title before too
    holders = {t for k in claimed for t in book.keys[k].holders}
    recomputed = sorted(came | went | holders)
    for title in recomputed:  # every old surface out first: a new title may take one
        if title not in came:
            for surface in surfaces_of(title, aliases.get(title, "")):
                if surfaces.get(surface) == title:
                    del surfaces[surface]
        aliases.pop(title, None)
    for title in recomputed:
        if title not in went:
            alias = book.safe_alias(title)
            if alias:
                aliases[title] = alias
            for surface, named in surfaces_of(title, alias).items():
                surfaces.setdefault(surface, named)
    return aliases, surfaces
