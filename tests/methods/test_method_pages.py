"""The method pages (docs/methods/) and their options tables, built at docs build time by
docs/hooks/method_options.py from the method table: every method has a page naming it,
every table lists exactly the code's options and defaults, and a page that names an
option the code does not have stops the build."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from quillian.components.factories import RETRIEVER_CONFIGS
from quillian.config import config_options
from quillian.methods.table import METHODS

pytest.importorskip("mkdocs")
from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "methods").glob("*.md"))
ROW = re.compile(r"^\| `(\w+)` \| [^|]+ \| `([^`]*)` \|", re.MULTILINE)


def _hook() -> ModuleType:
    path = ROOT / "docs" / "hooks" / "method_options.py"
    spec = importlib.util.spec_from_file_location("method_options", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOK = _hook()


def _render(text: str, name: str = "methods/test.md") -> str:
    page = SimpleNamespace(file=SimpleNamespace(src_uri=name))
    rendered: str = HOOK.on_page_markdown(text, page)
    return rendered


def test_every_method_is_named_on_a_method_page() -> None:
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    missing = [name for name in METHODS if f"`{name}`" not in text]
    assert PAGES and not missing


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_marker_becomes_the_code_s_options(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    markers = HOOK.MARKER.findall(text)
    rendered = _render(text, page.name)
    assert markers and "<!-- options" not in rendered and "<!-- retriever-options" not in rendered
    rows = ROW.findall(rendered)
    for kind, name, _ in markers:
        if kind == "options":
            options = METHODS[name].options
        else:
            options = config_options(RETRIEVER_CONFIGS[name])
        expected = [(o.name, HOOK._default(o.default)) for o in options]
        assert all(row in rows for row in expected), (name, expected)


def test_a_table_holds_defaults_and_the_page_s_paper_values() -> None:
    rendered = _render("<!-- options: kags\ntau: 0.5 (the authors' run)\n-->")
    lines = rendered.splitlines()
    assert lines[0] == "| option | type | default | paper | meaning |"
    tau = next(line for line in lines if line.startswith("| `tau` |"))
    assert tau.startswith("| `tau` | float | `0.5` | 0.5 (the authors' run) | Metadata filtration")
    h = next(line for line in lines if line.startswith("| `h` |"))
    assert "| `2` | — |" in h


def test_a_method_with_no_options_says_so() -> None:
    assert _render("<!-- options: no-retrieval -->") == "`no-retrieval` takes no options."


def test_a_paper_value_for_an_option_the_code_lacks_stops_the_build() -> None:
    with pytest.raises(PluginError, match=r"methods/x.md: options kags: 'top_k' is not an option"):
        _render("<!-- options: kags\ntop_k: 7\n-->", "methods/x.md")


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("<!-- options: no-such-method -->", "no method 'no-such-method'"),
        ("<!-- retriever-options: no-such-retriever -->", "no retriever 'no-such-retriever'"),
    ],
)
def test_an_unknown_name_stops_the_build(marker: str, message: str) -> None:
    with pytest.raises(PluginError, match=message):
        _render(marker)
