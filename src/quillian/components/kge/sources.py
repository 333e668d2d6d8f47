"""Triples for a KG-embedding model from the graphs Quillian holds.

* :func:`triples_from_imported_graph`: an imported knowledge graph
  (:class:`~quillian.components.kg.store.ImportedGraph`: Wikidata5M, RDF, WordNet); its
  CSR arrays give every outgoing triple, read a block of entities at a time.
* :func:`triples_from_knowledge_graph`: an index's document graph (the
  :class:`~quillian.components.graph.builder.KnowledgeGraph` an index opens): entities
  are its entity rows, relations its distinct predicates (lower-cased, spaces
  collapsed), each ``(subject, predicate, object)`` once whatever chunks stated it.
  ``fold=True`` folds spellings of one relation together
  (:func:`~quillian.components.kg.predicates.relation_key`: "is located in" and
  "located in"); measured on MuSiQue's GPT-3.5 graph it did not tell held-out facts
  from corrupted ones better (``python research/kge_predicates.py``), so it is
  not the default.

Each :class:`TripleSet` carries a ``source_key``, a digest of the entity ids and
relation names, so a model's fingerprint also changes when the graph is renumbered.
"""

from __future__ import annotations

import hashlib

import numpy as np
import numpy.typing as npt

from quillian.components.graph.builder import KnowledgeGraph
from quillian.components.kg.predicates import FoldedPredicates, spelling
from quillian.components.kg.store import ImportedGraph
from quillian.components.kge.triples import TripleSet, digest_strings

__all__ = ["predicate_key", "triples_from_imported_graph", "triples_from_knowledge_graph"]

#: Entities read per block from an imported graph (bounds the temporary arrays).
_BLOCK = 1 << 18


def triples_from_imported_graph(graph: ImportedGraph) -> TripleSet:
    """Every triple of an imported graph, numbered as the graph numbers them."""
    n = len(graph)
    heads: list[npt.NDArray[np.int32]] = []
    relations: list[npt.NDArray[np.int32]] = []
    tails: list[npt.NDArray[np.int32]] = []
    cap = max(graph.n_triples, 1)
    for start in range(0, n, _BLOCK):
        h, r, t = graph.neighbours(np.arange(start, min(start + _BLOCK, n)), cap)
        heads.append(h.astype(np.int32))
        relations.append(r.astype(np.int32, copy=False))
        tails.append(t.astype(np.int32, copy=False))
    names = tuple(graph.relation_names)
    return TripleSet(
        _cat(heads),
        _cat(relations),
        _cat(tails),
        n,
        len(names),
        source_key=_imported_key(graph, names),
        relation_names=names,
    )


def _imported_key(graph: ImportedGraph, relation_names: tuple[str, ...]) -> str:
    """Digest of the graph's entity ids (its ``ids_blob``/``ids_offsets`` arrays, see
    :mod:`quillian.components.kg.store`) and relation names."""
    digest = hashlib.blake2b(digest_size=16)
    for name in ("ids_offsets.npy", "ids_blob.npy"):
        array = np.load(graph.directory / name, mmap_mode="r")
        for start in range(0, len(array), 1 << 24):
            digest.update(np.ascontiguousarray(array[start : start + (1 << 24)]).tobytes())
    digest.update(digest_strings(relation_names).encode("ascii"))
    return digest.hexdigest()


def predicate_key(predicate: str) -> str:
    """The relation a document-graph predicate is counted as: lower-cased, spaces
    collapsed (``"Born in"`` and ``"born  in"`` are one relation)."""
    return spelling(predicate)


def triples_from_knowledge_graph(kg: KnowledgeGraph, *, fold: bool = False) -> TripleSet:
    """The ``(subject, predicate, object)`` relations of an index's document graph.

    Entities are the graph's entity rows ``0..n_entities-1`` (all of them, so model rows
    line up with the index's entity numbers even for entities in no relation); relation
    ``i`` is the ``i``-th distinct :func:`predicate_key` in extraction order. With
    ``fold=True``, the ``i``-th distinct
    :func:`~quillian.components.kg.predicates.relation_key` instead, named by its most
    frequent spelling (what ``research/kge_predicates.py`` compares against)."""
    predicates = (t.predicate for t in kg.relations)
    if fold:
        folded = FoldedPredicates(predicates)
        rows, names, keys = folded.ids, folded.names, folded.keys
    else:
        vocabulary: dict[str, int] = {}
        rows = [vocabulary.setdefault(predicate_key(p), len(vocabulary)) for p in predicates]
        names = keys = tuple(vocabulary)
    triples = np.stack(
        [
            np.asarray(kg.relation_subject, dtype=np.int64),
            np.asarray(rows, dtype=np.int64).reshape(-1),
            np.asarray(kg.relation_object, dtype=np.int64),
        ],
        axis=1,
    ).reshape(-1, 3)
    _, first = np.unique(triples, axis=0, return_index=True)
    triples = triples[np.sort(first)]
    entity_key = digest_strings([e.node_id for e in kg.entities])
    return TripleSet(
        triples[:, 0],
        triples[:, 1],
        triples[:, 2],
        kg.n_entities,
        len(names),
        source_key=f"{entity_key}:{digest_strings(keys)}",
        relation_names=names,
    )


def _cat(parts: list[npt.NDArray[np.int32]]) -> npt.NDArray[np.int32]:
    return np.concatenate(parts) if parts else np.zeros(0, np.int32)
