"""Reading a corpus as a Ray dataset, for the Ray executor of a build.

Files are listed here (a folder recursively, hidden names skipped, as
:func:`~quillian.components.ingestion.readers.read_documents` does) and read in Ray
tasks, each file by Quillian's own readers, so a document read on Ray is the document
the single-process build reads (same title, text, source and id). Parquet files (not a
format of the single-process readers) are read by Ray Data itself: a ``text`` column,
and ``title`` when present.

Each row is a document: ``title``, ``text``, ``source``, ``metadata`` (JSON), and
``problem`` for one no store can hold (its title and text then escaped, since Arrow
cannot carry an unpaired surrogate either), or ``refused``: a malformed corpus entry,
refused on its own with its reason, or ``fatal``: a malformed file (invalid JSON, not
UTF-8), with the readers' own error, which the driver raises before anything is
written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from quillian.components.ingestion.checks import document_problem
from quillian.components.ingestion.readers import SUFFIXES, read_documents
from quillian.errors import InputError
from quillian.types import Document

__all__ = ["PARQUET", "document_of", "list_inputs", "read_dataset"]

#: The extension of a Parquet corpus, read by Ray Data.
PARQUET = ".parquet"
#: Files per read task at most (a corpus of many small files is read in batches).
FILES_PER_BLOCK = 64


def list_inputs(paths: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """The files under ``paths`` the readers take, and the Parquet files, each in
    sorted order; a file named directly that neither takes is refused."""
    files: list[Path] = []
    parquet: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(
                (
                    p
                    for p in path.rglob("*")
                    if p.is_file() and not any(s.startswith(".") for s in p.relative_to(path).parts)
                ),
                key=lambda p: p.relative_to(path).as_posix(),
            )
        elif not path.exists():
            raise InputError("no such file or directory", path=str(path))
        elif path.suffix.lower() not in (*SUFFIXES, PARQUET):
            kinds = ", ".join((*SUFFIXES, PARQUET))
            raise InputError(f"unsupported file type {path.suffix!r}; expected one of {kinds}")
        else:
            found = [path]
        for p in found:
            if p.suffix.lower() == PARQUET:
                parquet.append(p)
            elif p.suffix.lower() in SUFFIXES:
                files.append(p)
    return files, parquet


def read_dataset(ray: Any, paths: Sequence[Path]) -> Any:
    """The documents under ``paths`` as a Ray dataset of rows (see the module)."""
    files, parquet = list_inputs(paths)
    parts = []
    if files:
        items = [{"path": str(p)} for p in files]
        blocks = max(1, min(len(items), (len(items) + FILES_PER_BLOCK - 1) // FILES_PER_BLOCK))
        parts.append(ray.data.from_items(items, override_num_blocks=blocks).flat_map(_read_file))
    for path in parquet:
        parts.append(_read_parquet(ray, path))
    if not parts:
        raise InputError(f"nothing to index: {', '.join(map(str, paths))}: no documents")
    return parts[0].union(*parts[1:]) if len(parts) > 1 else parts[0]


def document_of(row: dict[str, Any]) -> Document:
    """The document a row holds."""
    return Document(
        row["text"], row["title"], source=row["source"], metadata=json.loads(row["metadata"])
    )


def _read_file(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of one file, read by Quillian's readers."""
    refused: list[InputError] = []
    try:
        rows = [_row(doc) for doc in read_documents(item["path"], on_refused=refused.append)]
    except InputError as exc:  # the whole file: the driver raises it (Ray would wrap it)
        return [{**_refused(""), "fatal": str(exc)}]
    rows += [_refused(str(error)) for error in refused]
    return rows


def _row(doc: Document) -> dict[str, Any]:
    problem = document_problem(doc)
    title, text, source = doc.title, doc.text, doc.source
    if problem is not None:
        where = f"entry {doc.metadata['index']}: " if "index" in doc.metadata else ""
        title, text, source = (_escaped(s) for s in (title, text, source))
        problem = f"{where}{problem}"
    return {
        "title": title,
        "text": text,
        "source": source,
        "metadata": json.dumps(doc.metadata),
        "problem": problem or "",
        "refused": "",
        "fatal": "",
    }


def _refused(reason: str) -> dict[str, Any]:
    return {
        "title": "",
        "text": "",
        "source": "",
        "metadata": "{}",
        "problem": "",
        "refused": reason,
        "fatal": "",
    }


def _escaped(text: str) -> str:
    """``text`` with any lone surrogate written as a ``\\udXXX`` escape (as the
    single-process ingestion names such a document)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _read_parquet(ray: Any, path: Path) -> Any:
    import pyarrow.parquet as pq  # part of ray[data]

    columns = set(pq.read_schema(path).names)
    if "text" not in columns:
        raise InputError("a Parquet corpus needs a 'text' column", path=str(path))
    wanted = ["text", "title"] if "title" in columns else ["text"]
    source = str(path)

    def rows(batch: dict[str, Any]) -> dict[str, list[Any]]:
        texts = [str(t) if t is not None else "" for t in batch["text"]]
        titles = batch.get("title", [""] * len(texts))
        docs = [
            Document(text, str(title or ""), source=source)
            for text, title in zip(texts, titles, strict=True)
        ]
        out = [_row(d) for d in docs if d.text.strip()]
        return {k: [r[k] for r in out] for k in _refused("")}

    return ray.data.read_parquet(str(path), columns=wanted).map_batches(rows, batch_format="numpy")
