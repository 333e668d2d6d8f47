"""The ids the API hands out: derived from content, never from a position, so an id
taken before an upload, a delete or a rebuild names the same thing after it, and an id
whose thing is gone finds nothing (a 404) rather than whatever took its place.

An entity's id is its snapshot node id, ``ent-`` and 16 hex digits of the SHA-256 of
its normalised name (:func:`quillian.types.entity_id`, re-exported here); a relation's
(:func:`quillian.types.relation_id`, re-exported too) and a description's are made
the same way from what they say and where it was read.
"""

from __future__ import annotations

import re

from quillian.components.graph.builder import description_node_id
from quillian.types import entity_id, relation_id

__all__ = [
    "ENTITY_ID_HELP",
    "ENTITY_ID_PATTERN",
    "description_id",
    "entity_id",
    "refuse_position",
    "relation_id",
]

ENTITY_ID_PATTERN = r"^ent-[0-9a-f]{16}$"
_EXAMPLE = "ent-0123456789abcdef"
ENTITY_ID_HELP = (
    "an entity's id: 'ent-' and 16 hex digits derived from its normalised name, the "
    "same across uploads, deletes and rebuilds (integer positions are not ids)"
)
_POSITION = re.compile(r"[+-]?\d+")
_CHANGED = (
    "entity ids changed: {value!r} is a position in an older graph; ids are now "
    "content-derived strings like '" + _EXAMPLE + "' (find the entity again with "
    "GET /api/workspaces/WS/entities?q=NAME)"
)


def description_id(entity: str, chunk_id: str, text: str) -> str:
    """The id of what the passage ``chunk_id`` says about the entity ``entity``: its
    node id in the graph snapshot."""
    return description_node_id(entity, chunk_id, text)


def refuse_position(value: object) -> None:
    """Raise :class:`ValueError` saying ids changed when ``value`` is an old integer id
    (an int, or a string of digits)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is no entity id: ids are strings like '{_EXAMPLE}'")
    if isinstance(value, int) or (isinstance(value, str) and _POSITION.fullmatch(value)):
        raise ValueError(_CHANGED.format(value=str(value)))
