"""Ids the API hands out stay valid (issue 51, defect 3): an entity id taken before an
upload names the same entity after it and after a delete of another document, through
the real server and its job runner; an entity that is gone is a 404, never the entity
now at its old position; old integer ids are refused saying that ids changed. On a
directory index and on a PostgreSQL workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.testing.server import build_index, running, wait_for_job

#: Uploaded ahead of the others in the graph's order (its chunk id sorts first in the
#: builds tried), so every later entity's position moves: Ada Lovelace's old position
#: is this document's title entity's after the upload.
SHIFTING = {
    "title": "Babbage's analytical work",
    "text": "Augusta Ada King met Charles Babbage in Marylebone. Babbage lived in London.",
}


def _ids(client, ws: str) -> dict[str, str]:
    body = client.get(f"/api/workspaces/{ws}/entities", params={"q": "a", "limit": 200})
    assert body.status_code == 200, body.text
    return {e["name"]: e["id"] for e in body.json()["entities"]}


def _entity(client, ws: str, entity_id: str):
    return client.get(f"/api/workspaces/{ws}/entities/{entity_id}")


def _ids_survive_upload_and_delete(client, ws: str) -> None:
    before = _ids(client, ws)
    ada, turing = before["Ada Lovelace"], before["Alan Turing"]
    assert _entity(client, ws, ada).json()["entity"]["name"] == "Ada Lovelace"

    upload = client.post(f"/api/workspaces/{ws}/documents", json={"documents": [SHIFTING]})
    assert upload.status_code == 202, upload.text
    assert wait_for_job(client, upload.headers["location"])["state"] == "succeeded"
    near = _entity(client, ws, ada)
    assert near.status_code == 200 and near.json()["entity"]["name"] == "Ada Lovelace"
    assert near.json()["entity"]["id"] == ada
    after = _ids(client, ws)
    assert "Augusta Ada King" in after  # the upload is in the graph
    assert {name: after[name] for name in before} == before  # no id changed meaning
    assert ada.startswith("ent-") and len(set(after.values())) == len(after)

    docs = client.get(f"/api/workspaces/{ws}/documents", params={"limit": 50}).json()
    (turing_doc,) = [d["id"] for d in docs["documents"] if d["title"] == "Alan Turing"]
    delete = client.delete(f"/api/workspaces/{ws}/documents/{turing_doc}")
    assert wait_for_job(client, delete.headers["location"])["state"] == "succeeded"
    assert _entity(client, ws, ada).json()["entity"]["name"] == "Ada Lovelace"
    assert _ids(client, ws)["Charles Babbage"] == before["Charles Babbage"]
    gone = _entity(client, ws, turing)
    assert gone.status_code == 404
    detail = gone.json()["detail"]
    assert turing in detail and "\n" not in detail and "deleted" in detail
    for name in ("Maida Vale", "Bletchley Park"):  # named only by the deleted document
        assert _entity(client, ws, before[name]).status_code == 404


def test_an_entity_id_names_the_same_entity_after_an_upload_and_a_delete(index_copy):
    with running(ServerSettings(workspaces=(WorkspaceSpec("main", index_copy),))) as client:
        _ids_survive_upload_and_delete(client, "main")


@pytest.mark.postgres
def test_ids_survive_upload_and_delete_on_postgres_and_match_a_directory_index(
    postgres_url: str, tmp_path: Path
) -> None:
    pytest.importorskip("psycopg")
    build_index(postgres_url)  # type: ignore[arg-type]
    directory = build_index(tmp_path / "idx")
    settings = ServerSettings(
        workspaces=(WorkspaceSpec.parse(f"pg={postgres_url}"), WorkspaceSpec("dir", directory))
    )
    with running(settings) as client:
        assert _ids(client, "pg") == _ids(client, "dir")  # both backends agree
        _ids_survive_upload_and_delete(client, "pg")


@pytest.fixture(scope="module")
def client(built_index):
    with running(ServerSettings(workspaces=(WorkspaceSpec("main", built_index),))) as client:
        yield client


@pytest.mark.parametrize("old", ["0", "19", "-1", "99999"])
def test_an_integer_id_is_refused_saying_ids_changed(client, old):
    response = _entity(client, "main", old)
    assert response.status_code == 404
    detail = response.json()["detail"]
    assert "ids changed" in detail and "ent-" in detail and "\n" not in detail
    links = client.post(
        "/api/workspaces/main/graph/links", json={"entities": [int(old)], "chunk_ids": []}
    )
    assert links.status_code == 422 and "ids changed" in links.json()["detail"]


def test_every_id_in_a_retrieval_and_a_neighbourhood_is_content_derived(client):
    """The ids a retrieval's subgraph hands out open the same entities and relations in
    the graph browser: the seed's id is the entity's, its relations' ids are the ones
    its neighbourhood shows."""
    body = client.post(
        "/api/workspaces/main/retrieve",
        json={"query": "Where was Charles Babbage born?", "method": "sa", "k": 2},
    ).json()
    graph = body["subgraph"]
    (seed,) = graph["seeds"]
    assert seed["entity"] == _ids(client, "main")["Charles Babbage"]
    for node in graph["nodes"]:
        near = _entity(client, "main", node["entity"])
        assert near.status_code == 200 and near.json()["entity"]["name"] == node["name"]
    near = _entity(client, "main", seed["entity"]).json()
    related = {e["relation"] for e in near["edges"]}
    assert all(e["relation"].startswith("rel-") for e in near["edges"])
    assert {
        e["relation"] for e in graph["edges"] if seed["name"] in (e["subject"], e["object"])
    } <= related
    ends = {e["source"] for e in near["edges"]} | {e["target"] for e in near["edges"]}
    assert seed["entity"] in ends and ends - {seed["entity"]} == {n["id"] for n in near["nodes"]}
    assert all(d["id"].startswith("desc-") for d in near["descriptions"])
    again = client.post(
        "/api/workspaces/main/retrieve",
        json={"query": "Where was Charles Babbage born?", "method": "sa", "k": 2},
    ).json()
    assert again["subgraph"] == {**graph, "timings_ms": again["subgraph"]["timings_ms"]}


def test_the_schema_says_what_an_id_is(client):
    schema = client.get("/openapi.json").json()
    models = schema["components"]["schemas"]
    for model, field in (("EntityHit", "id"), ("SeedNode", "entity"), ("GraphEdge", "source")):
        prop = models[model]["properties"][field]
        assert prop["type"] == "string" and prop["pattern"].startswith("^ent-"), model
        assert "uploads" in prop["description"]
    assert models["UsedEdge"]["properties"]["relation"]["pattern"].startswith("^rel-")
    assert models["EntityDescription"]["properties"]["id"]["pattern"].startswith("^desc-")
    assert "chunk-" in models["Passage"]["properties"]["chunk_id"]["description"]
    (param,) = [
        p
        for p in schema["paths"]["/api/workspaces/{ws}/entities/{entity}"]["get"]["parameters"]
        if p["name"] == "entity"
    ]
    assert param["schema"]["type"] == "string" and "ent-" in param["description"]
