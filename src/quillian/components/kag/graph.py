"""KAG's typed graph and its mutual index (spec section 2.2, Algorithm B1 step 6).

Nodes are keyed by ``(normalised name, class)``: entities of the schema's classes,
``SemanticConcept`` nodes (semantic types, when aligned) and ``Chunk`` nodes. Edges
are typed triples: OpenIE relations (camel-cased predicates), ``officialName``,
``synonym``, ``belongTo`` (instance to concept), ``isA`` (concept to concept), and
``source`` from every extracted node to the chunk it came from, the mutual index
between graph and text.

:class:`TypedGraphBuilder` assembles the graph from extractions (any extractor: the
recorded GPT-3.5 OpenIE, spaCy with its NER labels mapped to schema classes, or KAG's
own LLM extraction) and records every problem it repairs or rejects.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from quillian.components.extraction.base import Extraction
from quillian.components.kag.schema import CHUNK, CONCEPT, OTHERS, Schema
from quillian.errors import InputError
from quillian.types import normalize_name

__all__ = [
    "GRAPH_FILE",
    "SOURCE",
    "SPACY_LABELS",
    "BuildIssue",
    "KagEdge",
    "KagNode",
    "TypedGraph",
    "TypedGraphBuilder",
    "camel_case",
]

#: Where an index built with KAG's stage keeps its typed graph (under the index directory).
GRAPH_FILE = Path("kag") / "graph.json"
SOURCE = "source"
OFFICIAL_NAME = "officialName"
#: spaCy's NER labels (OntoNotes) as classes of the open-domain schema.
SPACY_LABELS: Mapping[str, str] = {
    "PERSON": "Person",
    "NORP": "Organization",
    "FAC": "Building",
    "ORG": "Organization",
    "GPE": "GeographicLocation",
    "LOC": "GeographicLocation",
    "PRODUCT": "ArtificialObject",
    "EVENT": "Event",
    "WORK_OF_ART": "Works",
    "LAW": "Works",
    "LANGUAGE": "Concept",
    "DATE": "Date",
    "TIME": "Date",
}
_YEAR = re.compile(r"^(?:\d{3,4}s?|(?:\w+ )?\d{1,2},? \d{4}|\d{1,2} \w+ \d{4}|\w+ \d{4})$")
_WORD = re.compile(r"[A-Za-z0-9]+")


def camel_case(predicate: str) -> str:
    """``"was born in"`` -> ``"wasBornIn"`` (the authors' edge naming)."""
    words = _WORD.findall(predicate)
    if not words:
        return "relatedTo"
    return words[0].lower() + "".join(w[:1].upper() + w[1:].lower() for w in words[1:])


@dataclass(frozen=True, slots=True)
class KagNode:
    """A node: its display name, class, description and fine-grained semantic type."""

    name: str
    label: str
    desc: str = ""
    semantic_type: str = ""
    synonyms: tuple[str, ...] = ()
    props: tuple[tuple[str, str], ...] = ()
    """Property values (``p^c``/``p^f``), e.g. ``(("location", "West Lake, Hangzhou"),)``."""

    @property
    def key(self) -> tuple[str, str]:
        return normalize_name(self.name), self.label


@dataclass(frozen=True, slots=True)
class KagEdge:
    """A typed edge between node positions; ``chunk`` is the chunk it was read from."""

    subject: int
    predicate: str
    object: int
    chunk: str = ""
    props: tuple[tuple[str, str], ...] = ()
    """Edge properties, e.g. ``(("year", "2011"),)``."""


@dataclass(frozen=True, slots=True)
class BuildIssue:
    """A problem met while assembling the graph and what was done (``repaired`` or
    ``rejected``)."""

    chunk: str
    message: str
    action: str


@dataclass(frozen=True)
class TypedGraph:
    """The built typed graph; nodes and edges are addressed by position."""

    nodes: list[KagNode]
    edges: list[KagEdge]
    issues: list[BuildIssue] = field(default_factory=list)

    @cached_property
    def _by_key(self) -> dict[tuple[str, str], int]:
        return {n.key: i for i, n in enumerate(self.nodes)}

    @cached_property
    def _by_name(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = defaultdict(list)
        for i, n in enumerate(self.nodes):
            if n.label not in (CHUNK, CONCEPT):
                out[normalize_name(n.name)].append(i)
                for s in n.synonyms:
                    out[normalize_name(s)].append(i)
        return out

    @cached_property
    def _incident(self) -> list[list[int]]:
        rows: list[list[int]] = [[] for _ in self.nodes]
        for e, edge in enumerate(self.edges):
            rows[edge.subject].append(e)
            if edge.object != edge.subject:
                rows[edge.object].append(e)
        return rows

    def node(self, name: str, label: str) -> int | None:
        return self._by_key.get((normalize_name(name), label))

    def by_name(self, name: str) -> list[int]:
        """Entity nodes named ``name`` (or with it as a synonym), any class."""
        return list(self._by_name.get(normalize_name(name), ()))

    def chunk_node(self, chunk_id: str) -> int | None:
        return self._by_key.get((normalize_name(chunk_id), CHUNK))

    def one_hop(self, node: int, *, with_source: bool = False) -> list[int]:
        """Edge positions touching ``node`` (both directions); ``source`` edges (the
        mutual index) only when asked."""
        return [e for e in self._incident[node] if with_source or self.edges[e].predicate != SOURCE]

    def chunks_of(self, node: int) -> list[str]:
        """The chunk ids ``node`` was extracted from (its supporting chunks)."""
        return [
            self.nodes[self.edges[e].object].name
            for e in self._incident[node]
            if self.edges[e].predicate == SOURCE and self.edges[e].subject == node
        ]

    def entity_nodes(self) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n.label not in (CHUNK, CONCEPT)]

    def spo_text(self, edge: int) -> str:
        """An edge verbalised: ``"Subject predicate Object"``."""
        e = self.edges[edge]
        return f"{self.nodes[e.subject].name} {e.predicate} {self.nodes[e.object].name}"

    def counts(self) -> dict[str, int]:
        labels: dict[str, int] = defaultdict(int)
        for n in self.nodes:
            labels[n.label] += 1
        preds: dict[str, int] = defaultdict(int)
        for e in self.edges:
            preds[
                e.predicate
                if e.predicate in (SOURCE, "isA", "belongTo", "synonym", "similar")
                else "spo"
            ] += 1
        return {
            "kag_nodes": len(self.nodes),
            "kag_edges": len(self.edges),
            "kag_chunks": labels[CHUNK],
            "kag_concepts": labels[CONCEPT],
            "kag_source_edges": preds[SOURCE],
            "kag_spo_edges": preds["spo"],
            "kag_isa_edges": preds["isA"],
            "kag_similar_edges": preds["similar"],
            "kag_issues": len(self.issues),
        }

    def save(self, path: Path) -> None:
        data = {
            "nodes": [asdict(n) for n in self.nodes],
            "edges": [
                [e.subject, e.predicate, e.object, e.chunk, [list(p) for p in e.props]]
                for e in self.edges
            ],
            "issues": [asdict(i) for i in self.issues],
        }
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> TypedGraph:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            nodes = [
                KagNode(
                    n["name"],
                    n["label"],
                    n["desc"],
                    n["semantic_type"],
                    tuple(n["synonyms"]),
                    tuple((str(k), str(v)) for k, v in n.get("props", ())),
                )
                for n in data["nodes"]
            ]
            edges = [
                KagEdge(int(s), str(p), int(o), str(c), tuple((str(k), str(v)) for k, v in props))
                for s, p, o, c, props in data["edges"]
            ]
            issues = [BuildIssue(**i) for i in data.get("issues", [])]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"cannot read the KAG graph ({exc!r})", path=str(path)) from exc
        return cls(nodes, edges, issues)


def guess_label(name: str, label: str, schema: Schema, label_map: Mapping[str, str]) -> str:
    """An extracted entity's class: its label if the schema declares it, else the
    mapped NER label, else ``Date`` for a year or date, else ``Others``."""
    if label:
        mapped = label_map.get(label.upper(), label)
        found = schema.entity_type(mapped)
        if found != OTHERS or mapped.casefold() == OTHERS.casefold():
            return found
    if "Date" in schema.classes and _YEAR.match(name.strip()):
        return "Date"
    return OTHERS


class TypedGraphBuilder:
    """Assembles a :class:`TypedGraph` from extractions under a schema."""

    def __init__(self, schema: Schema, label_map: Mapping[str, str] = SPACY_LABELS) -> None:
        self.schema = schema
        self.label_map = label_map
        self.nodes: list[KagNode] = []
        self.edges: list[KagEdge] = []
        self.issues: list[BuildIssue] = []
        self._index: dict[tuple[str, str], int] = {}
        self._edge_seen: set[tuple[int, str, int]] = set()

    def add_node(self, node: KagNode) -> int:
        """The position of ``node``'s key, adding it (or filling its empty fields)."""
        key = node.key
        at = self._index.get(key)
        if at is None:
            self._index[key] = len(self.nodes)
            self.nodes.append(node)
            return len(self.nodes) - 1
        old = self.nodes[at]
        if (not old.desc and node.desc) or (not old.semantic_type and node.semantic_type):
            self.nodes[at] = KagNode(
                old.name,
                old.label,
                old.desc or node.desc,
                old.semantic_type or node.semantic_type,
                old.synonyms,
                old.props or node.props,
            )
        return at

    def _types(self, name: str, written: str) -> tuple[str, str]:
        """An entity's class and semantic type from its extracted type: KAG's own
        ``"Class/semantic type"``, an NER code (``PERSON``), a class, or a semantic type."""
        if "/" in written:
            label, _, semantic = written.partition("/")
            return guess_label(name, label, self.schema, self.label_map), semantic.strip().lower()
        label = guess_label(name, written, self.schema, self.label_map)
        # a fine-grained semantic type is words ("legislative body"), not an NER code
        coded = written.isupper() or written.upper() in self.label_map
        if not written or coded or self.schema.canonical(written):
            return label, ""
        return label, written.lower()

    def add_edge(
        self,
        subject: int,
        predicate: str,
        obj: int,
        chunk: str = "",
        props: tuple[tuple[str, str], ...] = (),
    ) -> None:
        key = (subject, predicate, obj)
        if key not in self._edge_seen:
            self._edge_seen.add(key)
            self.edges.append(KagEdge(subject, predicate, obj, chunk, props))

    def add_extraction(self, extraction: Extraction) -> None:
        """One chunk's sub-graph (B1 step 6): entity nodes, official names, triples,
        and a ``source`` edge from every node to the chunk."""
        chunk = self.add_node(KagNode(extraction.chunk_id, CHUNK))
        local: dict[str, int] = {}
        members: list[int] = []
        for ent in extraction.entities:
            if not normalize_name(ent.name):
                self.issues.append(
                    BuildIssue(extraction.chunk_id, "entity without a name", "rejected")
                )
                continue
            label, semantic = self._types(ent.name, ent.type)
            at = self.add_node(KagNode(ent.name, label, ent.description, semantic.lower()))
            members.append(at)
            local.setdefault(normalize_name(ent.name), at)
            for alias in ent.aliases:
                if normalize_name(alias) and normalize_name(alias) != normalize_name(ent.name):
                    official = self.add_node(KagNode(alias, label))
                    self.add_edge(at, OFFICIAL_NAME, official, extraction.chunk_id)
                    members.append(official)
                    local.setdefault(normalize_name(alias), official)
        for triple in extraction.triples:
            ends = [local.get(normalize_name(x)) for x in (triple.subject, triple.object)]
            if ends[0] is None and ends[1] is None:
                self.issues.append(
                    BuildIssue(
                        extraction.chunk_id,
                        f"triple ({triple.subject}, {triple.predicate}, {triple.object}) names "
                        "no entity of the chunk's entity list",
                        "rejected",
                    )
                )
                continue
            resolved = []
            for end, name in zip(ends, (triple.subject, triple.object), strict=True):
                if end is None:
                    end = self.add_node(KagNode(name, OTHERS))
                    members.append(end)
                    self.issues.append(
                        BuildIssue(
                            extraction.chunk_id,
                            f"triple endpoint {name!r} is not in the entity list; "
                            f"added as {OTHERS}",
                            "repaired",
                        )
                    )
                resolved.append(end)
            self.add_edge(
                resolved[0], camel_case(triple.predicate), resolved[1], extraction.chunk_id
            )
        for member in dict.fromkeys(members):
            self.add_edge(member, SOURCE, chunk, extraction.chunk_id)

    def add_all(self, extractions: Iterable[Extraction]) -> None:
        for extraction in extractions:
            self.add_extraction(extraction)

    def build(self) -> TypedGraph:
        return TypedGraph(list(self.nodes), list(self.edges), list(self.issues))


def nodes_named(graph: TypedGraph, names: Sequence[str]) -> list[int]:
    """Positions of the entity nodes carrying any of ``names``."""
    return sorted({n for name in names for n in graph.by_name(name)})


def as_dicts(issues: Sequence[BuildIssue]) -> list[dict[str, Any]]:
    return [asdict(i) for i in issues]
