"""The HTTP API on a real uvicorn server: retrieval with the activated subgraph, answers
plain and streamed, workspaces, graph browsing, bad input, limits, metrics."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest
from threadpoolctl import threadpool_info

from quillian.components.concurrency import ThreadOffload
from quillian.components.factories import RETRIEVERS
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.engine import Engine
from quillian.errors import ConfigError, QuillianError
from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.server.views import retrieval_json, retrieval_view
from quillian.testing.server import QUESTION, ROUTES, running, sse_events


@pytest.fixture(scope="module")
def client(built_index):
    settings = ServerSettings(
        workspaces=(WorkspaceSpec("main", built_index),),
        llm=ScriptedChatModel(ROUTES),
        # low thresholds, so the tiny graph's activated entities and relations show
        retriever_options={"sa": {"activation_threshold": 0.01, "relation_threshold": 0.0}},
    )
    with running(settings) as client:
        yield client


def test_openapi_publishes_every_resource(client):
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    for path in (
        "/healthz",
        "/metrics",
        "/api/workspaces",
        "/api/methods",
        "/api/workspaces/{ws}/retrieve",
        "/api/workspaces/{ws}/answer",
        "/api/workspaces/{ws}/documents",
        "/api/workspaces/{ws}/documents/files",
        "/api/workspaces/{ws}/documents/{doc_id}",
        "/api/workspaces/{ws}/jobs/{job_id}/events",
        "/api/workspaces/{ws}/jobs/{job_id}/cancel",
        "/api/workspaces/{ws}/entities/{entity}",
        "/v1/models",
        "/v1/chat/completions",
    ):
        assert path in paths, path
    assert "RetrieveResponse" in schema["components"]["schemas"]
    assert client.get("/healthz").json() == {"status": "ok", "workspaces": ["main"]}


def test_methods_come_from_the_method_table(client):
    body = client.get("/api/methods").json()
    by_name = {m["name"]: m for m in body["methods"]}
    assert by_name["sa-rag"]["retriever"] == "sa"
    assert by_name["sa-rag"]["model"] == "quillian-sa-rag"
    assert {o["name"] for o in by_name["sa-rag"]["options"]} == {
        "k",
        "max_relations",
        "open_answers",
    }
    assert body["answering"] is True and "ppr" in body["retrievers"]


def test_retrieve_returns_passages_and_the_activated_subgraph(client):
    body = client.post(
        "/api/workspaces/main/retrieve",
        json={"query": "Where was Charles Babbage born?", "method": "sa", "k": 2},
    ).json()
    assert [p["rank"] for p in body["passages"]] == [1, 2]
    assert body["passages"][0]["title"] == "Charles Babbage"
    scores = [p["score"] for p in body["passages"]]
    assert scores == sorted(scores, reverse=True)
    graph = body["subgraph"]
    assert {s["name"] for s in graph["seeds"]} == {"Charles Babbage"}
    assert graph["subgraph_nodes"] > 0 and set(graph["timings_ms"]) >= {"seed", "activate"}
    activation = {n["name"]: n["activation"] for n in graph["nodes"]}
    assert "Charles Babbage" in activation and len(activation) > 1
    assert all(a > 0.01 for a in activation.values())
    assert graph["edges"]
    for edge in graph["edges"]:
        assert edge["subject"] in activation and edge["object"] in activation
        assert edge["sentence"] and edge["predicate"]
    dense = client.post(
        "/api/workspaces/main/retrieve", json={"query": "Babbage", "method": "dense", "k": 1}
    ).json()
    assert len(dense["passages"]) == 1 and dense["subgraph"]["seeds"] == []


def assert_paths(paths, seeds, chunk_ids):
    """Each path starts at a seed, its steps join end to start with a relation read from a
    sentence, it ends at its entity, and at a returned passage where it names one."""
    for path in paths:
        assert path["seed"]["entity"] in seeds, path
        hops = [step["hop"] for step in path["steps"]]
        assert hops == sorted(hops) and hops[0] >= 1, path
        ends = [path["seed"]] + [step["target"] for step in path["steps"]]
        assert [step["source"] for step in path["steps"]] == ends[:-1]
        assert ends[-1] == path["entity"]
        for step in path["steps"]:
            assert {step["subject"], step["object"]} == {
                step["source"]["name"], step["target"]["name"],
            }  # fmt: skip
            assert step["sentence"] and step["predicate"] and step["relation"].startswith("rel-")
        assert path["chunk_id"] in chunk_ids | {""}
        assert bool(path["chunk_id"]) == bool(path["title"])


def test_retrieve_shows_the_path_from_the_seeds_to_each_passage(client):
    body = client.post(
        "/api/workspaces/main/retrieve", json={"query": QUESTION, "method": "sa", "k": 4}
    ).json()
    seeds = {s["entity"] for s in body["subgraph"]["seeds"]}
    chunk_ids = {p["chunk_id"] for p in body["passages"]}
    assert_paths(body["paths"], seeds, chunk_ids)
    by_title = {p["title"]: p for p in body["paths"]}
    (step,) = by_title["Charles Babbage"]["steps"]
    assert (step["source"]["name"], step["target"]["name"]) == ("Ada Lovelace", "Charles Babbage")
    assert step["sentence"] == "Ada Lovelace worked with Charles Babbage on the Analytical Engine."
    babbage = next(p for p in body["passages"] if p["title"] == "Charles Babbage")
    assert by_title["Charles Babbage"]["chunk_id"] == babbage["chunk_id"]
    dense = client.post(
        "/api/workspaces/main/retrieve", json={"query": QUESTION, "method": "dense"}
    ).json()
    assert dense["paths"] == []  # no graph, no path


def test_the_schema_publishes_the_paths(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["RetrieveResponse"]["properties"]["paths"]["items"] == {
        "$ref": "#/components/schemas/ReasoningPath"
    }
    assert "paths" in schemas["Citations"]["properties"]
    assert set(schemas["ReasoningPath"]["required"]) >= {"seed", "entity", "steps", "chunk_id"}
    assert set(schemas["PathStep"]["properties"]) == {
        "hop", "source", "target", "relation", "subject", "predicate", "object", "sentence",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        ("/api/workspaces/main/retrieve", {"query": "x", "method": "nope"}, 400, "nope"),
        ("/api/workspaces/main/retrieve", {"query": ""}, 422, "query"),
        ("/api/workspaces/main/retrieve", {"query": "   "}, 422, "query: is blank"),
        ("/api/workspaces/main/retrieve", {"query": "x", "k": 0}, 422, "k"),
        ("/api/workspaces/other/retrieve", {"query": "x"}, 404, "other"),
        ("/api/workspaces/main/answer", {"question": "x", "method": "magic"}, 400, "magic"),
        ("/api/workspaces/main/answer", {"question": ""}, 422, "question"),
        ("/api/workspaces/main/answer", {"question": "x", "options": {"z": 1}}, 400, "option(s) z"),
        ("/api/workspaces/main/answer", {"question": "x", "colour": 1}, 422, "colour"),
    ],
)
def test_bad_requests_are_4xx_naming_the_problem(client, path, body, status, words):
    response = client.post(path, json=body)
    assert response.status_code == status, response.text
    assert words in response.json()["detail"]


def test_malformed_json_is_422(client):
    response = client.post(
        "/api/workspaces/main/retrieve",
        content=b'{"query": ',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422
    assert "JSON" in response.json()["detail"]


def test_answer_has_citations_steps_subgraph_and_usage(client):
    body = client.post(
        "/api/workspaces/main/answer", json={"question": QUESTION, "options": {"k": 3}}
    ).json()
    assert body["answer"] == "London" and body["error"] == ""
    assert len(body["citations"]["passages"]) == 3
    assert "Charles Babbage" in [p["title"] for p in body["citations"]["passages"]]
    assert [s["kind"] for s in body["steps"]] == ["retrieval", "answer-reasoning"]
    (retrieval,) = body["retrievals"]
    assert retrieval["query"] == QUESTION and retrieval["subgraph"]["seeds"]
    assert body["usage"]["llm_calls"] == 1 and body["usage"]["completion_tokens"] > 0
    assert body["seconds"] > 0
    # how the graph reached the cited passages, as in the retrieval it came from
    cited = {p["chunk_id"] for p in body["citations"]["passages"]}
    seeds = {s["entity"] for s in retrieval["subgraph"]["seeds"]}
    paths = body["citations"]["paths"]
    assert any(p["chunk_id"] in cited for p in paths)
    assert_paths(paths, seeds, cited)
    assert {p["chunk_id"] for p in retrieval["paths"]} >= {p["chunk_id"] for p in paths}


def test_streamed_answer_sends_typed_events_in_order(client):
    plain = client.post("/api/workspaces/main/answer", json={"question": QUESTION}).json()
    with client.stream(
        "POST", "/api/workspaces/main/answer", json={"question": QUESTION, "stream": True}
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response.iter_lines())
    names = [name for name, _ in events]
    tokens = [json.loads(data) for name, data in events if name == "token"]
    assert names == ["retrieval", "step", *["token"] * len(tokens), "step", "final"]
    assert json.loads(events[0][1])["subgraph"]["seeds"]
    assert json.loads(events[0][1])["paths"] == plain["retrievals"][0]["paths"] != []
    assert json.loads(events[1][1])["kind"] == "retrieval"
    assert len(tokens) > 1 and {t["prompt"] for t in tokens} == {"sa-rag.answer@1"}
    assert "".join(t["text"] for t in tokens) == ROUTES["sa-rag.answer"]
    final = json.loads(events[-1][1])
    assert final["answer"] == plain["answer"] == "London"
    assert final["citations"] == plain["citations"]


def test_an_error_mid_stream_is_an_error_event(client):
    """cot-rag's reasoning prompt has no scripted route: it fails after retrieving."""
    with client.stream(
        "POST",
        "/api/workspaces/main/answer",
        json={"question": QUESTION, "method": "cot-rag", "stream": True},
    ) as response:
        assert response.status_code == 200
        events = sse_events(response.iter_lines())
    assert events[0][0] == "retrieval"
    name, data = events[-1]
    assert name == "error"
    error = json.loads(data)
    assert error["status"] == 400 and "sa-rag.cot" in error["detail"]


def test_graph_browsing(client):
    found = client.get("/api/workspaces/main/entities", params={"q": "babbage"}).json()
    assert found["total"] >= 1
    babbage = found["entities"][0]
    assert babbage["name"] == "Charles Babbage" and babbage["degree"] > 0
    near = client.get(f"/api/workspaces/main/entities/{babbage['id']}", params={"limit": 2}).json()
    assert near["entity"]["name"] == "Charles Babbage"
    assert near["total_edges"] == babbage["degree"] and len(near["edges"]) <= 2
    for edge in near["edges"]:
        assert babbage["id"] in (edge["source"], edge["target"]) and edge["sentence"]
    assert {p["chunk_id"] for p in near["passages"]} >= {e["chunk_id"] for e in near["edges"]}
    assert near["descriptions"] and near["nodes"]
    assert near["entity"]["id"] == babbage["id"] and babbage["id"] not in {
        n["id"] for n in near["nodes"]
    }
    old = client.get("/api/workspaces/main/entities/99999")  # ids were positions once
    assert old.status_code == 404 and "ids changed" in old.json()["detail"]
    gone = client.get("/api/workspaces/main/entities/ent-0000000000000000")
    assert gone.status_code == 404 and "ent-0000000000000000" in gone.json()["detail"]
    assert client.get("/api/workspaces/main/entities", params={"q": ""}).status_code == 422


def test_unknown_job_and_document_are_404(client):
    assert client.get("/api/workspaces/main/jobs/nope").status_code == 404
    assert client.get("/api/workspaces/main/jobs/nope/events").status_code == 404
    assert client.post("/api/workspaces/main/jobs/nope/cancel").status_code == 404
    response = client.delete("/api/workspaces/main/documents/doc-unknown")
    assert response.status_code == 404 and "doc-unknown" in response.json()["detail"]


def test_metrics_in_prometheus_text(client):
    client.post("/api/workspaces/main/retrieve", json={"query": "London"})
    text = client.get("/metrics").text
    assert (
        'quillian_http_requests_total{route="/api/workspaces/{ws}/retrieve",'
        'method="POST",status="200"}' in text
    )
    assert "quillian_http_request_seconds_bucket" in text
    assert 'quillian_llm_tokens_total{workspace="main",kind="prompt"}' in text


def test_cors_is_off_unless_configured(client, built_index):
    asked = {"Origin": "http://ui.example", "Access-Control-Request-Method": "POST"}
    response = client.options("/api/workspaces/main/retrieve", headers=asked)
    assert "access-control-allow-origin" not in response.headers
    settings = ServerSettings(
        workspaces=(WorkspaceSpec("main", built_index),), cors_origins=("http://ui.example",)
    )
    with running(settings) as other:
        response = other.options("/api/workspaces/main/retrieve", headers=asked)
        assert response.headers["access-control-allow-origin"] == "http://ui.example"


def test_size_limit_and_timeout(built_index):
    settings = ServerSettings(
        workspaces=(WorkspaceSpec("main", built_index),),
        llm=ScriptedChatModel(ROUTES, latency=2.0),
        max_request_bytes=2000,
        request_timeout_s=0.3,
    )
    with running(settings) as client:
        big = {"documents": [{"text": "word " * 1000}]}
        response = client.post("/api/workspaces/main/documents", json=big)
        assert response.status_code == 413 and "limit" in response.json()["detail"]
        response = client.post("/api/workspaces/main/answer", json={"question": QUESTION})
        assert response.status_code == 504
        with client.stream(
            "POST", "/api/workspaces/main/answer", json={"question": QUESTION, "stream": True}
        ) as stream:
            events = sse_events(stream.iter_lines())
        assert events[-1][0] == "error" and json.loads(events[-1][1])["status"] == 504


def test_without_a_model_answering_is_refused_retrieval_works(built_index):
    settings = ServerSettings(workspaces=(WorkspaceSpec("main", built_index),))
    with running(settings) as client:
        response = client.post("/api/workspaces/main/answer", json={"question": QUESTION})
        assert response.status_code == 400 and "model" in response.json()["detail"]
        assert client.post("/api/workspaces/main/retrieve", json={"query": "x"}).is_success


def _blas_threads(layer: str | None = None) -> list[int]:
    """Each loaded BLAS library's threads (those on ``layer`` alone, if given)."""
    return [
        pool["num_threads"]
        for pool in threadpool_info()
        if pool["user_api"] == "blas" and layer in (None, pool.get("threading_layer"))
    ]


@pytest.mark.parametrize("threads", [1, None])
def test_blas_threads_while_serving_and_as_they_were_after(built_index, threads):
    # the libraries on their own pthreads pool (numpy's, scipy's) keep one setting for
    # the process; OpenMP builds keep one per thread, set in the retrieval threads
    before = _blas_threads("pthreads")
    settings = ServerSettings(workspaces=(WorkspaceSpec("main", built_index),))
    settings = dataclasses.replace(settings, blas_threads=threads)
    with running(settings) as client:
        assert client.post("/api/workspaces/main/retrieve", json={"query": "x"}).is_success
        assert _blas_threads("pthreads") == (before if threads is None else [1] * len(before))
    assert _blas_threads("pthreads") == before


def test_each_retrieval_thread_sets_its_own_blas_threads():
    offload = ThreadOffload(2, blas_threads=1)
    try:
        inside = asyncio.run(offload(_blas_threads))
    finally:
        offload.close()
    assert inside == [1] * len(_blas_threads())
    with pytest.raises(ConfigError, match="blas_threads must be greater than 0"):
        ThreadOffload(2, blas_threads=0)


def test_blas_threads_below_one_are_refused():
    with pytest.raises(ConfigError, match="blas_threads must be 1 or more, got 0"):
        ServerSettings(workspaces=(WorkspaceSpec("main", "x"),), blas_threads=0)


def test_retrieval_json_is_the_models_json_for_every_retriever(built_index):
    # the thresholds of the client above, so the tiny graph's edges and paths show
    low = {"activation_threshold": 0.01, "relation_threshold": 0.0}
    engine = Engine.open(built_index, retriever_options={"sa": low})
    compared, shown_edges = [], 0
    try:
        for method in RETRIEVERS:
            try:
                result = engine.retrieve(QUESTION, method, 8)
            except QuillianError:  # needs what this index lacks (a model, a schema)
                continue
            nan = dataclasses.replace(result.passages[0], score=float("nan"))
            for shown in (result, dataclasses.replace(result, passages=[nan])):
                model = retrieval_view(shown, 0.25).model_dump_json().encode()
                assert retrieval_json(shown, 0.25) == model, method
            compared.append(method)
            data = json.loads(model)
            shown_edges += bool(data["subgraph"]["edges"]) and bool(data["paths"])
    finally:
        engine.close()
    assert {"sa", "ppr", "dense", "bm25", "fused"} <= set(compared)
    assert shown_edges
