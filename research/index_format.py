"""The index format benchmark: the graph tables database (schema 2) against a baseline
tree's format (``--baseline-src``, e.g. the JSON Lines tables of schema 1), side by side
in one run, on the same corpora, extractions, embeddings and questions.

Run ``python research/index_format.py --baseline-src /tmp/base/src --corpus
../shared/bench/hotpotqa/corpus.json --questions ../shared/bench/hotpotqa/questions.json
--dataset hotpotqa``. For the packaged sample (titles as questions) and the corpus
given (its first ``--first-n`` documents), it indexes the corpus once with this tree
(``quillian index``, spaCy and MiniLM by default) to fill the extraction and embedding
caches, then builds it again from those caches with each tree (a copy of the first
index's database each), and measures each index in a fresh process (``python -P`` with
that tree first on ``PYTHONPATH``): the size of every file on disk, the build's stage
times, the open time and resident memory (before the open, the embedding model loaded;
after it; after the queries), the first ``sa`` query and ``sa``'s p50/p95 over
``--rounds`` rounds (query vectors embedded first), each in ``--repeats`` processes
a tree taken in turn (``best_*``: the least of them), and whether each of ``sa``,
``ppr``, ``dense`` and ``bm25`` returns the same top ``--k`` passages on both. Prints
one JSON object, with the machine's load average before and after; progress goes to
stderr. ``--reuse`` measures again the indexes an earlier run left in ``--work``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import quillian
from quillian.components.ingestion.readers import read_documents
from quillian.eval.datasets import load_questions

__all__ = ["main", "run_index_format_bench"]

logger = logging.getLogger(__name__)

CHILD = Path(__file__).with_name("index_format_child.py")
SAMPLE = Path(quillian.__file__).parent / "data" / "sample"
#: The sources of the ``quillian`` imported here, the first on the child's ``PYTHONPATH``
#: for the new format.
HERE = Path(quillian.__file__).parents[1]


def _child(src: Path, *args: str) -> dict[str, Any]:
    """Run the child with ``src`` first on ``PYTHONPATH``; its last stdout line."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-P", str(CHILD), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"child {args[0]} in {src} failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def sizes(index: Path) -> dict[str, Any]:
    """Bytes of every file under ``index`` by relative path, and totals by top folder."""
    files = {
        p.relative_to(index).as_posix(): p.stat().st_size
        for p in sorted(index.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }
    folders: dict[str, int] = {}
    for name, size in files.items():
        top = name.split("/")[0]
        folders[top] = folders.get(top, 0) + size
    tables = {k: v for k, v in files.items() if k.startswith("tables/")}
    return {"total": sum(files.values()), "by_folder": folders, "tables": tables}


def agreement(a: dict[str, list[list[str]]], b: dict[str, list[list[str]]]) -> dict[str, Any]:
    """Per method, the share of questions whose top-k lists are equal on both."""
    out = {}
    for method, lists in a.items():
        other = b.get(method, [])
        same = sum(x == y for x, y in zip(lists, other, strict=False))
        out[method] = {"equal": same, "questions": len(lists)}
    return out


def _seeded_build(
    src: Path, seed: Path, corpus: Path, out: Path, extractor: str, embedder: str
) -> dict[str, Any]:
    """Build ``corpus`` into ``out`` with the tree ``src`` from ``seed``'s database (the
    documents, their stored extractions and the embedding cache) and its manifest, as
    an unfinished build of schema 1."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    shutil.copy2(seed / "store.sqlite", out / "store.sqlite")
    manifest = json.loads((seed / "manifest.json").read_text(encoding="utf-8"))
    manifest = {k: v for k, v in manifest.items() if k != "files"}  # none of its files
    # a build left unfinished, of the schema both trees read: each builds it again
    manifest.update(state="building", schema_version=1)
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return _child(src, "build", str(corpus), str(out), extractor, embedder)


def run_index_format_bench(
    name: str,
    corpus: Path,
    questions: Sequence[str],
    *,
    baseline: Path,
    work: Path,
    extractor: str = "spacy",
    embedder: str = "minilm-int8",
    k: int = 5,
    rounds: int = 3,
    repeats: int = 2,
    reuse: bool = False,
) -> dict[str, Any]:
    """Build ``corpus`` with this tree and ``baseline`` and measure both (see above)."""
    asked = work / f"{name}-questions.json"
    asked.write_text(json.dumps(list(questions)))
    seed = work / f"{name}-seed"
    trees = (("baseline", baseline), ("new", HERE))
    report: dict[str, Any] = {}
    if reuse:  # the indexes an earlier run left in ``work``: measure them again
        for label, _ in trees:
            out = work / f"{name}-{label}"
            stages = json.loads((out / "manifest.json").read_text()).get("build_seconds", {})
            report[label] = {"build_stage_seconds": stages, "sizes": sizes(out)}
    else:
        shutil.rmtree(seed, ignore_errors=True)
        logger.info("%s: indexing once to fill the caches", name)
        first = _child(HERE, "build", str(corpus), str(seed), extractor, embedder)
        report.update(cold_build_seconds=first["seconds"], counts=first["counts"])
        for label, src in trees:
            out = work / f"{name}-{label}"
            logger.info("%s: building with %s (%s)", name, label, src)
            built = _seeded_build(src, seed, corpus, out, extractor, embedder)
            report[label] = {"build_stage_seconds": built["stage_seconds"], "sizes": sizes(out)}
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in trees}
    for repeat in range(repeats):  # alternating, so a change of load falls on both
        for label, src in trees:
            logger.info("%s: measuring %s (%d of %d)", name, label, repeat + 1, repeats)
            out = work / f"{name}-{label}"
            args = ("measure", str(out), embedder, str(k), str(rounds), str(asked))
            runs[label].append(_child(src, *args))
    for label, measured in runs.items():
        report[label]["runs"] = [{k: v for k, v in m.items() if k != "top"} for m in measured]
        for key in ("open_seconds", "rss_after_open_mb", "sa_p50_ms", "sa_cpu_p50_ms"):
            report[label][f"best_{key}"] = min(m[key] for m in measured)
    report["agreement"] = agreement(runs["new"][0]["top"], runs["baseline"][0]["top"])
    return report


def _documents_file(path: Path, first_n: int | None, out: Path) -> Path:
    """``path``, or its first ``first_n`` documents as a JSON corpus in ``out``."""
    if first_n is None:
        return path
    docs = []
    for doc in read_documents(path):
        docs.append({"title": doc.title, "text": doc.text})
        if len(docs) >= first_n:
            break
    out.write_text(json.dumps(docs, ensure_ascii=False), encoding="utf-8")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-src", type=Path, required=True, help="baseline tree's src/")
    parser.add_argument("--corpus", type=Path, help="a larger corpus (file or folder)")
    parser.add_argument("--questions", type=Path, help="the corpus's questions file")
    parser.add_argument("--dataset", default="hotpotqa", help="the questions' format")
    parser.add_argument("--first-n", type=int, default=None, help="first N documents only")
    parser.add_argument("--max-questions", type=int, default=50)
    parser.add_argument("--extractor", default="spacy")
    parser.add_argument("--embedder", default="minilm-int8")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="sa timing rounds a process")
    parser.add_argument("--repeats", type=int, default=2, help="measuring processes a tree")
    parser.add_argument("--work", type=Path, default=None, help="scratch directory")
    parser.add_argument(
        "--reuse", action="store_true", help="measure the indexes --work holds, no builds"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    work = args.work or Path(tempfile.mkdtemp(prefix="index-format-"))
    work.mkdir(parents=True, exist_ok=True)
    runs: list[tuple[str, Path, list[str]]] = [
        ("sample", SAMPLE, [f"Who or what is {d.title}?" for d in read_documents(SAMPLE)])
    ]
    if args.corpus is not None:
        corpus = _documents_file(args.corpus, args.first_n, work / "corpus.json")
        asked = [q.question for q in load_questions(args.dataset, args.questions)]
        runs.append((args.corpus.parent.name or "corpus", corpus, asked[: args.max_questions]))
    report: dict[str, Any] = {"load_before": os.getloadavg(), "cpus": os.cpu_count()}
    for name, corpus_path, questions in runs:
        report[name] = run_index_format_bench(
            name,
            corpus_path,
            questions,
            baseline=args.baseline_src,
            work=work,
            extractor=args.extractor,
            embedder=args.embedder,
            k=args.k,
            rounds=args.rounds,
            repeats=args.repeats,
            reuse=args.reuse,
        )
    report["load_after"] = os.getloadavg()
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
