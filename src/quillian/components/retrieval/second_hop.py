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
is nearest the question. The entity the link runs through is one the question does
not name (that is what makes it a second hop), and not a date or number (those
name no topic; see ``PPRConfig.literal_seeds``).

:func:`chain` places each of the first passages' second hops right after it, as a
chain ranks its first passage and then its second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from quillian.components.retrieval.base import ActivationPath, ScoredPassage, UsedRelation
from quillian.components.retrieval.context import RetrievalContext

__all__ = ["SecondHop", "chain", "hop_path", "second_hop"]


@dataclass(frozen=True, slots=True)
class SecondHop:
    """The passage ``chunk`` reached from ``source`` through ``relation`` (its text's
    cosine to the question, ``similarity``), which names ``entity``."""

    source: int
    chunk: int
    relation: int
    entity: int
    similarity: float


def second_hop(
    ctx: RetrievalContext,
    q: npt.NDArray[np.float32],
    source: int,
    named: frozenset[int],
) -> SecondHop | None:
    """The best second hop from chunk ``source`` for query vector ``q``, or None when
    no relation leads out of it; ``named`` holds the entities the question names.

    Links are ranked by their relation text's cosine to the question; an entity with
    several pages (an article's paragraphs) leads to the one nearest the question; equal
    cosines go to the earlier relation, then the earlier chunk."""
    links, kg = ctx.hop_links, ctx.kg
    candidates: list[tuple[int, int, int]] = []  # (relation, target chunk, entity)
    for relation in links.relations_in(source).tolist():
        for end in (int(kg.relation_subject[relation]), int(kg.relation_object[relation])):
            if end >= 0 and _passes(ctx, end, named):
                candidates += [(relation, p, end) for p in links.pages(end).tolist() if p != source]
    own = int(ctx.page_entities[source])
    if own >= 0 and _passes(ctx, own, named):
        for relation in links.relations_naming(own).tolist():
            where = int(links.chunks[relation])
            if where >= 0 and where != source:
                candidates.append((relation, where, own))
    if not candidates:
        return None
    by_relation = ctx.relation_similarity(q, [r for r, _, _ in candidates]).tolist()
    by_chunk = ctx.chunk_similarity(q, [c for _, c, _ in candidates]).tolist()
    best = max(
        range(len(candidates)),
        key=lambda i: (
            round(by_relation[i], 6),
            round(by_chunk[i], 6),
            -candidates[i][0],
            -candidates[i][1],
        ),
    )
    relation, chunk, entity = candidates[best]
    return SecondHop(source, chunk, relation, entity, float(by_relation[best]))


def _passes(ctx: RetrievalContext, entity: int, named: frozenset[int]) -> bool:
    return entity not in named and not bool(ctx.literal_entities[entity])


def chain(
    ctx: RetrievalContext,
    q: npt.NDArray[np.float32],
    ranked: list[ScoredPassage],
    sources: int,
    named: frozenset[int],
) -> tuple[list[ScoredPassage], list[SecondHop]]:
    """``ranked`` with the second hop of each of its first ``sources`` passages placed
    right after it (with its score), unless it is ranked above already; the hops
    placed are returned too. The list keeps its length."""
    out: list[ScoredPassage] = []
    placed: set[int] = set()
    hops: list[SecondHop] = []
    for i, passage in enumerate(ranked):
        if passage.chunk not in placed:
            out.append(passage)
            placed.add(passage.chunk)
        if i >= sources:
            continue
        hop = second_hop(ctx, q, passage.chunk, named)
        if hop is not None and hop.chunk not in placed:
            out.append(ctx.passage(hop.chunk, passage.score))
            placed.add(hop.chunk)
            hops.append(hop)
    return out[: len(ranked)], hops


def hop_path(ctx: RetrievalContext, hop: SecondHop) -> ActivationPath:
    """A placed hop as the trace shows it: the relation it went through, to the title
    of the passage it placed."""
    kg = ctx.kg
    triple = kg.relations[hop.relation]
    prov = triple.provenance
    used = UsedRelation(
        relation=hop.relation,
        subject=triple.subject,
        predicate=triple.predicate,
        object=triple.object,
        description=triple.description,
        weight=hop.similarity,
        sentence=prov.sentence if prov is not None else "",
        hop=2,
    )
    return ActivationPath(kg.entities[hop.entity].name, (used,), ctx.chunk_titles[hop.chunk])
