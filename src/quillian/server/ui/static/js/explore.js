// The Explore screen: find entities by name, open one's neighbourhood, walk from node to
// node (each walk adds the new neighbourhood to the drawing and to the trail).

import { call, workspacePath } from "./api.js";
import { $, clear, el } from "./dom.js";
import { entityDetails, entityId, neighbourhood, neighbourhoodElements, textDetails } from "./entity.js";
import { GraphView } from "./graph.js";

export class ExploreScreen {
  constructor(app) {
    this.app = app;
    this.graph = new GraphView($("#explore-graph"), {
      label: "The explored part of the knowledge graph",
      describe: (node) => this.describe(node),
    });
    $("#search-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.search($("#entity-query").value.trim());
    });
  }

  reset() {
    clear($("#search-results"));
    clear($("#trail"));
    $("#search-count").textContent = "";
    this.graph.show([], []);
  }

  async search(query) {
    if (!query) return;
    try {
      const page = await call(workspacePath(this.app.workspace, `/entities?q=${encodeURIComponent(query)}&limit=30`));
      $("#search-count").textContent = `${page.total} entit${page.total === 1 ? "y" : "ies"} match “${query}”` +
        (page.total > page.entities.length ? ` (the first ${page.entities.length} shown)` : "");
      clear($("#search-results")).append(
        ...page.entities.map((hit) =>
          el("li", {}, el("button", { type: "button", onclick: () => this.walk(hit.id, hit.name, true) },
            hit.name), " ", el("span", { class: "muted" }, `${hit.type || "entity"} · ${hit.degree} relations`))),
      );
    } catch (error) {
      this.app.failed(error, $("#search-count"));
    }
  }

  /** Open an entity: draw its neighbourhood (fresh, or added to what is drawn). */
  async walk(entity, name, fresh = false) {
    this.app.select("explore");
    try {
      const near = await neighbourhood(this.app.workspace, entity);
      const { nodes, edges } = neighbourhoodElements(near);
      const key = entityId(near.entity.id); // the id it has now (an alias's id finds it too)
      if (fresh) {
        clear($("#trail"));
        this.graph.show(nodes, edges);
      } else {
        this.graph.merge(nodes, edges, key);
      }
      $("#trail").append(el("li", {}, el("button", { type: "button", onclick: () => this.graph.open(key) }, name)));
      await this.graph.open(key, { all: fresh });
    } catch (error) {
      this.app.failed(error);
    }
  }

  async describe(node) {
    if (node.kind !== "entity") return textDetails(node);
    const here = el("button", { type: "button", onclick: () => this.walk(node.entity, node.label) },
      "Show its neighbourhood");
    return entityDetails(this.app.workspace, node.entity, {
      onWalk: (id, name) => this.walk(id, name),
      actions: [here],
    });
  }
}
