"""WordNet 3.0 from its database files (Debian's ``wordnet-base``: ``/usr/share/wordnet``).

Each line of ``data.noun``, ``data.verb``, ``data.adj`` and ``data.adv`` is one synset
in the WNDB format (``wndb(5WN)``)::

    offset lex_filenum ss_type w_cnt word lex_id [word lex_id...] p_cnt [ptr...] [frames] | gloss

A synset becomes an entity with id ``<pos><offset>`` (``n02084071``; adjective
satellites share the ``a`` prefix, as they share ``data.adj``), its lemmas as names
(underscores as spaces, adjective markers such as ``(p)`` removed) and its gloss as the
description. The pointers below become triples; other pointer types are counted as
``pointer-ignored``. The licence header (lines starting with two spaces) is skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

from quillian.components.embedding.base import Embedder
from quillian.components.kg.lines import BadLines, decode_block, iter_blocks
from quillian.components.kg.report import ImportReport, Progress, no_progress
from quillian.components.kg.staging import EntityCollector, StagedGraph
from quillian.components.kg.writer import ImportOptions, import_graph
from quillian.errors import InputError

__all__ = ["DEFAULT_WORDNET", "POINTERS", "import_wordnet", "stage_wordnet"]

DEFAULT_WORDNET = Path("/usr/share/wordnet")

#: WNDB pointer symbol -> relation name, read as ``<head | name | tail>``.
POINTERS = {
    "@": "is a kind of",  # hypernym
    "@i": "is an instance of",  # instance hypernym
    "~": "has kind",  # hyponym
    "~i": "has instance",  # instance hyponym
    "#m": "is a member of",  # member holonym
    "#s": "is a substance of",  # substance holonym
    "#p": "is a part of",  # part holonym
    "%m": "has member",  # member meronym
    "%s": "has substance",  # substance meronym
    "%p": "has part",  # part meronym
}
_FILES = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}
_SS_TYPES = {"n": "n", "v": "v", "a": "a", "s": "a", "r": "r"}
_MARKER = re.compile(r"\((?:a|p|ip)\)$")


def synset_id(offset: str, ss_type: str) -> str:
    """Entity id of a synset: ``n02084071``."""
    return f"{_SS_TYPES[ss_type]}{offset}"


def stage_wordnet(
    directory: Path,
    workdir: Path,
    report: ImportReport,
    progress: Progress,
    max_bad_lines: int | None = 10_000,
) -> StagedGraph:
    """Read the four ``data.*`` files of a WordNet database directory."""
    paths = [directory / f"data.{part}" for part in _FILES]
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        raise InputError(
            f"no {', '.join(missing)} here; install WordNet with: apt-get install wordnet-base",
            path=str(directory),
        )
    collector = EntityCollector(workdir, report.issues)
    for code, relation in POINTERS.items():
        collector.relation(code, relation)
    for path, pos in zip(paths, _FILES.values(), strict=True):
        _read_data_file(path, pos, collector, report, progress, max_bad_lines)
    staged = collector.finish()
    report.read["entities"] = len(collector.ids)
    report.read["triples"] = len(collector.heads)
    report.read["relations"] = len(POINTERS)
    return staged


def _read_data_file(
    path: Path,
    pos: str,
    collector: EntityCollector,
    report: ImportReport,
    progress: Progress,
    limit: int | None,
) -> None:
    name = str(path)
    issues = report.issues
    bad = BadLines(issues, limit)
    n_lines = 0
    for first, block in iter_blocks(path, f"wordnet {path.name}", progress):
        for i, line in enumerate(decode_block(block, first, name, issues)):
            n_lines += 1
            if line is None or line.startswith("  ") or not line.strip():
                continue
            try:
                _parse_synset(line, pos, collector, name, first + i)
            except (ValueError, IndexError, KeyError) as exc:
                issues.add("malformed", name, first + i, f"{exc}: {line[:60]!r}")
        bad.check(name)
    report.lines[name] = n_lines


def _parse_synset(line: str, pos: str, collector: EntityCollector, path: str, number: int) -> None:
    data, _, gloss = line.partition(" | ")
    tokens = data.split()
    offset, ss_type = tokens[0], tokens[2]
    if len(offset) != 8 or not offset.isdigit():
        raise ValueError(f"synset offset {offset!r} is not 8 digits")
    if _SS_TYPES[ss_type] != pos:
        raise ValueError(f"synset type {ss_type!r} in the {pos} file")
    n_words = int(tokens[3], 16)
    words = tokens[4 : 4 + 2 * n_words : 2]
    at = 4 + 2 * n_words
    n_pointers = int(tokens[at])
    pointers = tokens[at + 1 : at + 1 + 4 * n_pointers]
    if len(words) != n_words or not n_words or len(pointers) != 4 * n_pointers:
        raise ValueError(f"expected {n_words} words and {n_pointers} pointers")
    links: list[tuple[int, str]] = []
    for j in range(0, len(pointers), 4):
        symbol, target, target_pos = pointers[j], pointers[j + 1], pointers[j + 2]
        if len(target) != 8 or not target.isdigit():
            raise ValueError(f"pointer target {target!r} is not 8 digits")
        relation = collector.relation_index.get(symbol)
        if relation is None:
            collector.issues.add("pointer-ignored", path, number, f"pointer {symbol!r}")
        else:
            links.append((relation, synset_id(target, target_pos)))
    lemmas = [_MARKER.sub("", w).replace("_", " ") for w in words]
    head_id = synset_id(offset, ss_type)
    if collector.define(head_id, lemmas, gloss.strip(), path, number):
        head = collector.entity(head_id)
        for relation, tail_id in links:
            collector.triple(head, relation, collector.entity(tail_id, path, number))


def import_wordnet(
    out: str | Path,
    embedder: Embedder,
    directory: str | Path = DEFAULT_WORDNET,
    *,
    options: ImportOptions | None = None,
    progress: Progress = no_progress,
) -> ImportReport:
    """Import WordNet's synsets and their taxonomy and part-whole pointers into ``out``."""
    root = Path(directory)
    chosen = options or ImportOptions()

    def stage(workdir: Path, report: ImportReport, progress: Progress) -> StagedGraph:
        return stage_wordnet(root, workdir, report, progress, chosen.max_bad_lines)

    return import_graph(
        stage,
        out,
        embedder,
        source="wordnet",
        inputs=[str(root)],
        options=chosen,
        progress=progress,
    )
