"""Indexing on Ray (``quillian index --ray local|ADDRESS``, extra ``ray``): the index
:func:`~quillian.engine.indexing.index_documents` builds, with the per-document work
(reading, chunking, extraction, embedding) on a Ray cluster.

The settings, the build plan (:func:`~quillian.engine.indexing.build_plan`) and the
build stages are those of the single-process path; only the ingestion runs elsewhere
(:class:`~quillian.index.ray_build.RayIngest`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from quillian.components.extraction.base import Extractor
from quillian.components.factories import make_extractor
from quillian.components.ingestion.pipeline import IngestFailure
from quillian.components.ingestion.readers import OnSkip
from quillian.engine.indexing import (
    IndexSettings,
    build_plan,
    check_settings,
)
from quillian.errors import ConfigError, InputError
from quillian.index import BuildReport, build_index
from quillian.index.layout import has_manifest, is_server_location
from quillian.index.ray_build import RayIngest, job_for
from quillian.index.ray_cluster import LOCAL, ray_session, worker_errors
from quillian.index.ray_read import read_dataset
from quillian.types import Progress, stable_id

__all__ = ["RAY_EXTRACTORS", "RayOptions", "index_on_ray"]

#: Batches per block of the read corpus (a block is the unit Ray hands an actor).
BATCHES_PER_BLOCK = 2
#: Extractors ``--ray`` runs by name; another (an LLM's) is given as a function.
RAY_EXTRACTORS = ("spacy", "precomputed")


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide the Ray executor runs."""

    address: str = LOCAL
    """``local`` (an instance started for the build) or a cluster's HOST:PORT."""
    workers: int = 2
    """Actors per pool (extraction, embedding)."""
    num_cpus: int = 2
    """CPUs of a ``local`` instance."""
    batch_size: int = 16
    """Documents per batch, the unit of extraction and of each write."""
    extract_cpus: float = 0.5
    """CPUs an extraction actor holds (an LLM extractor mostly waits: take less); an
    embedding actor holds half a CPU, so 2 workers fill a 2-CPU instance."""

    def __post_init__(self) -> None:
        for name in ("workers", "num_cpus", "batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.extract_cpus <= 0:
            raise ConfigError(f"extract_cpus must be greater than 0, got {self.extract_cpus}")


def index_on_ray(
    location: str | Path,
    paths: Sequence[Path],
    settings: IndexSettings | None = None,
    options: RayOptions | None = None,
    *,
    extractor: Callable[[], Extractor] | None = None,
    on_refused: OnSkip | None = None,
    on_progress: Progress | None = None,
) -> BuildReport:
    """Add the documents under ``paths`` to the index at ``location`` and rebuild it,
    the per-document work on Ray.

    ``extractor`` makes the extractor in each worker (a picklable function, such as an
    LLM extractor on its own chat model); None: ``settings.extractor`` by name, one of
    :data:`RAY_EXTRACTORS`. ``on_refused`` sees each malformed corpus entry, refused on
    its own (None: refused entries stop the build before it writes anything).
    """
    settings, options = settings or IndexSettings(), options or RayOptions()
    check_settings(settings, None)
    if extractor is None and settings.extractor not in RAY_EXTRACTORS:
        raise ConfigError(
            f"--ray runs the {' and '.join(RAY_EXTRACTORS)} extractors; give the "
            f"{settings.extractor} extractor as a function (index_on_ray(extractor=...))"
        )
    with ray_session(options.address, num_cpus=options.num_cpus) as ray, worker_errors(ray):
        # blocks of a few batches each, so both pools' actors share a single large file
        rows = options.batch_size * BATCHES_PER_BLOCK
        data = read_dataset(ray, paths).repartition(target_num_rows_per_block=rows).materialize()
        titles, unstorable = _survey(data, on_refused)
        storable = data.filter(expr="refused == '' and problem == '' and fatal == ''").count()
        if storable == 0 and not unstorable and not has_manifest(location):
            raise InputError("nothing to index: the input holds no documents")
        made = extractor or partial(
            make_extractor, settings.extractor, settings.extractions, tuple(titles)
        )
        plan = build_plan(location, settings, titles, extractor=made() if extractor else None)
        job = job_for(
            str(location),
            plan.extractor,
            made,
            chunker=(settings.chunker, settings.chunk_size, settings.overlap),
            embedder=plan.config["embedder_name"],
            many_writers=is_server_location(location),
            workers=options.workers,
            batch_size=options.batch_size,
            extract_cpus=options.extract_cpus,
        )
        step = RayIngest(ray, data, job, total=storable, unstorable=unstorable)
        return build_index((), location, **plan.args(), ingest_step=step, on_progress=on_progress)


def _survey(data: Any, on_refused: OnSkip | None) -> tuple[list[str], list[IngestFailure]]:
    """The corpus's titles and the documents no store can hold; each refused entry goes
    to ``on_refused`` (None: the first is raised)."""
    titles: list[str] = []
    for row in data.select_columns(["title", "refused", "fatal"]).iter_rows():
        if row["fatal"]:
            raise InputError(row["fatal"])
        if row["refused"]:
            error = InputError(row["refused"])
            if on_refused is None:
                raise error
            on_refused(error)
        elif row["title"]:
            titles.append(row["title"])
    unstorable = [
        IngestFailure(
            stable_id("doc", row["title"], row["text"]), row["title"], row["source"], row["problem"]
        )
        for row in data.filter(expr="problem != ''").iter_rows()
    ]
    return titles, unstorable
