"""Bad input for the PostgreSQL backend: an unreachable server, wrong credentials, a
database without pgvector, a workspace built with another embedding model. Each is a
clear :mod:`quillian.errors` error naming the problem, raised before anything is
written (a real server; marked ``postgres``)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

import quillian.stores
from quillian.cli.main import main
from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import HashEmbedder
from quillian.errors import ConfigError, IndexMissingError, MissingExtraError, StoreError
from quillian.index import build_index, open_storage, read_manifest
from quillian.testing.extractors import TitleLinkExtractor
from quillian.testing.postgres import PostgresServer, password_user, server_without_pgvector
from quillian.types import Document

pytest.importorskip("psycopg")
from quillian.stores.postgres import PgVectorIndex, Workspace

pytestmark = pytest.mark.postgres

CORPUS = {"Ada": "Ada met Bob.", "Bob": "Bob lives in Paris.", "Paris": "Paris is a city."}


def _docs() -> list[Document]:
    return [Document(text=text, title=title) for title, text in CORPUS.items()]


def _build(location: str, embedder: HashEmbedder) -> None:
    build_index(
        _docs(),
        location,
        chunker=PassageChunker(),
        extractor=TitleLinkExtractor(CORPUS),
        embedder=embedder,
    )


def _schemas(server: PostgresServer, name: str) -> int:
    rows = server.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (name,))
    return int(rows[0][0])


def test_unreachable_server_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = "postgresql://quillian@127.0.0.1:1/db?workspace=w&deadline=1"
    with pytest.raises(StoreError, match="unreachable") as info:
        read_manifest(url)
    assert "127.0.0.1:1" in str(info.value)
    (tmp_path / "c.json").write_text('[{"title": "A", "text": "a"}]')
    assert main(["index", str(tmp_path / "c.json"), "--out", url, "--embedder", "hash"]) == 2
    assert "unreachable" in capsys.readouterr().err


def test_wrong_password_is_named_and_not_shown(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    password_user(postgres_server, "quillian_pw", "right-one")
    workspace = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.url(workspace, tmp_path / "cache").replace(
        "postgres:@", "quillian_pw:wrong-one@"
    )
    with pytest.raises(StoreError, match="wrong credentials") as info:
        _build(url, HashEmbedder())
    assert "wrong-one" not in str(info.value)
    assert _schemas(postgres_server, workspace) == 0
    right = url.replace("wrong-one", "right-one")
    with pytest.raises(IndexMissingError, match="no manifest"):
        read_manifest(right)  # the right password gets in: nothing was written


def test_database_without_the_vector_extension(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """A database where ``vector`` is not created and the user may not create it."""
    database, user = f"novector_{uuid.uuid4().hex[:8]}", "quillian_plain"
    postgres_server.execute(f'DROP ROLE IF EXISTS "{user}"')
    postgres_server.execute(f'CREATE ROLE "{user}" LOGIN')
    postgres_server.execute(f'CREATE DATABASE "{database}" OWNER "{user}"')
    try:
        url = postgres_server.url("w", tmp_path / "cache").replace(
            "postgres:@/postgres", f"{user}@/{database}"
        )
        with pytest.raises(StoreError, match="no 'vector' extension") as info:
            _build(url, HashEmbedder())
        assert "CREATE EXTENSION vector" in str(info.value)
        with Workspace(url, create=False) as workspace:
            assert not workspace.exists  # no schema, no table
    finally:
        postgres_server.execute(f'DROP DATABASE "{database}" WITH (FORCE)')


def test_another_embedding_model_is_refused_before_writing(postgres_url: str) -> None:
    _build(postgres_url, HashEmbedder(64))
    before = read_manifest(postgres_url)
    with pytest.raises(ConfigError, match=r"embedding model 'hash-64', not 'hash-32'"):
        _build(postgres_url, HashEmbedder(32))
    assert read_manifest(postgres_url) == before


class _Mislabelled(HashEmbedder):
    """A real embedder whose name says 64 dimensions while it gives 32."""

    @property
    def model_id(self) -> str:
        return "hash-64"


def test_another_dimension_is_refused_before_writing(postgres_url: str) -> None:
    _build(postgres_url, HashEmbedder(64))
    before = read_manifest(postgres_url)
    with pytest.raises(ConfigError, match="embedding dimension 64, not 32"):
        _build(postgres_url, _Mislabelled(32))
    assert read_manifest(postgres_url) == before
    with open_storage(postgres_url) as storage:
        assert storage.documents.count_documents() == 3
        with pytest.raises(ConfigError, match="64-dimensional vectors, not 32"):
            PgVectorIndex(storage.workspace, "chunks", 32)


def test_a_server_too_old_is_named_before_anything_is_written(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from quillian.stores.postgres import _pg

    monkeypatch.setattr(_pg, "MIN_SERVER_VERSION", 990000)  # the test server is older
    with pytest.raises(ConfigError, match=r"server is version \d+; Quillian needs 99 or later"):
        _build(postgres_url, HashEmbedder(64))
    monkeypatch.undo()
    with Workspace(postgres_url, create=False) as workspace:
        assert not workspace.exists


def test_bad_workspace_name_is_refused(postgres_server: PostgresServer) -> None:
    with pytest.raises(ConfigError, match="workspace 'No-Such!'"):
        read_manifest(postgres_server.url("No-Such!"))


def test_missing_workspace_does_not_open(postgres_server: PostgresServer) -> None:
    with pytest.raises(IndexMissingError, match="no such workspace"):
        open_storage(postgres_server.url("never_created"))


def test_server_without_pgvector_installed(postgres_server: PostgresServer, tmp_path: Path) -> None:
    with server_without_pgvector() as uri:
        url = f"{uri}&workspace=w&cache={tmp_path / 'cache'}"
        with pytest.raises(StoreError, match=r"pgvector extension \('vector'\) is not installed"):
            _build(url, HashEmbedder())
        with Workspace(url, create=False) as workspace:
            assert not workspace.exists


def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without psycopg installed, a PostgreSQL location asks for the ``postgres`` extra."""
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what a missing package looks like
    for name in [m for m in sys.modules if m.startswith("quillian.stores.postgres")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(quillian.stores, "postgres", raising=False)
    with pytest.raises(MissingExtraError, match=r"quillian\[postgres\]"):
        read_manifest("postgresql://quillian@127.0.0.1:1/db?workspace=w")
