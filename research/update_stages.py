"""Where the time of one update goes: ``index_documents`` (add) or
``delete_documents`` (delete) on an existing index, with the wall seconds of the
functions an update passes through (linking, the graph stage's writers, the embedding
and BM25 stages, the chunk reads and cache sweeps) beside the build report's stages,
and the process's peak resident memory where it rose during one of them.

Run ``python research/update_stages.py INDEX add FILE`` (FILE: documents the readers
take, for example a one-line JSONL) or ``python research/update_stages.py INDEX delete
DOC_ID``, on a copy of the index: the update changes it (``--profile FILE`` also writes
cProfile's stats of the call). Run add, delete, add on one
copy to measure a steady state: the first update after a format change relinks every
chunk and makes the graph's resolution state. It prints one JSON object.

``add FILE --pairs N`` measures what a long-running process (``quillian serve``) pays:
in this one process, N times, add FILE's documents and delete them again, each call
timed (the first pair loads the models; a process that keeps them loaded pays that
once; ``--pause S`` sleeps S seconds before each call, updates apart rather than in a
burst). It prints each call's seconds, stages, processor seconds (``cpu_s``: every
thread's, so work moved into a thread of its own still counts) and megabytes written
(``written_mb``: the bytes the process passed to write calls during it, every thread's,
which do not vary with the machine's load), and the medians of the pairs after the first;
``--functions`` also times the functions above from the second pair on (each call's
``functions_s``, and their medians beside the others'), the first pair left as it
runs. ``--engine``: each call through an
:class:`~quillian.engine.engine.Engine` on the index, as ``quillian serve`` makes it
(the update, then the engine opens the build it completed, so that the next question
sees it), with a retrieval after each call, timed apart from the call (``question_s``:
the new build's first question, which pays what it makes lazily; a served index
answers between updates). INDEX may be a PostgreSQL
location there. docs/scale.md
("The graph stage from the resolution state") gives its figures at 20k passages.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import importlib
import json
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: (module, attribute path) of each function timed; one missing in a tree is skipped.
TIMED = (
    ("quillian.index.build", "_rebuild"),
    ("quillian.index.build", "extract_cached"),
    ("quillian.index.build", "processed_chunks"),
    ("quillian.index.build", "_forget_unused"),
    ("quillian.index.linking", "link_corpus"),
    ("quillian.index.linking", "_Linker.__init__"),
    ("quillian.index.linking", "_Linker.read_state"),
    ("quillian.index.linking", "_Linker.update"),
    ("quillian.components.graph.builder", "GraphBuilder.add_all"),
    ("quillian.components.graph.builder", "GraphBuilder.build"),
    ("quillian.index.stages", "resolve_entities"),
    ("quillian.components.graph.incremental", "ResolutionState.create"),
    ("quillian.components.graph.incremental", "ResolutionState.apply"),
    ("quillian.index.stages", "save_tables"),
    ("quillian.index.stages", "save_state_tables"),
    ("quillian.index.state_tables", "_Writer.__init__"),
    ("quillian.index.state_tables", "_Writer._patch"),
    ("quillian.index.state_tables", "_Graph.__init__"),
    ("quillian.index.state_tables", "write_graph"),
    ("quillian.index.state_tables", "_titled_names"),
    ("quillian.index.state_tables", "copy_with_digest"),
    ("quillian.index.state_tables", "file_digest"),
    ("quillian.index.linking", "clean_titles"),
    ("quillian.index.linking", "_Linker._end_write"),
    ("quillian.index.stages", "load_tables"),
    ("quillian.index.stages", "vector_keys"),
    ("quillian.index.stages", "unique_texts"),
    ("quillian.index.stages", "_embed_into"),
    ("quillian.index.state_tables", "_Writer.run"),
    ("quillian.index.state_tables", "_Columns.patched"),
    ("quillian.index.state_tables", "_Writer._carried"),
    ("quillian.index.state_tables", "_Writer._graph"),
    ("quillian.index.graph_positions", "GraphPositions.read"),
    ("quillian.index.graph_positions", "GraphPositions.carried"),
    ("quillian.index.graph_positions", "_merged"),
    ("quillian.stores.snapshot", "weight_codes"),
    ("quillian.index.chunk_table", "ChunkTable.ids_among"),
    ("quillian.components.retrieval.derived", "grouped"),
    ("quillian.index.graph_positions", "GraphPositions.arrays"),
    ("quillian.stores.snapshot", "GraphSnapshot.carried"),
    ("quillian.index.state_tables", "replace_dir"),
    ("quillian.index.stages", "_carried_texts"),
    ("quillian.index.stages", "check_distinct"),
    ("quillian.index.stages", "keep_text_keys"),
    ("quillian.index.stages", "save_array"),
    ("quillian.index.stages", "text_rows"),
    ("quillian.index.build", "run_stages"),
    ("quillian.index.state_tables", "save_array"),
    ("quillian.components.graph.builder", "write_graph"),
    ("quillian.stores.snapshot", "GraphSnapshot.from_edges"),
    ("quillian.stores.embedded.graph", "CSRGraphStore.write_snapshot"),
    ("quillian.components.retrieval.derived", "chunk_pages"),
    ("quillian.index.stages", "update_bm25"),  # called by the name the stages import
    ("quillian.components.retrieval.bm25_incremental", "_match"),
    ("quillian.components.retrieval.bm25_incremental", "_carried"),
    ("quillian.index.stages", "chunk_keys"),
    ("quillian.index.stages", "text_keys"),
    ("quillian.index.chunk_catalog", "_patched"),
    ("quillian.index.chunk_catalog", "_keep"),
    ("quillian.stores.postgres.vectors", "PgVectorIndex.ids_summary"),
    ("quillian.stores.postgres.vectors", "PgVectorIndex.flush"),
    ("quillian.index.state_tables", "_fold"),
    ("quillian.stores.postgres.files", "push_files"),
    ("quillian.stores.postgres.files", "pull_files"),
)


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _written() -> int:
    """The bytes this process has passed to write calls so far (``wchar`` of Linux's
    ``/proc/self/io``, every thread's; SQLite's, numpy's and Python's writes alike): what
    an update writes does not depend on the machine's speed or load, so it shows which
    writes grow with the index where timings are noisy. -1 where the file is missing."""
    try:
        text = Path("/proc/self/io").read_text()
    except OSError:
        return -1
    return next(
        (int(line.split()[1]) for line in text.splitlines() if line.startswith("wchar:")), -1
    )


def _timed(
    seconds: dict[str, float], peaks: dict[str, float], name: str, function: Callable[..., Any]
) -> Any:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start, before = time.perf_counter(), _peak_gb()
        try:
            return function(*args, **kwargs)
        finally:
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start
            if (after := _peak_gb()) > before:
                peaks[name] = max(peaks.get(name, 0.0), after)

    return wrapper


def _instrument(seconds: dict[str, float], peaks: dict[str, float]) -> None:
    for module_name, path in TIMED:
        owner: Any = importlib.import_module(module_name)
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent, None)
        if owner is not None and hasattr(owner, name):
            setattr(owner, name, _timed(seconds, peaks, path, getattr(owner, name)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", help="an index directory (a copy: it is changed)")
    parser.add_argument("operation", choices=("add", "delete"))
    parser.add_argument("what", help="add: a file of documents; delete: a document id")
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="also profile the call with cProfile (slower) and write its stats to FILE",
    )
    parser.add_argument(
        "--functions",
        action="store_true",
        help="with --pairs: the seconds of the functions timed, their medians after the first pair",
    )
    parser.add_argument(
        "--pairs",
        type=int,
        metavar="N",
        help="add only: N add-then-delete pairs in this one process, each call timed",
    )
    parser.add_argument(
        "--pause",
        type=float,
        default=0.0,
        metavar="S",
        help="with --pairs: sleep S seconds before each call (updates apart, not in a burst)",
    )
    parser.add_argument(
        "--engine",
        action="store_true",
        help="with --pairs: each call through an Engine, which opens the build it completed",
    )
    args = parser.parse_args()
    if args.pairs is not None:
        if args.operation != "add" or args.pairs < 2:
            parser.error("--pairs takes an add and at least 2 pairs")
        pairs = _pairs(
            args.index, Path(args.what), args.pairs, args.functions, args.pause, args.engine
        )
        print(json.dumps(pairs, indent=2))
        return
    seconds: dict[str, float] = {}
    peaks: dict[str, float] = {}
    _instrument(seconds, peaks)
    from quillian.components.ingestion.readers import read_documents
    from quillian.engine import IndexSettings, delete_documents, index_documents

    profile = cProfile.Profile() if args.profile else None
    start = time.perf_counter()
    if profile is not None:
        profile.enable()
    if args.operation == "add":
        docs = list(read_documents(Path(args.what)))
        report = index_documents(args.index, docs, IndexSettings())
    else:
        report = delete_documents(args.index, [args.what])
    if profile is not None:
        profile.disable()
        profile.dump_stats(args.profile)
    out = {
        "call_s": round(time.perf_counter() - start, 3),
        "stages_s": {k: round(v, 3) for k, v in report.seconds.items()},
        "functions_s": {k: round(v, 3) for k, v in seconds.items()},
        "peak_gb": round(_peak_gb(), 3),
        "peak_rose_in_gb": {k: round(v, 3) for k, v in peaks.items()},
    }
    print(json.dumps(out, indent=2))


#: What the served engine is asked between updates (``--engine``).
QUESTION = "Who founded the city?"


def _pairs(
    index: str,
    what: Path,
    n: int,
    functions: bool = False,
    pause: float = 0.0,
    engine: bool = False,
) -> dict[str, Any]:
    """N add-then-delete pairs of ``what``'s documents in this process, each timed
    (``functions``: the functions of :data:`TIMED` too, in the last pair), ``pause``
    seconds slept before each call; ``engine``: through an engine (see ``--engine``)."""
    import statistics

    from quillian.components.ingestion.readers import read_documents
    from quillian.engine import IndexSettings, delete_documents, index_documents
    from quillian.engine.engine import Engine

    docs = list(read_documents(what))
    ids = [d.id for d in docs]
    served = Engine.open(index) if engine else None
    calls: dict[str, Callable[[], Any]] = {
        "add": lambda: index_documents(index, docs, IndexSettings()),
        "delete": lambda: delete_documents(index, ids),
    }
    if served is not None:
        settings = served.index_settings()
        served.retrieve(QUESTION, "sa")
        calls = {
            "add": lambda: served.add_documents(docs, settings),
            "delete": lambda: served.delete_documents(ids),
        }

    runs = []
    seconds: dict[str, float] = {}
    for i in range(n):
        run: dict[str, Any] = {}
        if functions and i == 1:  # from the second pair: the pairs the medians take
            _instrument(seconds, {})
        for op in ("add", "delete"):
            seconds.clear()
            time.sleep(pause)
            start, cpu, written = time.perf_counter(), time.process_time(), _written()
            report = calls[op]()
            run[f"{op}_s"] = round(time.perf_counter() - start, 3)
            run[f"{op}_cpu_s"] = round(time.process_time() - cpu, 3)
            run[f"{op}_written_mb"] = round((_written() - written) / 1e6, 2)
            if served is not None:  # the first question of the new build, timed apart
                asked = time.perf_counter()
                served.retrieve(QUESTION, "sa")
                run[f"{op}_question_s"] = round(time.perf_counter() - asked, 4)
            run[f"{op}_stages_s"] = {k: round(v, 3) for k, v in report.seconds.items()}
            if seconds:
                run[f"{op}_functions_s"] = {
                    k: round(v, 4) for k, v in sorted(seconds.items(), key=lambda kv: -kv[1])
                }
        runs.append(run)
    later = runs[1:]
    medians: dict[str, Any] = {
        f"{op}_{what}": statistics.median(r[f"{op}_{what}"] for r in later)
        for op in ("add", "delete")
        for what in ("s", "cpu_s", "written_mb", "question_s")
        if all(f"{op}_{what}" in r for r in later)
    }
    for op in ("add", "delete") if functions else ():
        timed = [r.get(f"{op}_functions_s", {}) for r in later]
        names = sorted({name for found in timed for name in found})
        each = {name: statistics.median(f.get(name, 0.0) for f in timed) for name in names}
        medians[f"{op}_functions_s"] = dict(sorted(each.items(), key=lambda kv: -kv[1]))
    return {"pairs": runs, "after_the_first": medians, "peak_gb": round(_peak_gb(), 3)}


if __name__ == "__main__":
    main()
