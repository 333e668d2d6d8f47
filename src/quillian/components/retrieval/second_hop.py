"""The second hop of a ranked passage: the page its best-matching sentence leads to.

A two-hop question is answered by a chain of two passages, the second reached from the
first (MDR, Xiong et al., ICLR 2021; Beam Retrieval, Zhang et al., NAACL 2024: the
next passage is retrieved conditioned on the one found). Here the graph stands in for
their trained encoders: from a passage, the next one is

- *forward*, the page of an entity the passage's relations name (a film's passage
  says it is "based on the true story of James Stockdale": Stockdale's page), or
- *backward*, a passage with a relation naming the passage's own entity (Hannah Gross's
  passage names her father Paul Gross, the entity of the passage found first),

choosing, among every such link, the one whose relation text (its source sentence)
is nearest the question; where the entity's article has several paragraphs, the one
nearest the question. The entity the link runs through is one the question does not
name (that is what makes it a second hop), and not a date or number (those name no
topic; see ``PPRConfig.literal_seeds``); nor is the page one whose title the question
names (a first hop).

:func:`chain` places each of the first passages' second hops right after it, as a
chain ranks its first passage and then its second (``FusedConfig.second_hops``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from quillian.components.retrieval.base import ActivationPath, ScoredPassage
from quillian.components.retrieval.context import RetrievalContext
from quillian.components.retrieval.seeding import title_base

__all__ = ["SecondHop", "chain", "hop_path", "second_hop", "second_hops", "words"]

_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class SecondHop:
    """The passage ``chunk`` reached from ``source`` through ``relation`` (its text's
    cosine to the question, ``similarity``), which names ``entity``."""

    source: int
    chunk: int
    relation: int
    entity: int
    similarity: float


def words(text: str) -> str:
    """``text`` as its case-folded words, space-separated and space-padded: a page title
    is named in a question when its words are a run of the question's."""
    return f" {' '.join(_WORD.findall(unicodedata.normalize('NFKC', text).casefold()))} "


def second_hop(
    ctx: RetrievalContext,
    q: npt.NDArray[np.float32],
    source: int,
    named: frozenset[int],
    asked: str = "",
) -> SecondHop | None:
    """The best second hop from chunk ``source`` for query vector ``q``, or None when
    no relation leads out of it; ``named`` holds the entities the question names and
    ``asked`` its :func:`words`: a page whose title (without its qualifier) the question
    names is a first hop, not a second, and is passed over.

    Links are ranked by their relation text's cosine to the question; an entity with
    several pages (an article's paragraphs) leads to the one nearest the question; equal
    cosines go to the earlier relation, then the earlier chunk."""
    return second_hops(ctx, q, [source], named, asked)[0]


def second_hops(
    ctx: RetrievalContext,
    q: npt.NDArray[np.float32],
    sources: Sequence[int],
    named: frozenset[int],
    asked: str = "",
) -> list[SecondHop | None]:
    """:func:`second_hop` of each of ``sources``, their links' texts and pages scored
    together (one gather of vectors for all)."""
    links = [_links(ctx, source, named) for source in sources]
    every = [link for found in links for link in found]
    if not every:
        return [None] * len(sources)
    by_relation = ctx.relation_similarity(q, [r for r, _, _ in every]).tolist()
    by_chunk = ctx.chunk_similarity(q, [c for _, c, _ in every]).tolist()
    out: list[SecondHop | None] = []
    start = 0
    for source, found in zip(sources, links, strict=True):
        span = range(start, start + len(found))
        start += len(found)
        order = sorted(
            span,
            key=lambda i: (-round(by_relation[i], 6), -round(by_chunk[i], 6), *every[i][:2]),
        )
        out.append(next((_hop(source, every[i], by_relation[i]) for i in order
                         if _unasked(ctx, every[i][1], asked)), None))  # fmt: skip
    return out


def _links(ctx: RetrievalContext, source: int, named: frozenset[int]) -> list[tuple[int, int, int]]:
    """Every ``(relation, target chunk, entity)`` leading out of chunk ``source``:
    forward to the pages of the entities its relations name, backward to the chunks
    whose relations name its own entity."""
    links, kg = ctx.hop_links, ctx.kg
    found: list[tuple[int, int, int]] = []
    for relation in links.relations_in(source).tolist():
        for end in (int(kg.relation_subject[relation]), int(kg.relation_object[relation])):
            if end >= 0 and _passes(ctx, end, named):
                found += [(relation, p, end) for p in links.pages(end).tolist() if p != source]
    own = int(ctx.page_entities[source])
    if own >= 0 and _passes(ctx, own, named):
        for relation in links.relations_naming(own).tolist():
            where = int(links.chunks[relation])
            if where >= 0 and where != source:
                found.append((relation, where, own))
    return found


def _unasked(ctx: RetrievalContext, chunk: int, asked: str) -> bool:
    title = ctx.chunk_titles[chunk]
    return not asked or words(title_base(title) or title) not in asked


def _hop(source: int, link: tuple[int, int, int], similarity: float) -> SecondHop:
    relation, chunk, entity = link
    return SecondHop(source, chunk, relation, entity, float(similarity))


def _passes(ctx: RetrievalContext, entity: int, named: frozenset[int]) -> bool:
    return entity not in named and not bool(ctx.literal_entities[entity])


def chain(
    ctx: RetrievalContext,
    q: npt.NDArray[np.float32],
    ranked: list[ScoredPassage],
    sources: int,
    named: frozenset[int],
    asked: str = "",
) -> tuple[list[ScoredPassage], list[SecondHop]]:
    """``ranked`` with the second hop of each of its first ``sources`` passages placed
    right after it (with its score), unless it is ranked above already; the hops
    placed are returned too. The list keeps its length. ``named`` and ``asked``: as for
    :func:`second_hop`."""
    out: list[ScoredPassage] = []
    placed: set[int] = set()
    hops: list[SecondHop] = []
    found = second_hops(ctx, q, [p.chunk for p in ranked[:sources]], named, asked)
    for i, passage in enumerate(ranked):
        if passage.chunk not in placed:
            out.append(passage)
            placed.add(passage.chunk)
        hop = found[i] if i < len(found) else None
        if hop is not None and hop.chunk not in placed:
            out.append(ctx.passage(hop.chunk, passage.score))
            placed.add(hop.chunk)
            hops.append(hop)
    return out[: len(ranked)], hops


def hop_path(ctx: RetrievalContext, hop: SecondHop) -> ActivationPath:
    """A placed hop as the trace shows it: the relation it went through (``hop`` 2),
    to the title of the passage it placed."""
    used = ctx.used_relation(hop.relation, hop.similarity, hop=2)
    title, chunk_id = ctx.chunk_titles[hop.chunk], ctx.kg.chunk_ids[hop.chunk]
    return ActivationPath(ctx.entity_name(hop.entity), (used,), title, chunk_id)
