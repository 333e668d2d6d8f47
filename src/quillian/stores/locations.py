"""How a store location is shown to people: the one place that renders a server
location for a message, a log line or a trace, so a password never reaches one.

It needs no driver: a PostgreSQL URL is parsed here with :mod:`urllib.parse` alone, so
a message can name a location even where the ``postgres`` extra is not installed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

__all__ = ["SERVER_SCHEMES", "location_name"]

#: Location schemes of server backends.
SERVER_SCHEMES = ("postgresql://", "postgres://")
_USERINFO = re.compile(r"(?<=://)[^@/?#]*@")


def location_name(location: str | Path) -> str:
    """``location`` for people: a directory as given; a server URL as
    ``postgresql://USER@HOST[:PORT]/DB?workspace=NAME``, without its password or any
    other connection parameter (libpq accepts ``password=`` among them)."""
    text = str(location)
    if not text.startswith(SERVER_SCHEMES):
        return text
    try:
        parts = urlsplit(text)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        host = parts.hostname or query.get("host", "localhost")
        port = parts.port
    except ValueError:  # a malformed URL (a port that is not a number): keep no userinfo
        return _USERINFO.sub("", text).split("?")[0]
    user = parts.username or os.environ.get("PGUSER", "")
    where = f"{host}:{port}" if port else host
    workspace = query.get("workspace") or "public"
    return f"postgresql://{user}@{where}{parts.path}?workspace={workspace}"
