"""Wikidata5M release files (Wang et al., 2021), as KG-Infused RAG uses them.

* entity aliases ``wikidata5m_entity.txt``: ``Q42<TAB>Douglas Adams<TAB>...``, the
  first alias being the name;
* relation aliases ``wikidata5m_relation.txt``: the same shape for ``P`` ids (every
  alias is kept: the first names the relation, the others let a predicate match it);
* triples ``wikidata5m_all_triplet.txt``: ``head<TAB>relation<TAB>tail``;
* descriptions ``wikidata5m_text.txt``: ``Q42<TAB>text``.

Every file is streamed in blocks (``.gz`` works too). The entity ids are kept as one
sorted byte-string array (about 10 bytes an entity); triple blocks are split and
mapped to entity numbers with numpy, not line by line, unless a block holds a
malformed line, which the line-by-line path then finds and reports.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.base import Embedder
from quillian.components.kg.lines import BadLines, decode_block, iter_blocks, split_block
from quillian.components.kg.report import ImportReport, IssueLog, Progress, no_progress
from quillian.components.kg.staging import (
    RaggedFile,
    StagedGraph,
    first_occurrences,
    lookup_sorted,
    to_bytes_array,
)
from quillian.components.kg.writer import ImportOptions, import_graph
from quillian.errors import InputError

__all__ = ["Wikidata5MFiles", "import_wikidata5m", "stage_wikidata5m"]

I64 = npt.NDArray[np.int64]
#: Below this share of known ids (after ``MATCH_SAMPLE`` lines) a file is refused as
#: belonging to another graph.
MIN_MATCH = 0.05
MATCH_SAMPLE = 1000

_NAMES = {
    "entities": ("wikidata5m_entity.txt",),
    "relations": ("wikidata5m_relation.txt",),
    "triples": ("wikidata5m_all_triplet.txt",),
    "descriptions": ("wikidata5m_text.txt",),
}
_TRANSDUCTIVE = tuple(f"wikidata5m_transductive_{s}.txt" for s in ("train", "valid", "test"))


@dataclass(frozen=True)
class Wikidata5MFiles:
    """Paths of one Wikidata5M release; ``relations`` may be None (relation ids are
    then their own names)."""

    entities: Path
    triples: tuple[Path, ...]
    descriptions: Path
    relations: Path | None = None

    @classmethod
    def from_directory(cls, directory: str | Path) -> Wikidata5MFiles:
        """Find the release files (plain or ``.gz``) by their standard names. Triples
        come from ``wikidata5m_all_triplet.txt``, else the transductive splits."""
        root = Path(directory)
        if not root.is_dir():
            raise InputError("not a directory holding the Wikidata5M files", path=str(root))

        def find(names: tuple[str, ...]) -> list[Path]:
            found = []
            for name in names:
                for candidate in (root / name, root / f"{name}.gz"):
                    if candidate.exists():
                        found.append(candidate)
                        break
            return found

        entities, descriptions = find(_NAMES["entities"]), find(_NAMES["descriptions"])
        triples = find(_NAMES["triples"]) or find(_TRANSDUCTIVE)
        missing = [
            what
            for what, got in (
                ("entity aliases", entities),
                ("triples", triples),
                ("descriptions", descriptions),
            )
            if not got
        ]
        if missing:
            raise InputError(
                f"no {', '.join(missing)} file; expected {_NAMES['entities'][0]}, "
                f"{_NAMES['triples'][0]} and {_NAMES['descriptions'][0]} (or .gz)",
                path=str(root),
            )
        relations = find(_NAMES["relations"])
        relation = relations[0] if relations else None
        return cls(entities[0], tuple(triples), descriptions[0], relation)

    def paths(self) -> list[str]:
        extra = [self.relations] if self.relations else []
        return [str(p) for p in (self.entities, *extra, *self.triples, self.descriptions)]


def stage_wikidata5m(
    files: Wikidata5MFiles,
    workdir: Path,
    report: ImportReport,
    progress: Progress,
    max_bad_lines: int | None = 10_000,
) -> StagedGraph:
    """Read the release files into a staged graph (see :mod:`quillian.components.kg.staging`)."""
    aliases = RaggedFile(workdir / "aliases.bin")
    ids, alias_rows = _read_entities(files.entities, aliases, report, progress, max_bad_lines)
    relation_ids, relation_names, relation_aliases = (
        _read_relations(files.relations, report, max_bad_lines) if files.relations else ([], [], [])
    )
    relations = _Relations(
        relation_ids, relation_names, relation_aliases, named=files.relations is not None
    )
    heads: list[npt.NDArray[np.int32]] = []
    rels: list[npt.NDArray[np.int32]] = []
    tails: list[npt.NDArray[np.int32]] = []
    for path in files.triples:
        for h, r, t in _read_triples(path, ids, relations, report, progress, max_bad_lines):
            heads.append(h)
            rels.append(r)
            tails.append(t)
    descriptions = RaggedFile(workdir / "descriptions.bin")
    description_rows = _read_descriptions(
        files.descriptions, ids, descriptions, report, progress, max_bad_lines
    )
    report.read["relations"] = len(relations.ids)
    return StagedGraph(
        ids=ids,
        aliases=aliases,
        alias_rows=alias_rows,
        descriptions=descriptions,
        description_rows=description_rows,
        heads=_concat(heads),
        relations=_concat(rels),
        tails=_concat(tails),
        relation_ids=relations.ids,
        relation_names=relations.names,
        relation_aliases=relations.aliases,
    )


def _concat(parts: list[npt.NDArray[np.int32]]) -> npt.NDArray[np.int32]:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)


def _iter_tsv(
    path: Path,
    stage: str,
    report: ImportReport,
    progress: Progress,
    bad: BadLines,
    what: str,
    empty_kind: str = "malformed",
) -> Iterator[tuple[list[str], list[str], list[int]]]:
    """Per block: ids, the rest of each line after the first tab, and line numbers.

    A line without a tab is ``malformed``; one with nothing after the tab counts as
    ``empty_kind``."""
    name = str(path)
    issues = report.issues
    n_lines = 0
    for first, block in iter_blocks(path, stage, progress):
        ids: list[str] = []
        rests: list[str] = []
        numbers: list[int] = []
        for i, line in enumerate(decode_block(block, first, name, issues)):
            n_lines += 1
            if line is None or not line.strip():
                continue
            head, sep, rest = line.partition("\t")
            head = head.strip()
            if not sep or not head:
                issues.add("malformed", name, first + i, f"expected id<TAB>{what}: {line[:80]!r}")
                continue
            if not rest.strip():
                issues.add(empty_kind, name, first + i, f"{head} has no {what}")
                continue
            ids.append(head)
            rests.append(rest)
            numbers.append(first + i)
        bad.check(name)
        yield ids, rests, numbers
    report.lines[name] = n_lines


def _clean_aliases(rest: str) -> str:
    """Tab-separated aliases with runs of spaces as one and empty ones removed."""
    if "  " not in rest and "\t\t" not in rest and rest == rest.strip():
        return rest
    return "\t".join(a for a in (" ".join(x.split()) for x in rest.split("\t")) if a)


def _read_entities(
    path: Path, aliases: RaggedFile, report: ImportReport, progress: Progress, limit: int | None
) -> tuple[npt.NDArray[np.bytes_], I64]:
    """Sorted unique entity ids and, for each, its record in ``aliases``. A repeated id
    is a ``duplicate-entity`` issue; its first line wins."""
    bad = BadLines(report.issues, limit)
    id_parts: list[npt.NDArray[np.bytes_]] = []
    line_parts: list[I64] = []
    for ids, rests, numbers in _iter_tsv(path, "entities", report, progress, bad, "alias..."):
        id_parts.append(to_bytes_array(ids, "entity id"))
        line_parts.append(np.array(numbers, dtype=np.int64))
        aliases.append([_clean_aliases(r).encode("utf-8") for r in rests])
    all_ids = np.concatenate(id_parts) if id_parts else np.zeros(0, "S1")
    lines = np.concatenate(line_parts) if line_parts else np.zeros(0, np.int64)
    if not len(all_ids):
        raise InputError("no entities read (expected lines id<TAB>alias...)", path=str(path))
    order = np.argsort(all_ids, kind="stable")
    ordered = all_ids[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    if not first.all():
        repeats = np.flatnonzero(~first)
        # the first occurrence of each repeat's id: the nearest 'first' before it
        origin = order[np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))[repeats]]
        repeat_records = order[repeats]
        by_line = np.argsort(lines[repeat_records], kind="stable")
        details = [
            f"{ordered[repeats[j]].decode()} already on line {lines[origin[j]]}; the first is kept"
            for j in by_line[: report.issues.room("duplicate-entity")]
        ]
        report.issues.add_many(
            "duplicate-entity", str(path), lines[repeat_records[by_line]], details
        )
    report.read["entities"] = int(first.sum())
    return ordered[first], order[first].astype(np.int64)


def _read_relations(
    path: Path, report: ImportReport, limit: int | None
) -> tuple[list[str], list[str], list[tuple[str, ...]]]:
    """Sorted relation ids, each one's name (its first alias) and its other aliases
    (``Pid<TAB>label<TAB>alias...``, as the entity file); a repeated id is a
    ``duplicate-relation`` issue, its first line wins."""
    bad = BadLines(report.issues, limit)
    seen: dict[str, list[str]] = {}
    name = str(path)
    for ids, rests, numbers in _iter_tsv(path, "relations", report, _quiet, bad, "alias..."):
        for rid, rest, line in zip(ids, rests, numbers, strict=True):
            if rid in seen:
                report.issues.add("duplicate-relation", name, line, f"{rid}; the first is kept")
                continue
            seen[rid] = list(dict.fromkeys(_clean_aliases(rest).split("\t")))
    ordered = sorted(seen)
    return ordered, [seen[r][0] for r in ordered], [tuple(seen[r][1:]) for r in ordered]


def _quiet(stage: str, done: int, total: int) -> None:
    pass


class _Relations:
    """Relation ids to numbers: those of the relations file, plus any other id met in
    a triple (named by its id, and reported once as ``unknown-relation`` when there is
    a relations file)."""

    def __init__(
        self, ids: list[str], names: list[str], aliases: list[tuple[str, ...]], named: bool
    ) -> None:
        self.ids = list(ids)
        self.names = list(names)
        self.aliases = list(aliases)
        self.named = named
        self._sorted = to_bytes_array(ids, "relation id") if ids else np.zeros(0, "S1")
        self._extra: dict[bytes, int] = {}

    def numbers(
        self, keys: npt.NDArray[np.bytes_], lines: I64, path: str, issues: IssueLog
    ) -> npt.NDArray[np.int32]:
        out = lookup_sorted(self._sorted, keys)
        for j in np.flatnonzero(out < 0).tolist():
            key = bytes(keys[j])
            number = self._extra.get(key)
            if number is None:
                number = self._extra[key] = len(self.ids)
                text = key.decode("utf-8")
                self.ids.append(text)
                self.names.append(text)
                self.aliases.append(())
                if self.named:
                    issues.add("unknown-relation", path, int(lines[j]), f"{text} has no name")
            out[j] = number
        return out.astype(np.int32)


class _MatchCheck:
    """Refuses a file whose ids hardly ever name a known entity: it belongs to another
    graph (or is the wrong file)."""

    def __init__(self, path: str, what: str) -> None:
        self.path, self.what = path, what
        self.total = self.matched = 0
        self.checked = False

    def update(self, total: int, matched: int, final: bool = False) -> None:
        self.total += total
        self.matched += matched
        if self.checked or not self.total or (self.total < MATCH_SAMPLE and not final):
            return
        self.checked = True
        if self.matched < MIN_MATCH * self.total:
            raise InputError(
                f"only {self.matched:,} of the first {self.total:,} {self.what} name entities "
                "of the entity file; is it a file of another graph?",
                path=self.path,
            )


def _split_triples(block: bytes) -> npt.NDArray[np.bytes_] | None:
    """The ``(n, 3)`` id array of a block of well-formed triple lines, else None."""
    body = block[:-1] if block.endswith(b"\n") else block
    if b"\r" in body or b" " in body:
        return None
    fields = body.replace(b"\n", b"\t").split(b"\t")
    if len(fields) != 3 * (body.count(b"\n") + 1) or b"" in fields:
        return None
    return np.array(fields, dtype=np.bytes_).reshape(-1, 3)


def _read_triples(
    path: Path,
    ids: npt.NDArray[np.bytes_],
    relations: _Relations,
    report: ImportReport,
    progress: Progress,
    limit: int | None,
) -> Iterator[tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.int32]]]:
    """Per block, ``(heads, relations, tails)`` of the triples whose ends are known."""
    name = str(path)
    issues = report.issues
    bad = BadLines(issues, limit)
    match = _MatchCheck(name, "triples")
    n_lines = n_read = 0
    for first, block in iter_blocks(path, "triples", progress):
        fields, lines = _fast_or_slow(block, first, name, issues)
        n_lines += block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
        bad.check(name)
        if not len(fields):
            continue
        n_read += len(fields)
        heads = lookup_sorted(ids, fields[:, 0])
        tails = lookup_sorted(ids, fields[:, 2])
        known = (heads >= 0) & (tails >= 0)
        match.update(len(known), int(known.sum()))
        if not known.all():
            unknown = np.flatnonzero(~known)
            details = [
                " and ".join(
                    f"unknown {side} {fields[j, col].decode(errors='replace')}"
                    for side, col, found in (("head", 0, heads), ("tail", 2, tails))
                    if found[j] < 0
                )
                + "; triple dropped"
                for j in unknown[: issues.room("unknown-entity")]
            ]
            issues.add_many("unknown-entity", name, lines[unknown], details)
        rels = relations.numbers(fields[known, 1], lines[known], name, issues)
        yield heads[known].astype(np.int32), rels, tails[known].astype(np.int32)
    match.update(0, 0, final=True)
    report.lines[name] = n_lines
    report.read["triples"] = report.read.get("triples", 0) + n_read


def _fast_or_slow(
    block: bytes, first: int, path: str, issues: IssueLog
) -> tuple[npt.NDArray[np.bytes_], I64]:
    """The triple fields of a block and their line numbers: split in bulk when every
    line is well formed UTF-8, else line by line, reporting the bad lines."""
    try:
        block.decode("utf-8")
        fields = _split_triples(block)
    except UnicodeDecodeError:
        fields = None
    if fields is not None:
        return fields, np.arange(first, first + len(fields), dtype=np.int64)
    rows: list[list[bytes]] = []
    numbers: list[int] = []
    for i, raw in enumerate(split_block(block)):
        line = raw.rstrip(b"\r")
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            issues.add("decode-error", path, first + i, f"not UTF-8 at byte {exc.start}")
            continue
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(b"\t")]
        if len(parts) != 3 or not all(parts):
            issues.add(
                "malformed", path, first + i, f"expected head<TAB>relation<TAB>tail: {line[:80]!r}"
            )
            continue
        rows.append(parts)
        numbers.append(first + i)
    fields = np.array(rows, dtype=np.bytes_) if rows else np.zeros((0, 3), dtype="S1")
    return fields, np.array(numbers, dtype=np.int64)


def _read_descriptions(
    path: Path,
    ids: npt.NDArray[np.bytes_],
    store: RaggedFile,
    report: ImportReport,
    progress: Progress,
    limit: int | None,
) -> I64:
    """Each entity's record in ``store`` (``-1``: no description). Unknown ids and
    repeats are reported; the first description of an entity wins."""
    name = str(path)
    issues = report.issues
    bad = BadLines(issues, limit)
    match = _MatchCheck(name, "descriptions")
    rows = np.full(len(ids), -1, dtype=np.int64)
    n_read = 0
    blocks = _iter_tsv(path, "descriptions", report, progress, bad, "text", "empty-description")
    for keys, texts, numbers in blocks:
        if not keys:
            continue
        entity = lookup_sorted(ids, to_bytes_array(keys, "entity id"))
        lines = np.array(numbers, dtype=np.int64)
        known = entity >= 0
        match.update(len(keys), int(known.sum()))
        unknown = np.flatnonzero(~known)
        details = [
            f"description of {keys[j]}, which is not in the entity file"
            for j in unknown[: issues.room("unknown-entity")]
        ]
        issues.add_many("unknown-entity", name, lines[unknown], details)
        # first occurrence in this block, and not described by an earlier block
        index = np.flatnonzero(known)
        fresh = first_occurrences(entity[index]) & (rows[entity[index]] < 0)
        repeats = index[~fresh]
        details = [
            f"{keys[j]} described again; the first is kept"
            for j in repeats[: issues.room("duplicate-description")]
        ]
        issues.add_many("duplicate-description", name, lines[repeats], details)
        take = index[fresh]
        records = store.append([" ".join(texts[j].split()).encode("utf-8") for j in take])
        rows[entity[take]] = records
        n_read += len(keys)
    match.update(0, 0, final=True)
    report.read["descriptions"] = n_read
    return rows


def import_wikidata5m(
    files: Wikidata5MFiles | str | Path,
    out: str | Path,
    embedder: Embedder,
    *,
    options: ImportOptions | None = None,
    progress: Progress = no_progress,
) -> ImportReport:
    """Import a Wikidata5M release (a directory, or explicit files) into ``out``."""
    if not isinstance(files, Wikidata5MFiles):
        files = Wikidata5MFiles.from_directory(files)
    chosen = options or ImportOptions()

    def stage(workdir: Path, report: ImportReport, progress: Progress) -> StagedGraph:
        return stage_wikidata5m(files, workdir, report, progress, chosen.max_bad_lines)

    return import_graph(
        stage,
        out,
        embedder,
        source="wikidata5m",
        inputs=files.paths(),
        options=chosen,
        progress=progress,
    )
