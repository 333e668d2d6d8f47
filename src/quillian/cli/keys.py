"""``quillian keys add / list / revoke``: the API keys of ``quillian serve --keys FILE``,
one role on one workspace each, kept in FILE as hashes (see :mod:`quillian.server.keys`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from quillian.cli.flags import JsonFlag
from quillian.server.keys import Role, add_key, read_keys, revoke_key

__all__ = ["app"]

app = typer.Typer(
    help="API keys per workspace for `quillian serve --keys FILE`: read (retrieve, answer, "
    "browse, read jobs), write (also upload and delete documents, cancel jobs), admin "
    "(every workspace and action). FILE keeps only a hash of each key.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)

KeysFile = Annotated[
    Path,
    typer.Option(
        "--file",
        metavar="FILE",
        envvar="QUILLIAN_KEYS",
        help="the keys file (TOML; made by the first `keys add`)",
    ),
]


@app.command("add")
def add_command(
    file: KeysFile,
    role: Annotated[
        str, typer.Option(metavar="ROLE", help="read, write or admin (every workspace)")
    ],
    workspace: Annotated[
        str,
        typer.Option(metavar="NAME", help="the workspace the key is for ('*': every one)"),
    ] = "",
    note: Annotated[str, typer.Option(help="who or what the key is for (listed)")] = "",
) -> None:
    """Make a key, print it once on stdout, and append its hash to FILE. The key is
    stored nowhere: keep it, or revoke it and make another."""
    chosen = Role.parse(role)
    if chosen != Role.ADMIN and not workspace:
        raise typer.BadParameter("a read or write key is for one workspace: --workspace NAME")
    entry, key = add_key(file, workspace, chosen, note)
    print(key)
    print(
        f"key {entry.id}: {entry.role.label} on {_where(entry.workspace)}; only its hash is "
        f"kept in {file}, so copy it now (revoke: quillian keys revoke {entry.id})",
        file=sys.stderr,
    )


@app.command("list")
def list_command(file: KeysFile, json_out: JsonFlag = False) -> None:
    """The keys of FILE: id, role, workspace, when made, note (never a key: FILE holds
    none)."""
    entries = read_keys(file)
    if json_out:
        rows = [
            {
                "id": e.id,
                "role": e.role.label,
                "workspace": e.workspace,
                "created": e.created,
                "note": e.note,
            }
            for e in entries
        ]
        print(json.dumps(rows, indent=2))
        return
    if not entries:
        print(f"no keys in {file}", file=sys.stderr)
    for e in entries:
        where = _where(e.workspace)
        print(f"{e.id}  {e.role.label:<5}  {where:<20}  {e.created}  {e.note}".rstrip())


@app.command("revoke")
def revoke_command(
    key_id: Annotated[str, typer.Argument(metavar="ID", help="the key's id (keys list)")],
    file: KeysFile,
) -> None:
    """Remove a key from FILE; a server serving FILE refuses it from its next request."""
    entry = revoke_key(file, key_id)
    print(
        f"revoked key {entry.id} ({entry.role.label} on {_where(entry.workspace)})",
        file=sys.stderr,
    )


def _where(workspace: str) -> str:
    return "every workspace" if workspace == "*" else workspace
