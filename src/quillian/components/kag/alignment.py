"""Knowledge alignment (paper section 2.4.1, Table 2; spec section 3.2): semantic types
become ``SemanticConcept`` nodes joined by ``isA`` chains up to the entity's schema
class, instances link to their concept by ``belongTo``, entities that share a meaning
get ``synonym`` edges, and entities of one class whose names embed close together get
``similar`` edges (:func:`link_similar`, the authors' post-processor).

Concept chains come from a :class:`ConceptSource`: offline, WordNet's hypernyms (the
first noun sense of the semantic type, or of the entity's own name when it has none:
``Venice`` belongTo ``city`` isA ``municipality`` ...); or any mapping of type to
chain, such as the one the LLM's ``kag.concepts`` task returns. :func:`without_alignment`
strips the result again, so one index serves both sides of the paper's M_Indexing /
K_Alignment ablation.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from quillian.components.extraction.llm import _run_sync
from quillian.components.graph.synonyms import SYNONYM_THRESHOLD, nearest_pairs
from quillian.components.kag.graph import KagEdge, KagNode, TypedGraph, TypedGraphBuilder
from quillian.components.kag.schema import CHUNK, CONCEPT, OTHERS, Schema
from quillian.components.kag.tasks import CONCEPTS
from quillian.components.llm.tasks import TaskFailed, TaskRunner, Transcript
from quillian.errors import InputError
from quillian.stores.protocols import KeyValueStore
from quillian.types import normalize_name

__all__ = [
    "ALIGNMENT_PREDICATES",
    "SIMILAR",
    "SIMILAR_THRESHOLD",
    "Aligner",
    "ConceptSource",
    "LLMConcepts",
    "MappedConcepts",
    "WordNetHypernyms",
    "link_similar",
    "without_alignment",
]

SIMILAR = "similar"
ALIGNMENT_PREDICATES = frozenset({"isA", "belongTo", "synonym", SIMILAR})
#: Name cosine at which two entities of one class are linked ``similar``: HippoRAG's
#: synonymy threshold (:data:`~quillian.components.graph.synonyms.SYNONYM_THRESHOLD`).
SIMILAR_THRESHOLD = SYNONYM_THRESHOLD
DEFAULT_WORDNET = Path("/usr/share/wordnet")


class ConceptSource(Protocol):
    """Hypernym chains: a term's concept first, then ever more general ones."""

    def prepare(self, terms: Sequence[tuple[str, str]]) -> None:
        """Look up every ``(term, class)`` at once before :meth:`chain` is asked."""
        ...

    def chain(self, term: str) -> list[str]: ...

    def sense(self, term: str) -> str | None:
        """An id shared by terms of the same meaning (None when unknown)."""
        ...


class MappedConcepts:
    """Chains given as data (for example the LLM's concept-completion answer)."""

    def __init__(self, chains: Mapping[str, list[str]]) -> None:
        self._chains = {normalize_name(k): list(v) for k, v in chains.items()}

    def prepare(self, terms: Sequence[tuple[str, str]]) -> None:
        return None

    def chain(self, term: str) -> list[str]:
        return self._chains.get(normalize_name(term), [])

    def sense(self, term: str) -> str | None:
        return None


class WordNetHypernyms:
    """Noun hypernym chains from WordNet's database files (most frequent sense)."""

    def __init__(self, directory: Path = DEFAULT_WORDNET, depth: int = 4) -> None:
        self.directory = directory
        self.depth = depth

    def prepare(self, terms: Sequence[tuple[str, str]]) -> None:
        return None

    @cached_property
    def _index(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for line in self._lines("index.noun"):
            tokens = line.split()
            n_senses, n_pointers = int(tokens[2]), int(tokens[3])
            out[tokens[0]] = tokens[6 + n_pointers : 6 + n_pointers + n_senses]
        return out

    @cached_property
    def _synsets(self) -> dict[str, tuple[str, list[str]]]:
        """offset -> (first lemma, hypernym offsets)."""
        out: dict[str, tuple[str, list[str]]] = {}
        for line in self._lines("data.noun"):
            tokens = line.partition(" | ")[0].split()
            n_words = int(tokens[3], 16)
            at = 4 + 2 * n_words
            pointers = tokens[at + 1 : at + 1 + 4 * int(tokens[at])]
            parents = [
                pointers[j + 1] for j in range(0, len(pointers), 4) if pointers[j] in ("@", "@i")
            ]
            out[tokens[0]] = (tokens[4].replace("_", " "), parents)
        return out

    def _lines(self, name: str) -> list[str]:
        path = self.directory / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InputError(
                f"cannot read WordNet ({exc}); install wordnet-base", path=str(path)
            ) from exc
        return [line for line in text.splitlines() if line and not line.startswith("  ")]

    def sense(self, term: str) -> str | None:
        senses = self._index.get(normalize_name(term).replace(" ", "_"))
        return senses[0] if senses else None

    def chain(self, term: str) -> list[str]:
        offset = self.sense(term)
        out: list[str] = []
        while offset is not None and len(out) < self.depth:
            lemma, parents = self._synsets.get(offset, ("", []))
            if not lemma:
                break
            out.append(lemma)
            offset = parents[0] if parents else None
        return out


class Aligner:
    """Adds concepts, ``belongTo``/``isA`` chains and ``synonym`` edges to a graph."""

    def __init__(self, schema: Schema, source: ConceptSource) -> None:
        self.schema = schema
        self.source = source

    def align(self, graph: TypedGraph) -> TypedGraph:
        builder = TypedGraphBuilder(self.schema)
        for node in graph.nodes:
            builder.add_node(node)
        for e in graph.edges:
            builder.add_edge(e.subject, e.predicate, e.object, e.chunk, e.props)
        builder.issues.extend(graph.issues)
        classes = {
            label: builder.add_node(KagNode(label, CONCEPT, self.schema.classes[label].description))
            for label in self.schema.entity_types
            if label != OTHERS
        }
        self.source.prepare(
            list(
                dict.fromkeys(
                    (n.semantic_type or n.name, n.label)
                    for n in graph.nodes
                    if n.label not in (CHUNK, CONCEPT)
                )
            )
        )
        chains: dict[str, list[str]] = {}
        by_sense: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, node in enumerate(graph.nodes):
            if node.label in (CHUNK, CONCEPT):
                continue
            term = node.semantic_type or node.name
            if term not in chains:
                chains[term] = self.source.chain(term)
            chain = chains[term]
            if not chain:
                continue
            if not node.semantic_type and normalize_name(chain[0]) == normalize_name(node.name):
                chain = chain[1:]  # the entity's own name: its concept is the hypernym
            if not chain:
                continue
            concepts = [builder.add_node(KagNode(c, CONCEPT)) for c in chain]
            builder.add_edge(i, "belongTo", concepts[0])
            for child, parent in pairwise(concepts):
                builder.add_edge(child, "isA", parent)
            if node.label in classes:
                builder.add_edge(concepts[-1], "isA", classes[node.label])
            sense = self.source.sense(node.name)
            if sense is not None:
                by_sense[(sense, node.label)].append(i)
        for members in by_sense.values():
            for other in members[1:]:
                builder.add_edge(members[0], "synonym", other)
        return builder.build()


class LLMConcepts:
    """Concept completion by the model (Algorithm A1 step 3): the ``kag.concepts`` task
    asked for the hypernym chain of each semantic type, in batches; a batch whose reply
    stays unusable after its repair leaves its types without chains (recorded in
    :attr:`failures`). Entities without a semantic type are not asked about.

    With a ``store``, chains are kept under ``namespace`` and read back first, so a
    rebuild (after a deletion, or an incremental build) asks only about new types, and
    one with no model (``runner=None``) reuses every chain already paid for; the types
    it cannot complete are listed in :attr:`failures`."""

    def __init__(
        self,
        runner: TaskRunner | None,
        batch: int = 20,
        *,
        store: KeyValueStore | None = None,
        namespace: str = "kag-concepts",
    ) -> None:
        self.runner = runner
        self.batch = batch
        self.store = store
        self.namespace = namespace
        self.transcript = Transcript()
        self.failures: list[str] = []
        self._chains: dict[str, list[str]] = {}

    def prepare(self, terms: Sequence[tuple[str, str]]) -> None:
        asked = list(
            {
                normalize_name(t): (t, c)
                for t, c in terms
                if t and normalize_name(t) not in self._chains
            }.values()
        )
        if asked and self.store is not None:
            keys = [normalize_name(t) for t, _ in asked]
            for key, raw in zip(keys, self.store.get_many(self.namespace, keys), strict=True):
                if raw is not None:
                    self._chains[key] = json.loads(raw)
            asked = [(t, c) for t, c in asked if normalize_name(t) not in self._chains]
        if not asked:
            return
        if self.runner is None:
            self.failures.append(
                f"no model to complete the concepts of {len(asked)} new type(s), "
                f"e.g. {asked[0][0]!r}; rebuild with --llm to add them"
            )
            return
        _run_sync(lambda: self._ask(self.runner, asked))  # type: ignore[arg-type]

    async def _ask(self, runner: TaskRunner, terms: Sequence[tuple[str, str]]) -> None:
        for start in range(0, len(terms), self.batch):
            part = terms[start : start + self.batch]
            lines = "\n".join(f"{t} (class {c})" for t, c in part)
            try:
                found = await runner.run(CONCEPTS, self.transcript, types=lines)
            except TaskFailed as exc:
                self.failures.append(str(exc))
                continue
            # a term the model gave no chain for was asked all the same: "none" is kept
            chains = {normalize_name(t): list[str]() for t, _ in part}
            chains.update({normalize_name(term): chain for term, chain in found.items()})
            self._chains.update(chains)
            if self.store is not None and chains:
                self.store.put_many(
                    self.namespace, {k: json.dumps(v).encode() for k, v in chains.items()}
                )

    def chain(self, term: str) -> list[str]:
        return self._chains.get(normalize_name(term), [])

    def sense(self, term: str) -> str | None:
        return None


def link_similar(
    graph: TypedGraph, names: npt.NDArray[np.float32], threshold: float = SIMILAR_THRESHOLD
) -> TypedGraph:
    """The post-processor's similarity linking (spec 2.2 step 7): each entity's nearest
    other entity of the same class by name vector (``names``: unit rows, one per
    :meth:`~TypedGraph.entity_nodes` entry), linked ``similar`` when their cosine is at
    least ``threshold``; each pair once."""
    entities = graph.entity_nodes()
    if len(entities) != len(names):
        raise ValueError(f"{len(names)} name vectors for {len(entities)} entities")
    labels = [graph.nodes[node].label for node in entities]
    rows, near, _ = nearest_pairs(names, threshold, k=1, groups=labels)
    pairs = {
        (min(entities[a], entities[b]), max(entities[a], entities[b]))
        for a, b in zip(rows.tolist(), near.tolist(), strict=True)
    }
    if not pairs:
        return graph
    edges = [*graph.edges, *(KagEdge(a, SIMILAR, b) for a, b in sorted(pairs))]
    return TypedGraph(graph.nodes, edges, graph.issues)


def without_alignment(graph: TypedGraph) -> TypedGraph:
    """The graph as M_Indexing sees it: no concept nodes' edges, no synonym edges."""
    edges = [e for e in graph.edges if e.predicate not in ALIGNMENT_PREDICATES]
    return TypedGraph(graph.nodes, edges, graph.issues)
