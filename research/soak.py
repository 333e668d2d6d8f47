"""The soak: ``quillian serve`` under concurrent readers for a fixed time, with
uploads, deletes, odd inputs and server kills mixed in, then an account of every
document the server accepted.

Readers (``clients`` of them) loop on ``/retrieve`` (sa, ppr, dense, bm25) and
``/answer`` (sa-rag, scripted model), and now and then send an odd input (a query of
separators, control characters or an unpaired surrogate, a bad ``k``, an unknown
method, a streamed answer, a huge offset, malformed JSON). One writer uploads one to
three new documents every ``write_every_s`` (some with odd Unicode text) or deletes a
document an earlier upload stored. Every ``kill_every_s`` the server is killed
(SIGKILL) and started again; requests that find it down count as unavailable, not as
errors. At the end the writes stop, every job is waited on, and each document accepted
(202) is checked: stored with its exact text and found by a BM25 query for its unique
word, or listed as refused by its job; each document deleted is gone. A document that is
neither is lost.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx

from fault_tools import (
    METHODS,
    QUESTIONS,
    ROUTES,
    Backend,
    Child,
    corpus,
    free_port,
    index_command,
    percentiles,
    serve_command,
    wait_healthy,
)
from quillian.types import Document

__all__ = ["SoakSettings", "run_soak"]

logger = logging.getLogger(__name__)

WORKSPACE = "soak"
FINISHED = ("succeeded", "failed", "cancelled", "partial")
#: Characters odd inputs are drawn from: line and paragraph separators, NEL, controls,
#: a byte-order mark, combining marks, right-to-left text, emoji, CJK.
ODD = "\u2028\u2029\u0085\x00\x01\x1f\x7f\ufeff\u0301\u200d\u05d0\u05d1😀漢字\t\r"


@dataclass(frozen=True)
class SoakSettings:
    """How long and how hard the soak runs."""

    minutes: float = 10.0
    clients: int = 8
    seed: int = 1
    documents: int = 120
    """Documents in the served index at the start."""
    write_every_s: float = 2.0
    kill_every_s: float = 60.0
    """Seconds between server kills; 0: none."""
    drain_s: float = 300.0
    """Longest wait for the jobs left at the end."""


@dataclass
class _State:
    """What the soak saw, shared by its tasks."""

    url: str
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    unavailable: int = 0
    texts: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    """Accepted documents: id -> (title, text, job URL)."""
    samples: dict[str, str] = field(default_factory=dict)
    """The first body of each kind and error status (``"retrieve 503"``)."""
    refused_at_upload: int = 0
    deletes: dict[str, str] = field(default_factory=dict)
    """Deleted documents: id -> the delete job's URL."""
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    kills: int = 0
    survived: int = 0
    restart_s: list[float] = field(default_factory=list)

    def record(self, kind: str, status: int | str, seconds: float | None = None) -> None:
        self.statuses[kind][str(status)] += 1
        if status == 200 and seconds is not None:
            self.latencies[kind].append(seconds)


async def _send(
    state: _State, client: httpx.AsyncClient, kind: str, method: str, path: str, body: Any = None
) -> httpx.Response | None:
    """One request, its status recorded under ``kind``; None when the server is down.
    Bodies go as ASCII JSON (an unpaired surrogate travels as its escape)."""
    content = body if isinstance(body, bytes) else None
    if body is not None and content is None:
        content = json.dumps(body).encode()
    headers = {"content-type": "application/json"} if content is not None else {}
    start = time.perf_counter()
    try:
        response = await client.request(method, state.url + path, content=content, headers=headers)
        await response.aread()
    except httpx.TransportError as exc:
        state.unavailable += 1
        state.samples.setdefault(f"{kind} {type(exc).__name__}", str(exc)[:300])
        await asyncio.sleep(0.2)
        return None
    state.record(kind, response.status_code, time.perf_counter() - start)
    if response.status_code >= 400:
        state.samples.setdefault(f"{kind} {response.status_code}", response.text[:300])
    return response


def _odd_text(rng: random.Random, n: int) -> str:
    return "".join(
        rng.choice(ODD) if rng.random() < 0.3 else rng.choice("abc xyz") for _ in range(n)
    )


def _odd_input(rng: random.Random, ws: str) -> tuple[str, str, str, Any]:
    """``(kind, method, path, body)`` of one odd request."""
    q = rng.choice(QUESTIONS)
    cases: list[tuple[str, str, str, Any]] = [
        ("odd-query", "POST", "/retrieve", {"query": _odd_text(rng, 40), "method": "bm25"}),
        ("surrogate-query", "POST", "/retrieve", {"query": "a\ud800b", "method": "sa"}),
        ("bad-k", "POST", "/retrieve", {"query": q, "k": rng.choice([0, -1, 101, 10**30, "5"])}),
        ("unknown-method", "POST", "/retrieve", {"query": q, "method": "nope"}),
        ("empty-question", "POST", "/answer", {"question": ""}),
        ("bad-option", "POST", "/answer", {"question": q, "options": {"k": "abc"}}),
        ("stream-answer", "POST", "/answer", {"question": q, "stream": True}),
        ("huge-offset", "GET", f"/jobs?offset={10**24}", None),
        ("unknown-document", "GET", f"/documents/doc-{rng.getrandbits(64):x}", None),
        ("malformed-json", "POST", "/retrieve", b'{"query": "a", '),
    ]
    kind, method, path, body = rng.choice(cases)
    return kind, method, f"/api/workspaces/{ws}{path}", body


async def _reader(state: _State, client: httpx.AsyncClient, seed: int, stop: float) -> None:
    rng = random.Random(seed)
    ws = f"/api/workspaces/{WORKSPACE}"
    while time.monotonic() < stop:
        roll, question = rng.random(), rng.choice(QUESTIONS)
        if roll < 0.6:
            method = rng.choice(METHODS)
            body = {"query": question, "method": method, "k": 5}
            await _send(state, client, "retrieve", "POST", f"{ws}/retrieve", body)
        elif roll < 0.85:
            body = {"question": question, "method": "sa-rag"}
            await _send(state, client, "answer", "POST", f"{ws}/answer", body)
        else:
            await _send(state, client, *_odd_input(rng, WORKSPACE))


def _word(n: int) -> str:
    """A word no other document holds (letters only, so BM25 keeps it whole)."""
    letters = ""
    n += 26 * 26
    while n:
        n, r = divmod(n, 26)
        letters += chr(ord("a") + r)
    return f"soak{letters}"


async def _writer(
    state: _State, client: httpx.AsyncClient, seed: int, stop: float, every: float
) -> None:
    rng = random.Random(seed)
    ws = f"/api/workspaces/{WORKSPACE}"
    n = 0
    while time.monotonic() < stop:
        await asyncio.sleep(every)
        await _poll_jobs(state, client)
        stored = [d for d, (_, _, job) in state.texts.items() if _stored(state, job, d)]
        if stored and rng.random() < 0.3:
            doc = rng.choice(stored)
            response = await _send(state, client, "delete", "DELETE", f"{ws}/documents/{doc}")
            if response is not None and response.status_code == 202:
                state.deletes[doc] = state.url + response.headers["location"]
            continue
        docs = []
        for _ in range(rng.randint(1, 3)):
            n += 1
            row = corpus(1, seed + n, start=10_000 + n)[0]
            text = f"{row['text']} Its keyword is {_word(n)}."
            if rng.random() < 0.25:
                text += " " + _odd_text(rng, 30)
            docs.append({"title": row["title"], "text": text})
        response = await _send(
            state, client, "upload", "POST", f"{ws}/documents", {"documents": docs}
        )
        if response is None:
            continue
        if response.status_code != 202:
            state.refused_at_upload += len(docs)
            continue
        job = state.url + response.headers["location"]
        for d in docs:
            state.texts[Document(d["text"], d["title"]).id] = (d["title"], d["text"], job)


def _stored(state: _State, job_url: str, doc_id: str) -> bool:
    job = state.jobs.get(job_url.rsplit("/", 1)[-1], {})
    refused = {f.get("doc_id") for f in job.get("failures", [])}
    return (
        job.get("state") in ("succeeded", "partial")
        and doc_id not in refused
        and doc_id not in state.deletes
    )


async def _poll_jobs(state: _State, client: httpx.AsyncClient) -> int:
    """Fetch every job not known finished; how many are still unfinished."""
    urls = {job for _, _, job in state.texts.values()} | set(state.deletes.values())
    left = 0
    for url in urls:
        key = url.rsplit("/", 1)[-1]
        if state.jobs.get(key, {}).get("state") in FINISHED:
            continue
        try:
            response = await client.get(url)
        except httpx.TransportError:
            return -1
        if response.status_code == 200:
            state.jobs[key] = response.json()
        left += state.jobs.get(key, {}).get("state") not in FINISHED
    return left


class _Server:
    """The served index: started, killed and started again on one port."""

    def __init__(self, backend: Backend, location: str, routes: Any) -> None:
        self.port = free_port()
        self.command = serve_command(WORKSPACE, location, self.port, routes)
        self.log = backend.work / "soak-serve.log"
        self.child: Child | None = None

    def start(self) -> float:
        self.child = Child(self.command, self.log)
        return wait_healthy(f"http://127.0.0.1:{self.port}", self.child)

    def kill(self) -> None:
        if self.child is not None:
            self.child.kill()

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()


async def _killer(state: _State, server: _Server, stop: float, every: float) -> None:
    while every > 0 and time.monotonic() + every < stop:
        await asyncio.sleep(every)
        server.kill()
        state.kills += 1
        logger.info("soak: server killed (%d)", state.kills)
        state.restart_s.append(round(await asyncio.to_thread(server.start), 1))
        state.survived += 1


def run_soak(backend: Backend, settings: SoakSettings) -> dict[str, Any]:
    """Serve an index of ``settings.documents`` on ``backend`` and soak it."""
    work = backend.work
    routes = work / "routes.json"
    routes.write_text(json.dumps(ROUTES), encoding="utf-8")
    corpus_file = work / "soak-corpus.json"
    corpus_file.write_text(json.dumps(corpus(settings.documents, settings.seed)), encoding="utf-8")
    location = backend.location("soak")
    with Child(index_command(corpus_file, location), work / "soak-index.log") as child:
        if child.wait(600) != 0:
            raise RuntimeError(f"indexing failed: {' | '.join(child.tail())}")
    server = _Server(backend, location, routes)
    try:
        server.start()
        return asyncio.run(_soak(server, settings))
    finally:
        server.stop()


async def _soak(server: _Server, settings: SoakSettings) -> dict[str, Any]:
    state = _State(f"http://127.0.0.1:{server.port}")
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(timeout=180, limits=limits) as client:
        begin = time.monotonic()
        stop = begin + settings.minutes * 60
        s = settings.seed
        await asyncio.gather(
            *(_reader(state, client, s * 1000 + i, stop) for i in range(settings.clients)),
            _writer(state, client, s, stop, settings.write_every_s),
            _killer(state, server, stop, settings.kill_every_s),
        )
        elapsed = time.monotonic() - begin
        deadline = time.monotonic() + settings.drain_s
        while (left := await _poll_jobs(state, client)) != 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        documents = await _account(state, client)
        documents["jobs_unfinished_at_end"] = max(left, 0)
    return {"settings": settings.__dict__, "soak": _report(state, elapsed, documents)}


async def _account(state: _State, client: httpx.AsyncClient) -> dict[str, Any]:
    """Every accepted document kept (exact text, found by BM25), refused, or deleted."""
    ws = f"{state.url}/api/workspaces/{WORKSPACE}"
    tally: Counter[str] = Counter()
    lost: list[dict[str, Any]] = []
    reasons: Counter[str] = Counter()
    for doc_id, (title, text, job_url) in state.texts.items():
        job = state.jobs.get(job_url.rsplit("/", 1)[-1], {})
        if doc_id in {f.get("doc_id") for f in job.get("failures", [])}:
            tally["refused"] += 1
            continue
        got = await client.get(f"{ws}/documents/{doc_id}")
        if doc_id in state.deletes:
            deleted = state.jobs.get(state.deletes[doc_id].rsplit("/", 1)[-1], {})
            tally["deleted" if got.status_code == 404 else "not_deleted"] += 1
            if got.status_code != 404:
                lost.append({"doc": doc_id, "why": f"deleted ({deleted.get('state')}) but found"})
            continue
        body = got.json() if got.status_code == 200 else {}
        if got.status_code != 200 or body.get("status") != "processed":
            tally["lost"] += 1
            why = f"GET {got.status_code} {body.get('status', '')}; job {job.get('state')}"
            lost.append({"doc": doc_id, "why": why, "job_error": job.get("error", "")[:200]})
            reasons[f"job {job.get('state')}: {job.get('error', '')[:80]}"] += 1
            continue
        if body.get("text") != text:
            tally["altered"] += 1
            lost.append({"doc": doc_id, "why": "stored text differs from the upload"})
            continue
        word = text.split("Its keyword is ")[1].split(".")[0]
        found = await client.post(f"{ws}/retrieve", json={"query": word, "method": "bm25", "k": 5})
        titles = [p["title"] for p in found.json().get("passages", [])] if found.is_success else []
        tally["kept" if title in titles else "not_retrieved"] += 1
    return {
        "accepted": len(state.texts),
        "refused_at_upload": state.refused_at_upload,
        **{k: tally[k] for k in ("kept", "refused", "deleted")},
        "lost": tally["lost"] + tally["not_retrieved"],
        "not_retrieved": tally["not_retrieved"],
        "altered": tally["altered"],
        "not_deleted": tally["not_deleted"],
        "lost_by_reason": dict(reasons.most_common()),
        "examples": lost[:5],
    }


def _report(state: _State, elapsed: float, documents: dict[str, Any]) -> dict[str, Any]:
    load = {
        kind: {
            "ok": len(state.latencies[kind]),
            "rps": round(len(state.latencies[kind]) / elapsed, 1),
            **percentiles(state.latencies[kind]),
        }
        for kind in ("retrieve", "answer")
    }
    statuses = {kind: dict(counts) for kind, counts in sorted(state.statuses.items())}
    server_errors = sum(
        n for counts in state.statuses.values() for s, n in counts.items() if s.startswith("5")
    )
    jobs = Counter(f"{j.get('kind', '?')} {j.get('state', '?')}" for j in state.jobs.values())
    return {
        "seconds": round(elapsed, 1),
        "load": load,
        "statuses": statuses,
        "inputs_tried": sum(sum(c.values()) for c in state.statuses.values()),
        "server_errors": server_errors,
        "unavailable": state.unavailable,
        "error_samples": dict(sorted(state.samples.items())),
        "faults": {"kills": state.kills, "survived": state.survived, "restart_s": state.restart_s},
        "jobs": dict(jobs),
        "documents": documents,
    }
