"""The web UI in a real browser: Debian's chromium driven by Playwright against
``quillian serve`` (a subprocess on a free loopback port, the scripted model, an API key).

Ask the sample question and see the streamed answer, its citations and the activated
subgraph; upload documents (drop and picker), see them processed, delete one; search and
walk the graph; operate it with the keyboard; no horizontal overflow at 1280x800 or
phone width. Screenshots of each screen go to ``runs/webui/``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect
from tests.server.conftest import CHROMIUM, hover_shows_sentence

from quillian.server.keys import Role, add_key
from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.testing.server import QUESTION, ROUTES, build_index, running, serve_process

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).is_file(),
        reason="Debian's chromium is not installed (apt-get install chromium): "
        "the web UI's browser tests drive it",
    ),
]

KEY = "webui-key"
SHOTS = Path(__file__).resolve().parents[2] / "runs" / "webui"
HOPPER = b"# Grace Hopper\n\nGrace Hopper was born in New York City. She wrote a compiler.\n"
LAMARR = b"# Hedy Lamarr\n\nHedy Lamarr was born in Vienna. She co-invented frequency hopping.\n"
TIMEOUT_MS = 60_000


@pytest.fixture(scope="session")
def browser_context_args():
    return {"viewport": {"width": 1280, "height": 800}}


@pytest.fixture(scope="module")
def server(built_index, tmp_path_factory):
    """``quillian serve`` on a fresh copy of the test index; yields its URL."""
    here = tmp_path_factory.mktemp("webui")
    index = here / "idx"
    shutil.copytree(built_index, index)
    notes = build_index(here / "notes", {"Grace Hopper": "Grace Hopper wrote a compiler."})
    routes = here / "routes.json"
    routes.write_text(json.dumps(ROUTES))
    args = [f"wiki={index}", f"notes={notes}", "--llm", f"scripted:{routes}", "--no-access-log"]
    with serve_process(args, here / "serve.log", {"QUILLIAN_API_KEY": KEY}) as url:
        yield url


@pytest.fixture
def ui(page, server):
    """The page opened, the API key entered, the workspace loaded."""
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server)
    page.fill("#api-key", KEY)
    page.press("#api-key", "Enter")
    contains(page, "#workspace-info", "entities")
    yield page
    assert errors == [], errors


def contains(page, selector: str, text: str) -> None:
    """Wait until the element's text contains ``text``."""
    expect(page.locator(selector)).to_contain_text(text, timeout=TIMEOUT_MS)


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def overflow(page) -> int:
    """How far the page scrolls sideways (0: it does not)."""
    return int(
        page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    )


#: Each visible text's contrast ratio against the first opaque background behind it
#: (WCAG 2's relative luminance); disabled controls are exempt, as WCAG allows.
LOW_CONTRAST = """(least) => {
    const channel = (v) => (v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    const luminance = ([r, g, b]) =>
        0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
    const rgba = (css) => css.match(/[\\d.]+/g).map(Number);
    const behind = (e) => {
        for (; e; e = e.parentElement) {
            const c = rgba(getComputedStyle(e).backgroundColor);
            if (c.length < 4 || c[3] > 0) return c.slice(0, 3);
        }
        return [255, 255, 255];
    };
    const low = [];
    const texts = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (texts.nextNode()) {
        const e = texts.currentNode.parentElement;
        const text = texts.currentNode.textContent.trim();
        if (!text || !e.getClientRects().length || e.closest(':disabled, [hidden]')) continue;
        const [a, b] = [luminance(rgba(getComputedStyle(e).color)), luminance(behind(e))];
        const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        if (ratio < least) low.push(`${text.slice(0, 30)}: ${ratio.toFixed(2)}`);
    }
    return low;
}"""


def graph_nodes(page, selector: str) -> list[dict]:
    return page.evaluate(
        f"document.querySelector('{selector}').graphView.cy.nodes().map(n => n.data())"
    )


def painted(page, selector: str) -> int:
    """Pixels the graph's canvases have drawn on (Cytoscape paints on 2D canvases)."""
    return int(
        page.evaluate(
            """(selector) => {
                let count = 0;
                for (const canvas of document.querySelectorAll(selector + ' canvas')) {
                    if (!canvas.width || !canvas.height) continue;
                    const pixels = canvas.getContext('2d')
                        .getImageData(0, 0, canvas.width, canvas.height).data;
                    for (let i = 3; i < pixels.length; i += 4) if (pixels[i]) count++;
                }
                return count;
            }""",
            selector,
        )
    )


def test_page_is_served_without_the_key_but_the_api_is_not(server):
    page = httpx.get(server)
    assert page.status_code == 200 and "<title>Quillian</title>" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    script = httpx.get(f"{server}/ui/js/main.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    library = httpx.get(f"{server}/ui/vendor/cytoscape.esm.min.mjs")
    assert library.status_code == 200 and "javascript" in library.headers["content-type"]
    assert httpx.get(f"{server}/api/workspaces").status_code == 401
    assert httpx.get(f"{server}/ui/../api/workspaces").status_code in (401, 404)


def test_without_the_key_the_page_asks_for_it(page, server):
    page.goto(server)
    notice = page.locator("#notice")
    notice.wait_for(state="visible")
    assert "API key" in notice.text_content()
    assert page.evaluate("document.activeElement.id") == "api-key"


def test_ask_streams_the_answer_with_citations_and_the_activated_graph(ui):
    page = ui
    assert KEY not in page.url
    assert page.evaluate("sessionStorage.getItem('quillian.api-key')") == KEY
    assert page.locator("#method").input_value() == "sa-rag"
    assert page.locator("#options input[data-option='k']").count() == 1
    page.fill("#question", QUESTION)
    page.press("#question", "Control+Enter")  # asks from the keyboard
    expect(page.locator("#ask-status")).to_have_text("Done.", timeout=TIMEOUT_MS)

    assert page.locator("#answer").text_content() == "London"
    # the model's reply arrived as token events, as it was written
    assert '"final_answer": "London"' in page.locator("#writing").text_content()
    links = page.locator("#sources a.cite")
    assert links.count() >= 1
    first = links.first
    assert first.text_content() == "[1]" and first.get_attribute("href") == "#cite-1"
    cited = page.locator("#cite-1").text_content()
    assert "Ada Lovelace" in cited and "Charles Babbage" in cited
    assert page.locator("#usage").text_content().endswith(" s")
    kinds = page.locator("#steps > li summary strong").all_text_contents()
    assert kinds[0] == "retrieval" and "answer-reasoning" in kinds

    nodes = graph_nodes(page, "#ask-graph")
    seeds = [n for n in nodes if n.get("seed")]
    assert [n["label"] for n in seeds] == ["Ada Lovelace"] and seeds[0]["kind"] == "entity"
    passages = {n["chunk_id"]: n for n in nodes if n["kind"] == "passage"}
    answer_passage = page.evaluate(
        "document.querySelector('#ask-graph').graphView.cy.nodes('[?cited]').map(n => n.id())"
    )
    assert answer_passage and all(p.removeprefix("p:") in passages for p in answer_passage)
    assert any(n["kind"] == "description" for n in nodes)  # from POST .../graph/links
    assert painted(page, "#ask-graph") > 1000
    shot(page, "ask")

    # a citation opens its passage in the graph's details panel
    first.click()
    details = page.locator("#ask-graph .graph-details")
    details.locator(".passage-text").wait_for()
    assert "Ada Lovelace worked with Charles Babbage" in details.text_content()
    # the node list is the keyboard's way in: Enter on the seed opens its neighbourhood
    page.locator("#ask-graph details.nodes summary").press("Enter")
    seed_button = page.locator("#ask-graph .node-list button", has_text="(entity, seed")
    seed_button.focus()
    page.keyboard.press("Enter")
    details.get_by_role("heading", name="Descriptions").wait_for()
    assert "Charles Babbage" in details.text_content()
    shot(page, "ask-node")


def test_documents_upload_see_processed_and_delete(ui):
    page = ui
    page.locator("#tab-ask").focus()
    page.keyboard.press("ArrowRight")  # the tabs follow the arrow keys
    assert page.locator("#documents").is_visible()
    assert page.evaluate("document.activeElement.id") == "tab-documents"
    contains(page, "#doc-count", "of 4")

    # one file dropped, one chosen with the picker, one that cannot be read
    page.evaluate(
        """(text) => {
            const data = new DataTransfer();
            data.items.add(new File([text], 'hopper.md', {type: 'text/markdown'}));
            const drop = document.querySelector('#drop');
            drop.dispatchEvent(new DragEvent('drop', {dataTransfer: data, bubbles: true}));
        }""",
        HOPPER.decode(),
    )
    page.set_input_files(
        "#files",
        [
            {"name": "lamarr.md", "mimeType": "text/markdown", "buffer": LAMARR},
            {"name": "scan.pdf", "mimeType": "application/pdf", "buffer": b"%PDF-1.4 \x00\x01"},
        ],
    )
    page.locator("#jobs .job[data-state='succeeded']").wait_for()
    partial = page.locator("#jobs .job[data-state='partial']")  # the pdf was refused
    partial.wait_for()
    assert "1 refused" in partial.text_content()
    failure = partial.locator(".failures li", has_text="scan.pdf")
    assert failure.count() == 1 and ".pdf" in failure.text_content()
    hopper = page.locator("#doc-list .card", has_text="Grace Hopper")
    lamarr = page.locator("#doc-list .card", has_text="Hedy Lamarr")
    contains(page, "#doc-count", "of 6")
    assert hopper.get_attribute("data-status") == "processed"
    assert lamarr.get_attribute("data-status") == "processed"
    shot(page, "documents")

    # deleting asks first; cancel keeps the document
    hopper.get_by_role("button", name="Delete Grace Hopper").click()
    dialog = page.locator("#confirm")
    assert dialog.is_visible() and "Grace Hopper" in dialog.text_content()
    page.keyboard.press("Escape")
    assert not dialog.is_visible() and hopper.count() == 1
    hopper.get_by_role("button", name="Delete Grace Hopper").click()
    dialog.get_by_role("button", name="Delete").click()
    page.locator("#jobs .job", has_text="Deleting Grace Hopper").and_(
        page.locator("[data-state='succeeded']")
    ).wait_for()
    contains(page, "#doc-count", "of 5")
    assert hopper.count() == 0 and lamarr.count() == 1


def test_explore_finds_an_entity_and_walks_the_graph(ui):
    page = ui
    page.click("#tab-explore")
    page.fill("#entity-query", "babbage")
    page.press("#entity-query", "Enter")
    result = page.locator("#search-results button", has_text="Charles Babbage")
    result.click()
    details = page.locator("#explore-graph .graph-details")
    details.get_by_role("heading", name="Relations", exact=False).wait_for()
    drawn = graph_nodes(page, "#explore-graph")
    labels = {n["label"] for n in drawn}
    assert "Charles Babbage" in labels and len(labels) > 2
    # entities are drawn under their content-derived ids, which outlive uploads
    entities = [n for n in drawn if n["kind"] == "entity"]
    assert all(re.fullmatch(r"e:ent-[0-9a-f]{16}", n["id"]) for n in entities)
    assert all(n["id"] == f"e:{n['entity']}" for n in entities)
    walk = details.get_by_role("button", name="Walk to", exact=False).first
    target = walk.text_content().removeprefix("Walk to ")
    walk.click()
    page.locator("#trail li", has_text=target).wait_for()
    assert page.locator("#trail li").count() == 2
    page.locator("#explore-graph .graph-details h3", has_text=target).wait_for()
    assert painted(page, "#explore-graph") > 1000
    # hovering a relation shows the sentence it was read from
    page.wait_for_function(
        "() => !document.querySelector('#explore-graph').graphView.cy.animated()"
    )
    relations = "(cy) => cy.$(':selected').connectedEdges('[kind = \"relation\"]')"
    assert hover_shows_sentence(page, "#explore-graph", relations)
    shot(page, "explore")


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_no_horizontal_overflow(ui, width, height):
    page = ui
    page.set_viewport_size({"width": width, "height": height})
    page.fill("#question", QUESTION)
    page.click("#ask-button")
    expect(page.locator("#ask-status")).to_have_text("Done.", timeout=TIMEOUT_MS)
    for tab in ("ask", "documents", "explore"):
        page.click(f"#tab-{tab}")
        page.locator(f"#{tab}").wait_for()
        shown = [p for p in ("ask", "documents", "explore") if page.locator(f"#{p}").is_visible()]
        assert shown == [tab]  # one screen at a time
        assert page.evaluate(LOW_CONTRAST, 4.5) == [], tab  # WCAG AA for all text
        assert overflow(page) <= 0, (tab, width)
        shot(page, f"{tab}-{width}x{height}")


def test_keyboard_reaches_every_control_with_a_visible_focus(ui):
    page = ui
    page.reload()  # the key outlives a reload (session storage), and focus starts afresh
    contains(page, "#workspace-info", "entities")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    seen = []
    for _ in range(60):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            """() => {
                const e = document.activeElement;
                if (e === document.body) return null;
                return [e.id || e.textContent.trim().slice(0, 40),
                        getComputedStyle(e).outlineStyle];
            }"""
        )
        if focused is None:  # past the last control
            break
        seen.append(focused[0])
        assert focused[1] != "none", focused  # the focus is visible
    for control in ("workspace", "api-key", "tab-ask", "question", "method", "ask-button"):
        assert control in seen, (control, seen)
    assert "tab-documents" not in seen  # one tab stop for the tab list; arrows move in it


@pytest.mark.parametrize("n", [300, 600])
def test_a_graph_of_hundreds_of_nodes_is_laid_out(ui, n):
    """A synthetic subgraph (a tree with chords) drawn through the same view the Ask
    screen uses: force-directed up to 300 nodes, rings by activation above; the time
    it takes is written to runs/webui/layout-N.json."""
    page = ui
    took = page.evaluate(
        """(n) => {
            const nodes = [], edges = [];
            for (let i = 0; i < n; i++) {
                nodes.push({id: `e:${i}`, label: `entity ${i}`, kind: 'entity',
                            entity: i, activation: 1 / (1 + i)});
                if (i) edges.push({id: `r:${i}`, source: `e:${Math.floor((i - 1) / 3)}`,
                                   target: `e:${i}`, label: 'related_to', kind: 'relation'});
                if (i > 10 && i % 7 === 0) edges.push({id: `c:${i}`, source: `e:${i}`,
                    target: `e:${i - 10}`, label: 'related_to', kind: 'relation'});
            }
            const view = document.querySelector('#ask-graph').graphView;
            const start = performance.now();
            view.show(nodes, edges);
            return performance.now() - start;
        }""",
        n,
    )
    box = page.evaluate(
        "() => { const b = document.querySelector('#ask-graph').graphView.cy.nodes()"
        ".boundingBox(); return [b.w, b.h]; }"
    )
    assert len(graph_nodes(page, "#ask-graph")) == n
    assert box[0] > 0 and box[1] > 0 and painted(page, "#ask-graph") > 1000
    assert page.locator("#ask-graph .node-list button").count() == n
    SHOTS.mkdir(parents=True, exist_ok=True)
    (SHOTS / f"layout-{n}.json").write_text(json.dumps({"nodes": n, "layout_ms": round(took)}))
    shot(page, f"graph-{n}-nodes")
    assert took < 30_000, f"{n} nodes took {took:.0f} ms to lay out"


def test_the_workspace_picker_switches_and_is_remembered(ui):
    page = ui
    assert page.locator("#workspace option").all_text_contents() == ["wiki", "notes"]
    page.select_option("#workspace", "notes")
    contains(page, "#workspace-info", "1 documents")
    page.click("#tab-documents")
    contains(page, "#doc-count", "of 1")
    assert page.locator("#doc-list .card", has_text="Grace Hopper").count() == 1
    page.reload()
    contains(page, "#workspace-info", "1 documents")
    assert page.locator("#workspace").input_value() == "notes"


def test_without_a_model_ask_retrieves_and_draws_the_subgraph(page, built_index):
    settings = ServerSettings(workspaces=(WorkspaceSpec("main", built_index),))
    with running(settings) as client:
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(str(client.base_url))
        expect(page.locator("#ask-button")).to_have_text("Retrieve")
        assert "no model" in page.locator("#notice").text_content()
        page.fill("#question", "Where was Charles Babbage born?")
        page.click("#ask-button")
        contains(page, "#ask-status", "Retrieved in")
        assert "Charles Babbage was born in London" in page.locator("#evidence").text_content()
        seeds = [n["label"] for n in graph_nodes(page, "#ask-graph") if n.get("seed")]
        assert "Charles Babbage" in seeds


def test_a_read_key_sees_its_workspace_only_and_why_it_cannot_upload(page, built_index, tmp_path):
    keys_file = tmp_path / "keys.toml"
    read, read_key = add_key(keys_file, "wiki", Role.READ)
    wiki = tmp_path / "wiki"
    shutil.copytree(built_index, wiki)
    notes = build_index(tmp_path / "notes", {"Grace Hopper": "Grace Hopper wrote a compiler."})
    spaces = (WorkspaceSpec("wiki", wiki), WorkspaceSpec("notes", notes))
    settings = ServerSettings(workspaces=spaces, keys_file=keys_file, api_key=KEY)
    lamarr = [{"name": "lamarr.md", "mimeType": "text/markdown", "buffer": LAMARR}]
    with running(settings) as client:
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(str(client.base_url))
        page.fill("#api-key", read_key)
        page.press("#api-key", "Enter")
        contains(page, "#workspace-info", "entities")
        assert page.locator("#workspace option").all_text_contents() == ["wiki"]
        page.click("#tab-documents")
        contains(page, "#doc-count", "of 4")
        page.set_input_files("#files", lamarr)
        why = f"API key {read.id} may only read workspace 'wiki'; this needs a write key"
        contains(page, "#notice", why)
        contains(page, "#jobs", "Upload of lamarr.md refused")
        shot(page, "read-key-upload")
        assert client.get("/api/workspaces/wiki/documents").json()["total"] == 4

        page.fill("#api-key", KEY)  # the admin key: every workspace, uploads accepted
        page.press("#api-key", "Enter")
        expect(page.locator("#workspace option")).to_have_count(2, timeout=TIMEOUT_MS)
        page.set_input_files("#files", lamarr)
        page.locator("#jobs .job[data-state='succeeded']").wait_for()
        contains(page, "#doc-count", "of 5")
