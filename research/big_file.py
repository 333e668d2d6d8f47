"""Benchmark one big plain-text file: build, index size on disk, then retrieval.

Run ``python research/big_file.py FILE --work DIR [--index-arg ARG ...]
[--src TREE ...]``, FILE for example the 20 MB ``scale-20mb.txt`` of
``research/scale_corpus.py``. For each source tree (``--src``, repeatable: its
``src/`` goes first on ``PYTHONPATH``; none: the current one) it runs, each in its own
process and watched by ``research/proc_watch.py``:

1. ``quillian index FILE --out DIR/<tree>/index`` with the default settings plus the
   ``--index-arg`` flags: wall time, peak resident memory, exit status (a refusal or a
   kill past ``--timeout`` or ``--max-rss-gb`` is a result, reported with its message);
2. the index's size on disk, per file, and its ratio to the text's; for an embedded
   index also what its ``store.sqlite`` holds: the bytes of the documents' and chunks'
   texts and of each key-value namespace (the extraction, linking and embedding caches),
   and for every SQLite database the bytes of each table and index (its pages);
3. ``quillian retrieve DIR QUESTION`` twice (another question first, reported apart
   as ``cli_retrieve_first``: a new source tree's first run compiles numba's kernels
   into its cache), then the timed run: wall time and peak resident memory;
4. a probe process that opens the index through :class:`~quillian.engine.Engine`,
   runs ``sa`` for ``--questions`` questions (``What is TITLE?`` for paragraph titles
   spread over the file) and reports its resident memory after opening and after the
   questions, the first question's seconds (the open and the embedder's load) and the
   p50 and p95 of the rest; then, untimed, the top 8 passages of ``sa``, ``ppr``,
   ``dense`` and ``bm25`` for each question (ids and texts' hashes) and whether one of
   them holds the paragraph the question names (``found``, 1 or 0 a question).

With several trees, ``same_top`` gives, per later tree and method, how many questions'
top passages are those of the first tree, in the same order, of how many; and
``found_pairs`` how many questions found their paragraph under the first tree and under
this one, and of the questions where the two differ, how many this tree found (won)
and how many it missed (lost).

It prints one JSON object and writes it to ``DIR/big_file.json``. An existing index of
a complete earlier run is reused (``--rebuild`` builds it again).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import psutil

from proc_watch import python_env, watch
from quillian.stores.embedded.sqlite import stored_values
from scale_child import questions_from

__all__ = ["disk_sizes", "found_pairs", "main", "same_top", "sqlite_sizes", "store_sizes"]

CLI = "import sys; from quillian.cli.main import main; sys.exit(main())"
CHILD = str(Path(__file__).with_name("scale_child.py"))


def disk_sizes(folder: Path) -> dict[str, int]:
    """Bytes per file under ``folder`` (relative paths), largest first."""
    sizes = {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*") if p.is_file()}
    return dict(sorted(sizes.items(), key=lambda kv: -kv[1]))


def store_sizes(index: Path) -> dict[str, int]:
    """Bytes of what an embedded index's ``store.sqlite`` holds, largest first: the
    documents' and chunks' texts as stored (compressed where long), and each key-value
    namespace's values (empty for an index without that file)."""
    path = index / "store.sqlite"
    if not path.is_file():
        return {}
    with closing(sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)) as conn:
        sizes = {
            f"kv {namespace}": sum(len(v) for _, v in stored_values(conn, namespace))
            for (namespace,) in conn.execute("SELECT DISTINCT namespace FROM kv")
        }
        for table in ("documents", "chunks"):
            (size,) = conn.execute(
                f"SELECT coalesce(sum(length(CAST(text AS BLOB))), 0) FROM {table}"
            ).fetchone()
            sizes[f"{table} text"] = int(size)
    return dict(sorted(sizes.items(), key=lambda kv: -kv[1]))


def sqlite_sizes(index: Path) -> dict[str, dict[str, int]]:
    """Per SQLite database under ``index`` (relative path), the bytes of the pages of
    each table and index, largest first (SQLite's ``dbstat`` table)."""
    out = {}
    for path in sorted(index.rglob("*.sqlite")):
        uri = f"{path.absolute().as_uri()}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True)) as conn:
            rows = conn.execute(
                "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
            )
            out[str(path.relative_to(index))] = {name: int(size) for name, size in rows}
    return out


def _tree_run(args: argparse.Namespace, src: Path | None, work: Path) -> dict[str, Any]:
    env = python_env(src, {"TQDM_DISABLE": "1"})
    py = sys.executable
    index = work / "index"
    out: dict[str, Any] = {"src": str(src) if src else None, "index": str(index)}
    done = work / "index.json"
    if args.rebuild or not done.exists():
        command = [py, "-c", CLI, "index", str(args.file), "--out", str(index), *args.index_arg]
        built = watch(command, env=env, timeout=args.timeout, max_rss_gb=args.max_rss_gb)
        done.write_text(json.dumps(built.summary(), indent=2) + "\n", encoding="utf-8")
    out["build"] = json.loads(done.read_text(encoding="utf-8"))
    if out["build"]["returncode"] != 0:
        return out
    sizes = disk_sizes(index)
    text_bytes = args.file.stat().st_size
    out["disk"] = {
        "total": sum(sizes.values()),
        "files": sizes,
        "store": store_sizes(index),
        "sqlite": sqlite_sizes(index),
    }
    out["disk"]["ratio_to_text"] = out["disk"]["total"] / text_bytes
    questions = questions_from(args.file, args.questions)
    # the first run in a source tree compiles numba's kernels into its cache (seconds):
    # kept apart, so every tree's timed run finds its kernels compiled
    for name, question in (("cli_retrieve_first", questions[-1]), ("cli_retrieve", questions[0])):
        cli = watch(
            [py, "-c", CLI, "retrieve", str(index), question, "--no-cache"],
            env=env,
            timeout=args.timeout,
            max_rss_gb=args.max_rss_gb,
        )
        out[name] = cli.summary()
    probed = watch(
        [py, "-P", CHILD, "probe", str(index), str(args.file), str(args.questions)],
        env=env,
        timeout=args.timeout,
        max_rss_gb=args.max_rss_gb,
    )
    measured = json.loads(probed.stdout) if probed.returncode == 0 else {}
    out["probe"] = {**probed.summary(), **measured}
    return out


def same_top(trees: list[dict[str, Any]]) -> dict[str, dict[str, list[int]]]:
    """Per tree after the first (by its source), per method, ``[questions whose top
    passages are the first tree's, in order; questions compared]``; a tree without a
    probe's lists compares nothing."""
    first = trees[0].get("probe", {}).get("top", {}) if trees else {}
    out = {}
    for tree in trees[1:]:
        top = tree.get("probe", {}).get("top", {})
        out[str(tree.get("src"))] = {
            method: [sum(a == b for a, b in zip(first[method], lists, strict=False)), len(lists)]
            for method, lists in top.items()
            if method in first
        }
    return out


def found_pairs(trees: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, int]]]:
    """Per tree after the first, per method: ``first`` and ``this`` (questions that found
    their paragraph under each), ``won`` and ``lost`` (found under this tree only, under
    the first only); trees without ``found`` compare nothing."""
    first = trees[0].get("probe", {}).get("found", {}) if trees else {}
    out = {}
    for tree in trees[1:]:
        found = tree.get("probe", {}).get("found", {})
        out[str(tree.get("src"))] = {
            method: {
                "first": sum(first[method]),
                "this": sum(hits),
                "won": sum(b > a for a, b in zip(first[method], hits, strict=True)),
                "lost": sum(a > b for a, b in zip(first[method], hits, strict=True)),
            }
            for method, hits in found.items()
            if method in first
        }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, help="the plain-text file to index")
    parser.add_argument("--work", type=Path, default=Path("big-file-work"))
    parser.add_argument("--src", type=Path, action="append", default=[], help="a source tree")
    parser.add_argument("--index-arg", action="append", default=[], help="a flag for index")
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=2400.0, help="seconds per command")
    parser.add_argument("--max-rss-gb", type=float, default=14.0)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "file": str(args.file),
        "text_bytes": args.file.stat().st_size,
        "index_args": args.index_arg,
        "cpus": psutil.cpu_count(),
        "load_before": psutil.getloadavg(),
        "trees": [],
    }
    for i, src in enumerate(args.src or [None]):
        work = args.work / (f"{i}-{src.name}" if src else "current")
        work.mkdir(parents=True, exist_ok=True)
        result["trees"].append(_tree_run(args, src, work))
    result["load_after"] = psutil.getloadavg()
    result["same_top"] = same_top(result["trees"])
    result["found_pairs"] = found_pairs(result["trees"])
    text = json.dumps(result, indent=2, default=float)
    (args.work / "big_file.json").write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
