"""The flags several commands share, turned into the engine's options in one place.

``ask``, ``bench qa`` and ``dpo-data`` take the model flags (:class:`MethodFlags`);
``index --extractor llm`` takes their LLM part (:class:`LLMFlags`). A command declares
one parameter of such a type and :func:`shares_flags` gives the command the group's
options, so no command repeats them and every one opens its engine the same way.

The environment is read here, at the edge: the API key from ``QUILLIAN_LLM_API_KEY``
or ``OPENAI_API_KEY``, the LLM response cache from ``--cache``, else
``QUILLIAN_LLM_CACHE``, else ``~/.cache/quillian/llm-responses.sqlite``; the cache of
embedded questions from ``QUILLIAN_EMBEDDING_CACHE``, else
``~/.cache/quillian/embeddings.sqlite`` (``--no-cache`` turns both off).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from quillian.components.factories import RETRIEVERS
from quillian.config import OptionSpec, parse_option_value
from quillian.engine import Engine
from quillian.engine.engine import MAX_QUESTION_CHARS
from quillian.errors import ConfigError
from quillian.eval.datasets import Dataset
from quillian.methods.table import method_spec
from quillian.types import Progress

__all__ = [
    "DATASETS",
    "BenchFlags",
    "DatasetOpt",
    "Flags",
    "IndexDir",
    "JsonFlag",
    "LLMFlags",
    "MaxQuestionOpt",
    "MethodFlags",
    "NoCacheFlag",
    "choice",
    "embedding_cache_path",
    "one_of",
    "parse_options",
    "shares_flags",
]

R = TypeVar("R")

LLM_HELP = (
    "local (the bundled model) | local-int8 "
    "(int8 layers: about 3x faster, close to float32 but not equal) | local:/path.gguf | "
    "openai:MODEL | http://host:port/v1#MODEL | scripted:routes.json; options after ?, "
    "joined by &: schema=off leaves replies unconstrained (JSON schemas and grammars); "
    "prefix-cache=MB (local "
    "models) is memory for reused prompt beginnings, default 512, 0 for none"
)
KG_HELP = (
    "knowledge graph of the KG methods: index, index+inverse, a directory written by "
    "'quillian kg import', or DIR+index (both, joined by 'quillian kg link'; SA retrieval "
    "then also crosses into DIR)"
)

#: An index directory written by ``quillian index``.
IndexDir = Annotated[str, typer.Argument(metavar="DIR", show_default=False)]
#: ``--json``: machine-readable output.
JsonFlag = Annotated[bool, typer.Option("--json", help="print the result as JSON")]
#: ``--max-question-chars``: the longest question taken (the engine's limit).
MaxQuestionOpt = Annotated[
    int,
    typer.Option(
        min=1, metavar="N", help="refuse a question longer than N characters (before any work)"
    ),
]
#: ``--no-cache``: neither LLM responses nor embedded questions are read or kept.
NoCacheFlag = Annotated[
    bool, typer.Option("--no-cache", help="do not cache LLM responses or question embeddings")
]


def embedding_cache_path(no_cache: bool = False) -> Path | None:
    """Where embedded questions are kept (None: ``--no-cache``)."""
    if no_cache:
        return None
    default = Path.home() / ".cache" / "quillian" / "embeddings.sqlite"
    return Path(os.environ.get("QUILLIAN_EMBEDDING_CACHE") or default)


def one_of(choices: Sequence[str]) -> Callable[[Any], Any]:
    """A parameter callback refusing a value outside ``choices`` (None passes)."""

    def check(value: Any) -> Any:
        if value is not None and value not in choices:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}")
        return value

    return check


def choice(choices: Sequence[str], help: str | None = None) -> Any:
    """A ``typer.Option`` taking one of ``choices``, which its help shows."""
    return typer.Option(metavar="|".join(choices), callback=one_of(choices), help=help)


#: The QA datasets whose formats the benchmarks and ``dpo-data`` read.
DATASETS: tuple[str, ...] = typing.get_args(Dataset)
#: ``--dataset``: checked against :data:`DATASETS` (then safe to cast to ``Dataset``).
DatasetOpt = Annotated[str, choice(DATASETS, "the dataset's format")]
#: ``quillian index`` and the benchmarks: build the relation texts with endpoint names.
EndpointTextsOpt = Annotated[
    bool | None,
    typer.Option(
        "--endpoint-texts/--no-endpoint-texts",
        help="also embed each relation with its endpoint names, for ppr's fact seeds "
        "(--option triple_seeds=5); default: as the index was built, off for a new one",
    ),
]


@dataclass(frozen=True)
class Flags:
    """Base of a dataclass of shared flags: each field, annotated with its
    ``typer.Option``, becomes an option of every command that takes the group."""


def shares_flags(command: Callable[..., R]) -> Callable[..., R]:
    """Give ``command`` the options of each :class:`Flags` group it takes as a parameter.

    Typer reads the signature this returns: the group's fields stand in for the group's
    parameter. When the command runs, they are gathered back into one group object.
    """
    signature = inspect.signature(command, eval_str=True)
    groups = {
        p.name: p.annotation
        for p in signature.parameters.values()
        if isinstance(p.annotation, type) and issubclass(p.annotation, Flags)
    }
    parameters: list[inspect.Parameter] = []
    for p in signature.parameters.values():
        if p.name in groups:
            parameters += _flag_parameters(groups[p.name])
        else:
            parameters.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))

    @functools.wraps(command)
    def run(**values: Any) -> R:
        for name, group in groups.items():
            fields = {f.name: values.pop(f.name) for f in dataclasses.fields(group)}
            values[name] = group(**fields)
        return command(**values)

    run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    return run


def _flag_parameters(group: type[Flags]) -> list[inspect.Parameter]:
    hints = typing.get_type_hints(group, include_extras=True)
    return [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
            annotation=hints[f.name],
        )
        for f in dataclasses.fields(group)
    ]


@dataclass(frozen=True)
class LLMFlags(Flags):
    """The chat model, its prompts, its response cache and how many calls run at once."""

    llm: Annotated[str, typer.Option(metavar="SPEC", help=LLM_HELP)] = "local"
    prompts: Annotated[
        list[Path] | None,
        typer.Option(metavar="FILE", help="prompt overrides (JSON; repeatable)"),
    ] = None
    cache: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="LLM response cache (default: $QUILLIAN_LLM_CACHE, else "
            "llm-responses.sqlite in ~/.cache/quillian)",
        ),
    ] = None
    no_cache: NoCacheFlag = False
    concurrency: Annotated[int, typer.Option(min=1, help="LLM calls in flight")] = 4

    def engine_options(self) -> dict[str, Any]:
        """The keyword arguments of :meth:`Engine.open` these flags select."""
        environ = os.environ
        return {
            "llm": self.llm,
            "api_key": environ.get("QUILLIAN_LLM_API_KEY") or environ.get("OPENAI_API_KEY", ""),
            "cache_path": self.cache_path(),
            "prompt_overrides": tuple(self.prompts or ()),
            "concurrency": self.concurrency,
            "embedding_cache": embedding_cache_path(self.no_cache),
        }

    def cache_path(self) -> Path | None:
        if self.no_cache:
            return None
        if self.cache is not None:
            return self.cache
        default = Path.home() / ".cache" / "quillian" / "llm-responses.sqlite"
        return Path(os.environ.get("QUILLIAN_LLM_CACHE") or default)

    def open_engine(
        self,
        location: str | Path | None = None,
        on_progress: Progress | None = None,
        *,
        lazy_model: bool = False,
    ) -> Engine:
        """The engine over the index at ``location`` (None: no index) with these flags;
        ``on_progress`` sees the long steps it starts on demand (loading a model);
        ``lazy_model``: a local model loads on the first cache miss (a one-shot ``ask``;
        a benchmark keeps the load out of its first question's time)."""
        return Engine.open(
            location, on_progress=on_progress, lazy_model=lazy_model, **self.engine_options()
        )


@dataclass(frozen=True)
class MethodFlags(LLMFlags):
    """The LLM flags, and how a method retrieves: its retriever, graph and options."""

    retriever: Annotated[
        str | None,
        choice(RETRIEVERS, "retriever instead of the method's own (see 'quillian methods')"),
    ] = None
    kg: Annotated[str | None, typer.Option(metavar="SPEC", help=KG_HELP)] = None
    option: Annotated[
        list[str] | None,
        typer.Option(
            metavar="KEY=VALUE",
            help="method option, e.g. k=10 (repeatable; see 'quillian methods')",
        ),
    ] = None
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="also judge each answer with the KG-embedding model of --kg (default: "
            "the index's own graph; train it with 'quillian kg train-kge')",
        ),
    ] = False
    verify_theta0: Annotated[
        float,
        typer.Option(
            min=0.0,
            metavar="THETA0",
            help="--verify accepts an answer whose score is below θ0·128/(1+e) (Know3-RAG's "
            "turn-0 threshold; pick θ0 with 'quillian know3 calibrate')",
        ),
    ] = 1.0
    max_question_chars: MaxQuestionOpt = MAX_QUESTION_CHARS

    def engine_options(self) -> dict[str, Any]:
        return {
            **super().engine_options(),
            "kg": self.kg,
            "max_question_chars": self.max_question_chars,
        }

    def verify_options(self) -> dict[str, Any] | None:
        """Know3-RAG's options for ``--verify`` (None: no verification)."""
        return {"theta0": self.verify_theta0} if self.verify else None

    def method_options(self, *methods: str) -> dict[str, Any]:
        """The ``--option`` pairs, each value parsed as the type of the first of
        ``methods`` that declares its key; an unknown key is one clear error."""
        known: dict[str, OptionSpec] = {}
        for method in methods:
            for option in method_spec(method).options:
                known.setdefault(option.name, option)
        return parse_options(self.option or (), known, ", ".join(methods))


def parse_options(
    pairs: Sequence[str], known: Mapping[str, OptionSpec], owner: str
) -> dict[str, Any]:
    """``key=value`` pairs as options of ``owner``, each value parsed as its declared
    type; a malformed pair or an unknown key is one clear error."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"option {pair!r} must look like key=value")
        if key not in known:
            raise ConfigError(
                f"{owner} has no option {key!r}; its options are {', '.join(known)}"
                if known
                else f"{owner} takes no options, got {key!r}"
            )
        options[key] = parse_option_value(known[key], value)
    return options


@dataclass(frozen=True)
class BenchFlags(MethodFlags):
    """The model flags of a benchmark: one question at a time unless told otherwise."""

    concurrency: Annotated[int, typer.Option(min=1, help="questions (and LLM calls) in flight")] = 1
