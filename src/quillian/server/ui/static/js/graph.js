// An interactive graph view: Cytoscape.js on a canvas, with zoom buttons, a tooltip
// carrying each relation's source sentence, a details panel for the selected node and a
// list of the nodes as buttons (the keyboard's way into the drawing).
//
// Nodes: {id, label, kind: "entity" | "passage" | "description", activation (0..1),
// seed, cited, ...}; edges: {id, source, target, label, sentence, kind}.
//
// Labels do not overlap: after each layout, labels are kept greedily by importance (the
// path to the answer, always kept, then the other highlighted paths, seeds, cited
// passages, activation) and a label that would overlap a kept one is hidden (its text
// stays in the tooltip and the node list).

import cytoscape from "../vendor/cytoscape.esm.min.mjs";
import { clear, el, number, short } from "./dom.js";

const STYLE = [
  {
    selector: "node",
    style: {
      label: "data(label)",
      "font-size": 13,
      color: "#1b1f24",
      "text-valign": "bottom",
      "text-margin-y": 3,
      "text-wrap": "ellipsis",
      "text-max-width": 150,
      "min-zoomed-font-size": 6,
      "text-background-color": "#ffffff",
      "text-background-opacity": 0.75,
      width: "data(size)",
      height: "data(size)",
      "border-width": 1,
      "border-color": "#334155",
    },
  },
  {
    selector: 'node[kind = "entity"]',
    style: { "background-color": "mapData(activation, 0, 1, #bfdbfe, #1e3a8a)" },
  },
  { selector: "node[?seed]", style: { "border-width": 4, "border-color": "#b45309" } },
  {
    selector: 'node[kind = "passage"]',
    style: { shape: "round-rectangle", "background-color": "#fcd34d", "text-wrap": "wrap", "text-max-width": 110 },
  },
  { selector: "node[?cited]", style: { "border-width": 4, "border-color": "#7c2d12" } },
  {
    selector: 'node[kind = "description"]',
    style: { shape: "diamond", "background-color": "#86efac", "font-size": 9 },
  },
  {
    selector: "edge",
    style: {
      width: 1.5,
      "line-color": "#64748b",
      "target-arrow-color": "#64748b",
      "target-arrow-shape": "triangle",
      "curve-style": "bezier",
      label: "data(label)",
      "font-size": 11,
      color: "#334155",
      "text-rotation": "none",
      "text-margin-y": -7, // above the line: node labels hang below their nodes
      "min-zoomed-font-size": 6,
      "text-background-color": "#ffffff",
      "text-background-opacity": 0.85,
      "text-background-padding": 1,
    },
  },
  {
    selector: 'edge[kind != "relation"]',
    style: { "line-style": "dashed", "target-arrow-shape": "none", label: "" },
  },
  // the reasoning: the path from the seeds to the cited passages, the rest dimmed
  { selector: ".dim", style: { opacity: 0.28 } },
  { selector: "node.onpath", style: { "border-width": 4, "border-color": "#c2410c", "font-weight": "bold", "z-index": 10 } },
  {
    selector: "edge.onpath",
    style: { width: 4, "line-color": "#c2410c", "target-arrow-color": "#c2410c", "line-style": "solid",
      color: "#7c2d12", "font-size": 12, "font-weight": "bold", "z-index": 10 },
  },
  { selector: 'edge.onpath[kind = "reaches"]', style: { "line-style": "dashed", "target-arrow-shape": "triangle" } },
  { selector: "node.answer", style: { "border-color": "#7c2d12", "border-width": 5 } },
  { selector: "edge.answer", style: { width: 6, "line-color": "#9a3412", "target-arrow-color": "#9a3412" } },
  { selector: ".nolabel", style: { label: "" } },
  { selector: ":selected", style: { "overlay-color": "#0f172a", "overlay-opacity": 0.18 } },
];

/** How much a label matters: the one kept where two would overlap. */
function rank(ele) {
  const d = ele.data();
  return (ele.hasClass("answer") ? 16 : 0) + (ele.hasClass("onpath") ? 8 : 0) + (ele.hasClass("dim") ? -8 : 0) + (d.seed ? 4 : 0) +
    (d.cited ? 2 : 0) + (ele.isNode() ? 1 + (d.activation ?? 0) : 0);
}

/** A label's box alone (what two labels overlapping means). */
const LABEL_BOX = { includeNodes: false, includeEdges: false, includeLabels: true, includeOverlays: false };
/** Where an edge's label is tried, in turn, when its place above the line's middle is
 * taken: below it, further above or below, then to either side (px at zoom 1). */
const LABEL_PLACES = [[0, 12], [0, -22], [0, 26], [48, -7], [-48, -7], [0, -36], [0, 40]];
/** The same for a node's label, which hangs below the node: above it, then aside. */
const NODE_LABEL_PLACES = [[0, -50], [0, 14], [64, -24], [-64, -24], [0, -66], [0, 30]];

/** Move the label of `ele` (on the answer's path) to the first place where it `clashes`
 * with no kept label; its new box, or null (left where it was) when every place clashes. */
function moveLabel(ele, clashes) {
  for (const [x, y] of ele.isEdge() ? LABEL_PLACES : NODE_LABEL_PLACES) {
    ele.style({ "text-margin-x": x, "text-margin-y": y });
    const box = ele.boundingBox(LABEL_BOX);
    if (!clashes(box)) return box;
  }
  ele.removeStyle("text-margin-x text-margin-y");
  return null;
}

function overlap(a, b) {
  return a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2;
}

/** Above this many nodes the force-directed layout gives way to rings by activation. */
const FORCE_LIMIT = 300;

function size(node) {
  if (node.kind === "passage") return 26;
  if (node.kind === "description") return 14;
  return 18 + 34 * Math.max(0, Math.min(1, node.activation ?? 0));
}

export class GraphView {
  /**
   * @param root an empty element the view fills
   * @param describe async (node data) => DOM content for the details panel
   */
  constructor(root, { label, describe }) {
    this.describe = describe;
    this.root = root;
    const tools = el(
      "div",
      { class: "row graph-tools" },
      el("button", { type: "button", onclick: () => this.zoom(1.25) }, "Zoom in"),
      el("button", { type: "button", onclick: () => this.zoom(0.8) }, "Zoom out"),
      el("button", { type: "button", onclick: () => this.cy.fit(undefined, 24) }, "Fit all"),
      el("button", { type: "button", onclick: () => this.layout(true) }, "Lay out again"),
      legend(),
    );
    this.canvas = el("div", { class: "graph-canvas", role: "img", "aria-label": label });
    this.tip = el("div", { class: "graph-tip", role: "tooltip", hidden: true });
    this.count = el("summary", {}, "Nodes (0)");
    this.list = el("ul", { class: "node-list" });
    this.details = el("aside", { class: "graph-details", "aria-live": "polite" });
    const stage = el("div", { class: "graph-stage" }, this.canvas, this.tip);
    root.append(tools, stage, el("details", { class: "nodes" }, this.count, this.list), this.details);
    this.cy = cytoscape({
      container: this.canvas,
      style: STYLE,
      minZoom: 0.05,
      maxZoom: 2.5,
    });
    this.cy.on("tap", "node", (event) => this.open(event.target.id()));
    this.cy.on("mouseover", "node, edge", (event) => this.hover(event));
    this.cy.on("mouseout viewport", () => (this.tip.hidden = true));
    // a canvas shown after it was hidden (another tab) or resized: draw it to its size
    new ResizeObserver(() => this.refit()).observe(this.canvas);
    root.graphView = this; // for the browser tests and the console
  }

  /** Resize the drawing to its new canvas and frame again what was framed: the
   * selected node with its neighbours, else the highlighted path, else everything. */
  refit() {
    if (!this.canvas.clientWidth || !this.canvas.clientHeight) return;
    this.cy.resize();
    const [w, h] = this.laidFor ?? [0, 0];
    const changed = Math.abs(this.canvas.clientWidth - w) > 0.25 * w || Math.abs(this.canvas.clientHeight - h) > 0.25 * h;
    if (changed && this.cy.nodes().length) this.layout(false); // into the new canvas's shape
    const selected = this.cy.$("node:selected");
    if (selected.nonempty()) this.cy.fit(this.framedAll ? undefined : selected.closedNeighborhood(), 40);
    else this.frame();
  }

  /** Fit the highlighted path (or everything) to the canvas, zoomed in no further
   * than a readable size. */
  frame() {
    const answer = this.cy.elements(".answer");
    const path = answer.nonempty() ? answer : this.cy.elements(".onpath");
    this.cy.fit(path.nonempty() ? path : undefined, 32);
    const centre = { x: this.canvas.clientWidth / 2, y: this.canvas.clientHeight / 2 };
    if (this.cy.zoom() > 1.6) this.cy.zoom({ level: 1.6, renderedPosition: centre });
  }

  /** Highlight the elements with these ids (paths), dim the others (none: all plain);
   * those in `strongest` (the path to the answer) most, and framed first. */
  highlight(ids, strongest = new Set()) {
    this.highlighted = { ids, strongest };
    this.cy.batch(() => {
      this.cy.elements().removeClass("onpath answer dim");
      if (!ids.size) return;
      for (const ele of this.cy.elements()) {
        ele.addClass(ids.has(ele.id()) ? "onpath" : "dim");
        if (strongest.has(ele.id())) ele.addClass("answer");
      }
    });
    this.declutter();
    this.frame();
  }

  /** Hide the labels that would overlap a more important one (see the module). The
   * answer's path keeps every label: one of its labels that would overlap a label kept
   * before it is moved (off the line's middle, above or beside its node) until it clears. */
  declutter() {
    const labelled = this.cy.elements().filter((ele) => ele.data("label"));
    labelled.removeClass("nolabel");
    labelled.removeStyle("text-margin-x text-margin-y");
    const kept = [];
    const hidden = [];
    const clashes = (box) => kept.some((other) => overlap(box, other));
    const boxes = new Map();
    for (const ele of labelled) boxes.set(ele.id(), ele.boundingBox(LABEL_BOX));
    const order = labelled.sort((a, b) => rank(b) - rank(a));
    for (const ele of order) {
      let box = boxes.get(ele.id());
      if (!box.w || !box.h) continue;
      if (ele.hasClass("answer")) {
        if (clashes(box)) box = moveLabel(ele, clashes) ?? box;
        kept.push(box);
      } else if (ele.hasClass("dim") || clashes(box)) hidden.push(ele);
      else kept.push(box);
    }
    this.cy.batch(() => hidden.forEach((ele) => ele.addClass("nolabel")));
  }

  /** Replace the drawing. */
  show(nodes, edges) {
    this.highlighted = null;
    this.cy.elements().remove();
    clear(this.details);
    this.merge(nodes, edges);
  }

  /** Add nodes and edges not drawn yet and lay the graph out again; new nodes start
   * around the node `near` (the one being expanded) and the others keep their places,
   * so a walk through the graph does not reshuffle what is already drawn. */
  merge(nodes, edges, near = null) {
    const drawn = this.cy.nodes().length > 0;
    const anchor = near && this.cy.getElementById(near).nonempty()
      ? this.cy.getElementById(near).position()
      : null;
    const fresh = [];
    for (const node of nodes) {
      const existing = this.cy.getElementById(node.id);
      if (existing.nonempty()) {
        existing.data({ ...node, size: size(node) });
        continue;
      }
      const position = anchor
        ? { x: anchor.x + 60 * (Math.random() - 0.5), y: anchor.y + 60 * (Math.random() - 0.5) }
        : undefined;
      fresh.push({ group: "nodes", data: { ...node, size: size(node) }, position });
    }
    this.cy.add(fresh);
    const known = (id) => this.cy.getElementById(id).nonempty();
    const links = edges.filter((e) => !known(e.id) && known(e.source) && known(e.target));
    this.cy.add(links.map((edge) => ({ group: "edges", data: edge })));
    if (fresh.length || links.length) this.layout(!(drawn && anchor));
    if (this.highlighted && (fresh.length || links.length)) {
      this.highlight(this.highlighted.ids, this.highlighted.strongest);
    }
    this.relist();
  }

  /** Force-directed up to FORCE_LIMIT nodes, rings by activation above. */
  layout(randomize = true) {
    const n = this.cy.nodes().length;
    if (!n) return;
    const options =
      n <= FORCE_LIMIT
        ? { name: "cose", animate: false, boundingBox: this.room(n), nodeRepulsion: () => 12000,
            idealEdgeLength: (edge) => (edge.data("onpath") ? 50 : 75), gravity: 1.5,
            nodeDimensionsIncludeLabels: true, componentSpacing: 60, padding: 24, randomize }
        : { name: "concentric", concentric: (node) => node.data("activation") ?? 0,
            levelWidth: () => 0.1, padding: 24, minNodeSpacing: 6 };
    this.cy.resize();
    this.laidFor = [this.canvas.clientWidth, this.canvas.clientHeight];
    this.cy.layout(options).run();
    this.declutter();
    this.frame();
  }

  /** Where a layout of `n` nodes goes: the canvas's shape, grown so that each node has
   * about 80 px square at zoom 1 (room for its label; more would make a framed path
   * too small to read on a phone). */
  room(n) {
    const [w, h] = [this.canvas.clientWidth || 600, this.canvas.clientHeight || 400];
    const grow = Math.max(1, (80 * Math.sqrt(n)) / Math.min(w, h));
    return { x1: 0, y1: 0, w: w * grow, h: h * grow };
  }

  zoom(factor) {
    const center = { x: this.canvas.clientWidth / 2, y: this.canvas.clientHeight / 2 };
    this.cy.zoom({ level: this.cy.zoom() * factor, renderedPosition: center });
  }

  relist() {
    const nodes = this.cy.nodes().sort((a, b) => (b.data("activation") ?? 0) - (a.data("activation") ?? 0));
    this.count.textContent = `Nodes (${nodes.length}), for the keyboard`;
    clear(this.list).append(
      ...nodes.map((node) => {
        const d = node.data();
        const extra = d.kind === "entity" ? `, activation ${number(d.activation ?? 0, 2)}` : "";
        return el(
          "li",
          {},
          el(
            "button",
            { type: "button", "data-node": d.id, "data-kind": d.kind, onclick: () => this.open(d.id) },
            `${d.label} (${d.kind}${d.seed ? ", seed" : ""}${d.cited ? ", cited" : ""}${extra})`,
          ),
        );
      }),
    );
  }

  /** Select a node, centre it and show its details; `all`: frame the whole drawing
   * (a neighbourhood just drawn) rather than the node and its neighbours. */
  async open(id, { all = false } = {}) {
    const node = this.cy.getElementById(id);
    if (node.empty()) return;
    this.cy.elements().unselect();
    node.select();
    this.framedAll = all;
    // frame the node with its neighbours, at a zoom where their labels are legible
    const around = all ? this.cy.elements() : node.closedNeighborhood();
    this.cy.animate({ fit: { eles: around, padding: 40 }, duration: 200 });
    const heading = el("h3", {}, node.data("label"));
    clear(this.details).append(heading, el("p", { class: "muted" }, "Loading…"));
    try {
      const content = await this.describe(node.data(), this);
      clear(this.details).append(heading, content);
    } catch (error) {
      clear(this.details).append(heading, el("p", { class: "error" }, error.message));
    }
  }

  hover(event) {
    const d = event.target.data();
    const text = event.target.isEdge()
      ? `${d.label ? `${d.label}: ` : ""}${d.sentence || "(no source sentence)"}`
      : d.text || d.label;
    const at = event.renderedPosition ||
      (event.target.isEdge() ? event.target.renderedMidpoint() : event.target.renderedPosition());
    this.tip.textContent = short(text, 300);
    this.tip.hidden = false;
    // kept inside the canvas: flipped to the left of the pointer near the right edge
    const room = this.canvas.clientWidth - this.tip.offsetWidth - 4;
    const left = at.x + 12 <= room ? at.x + 12 : at.x - 12 - this.tip.offsetWidth;
    this.tip.style.left = `${Math.max(0, Math.min(left, room))}px`;
    this.tip.style.top = `${Math.max(0, at.y + 12)}px`;
  }
}

function legend() {
  const item = (kind, text) => el("li", {}, el("span", { class: `swatch ${kind}`, "aria-hidden": true }), text);
  return el(
    "ul",
    { class: "legend", "aria-label": "Legend" },
    item("entity", "entity (darker: more activated)"),
    item("seed", "seed"),
    item("passage", "passage"),
    item("cited", "cited passage"),
    item("path", "path to a cited passage"),
    item("description", "description"),
  );
}
