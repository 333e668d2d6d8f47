"""The index's file artifacts beside its stores: the graph tables (JSONL and row maps)
and the BM25 index, each written whole next to its place and swapped in."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from quillian.components.extraction.serde import triple_from_dict
from quillian.components.graph.builder import DescriptionRecord, EntityRecord, KnowledgeGraph
from quillian.stores.snapshot import GraphSnapshot

__all__ = ["load_tables", "replace_dir", "save_tables"]


def replace_dir(target: Path, write: Callable[[Path], None]) -> None:
    """Write a directory artifact next to ``target`` and swap it in."""
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write(tmp)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


def save_tables(directory: Path, kg: KnowledgeGraph) -> None:
    """The graph's entities, descriptions, relations and chunk order, under ``tables/``."""

    def tables(path: Path) -> None:
        _jsonl(path / "entities.jsonl", (asdict(e) for e in kg.entities))
        _jsonl(path / "descriptions.jsonl", (asdict(d) for d in kg.descriptions))
        _jsonl(path / "relations.jsonl", (asdict(r) for r in kg.relations))
        _jsonl(path / "chunks.jsonl", ({"id": c} for c in kg.chunk_ids))
        np.save(path / "relation_subject.npy", kg.relation_subject)
        np.save(path / "relation_object.npy", kg.relation_object)

    replace_dir(directory / "tables", tables)


def load_tables(directory: Path, snapshot: GraphSnapshot) -> KnowledgeGraph:
    """The knowledge graph whose tables :func:`save_tables` wrote, over ``snapshot``."""
    tables = directory / "tables"
    return KnowledgeGraph(
        snapshot=snapshot,
        entities=[EntityRecord(**row) for row in _read_jsonl(tables / "entities.jsonl")],
        descriptions=[
            DescriptionRecord(**row) for row in _read_jsonl(tables / "descriptions.jsonl")
        ],
        chunk_ids=[row["id"] for row in _read_jsonl(tables / "chunks.jsonl")],
        relations=[triple_from_dict(row) for row in _read_jsonl(tables / "relations.jsonl")],
        relation_subject=np.load(tables / "relation_subject.npy"),
        relation_object=np.load(tables / "relation_object.npy"),
    )


def _jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]
