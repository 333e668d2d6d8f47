"""``POST /api/workspaces/{ws}/graph/links``: the links the web UI draws between a
retrieval's entities and passages, checked against the tiny corpus by hand."""

from __future__ import annotations

import pytest

from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.testing.server import running


@pytest.fixture(scope="module")
def client(built_index):
    with running(ServerSettings(workspaces=(WorkspaceSpec("main", built_index),))) as client:
        yield client


def _entity(client, name: str) -> str:
    found = client.get("/api/workspaces/main/entities", params={"q": name}).json()
    hit = next(e for e in found["entities"] if e["name"] == name)
    return hit["id"]


def _chunk(client, title: str) -> str:
    body = client.post(
        "/api/workspaces/main/retrieve", json={"query": title, "method": "bm25", "k": 4}
    ).json()
    return next(p["chunk_id"] for p in body["passages"] if p["title"] == title)


def test_links_join_passages_to_the_entities_they_describe(client):
    babbage, turing = _entity(client, "Charles Babbage"), _entity(client, "Alan Turing")
    babbage_page, turing_page = _chunk(client, "Charles Babbage"), _chunk(client, "Alan Turing")
    body = client.post(
        "/api/workspaces/main/graph/links",
        json={"entities": [babbage, turing], "chunk_ids": [babbage_page, turing_page]},
    )
    assert body.status_code == 200
    links = body.json()
    pairs = {(m["chunk_id"], m["entity"]) for m in links["mentions"]}
    # each page describes its own subject, and not the other page's
    assert (babbage_page, babbage) in pairs and (turing_page, turing) in pairs
    assert (babbage_page, turing) not in pairs and (turing_page, babbage) not in pairs
    # description nodes only from the passages given, each naming its entity
    assert links["descriptions"]
    for description in links["descriptions"]:
        assert description["chunk_id"] in {babbage_page, turing_page}
        assert description["entity"] in {babbage, turing} and description["text"]
    # only the entities asked for
    only_turing = client.post(
        "/api/workspaces/main/graph/links",
        json={"entities": [turing], "chunk_ids": [babbage_page, turing_page]},
    ).json()
    assert {m["entity"] for m in only_turing["mentions"]} == {turing}


def test_links_refuse_unknown_entities_and_passages(client):
    gone = "ent-0000000000000000"
    unknown = client.post(
        "/api/workspaces/main/graph/links", json={"entities": [gone], "chunk_ids": []}
    )
    assert unknown.status_code == 404 and gone in unknown.json()["detail"]
    for old, words in ((99999, "ids changed"), ("3", "ids changed"), (False, "ent-")):
        refused = client.post(
            "/api/workspaces/main/graph/links", json={"entities": [old], "chunk_ids": []}
        )
        assert refused.status_code == 422 and words in refused.json()["detail"]
    missing = client.post(
        "/api/workspaces/main/graph/links", json={"entities": [], "chunk_ids": ["chk-nope"]}
    )
    assert missing.status_code == 404 and "chk-nope" in missing.json()["detail"]
    assert client.post("/api/workspaces/main/graph/links", json={"entity": [1]}).status_code == 422
