"""KAG's typed schema (LLMFriSPG, paper section 2.1; spec section 1.5) as data.

A schema file (YAML or JSON) declares entity classes, each with a description, typed
properties and allowed relations::

    namespace: Medical
    types:
      Disease:
        description: An illness.
        properties: {desc: Text, severity: Text}
        relations: {treatedBy: Drug}
      Drug: {description: A medicine.}
    entity_defaults:            # applied to every class without its own block
      properties: {desc: Text, semanticType: SemanticConcept}
      relations: {synonyms: $self, officialName: $self, source: Chunk}

A property's value is a basic type (``Text``, ``Integer``, ``Float``, ``Date``,
``Boolean``) or a declared class; a relation's target is a declared class. ``$self``
stands for the declaring class. ``Chunk``, ``SemanticConcept`` and the fallback class
``Others`` are built in and added when a file leaves them out. Loading checks every
name and reference and raises :class:`SchemaError` naming the file, class and field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from quillian.errors import InputError

__all__ = [
    "BASIC_TYPES",
    "CHUNK",
    "CONCEPT",
    "OTHERS",
    "EntityClass",
    "Schema",
    "SchemaError",
    "default_schema",
    "load_schema",
    "parse_schema",
]

CHUNK = "Chunk"
CONCEPT = "SemanticConcept"
OTHERS = "Others"
BASIC_TYPES = frozenset({"Text", "Integer", "Float", "Date", "Boolean"})
_SELF = "$self"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_TYPE_KEYS = frozenset({"description", "properties", "relations"})
_TOP_KEYS = frozenset({"namespace", "types", "entity_defaults"})
_BUILT_IN: dict[str, dict[str, Any]] = {
    CONCEPT: {
        "description": "A concept of the concept graph (an entity's semantic type).",
        "properties": {"desc": "Text"},
        "relations": {"isA": CONCEPT, "synonym": CONCEPT},
    },
    CHUNK: {"description": "A passage of a source document.", "properties": {"content": "Text"}},
    OTHERS: {"description": "An entity of none of the declared classes."},
}


class SchemaError(InputError):
    """A schema file is malformed or refers to something it does not declare."""


@dataclass(frozen=True)
class EntityClass:
    """One declared class: its description, properties (name to value type) and
    relations (name to target class)."""

    name: str
    description: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)
    relations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Schema:
    """A validated schema. Entity classes exclude the built-in ``Chunk`` and
    ``SemanticConcept``; ``Others`` is always one of them."""

    namespace: str
    classes: Mapping[str, EntityClass]

    @property
    def entity_types(self) -> list[str]:
        """The entity classes, in file order (``Others`` last)."""
        names = [n for n in self.classes if n not in (CHUNK, CONCEPT, OTHERS)]
        return [*names, OTHERS]

    @cached_property
    def _folded(self) -> dict[str, str]:
        return {n.casefold(): n for n in self.classes}

    def canonical(self, label: str) -> str | None:
        """The declared class named ``label`` (case-insensitively), or None."""
        return self._folded.get(label.strip().strip("`").casefold())

    def entity_type(self, label: str) -> str:
        """``label`` as an entity class: unknown, empty or built-in labels become
        ``Others`` (the authors' post-processor does the same)."""
        found = self.canonical(label) if label else None
        return found if found and found not in (CHUNK, CONCEPT) else OTHERS

    def relation_target(self, source: str, relation: str) -> str | None:
        """The class ``relation`` of class ``source`` points to, if declared."""
        cls = self.classes.get(source)
        return cls.relations.get(relation) if cls else None

    def prompt_types(self) -> str:
        """The entity classes as the extraction and NER prompts list them."""
        return ", ".join(self.entity_types)

    def describe(self) -> str:
        """One line per entity class with its description (the NER prompt's classes)."""
        return "\n".join(
            f"- {n}: {d}" if (d := self.classes[n].description.strip()) else f"- {n}"
            for n in self.entity_types
        )


def _fail(where: str, message: str) -> SchemaError:
    return SchemaError(f"schema: {message}", path=where)


def _mapping(value: Any, where: str, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(where, f"{what} must be a mapping, got {type(value).__name__}")
    return value


def _block(name: str, raw: Any, where: str) -> dict[str, Any]:
    body = _mapping(raw, where, f"class {name!r}")
    unknown = set(body) - _TYPE_KEYS
    if unknown:
        raise _fail(
            where,
            f"class {name!r} has unknown keys {sorted(unknown)} (allowed: {sorted(_TYPE_KEYS)})",
        )
    return body


def parse_schema(data: Any, where: str = "schema") -> Schema:
    """Validate a schema read from a file (see the module docstring for the format)."""
    top = _mapping(data, where, "the schema")
    unknown = set(top) - _TOP_KEYS
    if unknown:
        raise _fail(where, f"unknown top-level keys {sorted(unknown)}")
    types = _mapping(top.get("types"), where, "'types'")
    if not types:
        raise _fail(where, "declares no types")
    defaults = _block("entity_defaults", top.get("entity_defaults"), where)
    raw: dict[str, dict[str, Any]] = {}
    for name, body in types.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise _fail(where, f"class name {name!r} is not an identifier")
        raw[name] = _block(name, body, where)
    for name, body in _BUILT_IN.items():
        raw.setdefault(name, body)
    declared = set(raw)
    classes: dict[str, EntityClass] = {}
    for name, body in raw.items():
        own = name in (CHUNK, CONCEPT)
        props = _members(name, "properties", body, defaults, own, where)
        rels = _members(name, "relations", body, defaults, own, where)
        for prop, value in props.items():
            if value not in BASIC_TYPES and value not in declared:
                raise _fail(
                    where,
                    f"class {name!r}, property {prop!r}: unknown type {value!r} (a basic type "
                    f"{sorted(BASIC_TYPES)} or a declared class)",
                )
        for rel, target in rels.items():
            if target not in declared:
                raise _fail(
                    where,
                    f"class {name!r}, relation {rel!r}: target class {target!r} is not declared",
                )
        description = body.get("description", "")
        if not isinstance(description, str):
            raise _fail(where, f"class {name!r}: description must be text")
        classes[name] = EntityClass(name, description, props, rels)
    namespace = top.get("namespace", "Default")
    if not isinstance(namespace, str) or not namespace:
        raise _fail(where, "namespace must be non-empty text")
    return Schema(namespace, classes)


def _members(
    name: str, key: str, body: dict[str, Any], defaults: dict[str, Any], own: bool, where: str
) -> dict[str, str]:
    """A class's properties or relations: its own, else the entity defaults."""
    source = body.get(key) if key in body or own else defaults.get(key)
    out: dict[str, str] = {}
    for member, value in _mapping(source, where, f"class {name!r} {key}").items():
        if not isinstance(member, str) or not _NAME.match(member):
            raise _fail(where, f"class {name!r}: {key} name {member!r} is not an identifier")
        if not isinstance(value, str):
            raise _fail(where, f"class {name!r}, {key} {member!r}: type must be a class name")
        out[member] = name if value == _SELF else value
    return out


def load_schema(path: str | Path) -> Schema:
    """Read and validate a YAML or JSON schema file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SchemaError(f"cannot read schema ({exc})", path=str(path)) from exc
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise SchemaError(
            f"schema is not valid {path.suffix[1:] or 'YAML'} ({exc})", path=str(path)
        ) from exc
    return parse_schema(data, str(path))


@lru_cache(maxsize=1)
def default_schema() -> Schema:
    """The shipped open-domain schema: 15 classes, ``Others``, ``SemanticConcept`` and
    ``Chunk`` (the authors' benchmark schema)."""
    text = resources.files("quillian").joinpath("data/kag/open_domain.yaml").read_text("utf-8")
    return parse_schema(yaml.safe_load(text), "quillian/data/kag/open_domain.yaml")
