"""What a person sees of the reasoning, in a real browser: the bundled sample index
served with the scripted model, the README's question asked once, and the page checked
as drawn: the path M. Ross Quillian -> Herbert A. Simon -> Milwaukee highlighted with its
labelled relations, no label over another at the default zoom, nothing clipped at
1440x900 or 390x844, the answer and the graph first on a phone, no console error.

The screenshots of Ask, Explore and Documents at both sizes are taken on every run, into
the folder ``QUILLIAN_SCREENSHOTS`` names (``QUILLIAN_SCREENSHOTS=docs/images`` refreshes
the ones the README shows), else into the session's temporary folder, so a test run
leaves the checkout as it found it. One server and one page serve every test (the question is asked
once); the viewport changes between tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from playwright.sync_api import expect
from tests.server.conftest import CHROMIUM, hover_shows_sentence

from quillian.testing.server import serve_process

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).is_file(),
        reason="Debian's chromium is not installed (apt-get install chromium)",
    ),
]

QUESTION = "In which city was the doctoral advisor of M. Ross Quillian born?"
PATH = ["M. Ross Quillian", "Herbert A. Simon", "Milwaukee"]
ROUTES = {
    "sa-rag.answer": json.dumps(
        {
            "reasoning": "Quillian's doctoral advisor was Herbert A. Simon, born in Milwaukee.",
            "final_answer": "Milwaukee",
        }
    ),
}
ROOT = Path(__file__).resolve().parents[2]
#: Where the screenshots go: ``$QUILLIAN_SCREENSHOTS`` (relative to the checkout), else
#: a temporary folder.
IMAGES = (
    ROOT / os.environ["QUILLIAN_SCREENSHOTS"]
    if os.environ.get("QUILLIAN_SCREENSHOTS")
    else Path(tempfile.gettempdir()) / f"quillian-screenshots-{os.getpid()}"
)
TIMEOUT_MS = 60_000
WIDE, PHONE = (1440, 900), (390, 844)


@pytest.fixture(scope="module")
def sample_url(tmp_path_factory):
    """``quillian serve`` on the bundled sample, indexed by ``quillian index --sample`` (a
    child process: the browser's event loop holds this one)."""
    here = tmp_path_factory.mktemp("sample")
    command = [sys.executable, "-m", "quillian.cli.main", "index", "--sample", "--out"]
    subprocess.run([*command, str(here / "sample")], check=True, capture_output=True)
    routes = here / "routes.json"
    routes.write_text(json.dumps(ROUTES))
    args = [str(here / "sample"), "--llm", f"scripted:{routes}", "--no-access-log"]
    with serve_process(args, here / "serve.log") as url:
        yield url


@pytest.fixture(scope="module")
def asked(browser, sample_url):
    """One page with the sample question answered; ``errors`` gathers the console's
    errors and the page's uncaught exceptions."""
    context = browser.new_context(viewport={"width": WIDE[0], "height": WIDE[1]})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.errors = errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(sample_url)
    expect(page.locator("#workspace-info")).to_contain_text("entities")
    page.fill("#question", QUESTION)
    page.click("#ask-button")
    expect(page.locator("#ask-status")).to_have_text("Done.", timeout=TIMEOUT_MS)
    settled(page, "#ask-graph")
    yield page
    context.close()


@pytest.fixture
def page(asked):
    """The shared page at the wide size, on the Ask screen; no console error after."""
    asked.set_viewport_size({"width": WIDE[0], "height": WIDE[1]})
    asked.click("#tab-ask")
    yield asked
    assert asked.errors == []


def settled(page, selector: str) -> None:
    """Wait until the graph has stopped moving (an animated fit, a refit on resize)."""
    page.wait_for_function(f"() => !document.querySelector('{selector}').graphView.cy.animated()")
    page.wait_for_timeout(150)  # a ResizeObserver's refit lands on the next frame


def drawn(page, selector: str, which: str) -> list[dict]:
    """The graph's elements matching a Cytoscape selector: data, classes, drawn label."""
    return page.evaluate(
        """([selector, which]) => document.querySelector(selector).graphView.cy.$(which)
            .map((e) => ({...e.data(), classes: e.classes(), shown: e.style('label'),
                          source: e.isEdge() ? e.source().data('label') : undefined,
                          target: e.isEdge() ? e.target().data('label') : undefined}))""",
        [selector, which],
    )


#: The labels drawn on a graph's canvas (rendered boxes, inside the canvas, big enough to
#: be drawn at this zoom), with each pair that overlaps by more than a pixel.
LABELS = """(selector) => {
    const view = document.querySelector(selector).graphView;
    const [w, h] = [view.canvas.clientWidth, view.canvas.clientHeight];
    const zoom = view.cy.zoom();
    const labels = [];
    for (const ele of view.cy.elements()) {
        const text = ele.style('label');
        const px = parseFloat(ele.style('font-size')) * zoom;
        if (!text || !ele.visible() || px < parseFloat(ele.style('min-zoomed-font-size'))) continue;
        const b = ele.renderedBoundingBox({includeNodes: false, includeEdges: false,
                                           includeLabels: true, includeOverlays: false});
        if (!b.w || b.x2 < 0 || b.y2 < 0 || b.x1 > w || b.y1 > h) continue;
        labels.push({text, px, box: [b.x1, b.y1, b.x2, b.y2]});
    }
    const overlaps = [];
    labels.forEach((a, i) => labels.slice(i + 1).forEach((b) => {
        const [x, y] = [Math.min(a.box[2], b.box[2]) - Math.max(a.box[0], b.box[0]),
                        Math.min(a.box[3], b.box[3]) - Math.max(a.box[1], b.box[1])];
        if (x > 1 && y > 1) overlaps.push([a.text, b.text]);
    }));
    return {labels, overlaps, zoom, size: [w, h]};
}"""

#: Visible elements reaching past the viewport's sides (the skip link and visually
#: hidden inputs are off-screen by design).
CLIPPED = """() => {
    const width = document.documentElement.clientWidth;
    const out = [];
    for (const e of document.querySelectorAll('body *')) {
        if (!e.getClientRects().length || e.closest('.skip, .visually-hidden, [hidden]')) continue;
        const r = e.getBoundingClientRect();
        if (r.width && (r.right > width + 0.5 || r.left < -0.5)) {
            const at = `${Math.round(r.left)}..${Math.round(r.right)}`;
            out.push(`${e.tagName}#${e.id}.${e.className}: ${at}`);
        }
    }
    return out;
}"""


def shot(page, name: str, size: tuple[int, int], height: int | None = None) -> None:
    """A screenshot for the docs: the viewport, or the page's first ``height`` pixels."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    path = str(IMAGES / f"{name}-{size[0]}x{size[1]}.png")
    if height is None:
        page.screenshot(path=path)
    else:
        page.screenshot(
            path=path, full_page=True, clip={"x": 0, "y": 0, "width": size[0], "height": height}
        )


#: The answer's last relation, into Milwaukee.
INTO_MILWAUKEE = (
    "(cy) => cy.$('edge.answer').filter((e) => e.target().data('label') === 'Milwaukee')"
)


def test_the_path_to_the_answer_is_drawn_highlighted_and_listed(page):
    assert page.locator("#answer").text_content() == "Milwaukee"
    on_path = drawn(page, "#ask-graph", ".answer")
    nodes = {n["label"]: n for n in on_path if "source" not in n or n["source"] is None}
    edges = [e for e in on_path if e.get("source")]
    assert set(nodes) == set(PATH) and all("onpath" in n["classes"] for n in nodes.values())
    assert {(e["source"], e["target"]) for e in edges} == {
        ("M. Ross Quillian", "Herbert A. Simon"),
        ("Herbert A. Simon", "Milwaukee"),
    }
    for edge in edges:  # labelled with its predicate, drawn at the default zoom
        assert edge["label"] and edge["shown"] == edge["label"], edge
    sentences = {e["target"]: e["sentence"] for e in edges}
    assert "doctoral advisor was Herbert A. Simon" in sentences["Herbert A. Simon"]
    assert "born in Milwaukee" in sentences["Milwaukee"]
    # the rest of the activated subgraph is drawn, dimmed
    assert len(drawn(page, "#ask-graph", ".dim")) > 10
    assert all(n["shown"] == n["label"] for n in nodes.values())
    # hovering the relation shows the sentence it was read from
    assert hover_shows_sentence(page, "#ask-graph", INTO_MILWAUKEE)
    # "How it was reached", numbered as the sources: the answer's path in full
    reached = page.locator("#reached li.answers")
    assert reached.count() == 1
    assert reached.locator(".path-line strong").all_text_contents() == PATH
    number = reached.get_attribute("data-cite")
    cited = page.locator(f"#cite-{number}").text_content()
    assert "born in Milwaukee" in cited  # the passage its last relation was read from
    assert page.locator("#reached > li").count() >= 2
    page.mouse.move(0, 0)
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "ask", WIDE, height=1250)


@pytest.mark.parametrize("size", [WIDE, PHONE], ids=["1440x900", "390x844"])
def test_no_label_overlaps_another_and_the_path_is_readable(page, size):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    settled(page, "#ask-graph")
    ask = page.evaluate(LABELS, "#ask-graph")
    assert ask["overlaps"] == []
    shown = {label["text"]: label["px"] for label in ask["labels"]}
    assert set(PATH) <= set(shown), shown  # the path's names are drawn, in the canvas
    assert min(shown[name] for name in PATH) >= 9, ask  # and legible
    explore(page)
    labels = page.evaluate(LABELS, "#explore-graph")
    assert labels["overlaps"] == [] and len(labels["labels"]) >= 5, labels
    assert min(label["px"] for label in labels["labels"]) >= 6


def explore(page) -> None:
    """Explore: Herbert A. Simon's neighbourhood opened from the search."""
    page.click("#tab-explore")
    if page.locator("#trail li").count() == 0:
        page.fill("#entity-query", "Simon")
        page.press("#entity-query", "Enter")
        page.locator("#search-results button", has_text="Herbert A. Simon").click()
        page.locator("#explore-graph .graph-details h4").first.wait_for()
    settled(page, "#explore-graph")


def test_explore_fits_the_neighbourhood_and_merges_duplicate_relations(page):
    explore(page)
    outside = page.evaluate(
        """() => {
            const view = document.querySelector('#explore-graph').graphView;
            const [w, h] = [view.canvas.clientWidth, view.canvas.clientHeight];
            return view.cy.nodes().filter((n) => {
                const b = n.renderedBoundingBox({includeLabels: false});
                return b.x1 < -1 || b.y1 < -1 || b.x2 > w + 1 || b.y2 > h + 1;
            }).map((n) => n.data('label'));
        }"""
    )
    assert outside == []
    relations = drawn(page, "#explore-graph", 'edge[kind = "relation"]')
    triples = [(e["source"], e["label"].split(" ×")[0], e["target"]) for e in relations]
    assert len(triples) == len(set(triples)) > 5  # one edge per fact, however often read
    for edge in relations:
        count = edge["count"]
        assert (count > 1) == (f" ×{count}" in edge["label"]), edge
    items = page.locator("#explore-graph .graph-details ul.relations > li")
    counts = [int(c) for c in items.evaluate_all("(l) => l.map((li) => li.dataset.count)")]
    assert len(counts) == len(triples) and sum(counts) >= len(counts)


@pytest.mark.parametrize("size", [WIDE, PHONE], ids=["1440x900", "390x844"])
def test_nothing_is_clipped_and_each_screen_is_shot(page, size):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    explore(page)
    # a node's panel stays inside the page: open the entity with the longest name
    page.locator("#explore-graph details.nodes summary").click()
    page.locator("#explore-graph .node-list button", has_text="Nobel").click()
    page.locator("#explore-graph .graph-details h3", has_text="Nobel").wait_for()
    settled(page, "#explore-graph")
    assert page.evaluate(CLIPPED) == []
    page.locator("#explore-graph details.nodes summary").click()
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "explore", size)
    page.click("#tab-documents")
    page.locator("#doc-list .card").first.wait_for()
    assert page.evaluate(CLIPPED) == []
    shot(page, "documents", size)
    page.click("#tab-ask")
    settled(page, "#ask-graph")
    assert page.evaluate(CLIPPED) == []
    if size == PHONE:  # the answer, then the graph, before the evidence
        tops = page.evaluate(
            """() => ['#answer', '#ask-graph', '#reached', '#evidence'].map(
                (s) => document.querySelector(s).getBoundingClientRect().top + scrollY)"""
        )
        assert tops == sorted(tops), tops
        page.evaluate("document.querySelector('#answer-heading').scrollIntoView()")
        shot(page, "ask", size)


def test_option_help_shows_docstring_markup_as_text(page):
    helps = page.locator("#options .option small").all_text_contents()
    assert helps and not [h for h in helps if "``" in h or ":mod:`" in h or ":func:`" in h]
    assert any("quillian.components.generation.polar" in h for h in helps)


def test_on_a_phone_the_options_fold_away_and_the_answer_is_on_the_first_screen(
    browser, sample_url
):
    context = browser.new_context(viewport={"width": PHONE[0], "height": PHONE[1]})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(sample_url)
        expect(page.locator("#workspace-info")).to_contain_text("entities")
        expect(page.locator("#options-summary")).to_contain_text("Options (")
        assert page.evaluate("document.querySelector('#options-box').open") is False
        top = page.evaluate(
            "document.querySelector('#answer-heading').getBoundingClientRect().top + scrollY"
        )
        assert top < PHONE[1], f"the answer starts {top:.0f} px down, below the first screen"
        page.click("#options-summary")  # a tap opens them
        expect(page.locator("#options input[data-option='k']")).to_be_visible()
    finally:
        context.close()
