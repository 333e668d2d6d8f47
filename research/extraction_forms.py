"""Stored extractions in the earlier form (``dataclasses.asdict``, a dependency parse's
spans and heads as they are), the compact form (``quillian.components.extraction.
serde``: fields by position, each distinct text once, a parse's spans and heads
relative) and, for records with a parse, the compact form with its words elided (a
word that is its token's text in lower case left unwritten, ``DependencyParse.of``
given the chunk's text), side by side in one run on an index's stored records.

Run ``python research/extraction_forms.py INDEX [--limit N]`` on an embedded index
(its ``store.sqlite``): for each namespace of per-chunk extractions it holds (the
extraction cache ``mentions:NAME`` or ``extraction:NAME``, the linked records
``linked:NAME`` and the resolution state's ``graph_resolution.sqlite``, whose earlier
form was a list of fields by position with every text in place), every record (or the
first N) is decoded, written in each form and compressed as the stores compress it
(``serde.compressed``; ``stored_mb``: ``serde.stored_extraction``, bz2 for a long
record where that is shorter, with the seconds to write and read every record so), and
decoded again from each form's JSON (the linked records are stored compressed with
their chunk's text as zlib's dictionary since stop 82; here every form, theirs too,
is compressed alone, as the forms are compared). Prints one JSON
object: per namespace, the records read, the JSON and compressed bytes of each form,
and the seconds ``json.loads`` and the decoding took for each.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from quillian.components.extraction.base import Extraction
from quillian.components.extraction.predicates import DependencyParse
from quillian.components.extraction.serde import (
    compressed,
    extraction_from_json,
    extraction_to_json,
    stored_extraction,
    uncompressed,
)
from quillian.components.graph.compact import decode_extraction
from quillian.index.linking import inflate_record
from quillian.stores.embedded.sqlite import stored_chunk_texts, stored_values

STATE = "resolution state"


def _linked(raw: bytes, text: str) -> Iterator[bytes]:
    """The settled and (where it differs) filtered extraction of a linked record, whose
    chunk's text is ``text`` (a record compressed against it needs it)."""
    _, packed = raw[9:].split(b"\n", 1)
    for part in inflate_record(packed, text).split(b"\n", 1):
        if part:
            yield part


def _records(index: Path, limit: int | None) -> dict[str, list[Extraction]]:
    found: dict[str, list[Extraction]] = {}
    store = sqlite3.connect(index / "store.sqlite")
    texts = dict(stored_chunk_texts(store))
    for (namespace,) in store.execute("SELECT DISTINCT namespace FROM kv").fetchall():
        kind = namespace.split(":")[0]
        if kind not in ("mentions", "extraction", "linked"):
            continue
        values = sorted(stored_values(store, namespace))[:limit]
        if kind == "linked":
            found[namespace] = [
                extraction_from_json(p) for k, r in values for p in _linked(r, texts.get(k, ""))
            ]
        else:
            found[namespace] = [extraction_from_json(uncompressed(r)) for _, r in values]
    state = index / "graph_resolution.sqlite"
    if state.is_file():  # a state of version 11 on keeps no extractions
        conn = sqlite3.connect(state)
        if "extraction" in {c for _, c, *_ in conn.execute("PRAGMA table_info(chunks)")}:
            rows = conn.execute(
                "SELECT extraction FROM chunks ORDER BY chunk_id LIMIT ?",
                (-1 if limit is None else limit,),
            )
            found[STATE] = [decode_extraction(r) for (r,) in rows]
        conn.close()
    return found


def _positional(e: Extraction) -> bytes:
    """The form the resolution state kept before: fields by position, texts in place."""
    entities = [[x.name, x.type, list(x.aliases), x.description, x.is_topic, x.start, x.end]
                for x in e.entities]  # fmt: skip
    triples = [
        [t.subject, t.predicate, t.object, t.description,
         None if (p := t.provenance) is None
         else [p.doc_id, p.chunk_id, p.start, p.end, p.sentence]]
        for t in e.triples
    ]  # fmt: skip
    data = [e.chunk_id, e.doc_id, entities, triples]
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def _absolute(e: Extraction, texts: dict[str, str]) -> Extraction:
    """``e`` with its parse in the earlier form: each token's span and head as they are."""
    if e.parse is None or not e.parse.relative:
        return e
    rows = "\n".join("\t".join(map(str, t)) for t in e.parse.tokens(texts[e.chunk_id]))
    return replace(e, parse=DependencyParse(rows, e.parse.version, relative=False))


def _relative(e: Extraction, texts: dict[str, str]) -> Extraction:
    """``e`` with its parse in the compact form (spans and heads relative), its words
    written out."""
    if e.parse is None or (e.parse.relative and not e.parse.elided):
        return e
    tokens = e.parse.tokens(texts[e.chunk_id])
    return replace(e, parse=replace(DependencyParse.of(tokens), version=e.parse.version))


def _elided(e: Extraction, texts: dict[str, str]) -> Extraction:
    """``e`` with its parse in the compact form, its words elided."""
    if e.parse is None or e.parse.elided:
        return e
    tokens = e.parse.tokens()
    elided = DependencyParse.of(tokens, texts[e.chunk_id])
    return replace(e, parse=replace(elided, version=e.parse.version))


def _form(encoded: list[bytes], state: bool) -> dict[str, Any]:
    start = time.perf_counter()
    for e in encoded:
        json.loads(e)
    loads = time.perf_counter() - start
    packed = [compressed(e) for e in encoded] if state else []
    start = time.perf_counter()
    for e in packed or encoded:
        (decode_extraction(e) if state else extraction_from_json(e))
    decode = time.perf_counter() - start  # the state's: decompressing too
    start = time.perf_counter()
    stored = [stored_extraction(e) for e in encoded]
    store = time.perf_counter() - start
    start = time.perf_counter()
    for e in stored:
        uncompressed(e)
    return {
        "json_mb": round(sum(map(len, encoded)) / 1e6, 2),
        "compressed_mb": round(sum(len(compressed(e)) for e in encoded) / 1e6, 2),
        "stored_mb": round(sum(map(len, stored)) / 1e6, 2),  # zlib, or bz2 where shorter
        "bz2_records": sum(e[:3] == b"BZh" for e in stored),
        "json_loads_s": round(loads, 3),
        "decode_s": round(decode, 3),
        "stored_write_s": round(store, 3),
        "stored_read_s": round(time.perf_counter() - start, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path)
    parser.add_argument("--limit", type=int, help="records read per namespace")
    args = parser.parse_args()
    report: dict[str, Any] = {}
    uri = f"{(args.index / 'store.sqlite').absolute().as_uri()}?mode=ro"  # not upgraded
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        texts = dict(stored_chunk_texts(conn))
    for namespace, extractions in _records(args.index, args.limit).items():
        state = namespace == STATE
        earlier = [
            _positional(e)
            if state
            else json.dumps(
                asdict(_absolute(e, texts)), ensure_ascii=False, separators=(",", ":")
            ).encode()
            for e in extractions
        ]
        compact = [extraction_to_json(_relative(e, texts)) for e in extractions]
        report[namespace] = {
            "records": len(extractions),
            "earlier": _form(earlier, state),
            "compact": _form(compact, state),
        }
        if any(e.parse is not None and e.parse.rows for e in extractions):
            elided = [extraction_to_json(_elided(e, texts)) for e in extractions]
            report[namespace]["compact, words elided"] = _form(elided, state)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
