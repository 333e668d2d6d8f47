// An interactive graph view: Cytoscape.js on a canvas, with zoom buttons, a tooltip
// carrying each relation's source sentence, a details panel for the selected node and a
// list of the nodes as buttons (the keyboard's way into the drawing).
//
// Nodes: {id, label, kind: "entity" | "passage" | "description", activation (0..1),
// seed, cited, ...}; edges: {id, source, target, label, sentence, kind}.

import cytoscape from "../vendor/cytoscape.esm.min.mjs";
import { clear, el, number, short } from "./dom.js";

const STYLE = [
  {
    selector: "node",
    style: {
      label: "data(label)",
      "font-size": 11,
      color: "#1b1f24",
      "text-valign": "bottom",
      "text-margin-y": 3,
      "text-wrap": "ellipsis",
      "text-max-width": 140,
      "min-zoomed-font-size": 7,
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
      "font-size": 9,
      color: "#334155",
      "text-rotation": "autorotate",
      "min-zoomed-font-size": 9,
      "text-background-color": "#ffffff",
      "text-background-opacity": 0.8,
    },
  },
  {
    selector: 'edge[kind != "relation"]',
    style: { "line-style": "dashed", "target-arrow-shape": "none", label: "" },
  },
  { selector: ":selected", style: { "overlay-color": "#0f172a", "overlay-opacity": 0.18 } },
];

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
      el("button", { type: "button", onclick: () => this.cy.fit(undefined, 24) }, "Fit"),
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
    this.cy.on("mouseout", "node, edge", () => (this.tip.hidden = true));
    root.graphView = this; // for the browser tests and the console
  }

  /** Replace the drawing. */
  show(nodes, edges) {
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
    this.relist();
  }

  /** Force-directed up to FORCE_LIMIT nodes, rings by activation above. */
  layout(randomize = true) {
    const n = this.cy.nodes().length;
    if (!n) return;
    const options =
      n <= FORCE_LIMIT
        ? { name: "cose", animate: false, nodeRepulsion: () => 8000, idealEdgeLength: () => 50, gravity: 2,
            nodeDimensionsIncludeLabels: true, componentSpacing: 60, padding: 24, randomize }
        : { name: "concentric", concentric: (node) => node.data("activation") ?? 0,
            levelWidth: () => 0.1, padding: 24, minNodeSpacing: 6 };
    this.cy.layout(options).run();
    this.cy.fit(undefined, 24);
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

  /** Select a node, centre it and show its details. */
  async open(id) {
    const node = this.cy.getElementById(id);
    if (node.empty()) return;
    this.cy.elements().unselect();
    node.select();
    // frame the node with its neighbours, at a zoom where their labels are legible
    const around = node.closedNeighborhood();
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
    this.tip.style.left = `${Math.max(0, at.x + 12)}px`;
    this.tip.style.top = `${Math.max(0, at.y + 12)}px`;
    this.tip.hidden = false;
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
    item("description", "description"),
  );
}
