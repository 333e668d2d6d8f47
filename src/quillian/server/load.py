"""A load benchmark of ``quillian serve`` on loopback, bounded in time.

It serves a copy of an index with ``quillian serve`` (a subprocess, scripted model),
then measures, each for a fixed time: retrieval at several numbers of concurrent
clients, answering with the scripted model (the server's own overhead), and retrieval
while an upload of new passages is ingested. Beside the HTTP figures it measures the
same retrievals in-process, so the server's overhead shows as a ratio. Prints one JSON
object::

    python -m quillian.server.load INDEX --corpus CORPUS.json --questions Q.jsonl \\
        [--seconds 60] [--clients 1 8 32] [--upload-from 800 --upload 800] \\
        [--baseline-src OLD_TREE [--baseline-plain-http]]

With ``--baseline-src``, a second server runs the same index (its own copy) from an
older source tree, and each number of clients is measured on the two servers in turn,
so the figures are side by side from one run on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from quillian.engine import Engine

__all__ = ["free_port", "main", "stop_process"]

ROUTES = {"sa-rag.answer": json.dumps({"reasoning": "load test", "final_answer": "yes"})}


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(process: subprocess.Popen[Any], grace_s: float) -> None:
    """Terminate ``process``; kill it if it has not exited after ``grace_s`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def percentiles(latencies: list[float]) -> dict[str, float]:
    if len(latencies) < 2:
        only = round(latencies[0] * 1000, 2) if latencies else 0.0
        return {"p50_ms": only, "p95_ms": only, "p99_ms": only}
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "p50_ms": round(cuts[49] * 1000, 2),
        "p95_ms": round(cuts[94] * 1000, 2),
        "p99_ms": round(cuts[98] * 1000, 2),
    }


async def load(
    client: httpx.AsyncClient,
    clients: int,
    seconds: float,
    request: Callable[[int], tuple[str, dict[str, Any]]],
    until: asyncio.Event | None = None,
) -> dict[str, Any]:
    """``clients`` loops sending ``request(i)`` for ``seconds`` (or until ``until``)."""
    latencies: list[float] = []
    errors: list[str] = []
    stop = time.perf_counter() + seconds
    counter = iter(range(10**9))

    async def one_client() -> None:
        while time.perf_counter() < stop and not (until is not None and until.is_set()):
            path, body = request(next(counter))
            start = time.perf_counter()
            try:
                response = await client.post(path, json=body)
                if response.status_code != 200:
                    errors.append(f"{response.status_code}: {response.text[:200]}")
                    continue
            except httpx.HTTPError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - start)

    begin = time.perf_counter()
    await asyncio.gather(*(one_client() for _ in range(clients)))
    elapsed = time.perf_counter() - begin
    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "requests": len(latencies),
        "rps": round(len(latencies) / elapsed, 1),
        **percentiles(latencies),
        "errors": len(errors),
        "first_errors": errors[:3],
    }


def in_process(index: Path, questions: list[str], method: str, n: int) -> dict[str, Any]:
    """The same retrievals with no HTTP: ``Engine.aretrieve`` (the server's call), one
    after another, ``n`` of them cycling through the questions after one warm pass over
    them (as the HTTP clients cycle through them)."""

    async def measure(engine: Engine) -> list[float]:
        for question in questions:  # open the index, load the embedder, warm the caches
            await engine.aretrieve(question, method, 8)
        latencies = []
        for i in range(n):
            start = time.perf_counter()
            await engine.aretrieve(questions[i % len(questions)], method, 8)
            latencies.append(time.perf_counter() - start)
        return latencies

    engine = Engine.open(index)
    try:
        latencies = asyncio.run(measure(engine))
    finally:
        engine.close()
    return {"requests": len(latencies), **percentiles(latencies)}


#: Run before ``quillian serve`` for a baseline with uvicorn's pure-Python HTTP parser
#: and event loop (h11, asyncio), as the service ran before httptools and uvloop were
#: among its dependencies: uvicorn picks them whenever they can be imported.
_PLAIN_HTTP = (
    "import runpy, sys; sys.modules['httptools'] = None; sys.modules['uvloop'] = None; "
    "sys.argv[0] = 'quillian'; runpy.run_module('quillian.cli.main', run_name='__main__')"
)


@dataclass
class Side:
    """One server measured: today's code, or a baseline source tree."""

    name: str
    src: Path | None
    plain_http: bool
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    client: httpx.AsyncClient | None = None

    def command(self, index: Path, routes: Path) -> list[str]:
        start = ["-c", _PLAIN_HTTP] if self.plain_http else ["-m", "quillian.cli.main"]
        return [sys.executable, *start, "serve", f"load={index}",
                "--llm", f"scripted:{routes}", "--port", str(self.port)]  # fmt: skip

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.src is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                [str(self.src / "src"), *filter(None, [env.get("PYTHONPATH")])]
            )
        return env


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    routes = workdir / "routes.json"
    routes.write_text(json.dumps(ROUTES))
    questions = [
        json.loads(line)["question"]
        for line in Path(args.questions).read_text(encoding="utf-8").split("\n")
        if line.strip()
    ]
    corpus = json.loads(Path(args.corpus).read_text())
    upload = corpus[args.upload_from : args.upload_from + args.upload]
    sides = [Side("current", None, plain_http=False)]
    if args.baseline_src is not None:
        sides.insert(0, Side("baseline", args.baseline_src, plain_http=args.baseline_plain_http))
    for side in sides:
        copy = workdir / f"index-{side.name}"
        shutil.copytree(args.index, copy)
        shutil.rmtree(copy / "server", ignore_errors=True)
    report: dict[str, Any] = {
        "index": str(args.index),
        "method": args.method,
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "in_process": await asyncio.to_thread(
            in_process, workdir / "index-current", questions, args.method, args.in_process
        ),
    }
    if args.baseline_src is not None:
        report["baseline"] = {"src": str(args.baseline_src), "plain_http": args.baseline_plain_http}

    def retrieve(i: int) -> tuple[str, dict[str, Any]]:
        q = questions[i % len(questions)]
        return "/api/workspaces/load/retrieve", {"query": q, "method": args.method, "k": 8}

    def answer(i: int) -> tuple[str, dict[str, Any]]:
        q = questions[i % len(questions)]
        return "/api/workspaces/load/answer", {"question": q, "method": "sa-rag"}

    limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
    try:
        for side in sides:
            side.port = free_port()
            log = (workdir / f"server-{side.name}.log").open("wb")  # a pipe would fill up
            command = side.command(workdir / f"index-{side.name}", routes)
            side.process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=log, env=side.environment()
            )
            base = f"http://127.0.0.1:{side.port}"
            side.client = httpx.AsyncClient(base_url=base, timeout=120, limits=limits)
            await _wait_up(side.client, side.process, workdir / f"server-{side.name}.log")
            for i in range(5):  # warm up: the query embedder loads on first use
                path, body = retrieve(i)
                (await side.client.post(path, json=body)).raise_for_status()
        # each number of clients on each side in turn, so a change of the machine's
        # load in between falls on both alike
        rows: dict[str, list[dict[str, Any]]] = {side.name: [] for side in sides}
        for n in args.clients:
            for side in sides:
                assert side.client is not None
                rows[side.name].append(await load(side.client, n, args.seconds, retrieve))
        for side in sides:
            assert side.client is not None
            into = report if side.name == "current" else report["baseline"]
            into["retrieve"] = rows[side.name]
            into["answer"] = await load(side.client, args.answer_clients, args.seconds, answer)
            into["during_ingestion"] = await _during_ingestion(side.client, upload, retrieve, args)
    finally:
        for side in sides:
            if side.client is not None:
                await side.client.aclose()
            if side.process is not None:
                stop_process(side.process, 30)
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    p50 = report["in_process"]["p50_ms"] or 1.0
    for row in report["retrieve"]:
        row["p50_over_in_process"] = round(row["p50_ms"] / p50, 2)
    if args.baseline_src is not None:
        report["p95_current_over_baseline"] = [
            {"clients": new["clients"], "ratio": round(new["p95_ms"] / old["p95_ms"], 2)}
            for new, old in zip(report["retrieve"], report["baseline"]["retrieve"], strict=True)
        ]
    return report


async def _wait_up(client: httpx.AsyncClient, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if server.poll() is not None:
            why = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"quillian serve exited: {why}")
        try:
            if (await client.get("/healthz")).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.2)
    raise TimeoutError("quillian serve did not start in 300 s")


async def _during_ingestion(
    client: httpx.AsyncClient,
    upload: list[dict[str, str]],
    retrieve: Callable[[int], tuple[str, dict[str, Any]]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Retrieval at ``--ingest-clients`` while ``upload`` is ingested, until it is done."""
    start = time.perf_counter()
    response = await client.post(
        "/api/workspaces/load/documents",
        json={"documents": [{"title": d["title"], "text": d["text"]} for d in upload]},
    )
    response.raise_for_status()
    location = response.headers["location"]
    done = asyncio.Event()
    job: dict[str, Any] = {}

    async def watch() -> None:
        while True:
            job.update((await client.get(location)).json())
            if job["state"] in ("succeeded", "partial", "failed", "cancelled"):
                done.set()
                return
            await asyncio.sleep(0.5)

    watcher = asyncio.create_task(watch())
    figures = await load(client, args.ingest_clients, args.ingest_limit, retrieve, until=done)
    await watcher
    return {
        "passages": len(upload),
        "job_state": job["state"],
        "job_seconds": round(time.perf_counter() - start, 1),
        "job_stage_seconds": {k: round(v, 1) for k, v in job["report"].get("seconds", {}).items()},
        "retrieval": figures,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path)
    parser.add_argument("--corpus", type=Path, required=True, help="the corpus JSON (uploads)")
    parser.add_argument("--questions", type=Path, required=True, help="questions JSONL")
    parser.add_argument("--method", default="sa")
    parser.add_argument("--seconds", type=float, default=60.0, help="per measurement")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--answer-clients", type=int, default=32)
    parser.add_argument("--in-process", type=int, default=500, help="in-process retrievals")
    parser.add_argument("--upload-from", type=int, default=800)
    parser.add_argument("--upload", type=int, default=800, help="passages uploaded")
    parser.add_argument("--ingest-clients", type=int, default=8)
    parser.add_argument("--ingest-limit", type=float, default=900.0, help="longest wait, s")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="a source tree (e.g. a git worktree at an older commit) served beside today's "
        "code and measured in turn with it",
    )
    parser.add_argument(
        "--baseline-plain-http",
        action="store_true",
        help="serve the baseline on uvicorn's pure-Python HTTP parser and loop (h11, "
        "asyncio), as before httptools and uvloop were dependencies",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="quillian-load-") as tmp:
        report = asyncio.run(run(args, Path(tmp)))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
