"""``quillian kag issues``: what KAG's extraction left unusable, dropped or repaired."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from typing import Annotated

import typer

from quillian.cli.flags import IndexDir, JsonFlag
from quillian.components.extraction.base import ISSUE_KINDS
from quillian.errors import InputError
from quillian.index.layout import local_directory
from quillian.methods.kag.issues import extraction_issues

__all__ = ["app"]

app = typer.Typer(help="KAG tools.", no_args_is_help=True, rich_markup_mode="markdown")

#: How much of a model's raw text a line shows (``--json`` gives it whole).
RAW_CHARS = 80


@app.command("issues")
def issues_command(
    index: IndexDir,
    kind: Annotated[
        str | None,
        typer.Option(metavar="KIND", help=f"only issues of one kind: {', '.join(ISSUE_KINDS)}"),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """The extraction issues KAG's build kept with the index at DIR, chunk by chunk.

    *failed*: a step's output stayed unusable after its repair attempt (the chunk lacks
    what it would give); *rejected*: a result dropped (a triple naming no entity of the
    chunk's list); *repaired*: a result changed (a category outside the schema read as
    Others); *kept*: a result kept though it breaks a rule (a relation the schema does not
    declare for its subject's class). A server index is read from its local cache.
    """
    if kind is not None and kind not in ISSUE_KINDS:
        raise InputError(f"--kind must be one of {', '.join(ISSUE_KINDS)}, got {kind!r}")
    found = [i for i in extraction_issues(local_directory(index)) if kind in (None, i.kind)]
    if json_out:
        print(json.dumps([asdict(i) for i in found], ensure_ascii=False))
        return
    counts = Counter((i.task, i.kind) for i in found)
    summary = ", ".join(f"{task} {k} {n}" for (task, k), n in sorted(counts.items()))
    print(f"{len(found)} extraction issues" + (f" ({summary})" if summary else ""))
    for i in found:
        raw = i.raw if len(i.raw) <= RAW_CHARS else i.raw[: RAW_CHARS - 1] + "…"
        print(f"{i.chunk_id}  {i.task}  {i.kind}  {i.message}" + (f"  | {raw}" if raw else ""))
