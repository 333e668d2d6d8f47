"""Every question-answering method, declared once: the table the engine, the CLI, the
server and the benchmarks read."""

from __future__ import annotations

from quillian.errors import ConfigError
from quillian.methods import baselines, kag, kags, kg_infused, know3, sa_rag
from quillian.methods.spec import MethodSpec

__all__ = ["METHODS", "method_names", "method_spec"]

#: The methods by name, in the order help texts list them.
METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        *baselines.SPECS,
        *sa_rag.SPECS,
        *kg_infused.SPECS,
        *know3.SPECS,
        *kag.SPECS,
        *kags.SPECS,
    )
}
_ALIASES: dict[str, str] = {alias: s.name for s in METHODS.values() for alias in s.aliases}


def method_spec(name: str) -> MethodSpec:
    """The method called ``name`` (or one of its aliases)."""
    spec = METHODS.get(_ALIASES.get(name, name))
    if spec is None:
        raise ConfigError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}")
    return spec


def method_names(*, with_aliases: bool = False) -> list[str]:
    """The methods' names (and their aliases)."""
    return [*METHODS, *_ALIASES] if with_aliases else list(METHODS)
