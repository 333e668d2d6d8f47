"""An imported knowledge graph on disk, opened memory-mapped, behind :class:`ExternalGraph`.

A graph directory holds (all ``.npy``, memory-mapped on open, nothing per entity in
Python objects):

* ``ids_blob/ids_offsets/ids_order`` - the :class:`~quillian.stores.snapshot.IdMap`
  of source ids (``Q42``, an IRI, ``n02084071``); entities are numbered by id byte order;
* ``indptr`` (int64), ``tails`` and ``relations`` (int32) - outgoing triples in CSR form.
  Within an entity's row the triples run round-robin over its relations (first triple
  of each relation, then the second of each, ...), so a capped prefix is varied;
* ``names_*`` - each entity's names, tab-separated, the first being its name;
  ``descriptions_*``; ``relation_names_*`` and ``relation_ids_*`` (text tables: one
  UTF-8 blob plus int64 offsets); ``relation_aliases_*`` (optional: each relation's
  other names, tab-separated; written when the source gives any, e.g. Wikidata5M's
  relation file; a graph imported before it existed simply has none);
* ``alias_keys`` (uint64, sorted) and ``alias_entities`` (int32) - a hash of the
  :func:`quillian.types.normalize_name` key of every name, for :meth:`ImportedGraph.lookup`;
* ``vectors/`` - an :class:`~quillian.stores.embedded.vectors.ExactVectorIndex` of the
  descriptions (an entity without one is embedded by its name), ids = entity numbers;
* ``ann/`` (optional, large graphs) - a :class:`~quillian.stores.embedded.faiss_ivf.FaissIVFIndex`
  over ``vectors/``, recorded under ``ann`` in the manifest; description search uses it
  when present (extra ``ann``), the exact index otherwise;
* ``report.json`` - the import report; ``manifest.json`` - format, counts, embedder,
  and ``state``, which is ``"complete"`` only in a finished graph.

Formats: 1 keyed the alias index by its own folding (NFKC, case-folded, spaces
collapsed), so ``"The Beatles"`` or ``"'Paris'"`` found nothing an index would match;
2 keys it by :func:`~quillian.types.normalize_name`, as the rest of Quillian does. A
format-1 graph is upgraded in place when opened (:func:`upgrade_graph`: the alias index
is recomputed from the stored names, nothing else changes).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.base import Embedder
from quillian.components.embedding.factory import EMBEDDERS, make_embedder
from quillian.components.kg.base import KGTriple
from quillian.errors import (
    ConfigError,
    IndexIncompleteError,
    IndexMissingError,
    IndexSchemaError,
    InputError,
    MissingExtraError,
)
from quillian.stores.embedded.faiss_ivf import FaissIVFIndex
from quillian.stores.embedded.files import fsync_path, write_atomic, write_json_atomic
from quillian.stores.embedded.vectors import ExactVectorIndex
from quillian.stores.mapped import load_mapped
from quillian.stores.snapshot import IdMap
from quillian.types import normalize_name

__all__ = [
    "FORMAT",
    "MANIFEST",
    "ImportedGraph",
    "TextTable",
    "build_alias_index",
    "name_key",
    "upgrade_graph",
    "write_alias_index",
]

#: The format this Quillian writes (see the module docstring for the history).
FORMAT = 2
#: Older formats :func:`upgrade_graph` brings up to :data:`FORMAT`.
UPGRADABLE = (1,)
MANIFEST = "manifest.json"
KIND = "quillian-kg"
#: The description ANN index's directory in a graph directory.
ANN_DIR = "ann"

log = logging.getLogger(__name__)


def name_key(normalized: str) -> int:
    """64-bit key of a name already passed through
    :func:`~quillian.types.normalize_name` (the alias index stores these)."""
    digest = hashlib.blake2b(normalized.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


class TextTable:
    """Strings stored as one UTF-8 blob plus offsets: ``table[i]`` decodes one."""

    def __init__(self, blob: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64]) -> None:
        self._blob = blob
        self._offsets = offsets

    @classmethod
    def load(cls, directory: Path, prefix: str, mmap: bool = True) -> TextTable:
        return cls(
            load_mapped(directory / f"{prefix}_blob.npy", mmap),
            load_mapped(directory / f"{prefix}_offsets.npy", mmap),
        )

    @classmethod
    def save(cls, directory: Path, prefix: str, texts: Iterable[str]) -> None:
        """Write a (small) table from strings."""
        encoded = [t.encode("utf-8") for t in texts]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        np.save(directory / f"{prefix}_offsets.npy", offsets)
        np.save(directory / f"{prefix}_blob.npy", np.frombuffer(b"".join(encoded), np.uint8))

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, index: int) -> str:
        lo, hi = int(self._offsets[index]), int(self._offsets[index + 1])
        return self._blob[lo:hi].tobytes().decode("utf-8")

    def range(self, start: int, stop: int) -> list[str]:
        """Strings ``start..stop-1``, read in one slice of the blob (fast for bulk)."""
        offsets = np.asarray(self._offsets[start : stop + 1])
        base = int(offsets[0]) if len(offsets) else 0
        chunk = self._blob[base : int(offsets[-1]) if len(offsets) else 0].tobytes()
        local = (offsets - base).tolist()
        return [chunk[a:b].decode("utf-8") for a, b in itertools.pairwise(local)]


def build_alias_index(
    names: TextTable, step: int = 1 << 16
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int32]]:
    """``(keys, entities)`` sorted by key: one row per distinct
    :func:`~quillian.types.normalize_name` key among each entity's names (``names[e]``,
    tab-separated), read ``step`` entities at a time."""
    keys: list[npt.NDArray[np.uint64]] = []
    entities: list[npt.NDArray[np.int32]] = []
    for start in range(0, len(names), step):
        chunk_keys: list[int] = []
        chunk_entities: list[int] = []
        for entity, row in enumerate(names.range(start, start + step), start):
            for key in dict.fromkeys(normalize_name(n) for n in row.split("\t")):
                if key:
                    chunk_keys.append(name_key(key))
                    chunk_entities.append(entity)
        keys.append(np.array(chunk_keys, dtype=np.uint64))
        entities.append(np.array(chunk_entities, dtype=np.int32))
    all_keys = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
    all_entities = np.concatenate(entities) if entities else np.zeros(0, np.int32)
    order = np.argsort(all_keys, kind="stable")
    return all_keys[order], all_entities[order]


def write_alias_index(directory: Path) -> None:
    """(Re)write ``alias_keys.npy`` and ``alias_entities.npy`` from the names table.

    Each file is written beside the old one and renamed over it, so arrays already
    memory-mapped from the old files stay valid. Raises :class:`OSError` when the
    directory cannot be written (leaving no temporary file behind).
    """
    keys, entities = build_alias_index(TextTable.load(directory, "names"))
    _save_atomic(directory / "alias_keys.npy", keys)
    _save_atomic(directory / "alias_entities.npy", entities)
    fsync_path(directory)


def _save_atomic(path: Path, array: npt.NDArray[Any]) -> None:
    write_atomic(path, lambda handle: np.save(handle, array))


def upgrade_graph(directory: str | Path) -> dict[str, Any]:
    """Bring a complete graph of an older format up to :data:`FORMAT`, in place;
    returns its manifest (unchanged when it is current already).

    From format 1: the alias index is recomputed from the stored names (a few seconds
    per million names) and written next to the old one, then the manifest records the
    new format. An upgrade interrupted before that leaves a format-1 graph, upgraded
    again on the next open. A directory that cannot be written raises
    :class:`~quillian.errors.IndexSchemaError` naming what to run.
    """
    path = Path(directory)
    manifest = read_manifest(path)
    found = manifest["format"]
    if found == FORMAT:
        return manifest
    log.warning("%s: upgrading graph format %s to %s (alias index)", path, found, FORMAT)
    try:
        write_alias_index(path)
        manifest = {**manifest, "format": FORMAT}
        write_json_atomic(path / MANIFEST, manifest)
    except OSError as exc:
        raise IndexSchemaError(
            f"{path}: graph format {found} needs its alias index rebuilt for this Quillian "
            f"(format {FORMAT}), which is done in place on open, but the directory cannot "
            f"be written ({exc.strerror or exc}). Run, as a user who can write it: "
            f'python -c "from quillian.components.kg.store import upgrade_graph; '
            f'upgrade_graph({str(path)!r})" (or import the graph again)'
        ) from exc
    return manifest


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of a complete graph directory of this format or one
    :func:`upgrade_graph` upgrades; refuses anything else."""
    if not directory.is_dir():
        raise IndexMissingError(f"{directory}: no knowledge graph directory")
    path = directory / MANIFEST
    if not path.exists():
        raise IndexIncompleteError(f"{directory}: not a complete knowledge graph (no {MANIFEST})")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IndexIncompleteError(f"{path}: unreadable manifest: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("kind") != KIND:
        raise IndexIncompleteError(f"{path}: not a knowledge graph manifest")
    if manifest.get("format") not in (FORMAT, *UPGRADABLE):
        raise IndexSchemaError(
            f"{path}: graph format {manifest.get('format')!r}, this Quillian reads "
            f"{', '.join(map(str, (*UPGRADABLE, FORMAT)))}"
        )
    if manifest.get("state") != "complete":
        raise IndexIncompleteError(
            f"{directory}: the import that wrote it did not finish (state "
            f"{manifest.get('state')!r}); import again"
        )
    return manifest


class ImportedGraph:
    """A read-only imported knowledge graph; implements
    :class:`~quillian.components.kg.base.ExternalGraph`.

    Open with :meth:`open`. Entities are ints ``0..len-1``; :meth:`index_of` maps a
    source id (``"Q42"``) to one, :meth:`entity_id` back.
    """

    def __init__(
        self,
        directory: Path,
        manifest: dict[str, Any],
        embedder: Embedder | None,
        *,
        exact: bool = False,
        nprobe: int | None = None,
    ):
        self.directory = directory
        self.manifest = manifest
        self.name: str = str(manifest.get("name") or directory.name)
        self._ids = IdMap.load(directory)
        self._indptr: npt.NDArray[np.int64] = load_mapped(directory / "indptr.npy")
        self._tails: npt.NDArray[np.int32] = load_mapped(directory / "tails.npy")
        self._relations: npt.NDArray[np.int32] = load_mapped(directory / "relations.npy")
        self._names = TextTable.load(directory, "names")
        self._descriptions = TextTable.load(directory, "descriptions")
        table = TextTable.load(directory, "relation_names", mmap=False)
        self._relation_names = [table[i] for i in range(len(table))]
        self._relation_aliases = _relation_aliases(directory, len(self._relation_names))
        self._alias_keys: npt.NDArray[np.uint64] = load_mapped(directory / "alias_keys.npy")
        self._alias_entities: npt.NDArray[np.int32] = load_mapped(directory / "alias_entities.npy")
        self._n = len(self._indptr) - 1
        self._embedder = embedder
        self._vectors: ExactVectorIndex | None = None
        if nprobe is not None and nprobe <= 0:
            raise ConfigError(f"nprobe must be greater than 0, got {nprobe}")
        self._use_ann = not exact and isinstance(manifest.get("ann"), dict)
        self._nprobe = nprobe
        self._ann: FaissIVFIndex | None = None

    @classmethod
    def open(
        cls,
        directory: str | Path,
        embedder: Embedder | None = None,
        *,
        exact: bool = False,
        nprobe: int | None = None,
    ) -> ImportedGraph:
        """Open a graph written by an import.

        ``embedder`` must be the one the graph was built with (its ``model_id`` is in
        the manifest); when omitted, the embedder recorded by name (``minilm``,
        ``hash``) is made on the first :meth:`seed_entities` call.

        Description search uses the graph's ANN index when it has one (see
        :attr:`ann`), scanning ``nprobe`` lists per query (default: the one the
        manifest records, set at build time or by ``quillian kg ann --nprobe``; more is
        slower and closer to exact); ``exact=True`` ignores it.

        A graph of an older format is upgraded in place first (:func:`upgrade_graph`).
        """
        path = Path(directory)
        manifest = read_manifest(path)
        if manifest["format"] != FORMAT:
            manifest = upgrade_graph(path)
        if embedder is not None:
            _check_embedder(manifest, embedder, path)
        try:
            return cls(path, manifest, embedder, exact=exact, nprobe=nprobe)
        except (OSError, ValueError) as exc:
            raise IndexIncompleteError(f"{path}: cannot read the graph: {exc}") from exc

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the vector indexes (the other arrays are plain memory maps)."""
        if self._ann is not None:
            self._ann.close()
            self._ann = None
        if self._vectors is not None:
            self._vectors.close()
            self._vectors = None

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        return f"ImportedGraph({str(self.directory)!r}, entities={self._n})"

    @property
    def n_triples(self) -> int:
        return len(self._tails)

    @property
    def ann(self) -> dict[str, Any] | None:
        """What the manifest records of the description ANN index (``method``,
        ``nlist``, ``nprobe``, ...), None when the graph has none."""
        recorded = self.manifest.get("ann")
        return dict(recorded) if isinstance(recorded, dict) else None

    @property
    def relation_names(self) -> list[str]:
        """Relation names; ``relation`` numbers in :meth:`neighbours` index this list."""
        return list(self._relation_names)

    @property
    def relation_aliases(self) -> list[tuple[str, ...]]:
        """Each relation's other names (its name excluded), indexed as
        :attr:`relation_names`; all empty for a graph stored without them."""
        return list(self._relation_aliases)

    def degree(self, entity: int) -> int:
        """Number of outgoing triples of ``entity``."""
        e = self._check(entity)
        return int(self._indptr[e + 1] - self._indptr[e])

    def entity_id(self, entity: int) -> str:
        """The source id of ``entity`` (``"Q42"``, an IRI, ``"n02084071"``)."""
        return self._ids.id_of(self._check(entity))

    def index_of(self, entity_id: str) -> int:
        """The entity numbered for source id ``entity_id``, ``-1`` when absent."""
        return self._ids.index_of(entity_id)

    def entity_name(self, entity: int) -> str:
        return self._names[self._check(entity)].partition("\t")[0]

    def description(self, entity: int) -> str:
        return self._descriptions[self._check(entity)]

    def aliases(self, entity: int) -> list[str]:
        """The other names of ``entity`` (its name excluded)."""
        return self.names(entity)[1:]

    def names(self, entity: int) -> list[str]:
        """All names of ``entity``, its name first."""
        return self._names[self._check(entity)].split("\t")

    def lookup(self, name: str) -> list[int]:
        """Entities whose name or alias has the :func:`~quillian.types.normalize_name`
        key of ``name`` (case, spacing, surrounding punctuation and a leading article
        ignored), in entity order."""
        wanted = normalize_name(name)
        if not wanted:
            return []
        key = np.uint64(name_key(wanted))
        lo = int(np.searchsorted(self._alias_keys, key, side="left"))
        hi = int(np.searchsorted(self._alias_keys, key, side="right"))
        candidates = sorted({int(e) for e in self._alias_entities[lo:hi]})
        # a 64-bit key can collide: confirm against the names themselves
        return [e for e in candidates if wanted in {normalize_name(a) for a in self.names(e)}]

    def seed_entities(self, query: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` entities whose description embeddings have the highest inner product
        with the query's, best first (KG-Infused RAG eq. 3)."""
        ids, scores = self.search_descriptions(self.query_embedder().embed([query]), k)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]

    def neighbours(
        self, entities: Sequence[int] | npt.NDArray[np.integer], max_per_entity: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        """``(heads, relations, tails)`` of each entity's first ``max_per_entity``
        outgoing triples, vectorised (the arrays behind :meth:`triples`)."""
        cap = _check_cap(max_per_entity)
        heads = np.asarray(entities, dtype=np.int64).ravel()
        if len(heads) and (heads.min() < 0 or heads.max() >= self._n):
            bad = heads[(heads < 0) | (heads >= self._n)][0]
            raise InputError(f"entity {int(bad)} outside 0..{self._n - 1}", field="entities")
        starts = np.asarray(self._indptr[heads], dtype=np.int64)
        counts = np.minimum(np.asarray(self._indptr[heads + 1], dtype=np.int64) - starts, cap)
        total = int(counts.sum())
        first = np.repeat(np.cumsum(counts) - counts, counts)
        positions = np.repeat(starts, counts) + (np.arange(total) - first)
        return (
            np.repeat(heads, counts),
            np.asarray(self._relations[positions]),
            np.asarray(self._tails[positions]),
        )

    def triples(self, entities: Sequence[int], max_per_entity: int) -> dict[int, list[KGTriple]]:
        """Each entity's first ``max_per_entity`` outgoing triples, in stored order
        (round-robin over relations, then by tail number): deterministic."""
        unique = list(dict.fromkeys(int(e) for e in entities))
        heads, rels, tails = self.neighbours(unique, max_per_entity)
        out: dict[int, list[KGTriple]] = {e: [] for e in unique}
        names: dict[int, str] = {}

        def name(e: int) -> str:
            if e not in names:
                names[e] = self.entity_name(e)
            return names[e]

        for h, r, t in zip(heads.tolist(), rels.tolist(), tails.tolist(), strict=True):
            out[h].append(KGTriple(h, self._relation_names[r], t, name(h), name(t)))
        return out

    @property
    def embedder_id(self) -> str:
        """The ``model_id`` of the embedder the descriptions were embedded with."""
        return str(self.manifest.get("embedder", {}).get("model_id", ""))

    def embed_texts(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """``texts`` embedded with the embedder the descriptions were embedded with."""
        return self.query_embedder().embed(list(texts))

    def description_vectors(self, entities: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """The description vectors of ``entities`` (float32, one row each)."""
        return self._vector_index().get(np.asarray(entities, dtype=np.int64))

    def search_descriptions(
        self, vectors: npt.ArrayLike, k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The ``k`` entities with the most similar descriptions for each query vector
        (rows of ``vectors``): ``(entities, scores)``, best first, through the ANN
        index when the graph has one (``-1`` pads a short row)."""
        ann = self._ann_index()
        if ann is not None:
            return ann.search(vectors, k)
        return self._vector_index().search(vectors, k)

    def _check(self, entity: int) -> int:
        e = int(entity)
        if not 0 <= e < self._n:
            raise InputError(f"entity {e} outside 0..{self._n - 1}", field="entity")
        return e

    def _vector_index(self) -> ExactVectorIndex:
        if self._vectors is None:
            self._vectors = ExactVectorIndex(self.directory / "vectors")
        return self._vectors

    def _ann_index(self) -> FaissIVFIndex | None:
        """The ANN index, opened on first use; None when absent, ignored, or when faiss
        is missing (then the exact index answers, a warning says why)."""
        if self._ann is None and self._use_ann:
            try:
                recorded = (self.ann or {}).get("nprobe")  # `quillian kg ann --nprobe`
                self._ann = FaissIVFIndex(
                    self.directory / ANN_DIR,
                    exact=self._vector_index(),
                    nprobe=self._nprobe if self._nprobe is not None else recorded,
                )
            except MissingExtraError as exc:
                log.warning("%s: %s; searching descriptions exactly (slower)", self.directory, exc)
                self._use_ann = False
        return self._ann

    def query_embedder(self) -> Embedder:
        if self._embedder is None:
            recorded = self.manifest.get("embedder", {})
            if recorded.get("name") not in EMBEDDERS:
                raise ConfigError(
                    f"{self.directory}: built with embedder {recorded.get('model_id')!r}; "
                    "open it with that embedder (ImportedGraph.open(dir, embedder=...))"
                )
            embedder = make_embedder(str(recorded["name"]))
            _check_embedder(self.manifest, embedder, self.directory)
            self._embedder = embedder
        return self._embedder


def _relation_aliases(directory: Path, n_relations: int) -> list[tuple[str, ...]]:
    """The optional ``relation_aliases`` table, one tuple per relation."""
    if not (directory / "relation_aliases_offsets.npy").exists():
        return [() for _ in range(n_relations)]
    table = TextTable.load(directory, "relation_aliases", mmap=False)
    if len(table) != n_relations:
        raise IndexIncompleteError(
            f"{directory}: {len(table)} relation alias rows for {n_relations} relations"
        )
    return [tuple(a for a in table[i].split("\t") if a) for i in range(n_relations)]


def _check_cap(max_per_entity: int) -> int:
    if isinstance(max_per_entity, bool) or not isinstance(max_per_entity, int | np.integer):
        raise InputError(f"max_per_entity must be an int, got {max_per_entity!r}")
    if max_per_entity < 0:
        raise InputError(f"max_per_entity must be >= 0, got {max_per_entity}")
    return int(max_per_entity)


def _check_embedder(manifest: dict[str, Any], embedder: Embedder, directory: Path) -> None:
    recorded = manifest.get("embedder", {})
    if recorded.get("model_id") != embedder.model_id or recorded.get("dim") != embedder.dim:
        raise ConfigError(
            f"{directory}: descriptions were embedded with {recorded.get('model_id')!r} "
            f"(dim {recorded.get('dim')}), not {embedder.model_id!r} (dim {embedder.dim})"
        )
