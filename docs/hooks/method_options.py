"""An mkdocs hook: a method page's options table, built from the method table at build time.

A page writes a marker, optionally with the paper's values, one ``option: value`` a line::

    <!-- options: sa-rag
    k: 5 or 10 (Appendix A)
    -->

and the build replaces it with a table of the method's options (name, type, default,
the paper's value, meaning) read from :data:`quillian.methods.table.METHODS`, the table
``quillian methods --json`` prints. ``<!-- retriever-options: sa -->`` does the same
for a retriever's options (:data:`quillian.components.factories.RETRIEVER_CONFIGS`).
The defaults and help texts therefore cannot drift from the code; the paper's values
are the page's own words. A marker naming an unknown method or retriever, or a paper
value for an option the code does not have, stops the build.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"<!-- (options|retriever-options): ([\w.+-]+)[ \t]*\n?(.*?)-->", re.DOTALL)
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const|ref):`(~?)([^`]+)`")
NO_PAPER_VALUE = "—"


def on_config(config: Any) -> Any:
    """Read the sources beside mkdocs.yml, not whatever copy the venv points at."""
    src = str(Path(config["config_file_path"]).resolve().parent / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    return config


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """Replace every options marker on the page by its table."""
    where = page.file.src_uri
    return MARKER.sub(lambda m: _table(m.group(1), m.group(2), m.group(3), where), markdown)


def _options(kind: str, name: str, where: str) -> tuple[Any, ...]:
    from quillian.config import config_options

    if kind == "options":
        from quillian.methods.table import METHODS

        if name not in METHODS:
            raise PluginError(f"{where}: no method {name!r} (have {', '.join(METHODS)})")
        return METHODS[name].options
    from quillian.components.factories import RETRIEVER_CONFIGS

    if name not in RETRIEVER_CONFIGS:
        known = ", ".join(RETRIEVER_CONFIGS)
        raise PluginError(f"{where}: no retriever {name!r} (have {known})")
    return config_options(RETRIEVER_CONFIGS[name])


def _paper_values(body: str, names: set[str], marker: str, where: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in filter(None, (raw.strip() for raw in body.splitlines())):
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or key not in names:
            raise PluginError(f"{where}: {marker}: {key!r} is not an option ({line!r})")
        values[key] = value.strip()
    return values


def _table(kind: str, name: str, body: str, where: str) -> str:
    options = _options(kind, name, where)
    paper = _paper_values(body, {o.name for o in options}, f"{kind} {name}", where)
    if not options:
        return f"`{name}` takes no options."
    rows = [
        "| option | type | default | paper | meaning |",
        "|---|---|---|---|---|",
    ]
    for o in options:
        cells = (
            f"`{o.name}`",
            _type(o),
            f"`{_default(o.default)}`",
            _cell(paper.get(o.name, NO_PAPER_VALUE)),
            _cell(ROLE.sub(_code, o.help)),
        )
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _type(option: Any) -> str:
    choices = getattr(option.type, "__args__", None)
    if option.type_name == "Literal" and choices:
        return "one of " + ", ".join(f"`{c}`" for c in choices)
    return option.type_name


def _default(value: Any) -> str:
    """As typed after ``--option key=`` (JSON but for strings), ``""`` for empty."""
    if isinstance(value, str):
        return value or '""'
    return json.dumps(value, default=str)


def _code(match: re.Match[str]) -> str:
    target = match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
