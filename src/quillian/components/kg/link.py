"""Aligning an index's document graph to an imported knowledge graph.

``quillian kg link DIR --documents INDEX`` pairs each entity extracted from the
documents with the imported entity it names, so that retrieval can cross from one graph
to the other (:mod:`quillian.components.kg.linked`). For each document entity:

* **candidates** are the imported entities whose name or alias equals one of its names
  under :func:`~quillian.types.normalize_name`, the key the index matched entities by
  (:meth:`ImportedGraph.lookup`), plus the ``description_candidates`` imported entities
  whose description embeddings are nearest to its own description's;
* each candidate gets a **name score** (1 for the same name, 0.9 when the match goes
  through an alias, else the Jaccard overlap of the names' words) and a **description
  score** (inner product of the two descriptions embedded with the imported graph's
  embedder; an entity without description is embedded by its name);
* ``score = name_weight * name + (1 - name_weight) * description``, and a candidate
  is kept when its score reaches ``min_score``;
* the link goes to the best candidate by **name first, then score**: a same-name
  candidate beats any alias match, which beats any word-overlap candidate; the
  description decides among candidates of the same name. An extracted entity's
  description is often the passage that mentions it ("Carnegie Mellon is in
  Pittsburgh, Pennsylvania" for Pennsylvania), which resembles a university's gloss
  more than the state's, so it may not outvote the name. With the defaults every
  same-name candidate passes, an alias match needs a description similarity of 0.15,
  and a candidate found by description alone needs overlapping names and a high
  similarity (0.75 for half the words in common), so namesakes with similar
  descriptions (Jane and Leland Stanford) are not merged.

An alignment is saved in the imported graph's directory under
``links/<fingerprint of the index's entities>/``, written atomically; an index whose
entities changed since (new documents renumber them) is refused until linked again.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from quillian.errors import ConfigError, IndexIncompleteError, IndexMissingError
from quillian.types import Progress, normalize_name

__all__ = [
    "Alignment",
    "LinkOptions",
    "LinkSource",
    "LinkTarget",
    "index_fingerprint",
    "link_graphs",
]

logger = logging.getLogger(__name__)

LINKS = "links"
KINDS = ("name", "alias", "description")


class LinkSource(Protocol):
    """What is aligned: entities with names, aliases and descriptions."""

    name: str

    def __len__(self) -> int: ...

    def entity_name(self, entity: int) -> str: ...

    def aliases(self, entity: int) -> list[str]: ...

    def description(self, entity: int) -> str: ...


class LinkTarget(LinkSource, Protocol):
    """What entities are aligned to: name look-up and a description vector index."""

    @property
    def embedder_id(self) -> str:
        """The model the descriptions were embedded with."""
        ...

    def lookup(self, name: str) -> list[int]: ...

    def embed_texts(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...

    def description_vectors(self, entities: npt.ArrayLike) -> npt.NDArray[np.float32]: ...

    def search_descriptions(
        self, vectors: npt.ArrayLike, k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]: ...


@dataclass(frozen=True)
class LinkOptions:
    """Settings of :func:`link_graphs`."""

    min_score: float = 0.6
    """A link is kept when its score reaches this."""
    name_weight: float = 0.6
    """Share of the name score in the link score (the rest is description similarity)."""
    description_candidates: int = 5
    """Nearest imported descriptions considered besides name matches (0: names only)."""
    batch: int = 256
    """Document entities embedded and searched per step."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_score <= 1.0:
            raise ConfigError(f"min_score must be in [0, 1], got {self.min_score}")
        if not 0.0 <= self.name_weight <= 1.0:
            raise ConfigError(f"name_weight must be in [0, 1], got {self.name_weight}")
        if self.description_candidates < 0:
            raise ConfigError(
                f"description_candidates must be >= 0, got {self.description_candidates}"
            )
        if self.batch <= 0:
            raise ConfigError(f"batch must be greater than 0, got {self.batch}")


@dataclass(frozen=True, eq=False)
class Alignment:
    """Links from source (document) entities to target (imported) entities, one per
    linked source entity, sorted by source; ``kind`` indexes :data:`KINDS`."""

    source: npt.NDArray[np.int32]
    target: npt.NDArray[np.int32]
    score: npt.NDArray[np.float32]
    name_score: npt.NDArray[np.float32]
    description_score: npt.NDArray[np.float32]
    kind: npt.NDArray[np.uint8]
    meta: dict[str, Any]

    def __len__(self) -> int:
        return len(self.source)

    def target_of(self, source: int) -> tuple[int, float] | None:
        """The imported entity ``source`` is linked to, with the link score."""
        i = int(np.searchsorted(self.source, source))
        if i < len(self.source) and int(self.source[i]) == source:
            return int(self.target[i]), float(self.score[i])
        return None

    def sources_of(self, target: int) -> list[tuple[int, float]]:
        """The document entities linked to ``target``, with their link scores."""
        order, starts = self._by_target
        lo = int(np.searchsorted(starts, target, side="left"))
        hi = int(np.searchsorted(starts, target, side="right"))
        return [(int(self.source[i]), float(self.score[i])) for i in order[lo:hi].tolist()]

    @cached_property
    def _by_target(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        order = np.argsort(self.target, kind="stable")
        return order, self.target[order]

    def rows(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Links as dicts (for reports), best score first."""
        order = np.argsort(-self.score, kind="stable")[:limit]
        return [
            {
                "source": int(self.source[i]),
                "target": int(self.target[i]),
                "score": round(float(self.score[i]), 4),
                "name_score": round(float(self.name_score[i]), 4),
                "description_score": round(float(self.description_score[i]), 4),
                "kind": KINDS[int(self.kind[i])],
            }
            for i in order.tolist()
        ]

    def save(self, graph_dir: Path, index_dir: Path) -> Path:
        """Write under ``graph_dir/links/<fingerprint of the index>``, atomically
        replacing an older alignment of the same entities."""
        fingerprint = index_fingerprint(index_dir)
        links = Path(graph_dir) / LINKS
        links.mkdir(exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{fingerprint}-", dir=links))
        try:
            for field in ("source", "target", "score", "name_score", "description_score", "kind"):
                np.save(tmp / f"{field}.npy", getattr(self, field))
            meta = {
                **self.meta,
                "index": str(index_dir),
                "index_name": Path(index_dir).name,
                "fingerprint": fingerprint,
                "links": len(self),
            }
            (tmp / "alignment.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
            final = links / fingerprint
            if final.exists():
                old = links / f".old-{fingerprint}-{os.getpid()}"
                final.rename(old)
                tmp.rename(final)
                shutil.rmtree(old, ignore_errors=True)
            else:
                tmp.rename(final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return final

    @classmethod
    def load(cls, graph_dir: Path, index_dir: Path) -> Alignment:
        """The alignment saved for the index at ``index_dir``; a clear error when it was
        never linked, or its entities changed since."""
        directory = Path(graph_dir) / LINKS / index_fingerprint(index_dir)
        if not (directory / "alignment.json").exists():
            others = [
                json.loads((p / "alignment.json").read_text(encoding="utf-8"))
                for p in sorted((Path(graph_dir) / LINKS).glob("[!.]*"))
                if (p / "alignment.json").exists()
            ]
            hint = ""
            if any(o.get("index_name") == Path(index_dir).name for o in others):
                hint = " (it was linked before, but its entities have changed since)"
            raise IndexMissingError(
                f"{graph_dir}: no alignment with the index {index_dir}{hint}; "
                f"run `quillian kg link {graph_dir} --documents {index_dir}`"
            )
        meta = json.loads((directory / "alignment.json").read_text(encoding="utf-8"))
        try:
            arrays = {
                f: np.load(directory / f"{f}.npy")
                for f in ("source", "target", "score", "name_score", "description_score", "kind")
            }
        except (OSError, ValueError) as exc:
            raise IndexIncompleteError(f"{directory}: unreadable alignment: {exc}") from exc
        return cls(meta=meta, **arrays)


def index_fingerprint(index_dir: Path) -> str:
    """Identity of an index's entities: a hash of its entity and description tables, the
    numbering and texts an alignment refers to, which the index's build stored in its
    tables database (``tables/graph.sqlite``, key ``entity_fingerprint``). Rebuilding the
    index from the same documents keeps it; adding documents (which renumbers entities)
    changes it."""
    path = Path(index_dir) / "tables" / "graph.sqlite"
    if not path.is_file():
        raise IndexMissingError(f"{index_dir}: not an index (no tables/graph.sqlite)")
    uri = path.absolute().as_uri() + "?mode=ro"  # patched where it is: its log read too
    try:
        with closing(sqlite3.connect(uri, uri=True)) as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'entity_fingerprint'")
            found = row.fetchone()
    except sqlite3.Error as exc:
        raise IndexIncompleteError(f"{path}: unreadable tables: {exc}") from exc
    if found is None:
        raise IndexIncompleteError(f"{path}: no entity fingerprint; rebuild the index")
    return str(found[0])


def _words(name: str) -> set[str]:
    return set(normalize_name(name).split())


@dataclass(frozen=True)
class _Names:
    """A source entity's names, normalised once for all its candidates."""

    keys: list[str]
    words: list[set[str]]

    @classmethod
    def of(cls, names: list[str]) -> _Names:
        return cls([normalize_name(n) for n in names], [_words(n) for n in names])


def _name_scores(source: _Names, target: LinkTarget, entity: int) -> float:
    """1 for the same name, 0.9 through an alias, else the best word overlap."""
    target_names = [target.entity_name(entity), *target.aliases(entity)]
    keys = [normalize_name(n) for n in target_names]
    if source.keys[0] == keys[0]:
        return 1.0
    if set(source.keys) & set(keys):
        return 0.9
    best = 0.0
    for wa in source.words:
        for b in target_names:
            wb = _words(b)
            if wa and wb:
                best = max(best, len(wa & wb) / len(wa | wb))
    return best


def link_graphs(
    source: LinkSource,
    target: LinkTarget,
    options: LinkOptions | None = None,
    progress: Progress | None = None,
) -> Alignment:
    """Align every entity of ``source`` to at most one entity of ``target``."""
    options = options or LinkOptions()
    started = time.perf_counter()
    rows: list[tuple[int, int, float, float, float, int]] = []
    n = len(source)
    counts = dict.fromkeys(KINDS, 0)
    candidates_seen = 0
    for start in range(0, n, options.batch):
        stop = min(n, start + options.batch)
        names = [[source.entity_name(e), *source.aliases(e)] for e in range(start, stop)]
        vectors = _source_vectors(source, target, range(start, stop), names)
        near_ids: npt.NDArray[np.int64] = np.zeros((stop - start, 0), np.int64)
        if options.description_candidates:
            near_ids, _ = target.search_descriptions(vectors, options.description_candidates)
        for row, entity in enumerate(range(start, stop)):
            best = _best_link(names[row], vectors[row], near_ids[row], target, options)
            candidates_seen += best[1]
            if best[0] is not None:
                rows.append((entity, *best[0]))
                counts[KINDS[best[0][4]]] += 1
        if progress is not None:
            progress("link", stop, n)
    array = np.array(rows, dtype=np.float64).reshape(-1, 6)
    meta = {
        "source": source.name,
        "target": target.name,
        "options": asdict(options),
        "source_entities": n,
        "by_kind": counts,
        "candidates_scored": candidates_seen,
        "seconds": round(time.perf_counter() - started, 2),
    }
    logger.info("linked %d of %d entities of %s to %s", len(rows), n, source.name, target.name)
    return Alignment(
        source=array[:, 0].astype(np.int32),
        target=array[:, 1].astype(np.int32),
        score=array[:, 2].astype(np.float32),
        name_score=array[:, 3].astype(np.float32),
        description_score=array[:, 4].astype(np.float32),
        kind=array[:, 5].astype(np.uint8),
        meta=meta,
    )


def _source_vectors(
    source: LinkSource, target: LinkTarget, entities: range, names: list[list[str]]
) -> npt.NDArray[np.float32]:
    """The entities' description vectors in the target's embedding space: the source's
    own when it holds them from the same model (``description_embeddings``), else the
    descriptions (names when missing) embedded by the target's embedder."""
    own = getattr(source, "description_embeddings", None)
    if own is not None:
        vectors = own(list(entities), target.embedder_id)
        if vectors is not None:
            return np.asarray(vectors, dtype=np.float32)
    texts = [source.description(e) or names[i][0] for i, e in enumerate(entities)]
    return target.embed_texts(texts)


def _best_link(
    names: list[str],
    vector: npt.NDArray[np.float32],
    near: npt.NDArray[np.int64],
    target: LinkTarget,
    options: LinkOptions,
) -> tuple[tuple[int, float, float, float, int] | None, int]:
    """The best ``(target, score, name, description, kind)`` above ``min_score`` (or
    None), and the number of candidates scored."""
    by_name: dict[int, None] = {}
    for alias in names:
        by_name.update(dict.fromkeys(target.lookup(alias)))
    candidates = list(by_name) + [int(e) for e in near.tolist() if e >= 0 and e not in by_name]
    if not candidates:
        return None, 0
    similarity = target.description_vectors(np.array(candidates, dtype=np.int64)) @ vector
    best: tuple[int, float, float, float, int] | None = None
    best_key: tuple[int, float] | None = None
    w = options.name_weight
    source = _Names.of(names)
    for entity, description in zip(candidates, similarity.tolist(), strict=True):
        name = _name_scores(source, target, entity)
        score = w * name + (1.0 - w) * max(description, 0.0)
        kind = 0 if name == 1.0 else 1 if name == 0.9 and entity in by_name else 2
        key = (-kind, score)  # the name's match first, then the score
        if score >= options.min_score and (best_key is None or key > best_key):
            best, best_key = (entity, score, name, description, kind), key
    return best, len(candidates)
