"""RDF graphs (N-Triples, Turtle and the other formats rdflib reads), extra ``rdf``.

Mapping:

* every IRI that is the subject or object of an IRI-valued triple, or that has a
  description, is an entity with its IRI as id;
* names: ``skos:prefLabel``, then ``rdfs:label``, then ``skos:altLabel`` (the first is
  the name); an entity without one is named by its IRI's local name (after the last
  ``#``, ``/`` or ``:``). Literals in another language than ``language`` are counted
  as ``other-language`` and not used (literals without a language tag are);
* description: ``schema:description``, else ``skos:definition``, else ``rdfs:comment``
  (the first met of the best kind);
* an IRI-valued triple ``s p o`` is a triple named by ``p``'s label when the data
  labels ``p``, else by its local name. Other literal-valued triples are counted as
  ``literal-ignored``, triples with a blank node as ``blank-node``.

Memory: N-Triples files are streamed line by line (a line that does not parse is
``malformed``, with its number); the id map, names and descriptions are then held in
Python dicts until the end of the read, a few hundred bytes per entity. Turtle and the
other formats have no line-oriented form, so rdflib parses each file into an in-memory
graph first, about 1-2 KB per triple: use N-Triples for graphs of millions of triples
(``rdfpipe -o nt`` converts). Issues found in those formats carry line 0.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from quillian.components.embedding.base import Embedder
from quillian.components.kg.lines import BadLines, decode_block, iter_blocks
from quillian.components.kg.report import ImportReport, Progress, no_progress
from quillian.components.kg.staging import EntityCollector, StagedGraph
from quillian.components.kg.writer import ImportOptions, import_graph
from quillian.errors import InputError, MissingExtraError

__all__ = ["DESCRIPTION_PREDICATES", "LABEL_PREDICATES", "import_rdf", "local_name", "stage_rdf"]

_RDFS = "http://www.w3.org/2000/01/rdf-schema#"
_SKOS = "http://www.w3.org/2004/02/skos/core#"
#: Predicate IRI -> rank (lower is preferred) for names and for descriptions.
LABEL_PREDICATES = {f"{_SKOS}prefLabel": 0, f"{_RDFS}label": 1, f"{_SKOS}altLabel": 2}
DESCRIPTION_PREDICATES = {
    "http://schema.org/description": 0,
    "https://schema.org/description": 0,
    f"{_SKOS}definition": 1,
    f"{_RDFS}comment": 2,
}


def local_name(iri: str) -> str:
    """The part of an IRI after its last ``#``, ``/`` or ``:`` (the IRI if that is empty)."""
    cut = max(iri.rfind("#"), iri.rfind("/"), iri.rfind(":"))
    return iri[cut + 1 :] or iri


def _rdflib() -> Any:
    try:
        import rdflib
    except ImportError as exc:
        raise MissingExtraError("rdflib", "rdf") from exc
    return rdflib


class _Collector:
    """Turns RDF terms into entities, names, descriptions and triples."""

    def __init__(self, workdir: Path, report: ImportReport, language: str | None) -> None:
        rdflib = _rdflib()
        self.iri, self.literal, self.bnode = rdflib.URIRef, rdflib.Literal, rdflib.BNode
        self.report = report
        self.issues = report.issues
        self.language = language.lower() if language else None
        self.graph = EntityCollector(workdir, report.issues)
        self.labels: dict[str, list[tuple[int, str]]] = {}
        self.descriptions: dict[str, tuple[int, str]] = {}
        self.n_triples = 0

    def add(self, s: Any, p: Any, o: Any, path: str, line: int) -> None:
        self.n_triples += 1
        if isinstance(s, self.bnode) or isinstance(o, self.bnode):
            self.issues.add("blank-node", path, line, "triple with a blank node ignored")
            return
        subject, predicate = str(s), str(p)
        if isinstance(o, self.literal):
            self._literal(subject, predicate, o, path, line)
            return
        head = self.graph.entity(subject, path, line)
        tail = self.graph.entity(str(o), path, line)
        relation = self.graph.relation(predicate, local_name(predicate))
        self.graph.triple(head, relation, tail)

    def _literal(self, subject: str, predicate: str, o: Any, path: str, line: int) -> None:
        label_rank = LABEL_PREDICATES.get(predicate)
        text_rank = DESCRIPTION_PREDICATES.get(predicate)
        if label_rank is None and text_rank is None:
            self.issues.add("literal-ignored", path, line, f"{local_name(predicate)} literal")
            return
        lang = (o.language or "").lower()
        if self.language and lang and lang.split("-")[0] != self.language:
            self.issues.add("other-language", path, line, f"@{lang} {local_name(predicate)}")
            return
        text = " ".join(str(o).split())
        if not text:
            return
        if label_rank is not None:
            self.labels.setdefault(subject, []).append((label_rank, text))
        elif text_rank is not None:
            best = self.descriptions.get(subject)
            if best is None or text_rank < best[0]:
                self.descriptions[subject] = (text_rank, text)
                self.graph.entity(subject, path, line)

    def finish(self) -> StagedGraph:
        graph = self.graph
        for iri in list(graph.ids):
            ranked = sorted(self.labels.get(iri, []), key=lambda item: item[0])
            names = [text for _, text in ranked] or [local_name(iri)]
            graph.define(iri, names, self.descriptions.get(iri, (0, ""))[1], "", 0)
        for predicate, number in graph.relation_index.items():
            ranked = sorted(self.labels.get(predicate, []), key=lambda item: item[0])
            if ranked:
                labels = list(dict.fromkeys(text for _, text in ranked))
                graph.relation_names[number] = labels[0]
                graph.relation_aliases[number] = tuple(labels[1:])
        self.report.read.update(
            entities=len(graph.ids), relations=len(graph.relation_names), triples=self.n_triples
        )
        return graph.finish()


def rdf_format(path: Path, given: str | None = None) -> str:
    """``nt`` (streamed) or an rdflib format name, from ``given`` or the file suffix."""
    if given:
        return "nt" if given in ("nt", "ntriples", "n-triples") else given
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    if name.endswith(".nt"):
        return "nt"
    guessed = _rdflib().util.guess_format(name)
    if guessed is None:
        raise InputError("cannot tell the RDF format from the suffix; name it", path=str(path))
    return "nt" if guessed == "nt" else str(guessed)


def stage_rdf(
    paths: Sequence[Path],
    workdir: Path,
    report: ImportReport,
    progress: Progress,
    *,
    rdf_format_: str | None = None,
    language: str | None = "en",
    max_bad_lines: int | None = 10_000,
) -> StagedGraph:
    """Read RDF files into a staged graph (see the module docstring for the mapping)."""
    collector = _Collector(workdir, report, language)
    for path in paths:
        fmt = rdf_format(path, rdf_format_)
        triples = (
            _ntriples(path, report, progress, max_bad_lines)
            if fmt == "nt"
            else _in_memory(path, fmt, report, progress)
        )
        for s, p, o, line in triples:
            collector.add(s, p, o, str(path), line)
    return collector.finish()


def _ntriples(
    path: Path, report: ImportReport, progress: Progress, limit: int | None
) -> Iterator[tuple[Any, Any, Any, int]]:
    """Stream an N-Triples file: one rdflib line parse per line, errors reported."""
    rdflib = _rdflib()
    from rdflib.plugins.parsers.ntriples import W3CNTriplesParser

    name = str(path)
    issues = report.issues
    bad = BadLines(issues, limit)
    sink = _Sink()
    parser = W3CNTriplesParser(sink=sink)  # type: ignore[arg-type]
    bnodes: dict[str, Any] = {}
    n_lines = 0
    for first, block in iter_blocks(path, f"rdf {path.name}", progress):
        for i, line in enumerate(decode_block(block, first, name, issues)):
            n_lines += 1
            if line is None:
                continue
            parser.line = line
            try:
                parser.parseline(bnode_context=bnodes)
            except rdflib.plugins.parsers.ntriples.ParseError as exc:
                issues.add("malformed", name, first + i, f"{exc}"[:120])
                continue
            if sink.triple_:
                s, p, o = sink.triple_
                sink.triple_ = None
                yield s, p, o, first + i
        bad.check(name)
    report.lines[name] = n_lines


class _Sink:
    """Receives the one triple a parsed line holds."""

    def __init__(self) -> None:
        self.triple_: tuple[Any, Any, Any] | None = None

    def triple(self, s: Any, p: Any, o: Any) -> None:
        self.triple_ = (s, p, o)


def _in_memory(
    path: Path, fmt: str, report: ImportReport, progress: Progress
) -> Iterator[tuple[Any, Any, Any, int]]:
    """Parse a whole file with rdflib (Turtle, RDF/XML, ...), then yield its triples."""
    rdflib = _rdflib()
    size = path.stat().st_size
    progress(f"rdf {path.name}", 0, size)
    graph = rdflib.Graph()
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as stream:
                graph.parse(file=stream, format=fmt)
        else:
            graph.parse(str(path), format=fmt)
    except Exception as exc:  # rdflib raises many types (BadSyntax, SAX errors, ...)
        raise InputError(f"cannot parse as {fmt}: {exc}", path=str(path)) from exc
    progress(f"rdf {path.name}", size, size)
    report.notes.append(f"{path}: {len(graph):,} triples parsed in memory ({fmt})")
    for s, p, o in graph:
        yield s, p, o, 0


def import_rdf(
    paths: Sequence[str | Path],
    out: str | Path,
    embedder: Embedder,
    *,
    rdf_format_: str | None = None,
    language: str | None = "en",
    options: ImportOptions | None = None,
    progress: Progress = no_progress,
) -> ImportReport:
    """Import RDF files into ``out``; ``rdf_format_`` overrides the suffix's format."""
    files = [Path(p) for p in paths]
    if not files:
        raise InputError("no RDF file given")
    chosen = options or ImportOptions()

    def stage(workdir: Path, report: ImportReport, progress: Progress) -> StagedGraph:
        return stage_rdf(
            files,
            workdir,
            report,
            progress,
            rdf_format_=rdf_format_,
            language=language,
            max_bad_lines=chosen.max_bad_lines,
        )

    return import_graph(
        stage,
        out,
        embedder,
        source="rdf",
        inputs=[str(p) for p in files],
        options=chosen,
        progress=progress,
    )
