"""``quillian serve`` over a PostgreSQL workspace: the HTTP API retrieves from it as it
does from a directory (a real server; marked ``postgres``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.testing.server import build_index, running

pytest.importorskip("psycopg")

pytestmark = pytest.mark.postgres


def test_a_workspace_location_is_parsed_whole(postgres_url: str) -> None:
    spec = WorkspaceSpec.parse(postgres_url)
    assert spec.location == postgres_url and spec.name.startswith("t_")
    named = WorkspaceSpec.parse(f"main={postgres_url}")
    assert (named.name, named.location) == ("main", postgres_url)


def test_serve_retrieves_from_postgres(postgres_url: str, tmp_path: Path) -> None:
    embedded = build_index(tmp_path / "idx")
    build_index(postgres_url)  # type: ignore[arg-type]
    settings = ServerSettings(
        workspaces=(WorkspaceSpec.parse(f"pg={postgres_url}"), WorkspaceSpec("dir", embedded))
    )
    query = {"query": "Where was Charles Babbage born?", "method": "sa", "k": 2}
    with running(settings) as client:
        got = client.post("/api/workspaces/pg/retrieve", json=query).json()
        expected = client.post("/api/workspaces/dir/retrieve", json=query).json()
    assert got["passages"][0]["title"] == "Charles Babbage"
    assert [p["chunk_id"] for p in got["passages"]] == [p["chunk_id"] for p in expected["passages"]]
