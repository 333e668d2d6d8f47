"""A griffe extension for the API reference: the docstrings' Sphinx roles
(:class:`~quillian.engine.Engine`, :func:`index_documents`) become code spans, as
mkdocstrings renders docstrings as Markdown and would print the roles verbatim.
``~a.b.C`` keeps only ``C``, as Sphinx shows it."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const|ref):`(~?)([^`]+)`")


def _code(match: re.Match[str]) -> str:
    target = match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


class RstRoles(griffe.Extension):
    """Rewrite every docstring's Sphinx roles as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(_code, obj.docstring.value)
