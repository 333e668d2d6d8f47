"""A load benchmark of ``quillian serve`` on loopback, bounded in time.

It serves a copy of an index with ``quillian serve`` (a subprocess, scripted model),
then measures, each for a fixed time: retrieval at several numbers of concurrent
clients, answering with the scripted model (the server's own overhead), and retrieval
while an upload of new passages is ingested. Beside the HTTP figures it measures the
same retrievals in-process, so the server's overhead shows as a ratio. Prints one JSON
object::

    python -m quillian.server.load INDEX --corpus CORPUS.json --questions Q.jsonl \\
        [--seconds 60] [--clients 1 8 32] [--upload-from 800 --upload 800] \\
        [--baseline-src OLD_TREE [--baseline-plain-http]] [--replicas 2 4]

With ``--baseline-src``, a second server runs the same index (its own copy) from an
older source tree. With ``--replicas N``, N servers of today's code run side by side,
each on its own copy of the index (as on N machines), and the clients' requests are
spread over them in turn, as a round-robin load balancer would. Each number of clients
is measured on every side in turn, so the figures are side by side from one run on one
machine. ``--answer-clients 0`` and ``--upload 0`` leave out the answers and the upload
(measured on one-server sides only: an upload to one copy of an embedded index does
not reach the others' copies; ``research/replicas.py`` measures replicas that share a
PostgreSQL workspace).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
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


@dataclass
class Tally:
    """What one group of clients measured."""

    latencies: list[float]
    errors: list[str]
    seconds: float
    cpu_seconds: float


@dataclass(frozen=True)
class Retrievals:
    """The retrieval requests the clients send, ``i`` cycling through the questions
    from ``offset`` (plain data, so that client processes can be given it)."""

    questions: tuple[str, ...]
    method: str
    offset: int = 0

    def __call__(self, i: int) -> tuple[str, dict[str, Any]]:
        q = self.questions[(i + self.offset) % len(self.questions)]
        return "/api/workspaces/load/retrieve", {"query": q, "method": self.method, "k": 8}


async def load(
    servers: Sequence[httpx.AsyncClient],
    clients: int,
    seconds: float,
    request: Callable[[int], tuple[str, dict[str, Any]]],
    until: asyncio.Event | None = None,
) -> dict[str, Any]:
    """``clients`` loops sending ``request(i)`` for ``seconds`` (or until ``until``),
    request ``i`` to ``servers[i % len(servers)]`` (a round-robin load balancer). The
    clients' own share of a core is reported beside the latencies: near 1.0, they and
    not the server would be what limits the figures."""
    tally = await _drive(servers, clients, seconds, request, until=until)
    return _summary(clients, [tally])


async def _drive(
    servers: Sequence[httpx.AsyncClient],
    clients: int,
    seconds: float,
    request: Callable[[int], tuple[str, dict[str, Any]]],
    *,
    until: asyncio.Event | None = None,
    rotate: int = 0,
    start_at: float | None = None,
) -> Tally:
    """:func:`load`'s loops; request ``i`` goes to ``servers[(i + rotate) % n]``, and
    with ``start_at`` (a ``time.time()``) they start then, so that client processes
    started one after another measure the same ``seconds``."""
    if start_at is not None:
        await asyncio.sleep(max(0.0, start_at - time.time()))
    latencies: list[float] = []
    errors: list[str] = []
    stop = time.perf_counter() + seconds
    counter = iter(range(10**9))

    async def one_client() -> None:
        while time.perf_counter() < stop and not (until is not None and until.is_set()):
            i = next(counter)
            path, body = request(i)
            client = servers[(i + rotate) % len(servers)]
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

    begin, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one_client() for _ in range(clients)))
    return Tally(latencies, errors, time.perf_counter() - begin, time.process_time() - cpu)


def _summary(clients: int, tallies: list[Tally]) -> dict[str, Any]:
    """One row of figures from the tallies of groups of clients that ran together; the
    clients' core share is the busiest group's."""
    latencies = [x for t in tallies for x in t.latencies]
    errors = [e for t in tallies for e in t.errors]
    elapsed = max(t.seconds for t in tallies)
    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "requests": len(latencies),
        "rps": round(len(latencies) / elapsed, 1),
        **percentiles(latencies),
        "errors": len(errors),
        "first_errors": errors[:3],
        "client_core_share": round(max(t.cpu_seconds / t.seconds for t in tallies), 2),
    }


def _client_process(
    urls: list[str], clients: int, seconds: float, request: Retrievals, rotate: int, start_at: float
) -> Tally:
    """One client process's share of a measurement (run in a process pool)."""

    async def measure() -> Tally:
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
        pool = [httpx.AsyncClient(base_url=u, timeout=120, limits=limits) for u in urls]
        try:
            return await _drive(pool, clients, seconds, request, rotate=rotate, start_at=start_at)
        finally:
            for client in pool:
                await client.aclose()

    return asyncio.run(measure())


async def spread_load(
    executor: ProcessPoolExecutor,
    processes: int,
    urls: list[str],
    clients: int,
    seconds: float,
    request: Retrievals,
) -> dict[str, Any]:
    """:func:`load` with the clients spread over ``processes`` client processes (as
    even as they divide), so that one process's Python is not what limits many
    clients: each starts its loops at the same moment and sends its requests to the
    servers in turn from its own starting server, cycling the questions from its own
    starting question."""
    shares = [clients // processes + (k < clients % processes) for k in range(processes)]
    start_at = time.time() + 1.0
    loop = asyncio.get_running_loop()
    tallies = await asyncio.gather(
        *(
            loop.run_in_executor(
                executor,
                _client_process,
                urls,
                share,
                seconds,
                replace(request, offset=request.offset + 7 * k),
                k,
                start_at,
            )
            for k, share in enumerate(shares)
            if share
        )
    )
    return _summary(clients, list(tallies))


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
class Server:
    """One ``quillian serve`` process and its client."""

    port: int
    process: subprocess.Popen[bytes]
    client: httpx.AsyncClient
    log: Path


@dataclass
class Side:
    """One way of serving, measured: today's code or a baseline source tree, on one
    server or ``replicas`` of them."""

    name: str
    src: Path | None
    plain_http: bool
    replicas: int = 1
    servers: list[Server] = field(default_factory=list)

    @property
    def clients(self) -> list[httpx.AsyncClient]:
        return [server.client for server in self.servers]

    def command(self, index: Path, routes: Path, port: int) -> list[str]:
        start = ["-c", _PLAIN_HTTP] if self.plain_http else ["-m", "quillian.cli.main"]
        return [sys.executable, *start, "serve", f"load={index}",
                "--llm", f"scripted:{routes}", "--port", str(port)]  # fmt: skip

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.src is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                [str(self.src / "src"), *filter(None, [env.get("PYTHONPATH")])]
            )
        return env

    def copies(self, workdir: Path) -> list[Path]:
        """The index copy of each of this side's servers."""
        return [workdir / f"index-{self.name}-{i}" for i in range(self.replicas)]

    def start(self, workdir: Path, routes: Path, limits: httpx.Limits) -> None:
        for i, copy in enumerate(self.copies(workdir)):
            port = free_port()
            log = workdir / f"server-{self.name}-{i}.log"
            with log.open("wb") as sink:  # a file: a pipe would fill up
                process = subprocess.Popen(
                    self.command(copy, routes, port),
                    stdout=subprocess.DEVNULL,
                    stderr=sink,
                    env=self.environment(),
                )
            client = httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", timeout=120, limits=limits
            )
            self.servers.append(Server(port, process, client, log))

    async def stop(self) -> None:
        for server in self.servers:
            await server.client.aclose()
            stop_process(server.process, 30)


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
    current = Side("current", None, plain_http=False)
    sides = [current]
    if args.baseline_src is not None:
        sides.insert(0, Side("baseline", args.baseline_src, plain_http=args.baseline_plain_http))
    sides += [Side(f"replicas-{n}", None, plain_http=False, replicas=n) for n in args.replicas]
    for side in sides:
        for copy in side.copies(workdir):
            shutil.copytree(args.index, copy)
            shutil.rmtree(copy / "server", ignore_errors=True)
    report: dict[str, Any] = {
        "index": str(args.index),
        "method": args.method,
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "in_process": await asyncio.to_thread(
            in_process, current.copies(workdir)[0], questions, args.method, args.in_process
        ),
    }
    if args.baseline_src is not None:
        report["baseline"] = {"src": str(args.baseline_src), "plain_http": args.baseline_plain_http}

    retrieve = Retrievals(tuple(questions), args.method)

    def answer(i: int) -> tuple[str, dict[str, Any]]:
        q = questions[i % len(questions)]
        return "/api/workspaces/load/answer", {"question": q, "method": "sa-rag"}

    limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
    processes = args.client_processes
    report["client_processes"] = processes
    executor = _client_pool(processes) if processes > 1 else None

    async def measure(side: Side, clients: int) -> dict[str, Any]:
        if executor is None:
            return await load(side.clients, clients, args.seconds, retrieve)
        urls = [f"http://127.0.0.1:{server.port}" for server in side.servers]
        return await spread_load(executor, processes, urls, clients, args.seconds, retrieve)

    try:
        for side in sides:
            side.start(workdir, routes, limits)
        for side in sides:
            for server in side.servers:
                await _wait_up(server.client, server.process, server.log)
                for i in range(5):  # warm up: the query embedder loads on first use
                    path, body = retrieve(i)
                    (await server.client.post(path, json=body)).raise_for_status()
        # each number of clients on each side in turn, so a change of the machine's
        # load in between falls on all alike
        rows: dict[str, list[dict[str, Any]]] = {side.name: [] for side in sides}
        for n in args.clients:
            for side in sides:
                rows[side.name].append(await measure(side, n))
        for side in sides:
            if side.replicas > 1:
                report.setdefault("replicas", []).append(
                    {"replicas": side.replicas, "retrieve": rows[side.name]}
                )
                continue
            into = report if side is current else report["baseline"]
            into["retrieve"] = rows[side.name]
            if args.answer_clients:
                into["answer"] = await load(side.clients, args.answer_clients, args.seconds, answer)
            if upload:
                into["during_ingestion"] = await _during_ingestion(
                    side.clients[0], upload, retrieve, args
                )
    finally:
        if executor is not None:
            executor.shutdown()
        for side in sides:
            await side.stop()
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    p50 = report["in_process"]["p50_ms"] or 1.0
    for row in report["retrieve"]:
        row["p50_over_in_process"] = round(row["p50_ms"] / p50, 2)
    if args.baseline_src is not None:
        report["p95_current_over_baseline"] = _p95_ratios(
            report["retrieve"], report["baseline"]["retrieve"]
        )
    for entry in report.get("replicas", []):
        entry["p95_over_one_server"] = _p95_ratios(entry["retrieve"], report["retrieve"])
    return report


def _client_pool(processes: int) -> ProcessPoolExecutor:
    """``processes`` client processes, started now (spawned: this one runs an event loop
    and threads), so that no measurement waits for one to start."""
    executor = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"))
    list(executor.map(time.sleep, [0.5] * processes))  # each worker takes one
    return executor


def _p95_ratios(new: list[dict[str, Any]], old: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"clients": a["clients"], "ratio": round(a["p95_ms"] / b["p95_ms"], 2)}
        for a, b in zip(new, old, strict=True)
    ]


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
    figures = await load([client], args.ingest_clients, args.ingest_limit, retrieve, until=done)
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
    parser.add_argument("--answer-clients", type=int, default=32, help="0: no answers")
    parser.add_argument("--in-process", type=int, default=500, help="in-process retrievals")
    parser.add_argument("--upload-from", type=int, default=800)
    parser.add_argument("--upload", type=int, default=800, help="passages uploaded (0: none)")
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
    parser.add_argument(
        "--replicas",
        type=int,
        nargs="+",
        default=[],
        metavar="N",
        help="also serve today's code as N servers (N >= 2), each on its own copy of the "
        "index, the requests spread over them in turn",
    )
    parser.add_argument(
        "--client-processes",
        type=int,
        default=1,
        metavar="P",
        help="spread the retrieval clients over P processes (on a machine with cores to "
        "spare, so that one client process is not what limits many clients)",
    )
    args = parser.parse_args(argv)
    if args.client_processes < 1:
        parser.error("--client-processes must be 1 or more")
    if any(n < 2 for n in args.replicas):
        parser.error("--replicas takes numbers of servers of 2 or more (one is always measured)")
    with tempfile.TemporaryDirectory(prefix="quillian-load-") as tmp:
        report = asyncio.run(run(args, Path(tmp)))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
