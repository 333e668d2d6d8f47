"""Fixtures of the server tests: a small index (spaCy, keyword embedder) built once, and
fresh copies of it for tests that change it; Debian's chromium for the browser tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from quillian.testing.server import ROUTES, build_index

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="session")
def built_index(tmp_path_factory) -> Path:
    return build_index(tmp_path_factory.mktemp("built") / "idx")


@pytest.fixture
def index_copy(built_index, tmp_path) -> Path:
    """A fresh copy of the built index, for tests that change it."""
    target = tmp_path / "idx"
    shutil.copytree(built_index, target)
    return target


@pytest.fixture
def routes_file(tmp_path) -> Path:
    path = tmp_path / "routes.json"
    path.write_text(json.dumps(ROUTES))
    return path


@pytest.fixture(scope="session")
def browser_type_launch_args():
    """pytest-playwright launches Debian's chromium: Playwright cannot download its own
    here, and no GPU, sandbox or background network is needed."""
    return {
        "executable_path": CHROMIUM,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


@pytest.fixture(scope="module")
def playwright(_pw_api_request_contexts):
    """pytest-playwright's Playwright, for this module only: its sync API holds an event
    loop on the main thread while it runs, so kept for the whole session (the plugin's
    default) it would break every later test that calls ``asyncio.run``."""
    with sync_playwright() as started:
        if _pw_api_request_contexts:
            _pw_api_request_contexts.instrument(started)
        yield started


@pytest.fixture(scope="module")
def browser_type(playwright):
    return playwright.chromium


@pytest.fixture(scope="module")
def browser(browser_type, browser_type_launch_args):
    launched = browser_type.launch(**browser_type_launch_args)
    yield launched
    launched.close()


#: Where the mouse can rest on each edge a view's ``pick(cy)`` returns: whole client
#: pixels (the mouse's own, as Cytoscape reads them) along the edge at which Cytoscape's
#: hit test finds that edge, at most ``count`` an edge. The layout is randomized, so a
#: node, a label or an edge running beside it may lie on part of an edge, and the exact
#: line a fraction of a pixel off may fall on its neighbour.
EDGE_POINTS = """([selector, pick, count]) => {
    const view = document.querySelector(selector).graphView;
    view.canvas.scrollIntoView({block: 'center'});  // the page may have scrolled
    const box = view.canvas.getBoundingClientRect();
    const [pan, zoom] = [view.cy.pan(), view.cy.zoom()];
    const found = (x, y, edge) => view.cy.renderer().findNearestElement(
        (x - box.left - pan.x) / zoom, (y - box.top - pan.y) / zoom, true, false) === edge;
    return eval(pick)(view.cy).map((edge) => {
        const [a, b] = [edge.renderedSourceEndpoint(), edge.renderedTargetEndpoint()];
        return Array.from({length: 33}, (_, i) => 0.1 + i * 0.025)
            .map((f) => ({x: Math.round(box.left + a.x + f * (b.x - a.x)),
                          y: Math.round(box.top + a.y + f * (b.y - a.y)),
                          sentence: edge.data('sentence')}))
            .filter((p) => found(p.x, p.y, edge)).slice(0, count);
    }).flat();
}"""


def hover_shows_sentence(page, selector: str, pick: str, count: int = 4) -> bool:
    """Rest the mouse on the edges ``pick`` (a JavaScript function of the Cytoscape graph
    in ``selector``) until the tooltip shows one's source sentence. Where none can be
    reached (another element lies over every point tried), the graph is laid out again,
    at most twice."""
    tip = page.locator(f"{selector} .graph-tip")
    for _ in range(3):
        for point in page.evaluate(EDGE_POINTS, [selector, pick, count]):
            page.mouse.move(point["x"] - 15, point["y"] - 15)
            page.mouse.move(point["x"], point["y"], steps=4)
            try:
                expect(tip).to_contain_text(point["sentence"], timeout=1000)
                return True
            except AssertionError:
                continue
        page.evaluate(f"document.querySelector('{selector}').graphView.layout(true)")
        page.wait_for_function(
            f"() => !document.querySelector('{selector}').graphView.cy.animated()"
        )
    return False
