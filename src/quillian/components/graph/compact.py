"""A compact form of an extraction, without its dependency parse, for the
entity-resolution state (:mod:`.incremental`): JSON with fields by position, so writing
and reading a corpus's extractions costs a fraction of ``dataclasses.asdict``'s form,
compressed (:func:`~quillian.components.extraction.serde.compressed`), since every
relation repeats its sentence: the 20 MB text's extractions took 1.2 GB of its state
uncompressed."""

from __future__ import annotations

import json
import zlib
from typing import Any

from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.extraction.serde import compressed
from quillian.types import Provenance, Triple

__all__ = ["decode_extraction", "encode_extraction"]


def _entity(e: ExtractedEntity) -> list[Any]:
    return [e.name, e.type, list(e.aliases), e.description, e.is_topic, e.start, e.end]


def _triple(t: Triple) -> list[Any]:
    p = t.provenance
    where = None if p is None else [p.doc_id, p.chunk_id, p.start, p.end, p.sentence]
    return [t.subject, t.predicate, t.object, t.description, where]


def encode_extraction(extraction: Extraction) -> bytes:
    """``extraction`` less its parse, as compressed compact JSON."""
    data = [
        extraction.chunk_id,
        extraction.doc_id,
        [_entity(e) for e in extraction.entities],
        [_triple(t) for t in extraction.triples],
    ]
    return compressed(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())


def decode_extraction(raw: bytes) -> Extraction:
    """The extraction :func:`encode_extraction` wrote (its parse None)."""
    chunk_id, doc_id, entities, triples = json.loads(zlib.decompress(raw))
    return Extraction(
        chunk_id,
        doc_id,
        tuple(
            ExtractedEntity(name, type_, tuple(aliases), description, topic, start, end)
            for name, type_, aliases, description, topic, start, end in entities
        ),
        tuple(
            Triple(s, p, o, d, None if where is None else Provenance(*where))
            for s, p, o, d, where in triples
        ),
    )
