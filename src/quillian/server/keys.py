"""API keys per workspace with roles, kept hashed in a keys file.

A key grants one role on one workspace (or on every workspace, ``"*"``):

- ``read``: retrieve, answer, list and read documents, browse entities and the graph,
  read jobs;
- ``write``: what ``read`` may, plus upload and delete documents and cancel jobs;
- ``admin``: every action on every workspace, and the server's metrics.

The keys file is TOML, one ``[[keys]]`` table per key, written by ``quillian keys add``
and readable by a person::

    [[keys]]
    id = "k7f3a9c21"
    workspace = "sample"
    role = "read"
    sha256 = "9b1d..."
    created = "2026-12-02T09:40:00Z"
    note = "the docs site"

Only a SHA-256 hash of each key is stored. The keys are 256-bit random tokens made by
:func:`new_key`, so a fast unsalted hash is enough: no dictionary or rainbow table
reaches a random 256-bit value, and checking one costs microseconds on every request
(a deliberately slow hash such as scrypt or PBKDF2 is made to cost milliseconds per
check, on every request, and would protect nothing more). A key is compared as its
hash, in constant time. ``quillian keys add`` makes every key; the file takes no key a
person chose.

A running server reads the file again when it changes, so ``quillian keys revoke``
takes effect on the next request; a file broken by a hand edit counts as holding no key
until it is fixed (the log says why). Importing this module needs no web framework.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import logging
import os
import re
import secrets
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from quillian.errors import ConfigError, QuillianError

__all__ = [
    "ADMIN_KEY_ID",
    "ANONYMOUS",
    "EVERY_WORKSPACE",
    "OPEN",
    "Forbidden",
    "Grant",
    "KeyEntry",
    "KeyRing",
    "Role",
    "Unauthorized",
    "add_key",
    "key_hash",
    "new_key",
    "read_keys",
    "revoke_key",
]

logger = logging.getLogger(__name__)

#: The workspace of a key valid on every workspace.
EVERY_WORKSPACE = "*"
#: How the key given by ``--api-key`` (or ``QUILLIAN_API_KEY``) is named in the logs.
ADMIN_KEY_ID = "api-key"

_ID = re.compile(r"^k[0-9a-f]{8}$")
_HASH = re.compile(r"^[0-9a-f]{64}$")
_WORKSPACE = re.compile(r"^(\*|[A-Za-z0-9][A-Za-z0-9_.-]{0,63})$")
_NOTE = re.compile(r"^[^\x00-\x1f\x7f\"\\]{0,200}$")

_HEADER = """\
# Quillian API keys: one [[keys]] table per key (quillian keys add / list / revoke).
# Only a SHA-256 hash of each key is kept here; a key is shown once, when it is made.
# role: read (retrieve, answer, browse, read jobs), write (read, plus upload and delete
# documents, cancel jobs), admin (every workspace, every action); workspace "*": all.
"""


class Role(enum.IntEnum):
    """What a key may do; each role includes the ones below it."""

    READ = 1
    WRITE = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Role:
        try:
            return cls[text.upper()]
        except KeyError:
            raise ConfigError(f"unknown role {text!r}; roles are read, write, admin") from None


class Unauthorized(QuillianError):
    """No key, or a key this server does not know (HTTP 401)."""


class Forbidden(QuillianError):
    """A known key without the rights a request needs (HTTP 403)."""


@dataclass(frozen=True)
class Grant:
    """What the key of a request may do: a role on a workspace (or on every one)."""

    key_id: str
    workspace: str
    role: Role

    def allows(self, workspace: str, role: Role) -> bool:
        """Whether the key may act with ``role`` on ``workspace``."""
        if self.role < role or not self.workspace:
            return False
        return self.workspace in (EVERY_WORKSPACE, workspace)

    def sees(self, workspace: str) -> bool:
        """Whether the key may read ``workspace`` (and so see that it exists)."""
        return self.allows(workspace, Role.READ)

    def check(self, workspace: str, role: Role) -> None:
        """Raise :class:`Forbidden` unless the key may act with ``role`` on ``workspace``.

        A key without any right on a workspace gets the same answer whether or not it
        exists, so a tenant learns no other tenant's name."""
        if self.allows(workspace, role):
            return
        who = f"API key {self.key_id}"
        if workspace == EVERY_WORKSPACE:
            raise Forbidden(f"{who} is not an admin key; this needs an admin key")
        if not self.sees(workspace):
            raise Forbidden(f"{who} has no access to workspace {workspace!r}")
        raise Forbidden(
            f"{who} may only {self.role.label} workspace {workspace!r}; "
            f"this needs a {role.label} key"
        )


#: The grant of every request to a server that has no keys (open, as without keys).
OPEN = Grant("none", EVERY_WORKSPACE, Role.ADMIN)
#: The grant of a request to an open path of a server with keys: no right at all.
ANONYMOUS = Grant("anonymous", "", Role.READ)


@dataclass(frozen=True)
class KeyEntry:
    """One key of a keys file: its id, workspace, role and hash (never the key)."""

    id: str
    workspace: str
    role: Role
    sha256: str
    created: str = ""
    note: str = ""

    def grant(self) -> Grant:
        return Grant(self.id, self.workspace, self.role)

    def toml(self) -> str:
        """The entry as a ``[[keys]]`` table (its values are checked to need no escape)."""
        lines = [
            "[[keys]]",
            f'id = "{self.id}"',
            f'workspace = "{self.workspace}"',
            f'role = "{self.role.label}"',
            f'sha256 = "{self.sha256}"',
            f'created = "{self.created}"',
        ]
        if self.note:
            lines.append(f'note = "{self.note}"')
        return "\n".join(lines) + "\n"


def new_key(key_id: str) -> str:
    """A new key: ``qk_`` and its id (not secret: it names the key in logs and lists),
    then 256 random bits."""
    return f"qk_{key_id}_{secrets.token_urlsafe(32)}"


def key_hash(key: str) -> str:
    """The SHA-256 hex digest kept for ``key``."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def read_keys(path: Path) -> list[KeyEntry]:
    """The entries of a keys file; :class:`ConfigError` naming the file and the entry
    for anything malformed (a missing file included)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no keys file {path} (make one with: quillian keys add)") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"keys file {path} cannot be read: {exc}") from None
    tables = data.get("keys", [])
    unknown = sorted(set(data) - {"keys"})
    if unknown or not isinstance(tables, list):
        raise ConfigError(f"keys file {path}: expected only [[keys]] tables")
    entries = [_entry(path, n, table) for n, table in enumerate(tables, 1)]
    ids = [e.id for e in entries]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ConfigError(f"keys file {path}: key id {', '.join(dupes)} appears twice")
    return entries


def _entry(path: Path, number: int, table: object) -> KeyEntry:
    where = f"keys file {path}, key {number}"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a [[keys]] table")
    fields = {"id", "workspace", "role", "sha256", "created", "note"}
    extra = sorted(set(table) - fields)
    missing = sorted({"id", "workspace", "role", "sha256"} - set(table))
    if extra or missing:
        problem = f"unknown field {', '.join(extra)}" if extra else f"no {', '.join(missing)}"
        raise ConfigError(f"{where}: {problem}")
    values = {k: table[k] for k in fields & set(table)}
    if not all(isinstance(v, str) for v in values.values()):
        raise ConfigError(f"{where}: every value is a string")
    checks = (
        ("id", _ID, "k and 8 hex digits"),
        ("workspace", _WORKSPACE, "a workspace name or *"),
        ("sha256", _HASH, "64 lowercase hex digits (the key's SHA-256)"),
        ("note", _NOTE, "at most 200 characters, no quotes, backslashes or control ones"),
    )
    for name, pattern, what in checks:
        if not pattern.match(values.get(name, "")):
            raise ConfigError(f"{where}: {name} must be {what}")
    try:
        role = Role.parse(values["role"])
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if role == Role.ADMIN and values["workspace"] != EVERY_WORKSPACE:
        raise ConfigError(f'{where}: an admin key is for every workspace: workspace = "*"')
    return KeyEntry(
        values["id"],
        values["workspace"],
        role,
        values["sha256"],
        values.get("created", ""),
        values.get("note", ""),
    )


def add_key(path: Path, workspace: str, role: Role, note: str = "") -> tuple[KeyEntry, str]:
    """Make a key for ``role`` on ``workspace``, add its hash at the end of the keys file
    (made if missing, readable by its owner only) and return the entry and the key,
    which is stored nowhere."""
    entries = read_keys(path) if path.exists() else []
    if role == Role.ADMIN and workspace not in ("", EVERY_WORKSPACE):
        raise ConfigError("an admin key is for every workspace: leave --workspace out")
    workspace = workspace or (EVERY_WORKSPACE if role == Role.ADMIN else "")
    if not _WORKSPACE.match(workspace):
        raise ConfigError(
            f"workspace {workspace!r} must be a workspace name or '*' (every workspace)"
        )
    if not _NOTE.match(note):
        raise ConfigError(
            "a note is at most 200 characters, without quotes, backslashes or control ones"
        )
    taken = {e.id for e in entries}
    key_id = f"k{secrets.token_hex(4)}"
    while key_id in taken:
        key_id = f"k{secrets.token_hex(4)}"
    key = new_key(key_id)
    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry = KeyEntry(key_id, workspace, role, key_hash(key), created, note)
    text = path.read_text(encoding="utf-8") if path.exists() else _HEADER
    if not text.endswith("\n"):
        text += "\n"
    _write(path, text + "\n" + entry.toml())  # what was there, comments too, and the key
    return entry, key


def revoke_key(path: Path, key_id: str) -> KeyEntry:
    """Remove key ``key_id`` from the keys file (rewritten whole, atomically: comments a
    person added are not kept); the entry removed."""
    entries = read_keys(path)
    gone = [e for e in entries if e.id == key_id]
    if not gone:
        known = ", ".join(e.id for e in entries) or "none"
        raise ConfigError(f"no key {key_id!r} in {path} (its keys: {known})")
    _write(path, _HEADER + "".join("\n" + e.toml() for e in entries if e.id != key_id))
    return gone[0]


def _write(path: Path, text: str) -> None:
    """Replace the keys file with ``text`` at once (a server reading it sees the old
    file or the new, never half of one), readable by its owner only."""
    tmp = path.with_name(f".{path.name}.tmp")
    with os.fdopen(
        os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8"
    ) as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


class KeyRing:
    """The keys a server accepts: the entries of a keys file (read again when the file
    changes) and an optional admin key given on the command line (kept as its hash).

    With neither, :attr:`enabled` is false and every request is let in."""

    def __init__(self, path: Path | None = None, admin_key: str = "") -> None:
        self.path = path
        self._admin = key_hash(admin_key) if admin_key else ""
        self._entries: list[KeyEntry] = []
        self._seen: tuple[int, int, int] | None = None
        if path is not None:
            self._entries = read_keys(path)  # a missing or broken file fails at start
            self._seen = self._stamp()

    @property
    def enabled(self) -> bool:
        return self.path is not None or bool(self._admin)

    def entries(self) -> list[KeyEntry]:
        """The keys file's entries as last read."""
        self._refresh()
        return list(self._entries)

    def identify(self, presented: str) -> Grant | None:
        """The grant of a presented key, or None for an unknown one. Every stored hash is
        compared, in constant time, whichever matches."""
        if not presented:
            return None
        digest = key_hash(presented).encode()
        found: Grant | None = None
        if self._admin and hmac.compare_digest(digest, self._admin.encode()):
            found = Grant(ADMIN_KEY_ID, EVERY_WORKSPACE, Role.ADMIN)
        for entry in self.entries():
            if hmac.compare_digest(digest, entry.sha256.encode()) and found is None:
                found = entry.grant()
        return found

    def _stamp(self) -> tuple[int, int, int] | None:
        assert self.path is not None
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _refresh(self) -> None:
        """Read the keys file again if it changed. A file gone or broken since counts as
        holding no key (fail closed), and says so in the log once."""
        if self.path is None:
            return
        stamp = self._stamp()
        if stamp == self._seen:
            return
        self._seen = stamp
        try:
            self._entries = read_keys(self.path)
        except ConfigError as exc:
            self._entries = []
            logger.error("%s; no key of the file is accepted until it is fixed", exc)
        else:
            logger.info("keys file %s read again: %d key(s)", self.path, len(self._entries))
