"""What retrievers read: the graph, its tables and the vector indexes, in one view.

A :class:`RetrievalContext` is assembled once when an index is opened (or built in a
test) and shared by every retriever; retrievers never write to it.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, Literal, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.base import Embedder
from quillian.components.extraction.assemble import RELATED_TO
from quillian.components.graph.builder import KnowledgeGraph
from quillian.components.graph.synonyms import synonym_edges
from quillian.components.retrieval import derived
from quillian.components.retrieval.base import ScoredPassage, Seed, UsedRelation
from quillian.components.retrieval.bm25_index import BM25Index
from quillian.components.retrieval.derived import HOP_ARRAYS, chunk_links, hop_arrays
from quillian.components.retrieval.seeding import (
    EntityLexicon,
    LexicalMatch,
    page_aliases,
)
from quillian.components.retrieval.triple_store import TripleStore
from quillian.errors import ConfigError
from quillian.stores.protocols import VectorIndex
from quillian.types import Triple

__all__ = [
    "HopLinks",
    "RelationText",
    "RetrievalContext",
    "SeedMode",
    "chunk_links",
    "endpoint_text",
]

logger = logging.getLogger(__name__)

#: Cosines equal to this many decimals are a tie (a vector's rounding differs with its
#: position in a batch).
TIE_DIGITS = 6


def _tie(cosine: float) -> float:
    return round(cosine, TIE_DIGITS)


SeedMode = Literal["description", "lexical", "both", "auto"]
RelationText = Literal["sentence", "endpoints"]


def endpoint_text(relation: Triple) -> str:
    """A relation as its ends and predicate, then its source sentence: "Milwaukee —
    birthplace of — Herbert Simon: Simon was born in Milwaukee." (the sentence alone
    may name an end only as "he"). A co-occurrence's ``related_to`` is left out, and so
    is a sentence that only repeats the triple."""
    s, p, o = relation.subject, relation.predicate, relation.object
    head = " — ".join(x for x in (s, "" if p == RELATED_TO else p, o) if x)
    prov = relation.provenance
    sentence = prov.sentence if prov is not None and prov.sentence else relation.description
    if not sentence or sentence == f"{s} {p} {o}":
        return head
    return f"{head}: {sentence}"


class TextRows(NamedTuple):
    """Which items (descriptions or relations) have their text in each text row: those
    of row ``r`` are ``order[indptr[r]:indptr[r + 1]]``; ``holding`` rows hold any."""

    indptr: npt.NDArray[np.int64]
    order: npt.NDArray[np.int64]
    holding: int


@dataclass(frozen=True, eq=False)
class HopLinks:
    """How passages lead to passages through relations: ``chunks``, each relation's
    chunk (where its source sentence is; -1 if none); the relations in each chunk; the
    relations naming each entity (as subject or object); and each entity's pages (the
    chunks about it: one per paragraph of its article)."""

    chunks: npt.NDArray[np.int64]
    _by_chunk: tuple[npt.NDArray[np.int64], ...]
    _by_entity: tuple[npt.NDArray[np.int64], ...]
    _pages: tuple[npt.NDArray[np.int64], ...]

    @classmethod
    def of(cls, kg: KnowledgeGraph, page_entities: npt.NDArray[np.int64]) -> HopLinks:
        """The links of ``kg``: read where its build stored them, else derived."""
        indexes = kg.indexes
        stored = {name: indexes.array(name) for name in HOP_ARRAYS} if indexes else {}
        if any(a is None for a in stored.values()) or not stored:
            return cls.of_arrays(hop_arrays(kg, page_entities))
        return cls.of_arrays({k: v for k, v in stored.items() if v is not None})

    @classmethod
    def of_arrays(cls, arrays: Mapping[str, npt.NDArray[np.int64]]) -> HopLinks:
        """The links from the arrays of :func:`~.derived.hop_arrays`."""
        return cls(
            arrays["relation_chunks"],
            (arrays["by_chunk_indptr"], arrays["by_chunk_order"]),
            (arrays["by_entity_indptr"], arrays["by_entity_order"]),
            (arrays["pages_indptr"], arrays["pages_order"]),
        )

    def relations_in(self, chunk: int) -> npt.NDArray[np.int64]:
        indptr, order = self._by_chunk
        return order[indptr[chunk] : indptr[chunk + 1]]

    def relations_naming(self, entity: int) -> npt.NDArray[np.int64]:
        """The relations naming ``entity``, each once (a relation from the entity to
        itself names it twice)."""
        indptr, order = self._by_entity
        return np.unique(order[indptr[entity] : indptr[entity + 1]])

    def pages(self, entity: int) -> npt.NDArray[np.int64]:
        """The chunks about ``entity``, in chunk order."""
        indptr, order = self._pages
        return order[indptr[entity] : indptr[entity + 1]]


T = TypeVar("T")


class RecentSearches(Generic[T]):
    """The last few searches of a context, by what was asked: the members of a fused
    retriever (and a method's later steps) ask the same query the same searches, each
    a scan of a vector index (before the int8 sketch, about 2 ms of fused's 13 on
    2Wiki's 6,119 passages) or a match of the question against the entity names. Safe
    across threads: a search asked while another thread runs it waits for that one's
    answer. A hit returns a copy of the list; a search that raised is not kept."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self._found: OrderedDict[tuple[Hashable, ...], Future[list[T]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Hashable, ...], search: Callable[[], list[T]]) -> list[T]:
        with self._lock:
            future = self._found.get(key)
            owner = future is None
            if future is None:
                future = self._found[key] = Future()
                while len(self._found) > self.size:
                    self._found.popitem(last=False)
            else:
                self._found.move_to_end(key)
        if owner:
            try:
                future.set_result(search())
            except BaseException as exc:
                with self._lock:
                    if self._found.get(key) is future:
                        del self._found[key]
                future.set_exception(exc)
                raise
        return list(future.result())


@dataclass(frozen=True, eq=False)
class RetrievalContext:
    """Read-only view of an index for retrieval.

    Vector index ids: ``chunk_vectors`` by chunk position (order of ``kg.chunk_ids``);
    ``text_vectors`` holds each distinct description or relation text once, and
    ``description_rows``/``relation_rows`` give each description's and relation's row.
    """

    kg: KnowledgeGraph
    embedder: Embedder
    chunk_vectors: VectorIndex
    text_vectors: VectorIndex
    description_rows: npt.NDArray[np.int64]
    relation_rows: npt.NDArray[np.int64]
    chunk_titles: Sequence[str]
    chunk_texts: Sequence[str]
    bm25: BM25Index | None = field(default=None)
    triples: TripleStore | None = field(default=None)
    """Triples with their source sentences (KAGS), when the index was built for them."""
    directory: Path | None = field(default=None)
    """The index directory, where a method's own build artifacts live (KAG's graph)."""
    endpoint_vectors: VectorIndex | None = field(default=None)
    """Each relation's :func:`endpoint_text` embedded, by relation index
    (``EndpointTextStage``); None for an index built before that stage."""

    title_aliases: bool = field(default=True)
    """Whether a page's title without its qualifier names the page's entity in queries
    (:func:`~quillian.components.retrieval.seeding.page_aliases`; docs/sections/lift3.md)."""

    @cached_property
    def lexicon(self) -> EntityLexicon:
        """Entity names and aliases; then, with :attr:`title_aliases`, each page's base
        title for its entity (an entity's own name keeps a key both use)."""
        indexes = self.kg.indexes
        stored = indexes.names(self.title_aliases) if indexes is not None else None
        if stored is not None:
            return EntityLexicon.over(stored, max_words=EntityLexicon.MAX_WORDS)
        names = [(i, [e.name, *e.aliases]) for i, e in enumerate(self.kg.entities)]
        if self.title_aliases:
            pages = self.page_entities.tolist()
            titled = [(e, t) for e, t in zip(pages, self.chunk_titles, strict=True) if e >= 0]
            names += page_aliases(titled)
        return EntityLexicon.from_names(names)

    def _stored(self, name: str) -> npt.NDArray[Any] | None:
        """The array ``name`` the index's build stored, or None (a graph built here)."""
        return self.kg.indexes.array(name) if self.kg.indexes is not None else None

    @cached_property
    def page_entities(self) -> npt.NDArray[np.int64]:
        """Per chunk, the entity it is about (its title entity: a chunk-to-entity link
        of ``TOPIC_WEIGHT``), or -1."""
        stored = self._stored("page_entities")
        return derived.page_entities(self.kg) if stored is None else stored

    @cached_property
    def hop_links(self) -> HopLinks:
        """Relations by chunk and by entity, and each entity's pages (second hops)."""
        return HopLinks.of(self.kg, self.page_entities)

    @cached_property
    def description_entity(self) -> npt.NDArray[np.int32]:
        stored = self._stored("description_entity")
        return derived.description_entities(self.kg) if stored is None else stored

    @cached_property
    def _descriptions_by_row(self) -> TextRows:
        return self._by_row("description", self.description_rows)

    @cached_property
    def _relations_by_row(self) -> TextRows:
        return self._by_row("relation", self.relation_rows)

    def _by_row(self, what: str, rows: npt.NDArray[np.int64]) -> TextRows:
        """CSR of the items (descriptions or relations) whose text sits in each row."""
        indptr, order = self._stored(f"{what}_text_indptr"), self._stored(f"{what}_text_order")
        if indptr is None or order is None or len(indptr) != len(self.text_vectors) + 1:
            indptr, order = derived.text_rows(rows, len(self.text_vectors))
        return TextRows(indptr, order, int(np.count_nonzero(np.diff(indptr))))

    @cached_property
    def literal_entities(self) -> npt.NDArray[np.bool_]:
        """Per entity, whether it is a date, time or number rather than a name
        (:func:`~quillian.components.retrieval.seeding.is_literal`)."""
        stored = self._stored("literal_entities")
        return derived.literal_entities(self.kg) if stored is None else stored

    @cached_property
    def entity_chunks(self) -> npt.NDArray[np.int64]:
        """Per entity, how many chunks are linked to it (about it or mentioning it)."""
        stored = self._stored("entity_chunks")
        return derived.entity_chunks(self.kg) if stored is None else stored

    @cached_property
    def entity_specificity(self) -> npt.NDArray[np.float64]:
        """Per entity, ``log(N / df) / log(N)``: 1 for an entity one chunk mentions, near
        0 for one every chunk mentions (N chunks, df chunks linked to the entity)."""
        n = max(len(self.kg.chunk_ids), 2)
        df = np.maximum(self.entity_chunks, 1)
        return np.clip(np.log(n / df) / np.log(n), 0.05, 1.0)

    @cached_property
    def entity_name_matrix(self) -> npt.NDArray[np.float32]:
        """Each entity's name vector (a row per entity index), embedded on first use:
        only synonym links read them."""
        if self.kg.n_entities == 0:
            return np.zeros((0, self.embedder.dim), np.float32)
        return self.embedder.embed([e.name for e in self.kg.entities])

    @cached_property
    def _endpoints(self) -> VectorIndex | None:
        """The endpoint vectors, or None (with a warning, once) for an index built
        before ``EndpointTextStage``."""
        n = len(self.kg.relations)
        if self.endpoint_vectors is not None and len(self.endpoint_vectors) == n:
            return self.endpoint_vectors
        if n:
            logger.warning(
                "this index has no relation texts with endpoint names; triple seeding "
                "on them is skipped (rebuild the index to add them)"
            )
        return None

    @cached_property
    def _synonyms(self) -> dict[tuple[float, int], tuple[npt.NDArray[Any], ...]]:
        return {}

    def synonym_edges(
        self, threshold: float, k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Undirected synonym links between entities whose names embed at cosine
        ``threshold`` or more, each entity's ``k`` nearest (HippoRAG 2), in both
        directions with their cosine as weight; computed once per setting."""
        key = (threshold, k)
        if key not in self._synonyms:
            self._synonyms[key] = synonym_edges(self.entity_name_matrix, threshold, k)
        src, dst, weight = self._synonyms[key]
        return src, dst, weight

    def top_descriptions(self, q: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
        """The ``k`` entity descriptions most similar to the query: ``(description, cos)``.

        Texts are searched once each; a text shared by several descriptions ranks them
        together, in description order.
        """
        if len(self.description_rows) == 0:
            return []
        return self._recent.get(
            ("descriptions", q.tobytes(), k),
            lambda: self._top_texts(q, k, self._descriptions_by_row),
        )

    @cached_property
    def _recent(self) -> RecentSearches[tuple[int, float]]:
        return RecentSearches()

    @cached_property
    def _recent_matches(self) -> RecentSearches[LexicalMatch]:
        return RecentSearches()

    def named_in(self, query: str) -> list[LexicalMatch]:
        """The entity mentions in ``query`` (:meth:`EntityLexicon.match`), matched once
        for every member of a fused retriever and its second hops."""
        return self._recent_matches.get(("named", query), lambda: self.lexicon.match(query))

    def top_relations(
        self, q: npt.NDArray[np.float32], k: int, text: RelationText = "sentence"
    ) -> list[tuple[int, float]]:
        """The ``k`` relations whose texts are most similar to the query: ``(relation,
        cos)``. ``sentence``: the source sentences, ranked like :meth:`top_descriptions`;
        ``endpoints``: the sentences with their endpoint names (:func:`endpoint_text`);
        none on an index built without those."""
        if len(self.relation_rows) == 0 or k <= 0:
            return []
        if text == "sentence":
            return self._top_texts(q, k, self._relations_by_row)
        if self._endpoints is None:
            return []
        return self._top_endpoints(self._endpoints, q, k)

    def _top_endpoints(
        self, index: VectorIndex, q: npt.NDArray[np.float32], k: int
    ) -> list[tuple[int, float]]:
        """The ``k`` best relations by endpoint-text cosine; every relation tied with the
        ``k``-th (to :data:`TIE_DIGITS`) is fetched and ties are broken by the text, then
        the relation, so two builds of one corpus seed alike whatever order their
        relations are in."""
        fetch = k + 1  # one past the k-th shows whether the k-th is tied
        while True:
            ids, scores = index.search(q[None, :], fetch)
            found = [
                (int(i), float(c))
                for i, c in zip(ids[0].tolist(), scores[0].tolist(), strict=True)
                if i >= 0
            ]
            tied = len(found) == fetch and _tie(found[k - 1][1]) <= _tie(found[-1][1])
            if not tied or fetch >= len(index):
                break
            fetch = min(len(index), fetch * 4)
        texts = {r: endpoint_text(self.kg.relations[r]) for r, _ in found}
        found.sort(key=lambda rc: (-_tie(rc[1]), texts[rc[0]], rc[0]))
        return found[:k]

    def _top_texts(
        self,
        q: npt.NDArray[np.float32],
        k: int,
        by_row: TextRows,
    ) -> list[tuple[int, float]]:
        if k <= 0:
            return []
        indptr, order, holding = by_row
        found: list[tuple[int, float]] = []
        # a search scans every text row whatever it fetches, so fetch at the first try
        # the rows k items should need: k over the share of rows that hold one (on
        # MuSiQue's GPT-3.5 graph 41% of the rows are descriptions, and fetching k
        # rescanned the texts one or two times more a query); more if that falls short
        fetch = min(len(self.text_vectors), -(-k * len(self.text_vectors) // max(holding, 1)))
        while True:
            rows, scores = self.text_vectors.search(q[None, :], fetch)
            found = []
            for row, score in zip(rows[0].tolist(), scores[0].tolist(), strict=True):
                if row < 0:
                    continue
                for item in order[indptr[row] : indptr[row + 1]].tolist():
                    found.append((item, score))
            if len(found) >= k or fetch >= len(self.text_vectors):
                return found[:k]
            fetch = min(len(self.text_vectors), fetch * 4)

    def passage(self, chunk: int, score: float) -> ScoredPassage:
        """The chunk at position ``chunk`` as a scored passage with its title and text."""
        return ScoredPassage(
            chunk,
            self.kg.chunk_ids[chunk],
            score,
            self.chunk_titles[chunk],
            self.chunk_texts[chunk],
        )

    def dense_ranking(self, q: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
        """The ``k`` chunks most similar to the query vector: ``(chunk, cosine)``, best first."""

        def search() -> list[tuple[int, float]]:
            ids, scores = self.chunk_vectors.search(q[None, :], k)
            return [
                (int(i), float(s))
                for i, s in zip(ids[0].tolist(), scores[0].tolist(), strict=True)
                if i >= 0
            ]

        return self._recent.get(("dense", q.tobytes(), k), search)

    def passages(self, ids: npt.ArrayLike, scores: npt.ArrayLike) -> list[ScoredPassage]:
        """Scored passages for parallel chunk positions and scores; -1 padding is skipped."""
        return [
            self.passage(int(i), float(s))
            for i, s in zip(np.asarray(ids).tolist(), np.asarray(scores).tolist(), strict=True)
            if i >= 0
        ]

    def used_relation(self, relation: int, weight: float, hop: int = 0) -> UsedRelation:
        """Relation ``relation`` as a trace shows it, with its source sentence."""
        triple = self.kg.relations[relation]
        sentence = triple.provenance.sentence if triple.provenance else ""
        return UsedRelation(
            relation,
            triple.subject,
            triple.predicate,
            triple.object,
            triple.description,
            weight,
            sentence,
            hop,
        )

    def entity_name(self, entity: int) -> str:
        return self.kg.entities[entity].name

    def seeds(
        self,
        query: str,
        q: npt.NDArray[np.float32],
        mode: SeedMode,
        k: int,
        triples: int = 0,
        triple_text: RelationText = "sentence",
        literals: bool = True,
    ) -> list[Seed]:
        """Initially activated entities, without duplicates.

        ``lexical``: entities named in the query; ``description``: the entities of the
        top-``k`` descriptions by cosine (SA-RAG); ``both``: lexical first, then
        description; ``auto``: lexical, or description when the query names no entity.
        ``triples``: also the subjects and objects of the ``triples`` relations whose
        source sentences (``triple_text``: see :meth:`top_relations`) are nearest the
        query (their cosine), after the others. ``literals=False``: no date, time or
        number seeds, whatever found them (:attr:`literal_entities`).
        """
        if triples and triple_text == "endpoints" and self.endpoint_vectors is None:
            raise ConfigError(
                "triple seeds on endpoint texts need relation texts with their endpoint "
                "names, which this index was built without: rebuild it with "
                "`quillian index --endpoint-texts`, or match the source sentences "
                "(triple_text=sentence)"
            )
        found: dict[int, Seed] = {}
        skip = None if literals else self.literal_entities
        if mode in ("lexical", "both", "auto"):
            for m in self.named_in(query):
                if skip is not None and skip[m.entity]:
                    continue
                name = self.entity_name(m.entity)
                found.setdefault(m.entity, Seed(m.entity, name, 1.0, "lexical"))
        if mode in ("description", "both") or (mode == "auto" and not found):
            for desc, score in self.top_descriptions(q, k):
                entity = int(self.description_entity[desc])
                if skip is not None and skip[entity]:
                    continue
                name = self.entity_name(entity)
                found.setdefault(entity, Seed(entity, name, score, "description"))
        for relation, score in self.top_relations(q, triples, triple_text):
            for end in (self.kg.relation_subject[relation], self.kg.relation_object[relation]):
                entity = int(end)
                if entity >= 0 and (skip is None or not skip[entity]):
                    found.setdefault(
                        entity, Seed(entity, self.entity_name(entity), score, "triple")
                    )
        return list(found.values())

    def embed_query(self, query: str) -> npt.NDArray[np.float32]:
        return self.embedder.embed([query])[0]

    def chunk_similarity(
        self, query_vector: npt.NDArray[np.float32], chunks: npt.ArrayLike
    ) -> npt.NDArray[np.float32]:
        """Cosine similarity between the query and the given chunk positions."""
        ids = np.asarray(chunks, dtype=np.int64)
        if len(ids) == 0:
            return np.zeros(0, np.float32)
        return (self.chunk_vectors.get(ids) @ query_vector).astype(np.float32)

    def relation_similarity(
        self, query_vector: npt.NDArray[np.float32], relations: npt.ArrayLike
    ) -> npt.NDArray[np.float32]:
        """Cosine similarity between the query and the given relations' texts."""
        rel = np.asarray(relations, dtype=np.int64)
        out = np.zeros(len(rel), np.float32)
        valid = rel >= 0
        if valid.any():
            rows = self.relation_rows[rel[valid]]
            unique, inverse = np.unique(rows, return_inverse=True)
            sims = self.text_vectors.get(unique) @ query_vector
            out[valid] = sims[inverse]
        return out
