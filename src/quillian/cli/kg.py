"""``quillian kg``: import a pre-existing knowledge graph, and look entities up in it.

quillian kg import wikidata5m DIR --out kg/wikidata5m
quillian kg import wikidata5m --entities E --triples T --descriptions D --out OUT
quillian kg import rdf graph.nt more.ttl --out kg/mine
quillian kg import wordnet [/usr/share/wordnet] --out kg/wordnet
quillian kg show kg/wordnet dog
quillian kg link kg/wordnet --documents indexes/sample
quillian kg ann kg/wikidata5m --kind ivf-sq8 --nprobe 64
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from quillian.errors import ConfigError

__all__ = ["add_kg"]

FORMATS = ("wikidata5m", "rdf", "wordnet")


def add_kg(sub: Any) -> None:
    """Register ``kg import``, ``kg show`` and ``kg link`` on an argparse subparsers object."""
    p = sub.add_parser("kg", help="import and inspect pre-existing knowledge graphs")
    kg = p.add_subparsers(dest="kg_command", required=True)

    imp = kg.add_parser(
        "import",
        help="import Wikidata5M, RDF or WordNet into a graph directory",
        description="Import a knowledge graph. wikidata5m: PATH is the directory of the "
        "release files (or name them with --entities/--triples/--descriptions/--relations); "
        "rdf: PATH... are N-Triples (streamed), Turtle or other rdflib files; wordnet: PATH "
        "is the WordNet database directory (default /usr/share/wordnet).",
    )
    imp.add_argument("format", choices=FORMATS)
    imp.add_argument("paths", nargs="*", type=Path, metavar="PATH")
    imp.add_argument("--out", type=Path, required=True, metavar="DIR")
    imp.add_argument("--embedder", default="minilm", choices=("minilm", "hash"))
    imp.add_argument(
        "--no-preprocess",
        action="store_true",
        help="keep entities without a description or outgoing triple (the paper drops them)",
    )
    imp.add_argument("--name", help="graph name (default: the directory name)")
    imp.add_argument("--force", action="store_true", help="replace a graph already at --out")
    imp.add_argument("--vector-dtype", default="float32", choices=("float32", "float16"))
    imp.add_argument(
        "--ann",
        default="auto",
        choices=("auto", "none", "ivf-sq8", "ivf-fp16", "ivf-pq"),
        help="ANN index of the descriptions (extra 'ann'); auto: ivf-sq8 above 100k "
        "entities when faiss is installed, none: exact search only",
    )
    imp.add_argument(
        "--max-bad-lines",
        type=int,
        default=10_000,
        help="stop when a file has more malformed lines (-1: never)",
    )
    w5m = imp.add_argument_group("wikidata5m files (instead of a directory)")
    w5m.add_argument("--entities", type=Path, help="entity aliases: id<TAB>name<TAB>alias...")
    w5m.add_argument("--relations", type=Path, help="relation aliases: id<TAB>name<TAB>...")
    w5m.add_argument("--triples", type=Path, action="append", help="head<TAB>rel<TAB>tail")
    w5m.add_argument("--descriptions", type=Path, help="id<TAB>description")
    rdf = imp.add_argument_group("rdf")
    rdf.add_argument("--rdf-format", help="nt, turtle, xml, n3, ... (default: by suffix)")
    rdf.add_argument("--language", default="en", help="label language to keep ('' for all)")
    imp.add_argument("--json", action="store_true", help="print the report as JSON")
    imp.set_defaults(func=_cmd_import)

    show = kg.add_parser("show", help="look an entity up by name, alias or id")
    show.add_argument("graph", type=Path, metavar="DIR")
    show.add_argument("name", metavar="NAME")
    show.add_argument("--triples", type=int, default=10, help="triples shown per entity")
    show.add_argument("--limit", type=int, default=5, help="entities shown at most")
    show.set_defaults(func=_cmd_show)
    _add_link(kg)
    _add_ann(kg)


def _progress(stage: str, done: int, total: int) -> None:
    if not sys.stderr.isatty():
        return
    share = f"{100 * done / total:5.1f}%" if total else ""
    end = "\n" if total and done >= total else ""
    print(f"\r{stage}: {share}", end=end, file=sys.stderr, flush=True)


def _cmd_import(args: argparse.Namespace) -> int:
    from quillian.components.kg.writer import ImportOptions
    from quillian.registry import make_embedder

    options = ImportOptions(
        preprocess=not args.no_preprocess,
        name=args.name,
        overwrite=args.force,
        max_bad_lines=None if args.max_bad_lines < 0 else args.max_bad_lines,
        embedder_name=args.embedder,
        vector_dtype=args.vector_dtype,
        ann=args.ann,
    )
    embedder = make_embedder(args.embedder)
    common: dict[str, Any] = {"options": options, "progress": _progress}
    if args.format == "wikidata5m":
        from quillian.components.kg.wikidata5m import import_wikidata5m

        report = import_wikidata5m(_wikidata5m_files(args), args.out, embedder, **common)
    elif args.format == "rdf":
        from quillian.components.kg.rdf import import_rdf

        if not args.paths:
            raise ConfigError("rdf: give one or more RDF files")
        report = import_rdf(
            args.paths,
            args.out,
            embedder,
            rdf_format_=args.rdf_format,
            language=args.language or None,
            **common,
        )
    else:
        from quillian.components.kg.wordnet import DEFAULT_WORDNET, import_wordnet

        if len(args.paths) > 1:
            raise ConfigError("wordnet: give at most one directory")
        directory = args.paths[0] if args.paths else DEFAULT_WORDNET
        report = import_wordnet(args.out, embedder, directory, **common)
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=1))
    else:
        print("\n".join(report.summary_lines()))
        print(f"written to {args.out}")
    return 0


def _wikidata5m_files(args: argparse.Namespace) -> Any:
    from quillian.components.kg.wikidata5m import Wikidata5MFiles

    explicit = args.entities or args.triples or args.descriptions or args.relations
    if explicit:
        if args.paths:
            raise ConfigError("wikidata5m: give a directory or the file options, not both")
        if not (args.entities and args.triples and args.descriptions):
            raise ConfigError("wikidata5m: --entities, --triples and --descriptions are needed")
        return Wikidata5MFiles(
            entities=args.entities,
            triples=tuple(args.triples),
            descriptions=args.descriptions,
            relations=args.relations,
        )
    if len(args.paths) != 1:
        raise ConfigError("wikidata5m: give the directory of the release files")
    return Wikidata5MFiles.from_directory(args.paths[0])


def _add_link(kg: Any) -> None:
    link = kg.add_parser(
        "link",
        help="align an index's document-graph entities to an imported graph",
        description="Pair each entity of the index's document graph with the imported "
        "entity it names (alias match and description similarity, scores kept). The "
        "alignment is saved in DIR/links/ for this build of the index; then --kg DIR+index "
        "joins both graphs in `quillian ask`, `quillian retrieve` and `quillian bench qa`.",
    )
    link.add_argument("graph", type=Path, metavar="DIR")
    link.add_argument("--documents", type=Path, required=True, metavar="INDEX")
    link.add_argument("--min-score", type=float, default=0.6, help="keep links scoring this")
    link.add_argument(
        "--description-candidates",
        type=int,
        default=5,
        help="nearest descriptions considered besides name matches (0: names only)",
    )
    link.add_argument("--show", type=int, default=10, help="links printed, best first")
    link.add_argument("--json", action="store_true", help="print the summary as JSON")
    link.set_defaults(func=_cmd_link)


def _cmd_link(args: argparse.Namespace) -> int:
    from quillian.cli.main import open_index_dir
    from quillian.components.kg.document_graph import DocumentGraph
    from quillian.components.kg.link import LinkOptions, link_graphs
    from quillian.components.kg.store import ImportedGraph

    options = LinkOptions(
        min_score=args.min_score, description_candidates=args.description_candidates
    )
    documents = DocumentGraph(open_index_dir(args.documents).context, name=args.documents.name)
    with ImportedGraph.open(args.graph) as graph:
        alignment = link_graphs(documents, graph, options, _progress)
        path = alignment.save(args.graph, args.documents)
        examples = [
            {
                **row,
                "source": documents.entity_name(row["source"]),
                "target": f"{graph.entity_name(row['target'])} [{graph.entity_id(row['target'])}]",
            }
            for row in alignment.rows(args.show)
        ]
    saved = json.loads((path / "alignment.json").read_text(encoding="utf-8"))
    summary = {**saved, "path": str(path), "examples": examples}
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
        return 0
    n = summary["source_entities"]
    print(
        f"linked {len(alignment)} of {n} document entities "
        f"({', '.join(f'{k} {v}' for k, v in summary['by_kind'].items())}) "
        f"in {summary['seconds']} s; saved to {path}"
    )
    for row in examples:
        print(
            f"  {row['score']:.2f} {row['source']} -> {row['target']} "
            f"(name {row['name_score']:.2f}, description {row['description_score']:.2f}, "
            f"{row['kind']})"
        )
    return 0


def _add_ann(kg: Any) -> None:
    ann = kg.add_parser(
        "ann",
        help="build, tune or drop an imported graph's description ANN index",
        description="With --kind, build (or rebuild) the ANN index of the graph's "
        "description vectors, or drop it (none: exact search). With --nprobe alone, "
        "record how many lists a search scans by default, without rebuilding. With "
        "neither, show what the graph has.",
    )
    ann.add_argument("graph", type=Path, metavar="DIR")
    ann.add_argument("--kind", choices=("ivf-sq8", "ivf-fp16", "ivf-pq", "none"))
    ann.add_argument("--nlist", type=int, help="lists (default: about sqrt(entities))")
    ann.add_argument("--nprobe", type=int, help="lists scanned per query by default")
    ann.add_argument("--json", action="store_true", help="print the index's record as JSON")
    ann.set_defaults(func=_cmd_ann)


def _cmd_ann(args: argparse.Namespace) -> int:
    from quillian.components.kg.store import read_manifest
    from quillian.components.kg.writer import build_ann, drop_ann, set_ann_nprobe

    if args.kind == "none":
        if args.nlist is not None or args.nprobe is not None:
            raise ConfigError("--kind none takes no --nlist or --nprobe")
        dropped = drop_ann(args.graph)
        print(f"{args.graph}: " + ("ANN index dropped" if dropped else "had no ANN index"))
        return 0
    if args.kind is not None:
        build_ann(args.graph, args.kind, nlist=args.nlist, nprobe=args.nprobe, progress=_progress)
    elif args.nlist is not None:
        raise ConfigError("--nlist needs --kind (the lists are fixed when the index is built)")
    elif args.nprobe is not None:
        set_ann_nprobe(args.graph, args.nprobe)
    info = read_manifest(args.graph).get("ann")
    if args.json:
        print(json.dumps(info))
    elif info is None:
        print(f"{args.graph}: no ANN index (descriptions are searched exactly)")
    else:
        print(
            f"{args.graph}: {info['method']}, {info['count']} vectors in {info['nlist']} "
            f"lists, {info['nprobe']} scanned per query, {info['bytes'] / 2**20:.1f} MB"
        )
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from quillian.components.kg.store import ImportedGraph

    with ImportedGraph.open(args.graph) as graph:
        found = graph.lookup(args.name)
        by_id = graph.index_of(args.name)
        if by_id >= 0 and by_id not in found:
            found.insert(0, by_id)
        if not found:
            print(f"no entity named {args.name!r} in {graph.name}", file=sys.stderr)
            return 1
        for entity in found[: args.limit]:
            names = graph.names(entity)
            print(f"{names[0]} [{graph.entity_id(entity)}]")
            if len(names) > 1:
                print("  also: " + "; ".join(names[1:]))
            print(f"  {graph.description(entity) or '(no description)'}")
            triples = graph.triples([entity], args.triples)[entity]
            print(f"  {graph.degree(entity)} triples; first {len(triples)}:")
            for triple in triples:
                print(f"    {triple.text()}")
        if len(found) > args.limit:
            print(f"... and {len(found) - args.limit} more entities with that name")
    return 0
