"""Prompts as versioned data.

A :class:`Prompt` is a name, a version, its variables and chat messages (few-shot
examples are ordinary user/assistant messages). Placeholders are ``{name}``; literal
braces are doubled (``{{`` and ``}}``), as in ``str.format``. Rendering fails on a
missing or unexpected variable, and a template is checked when the prompt is made, so a
user override with a typo fails at configuration time, not mid-benchmark. The
``key`` (``name@version``) goes into every cache key and evaluation manifest.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quillian.components.llm.base import ChatMessage
from quillian.errors import ConfigError, InputError

__all__ = ["Prompt", "PromptRegistry"]

_FORMATTER = string.Formatter()


def _fields(template: str, where: str) -> set[str]:
    try:
        parsed = list(_FORMATTER.parse(template))
    except ValueError as exc:
        raise ConfigError(f"{where}: malformed template ({exc})") from exc
    names = set()
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise ConfigError(f"{where}: placeholder {{{name}}} must be a plain identifier")
        names.add(name)
    return names


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    messages: tuple[ChatMessage, ...]
    variables: frozenset[str] = field(default_factory=frozenset)
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name or "@" in self.name:
            raise ConfigError(f"prompt name must be non-empty without '@', got {self.name!r}")
        if self.version < 1:
            raise ConfigError(f"{self.name}: version must be >= 1, got {self.version}")
        used: set[str] = set()
        for i, message in enumerate(self.messages):
            used |= _fields(message.content, f"prompt {self.key}, message {i}")
        if used != set(self.variables):
            raise ConfigError(
                f"prompt {self.key}: declared variables {sorted(self.variables)} but the "
                f"messages use {sorted(used)}"
            )

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"

    def render(self, **values: Any) -> list[ChatMessage]:
        """The messages with every placeholder filled; missing or extra values raise."""
        missing = self.variables - values.keys()
        extra = values.keys() - self.variables
        if missing or extra:
            raise ConfigError(
                f"prompt {self.key}: missing variables {sorted(missing)}, "
                f"unexpected variables {sorted(extra)}"
            )
        return [ChatMessage(m.role, m.content.format(**values)) for m in self.messages]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "prompt") -> Prompt:
        """Build from ``{name, version, variables, messages: [{role, content}]}``."""
        try:
            messages = tuple(ChatMessage(m["role"], m["content"]) for m in data["messages"])
            return cls(
                name=data["name"],
                version=int(data["version"]),
                messages=messages,
                variables=frozenset(data.get("variables", ())),
                description=data.get("description", ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise InputError(f"malformed prompt definition ({exc!r})", path=where) from exc


class PromptRegistry:
    """Prompts by name; user overrides replace a built-in prompt of the same name."""

    def __init__(self, prompts: Sequence[Prompt] = ()) -> None:
        self._prompts: dict[str, Prompt] = {}
        for prompt in prompts:
            self.register(prompt)

    def register(self, prompt: Prompt, *, override: bool = False) -> None:
        if prompt.name in self._prompts and not override:
            raise ConfigError(f"prompt {prompt.name!r} is already registered")
        self._prompts[prompt.name] = prompt

    def __iter__(self) -> Iterator[Prompt]:
        """The registered prompts, by name."""
        return iter(sorted(self._prompts.values(), key=lambda p: p.name))

    def get(self, name: str) -> Prompt:
        try:
            return self._prompts[name]
        except KeyError:
            known = ", ".join(sorted(self._prompts)) or "none"
            raise ConfigError(f"unknown prompt {name!r} (known: {known})") from None

    def override_from_file(self, path: str | Path) -> None:
        """Apply a JSON file holding one prompt definition or a list of them.

        An override must keep the variables of the prompt it replaces, so the code that
        renders it still supplies exactly what it needs.
        """
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read prompt overrides ({exc})", path=str(path)) from exc
        for i, item in enumerate(data if isinstance(data, list) else [data]):
            prompt = Prompt.from_dict(item, where=f"{path} entry {i}")
            current = self.get(prompt.name)
            if prompt.variables != current.variables:
                raise ConfigError(
                    f"{path}: override of {prompt.name} uses variables "
                    f"{sorted(prompt.variables)}; it must use {sorted(current.variables)}"
                )
            self.register(prompt, override=True)
