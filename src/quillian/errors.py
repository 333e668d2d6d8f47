"""One exception hierarchy for Quillian, each error carrying the context a user needs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "BudgetExhausted",
    "ConfigError",
    "IndexDamagedError",
    "IndexError_",
    "IndexIncompleteError",
    "IndexMissingError",
    "IndexSchemaError",
    "IndexStageMissingError",
    "InputError",
    "LLMAuthError",
    "LLMError",
    "LLMModelNotFoundError",
    "LLMRequestError",
    "LLMResponseError",
    "LLMTimeoutError",
    "LLMUnavailableError",
    "MissingExtraError",
    "ModelLoadError",
    "QuillianError",
    "StoreError",
    "StoreUnavailableError",
    "UnknownIdError",
    "WorkerError",
]


class QuillianError(Exception):
    """Base class of every error Quillian raises on purpose."""


class ConfigError(QuillianError, ValueError):
    """A configuration value is out of range or inconsistent."""


class InputError(QuillianError, ValueError):
    """Input data (a file, a corpus, a line, a field) is unreadable or malformed.

    The message always names where: the path and, where known, the line or field.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = ": ".join([", ".join(where)]) + ": " if where else ""
        super().__init__(prefix + message)
        self.path = path
        self.line = line
        self.field = field


class StoreError(QuillianError):
    """A store could not read or write its data."""


class StoreUnavailableError(StoreError):
    """The store's server could not be reached, or the connection to it was lost, and
    did not come back within the retry deadline.

    Not a failure of the document or request being handled: a build stops on it (the
    index stays incomplete, and rerunning it resumes) rather than recording documents
    as failed.
    """


class UnknownIdError(StoreError, KeyError):
    """An id that the store or index does not hold (a :class:`KeyError` too)."""

    def __init__(self, ids: npt.ArrayLike) -> None:
        missing = np.asarray(ids, dtype=np.int64).ravel()
        shown = ", ".join(str(i) for i in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        super().__init__(f"unknown vector id {shown}{more}")
        self.ids = missing

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class IndexError_(QuillianError):
    """Base class for problems with an index directory."""


class IndexMissingError(IndexError_, FileNotFoundError):
    """The index directory does not exist or holds no index."""


class IndexIncompleteError(IndexError_):
    """The index directory was left half-written (an interrupted build)."""


class IndexDamagedError(IndexIncompleteError, StoreError):
    """A stored file of an index no longer holds what was written: its checksum or size
    differs from the one recorded when it was written, or its store's own integrity
    check fails. ``path`` names the file, ``reason`` what is wrong, ``rebuild`` the
    command that writes it again, ``name`` the file within its index (for messages that
    must not show the machine's paths, such as the HTTP server's)."""

    def __init__(self, path: str, reason: str, *, rebuild: str = "", name: str = "") -> None:
        how = f"; rebuild with: {rebuild}" if rebuild else ""
        super().__init__(f"{path} is damaged ({reason}){how}")
        self.path = path
        self.reason = reason
        self.rebuild = rebuild
        self.name = name or path.rsplit("/", 1)[-1]


class IndexSchemaError(IndexError_):
    """The index was written with a schema version this Quillian cannot read."""


class IndexStageMissingError(IndexError_):
    """The index lacks a build stage (or a trained model) a method needs; the message
    names what is missing and the command that adds it, never a filesystem path."""


class MissingExtraError(QuillianError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package} is not installed; install it with: pip install 'quillian[{extra}]'"
        )
        self.package = package
        self.extra = extra


class WorkerError(QuillianError):
    """A distributed executor (Ray) could not finish: a worker died for good, or failed
    on something that is not one document's fault. The message names the cause in one
    line; what was stored before stays, and a rerun resumes."""


class LLMError(QuillianError):
    """A chat-model call failed. Carries the endpoint, the model and the prompt key.

    The message names the base URL and the model and says what to do about it.
    """

    def __init__(
        self,
        message: str,
        *,
        base_url: str = "",
        model: str = "",
        prompt: str = "",
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.base_url = base_url
        self.model = model
        self.prompt = prompt
        self.status = status


class LLMUnavailableError(LLMError):
    """The endpoint could not be reached or kept failing (connection, 429, 5xx) after retries."""


class LLMTimeoutError(LLMUnavailableError):
    """The endpoint did not answer within the per-call timeout, after retries."""


class LLMAuthError(LLMError):
    """The endpoint rejected the API key (HTTP 401 or 403)."""


class LLMModelNotFoundError(LLMError):
    """The endpoint does not serve the requested model; ``available`` lists what it serves."""

    def __init__(
        self,
        message: str,
        *,
        base_url: str = "",
        model: str = "",
        prompt: str = "",
        status: int | None = None,
        available: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message, base_url=base_url, model=model, prompt=prompt, status=status)
        self.available = available


class LLMRequestError(LLMError):
    """The endpoint rejected the request itself (HTTP 400/422: context too long, bad parameter)."""


class LLMResponseError(LLMError):
    """The endpoint answered with something that is not a chat completion; ``raw`` holds it."""

    def __init__(
        self,
        message: str,
        *,
        base_url: str = "",
        model: str = "",
        prompt: str = "",
        status: int | None = None,
        raw: str = "",
    ) -> None:
        super().__init__(message, base_url=base_url, model=model, prompt=prompt, status=status)
        self.raw = raw


class ModelLoadError(QuillianError):
    """A model file is missing, corrupt or cannot be loaded; the message names the file."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(f"{path}: {message}" if path is not None else message)
        self.path = path


class BudgetExhausted(QuillianError):
    """A limit on LLM calls or tokens was reached; the work finished before it is kept.

    ``done`` holds the results completed before the stop, in input order (an extractor
    puts there the extractions of a prefix of its chunks); ``calls`` and ``tokens`` are
    what had been spent. Rerunning with a larger budget resumes where the run stopped.
    """

    def __init__(
        self, message: str, *, done: Sequence[Any] = (), calls: int = 0, tokens: int = 0
    ) -> None:
        super().__init__(message)
        self.done = tuple(done)
        self.calls = calls
        self.tokens = tokens
