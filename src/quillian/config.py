"""Typed options of a frozen configuration dataclass, for help texts and validation.

Each field's help is its attribute docstring (the string literal under the field, the
way every config here documents itself) or ``metadata["help"]``; the edges (CLI, server,
benchmarks) read :func:`config_options` instead of repeating names and defaults.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import textwrap
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any

from quillian.errors import ConfigError

__all__ = [
    "OptionSpec",
    "build_config",
    "check_option_value",
    "config_options",
    "parse_option_value",
]


@dataclass(frozen=True)
class OptionSpec:
    """One option of a configuration: its name, type, default and help."""

    name: str
    type: type
    default: Any
    help: str

    @property
    def type_name(self) -> str:
        return getattr(self.type, "__name__", str(self.type))


def config_options(config_cls: type | None) -> tuple[OptionSpec, ...]:
    """The options of a configuration dataclass (none for ``None``)."""
    if config_cls is None:
        return ()
    hints = typing.get_type_hints(config_cls)
    docs = _attribute_docs(config_cls)
    options = []
    for f in dataclasses.fields(config_cls):
        default = f.default
        if default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        help_text = str(f.metadata.get("help", "")) or docs.get(f.name, "")
        options.append(OptionSpec(f.name, hints.get(f.name, object), default, help_text))
    return tuple(options)


def parse_option_value(option: OptionSpec, text: str) -> Any:
    """``text`` as a value of ``option``'s type (JSON for numbers, lists and booleans;
    one of the names of a ``Literal``)."""
    if option.type is str:
        return text
    if typing.get_origin(option.type) is typing.Literal:
        choices = typing.get_args(option.type)
        if text not in choices:
            names = ", ".join(map(str, choices))
            raise ConfigError(f"option {option.name}: {text!r} is not one of {names}")
        return text
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise ConfigError(f"option {option.name}: {text!r} is not {_a(option.type_name)}") from None
    expected = float if option.type is float else option.type
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if (isinstance(expected, type) and not isinstance(value, expected)) or (
        expected is int and isinstance(value, bool)
    ):
        raise ConfigError(f"option {option.name}: {text!r} is not {_a(option.type_name)}")
    return value


def check_option_value(option: OptionSpec, value: Any) -> Any:
    """``value`` as a value of ``option``'s type, from any edge: text is parsed as on the
    command line (:func:`parse_option_value`); any other value must already have the
    type (an int where a float is meant becomes a float, a bool is not a number)."""
    if isinstance(value, str):
        return parse_option_value(option, value)
    expected = option.type
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    wrong = (
        typing.get_origin(expected) is typing.Literal
        or expected is str
        or (isinstance(expected, type) and not isinstance(value, expected))
        or (expected in (int, float) and isinstance(value, bool))
    )
    if wrong:
        raise ConfigError(f"option {option.name}: {value!r} is not {_a(option.type_name)}")
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise ConfigError(f"option {option.name}: {value} is out of range")
    return value


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1] in "aeiou" else f"a {noun}"


def build_config(owner: str, config_cls: type | None, options: dict[str, Any]) -> Any:
    """``config_cls(**options)``, with unknown names and bad values as one clear error."""
    if config_cls is None:
        if options:
            raise ConfigError(f"{owner} takes no options, got {', '.join(sorted(options))}")
        return None
    specs = {o.name: o for o in config_options(config_cls)}
    unknown = sorted(set(options) - set(specs))
    if unknown:
        raise ConfigError(
            f"{owner}: unknown option(s) {', '.join(unknown)}; "
            f"options are {', '.join(sorted(specs)) or 'none'}"
        )
    try:
        typed = {name: check_option_value(specs[name], v) for name, v in options.items()}
    except ConfigError as exc:
        raise ConfigError(f"{owner}: {exc}") from None
    try:
        return config_cls(**typed)
    except TypeError as exc:
        raise ConfigError(f"{owner}: {exc}") from exc


@cache
def _attribute_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings of ``cls`` and its bases (a subclass's win)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        if not isinstance(body, ast.ClassDef):
            continue
        for node, after in zip(body.body, body.body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs
