"""``quillian kg``: import a pre-existing knowledge graph, look entities up in it, link
an index's entities to it, and tune its description ANN index.

quillian kg import wikidata5m DIR --out kg/wikidata5m
quillian kg import wikidata5m --entities E --triples T --descriptions D --out OUT
quillian kg import rdf graph.nt more.ttl --out kg/mine
quillian kg import wordnet [/usr/share/wordnet] --out kg/wordnet
quillian kg show kg/wordnet dog
quillian kg link kg/wordnet --documents indexes/sample
quillian kg ann kg/wikidata5m --kind ivf-sq8 --nprobe 64
"""

from __future__ import annotations

import json
import sys
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

import typer

from quillian.cli.console import stage_bars
from quillian.cli.flags import JsonFlag, choice, one_of
from quillian.components.embedding.factory import DEFAULT_EMBEDDER, EMBEDDERS, make_embedder
from quillian.components.kg.document_graph import DocumentGraph
from quillian.components.kg.link import LinkOptions, link_graphs
from quillian.components.kg.rdf import import_rdf
from quillian.components.kg.report import ImportReport
from quillian.components.kg.store import ImportedGraph, read_manifest
from quillian.components.kg.wikidata5m import Wikidata5MFiles, import_wikidata5m
from quillian.components.kg.wordnet import DEFAULT_WORDNET, import_wordnet
from quillian.components.kg.writer import (
    ANN_CHOICES,
    ImportOptions,
    build_ann,
    drop_ann,
    set_ann_nprobe,
)
from quillian.components.kge.config import MODES as KGE_MODES
from quillian.components.kge.config import ComplExConfig
from quillian.components.kge.storage import model_directory
from quillian.engine import Engine
from quillian.engine.kge import train_kge
from quillian.errors import ConfigError
from quillian.index.layout import local_directory
from quillian.index.storage import VECTOR_DTYPES
from quillian.stores.embedded.faiss_ivf import IVF_KINDS

__all__ = ["app"]

app = typer.Typer(
    help="Import and inspect pre-existing knowledge graphs.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)

GraphDir = Annotated[Path, typer.Argument(metavar="DIR", help="a graph written by kg import")]
W5M = "wikidata5m files (instead of a directory)"
ANN_KINDS = (*IVF_KINDS, "none")
FORMATS = ("wikidata5m", "rdf", "wordnet")


@app.command("import")
def import_(
    format_: Annotated[str, typer.Argument(metavar="|".join(FORMATS), callback=one_of(FORMATS))],
    out: Annotated[Path, typer.Option(metavar="DIR", help="the graph directory to write")],
    paths: Annotated[list[Path] | None, typer.Argument(metavar="PATH...")] = None,
    embedder: Annotated[str, choice(EMBEDDERS)] = DEFAULT_EMBEDDER,
    no_preprocess: Annotated[
        bool,
        typer.Option(
            "--no-preprocess",
            help="keep entities without a description or outgoing triple (the paper drops them)",
        ),
    ] = False,
    name: Annotated[str | None, typer.Option(help="graph name (default: the directory)")] = None,
    force: Annotated[bool, typer.Option("--force", help="replace a graph at --out")] = False,
    vector_dtype: Annotated[str, choice(VECTOR_DTYPES)] = "float32",
    ann: Annotated[
        str,
        choice(
            ANN_CHOICES,
            "ANN index of the descriptions (extra 'ann'); auto: ivf-sq8 above 100k "
            "entities when faiss is installed, none: exact search only",
        ),
    ] = "auto",
    max_bad_lines: Annotated[
        int, typer.Option(min=-1, help="stop when a file has more malformed lines (-1: never)")
    ] = 10_000,
    entities: Annotated[
        Path | None, typer.Option(rich_help_panel=W5M, help="tab-separated: id, name, aliases")
    ] = None,
    relations: Annotated[
        Path | None, typer.Option(rich_help_panel=W5M, help="tab-separated: id, name, aliases")
    ] = None,
    triples: Annotated[
        list[Path] | None,
        typer.Option(rich_help_panel=W5M, help="tab-separated: head, relation, tail (repeatable)"),
    ] = None,
    descriptions: Annotated[
        Path | None, typer.Option(rich_help_panel=W5M, help="tab-separated: id, description")
    ] = None,
    rdf_format: Annotated[
        str | None,
        typer.Option(rich_help_panel="rdf", help="nt, turtle, xml, n3, ... (default: suffix)"),
    ] = None,
    language: Annotated[
        str, typer.Option(rich_help_panel="rdf", help="label language to keep ('' for all)")
    ] = "en",
    json_out: JsonFlag = False,
) -> None:
    """Import Wikidata5M, RDF or WordNet into a graph directory.

    wikidata5m: PATH is the directory of the release files (or name them with
    --entities/--triples/--descriptions/--relations); rdf: PATH... are N-Triples
    (streamed), Turtle or other rdflib files; wordnet: PATH is the WordNet database
    directory (default /usr/share/wordnet).
    """
    options = ImportOptions(
        preprocess=not no_preprocess,
        name=name,
        overwrite=force,
        max_bad_lines=None if max_bad_lines < 0 else max_bad_lines,
        embedder_name=embedder,
        vector_dtype=vector_dtype,
        ann=ann,
    )
    inputs = paths or []
    common: dict[str, Any] = {"options": options}
    with stage_bars() as progress:
        common["progress"] = progress
        if format_ == "wikidata5m":
            files = _wikidata5m_files(inputs, entities, triples, descriptions, relations)
            report = import_wikidata5m(files, out, make_embedder(embedder), **common)
        elif format_ == "rdf":
            report = _import_rdf(inputs, out, embedder, rdf_format, language, common)
        else:
            if len(inputs) > 1:
                raise ConfigError("wordnet: give at most one directory")
            directory = inputs[0] if inputs else DEFAULT_WORDNET
            report = import_wordnet(out, make_embedder(embedder), directory, **common)
    if json_out:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=1))
    else:
        print("\n".join(report.summary_lines()))
        print(f"written to {out}")


def _import_rdf(
    paths: list[Path],
    out: Path,
    embedder: str,
    rdf_format: str | None,
    language: str,
    common: dict[str, Any],
) -> ImportReport:
    if not paths:
        raise ConfigError("rdf: give one or more RDF files")
    return import_rdf(
        paths,
        out,
        make_embedder(embedder),
        rdf_format_=rdf_format,
        language=language or None,
        **common,
    )


def _wikidata5m_files(
    paths: list[Path],
    entities: Path | None,
    triples: list[Path] | None,
    descriptions: Path | None,
    relations: Path | None,
) -> Wikidata5MFiles:
    if entities or triples or descriptions or relations:
        if paths:
            raise ConfigError("wikidata5m: give a directory or the file options, not both")
        if not (entities and triples and descriptions):
            raise ConfigError("wikidata5m: --entities, --triples and --descriptions are needed")
        return Wikidata5MFiles(
            entities=entities,
            triples=tuple(triples),
            descriptions=descriptions,
            relations=relations,
        )
    if len(paths) != 1:
        raise ConfigError("wikidata5m: give the directory of the release files")
    return Wikidata5MFiles.from_directory(paths[0])


@app.command()
def show(
    graph_dir: GraphDir,
    name: Annotated[str, typer.Argument(metavar="NAME", help="a name, an alias or an id")],
    triples: Annotated[int, typer.Option(min=0, help="triples shown per entity")] = 10,
    limit: Annotated[int, typer.Option(min=1, help="entities shown at most")] = 5,
) -> None:
    """Look an entity up by name, alias or id: its names, description and triples."""
    with ImportedGraph.open(graph_dir) as graph:
        found = graph.lookup(name)
        by_id = graph.index_of(name)
        if by_id >= 0 and by_id not in found:
            found.insert(0, by_id)
        if not found:
            print(f"no entity named {name!r} in {graph.name}", file=sys.stderr)
            raise typer.Exit(1)
        for entity in found[:limit]:
            names = graph.names(entity)
            print(f"{names[0]} [{graph.entity_id(entity)}]")
            if len(names) > 1:
                print("  also: " + "; ".join(names[1:]))
            print(f"  {graph.description(entity) or '(no description)'}")
            shown = graph.triples([entity], triples)[entity]
            print(f"  {graph.degree(entity)} triples; first {len(shown)}:")
            for triple in shown:
                print(f"    {triple.text()}")
        if len(found) > limit:
            print(f"... and {len(found) - limit} more entities with that name")


@app.command()
def link(
    graph_dir: GraphDir,
    documents: Annotated[Path, typer.Option(metavar="INDEX", help="the index to align")],
    min_score: Annotated[float, typer.Option(help="keep links scoring this")] = 0.6,
    description_candidates: Annotated[
        int,
        typer.Option(
            min=0, help="nearest descriptions considered besides name matches (0: names only)"
        ),
    ] = 5,
    show: Annotated[int, typer.Option(min=0, help="links printed, best first")] = 10,
    json_out: JsonFlag = False,
) -> None:
    """Align an index's document-graph entities to an imported graph.

    Each entity of the index's document graph is paired with the imported entity it
    names (alias match and description similarity, scores kept). The alignment is saved
    in DIR/links/ for this build of the index; then --kg DIR+index joins both graphs in
    'quillian ask', 'quillian retrieve' and 'quillian bench qa'.
    """
    options = LinkOptions(min_score=min_score, description_candidates=description_candidates)
    with closing(Engine.open(documents)) as engine:
        source = DocumentGraph(engine.index.context, name=documents.name)
        with ImportedGraph.open(graph_dir) as graph, stage_bars() as progress:
            alignment = link_graphs(source, graph, options, progress)
            path = alignment.save(graph_dir, documents)
            examples = [
                {
                    **row,
                    "source": source.entity_name(row["source"]),
                    "target": f"{graph.entity_name(row['target'])} "
                    f"[{graph.entity_id(row['target'])}]",
                }
                for row in alignment.rows(show)
            ]
    saved = json.loads((path / "alignment.json").read_text(encoding="utf-8"))
    summary = {**saved, "path": str(path), "examples": examples}
    if json_out:
        print(json.dumps(summary, ensure_ascii=False))
        return
    kinds = ", ".join(f"{k} {v}" for k, v in summary["by_kind"].items())
    print(
        f"linked {len(alignment)} of {summary['source_entities']} document entities "
        f"({kinds}) in {summary['seconds']} s; saved to {path}"
    )
    for row in examples:
        print(
            f"  {row['score']:.2f} {row['source']} -> {row['target']} "
            f"(name {row['name_score']:.2f}, description {row['description_score']:.2f}, "
            f"{row['kind']})"
        )


@app.command()
def ann(
    graph_dir: GraphDir,
    kind: Annotated[str | None, choice(ANN_KINDS)] = None,
    nlist: Annotated[
        int | None, typer.Option(min=1, help="lists (default: about sqrt(entities))")
    ] = None,
    nprobe: Annotated[
        int | None, typer.Option(min=1, help="lists scanned per query by default")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Build, tune or drop an imported graph's description ANN index.

    With --kind, build (or rebuild) the ANN index of the graph's description vectors,
    or drop it (none: exact search). With --nprobe alone, record how many lists a
    search scans by default, without rebuilding. With neither, show what the graph has.
    """
    if kind == "none":
        if nlist is not None or nprobe is not None:
            raise ConfigError("--kind none takes no --nlist or --nprobe")
        dropped = drop_ann(graph_dir)
        print(f"{graph_dir}: " + ("ANN index dropped" if dropped else "had no ANN index"))
        return
    if kind is not None:
        with stage_bars() as progress:
            build_ann(graph_dir, kind, nlist=nlist, nprobe=nprobe, progress=progress)
    elif nlist is not None:
        raise ConfigError("--nlist needs --kind (the lists are fixed when the index is built)")
    elif nprobe is not None:
        set_ann_nprobe(graph_dir, nprobe)
    info = read_manifest(graph_dir).get("ann")
    if json_out:
        print(json.dumps(info))
    elif info is None:
        print(f"{graph_dir}: no ANN index (descriptions are searched exactly)")
    else:
        print(
            f"{graph_dir}: {info['method']}, {info['count']} vectors in {info['nlist']} "
            f"lists, {info['nprobe']} scanned per query, {info['bytes'] / 2**20:.1f} MB"
        )


#: The defaults of ``kg train-kge``: the component's own.
KGE = ComplExConfig()


@app.command("train-kge")
def train_kge_command(
    graph_dir: Annotated[str, typer.Argument(metavar="KG|INDEX", show_default=False)],
    dim: Annotated[int, typer.Option(min=2, help="reals per embedding (even)")] = KGE.dim,
    epochs: Annotated[int, typer.Option(min=1, help="passes over the triples")] = KGE.epochs,
    learning_rate: Annotated[float, typer.Option(help="Adagrad learning rate")] = KGE.learning_rate,
    n3_weight: Annotated[float, typer.Option(help="N3 regularisation weight")] = KGE.n3_weight,
    batch_size: Annotated[
        int, typer.Option(min=1, help="training examples per step")
    ] = KGE.batch_size,
    mode: Annotated[str, choice(KGE_MODES, "objective (auto: by graph size)")] = KGE.mode,
    negatives: Annotated[
        int, typer.Option(min=1, help="shared negatives per batch")
    ] = KGE.negatives,
    seed: Annotated[int, typer.Option(help="seed of initialisation and sampling")] = KGE.seed,
    restart: Annotated[
        bool, typer.Option("--restart", help="ignore an interrupted run's checkpoint")
    ] = False,
    threads: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="torch threads (default: every core; use 1 when other work keeps the "
            "cores busy: training on every core then slows many times over)",
        ),
    ] = None,
    valid_share: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=0.5,
            help="share of the triples held out (at most 2,000; none below 100): training "
            "stops when their filtered MRR stops improving and keeps the best epoch; "
            "0 trains on every triple for --epochs",
        ),
    ] = KGE.valid_share,
    json_out: JsonFlag = False,
) -> None:
    """Train a ComplEx KG-embedding model on an imported graph or an index's graph.

    ComplEx with N3 regularisation and reciprocal relations (Lacroix et al., 2018),
    trained 1-vs-all, or with shared negatives on large graphs. A small share of the
    triples is held out to measure the model and stop training early. The model is
    written to KG|INDEX/kge/ (memory-mapped arrays and a manifest); an interrupted run
    resumes from its last epoch unless --restart.
    """
    config = ComplExConfig(
        dim=dim,
        epochs=epochs,
        learning_rate=learning_rate,
        n3_weight=n3_weight,
        batch_size=batch_size,
        mode=mode,
        negatives=negatives,
        seed=seed,
        valid_share=valid_share,
    )
    with stage_bars() as progress:
        result = train_kge(
            graph_dir,
            config,
            resume=not restart,
            on_progress=progress,
            threads=threads,
        )
    summary = {
        "model": str(model_directory(local_directory(graph_dir))),
        "mode": result.mode,
        "epochs": result.epochs,
        "best_epoch": result.best_epoch,
        "stopped_early": result.stopped_early,
        "resumed_from": result.resumed_from,
        "seconds": round(result.seconds, 2),
        "valid": {k: round(v, 4) for k, v in result.valid_metrics.items()},
    }
    if json_out:
        print(json.dumps(summary))
        return
    resumed = f", resumed from epoch {result.resumed_from}" if result.resumed_from else ""
    print(
        f"trained ComplEx ({result.mode}) for {result.epochs} epochs in "
        f"{result.seconds:.1f} s{resumed}; saved to {summary['model']}"
    )
    if result.valid_metrics:
        stopped = ", stopped early" if result.stopped_early else ""
        print(
            f"held-out triples: filtered MRR {result.valid_metrics['mrr']:.3f}, Hits@10 "
            f"{result.valid_metrics['hits@10']:.3f} at epoch {result.best_epoch} (kept){stopped}"
        )
