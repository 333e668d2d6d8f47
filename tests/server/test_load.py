"""The service's load benchmark (``python -m quillian.server.load``): a short real run
of one server beside two replicas on the test index, the clients in two processes, the
requests spread over the servers in turn, and its report on the benchmark page."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import httpx
import pytest

from quillian.bench.report_sections import serve_section
from quillian.server import load
from quillian.testing.server import CORPUS, QUESTION, build_index


def test_requests_are_spread_over_the_servers_in_turn() -> None:
    seen: Counter[str] = Counter()

    def server(name: str) -> httpx.AsyncClient:
        def reply(request: httpx.Request) -> httpx.Response:
            seen[name] += 1
            return httpx.Response(200, json={})

        return httpx.AsyncClient(base_url="http://x", transport=httpx.MockTransport(reply))

    async def measure() -> dict[str, object]:
        servers = [server("a"), server("b"), server("c")]
        stop = asyncio.Event()

        def request(i: int) -> tuple[str, dict[str, object]]:
            if i == 29:
                stop.set()
            return "/retrieve", {"i": i}

        return await load.load(servers, 1, 30.0, request, until=stop)

    row = asyncio.run(measure())
    assert seen == {"a": 10, "b": 10, "c": 10}
    assert row["requests"] == 30 and row["errors"] == 0
    assert 0 <= float(row["client_core_share"]) <= 1.5  # type: ignore[arg-type]


@pytest.mark.model
def test_one_server_and_two_replicas_are_measured_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = build_index(tmp_path / "index")
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps([{"title": t, "text": x} for t, x in CORPUS.items()]))
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"question": QUESTION}) + "\n")
    argv = [str(index), "--corpus", str(corpus), "--questions", str(questions)]
    argv += ["--seconds", "0.5", "--clients", "1", "4", "--in-process", "3"]
    argv += ["--answer-clients", "0", "--upload", "0", "--replicas", "2"]
    argv += ["--client-processes", "2"]

    assert load.main(argv) == 0
    report = json.loads(capsys.readouterr().out)

    assert report["client_processes"] == 2
    (replicas,) = report["replicas"]
    assert replicas["replicas"] == 2
    for rows in (report["retrieve"], replicas["retrieve"]):
        assert [r["clients"] for r in rows] == [1, 4]
        assert all(r["requests"] > 0 and r["errors"] == 0 for r in rows)
    assert [r["clients"] for r in replicas["p95_over_one_server"]] == [1, 4]
    assert "answer" not in report and "during_ingestion" not in report
    page = "\n".join(serve_section(report))
    assert "retrieve `sa`, 2 servers | 4 |" in page
    assert "answer `sa-rag`" not in page and "ingested" not in page


def test_replicas_of_one_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        load.main(["index", "--corpus", "c", "--questions", "q", "--replicas", "1"])
    assert exit_info.value.code == 2
    assert "2 or more" in capsys.readouterr().err
