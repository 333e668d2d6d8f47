"""JSON round-trip of extractions (and their issues), so extraction results are stored
once and reused.

An extraction is written in a compact form (:func:`extraction_to_json`): fields by
position, and each distinct text (an entity's or a relation's description, a
relation's source sentence) once in a list of texts the rows refer to by index. A spaCy
relation's description is its sentence, and a sentence naming many entities is the
provenance of every relation among them, so the ``dataclasses.asdict`` form written
before repeated each sentence many times: 480 KB of JSON a chunk of the 20 MB text of
docs/scale.md, 19x the compact form's, and 3.4x its size compressed; at 100k short
passages, 1.5x compressed (``research/extraction_forms.py``). Decoded, the rows that
share a text share one string. Records in the earlier form are read as before.
"""

from __future__ import annotations

import bz2
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
    "extraction_from_data",
    "extraction_from_json",
    "extraction_to_json",
    "issues_from_json",
    "issues_to_json",
    "stored_extraction",
    "triple_from_dict",
    "uncompressed",
]


#: The compact form's tag, its list's first item (a record in the earlier form is an
#: object).
FORM = 2


def extraction_to_json(extraction: Extraction) -> bytes:
    """``extraction`` in the compact form (see the module's doc): the list ``[FORM,
    chunk id, document id, texts, entities, triples]``, and its parse's ``[rows,
    version, relative]`` (``[rows, version, relative, 1]`` for an elided one) last
    where it has one. An entity is ``[name, type, aliases,
    description, is topic, start, end]``, a triple ``[subject, predicate, object,
    description, provenance]``, the provenance ``[start, end, sentence]`` (its
    document and chunk the extraction's own) or ``[start, end, sentence, document,
    chunk]`` or null; descriptions and sentences are indexes into the texts."""
    texts: dict[str, int] = {}
    own = (extraction.doc_id, extraction.chunk_id)

    def text(value: str) -> int:
        return texts.setdefault(value, len(texts))

    def where(p: Provenance | None) -> list[Any] | None:
        if p is None:
            return None
        at = [p.start, p.end, text(p.sentence)]
        return at if (p.doc_id, p.chunk_id) == own else [*at, p.doc_id, p.chunk_id]

    entities = [
        [e.name, e.type, list(e.aliases), text(e.description), int(e.is_topic), e.start, e.end]
        for e in extraction.entities
    ]
    triples = [
        [t.subject, t.predicate, t.object, text(t.description), where(t.provenance)]
        for t in extraction.triples
    ]
    data = [FORM, extraction.chunk_id, extraction.doc_id, list(texts), entities, triples]
    if (parse := extraction.parse) is not None:
        form = [parse.rows, parse.version, int(parse.relative)]
        data.append([*form, 1] if parse.elided else form)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def compressed(raw: bytes) -> bytes:
    """A stored extraction's JSON compressed (zlib's default level, 6), as every store
    of extractions keeps them: a relation repeats its sentence, so such JSON shrinks 5x
    (short passages) to 20x (long ones); spaCy's results for the 20 MB text of
    docs/scale.md took 166 MB uncompressed, 59 MB at zlib's fastest level. The default
    level keeps spaCy's results with their parse in about 0.7x the bytes of the fastest
    (docs/scale.md, "Extractions compressed at zlib's default level"); any level reads
    the same, so results stored at another stay as they are."""
    return zlib.compress(raw, 6)


#: The shortest JSON of an extraction :func:`stored_extraction` tries bz2 on: a short
#: passage's extraction (most under 1 KB) takes more bytes in bz2 than in zlib.
BZ2_FROM = 4096


def stored_extraction(raw: bytes) -> bytes:
    """An extraction's JSON as the store of extractions keeps it: :func:`compressed`,
    or, from :data:`BZ2_FROM` bytes, bz2 (at its default level, 9) where that is
    shorter. A long passage's record is mostly its dependency parse, one line a token,
    which bz2's sort of the whole record packs into 0.73x zlib's bytes on the 20 MB
    text of docs/scale.md (18.0 -> 13.0 MB), its 2,674 records written in 17.8 s (zlib's
    attempt included) and read in 7.3 s, about 7 and 3 ms a record; on short passages
    it gains nothing (``research/extraction_forms.py``)."""
    packed = compressed(raw)
    if len(raw) >= BZ2_FROM and len(other := bz2.compress(raw)) < len(packed):
        return other
    return packed


def uncompressed(stored: bytes) -> bytes:
    """The JSON of a stored extraction, compressed (:func:`stored_extraction`: zlib or
    bz2, whose streams start with ``x`` and ``BZh``) or as written before extractions
    were compressed (a JSON object, or a list), so results computed then are read, not
    computed again."""
    if stored[:1] in (b"{", b"["):
        return stored
    return bz2.decompress(stored) if stored[:3] == b"BZh" else zlib.decompress(stored)


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
    """The extraction :func:`extraction_to_json` wrote, in the compact form or the
    earlier one (:func:`extraction_from_data`)."""
    return extraction_from_data(json.loads(raw))


def extraction_from_data(data: Any) -> Extraction:
    """The extraction of a record's decoded JSON, in the compact form or the earlier
    one. A record written before extractions carried a parse reads with ``parse`` None,
    as does one whose parse has another
    :data:`~quillian.components.extraction.predicates.PARSE_VERSION`: its reader parses
    the chunk again rather than misread it."""
    if isinstance(data, list):
        return _compact(data)
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


def _compact(data: list[Any]) -> Extraction:
    """The extraction of a record in the compact form."""
    form, chunk_id, doc_id, texts, entities, triples, *parsed = data
    if form != FORM:
        raise ValueError(f"an extraction in form {form!r}, not {FORM}")
    parse = None
    if parsed:
        ((rows, version, relative, *elided),) = parsed
        parse = _current(DependencyParse(rows, version, bool(relative), bool(elided)))

    def where(at: list[Any] | None) -> Provenance | None:
        if at is None:
            return None
        start, end, sentence, *source = at
        from_doc, from_chunk = source or (doc_id, chunk_id)
        return Provenance(from_doc, from_chunk, start, end, texts[sentence])

    return Extraction(
        chunk_id=chunk_id,
        doc_id=doc_id,
        entities=tuple(
            ExtractedEntity(
                name, type_, tuple(aliases), texts[description], bool(topic), start, end
            )
            for name, type_, aliases, description, topic, start, end in entities
        ),
        triples=tuple(
            Triple(s, p, o, texts[description], where(at)) for s, p, o, description, at in triples
        ),
        parse=parse,
    )


def _parse(data: dict[str, Any]) -> DependencyParse | None:
    """The parse of a record in the earlier form (its spans and heads as they are, unless
    it says otherwise)."""
    rows, version = data.get("rows", ""), data.get("version", 0)
    return _current(DependencyParse(rows, version, relative=data.get("relative", False)))


def _current(parse: DependencyParse) -> DependencyParse | None:
    """``parse`` where it is of this :data:`PARSE_VERSION`, else None (parsed again)."""
    return parse if parse.version == PARSE_VERSION else None


def issues_to_json(issues: Sequence[ExtractionIssue]) -> bytes:
    """One chunk's extraction issues, as stored beside its extraction."""
    return json.dumps([asdict(i) for i in issues], ensure_ascii=False).encode()


def issues_from_json(raw: bytes) -> list[ExtractionIssue]:
    return [ExtractionIssue(**item) for item in json.loads(raw)]
