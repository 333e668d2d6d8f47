"""The knowledge graph a method reads, from a ``--kg`` spec:

* ``index``: the index's own document graph; ``index+inverse``: the same, relations
  also followed from object to subject;
* ``DIR``: a graph written by ``quillian kg import``;
* ``DIR+index`` (or ``DIR+index+inverse``): both, joined through the alignment
  ``quillian kg link DIR --documents INDEX`` saved (one graph across sources); SA
  retrieval then also crosses from the documents' entities into DIR and back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quillian.components.kg.base import ExternalGraph
from quillian.components.kg.document_graph import DocumentGraph
from quillian.components.kg.link import Alignment
from quillian.components.kg.linked import LinkBridges, LinkedGraph
from quillian.components.kg.store import ImportedGraph
from quillian.components.retrieval.context import RetrievalContext
from quillian.errors import ConfigError

__all__ = ["GraphSpec", "make_bridges", "make_graph"]


@dataclass(frozen=True)
class GraphSpec:
    """A parsed ``--kg`` value."""

    directory: Path | None
    """An imported graph's directory, or None for the index's own graph."""
    documents: bool
    """Whether the index's document graph takes part."""
    inverse: bool
    """Document relations are also followed from object to subject."""

    @classmethod
    def parse(cls, spec: str) -> GraphSpec:
        rest, inverse = (
            (spec[: -len("+inverse")], True) if spec.endswith("+inverse") else (spec, False)
        )
        if rest == "index":
            return cls(None, True, inverse)
        if rest.endswith("+index"):
            return cls(Path(rest[: -len("+index")]), True, inverse)
        if inverse:
            raise ConfigError(f"--kg {spec}: +inverse applies to the index's graph only")
        if not rest.strip():
            raise ConfigError("--kg is empty; give index, a graph directory, or DIR+index")
        return cls(Path(rest), False, False)


def make_graph(
    spec: str, context: RetrievalContext | None = None, index_dir: Path | None = None
) -> ExternalGraph:
    """The knowledge graph ``spec`` names (see the module docstring)."""
    parsed = GraphSpec.parse(spec)
    if parsed.documents and context is None:
        raise ConfigError(f"--kg {spec} needs an index")
    if parsed.directory is None:
        assert context is not None
        return DocumentGraph(context, inverse=parsed.inverse)
    external = ImportedGraph.open(parsed.directory)
    if not parsed.documents:
        return external
    assert context is not None
    documents = DocumentGraph(context, inverse=parsed.inverse)
    return LinkedGraph(external, documents, _alignment(parsed.directory, spec, index_dir))


def make_bridges(spec: str | None, index_dir: Path | None) -> LinkBridges | None:
    """Bridges through an imported graph for SA retrieval when ``spec`` joins one to
    the index (``DIR+index``), else None."""
    if spec is None:
        return None
    parsed = GraphSpec.parse(spec)
    if parsed.directory is None or not parsed.documents:
        return None
    alignment = _alignment(parsed.directory, spec, index_dir)
    return LinkBridges(ImportedGraph.open(parsed.directory), alignment)


def _alignment(directory: Path, spec: str, index_dir: Path | None) -> Alignment:
    if index_dir is None:
        raise ConfigError(f"--kg {spec} needs the index directory to find its alignment")
    return Alignment.load(directory, index_dir)
