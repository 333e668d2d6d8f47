"""The measured side of the scale benchmarks, run in a child process by file path.

``research/big_file.py`` and ``research/updates.py`` start this file as
``python -P scale_child.py COMMAND ...`` with ``PYTHONPATH`` set to the source tree
being measured, so it imports only the library API every compared tree has
(``quillian.engine``, the document reader): nothing from ``quillian.bench``, nor from
``research/`` (``-P`` keeps this file's folder off ``sys.path``). Each command prints
one JSON object:

* ``probe INDEX FILE N``: open INDEX through the engine and run ``sa`` for N questions
  made from FILE's paragraph titles (:func:`questions_from`);
* ``add INDEX FILE``: add FILE's documents with ``index_documents`` (default settings,
  as the index was built);
* ``delete INDEX CORPUS POSITION``: remove the document at POSITION of CORPUS (the file
  the index was built from) with ``delete_documents``.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psutil

__all__ = ["questions_from"]

GIB = 1024**3


def questions_from(path: Path, n: int) -> list[str]:
    """``What is TITLE?`` for ``n`` paragraph titles (the text before the first ``. ``,
    up to its first comma) spread evenly over the text file ``path``."""
    titles = [p.split(". ", 1)[0].split(", ")[0].strip() for p in _asked(path, n)]
    return [f"What is {t}?" for t in titles]


#: Characters of a question's paragraph that mark a passage holding it.
OPENING = 60


def openings_from(path: Path, n: int) -> list[str]:
    """The opening of each paragraph :func:`questions_from` asks about (its first
    :data:`OPENING` characters): a passage that holds it holds the paragraph the
    question names."""
    return [" ".join(p.split())[:OPENING] for p in _asked(path, n)]


def _asked(path: Path, n: int) -> list[str]:
    paragraphs = [p for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    step = max(1, len(paragraphs) // max(1, n))
    return paragraphs[::step][:n]


def _rss() -> float:
    return float(psutil.Process().memory_info().rss / GIB)


#: The methods whose top passages a probe records (after its timed ``sa`` questions),
#: so two trees' indexes of one text can be compared question by question.
COMPARED = ("sa", "ppr", "dense", "bm25")


def probe(index: Path, questions: list[str], openings: list[str] | None = None) -> dict[str, Any]:
    """Open ``index`` and run ``sa`` for ``questions``: memory and latency; then each of
    :data:`COMPARED` for the same questions, untimed: the ids and texts' hashes of the
    top 8 passages (``top``, by method, one list a question) and, with ``openings`` (one
    a question), whether a passage among them holds the question's paragraph (``found``,
    by method, 1 or 0 a question: the named paragraph ranked in the top 8)."""
    from quillian.engine import Engine

    start = time.perf_counter()
    engine = Engine.open(index, refresh_s=None)
    engine.index  # noqa: B018 - opening is lazy; this reads the index
    open_s = time.perf_counter() - start
    rss_open = _rss()
    times = []
    for q in questions:
        t = time.perf_counter()
        engine.retrieve(q, "sa", 8)
        times.append(time.perf_counter() - t)
    rest = sorted(times[1:]) or times
    rss_questions = _rss()
    top: dict[str, list[list[str]]] = {method: [] for method in COMPARED}
    found: dict[str, list[int]] = {method: [] for method in COMPARED}
    for method in COMPARED:
        for i, q in enumerate(questions):
            passages = engine.retrieve(q, method, 8).passages
            top[method].append(
                [
                    f"{p.chunk_id} {hashlib.blake2b(p.text.encode(), digest_size=8).hexdigest()}"
                    for p in passages
                ]
            )
            if openings is not None:
                held = (openings[i] in " ".join(p.text.split()) for p in passages)
                found[method].append(int(any(held)))
    return {
        "open_s": open_s,
        "rss_after_open_gb": rss_open,
        "first_question_s": times[0],
        "sa_p50_ms": 1000 * statistics.median(rest),
        "sa_p95_ms": 1000 * rest[int(0.95 * (len(rest) - 1))],
        "questions": len(questions),
        "rss_after_questions_gb": rss_questions,
        "top": top,
        **({"found": found} if openings is not None else {}),
    }


def _call(start: float, cpu: float, doc_ids: list[str], report: Any) -> dict[str, Any]:
    """What a timed library call reports: its wall and CPU seconds (this process, all
    threads), the build's seconds per stage (its report's ``seconds``, where the tree
    has one), the documents and the resident memory after it."""
    return {
        "call_s": time.perf_counter() - start,
        "call_cpu_s": time.process_time() - cpu,
        "stages_s": dict(getattr(report, "seconds", None) or {}),
        "doc_ids": doc_ids,
        "rss_gb": _rss(),
    }


def add(index: str, path: Path) -> dict[str, Any]:
    """Add the documents of ``path`` to ``index``: seconds of the library call."""
    from quillian.components.ingestion.readers import read_documents
    from quillian.engine import IndexSettings, index_documents

    docs = list(read_documents(path))
    start, cpu = time.perf_counter(), time.process_time()
    report = index_documents(index, docs, IndexSettings())
    return _call(start, cpu, [d.id for d in docs], report)


def delete(index: str, corpus: Path, position: int) -> dict[str, Any]:
    """Delete the document at ``position`` of ``corpus`` from ``index``: seconds of the
    library call."""
    from quillian.components.ingestion.readers import read_documents
    from quillian.engine import delete_documents

    doc_id = next(d.id for i, d in enumerate(read_documents(corpus)) if i == position)
    start, cpu = time.perf_counter(), time.process_time()
    report = delete_documents(index, [doc_id])
    return _call(start, cpu, [doc_id], report)


def main(argv: list[str]) -> None:
    command, *rest = argv
    if command == "probe":
        path = Path(rest[1])
        n = int(rest[2])
        result = probe(Path(rest[0]), questions_from(path, n), openings_from(path, n))
    elif command == "add":
        result = add(rest[0], Path(rest[1]))
    elif command == "delete":
        result = delete(rest[0], Path(rest[1]), int(rest[2]))
    else:
        raise SystemExit(f"unknown command {command!r}: probe, add or delete")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
