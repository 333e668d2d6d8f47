"""Benchmark a newcomer's first ten minutes: each README command on the sample index.

Run ``python research/first_run.py --out first-run.json``. Every command runs as
``python -m quillian.cli.main ...`` in a fresh child process, so its wall time includes
interpreter start-up and imports, as a user at a shell would see it; peak RSS is the
child's own (``os.wait4``). ``--src DIR`` runs the commands from another source tree
(``DIR`` on ``PYTHONPATH``), e.g. a checkout of an older commit extracted with
``git archive BASE src | tar -x -C /tmp/base``, so one run compares today against after::

    python research/first_run.py --src /tmp/base/src --src src --out first-run.json

The commands, in order, per source tree (a fresh index directory and a fresh LLM
response cache each):

* ``index``: ``quillian index --sample --out DIR``;
* ``retrieve``: ``quillian retrieve DIR QUESTION --method sa``;
* ``retrieve-rerun``: the same again (the question's vector may now be cached: the
  embedding cache, ``QUILLIAN_EMBEDDING_CACHE``, starts empty in ``work``);
* ``retrieve-bm25``: ``--method bm25``;
* ``ask-uncached:METHOD``: ``quillian ask DIR QUESTION --method METHOD --llm LLM``
  with an empty response cache (the model answers every call), for each of
  ``--methods`` (default ``sa-rag``);
* ``ask-cached:METHOD``: the same command again, every reply now cached
  (``--skip-ask`` leaves out the ``ask`` rows);
* ``kg-import-wordnet``: ``quillian kg import wordnet`` (only with ``--wordnet``: it
  takes minutes).

Each row records the command, the exit code, wall seconds, peak RSS in MB and the
last lines of stderr when the command failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["QUESTION", "main", "run_command", "run_tree"]

QUESTION = "In which city was the doctoral advisor of M. Ross Quillian born?"


def run_command(
    args: Sequence[str],
    src: Path | None,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 1800.0,
) -> dict[str, Any]:
    """Run ``quillian ARGS`` in a fresh interpreter (``env`` added to the environment);
    its wall time and peak RSS."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", **(env or {}))
    if src is not None:
        env["PYTHONPATH"] = str(src.resolve())
    command = [sys.executable, "-m", "quillian.cli.main", *args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        try:
            _, status, usage = _wait(child.pid, timeout)
        except TimeoutError:
            child.kill()
            _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    row: dict[str, Any] = {
        "command": "quillian " + " ".join(_quote(a) for a in args),
        "rc": child.returncode,
        "wall_s": round(seconds, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "stdout_lines": len(stdout.splitlines()),
    }
    if child.returncode != 0:
        row["stderr_tail"] = stderr.splitlines()[-5:]
    row["stdout_head"] = stdout.splitlines()[:12]
    return row


def _wait(pid: int, timeout: float) -> tuple[int, int, Any]:
    deadline = time.monotonic() + timeout
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return done, status, usage
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.05)


def _quote(arg: str) -> str:
    return repr(arg) if " " in arg else arg


def run_tree(
    src: Path | None,
    work: Path,
    llm: str,
    *,
    methods: Sequence[str] = ("sa-rag",),
    wordnet: bool = False,
) -> list[dict[str, Any]]:
    """Every README command against one source tree, in ``work`` (emptied first)."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    index, cache = str(work / "sample"), str(work / "llm-responses.sqlite")
    env = {"QUILLIAN_EMBEDDING_CACHE": str(work / "embeddings.sqlite")}
    rows: list[dict[str, Any]] = []

    def run(name: str, *args: str) -> None:
        print(f"{src or 'installed'}: {name} ...", file=sys.stderr, flush=True)
        row = {"step": name, **run_command(args, src, env=env)}
        print(f"  {row['wall_s']} s, {row['peak_rss_mb']} MB, rc {row['rc']}", file=sys.stderr)
        rows.append(row)

    run("index", "index", "--sample", "--out", index)
    run("retrieve", "retrieve", index, QUESTION, "--method", "sa")
    run("retrieve-rerun", "retrieve", index, QUESTION, "--method", "sa")
    run("retrieve-bm25", "retrieve", index, QUESTION, "--method", "bm25")
    ask = ["ask", index, QUESTION, "--llm", llm, "--cache", cache]
    for method in methods:
        run(f"ask-uncached:{method}", *ask, "--method", method)
        run(f"ask-cached:{method}", *ask, "--method", method)
    if wordnet:
        run("kg-import-wordnet", "kg", "import", "wordnet", "--out", str(work / "wordnet"))
    return rows


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python research/first_run.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--src",
        type=Path,
        action="append",
        help="a source tree to run the commands from (repeatable; default: the installed one)",
    )
    parser.add_argument("--llm", default="local", help="the LLM spec of the ask commands")
    parser.add_argument("--work", type=Path, default=None, help="scratch directory")
    parser.add_argument("--methods", default="sa-rag", help="comma-separated ask methods")
    parser.add_argument("--skip-ask", action="store_true", help="no ask commands")
    parser.add_argument("--wordnet", action="store_true", help="also time kg import wordnet")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here too")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Run every README command per source tree; print (and write) one JSON object."""
    args = _parse(argv)
    trees: list[Path | None] = list(args.src) if args.src else [None]
    scratch = args.work or Path(tempfile.mkdtemp(prefix="quillian-first-run-"))
    results = []
    for i, src in enumerate(trees):
        rows = run_tree(
            src,
            scratch / f"tree{i}",
            args.llm,
            methods=[] if args.skip_ask else args.methods.split(","),
            wordnet=args.wordnet,
        )
        results.append({"src": str(src) if src else "installed", "rows": rows})
    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average": os.getloadavg(),
        },
        "question": QUESTION,
        "llm": args.llm,
        "results": results,
    }
    text = json.dumps(report, indent=2, ensure_ascii=False)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
