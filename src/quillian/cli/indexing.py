"""``quillian index`` and ``quillian delete``: build, update and shrink an index."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from importlib import resources
from pathlib import Path
from typing import Annotated, cast

import typer

from quillian.cli.console import one_line, stage_bars
from quillian.cli.flags import EndpointTextsOpt, IndexDir, LLMFlags, choice, shares_flags
from quillian.cli.render import print_build
from quillian.components.extraction.llm_budget import ExtractionBudget, estimate_extraction
from quillian.components.extraction.quads import QUAD_EXTRACTOR
from quillian.components.factories import (
    CHUNKERS,
    DEFAULT_EMBEDDER,
    EMBEDDERS,
    EXTRACTORS,
    make_chunker,
)
from quillian.components.ingestion import pipeline
from quillian.components.ingestion.readers import OnSkip, read_documents
from quillian.components.kag.alignment import SIMILAR_THRESHOLD
from quillian.components.llm.accounting import Ledger
from quillian.engine import (
    Engine,
    IndexSettings,
    RayOptions,
    delete_documents,
    index_documents,
    index_on_ray,
)
from quillian.errors import BudgetExhausted, ConfigError, InputError
from quillian.index import BuildReport
from quillian.index.layout import (
    MANIFEST,
    WRITER_LOCK,
    has_manifest,
    is_server_location,
    location_name,
)
from quillian.index.storage import DEFAULT_VECTOR_DTYPE, VECTOR_DTYPES, WORKSPACE_VECTOR_DTYPE
from quillian.methods.kag.stages import CONCEPT_SOURCES
from quillian.methods.table import method_spec
from quillian.types import Document

__all__ = ["delete", "index", "register", "sample_corpus"]

#: Skipped inputs named in the error when nothing is left to index.
SKIPS_SHOWN = 3

#: The input formats, for ``quillian index --help`` (the README's "Corpus formats").
CORPUS_FORMATS = (
    "PATH is a file or a folder (read recursively; hidden names skipped): **.txt** is "
    "one document titled by the file name; **.md** one document titled by its first "
    '\'# \' heading; **.json** a list of documents `[{"title": ..., "text": ...}]`, '
    'one document `{"title": ..., "text": ...}`, or HotpotQA\'s '
    "`{title: [sentences]}`; **.jsonl** one document object a line. `text` is needed "
    "and must be a string, `title` is optional, other fields are ignored. A malformed "
    "entry is refused on its own, named with its reason, and the rest is indexed "
    "(exit 1); empty documents are skipped."
)


def sample_corpus() -> Path:
    """The small corpus bundled with Quillian, for the quick start."""
    return Path(str(resources.files("quillian") / "data" / "sample"))


@shares_flags
def index(
    out: Annotated[
        str, typer.Option(metavar="DIR", help="the index: a directory, or postgresql://...")
    ],
    llm: LLMFlags,
    paths: Annotated[
        list[Path] | None,
        typer.Argument(metavar="PATH...", help="text, markdown, folders, JSON(L) corpora"),
    ] = None,
    sample: Annotated[bool, typer.Option("--sample", help="the bundled sample corpus")] = False,
    chunker: Annotated[str, choice(CHUNKERS)] = "passage",
    chunk_size: Annotated[int, typer.Option(min=1, help="words per chunk (words chunker)")] = 500,
    overlap: Annotated[int, typer.Option(min=0, help="overlapping words (words chunker)")] = 200,
    extractor: Annotated[str, choice(EXTRACTORS)] = "spacy",
    extractions: Annotated[
        Path | None, typer.Option(metavar="FILE", help="precomputed extractions (JSONL)")
    ] = None,
    embedder: Annotated[
        str | None,
        choice(EMBEDDERS, f"default: the index's own, for a new one {DEFAULT_EMBEDDER}"),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="--extractor llm: estimate calls and tokens only")
    ] = False,
    budget_tokens: Annotated[
        int | None,
        typer.Option(min=1, metavar="N", help="--extractor llm: stop after about N tokens"),
    ] = None,
    budget_calls: Annotated[
        int | None,
        typer.Option(min=1, metavar="N", help="--extractor llm: stop after about N calls"),
    ] = None,
    for_methods: Annotated[
        list[str] | None,
        typer.Option(
            "--for",
            metavar="METHOD",
            help="also run this method's build stages (know3-rag: train ComplEx on the "
            "graph; kags: store its 4-tuples; kag: the typed, aligned graph); repeatable",
        ),
    ] = None,
    schema: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="KAG: the typed schema (YAML or JSON), kept with the index; default: the "
            "index's own, else the shipped open-domain schema",
        ),
    ] = None,
    concepts: Annotated[
        str | None,
        choice(
            CONCEPT_SOURCES,
            "KAG's alignment: concept chains from WordNet's hypernyms (offline, the "
            "default) or from the model (--llm; stored, so rebuilds ask only about new "
            "types)",
        ),
    ] = None,
    similar: Annotated[
        float | None,
        typer.Option(
            metavar="T",
            help="KAG's alignment: link entities of one class whose names embed with "
            f"cosine >= T (similar edges; default {SIMILAR_THRESHOLD})",
        ),
    ] = None,
    endpoint_texts: EndpointTextsOpt = None,
    vector_dtype: Annotated[
        str | None,
        choice(
            VECTOR_DTYPES,
            "what the vectors are stored in; default: the index's own, for a new folder "
            f"{DEFAULT_VECTOR_DTYPE}, a new workspace {WORKSPACE_VECTOR_DTYPE} (no int8)",
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="local|ADDRESS",
            help="read, chunk, extract and embed on Ray (extra ray): 'local' starts an "
            "instance on this machine, HOST:PORT joins a running cluster",
        ),
    ] = None,
) -> None:
    """Index files, folders or JSON corpora into DIR (--out): a new or empty folder,
    or an index to add to.

    Rerunning on the same DIR skips documents already indexed and resumes an
    interrupted build. With --extractor llm, the knowledge graph is extracted by the
    model --llm names; --dry-run estimates what that costs, a budget stops it cleanly.
    """
    settings = IndexSettings(
        chunker=chunker,
        chunk_size=chunk_size,
        overlap=overlap,
        extractor="precomputed" if extractions else extractor,
        extractions=extractions,
        embedder=embedder,
        methods=tuple(method_spec(m).name for m in for_methods or ()),
        kag_schema=schema,
        kag_concepts=concepts,
        kag_similar=similar,
        endpoint_texts=endpoint_texts,
        vector_dtype=vector_dtype,
    )
    if (schema or concepts or similar is not None) and not any(
        method_spec(m).needs_schema for m in settings.methods
    ):
        raise ConfigError("--schema, --concepts and --similar shape KAG's graph: add --for kag")
    _check_out(out)
    refused: list[InputError] = []
    uses_model = settings.extractor in ("llm", QUAD_EXTRACTOR, "kag-llm") or concepts == "llm"
    if ray is not None:
        inputs = [sample_corpus()] if sample else paths or []
        report = _index_on_ray(out, inputs, settings, ray, refused)
    elif not uses_model:
        documents = read_inputs([sample_corpus()] if sample else paths or [], refused.append)
        with stage_bars() as progress, _failures_listed_once():
            report = index_documents(out, documents, settings, on_progress=progress)
    elif dry_run and settings.extractor == "kag-llm":
        raise ConfigError("--dry-run estimates the llm extractor only, not kag-llm")
    elif dry_run:
        if settings.extractor != "llm":
            raise ConfigError("--dry-run estimates the llm extractor's cost only")
        documents = read_inputs([sample_corpus()] if sample else paths or [], refused.append)
        with closing(llm.open_engine()) as engine:
            _print_estimate(engine, documents, settings)
        for error in refused:  # the estimate leaves them out
            print(f"refused: {one_line(str(error))}", file=sys.stderr)
        return
    else:
        documents = read_inputs([sample_corpus()] if sample else paths or [], refused.append)
        budget = None
        if budget_tokens or budget_calls:
            budget = ExtractionBudget(max_calls=budget_calls, max_tokens=budget_tokens)
        with _failures_listed_once():
            report = _index_with_llm(llm.open_engine(), out, documents, settings, budget)
    print_build(report, _shown(out), refused)
    if refused or (report.ingest is not None and report.ingest.failed):
        raise typer.Exit(1)


def _index_on_ray(
    out: str, paths: list[Path], settings: IndexSettings, address: str, refused: list[InputError]
) -> BuildReport:
    """``quillian index --ray``: the per-document work on Ray; each malformed corpus
    entry is refused on its own, into ``refused``, as without Ray."""
    if not paths:
        raise ConfigError("give a PATH to index, or --sample for the bundled corpus")
    with stage_bars() as progress, _failures_listed_once():
        return index_on_ray(
            out,
            paths,
            settings,
            RayOptions(address),
            on_refused=refused.append,
            on_progress=progress,
        )


def read_inputs(paths: list[Path], on_refused: OnSkip | None = None) -> list[Document]:
    """Every document in ``paths``; input holding none (empty files, an empty list, only
    refused entries) is refused, naming what was skipped. ``on_refused`` sees each
    malformed corpus entry, refused on its own (None: it refuses the whole input)."""
    if not paths:
        raise ConfigError("give a PATH to index, or --sample for the bundled corpus")
    skipped: list[InputError] = []
    documents = [
        doc
        for path in paths
        for doc in read_documents(
            path, on_skip=skipped.append, on_refused=_also(skipped, on_refused)
        )
    ]
    if not documents:
        named = [str(s) for s in skipped[:SKIPS_SHOWN]]
        if len(skipped) > SKIPS_SHOWN:
            named.append(f"and {len(skipped) - SKIPS_SHOWN} more skipped")
        why = "; ".join(named) or f"{', '.join(map(str, paths))}: no documents"
        raise InputError(f"nothing to index: {why}")
    return documents


@contextmanager
def _failures_listed_once() -> Iterator[None]:
    """The build's summary lists each failed document once, on one line: the
    ingestion's own warnings about them (the document, then again its batch) are left
    to ``-v``."""
    log = logging.getLogger(pipeline.__name__)
    if log.isEnabledFor(logging.INFO):
        yield
        return

    def below_warning(record: logging.LogRecord) -> bool:
        return record.levelno < logging.WARNING

    log.addFilter(below_warning)
    try:
        yield
    finally:
        log.removeFilter(below_warning)


def _also(seen: list[InputError], then: OnSkip | None) -> OnSkip | None:
    """``then``, also keeping each error in ``seen`` (None where ``then`` is None)."""
    if then is None:
        return None

    def both(error: InputError) -> None:
        seen.append(error)
        then(error)

    return both


def _check_out(out: str) -> None:
    """Refuse an ``--out`` that names a file, or a folder holding other files than an
    index's, before anything is read or written there."""
    if is_server_location(out):
        return
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out {out}: a file, not a folder; choose an empty or new folder")
    if not path.is_dir() or has_manifest(path):
        return
    others = [entry.name for entry in path.iterdir() if entry.name != WRITER_LOCK]
    if others:
        raise ConfigError(
            f"--out {out}: a folder holding other files ({len(others)}) and no index "
            f"(no {MANIFEST}); choose an empty or new folder"
        )


def _print_estimate(engine: Engine, documents: list[Document], settings: IndexSettings) -> None:
    chunker = make_chunker(settings.chunker, settings.chunk_size, settings.overlap)
    chunks = [chunk for doc in documents for chunk in chunker.chunk(doc)]
    print(json.dumps(estimate_extraction(chunks, engine.prompts), indent=2))


def _index_with_llm(
    engine: Engine,
    out: str | Path,
    documents: list[Document],
    settings: IndexSettings,
    budget: ExtractionBudget | None,
) -> BuildReport:
    """Index with LLM extraction; a budget stop says how to resume and exits with 1."""

    async def run() -> BuildReport:
        async with engine:
            try:
                with stage_bars() as progress:
                    return await asyncio.to_thread(
                        index_documents,
                        out,
                        documents,
                        settings,
                        runner=engine.runner,
                        budget=budget,
                        on_progress=progress,
                    )
            finally:
                print(_spent(engine.ledger()), file=sys.stderr)

    try:
        return asyncio.run(run())
    except BudgetExhausted as exc:
        print(f"{exc}\n{_shown(str(out))} is incomplete; rerun to resume", file=sys.stderr)
        raise typer.Exit(1) from None


def _spent(ledger: Ledger) -> str:
    total = ledger.total
    return (
        f"LLM extraction: {total.calls} calls ({total.cached_calls} cached, "
        f"{total.failed_calls} failed), {total.prompt_tokens} prompt + "
        f"{total.completion_tokens} completion tokens billed"
    )


def delete(
    index: IndexDir,
    doc_ids: Annotated[
        list[str] | None, typer.Argument(metavar="DOC_ID...", help="ids of documents to remove")
    ] = None,
    path: Annotated[
        list[Path] | None,
        typer.Option(metavar="PATH", help="remove the documents read from PATH (repeatable)"),
    ] = None,
) -> None:
    """Remove documents from the index DIR and rebuild it (no model runs).

    Name the documents by id, or by --path: the files they were indexed from. The rest
    is rebuilt from its stored extractions.
    """
    read = [doc.id for p in path or () for doc in read_documents(p)]
    ids = list(dict.fromkeys([*(doc_ids or ()), *read]))
    if not ids:
        raise ConfigError("name the documents to remove: DOC_ID... or --path PATH")
    with stage_bars() as progress:
        report = delete_documents(index, ids, on_progress=progress)
    print_build(report, _shown(index))


def register(app: typer.Typer) -> None:
    app.command(epilog=CORPUS_FORMATS)(index)
    app.command()(delete)


def _shown(location: str) -> Path:
    """``location`` as the build summary prints it: a server URL without its password
    (``print_build`` only formats it, so the URL passes for a path there)."""
    return cast(Path, location_name(location)) if is_server_location(location) else Path(location)
