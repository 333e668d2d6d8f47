"""Turning a staged graph into a graph directory, atomically.

:func:`import_graph` runs a reader into a temporary sibling directory whose manifest
says ``"state": "building"``, filters the graph (the paper's preprocessing), writes the
CSR arrays, text tables and alias index, embeds the descriptions (and, for a large
graph, builds their ANN index), marks the manifest ``"complete"`` and only then renames
the directory into place. An import that fails or is interrupted removes its temporary
directory; one killed outright leaves a ``.NAME.importing-*`` directory that
:meth:`ImportedGraph.open` refuses to open.
"""

from __future__ import annotations

import os
import resource
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.base import Embedder
from quillian.components.kg.report import DropReport, ImportReport, IssueLog, Progress, no_progress
from quillian.components.kg.staging import StagedGraph
from quillian.components.kg.store import (
    ANN_DIR,
    FORMAT,
    KIND,
    MANIFEST,
    TextTable,
    read_manifest,
    write_alias_index,
)
from quillian.errors import ConfigError, InputError, MissingExtraError
from quillian.stores.embedded.faiss_hnsw import import_faiss
from quillian.stores.embedded.faiss_ivf import FaissIVFIndex, IVFOptions
from quillian.stores.embedded.files import publish_directory, write_json_atomic
from quillian.stores.embedded.vectors import DTYPES as VECTOR_DTYPES
from quillian.stores.embedded.vectors import ExactVectorIndex, ExactVectorWriter

__all__ = [
    "ANN_CHOICES",
    "ImportOptions",
    "Stager",
    "build_ann",
    "build_rows",
    "drop_ann",
    "import_graph",
    "preprocess",
    "record_in_manifest",
    "set_ann_nprobe",
]

#: Values of :attr:`ImportOptions.ann`: ``auto``, ``none`` or an IVF kind.
ANN_CHOICES = ("auto", "none", "ivf-sq8", "ivf-fp16", "ivf-pq")
#: The kind ``auto`` builds (chosen by measurement: see ``research/kg_ann.py``).
DEFAULT_ANN = "ivf-sq8"

#: A reader: stages its input in a work directory, counting into the report.
Stager = Callable[[Path, ImportReport, Progress], StagedGraph]

I64 = npt.NDArray[np.int64]
#: Triples pack into one int64 sort key while entities x relations x entities stays below.
PACK_LIMIT = 2**62
Ints = npt.NDArray[np.integer]


@dataclass(frozen=True)
class ImportOptions:
    """Settings of a knowledge-graph import."""

    preprocess: bool = True
    """Apply the paper's filter (KG-Infused RAG, Appendix C.2): drop entities without a
    description or without an outgoing triple, and the triples touching them."""
    name: str | None = None
    """Name of the graph (default: the output directory's name)."""
    overwrite: bool = False
    """Replace a graph already at the output directory (never any other directory)."""
    max_bad_lines: int | None = 10_000
    """Stop when one file holds more malformed or undecodable lines (None: never stop)."""
    examples: int = 20
    """Issues kept with their file and line number, per kind."""
    embedder_name: str | None = None
    """Registry name of the embedder (``minilm``, ``hash``), recorded in the manifest so
    the graph reopens with it; None for an embedder passed in by code."""
    vector_dtype: str = "float32"
    """Storage of the description vectors: ``float32``, ``float16`` or ``int8``."""
    embed_batch: int = 1024
    """Descriptions embedded per call (and written to the index per write)."""
    ann: str = "auto"
    """ANN index of the descriptions: ``auto`` builds the default kind (``ivf-sq8``)
    when faiss is installed and the graph has more than ``ann_min_entities`` entities;
    ``none`` never builds one; ``ivf-sq8``, ``ivf-fp16`` or ``ivf-pq`` always builds
    that kind (needs the ``ann`` extra). Without one, search is exact."""
    ann_min_entities: int = 100_000
    """``auto`` builds an ANN index only above this many entities (exact search of
    100k 384-d vectors takes a few milliseconds)."""
    ann_nlist: int | None = None
    """Lists of the ANN index; None: about ``sqrt(entities)``."""

    def __post_init__(self) -> None:
        if self.max_bad_lines is not None and self.max_bad_lines < 0:
            raise ConfigError(f"max_bad_lines must be >= 0 or None, got {self.max_bad_lines}")
        if self.examples < 0:
            raise ConfigError(f"examples must be >= 0, got {self.examples}")
        if self.vector_dtype not in VECTOR_DTYPES:
            raise ConfigError(
                f"vector_dtype must be one of {', '.join(VECTOR_DTYPES)}, got {self.vector_dtype!r}"
            )
        if self.embed_batch <= 0:
            raise ConfigError(f"embed_batch must be greater than 0, got {self.embed_batch}")
        if self.ann not in ANN_CHOICES:
            raise ConfigError(f"ann must be one of {', '.join(ANN_CHOICES)}, got {self.ann!r}")
        if self.ann_min_entities < 0:
            raise ConfigError(f"ann_min_entities must be >= 0, got {self.ann_min_entities}")

    def ann_kind(self, entities: int) -> str | None:
        """The ANN kind to build for a graph of ``entities``, None for none."""
        if self.ann == "none":
            return None
        if self.ann != "auto":
            return self.ann
        if entities <= self.ann_min_entities:
            return None
        try:
            import_faiss()
        except MissingExtraError:
            return None
        return DEFAULT_ANN


def import_graph(
    stage: Stager,
    out: str | Path,
    embedder: Embedder,
    *,
    source: str,
    inputs: list[str],
    options: ImportOptions | None = None,
    progress: Progress = no_progress,
) -> ImportReport:
    """Read with ``stage`` and write a complete graph directory at ``out``."""
    options = options or ImportOptions()
    out = Path(out)
    _check_target(out, options.overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.importing-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    report = ImportReport(source=source, inputs=inputs, issues=IssueLog(options.examples))
    manifest: dict[str, Any] = {
        "kind": KIND,
        "format": FORMAT,
        "state": "building",
        "name": options.name or out.name,
        "source": source,
        "inputs": inputs,
        "preprocessed": options.preprocess,
        "embedder": {
            "name": options.embedder_name,
            "model_id": embedder.model_id,
            "dim": embedder.dim,
        },
        "vectors": {"dtype": options.vector_dtype},
    }
    try:
        write_json_atomic(tmp / MANIFEST, manifest)
        work = tmp / "_work"
        work.mkdir()
        started = time.perf_counter()
        staged = stage(work, report, progress)
        report.seconds["read"] = time.perf_counter() - started
        started = time.perf_counter()
        build_graph(staged, tmp, report, options.preprocess, progress)
        shutil.rmtree(work)
        report.seconds["build"] = time.perf_counter() - started
        report.peak_rss_mb["graph"] = _peak_rss_mb()
        started = time.perf_counter()
        embed_descriptions(tmp, embedder, options, progress)
        report.seconds["embed"] = time.perf_counter() - started
        report.peak_rss_mb["vectors"] = _peak_rss_mb()
        kind = options.ann_kind(report.final["entities"])
        if kind is not None:
            started = time.perf_counter()
            manifest["ann"] = _build_ann_dir(tmp, tmp / ANN_DIR, kind, options.ann_nlist, progress)
            report.seconds["ann"] = time.perf_counter() - started
        report.peak_rss_mb["total"] = _peak_rss_mb()
        report.directory = str(out)
        write_json_atomic(tmp / "report.json", report.to_dict())
        manifest.update(state="complete", counts=report.final, created=_now())
        write_json_atomic(tmp / MANIFEST, manifest)
        publish_directory(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report


def build_graph(
    staged: StagedGraph,
    directory: Path,
    report: ImportReport,
    preprocess_: bool = True,
    progress: Progress = no_progress,
) -> None:
    """Filter ``staged`` and write every array of a graph directory but the vectors."""
    n = staged.n_entities
    keep = preprocess(staged, report) if preprocess_ else np.ones(n, dtype=bool)
    progress("build", 0, 4)
    renumber = np.cumsum(keep) - 1
    valid = keep[staged.heads] & keep[staged.tails]
    heads = renumber[staged.heads[valid]]
    tails = renumber[staged.tails[valid]]
    used, rels = _compact(staged.relations[valid], len(staged.relation_names))
    n_final = int(keep.sum())
    if not n_final:
        why = " after preprocessing (try without it)" if preprocess_ and n else ""
        raise InputError(f"no entity left to import{why}")
    indptr, row_rels, row_tails, duplicates = build_rows(heads, rels, tails, n_final, len(used))
    del heads, tails, rels, valid
    if duplicates:
        report.notes.append(f"{duplicates:,} repeated triples stored once")
    np.save(directory / "indptr.npy", indptr)
    np.save(directory / "tails.npy", row_tails)
    np.save(directory / "relations.npy", row_rels)
    progress("build", 1, 4)
    _save_ids(directory, staged.ids[keep])
    TextTable.save(directory, "relation_names", (staged.relation_names[i] for i in used))
    TextTable.save(directory, "relation_ids", (staged.relation_ids[i] for i in used))
    aliases = staged.relation_aliases
    if any(aliases):
        TextTable.save(
            directory,
            "relation_aliases",
            ("\t".join(aliases[i]) if i < len(aliases) else "" for i in used),
        )
    staged.aliases.gather(staged.alias_rows[keep], directory, "names")
    staged.descriptions.gather(staged.description_rows[keep], directory, "descriptions")
    staged.aliases.discard()
    staged.descriptions.discard()
    progress("build", 2, 4)
    write_alias_index(directory)
    progress("build", 4, 4)
    report.final = {"entities": n_final, "relations": len(used), "triples": len(row_tails)}


def preprocess(
    staged: StagedGraph, report: ImportReport, examples: int = 10
) -> npt.NDArray[np.bool_]:
    """The entities that satisfy both of the paper's constraints, to a fixed point:
    each has a description and heads a triple whose tail is kept too."""
    n = staged.n_entities
    heads, tails, rels = staged.heads, staged.tails, staged.relations
    has_description = staged.description_rows >= 0
    keep = has_description.copy()
    rounds = 0
    while True:
        valid = keep[heads] & keep[tails]
        has_out = np.bincount(heads[valid], minlength=n) > 0
        if not (keep & ~has_out).any():
            break
        keep &= has_out
        rounds += 1
    no_triple = has_description & ~keep

    def ids(mask: npt.NDArray[np.bool_]) -> list[str]:
        return [b.decode("utf-8") for b in staged.ids[np.flatnonzero(mask)[:examples]]]

    report.dropped = DropReport(
        no_description=int((~has_description).sum()),
        no_outgoing_triple=int(no_triple.sum()),
        rounds=rounds,
        triples=int(len(heads) - valid.sum()),
        relations=int(np.count_nonzero(np.bincount(rels)))
        - int(np.count_nonzero(np.bincount(rels[valid]))),
        examples_no_description=ids(~has_description),
        examples_no_outgoing_triple=ids(no_triple),
    )
    return keep


def build_rows(
    heads: Ints, relations: Ints, tails: Ints, n_entities: int, n_relations: int
) -> tuple[I64, npt.NDArray[np.int32], npt.NDArray[np.int32], int]:
    """CSR rows of the distinct triples: ``(indptr, relations, tails, n_repeated)``.

    A row lists the entity's first triple of each relation (by relation number), then
    the second of each, and so on; within a relation, tails ascend. Any prefix of a row
    thus covers as many relations as it can.
    """
    m = len(heads)
    if not m:
        empty = np.zeros(0, dtype=np.int32)
        return np.zeros(n_entities + 1, dtype=np.int64), empty, empty, 0
    h = np.asarray(heads, dtype=np.int64)
    r = np.asarray(relations, dtype=np.int64)
    t = np.asarray(tails, dtype=np.int64)
    if float(n_entities) * n_relations * n_entities < PACK_LIMIT:
        key = np.sort((h * n_relations + r) * n_entities + t)
        if len(key) > 1:  # np.sort plus a mask is much faster than np.unique here
            key = key[np.concatenate(([True], key[1:] != key[:-1]))]
        t, hr = key % n_entities, key // n_entities
        r, h = hr % n_relations, hr // n_relations
        del key
    else:  # too many ids to pack into one int64: sort by columns
        order = np.lexsort((t, r, h))
        h, r, t = h[order], r[order], t[order]
        distinct = np.ones(m, dtype=bool)
        distinct[1:] = (h[1:] != h[:-1]) | (r[1:] != r[:-1]) | (t[1:] != t[:-1])
        h, r, t = h[distinct], r[distinct], t[distinct]
        hr = h * n_relations + r
    count = len(h)
    positions = np.arange(count)
    group_start = np.ones(count, dtype=bool)
    group_start[1:] = hr[1:] != hr[:-1]
    rank = positions - np.maximum.accumulate(np.where(group_start, positions, 0))
    del hr, group_start, positions
    depth = int(rank.max()) + 1
    if float(n_entities) * depth * n_relations < PACK_LIMIT:
        order = np.argsort((h * depth + rank) * n_relations + r)  # all keys distinct
    else:
        order = np.lexsort((r, rank, h))
    indptr = np.zeros(n_entities + 1, dtype=np.int64)
    np.cumsum(np.bincount(h, minlength=n_entities), out=indptr[1:])
    return indptr, r[order].astype(np.int32), t[order].astype(np.int32), m - count


def _compact(values: Ints, size: int) -> tuple[I64, I64]:
    """``(used, renumbered)``: the distinct values below ``size`` that occur, and each
    value's position among them (``np.unique(return_inverse=True)`` for small ints)."""
    counts = np.bincount(values, minlength=size) if len(values) else np.zeros(size, np.int64)
    used = np.flatnonzero(counts)
    position = np.zeros(size, dtype=np.int64)
    position[used] = np.arange(len(used))
    return used, position[values]


def embed_descriptions(
    directory: Path, embedder: Embedder, options: ImportOptions, progress: Progress
) -> None:
    """Embed every entity's description (its name when it has none) into ``vectors/``,
    written in one pass (:class:`ExactVectorWriter`: memory of one batch)."""
    names = TextTable.load(directory, "names")
    descriptions = TextTable.load(directory, "descriptions")
    n = len(names)
    progress("embed", 0, n)
    with ExactVectorWriter(
        directory / "vectors", embedder.dim, n, dtype=options.vector_dtype
    ) as index:
        for start in range(0, n, options.embed_batch):
            stop = min(n, start + options.embed_batch)
            texts = [
                text or name.partition("\t")[0]
                for text, name in zip(
                    descriptions.range(start, stop), names.range(start, stop), strict=True
                )
            ]
            index.append(np.arange(start, stop, dtype=np.int64), embedder.embed(texts))
            progress("embed", stop, n)


def build_ann(
    directory: str | Path,
    kind: str = DEFAULT_ANN,
    *,
    nlist: int | None = None,
    nprobe: int | None = None,
    progress: Progress = no_progress,
) -> dict[str, Any]:
    """Build (or rebuild) the description ANN index of an imported graph; returns what
    the manifest now records under ``ann``. ``nprobe`` is the lists scanned per query
    by default (None: :class:`IVFOptions`' default).

    The index is built beside the graph's files and swapped in, then the manifest is
    replaced atomically: a graph being searched meanwhile, or an interrupted build,
    leaves the graph as it was (an ``ann/`` the manifest does not name is ignored).
    """
    if kind not in ANN_CHOICES[2:]:
        raise ConfigError(f"kind must be one of {', '.join(ANN_CHOICES[2:])}, got {kind!r}")
    root = Path(directory)
    manifest = read_manifest(root)
    tmp = root / f".{ANN_DIR}.building-{uuid.uuid4().hex[:8]}"
    try:
        info = _build_ann_dir(root, tmp, kind, nlist, progress, nprobe)
        old = root / f".{ANN_DIR}.replaced-{uuid.uuid4().hex[:8]}"
        if (root / ANN_DIR).exists():
            os.rename(root / ANN_DIR, old)
        os.rename(tmp, root / ANN_DIR)
        write_json_atomic(root / MANIFEST, {**manifest, "ann": info})
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return info


def drop_ann(directory: str | Path) -> bool:
    """Remove an imported graph's ANN index (search becomes exact); False when it had
    none. The manifest stops naming the index before its files go, so an interrupted
    drop leaves a graph that opens and searches exactly."""
    root = Path(directory)
    manifest = read_manifest(root)
    had = isinstance(manifest.get("ann"), dict)
    if had:
        write_json_atomic(root / MANIFEST, {k: v for k, v in manifest.items() if k != "ann"})
    if (root / ANN_DIR).exists():
        old = root / f".{ANN_DIR}.replaced-{uuid.uuid4().hex[:8]}"
        os.rename(root / ANN_DIR, old)
        shutil.rmtree(old, ignore_errors=True)
    return had


def set_ann_nprobe(directory: str | Path, nprobe: int) -> dict[str, Any]:
    """Record ``nprobe`` (lists scanned per query, at most the index's lists) as the
    graph's default without rebuilding its ANN index; returns the manifest's ``ann``."""
    root = Path(directory)
    manifest = read_manifest(root)
    ann = manifest.get("ann")
    if not isinstance(ann, dict):
        raise ConfigError(
            f"{root}: has no ANN index; build one with `quillian kg ann {root} --kind ivf-sq8`"
        )
    if not 0 < nprobe <= int(ann["nlist"]):
        raise ConfigError(f"nprobe must be in 1..{ann['nlist']} (the index's lists), got {nprobe}")
    info = {**ann, "nprobe": int(nprobe)}
    write_json_atomic(root / MANIFEST, {**manifest, "ann": info})
    return info


def record_in_manifest(directory: str | Path, key: str, value: dict[str, Any]) -> None:
    """Record ``value`` under ``key`` in a complete graph's manifest (replaced
    atomically; readers ignore keys they do not know), e.g. the KG-embedding model
    trained on it."""
    root = Path(directory)
    manifest = read_manifest(root)
    write_json_atomic(root / MANIFEST, {**manifest, key: value})


def _build_ann_dir(
    graph: Path,
    out: Path,
    kind: str,
    nlist: int | None,
    progress: Progress,
    nprobe: int | None = None,
) -> dict[str, Any]:
    """Build a ``kind`` index of ``graph``'s description vectors in ``out``."""
    chosen = {} if nprobe is None else {"nprobe": nprobe}
    options = IVFOptions(kind=kind, nlist=nlist, **chosen)
    with ExactVectorIndex(graph / "vectors") as vectors:
        meta = FaissIVFIndex.build(out, vectors, options, progress)
    keys = ("method", "nlist", "nprobe", "rerank", "count", "bytes", "seconds")
    return {"directory": ANN_DIR, **{key: meta[key] for key in keys}}


def _save_ids(directory: Path, ids: npt.NDArray[np.bytes_]) -> None:
    """The id map of sorted ``ids`` (the format of :class:`IdMap`), without a Python
    object per id: the fixed-width array is viewed as bytes and its padding dropped."""
    n = len(ids)
    width = ids.dtype.itemsize
    lengths = np.char.str_len(ids).astype(np.int64) if n else np.zeros(0, np.int64)
    matrix = ids.view(np.uint8).reshape(n, width)
    blob = matrix[np.arange(width)[None, :] < lengths[:, None]]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    np.save(directory / "ids_blob.npy", blob)
    np.save(directory / "ids_offsets.npy", offsets)
    np.save(directory / "ids_order.npy", np.arange(n, dtype=np.int64))


def _check_target(out: Path, overwrite: bool) -> None:
    if not out.exists():
        return
    if not overwrite:
        raise ConfigError(f"{out} already exists; choose another directory or overwrite it")
    is_graph = out.is_dir() and ((out / MANIFEST).exists() or not any(out.iterdir()))
    if not is_graph:
        raise ConfigError(f"{out} exists and is not a knowledge graph directory; not replacing it")


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
