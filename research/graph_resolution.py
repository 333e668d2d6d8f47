"""Benchmark incremental entity resolution against :class:`GraphBuilder` over the full
chunk list, in one run.

Run ``python research/graph_resolution.py CORPUS.jsonl --work DIR
[--sizes 2000,20000] [--repeats 5]``, CORPUS a JSON Lines file of ``{"title", "text"}``
passages (``research/scale_corpus.py``'s ``scale-20k.jsonl``). The first
``max(sizes)`` passages are one chunk each (as the build chunks these short passages),
extracted by the spaCy extractor's local step once (cached in ``DIR``); for each size
the first ``size`` passages are linked over their titles, their title aliases settled
and ambiguous names dropped, as a build does before its graph stage, and kept in index
order. Then, per size:

1. ``clean``: today's graph stage's resolution, :class:`GraphBuilder` over the whole
   list (``add_all``), and its ``build`` (the snapshot, in memory);
2. ``create``: the resolution state over the list less one passage (the size's last,
   whose place in index order falls anywhere);
3. ``--repeats`` times: ``open`` the state, ``add 1`` (that passage's extraction) and
   ``delete 1`` (the same chunk), each :meth:`ResolutionState.apply` one transaction,
   with the chunks it replayed;
4. ``graph``: :meth:`ResolutionState.graph` (still linear: the next step's work),
   checked equal to the clean build's entities, descriptions and relations.

It prints one JSON object with the machine's load before and after and writes it to
``DIR/graph_resolution.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from quillian.components.extraction.base import Extraction
from quillian.components.extraction.filters import drop_ambiguous_names, settle_title_aliases
from quillian.components.extraction.serde import extraction_from_json, extraction_to_json
from quillian.components.extraction.spacy_ner import SpacyExtractor
from quillian.components.graph.builder import GraphBuilder
from quillian.components.graph.incremental import ChunkExtraction, ResolutionState
from quillian.index.stages import AMBIGUOUS_MAX_DOCS
from quillian.types import Chunk, Document, normalize_name

__all__ = ["main"]

T = TypeVar("T")


def _timed(call: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def _chunks(path: Path, limit: int) -> list[Chunk]:
    chunks: list[Chunk] = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if len(chunks) == limit:
                break
            item = json.loads(line)
            doc = Document(item["text"], item.get("title") or "")
            chunks.append(Chunk(doc.id, 0, doc.text, 0, len(doc.text), doc.title))
    return chunks


def _local(chunks: Sequence[Chunk], extractor: SpacyExtractor, work: Path) -> list[Extraction]:
    """The spaCy model's per-chunk results, read from ``work`` when an earlier run
    stored them."""
    cache = work / f"local-{len(chunks)}.jsonl"
    if cache.is_file():
        with cache.open("rb") as lines:
            return [extraction_from_json(line) for line in lines]
    found = []
    for start in range(0, len(chunks), 1000):
        found += extractor.extract_local(chunks[start : start + 1000])
        sys.stderr.write(f"extracted {len(found)}/{len(chunks)}\n")
    with cache.open("wb") as out:
        out.writelines(extraction_to_json(e) + b"\n" for e in found)
    return found


def _linked(
    chunks: Sequence[Chunk], local: Sequence[Extraction], extractor: SpacyExtractor
) -> list[ChunkExtraction]:
    """What a build's graph stage gets (linked, settled, filtered), in index order."""
    titles = [c.title for c in chunks if c.title]
    linked = settle_title_aliases(extractor.link(chunks, local, titles), titles)
    kept = drop_ambiguous_names(linked, max_docs=AMBIGUOUS_MAX_DOCS)
    items = [ChunkExtraction(c.doc_id, c.index, e) for c, e in zip(chunks, kept, strict=True)]
    return sorted(items, key=lambda c: (c.doc_id, c.index))


def _median(values: Sequence[float]) -> float:
    return round(statistics.median(values), 4)


def _resolved(items: Sequence[ChunkExtraction]) -> GraphBuilder:
    """Today's resolution: :class:`GraphBuilder` over the whole list."""
    builder = GraphBuilder()
    builder.add_all(c.extraction for c in items)
    return builder


def _held(items: Sequence[ChunkExtraction], last_id: str) -> dict[str, ChunkExtraction]:
    """The chunks to add and delete: ``last``, the size's last passage with three
    entities or more (a typical passage, at a place in index order that falls
    anywhere), and ``hub``, the first chunk naming the name most chunks share (the
    largest replay one chunk can cause)."""
    by_id = {c.chunk_id: c for c in items}
    last = by_id[last_id]
    counts: Counter[str] = Counter()
    for item in items:
        counts.update({normalize_name(e.name) for e in item.extraction.entities} - {""})
    top = counts.most_common(1)[0][0]
    hub = next(c for c in items if top in {normalize_name(e.name) for e in c.extraction.entities})
    return {"last": last, "hub": hub}


def _case(
    items: list[ChunkExtraction], held: ChunkExtraction, path: Path, repeats: int
) -> dict[str, Any]:
    """Create the state without ``held``, then add and delete it ``repeats`` times,
    each beside a clean resolution and build of the full list."""
    row: dict[str, Any] = {"chunk": held.chunk_id}
    base = [c for c in items if c.chunk_id != held.chunk_id]
    by_id = {c.chunk_id: c.extraction for c in items}  # the state reads them (it keeps none)

    def source(wanted: Sequence[tuple[str, str, int]]) -> list[Extraction]:
        return [by_id[chunk_id] for chunk_id, _, _ in wanted]

    row["create_s"], state = _timed(lambda: ResolutionState.create(path, base, source=source))
    state.close()
    times: dict[str, list[float]] = {k: [] for k in ("clean", "open", "add", "delete")}
    for _ in range(repeats):
        seconds, builder = _timed(partial(_resolved, items))
        times["clean"].append(seconds)
        seconds, opened = _timed(lambda: ResolutionState.open(path, source=source))
        assert opened is not None
        times["open"].append(seconds)
        seconds, row["add_replayed"] = _timed(partial(opened.apply, [], [held]))
        times["add"].append(seconds)
        if "equal" not in row:  # the full list: check against the clean build once
            clean = builder.build([c.chunk_id for c in items])
            row["graph_s"], kg = _timed(opened.graph)
            row["graph_s"] = round(row["graph_s"], 4)
            row["equal"] = (kg.entities, kg.descriptions, kg.relations) == (
                clean.entities,
                clean.descriptions,
                clean.relations,
            )
        seconds, row["delete_replayed"] = _timed(partial(opened.apply, [held.chunk_id], []))
        times["delete"].append(seconds)
        opened.close()
    row.update({f"{k}_s": _median(v) for k, v in times.items()})
    row["create_s"] = round(row["create_s"], 4)
    return row


def _measure(
    items: list[ChunkExtraction], last_id: str, work: Path, repeats: int
) -> dict[str, Any]:
    resolve_s, builder = _timed(partial(_resolved, items))
    build_s, clean = _timed(lambda: builder.build([c.chunk_id for c in items]))
    row: dict[str, Any] = {
        "chunks": len(items),
        "entities": clean.n_entities,
        "relations": len(clean.relations),
        "clean_resolve_s": round(resolve_s, 4),
        "clean_build_s": round(build_s, 4),
    }
    path = work / f"state-{len(items)}.sqlite"
    for name, held in _held(items, last_id).items():
        row[name] = _case(items, held, path, repeats)
        sys.stderr.write(f"{len(items)} {name}: {json.dumps(row[name])}\n")
    row["state_mb"] = round(path.stat().st_size / 1e6, 1)
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--sizes", default="2000,20000")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    report: dict[str, Any] = {"load_before": os.getloadavg(), "cpus": os.cpu_count()}
    chunks = _chunks(args.corpus, sizes[-1])
    extractor = SpacyExtractor()
    local = _local(chunks, extractor, args.work)
    for size in sizes:
        items = _linked(chunks[:size], local[:size], extractor)
        by_id = {c.chunk_id: c for c in items}
        last = next(
            c.id for c in reversed(chunks[:size]) if len(by_id[c.id].extraction.entities) >= 3
        )
        report[str(size)] = _measure(items, last, args.work, args.repeats)
        sys.stderr.write(f"{size}: {json.dumps(report[str(size)])}\n")
    report["load_after"] = os.getloadavg()
    text = json.dumps(report, indent=2)
    (args.work / "graph_resolution.json").write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
