"""``quillian retrieve``, ``quillian ask`` and ``quillian methods``."""

from __future__ import annotations

import asyncio
import json
from contextlib import closing
from dataclasses import asdict
from typing import Annotated, Any

import typer

from quillian.cli.console import stage_bars
from quillian.cli.flags import (
    IndexDir,
    JsonFlag,
    MaxQuestionOpt,
    MethodFlags,
    NoCacheFlag,
    choice,
    embedding_cache_path,
    parse_options,
    shares_flags,
)
from quillian.cli.render import (
    method_line,
    method_record,
    print_answer,
    print_methods,
    print_retrieval,
    print_verification,
)
from quillian.components.factories import RETRIEVER_CONFIGS, RETRIEVERS
from quillian.components.retrieval.reasoning import reasoning_paths
from quillian.config import config_options
from quillian.engine import Engine
from quillian.engine.engine import MAX_QUESTION_CHARS
from quillian.errors import ConfigError
from quillian.methods.base import AnswerResult
from quillian.methods.know3.check import Verification
from quillian.methods.table import METHODS, method_spec

__all__ = ["ask", "methods", "register", "retrieve"]


def _question(value: str) -> str:
    if not value.strip():
        raise typer.BadParameter("the question is empty")
    return value


def _method(value: str) -> str:
    try:
        return method_spec(value).name
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from None


Question = Annotated[str, typer.Argument(metavar="QUESTION", callback=_question)]
Method = Annotated[
    str, typer.Option(metavar="METHOD", callback=_method, help="the method (listed below)")
]


def retrieve(
    index: IndexDir,
    question: Question,
    method: Annotated[str, choice(RETRIEVERS)] = "sa",
    k: Annotated[int, typer.Option("-k", min=1, help="passages to return")] = 8,
    kg: Annotated[
        str | None,
        typer.Option(
            metavar="DIR+index",
            help="let SA retrieval cross into the graph DIR, linked to this index by "
            "'quillian kg link DIR --documents INDEX'",
        ),
    ] = None,
    option: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=VALUE",
            help="an option of the retriever (its config field, e.g. ppr's "
            "triple_seeds=5 or solver=power; see 'quillian methods'); repeatable",
        ),
    ] = None,
    json_out: JsonFlag = False,
    no_cache: NoCacheFlag = False,
    max_question_chars: MaxQuestionOpt = MAX_QUESTION_CHARS,
) -> None:
    """Retrieve passages for QUESTION from the index DIR (no LLM).

    Prints the ranked passages and the trace that led to them: seeds, activated
    entities and relations. A question asked before is not embedded again (its vector
    is cached), so no embedding model is loaded.
    """
    cache = embedding_cache_path(no_cache)
    known = {o.name: o for o in config_options(RETRIEVER_CONFIGS[method])}
    options = {method: parse_options(option or (), known, f"retriever {method!r}")}
    engine = Engine.open(
        index,
        kg=kg,
        embedding_cache=cache,
        retriever_options=options,
        max_question_chars=max_question_chars,
    )
    with closing(engine):
        result = engine.retrieve(question, method, k)
    if json_out:
        record = asdict(result)
        record["paths"] = [p.as_dict() for p in reasoning_paths(result.trace.paths)]
        print(json.dumps(record, ensure_ascii=False, indent=2))
    else:
        print_retrieval(result)


@shares_flags
def ask(
    index: IndexDir,
    question: Question,
    model: MethodFlags,
    method: Method = "sa-rag",
    trace: Annotated[bool, typer.Option("--trace", help="show the method's steps")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Answer QUESTION over the index DIR with a method and an LLM.

    Prints the answer, the passages and relations it rests on, and what it cost
    (tokens, LLM calls, outputs that failed to parse, seconds). A method that needs no
    index (no-retrieval) does not open DIR. A local model loads only when a call misses
    the response cache (about a minute on 2 cores, shown with the time left).
    """
    spec = method_spec(method)
    options = model.method_options(spec.name)
    verify = model.verify_options()
    reads = spec.reads_index(model.retriever) or (verify is not None and model.kg is None)
    with stage_bars() as progress:  # the model's load, when a call misses the cache
        engine = model.open_engine(index if reads else None, progress, lazy_model=True)
        result, verification = asyncio.run(
            _answer(engine, question, spec.name, model.retriever, options, verify)
        )
    if json_out:
        record = result.as_dict()
        if verification is not None:
            record["verification"] = verification.as_dict()
        print(json.dumps(record, ensure_ascii=False, indent=2))
    else:
        print_answer(result, trace)
        if verification is not None:
            print_verification(verification)
    if result.error:
        raise typer.Exit(1)


async def _answer(
    engine: Engine,
    question: str,
    method: str,
    retriever: str | None,
    options: dict[str, Any],
    verify: dict[str, Any] | None,
) -> tuple[AnswerResult, Verification | None]:
    async with engine:
        result = await engine.answer(question, method, retriever=retriever, **options)
        if verify is None or not result.answer:
            return result, None
        return result, await engine.verify(question, result.answer, **verify)


def methods(json_out: JsonFlag = False) -> None:
    """List the question-answering methods and their options.

    For each method: what it does, the retriever it uses unless --retriever says
    otherwise, whether it needs --kg, and its options (type, default and meaning) for
    --option KEY=VALUE.
    """
    if json_out:
        records = [method_record(spec) for spec in METHODS.values()]
        print(json.dumps(records, ensure_ascii=False, indent=2, default=str))
    else:
        print_methods(METHODS.values())


def _methods_epilog() -> str:
    """The method list under ``ask --help``, one markdown paragraph a method."""
    lines = ["Methods (--method) and their options (--option KEY=VALUE):"]
    lines += [method_line(spec) for spec in METHODS.values()]
    return "\n\n".join(lines)


def register(app: typer.Typer) -> None:
    app.command()(retrieve)
    app.command(epilog=_methods_epilog())(ask)
    app.command()(methods)
