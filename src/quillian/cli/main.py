"""The ``quillian`` command line: a thin edge that reads flags and asks the engine.

Each command lives in its own module (:mod:`.indexing`, :mod:`.answering`,
:mod:`.bench`, :mod:`.kg`, :mod:`.dpo`); the flags they share, and how those open an
engine, are in :mod:`.flags`. :func:`main` maps outcomes to exit codes: 0 done, 1 a
result that failed (an unanswered question, failed documents), 2 a usage error, a
:class:`~quillian.errors.QuillianError` or an operating-system error (a path missing,
unreadable or not writable), 3 an unexpected error, 130 interrupted. Every error is one
line on stderr; ``--debug`` (or ``QUILLIAN_DEBUG=1``) prints the traceback too.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from quillian.cli import answering, bench, dpo, indexing, kag, kg, know3, serve
from quillian.cli.console import configure_logging, one_line
from quillian.errors import QuillianError

__all__ = ["app", "main"]


class Interrupted(Exception):
    """Ctrl-C during a command, carried past typer (which would turn it into a silent
    exit) to :func:`main`."""


class Failed(Exception):
    """An error a command raised, carried past typer to :func:`main` with whether
    ``--debug`` asked for its traceback."""

    def __init__(self, error: BaseException, debug: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.debug = debug


#: The environment variable that, set to 1, prints an error's traceback (``--debug``).
DEBUG_ENV = "QUILLIAN_DEBUG"


class _Group(TyperGroup):
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted from None
        except (typer.TyperException, typer.Exit, typer.Abort):
            raise  # typer's own: usage errors, an exit code
        except Exception as exc:
            debug = bool(ctx.params.get("debug")) or os.environ.get(DEBUG_ENV, "") == "1"
            raise Failed(exc, debug) from exc


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
    debug: Annotated[
        bool,
        typer.Option("--debug", help=f"print an error's traceback (also: {DEBUG_ENV}=1)"),
    ] = False,
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
    except Failed as failed:
        return _report(failed.error, failed.debug)
    except (QuillianError, OSError) as exc:  # raised before a command ran
        return _report(exc, os.environ.get(DEBUG_ENV, "") == "1")
    except Interrupted:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    return 0


def _report(error: BaseException, debug: bool) -> int:
    """One line on stderr for ``error`` (its traceback first with ``debug``); the exit
    code: 2 for Quillian's and the operating system's errors, 3 for any other."""
    if debug:
        traceback.print_exception(error)
    if isinstance(error, QuillianError):
        print(f"error: {one_line(str(error), limit=None)}", file=sys.stderr)
        return 2
    if isinstance(error, OSError) and error.strerror:
        where = f"{error.filename}: " if error.filename is not None else ""
        print(f"error: {where}{error.strerror}", file=sys.stderr)
        return 2
    hint = "" if debug else f"; run with --debug (or {DEBUG_ENV}=1) for the traceback"
    print(f"error: unexpected {_described(error)}{hint}", file=sys.stderr)
    return 3


def _described(error: BaseException) -> str:
    message = one_line(str(error))
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
