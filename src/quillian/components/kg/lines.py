"""Streaming a large text file in blocks of whole lines, with line numbers.

Files are read in blocks of a few MiB (``.gz`` files decompressed on the fly), so a
21M-line triple file never sits in memory whole. A block that is not valid UTF-8 is
decoded line by line: the bad lines are reported as ``decode-error`` with their
numbers and the rest are kept.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from quillian.components.kg.report import IssueLog, Progress
from quillian.errors import InputError

__all__ = ["BadLines", "decode_block", "iter_blocks", "split_block"]

BLOCK_BYTES = 1 << 24


def _open(path: Path) -> tuple[BinaryIO, BinaryIO]:
    """``(stream, raw file)``: the raw file's position is the progress in bytes."""
    try:
        raw: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by iter_blocks
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", path=str(path)) from exc
    if path.suffix == ".gz":
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw  # type: ignore[return-value]
    return raw, raw


def iter_blocks(
    path: Path, stage: str, progress: Progress, block_bytes: int = BLOCK_BYTES
) -> Iterator[tuple[int, bytes]]:
    """``(number of the first line, block)`` for blocks of whole lines.

    Each block but possibly the last ends with a newline; a last line without one (a
    truncated file) is yielded as is, for the caller to judge.
    """
    stream, raw = _open(path)
    total = path.stat().st_size
    line = 1
    carry = b""
    try:
        with raw, stream:
            while True:
                try:
                    chunk = stream.read(block_bytes)
                except (EOFError, OSError, zlib.error) as exc:
                    raise InputError(
                        f"truncated or corrupt compressed file ({exc})", path=str(path), line=line
                    ) from exc
                if not chunk:
                    break
                data = carry + chunk
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    carry = data
                    continue
                block, carry = data[:cut], data[cut:]
                yield line, block
                line += block.count(b"\n")
                progress(stage, raw.tell(), total)
            if carry:
                yield line, carry
    except io.UnsupportedOperation as exc:  # pragma: no cover - a directory, a pipe
        raise InputError(f"cannot read: {exc}", path=str(path)) from exc
    progress(stage, total, total)


def decode_block(block: bytes, first_line: int, path: str, issues: IssueLog) -> list[str | None]:
    """The lines of ``block`` as text (``None`` for a line that is not UTF-8, which is
    reported); line ``i`` of the result is line ``first_line + i`` of the file."""
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError:
        out: list[str | None] = []
        for i, raw in enumerate(split_block(block)):
            try:
                out.append(raw.decode("utf-8").rstrip("\r"))
            except UnicodeDecodeError as exc:
                issues.add("decode-error", path, first_line + i, f"not UTF-8 at byte {exc.start}")
                out.append(None)
        return out
    if text.endswith("\n"):
        text = text[:-1]
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    lines: list[str | None] = list(text.split("\n"))
    return lines


def split_block(block: bytes) -> list[bytes]:
    """The lines of a block of bytes, without their newlines."""
    if block.endswith(b"\n"):
        block = block[:-1]
    return block.split(b"\n")


class BadLines:
    """Stops an import when a file holds more bad lines than ``limit``: by then it is
    most likely the wrong file (or the wrong format), and the first ones say why."""

    KINDS = ("malformed", "decode-error")

    def __init__(self, issues: IssueLog, limit: int | None) -> None:
        self.issues = issues
        self.limit = limit
        self._start = issues.count(*self.KINDS)

    def check(self, path: str) -> None:
        if self.limit is None:
            return
        bad = self.issues.count(*self.KINDS) - self._start
        if bad > self.limit:
            examples = [i for k in self.KINDS for i in self.issues.examples.get(k, [])]
            shown = [i.text() for i in examples if i.path == path][:5]
            raise InputError(
                f"more than {self.limit:,} malformed lines; is this the right file and format? "
                "First ones: " + "; ".join(shown),
                path=path,
            )
