"""Errors as HTTP statuses: every refusal is a 4xx naming the problem; only what the
server itself got wrong is a 500 (and its details go to the log, not the client). No
message leaves with a path of the server's:
:func:`~quillian.server.privacy.private_paths` names them and :func:`describe` puts a
placeholder (``INDEX``, ``STATE``...) in their place."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from quillian.errors import (
    ConfigError,
    IndexDamagedError,
    IndexIncompleteError,
    IndexMissingError,
    IndexStageMissingError,
    InputError,
    LLMError,
    QuillianError,
    StoreUnavailableError,
    UnknownIdError,
)
from quillian.server.jobs import JobConflict
from quillian.server.keys import Forbidden, Unauthorized
from quillian.server.models import NOT_BLANK
from quillian.server.observability import BodyTooLarge
from quillian.server.privacy import hide_paths
from quillian.server.workspaces import UnknownWorkspace

__all__ = ["NotFound", "describe", "invalid"]

logger = logging.getLogger(__name__)


class NotFound(QuillianError, LookupError):
    """A job, document or entity that does not exist."""


def describe(
    exc: BaseException, private: Sequence[tuple[str, str]] = (), workspace: str | None = None
) -> tuple[int, str]:
    """The status and message for ``exc`` (met serving ``workspace``, where known), each
    of the ``private`` paths (a path and its placeholder, the longest first) replaced in
    the message."""
    status, message = _describe(exc, workspace)
    return status, hide_paths(message, private)


def _describe(exc: BaseException, workspace: str | None) -> tuple[int, str]:
    if isinstance(exc, Unauthorized):
        return 401, str(exc)
    if isinstance(exc, Forbidden):
        return 403, str(exc)
    if isinstance(exc, ValidationError):  # a request the route built from another
        return 400, f"invalid request: {invalid(exc.errors())}"
    if isinstance(exc, NotFound | UnknownWorkspace | UnknownIdError):
        return 404, str(exc)
    if isinstance(exc, JobConflict | IndexStageMissingError):
        return 409, str(exc)  # the index as it is cannot do it: the message says how to
    if isinstance(exc, BodyTooLarge):
        return 413, str(exc)
    if isinstance(exc, IndexDamagedError):  # named within the index: no server path
        where = f"workspace {workspace}: " if workspace else ""
        return 503, (
            f"{where}the index file {exc.name} is damaged ({exc.reason}); rebuild the "
            "index with: quillian index CORPUS --out LOCATION"
        )
    if isinstance(exc, IndexIncompleteError | IndexMissingError):
        return 503, str(exc)
    if isinstance(exc, StoreUnavailableError):  # the database is away: try again later
        return 503, str(exc)
    if isinstance(exc, ConfigError | InputError):
        return 400, str(exc)
    if isinstance(exc, LLMError):
        return 502, f"the language model failed: {exc}"
    if isinstance(exc, TimeoutError):
        return 504, str(exc) or "the request took too long"
    if isinstance(exc, QuillianError):
        return 400, str(exc)
    if isinstance(exc, ValueError):  # argument checks in the library (k must be > 0)
        return 400, str(exc)
    logger.error("unexpected error", exc_info=exc)
    return 500, f"internal error ({type(exc).__name__})"


def invalid(errors: Sequence[Mapping[str, Any]]) -> str:
    """Pydantic's validation errors as one line: ``where: what`` for each."""
    problems = []
    for error in errors:
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        what = str(error.get("msg"))
        pattern = (error.get("ctx") or {}).get("pattern")
        if error.get("type") == "string_pattern_mismatch" and pattern == NOT_BLANK:
            what = "is blank (only whitespace)"
        problems.append(f"{where}: {what}")
    return "; ".join(problems)
