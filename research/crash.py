"""The crash campaign: ``kill -9`` at seeded random points, then a rerun, then a
comparison with a clean build of the same documents.

Two targets, each on one backend (``embedded`` or ``postgres``):

* ``index``: ``quillian index CORPUS --out LOCATION`` (spaCy, keyword embedder) is
  killed (SIGKILL to its process group), then run again to its end;
* ``upload``: ``quillian serve`` over an index of the first half of the corpus receives
  the second half in one upload (one job); the server is killed, started again (it
  resumes the job) and waited on until the job has finished.

Each target first runs once without a kill (the clean build), noting when it entered
each stage (``quillian index``'s progress lines; the job's ``stage``). Each killed run
aims at one of those stages, drawn at random (seeded), and kills a random delay after
entering it (or a later one), up to that stage's length in the clean run: the kills
spread over ingestion and every rebuild stage, whatever the machine's speed. The stage
the process was last seen in is reported as where the kill landed.

A second run without a kill (the control) is compared with the clean build too: what
differs there varies from build to build, whatever the kills do (``equal_beyond_control``
counts the runs equal in every other part). After each rerun the
index must equal the clean build: document and chunk counts,
statuses, the graph's nodes, edges, entity and relation ids, and the top-5 passages
with their scores of sa, ppr, dense and bm25 on
``QUESTIONS`` of ``fault_tools.py`` (:func:`index_summary`). The command
line is ``python research/faults.py crash`` (``faults.py``, which imports this module).
"""

from __future__ import annotations

import json
import logging
import random
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from fault_tools import (
    METHODS,
    QUESTIONS,
    ROUTES,
    Backend,
    Child,
    free_port,
    index_command,
    serve_command,
    wait_healthy,
)
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.factories import make_retriever
from quillian.errors import QuillianError
from quillian.index import open_index, open_storage

__all__ = ["TARGETS", "Aim", "index_summary", "run_crash", "summary_differences"]

logger = logging.getLogger(__name__)

TARGETS = ("index", "upload")
WORKSPACE = "crash"
FINISHED = ("succeeded", "failed", "cancelled", "partial")
#: Points at which nothing is written: kills are not aimed there.
IDLE = ("start-up", "submitted", "queued", "finished", "end")
_PROGRESS = re.compile(r"^([\w:]+): (\d+)/(\d+)")


@dataclass(frozen=True)
class Aim:
    """Where a kill goes: ``delay_s`` after the process enters ``stage`` (or a stage
    after it, in ``order``)."""

    stage: str
    delay_s: float
    order: tuple[str, ...]


Target = Callable[[Aim | None, str], dict[str, Any]]


def run_crash(
    backend: Backend,
    documents: list[dict[str, str]],
    *,
    targets: tuple[str, ...] = TARGETS,
    runs: int = 10,
    seed: int = 1,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """Kill each target ``runs`` times (seeded), rerun, compare with a clean build."""
    rng = random.Random(seed)
    work = backend.work
    corpus_file = work / "corpus.json"
    corpus_file.write_text(json.dumps(documents, ensure_ascii=False), encoding="utf-8")
    half = len(documents) // 2
    report: dict[str, Any] = {"backend": backend.name, "documents": len(documents)}
    for target in targets:
        if target == "index":
            crash = _index_target(backend, corpus_file, timeout_s)
        elif target == "upload":
            crash = _upload_target(backend, documents[:half], documents[half:], timeout_s)
        else:
            raise ValueError(f"unknown target {target!r}: {', '.join(TARGETS)}")
        clean = crash(None, f"{target}_clean")
        want = clean.pop("summary")
        control = crash(None, f"{target}_control")  # a second clean build: what varies
        control_differences = summary_differences(control.pop("summary"), want)
        varying = {_part(d) for d in control_differences}
        stages = clean["stages"]
        order = tuple(stages)
        working = [s for s in order if s not in IDLE] or list(order[:1])
        rows = []
        for run in range(runs):
            stage = rng.choice(working)
            length = stages[order[order.index(stage) + 1]] - stages[stage]
            aim = Aim(stage, round(rng.uniform(0, max(length, 0.05)), 2), order)
            row = crash(aim, f"{target}_{run}")
            row["differences"] = summary_differences(row.pop("summary"), want)
            row["equal"] = not row["differences"]
            row["beyond_control"] = [d for d in row["differences"] if _part(d) not in varying]
            logger.info("%s %s run %d: %s", backend.name, target, run, _line(row))
            rows.append({"run": run, **row})
        report[target] = {
            "clean": clean,
            "control_differences": control_differences,
            "runs": rows,
            "equal": sum(r["equal"] for r in rows),
            "equal_beyond_control": sum(not r["beyond_control"] for r in rows),
            "of": len(rows),
            "clean_counts": {k: want[k] for k in ("documents", "chunks", "nodes", "edges")},
        }
    return report


def _part(difference: str) -> str:
    """The part a difference names: ``top5 ppr`` for one retriever's lists, else itself."""
    return difference.split(":")[0]


def _line(row: dict[str, Any]) -> str:
    got = "equal" if row["equal"] else f"DIFFERS in {', '.join(row['differences'])}"
    return f"aimed at {row['aim']}, killed in {row['landed']}: {got}"


def _drive(
    observe: Callable[[], str],
    finished: Callable[[], bool],
    kill: Callable[[], None],
    aim: Aim | None,
    timeout_s: float,
) -> tuple[dict[str, float], str]:
    """Watch a process until it finishes, or kill it where ``aim`` says. Returns the
    seconds at which each stage was first seen (``end``: when it finished) and the
    point it was last seen at (``observe()``'s words)."""
    start = time.monotonic()
    stages: dict[str, float] = {}
    armed = 0.0
    point = "start-up"
    while not finished():
        now = time.monotonic()
        point = observe()
        stage = point.split(" ")[0]
        stages.setdefault(stage, round(now - start, 2))
        if aim is not None and not armed and _reached(stage, aim):
            armed = now
        if armed and now - armed >= aim.delay_s:  # type: ignore[union-attr]
            kill()
            return stages, point
        if now - start > timeout_s:
            kill()
            raise TimeoutError(f"the run went past {timeout_s:.0f} s")
        time.sleep(0.03)
    stages["end"] = round(time.monotonic() - start, 2)
    return stages, "finished"


def _reached(stage: str, aim: Aim) -> bool:
    if stage not in aim.order:
        return stage == "finished"
    return aim.order.index(stage) >= aim.order.index(aim.stage)


def _index_target(backend: Backend, corpus_file: Path, timeout_s: float) -> Target:
    def crash(aim: Aim | None, name: str) -> dict[str, Any]:
        location = backend.location(name)
        log = backend.work / f"{name}.log"
        row: dict[str, Any] = {"aim": _aim(aim)}
        start = time.monotonic()
        with Child(index_command(corpus_file, location), log) as child:
            stages, row["landed"] = _drive(
                lambda: _last_progress(log), lambda: not child.alive(), child.kill, aim, timeout_s
            )
            row["rc"] = child.process.wait()
        if aim is None:
            row["stages"] = stages
        else:
            with Child(index_command(corpus_file, location), log) as rerun:
                row["rerun_rc"] = rerun.wait(timeout_s)
        row["seconds"] = round(time.monotonic() - start, 1)
        row["summary"] = index_summary(location)
        return row

    return crash


def _aim(aim: Aim | None) -> str:
    return "" if aim is None else f"{aim.stage} + {aim.delay_s} s"


def _last_progress(log: Path) -> str:
    """The last progress line of ``quillian index`` ("ingest 64/240"), or ``start-up``."""
    if not log.is_file():
        return "start-up"
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    for line in reversed(lines):
        if m := _PROGRESS.match(line):
            return f"{m[1]} {m[2]}/{m[3]}"
    return "start-up"


def _upload_target(
    backend: Backend, base: list[dict[str, str]], upload: list[dict[str, str]], timeout_s: float
) -> Target:
    work = backend.work
    routes = work / "routes.json"
    routes.write_text(json.dumps(ROUTES), encoding="utf-8")
    base_file = work / "base.json"
    base_file.write_text(json.dumps(base, ensure_ascii=False), encoding="utf-8")
    pristine: list[str] = []

    def base_index(name: str) -> str:
        """A fresh index of ``base``: copied from one built once (embedded), or built."""
        location = backend.location(name)
        if pristine:
            shutil.copytree(pristine[0], location)
            return location
        with Child(index_command(base_file, location), work / f"{name}.log") as child:
            if child.wait(timeout_s) != 0:
                raise RuntimeError(f"indexing the base failed: {' | '.join(child.tail())}")
        if not backend.url:
            pristine.append(str(work / "base"))
            shutil.copytree(location, pristine[0])
        return location

    def crash(aim: Aim | None, name: str) -> dict[str, Any]:
        location = base_index(name)
        log = work / f"{name}-serve.log"
        row: dict[str, Any] = {"aim": _aim(aim)}
        start = time.monotonic()
        port = free_port()
        with Child(serve_command(WORKSPACE, location, port, routes), log) as server:
            url = f"http://127.0.0.1:{port}"
            wait_healthy(url, server)
            posted = httpx.post(
                f"{url}/api/workspaces/{WORKSPACE}/documents",
                json={"documents": upload},
                timeout=60,
            )
            posted.raise_for_status()
            job_path = posted.headers["location"]
            with httpx.Client(base_url=url, timeout=30) as client:
                job: dict[str, Any] = {}

                def observe() -> str:
                    job.update(client.get(job_path).json())
                    return _job_point(job)

                stages, row["landed"] = _drive(
                    observe, lambda: job.get("state") in FINISHED, server.kill, aim, timeout_s
                )
        if aim is None:
            row["stages"] = stages
        else:
            port = free_port()
            with Child(serve_command(WORKSPACE, location, port, routes), log) as server:
                url = f"http://127.0.0.1:{port}"
                wait_healthy(url, server)
                with httpx.Client(base_url=url, timeout=30) as client:
                    job = {}
                    _drive(
                        observe, lambda: job.get("state") in FINISHED, server.kill, None, timeout_s
                    )
        row.update(
            job_state=job.get("state"),
            resumed=job.get("resumed"),
            failed_documents=len(job.get("failures", [])),
        )
        row["seconds"] = round(time.monotonic() - start, 1)
        row["summary"] = index_summary(location)
        return row

    return crash


def _job_point(job: dict[str, Any]) -> str:
    """Where a job stands: ``ingest 64/300``, ``queued``, ``finished``."""
    if job.get("state") in FINISHED:
        return "finished"
    if job.get("state") != "running" or not job.get("stage"):
        return str(job.get("state", "submitted"))
    return f"{job['stage']} {job.get('stage_done')}/{job.get('stage_total')}"


def index_summary(location: str, questions: Sequence[str] = QUESTIONS) -> dict[str, Any]:
    """What two equal indexes share: document and chunk counts, document statuses, the
    graph's counts and its entity and relation ids, and the top-5 passages (ids and
    rounded scores) of each retriever in ``METHODS`` for ``questions``. An index that
    cannot be opened gives ``{"error": ...}``."""
    try:
        index = open_index(location, KeywordEmbedder())
    except QuillianError as exc:
        return {"error": str(exc).splitlines()[0]}
    kg = index.context.kg
    with open_storage(location) as storage:
        statuses = {str(k.value): v for k, v in storage.status.counts().items() if v}
        documents = storage.documents.count_documents()
        chunks = sorted(c.id for c in storage.documents.iter_chunks())
    results = {
        f"{method}: {question}": [
            [p.chunk_id, round(p.score, 5)]
            for p in make_retriever(index.context, method).retrieve(question, 5).passages
        ]
        for method in METHODS
        for question in questions
    }
    return {
        "documents": documents,
        "statuses": statuses,
        "chunks": len(chunks),
        "chunk_ids": chunks,
        "nodes": kg.snapshot.n_nodes,
        "edges": kg.snapshot.n_edges,
        "entities": sorted(e.node_id for e in kg.entities),
        "relations": sorted(r.id for r in kg.relations),
        "descriptions": len(kg.descriptions),
        "manifest_counts": index.manifest.get("counts", {}),
        "top5": results,
    }


def summary_differences(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """The parts of two :func:`index_summary` results that differ (empty: equal); a
    top-5 list that differs says how: ``passages`` (another set), ``order`` (the same
    passages in another order) or ``scores`` (the same ranking, scores apart by at most
    the figure given)."""
    if "error" in got or "error" in want:
        return [f"error: {got.get('error') or want.get('error')}"]
    parts = [k for k in want if k != "top5" and got.get(k) != want[k]]
    for key, ranked in want["top5"].items():
        other = got["top5"].get(key, [])
        if other != ranked:
            parts.append(f"top5 {key} ({_how(other, ranked)})")
    return parts


def _how(got: list[list[Any]], want: list[list[Any]]) -> str:
    ids, want_ids = [p[0] for p in got], [p[0] for p in want]
    if set(ids) != set(want_ids):
        return f"{len(set(want_ids) - set(ids))} passages"
    if ids != want_ids:
        return "order"
    delta = max(abs(a[1] - b[1]) for a, b in zip(got, want, strict=True))
    return f"scores, {delta:.0e}"
