"""A trained KG-embedding model on disk, beside the graph it was trained on.

A model directory (by default ``kge/`` inside the graph or index directory)::

    DIR/entities.npy     float32 (n_entities, dim), memory-mapped on load
    DIR/relations.npy    float32 (2 n_relations, dim): each relation, then its inverse
    DIR/manifest.json    kind, format, model, dim, counts, the graph's fingerprint,
                         epochs, configuration, metrics, seconds, creation time
    DIR/entities.int8.npy, DIR/entities.int8-scales.npy
                         on a graph large enough for the int8 scan
                         (:attr:`ComplEx.int8_scan_from`): the entity rows in int8
                         and their per-row scales, memory-mapped on load, so no
                         process quantises them again (4.7 s at 4.3M entities)

The directory is written whole under a temporary name beside it and renamed into place
(an older model there is moved aside first, then removed), so an interrupted save leaves
the previous model or nothing, never a half-written one. Loading checks the format and
shapes, and refuses a model trained on another graph (its fingerprint,
:attr:`TripleSet.fingerprint <quillian.components.kge.triples.TripleSet.fingerprint>`,
differs from the graph's).
"""

from __future__ import annotations

import json
import logging
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from quillian.components.kge.quantized import Int8Rows
from quillian.components.kge.scoring import ComplEx
from quillian.components.kge.triples import TripleSet
from quillian.errors import ModelLoadError
from quillian.stores.embedded.files import fsync_path, publish_directory, write_json_atomic

__all__ = [
    "FORMAT",
    "KIND",
    "MANIFEST",
    "MODEL_DIR",
    "StoredModel",
    "load_model",
    "model_directory",
    "save_model",
]

KIND = "quillian-kge"
FORMAT = 1
MANIFEST = "manifest.json"
#: The model's directory name inside a graph or index directory.
MODEL_DIR = "kge"
_ARRAYS = ("entities", "relations")
logger = logging.getLogger(__name__)
_INT8 = ("entities.int8", "entities.int8-scales")


def model_directory(graph_directory: str | Path) -> Path:
    """Where the model of the graph (or index) in ``graph_directory`` lives."""
    return Path(graph_directory) / MODEL_DIR


@dataclass(frozen=True)
class StoredModel:
    """A model read from disk with what its manifest records."""

    model: ComplEx
    manifest: dict[str, Any]
    directory: Path

    @property
    def fingerprint(self) -> str:
        return str(self.manifest["graph"]["fingerprint"])

    @property
    def epochs(self) -> int:
        return int(self.manifest["epochs"])

    @property
    def metrics(self) -> dict[str, Any]:
        return dict(self.manifest.get("metrics") or {})

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.manifest.get("config") or {})


def save_model(
    directory: str | Path,
    model: ComplEx,
    *,
    fingerprint: str,
    n_triples: int,
    epochs: int,
    config: dict[str, Any],
    metrics: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``model`` to ``directory`` atomically (replacing a model there); returns it.

    ``fingerprint`` and ``n_triples`` describe the graph it was trained on, ``epochs``
    how long; ``extra`` adds keys to the manifest (best epoch, seconds, ...)."""
    out = Path(directory)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.writing-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        for name, array in zip(_ARRAYS, (model.entities, model.relations), strict=True):
            path = tmp / f"{name}.npy"
            np.save(path, np.ascontiguousarray(array, dtype=np.float32))
            fsync_path(path)
        int8 = _save_int8(tmp, model)
        manifest = {
            **(extra or {}),
            "int8_rows": int8,
            "kind": KIND,
            "format": FORMAT,
            "model": "complex",
            "reciprocal": True,
            "dim": model.dim,
            "n_entities": model.n_entities,
            "n_relations": model.n_relations,
            "graph": {"fingerprint": fingerprint, "triples": int(n_triples)},
            "epochs": int(epochs),
            "config": config,
            "metrics": metrics or {},
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        write_json_atomic(tmp / MANIFEST, manifest)
        publish_directory(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest of a model directory; refuses a missing or foreign one."""
    path = Path(directory)
    file = path / MANIFEST
    if not file.is_file():
        raise ModelLoadError(
            "no trained KG-embedding model here; train one first (quillian kg train-kge)",
            path=str(path),
        )
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"unreadable model manifest: {exc}", path=str(file)) from exc
    if not isinstance(manifest, dict) or manifest.get("kind") != KIND:
        raise ModelLoadError("not a KG-embedding model manifest", path=str(file))
    if manifest.get("format") != FORMAT:
        raise ModelLoadError(
            f"model format {manifest.get('format')!r}, this Quillian reads {FORMAT}; "
            "train the model again",
            path=str(file),
        )
    return manifest


def load_model(
    directory: str | Path, graph: TripleSet | str | None = None, *, mmap: bool = True
) -> StoredModel:
    """Open the model in ``directory`` (arrays memory-mapped unless ``mmap=False``).

    ``graph`` (the graph's :class:`TripleSet` or its fingerprint) is the graph the model
    will score: a model trained on any other graph is refused with
    :class:`~quillian.errors.ModelLoadError`, since its entity and relation numbers
    would point at the wrong things.
    """
    path = Path(directory)
    manifest = read_manifest(path)
    if graph is not None:
        expected = graph.fingerprint if isinstance(graph, TripleSet) else str(graph)
        found = manifest.get("graph", {}).get("fingerprint")
        if found != expected:
            raise ModelLoadError(
                f"this KG-embedding model was trained on another graph (fingerprint "
                f"{found}, this graph's is {expected}): the graph changed since; train the "
                "model again (quillian kg train-kge)",
                path=str(path),
            )
    mode: Any = "r" if mmap else None
    try:
        entities, relations = (np.load(path / f"{n}.npy", mmap_mode=mode) for n in _ARRAYS)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot read the model arrays: {exc}", path=str(path)) from exc
    shapes = {
        "entities": (manifest.get("n_entities"), manifest.get("dim")),
        "relations": (2 * int(manifest.get("n_relations") or 0), manifest.get("dim")),
    }
    for name, array in zip(_ARRAYS, (entities, relations), strict=True):
        if tuple(array.shape) != shapes[name] or array.dtype != np.float32:
            raise ModelLoadError(
                f"{name}.npy is {array.dtype} {tuple(array.shape)}, the manifest says "
                f"float32 {shapes[name]}",
                path=str(path),
            )
    int8 = _load_int8(path, len(entities)) if manifest.get("int8_rows") else None
    return StoredModel(ComplEx(entities, relations, int8=int8), manifest, path)


def _save_int8(directory: Path, model: ComplEx) -> bool:
    """Write the model's int8 entity rows beside it when its scan uses them."""
    rows = model.int8_rows() if model.n_entities >= model.int8_scan_from else None
    if rows is None:
        return False
    for name, array in zip(_INT8, (rows.values, rows.scales), strict=True):
        np.save(directory / f"{name}.npy", np.ascontiguousarray(array))
        fsync_path(directory / f"{name}.npy")
    return True


def _load_int8(directory: Path, n_entities: int) -> Int8Rows | None:
    """The saved int8 rows, memory-mapped (copy-on-write: torch wants writable arrays;
    nothing writes them); None, with a warning, where they cannot be used."""
    try:
        values, scales = (np.load(directory / f"{n}.npy", mmap_mode="c") for n in _INT8)
        if len(values) != n_entities or values.dtype != np.int8 or scales.dtype != np.float32:
            raise ValueError(f"{values.dtype} {values.shape} rows for {n_entities} entities")
        return Int8Rows(values, scales)
    except (OSError, ValueError, ImportError, RuntimeError) as exc:
        logger.warning("int8 entity rows in %s not used: %s", directory, exc)
        return None
