"""What a client must never read: the server's own paths (its indexes, job state, LLM
cache, temporary directory), replaced in every message by a placeholder, whether the
message is an HTTP error's or one recorded with a job."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from quillian.index.layout import is_server_location, local_directory
from quillian.server.settings import ServerSettings

__all__ = ["PrivatePaths", "hide_paths", "private_paths"]

#: Each of the server's paths with its placeholder, the longest first.
PrivatePaths = Sequence[tuple[str, str]]


def private_paths(settings: ServerSettings) -> tuple[tuple[str, str], ...]:
    """The server's paths a message must not show, each with its placeholder: every
    workspace's index (and a server index's location and local cache), its jobs' state,
    the LLM cache and the temporary directory; the longest first."""
    pairs: list[tuple[str | Path, str]] = []
    for spec in settings.workspaces:
        pairs += [(spec.location, "INDEX"), (settings.state_for(spec), "STATE")]
        if is_server_location(spec.location):
            pairs.append((local_directory(spec.location), "INDEX"))
    if settings.cache_path is not None:
        pairs.append((settings.cache_path, "CACHE"))
    forms: dict[str, str] = {}
    for path, placeholder in pairs:
        forms.setdefault(str(path), placeholder)
        if not is_server_location(path):
            forms.setdefault(str(Path(path).resolve()), placeholder)
    forms.setdefault(str(Path(tempfile.gettempdir()).resolve()) + "/", "TMP/")
    return tuple(sorted(forms.items(), key=lambda pair: -len(pair[0])))


def hide_paths(message: str, private: PrivatePaths) -> str:
    """``message`` with each of the ``private`` paths replaced by its placeholder."""
    for path, placeholder in private:
        message = message.replace(path, placeholder)
    return message
