"""Read documents from text and markdown files, folders, and JSON/JSONL corpora.

Supported inputs, chosen by extension:

* ``.txt`` - one document; title is the file stem.
* ``.md``, ``.markdown`` - one document; title is the first ``# `` heading outside a
  code fence, else the file stem. The text is the whole file, heading included.
* ``.json`` - a corpus: a list of ``{"title": ..., "text": ...}`` objects (MuSiQue,
  2Wiki), one such object (one document), or a ``{title: [sentences]}`` object
  (HotpotQA; sentences are joined with ``""`` because each carries its own leading
  space). ``title`` may be omitted; other fields are ignored. An object with a string
  ``"text"`` or ``"title"`` field is one document, any other object a HotpotQA corpus.
* ``.jsonl`` - one ``{"title", "text"}`` object per line; blank lines are ignored.
* a folder - every supported file below it, recursively, in sorted path order;
  hidden files and folders (names starting with ``.``) are ignored.

Files are decoded as UTF-8 (a BOM is dropped) and ``\\r\\n`` / ``\\r`` become ``\\n``,
so document ids do not depend on the platform a file was written on. Corpus entries
get ``metadata={"index": i}``, ``i`` counting entries from 0; messages use the same
numbering ("entry 17"), and lines count from 1.

Malformed input raises :class:`~quillian.errors.InputError` naming the file and the
line, entry or field. With ``on_refused``, a malformed *entry* of a corpus (not an
object, no ``text``, a field that is not a string, a JSONL line that is not JSON) is
refused on its own instead: logged as a warning and passed to ``on_refused``, and the
file's other entries are read. Input that is well-formed but holds nothing to index -
an empty file, an entry whose text is empty, a file with an unsupported extension
inside a folder - is *skipped and reported*: logged as a warning and passed to
``on_skip``. With ``strict=True`` every such skip or refusal raises instead. A file
named directly with an unsupported extension always raises.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from quillian.errors import InputError
from quillian.types import Document

__all__ = ["JSON_SHAPES", "SUFFIXES", "OnSkip", "markdown_title", "read_documents"]

logger = logging.getLogger(__name__)

OnSkip = Callable[[InputError], None]
"""Receives an :class:`InputError` describing each skipped file or entry."""

_BOM = b"\xef\xbb\xbf"
_NEWLINE = re.compile(r"\r\n?")
_HEADING = re.compile(r"^#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


class _Skips:
    """Reports skipped input: raise when strict, else log and call ``on_skip``; and
    refused entries: raise when strict or nobody takes them, else log and call
    ``on_refused``."""

    def __init__(self, strict: bool, on_skip: OnSkip | None, on_refused: OnSkip | None) -> None:
        self.strict = strict
        self.on_skip = on_skip
        self.on_refused = on_refused

    def report(self, error: InputError) -> None:
        if self.strict:
            raise error
        logger.warning("skipped: %s", error)
        if self.on_skip is not None:
            self.on_skip(error)

    def refuse(self, error: InputError) -> None:
        if self.strict or self.on_refused is None:
            raise error
        logger.info("refused: %s", error)
        self.on_refused(error)


def read_documents(
    path: str | Path,
    *,
    strict: bool = False,
    on_skip: OnSkip | None = None,
    on_refused: OnSkip | None = None,
) -> Iterator[Document]:
    """Yield the documents in a file or folder, in a deterministic order.

    Args:
        path: A ``.txt``, ``.md``, ``.markdown``, ``.json`` or ``.jsonl`` file, or a
            folder searched recursively.
        strict: Raise on empty documents and unsupported files in folders instead of
            skipping them.
        on_skip: Called with an :class:`InputError` for every skipped file or entry.
        on_refused: Called with an :class:`InputError` for every malformed corpus entry,
            the file's other entries still read; None: a malformed entry raises.

    Raises:
        InputError: The path is missing or unreadable, a file is not UTF-8, a JSON
            corpus is invalid or has the wrong shape, or (when ``strict``) a skip.
    """
    skips = _Skips(strict, on_skip, on_refused)
    path = Path(path)
    if path.is_dir():
        yield from _read_folder(path, skips)
    else:
        reader = _READERS.get(path.suffix.lower())
        if reader is None:
            raise InputError(_unsupported(path), path=str(path))
        yield from reader(path, skips)


def _unsupported(path: Path) -> str:
    return f"unsupported file type {path.suffix!r}; expected one of {', '.join(SUFFIXES)}"


def _read_folder(root: Path, skips: _Skips) -> Iterator[Document]:
    files = [
        p
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    ]
    for path in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        reader = _READERS.get(path.suffix.lower())
        if reader is None:
            skips.report(InputError(_unsupported(path), path=str(path)))
        else:
            yield from reader(path, skips)


def _read_text(path: Path) -> str:
    """Read ``path`` as UTF-8 with ``\\n`` newlines; errors name the path and line."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file or directory", path=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", path=str(path)) from exc
    skip = len(_BOM) if data.startswith(_BOM) else 0
    try:
        text = data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = skip + exc.start
        line = data.count(b"\n", 0, offset) + 1
        raise InputError(
            f"invalid UTF-8 at byte offset {offset} (byte 0x{data[offset]:02x}): {exc.reason}",
            path=str(path),
            line=line,
        ) from None
    return _NEWLINE.sub("\n", text)


def _read_plain(path: Path, skips: _Skips) -> Iterator[Document]:
    text = _read_text(path)
    if not text.strip():
        skips.report(InputError("empty document", path=str(path)))
        return
    yield Document(text=text, title=path.stem, source=str(path))


def _read_markdown(path: Path, skips: _Skips) -> Iterator[Document]:
    text = _read_text(path)
    if not text.strip():
        skips.report(InputError("empty document", path=str(path)))
        return
    yield Document(text=text, title=markdown_title(text) or path.stem, source=str(path))


def markdown_title(text: str) -> str | None:
    """The first level-1 ATX heading (``# Title``) outside code fences, if any."""
    in_fence = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (match := _HEADING.match(line)):
            return match.group(1).strip()
    return None


#: What a ``.json`` corpus may hold, for the message refusing anything else.
JSON_SHAPES = (
    'a list of {"title", "text"} objects, one such object, or a {title: [sentences]} object'
)


def _read_json(path: Path, skips: _Skips) -> Iterator[Document]:
    text = _read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"invalid JSON: {exc.msg} (column {exc.colno})", path=str(path), line=exc.lineno
        ) from None
    if isinstance(data, list):
        for index, entry in enumerate(data):
            yield from _entry(entry, path, index, None, skips)
    elif _is_document(data):
        yield from _single(data, path, skips)
    elif isinstance(data, dict):
        for index, (title, sentences) in enumerate(data.items()):
            where = f"entry {index} ({title!r})"
            try:
                doc = _titled_document(title, sentences, path, index)
            except InputError as exc:
                skips.refuse(exc)
                continue
            yield from _keep(doc, path, where, skips, field=title)
    else:
        raise InputError(f"expected {JSON_SHAPES}, got {_kind(data)}", path=str(path))


def _is_document(data: Any) -> bool:
    """Whether a JSON object is one document (a string ``text`` or ``title`` field)
    rather than a ``{title: [sentences]}`` corpus."""
    return isinstance(data, dict) and any(
        isinstance(data.get(name), str) for name in ("text", "title")
    )


def _single(data: dict[str, Any], path: Path, skips: _Skips) -> Iterator[Document]:
    """The one document a ``{"title", "text"}`` object holds."""
    where = "the document object"
    try:
        doc = _entry_document(data, path, 0, where, None)
    except InputError as exc:
        skips.refuse(exc)
        return
    doc = Document(text=doc.text, title=doc.title, source=doc.source)
    yield from _keep(doc, path, where, skips, field="text")


def _entry(
    entry: Any, path: Path, index: int, line: int | None, skips: _Skips
) -> Iterator[Document]:
    """The document of one corpus entry; a malformed one is refused on its own."""
    where = f"entry {index}"
    try:
        doc = _entry_document(entry, path, index, where, line)
    except InputError as exc:
        skips.refuse(exc)
        return
    yield from _keep(doc, path, where, skips, field="text", line=line)


def _read_jsonl(path: Path, skips: _Skips) -> Iterator[Document]:
    index = 0
    for lineno, line in enumerate(_read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            skips.refuse(
                InputError(
                    f"invalid JSON: {exc.msg} (column {exc.colno})",
                    path=str(path),
                    line=lineno,
                )
            )
        else:
            yield from _entry(entry, path, index, lineno, skips)
        index += 1


def _keep(
    doc: Document, path: Path, where: str, skips: _Skips, *, field: str, line: int | None = None
) -> Iterator[Document]:
    """Yield ``doc`` unless its text is empty, which is reported as a skip."""
    if doc.text.strip():
        yield doc
    else:
        skips.report(InputError(f"{where}: empty text", path=str(path), line=line, field=field))


def _entry_document(entry: Any, path: Path, index: int, where: str, line: int | None) -> Document:
    """Turn one ``{"title", "text"}`` corpus entry into a document, checking its shape."""
    if not isinstance(entry, dict):
        raise InputError(
            f"{where}: expected an object with 'title' and 'text', got {_kind(entry)}",
            path=str(path),
            line=line,
        )
    if "text" not in entry:
        raise InputError(f"{where}: missing field 'text'", path=str(path), line=line, field="text")
    for name in ("title", "text"):
        if not isinstance(entry.get(name, ""), str):
            raise InputError(
                f"{where}: field {name!r} must be a string, got {_kind(entry[name])}",
                path=str(path),
                line=line,
                field=name,
            )
    return Document(
        text=entry["text"],
        title=entry.get("title", ""),
        source=str(path),
        metadata={"index": index},
    )


def _titled_document(title: str, sentences: Any, path: Path, index: int) -> Document:
    """Turn one HotpotQA ``title: [sentences]`` item (or ``title: text``) into a document."""
    if isinstance(sentences, str):
        text = sentences
    elif isinstance(sentences, list) and all(isinstance(s, str) for s in sentences):
        text = "".join(sentences)
    else:
        bad = _kind(sentences) if not isinstance(sentences, list) else "a list with non-strings"
        raise InputError(
            f"entry {index} ({title!r}): expected a list of sentence strings, got {bad}",
            path=str(path),
            field=title,
        )
    return Document(text=text, title=title, source=str(path), metadata={"index": index})


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), f"a {type(value).__name__}")


_READERS: dict[str, Callable[[Path, _Skips], Iterator[Document]]] = {
    ".txt": _read_plain,
    ".md": _read_markdown,
    ".markdown": _read_markdown,
    ".json": _read_json,
    ".jsonl": _read_jsonl,
}
SUFFIXES = tuple(_READERS)
"""File extensions :func:`read_documents` understands."""
