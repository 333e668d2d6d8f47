"""Errors as HTTP statuses: every refusal is a 4xx naming the problem; only what the
server itself got wrong is a 500 (and its details go to the log, not the client)."""

from __future__ import annotations

import logging

from quillian.errors import (
    ConfigError,
    IndexIncompleteError,
    IndexMissingError,
    InputError,
    LLMError,
    QuillianError,
    StoreUnavailableError,
    UnknownIdError,
)
from quillian.server.jobs import JobConflict
from quillian.server.observability import BodyTooLarge
from quillian.server.workspaces import UnknownWorkspace

__all__ = ["NotFound", "describe"]

logger = logging.getLogger(__name__)


class NotFound(QuillianError, LookupError):
    """A job, document or entity that does not exist."""


def describe(exc: BaseException) -> tuple[int, str]:
    """The status and message for ``exc``."""
    if isinstance(exc, NotFound | UnknownWorkspace | UnknownIdError):
        return 404, str(exc)
    if isinstance(exc, JobConflict):
        return 409, str(exc)
    if isinstance(exc, BodyTooLarge):
        return 413, str(exc)
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
