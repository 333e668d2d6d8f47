"""The ``quillian`` command line: a thin edge that reads flags and asks the engine.

Each command lives in its own module (:mod:`.indexing`, :mod:`.answering`,
:mod:`.bench`, :mod:`.kg`, :mod:`.dpo`); the flags they share, and how those open an
engine, are in :mod:`.flags`. :func:`main` maps outcomes to exit codes: 0 done, 1 a
result that failed (an unanswered question, failed documents), 2 a usage or
:class:`~quillian.errors.QuillianError` error (one line on stderr), 130 interrupted.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from quillian.cli import answering, bench, dpo, indexing, kag, kg, know3, serve
from quillian.cli.console import configure_logging
from quillian.errors import QuillianError

__all__ = ["app", "main"]


class Interrupted(Exception):
    """Ctrl-C during a command, carried past typer (which would turn it into a silent
    exit) to :func:`main`."""


class _Group(TyperGroup):
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted from None


app = typer.Typer(
    cls=_Group,
    rich_markup_mode="markdown",
    no_args_is_help=True,
    add_completion=False,
)
indexing.register(app)
answering.register(app)
app.add_typer(bench.app, name="bench")
app.add_typer(kg.app, name="kg")
app.add_typer(know3.app, name="know3")
app.add_typer(kag.app, name="kag")
dpo.register(app)
serve.register(app)


@app.callback()
def _root(
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="log progress details")] = False,
) -> None:
    """Knowledge-graph RAG: index documents, retrieve, answer questions, benchmark."""
    configure_logging(verbose)


def main(argv: list[str] | None = None) -> int:
    """Run ``quillian`` with ``argv`` (default: the process's arguments); the exit code."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # the libraries' own tqdm bars (transformers' GGUF loading: one line per tensor in a
    # log) are replaced by the commands' progress; tqdm reads this when first imported
    os.environ.setdefault("TQDM_DISABLE", "1")
    args = sys.argv[1:] if argv is None else list(argv)
    command = typer.main.get_command(app)
    try:
        command.main(args=args, prog_name="quillian", obj=args, standalone_mode=True)
    except SystemExit as done:  # typer ends every run this way, usage errors included
        return _exit_code(done.code)
    except QuillianError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Interrupted:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    return 0


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
