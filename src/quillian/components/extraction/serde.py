"""JSON round-trip of extractions (and their issues), so extraction results are stored
once and reused."""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from quillian.components.extraction.base import ExtractedEntity, Extraction, ExtractionIssue
from quillian.components.extraction.predicates import PARSE_VERSION, DependencyParse
from quillian.types import Provenance, Triple

__all__ = [
    "compressed",
    "extraction_from_json",
    "extraction_to_json",
    "issues_from_json",
    "issues_to_json",
    "triple_from_dict",
    "uncompressed",
]


def extraction_to_json(extraction: Extraction) -> bytes:
    return json.dumps(asdict(extraction), ensure_ascii=False, separators=(",", ":")).encode()


def compressed(raw: bytes) -> bytes:
    """A stored extraction's JSON compressed (zlib's fastest level), as every store of
    extractions keeps them: a relation repeats its sentence, so such JSON shrinks 5x
    (short passages) to 20x (long ones); spaCy's results for the 20 MB text of
    docs/scale.md took 166 MB uncompressed, 59 MB compressed."""
    return zlib.compress(raw, 1)


def uncompressed(stored: bytes) -> bytes:
    """The JSON of a stored extraction, compressed (:func:`compressed`) or as written
    before extractions were compressed (a JSON object: a zlib stream never starts with
    ``{``), so results computed then are read, not computed again."""
    return stored if stored[:1] == b"{" else zlib.decompress(stored)


def triple_from_dict(data: dict[str, Any]) -> Triple:
    """A triple from its ``asdict`` form, provenance included."""
    prov = data.get("provenance")
    return Triple(
        subject=data["subject"],
        predicate=data["predicate"],
        object=data["object"],
        description=data.get("description", ""),
        provenance=Provenance(**prov) if prov else None,
    )


def extraction_from_json(raw: bytes) -> Extraction:
    """The extraction :func:`extraction_to_json` wrote. A record written before
    extractions carried a parse reads with ``parse`` None, as does one whose parse has
    another :data:`~quillian.components.extraction.predicates.PARSE_VERSION`: its reader
    parses the chunk again rather than misread it."""
    data = json.loads(raw)
    parse = data.get("parse")
    return Extraction(
        chunk_id=data["chunk_id"],
        doc_id=data["doc_id"],
        entities=tuple(
            ExtractedEntity(**{**e, "aliases": tuple(e.get("aliases", ()))})
            for e in data.get("entities", ())
        ),
        triples=tuple(triple_from_dict(t) for t in data.get("triples", ())),
        parse=_parse(parse) if parse else None,
    )


def _parse(data: dict[str, Any]) -> DependencyParse | None:
    parse = DependencyParse(rows=data.get("rows", ""), version=data.get("version", 0))
    return parse if parse.version == PARSE_VERSION else None


def issues_to_json(issues: Sequence[ExtractionIssue]) -> bytes:
    """One chunk's extraction issues, as stored beside its extraction."""
    return json.dumps([asdict(i) for i in issues], ensure_ascii=False).encode()


def issues_from_json(raw: bytes) -> list[ExtractionIssue]:
    return [ExtractionIssue(**item) for item in json.loads(raw)]
