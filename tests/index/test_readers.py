"""Readers beside a writer in another process: every manifest write raises its
generation, an index opened while a build begins is loaded again (never a mix of two
builds' files), and an engine keeps serving the build it opened until another process
completes a newer one, which it then opens."""

from __future__ import annotations

from pathlib import Path

import pytest

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.engine import Engine
from quillian.errors import IndexIncompleteError
from quillian.index import open as opening
from quillian.index import open_index, read_manifest
from quillian.index.layout import GENERATION, write_manifest
from quillian.testing.corpus import LOVELACE, build_tiny

HOPPER = {"Grace Hopper": "Grace Hopper wrote the first compiler for the Harvard Mark I."}


def rewrite(location: str | Path, **changes: object) -> None:
    """What another process's build does to the manifest: write it anew."""
    write_manifest(location, {**read_manifest(location), **changes})


def test_every_manifest_write_raises_the_generation(index_location) -> None:
    location = index_location("generation")
    build_tiny(location)
    built = read_manifest(location)[GENERATION]
    assert built >= 2  # building, then complete
    rewrite(location)
    assert read_manifest(location)[GENERATION] == built + 1
    # a manifest made anew (no generation) for a location that holds one counts on
    write_manifest(location, {k: v for k, v in read_manifest(location).items() if k != GENERATION})
    assert read_manifest(location)[GENERATION] == built + 2
    build_tiny(location)  # an unchanged rebuild still writes: building, then complete
    assert read_manifest(location)[GENERATION] == built + 4


def test_an_index_rewritten_while_it_loads_is_loaded_again(tmp_path, monkeypatch) -> None:
    location = tmp_path / "index"
    build_tiny(location)
    load = opening._load
    loads: list[int] = []

    def load_while_a_build_completes(*args: object):
        loads.append(read_manifest(location)[GENERATION])
        index = load(*args)
        if len(loads) == 1:
            rewrite(location)  # another process's build completed meanwhile
        return index

    monkeypatch.setattr(opening, "_load", load_while_a_build_completes)
    index = open_index(location, KeywordEmbedder())
    assert loads == [loads[0], loads[0] + 1]
    assert index.manifest[GENERATION] == loads[1]


def test_an_index_a_build_begins_on_while_it_loads_refuses_to_open(tmp_path, monkeypatch) -> None:
    location = tmp_path / "index"
    build_tiny(location)
    load = opening._load

    def load_while_a_build_begins(*args: object):
        index = load(*args)
        rewrite(location, state="building")
        return index

    monkeypatch.setattr(opening, "_load", load_while_a_build_begins)
    with pytest.raises(IndexIncompleteError, match="state 'building'"):
        open_index(location, KeywordEmbedder())


def test_an_index_rewritten_at_every_load_gives_up_with_a_clear_error(
    tmp_path, monkeypatch
) -> None:
    location = tmp_path / "index"
    build_tiny(location)
    load = opening._load

    def load_while_builds_complete(*args: object):
        index = load(*args)
        rewrite(location)
        return index

    monkeypatch.setattr(opening, "_load", load_while_builds_complete)
    with pytest.raises(IndexIncompleteError, match="rewrote the index each of the 3 times"):
        open_index(location, KeywordEmbedder())


def titles(engine: Engine, query: str) -> set[str]:
    return {p.title for p in engine.retrieve(query, "dense", k=8).passages}


def add_hopper(location: Path, on_progress=None) -> None:
    """Another process adds a document to the index."""
    build_tiny(location, {**LOVELACE, **HOPPER}, on_progress)


def test_an_engine_serves_its_build_while_another_runs_then_opens_the_new_one(
    tmp_path,
) -> None:
    location = tmp_path / "index"
    build_tiny(location)
    engine = Engine.open(location, embedder="keyword", refresh_s=0)
    try:
        assert "Grace Hopper" not in titles(engine, "Grace Hopper compiler")
        during: list[set[str]] = []

        def progress(stage: str, done: int, total: int) -> None:
            if stage == "embed:chunks" and not during:  # the other build is writing files
                assert read_manifest(location)["state"] == "building"
                during.append(titles(engine, "Grace Hopper compiler"))

        add_hopper(location, progress)
        assert during and "Grace Hopper" not in during[0]  # the build opened earlier
        assert "Grace Hopper" in titles(engine, "Grace Hopper compiler")
    finally:
        engine.close()


def test_an_engine_told_never_to_look_keeps_the_index_it_opened(tmp_path) -> None:
    location = tmp_path / "index"
    build_tiny(location)
    engine = Engine.open(location, embedder="keyword", refresh_s=None)
    try:
        titles(engine, "Grace Hopper compiler")
        add_hopper(location)
        assert "Grace Hopper" not in titles(engine, "Grace Hopper compiler")
    finally:
        engine.close()


@pytest.mark.parametrize(
    "index_location", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_a_build_reads_the_workspace_manifest_once(index_location, monkeypatch) -> None:
    """Each read of a workspace's manifest is a connection: a build reads it once
    before it begins, not once to see whether there is one and again to read it."""
    from quillian.index import layout

    location = index_location("reads")
    build_tiny(location, titles=["Ada Lovelace"])
    reads: list[str] = []
    real = layout._server_manifest
    monkeypatch.setattr(layout, "_server_manifest", lambda loc: reads.append(loc) or real(loc))
    build_tiny(location)
    assert len(reads) == 1
