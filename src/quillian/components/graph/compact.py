"""An extraction as the entity-resolution state (:mod:`.incremental`) keeps it: without
its dependency parse, in the stored extractions' compact form
(:func:`~quillian.components.extraction.serde.extraction_to_json`: fields by position,
each distinct text once), compressed. A state written before kept a JSON list of fields
by position with every text in place (the 20 MB text's extractions took 1.2 GB of its
state so, uncompressed); it is read as before."""

from __future__ import annotations

import json
import zlib
from dataclasses import replace

from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.extraction.serde import (
    compressed,
    extraction_from_data,
    extraction_to_json,
)
from quillian.types import Provenance, Triple

__all__ = ["decode_extraction", "encode_extraction", "extraction_texts"]


def encode_extraction(extraction: Extraction) -> bytes:
    """``extraction`` less its parse, compressed, in the compact form."""
    return compressed(extraction_to_json(replace(extraction, parse=None)))


def decode_extraction(raw: bytes) -> Extraction:
    """The extraction :func:`encode_extraction` wrote (its parse None), or the one a
    state written before kept."""
    data = json.loads(zlib.decompress(raw))
    if not (isinstance(data, list) and len(data) == 4 and isinstance(data[0], str)):
        return extraction_from_data(data)
    chunk_id, doc_id, entities, triples = data  # a state written before
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


def extraction_texts(extraction: Extraction) -> list[str]:
    """The descriptions and sentences of ``extraction``, each once, in the order its
    compact form lists them: the texts the state's rows refer to by id
    (:mod:`.chunk_rows`)."""
    found = []
    for e in extraction.entities:
        found.append(e.description)
    for t in extraction.triples:
        found.append(t.description)
        if t.provenance is not None:
            found.append(t.provenance.sentence)
    return list(dict.fromkeys(found))
