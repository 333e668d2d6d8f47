"""One exception hierarchy for Quillian, each error carrying the context a user needs."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "ConfigError",
    "IndexError_",
    "IndexIncompleteError",
    "IndexMissingError",
    "IndexSchemaError",
    "InputError",
    "MissingExtraError",
    "QuillianError",
    "StoreError",
    "UnknownIdError",
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


class IndexSchemaError(IndexError_):
    """The index was written with a schema version this Quillian cannot read."""


class MissingExtraError(QuillianError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package} is not installed; install it with: pip install 'quillian[{extra}]'"
        )
        self.package = package
        self.extra = extra
