"""SA-RAG's LLM extraction tasks (Listings 4 and 5): their output models and strict
parsers. Shared by the extractor (:mod:`.llm`) and its cost estimate (:mod:`.llm_budget`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator

from quillian.components.llm.base import Decoding
from quillian.components.llm.structured import ParseError, parse_json_as
from quillian.components.llm.tasks import Task

__all__ = [
    "NER_TASK",
    "RELATIONS_TASK",
    "NEREntity",
    "NEROutput",
    "Relations",
    "parse_entities",
    "parse_relations",
]


class NEREntity(BaseModel):
    """One element of Listing 4's output array (extra keys are refused)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: str = Field(min_length=1)
    type: Literal["PERSON", "ORGANIZATION", "GPE", "MISC"]
    aliases: list[str] = Field(default_factory=list)
    entity_information: str = ""

    @field_validator("type", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("aliases", mode="before")
    @classmethod
    def _no_aliases(cls, value: Any) -> Any:
        return [] if value is None else value

    @field_validator("entity_information", mode="before")
    @classmethod
    def _no_information(cls, value: Any) -> Any:
        return "" if value is None else value


class NEROutput(RootModel[list[NEREntity]]):
    """Listing 4's whole output: a JSON array of entities (possibly empty)."""


class Relations(BaseModel):
    """Listing 5's output object. Triples of the wrong length are kept here and dropped
    (and counted) when the extraction is assembled."""

    model_config = ConfigDict(coerce_numbers_to_str=True, extra="ignore")

    triples: list[list[str]]


def parse_entities(raw: str, prompt: str = "") -> list[NEREntity]:
    """The entity array of an NER reply; anything else raises :class:`ParseError`."""
    return parse_json_as(raw, NEROutput, prompt).root


def parse_relations(raw: str, prompt: str = "") -> Relations:
    """The ``{"triples": [...]}`` object of a relation reply, after any reasoning.

    The first JSON value of the reply is tried first; when it is not the object (the
    reasoning quoted a bracketed list), the object holding ``"triples"`` is read.
    """
    try:
        return parse_json_as(raw, Relations, prompt)
    except ParseError as first:
        at = raw.find('"triples"')
        start = raw.rfind("{", 0, at) if at >= 0 else -1
        if start <= 0:
            raise
        try:
            return parse_json_as(raw[start:], Relations, prompt)
        except ParseError:
            raise first from None


#: Listing 4. Strict: an unknown type or key is a parse error, repaired once.
NER_TASK: Task[list[NEREntity]] = Task("sa-rag.ner", parse_entities, Decoding(max_tokens=4096))
#: Listing 5.
RELATIONS_TASK: Task[Relations] = Task(
    "sa-rag.relations", parse_relations, Decoding(max_tokens=4096)
)
