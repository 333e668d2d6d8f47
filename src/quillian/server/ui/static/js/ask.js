// The Ask screen: question, method and options, the answer streamed in, citations,
// the method's steps as a timeline, and each retrieval's activated subgraph drawn as
// soon as its `retrieval` event arrives, with the paths from the question's seeds to
// the cited passages highlighted and listed ("how it was reached").

import { ApiError, call, stream, workspacePath } from "./api.js";
import { $, clear, el, notify, number, plain, short } from "./dom.js";
import {
  descriptionId, entityDetails, entityId, neighbourhood, neighbourhoodElements, passageId, textDetails,
} from "./entity.js";
import { GraphView } from "./graph.js";

export class AskScreen {
  constructor(app) {
    this.app = app;
    this.methods = [];
    this.retrievals = []; // [{view, elements}]
    this.cited = new Set();
    this.answer = "";
    this.numbered([]);
    this.graph = new GraphView($("#ask-graph"), {
      label: "The activated subgraph: entities, passages and descriptions",
      describe: (node, view) => this.describe(node, view),
    });
    $("#ask-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.ask();
    });
    $("#question").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        this.ask();
      }
    });
    $("#stop-button").addEventListener("click", () => this.controller?.abort());
    $("#method").addEventListener("change", () => this.showOptions());
    // the options open beside the answer on a wide screen; on a phone they fold away,
    // so the question, the answer and the graph come first
    $("#options-box").open = !matchMedia("(max-width: 900px)").matches;
    $("#retrieval-pick").addEventListener("change", (e) => this.draw(Number(e.target.value)));
  }

  /** Fill the method picker from GET /api/methods. */
  async load() {
    const listing = await call("/api/methods");
    this.methods = listing.methods;
    this.answering = listing.answering;
    this.retrievers = listing.retrievers;
    const method = $("#method");
    const keep = method.value || "sa-rag";
    clear(method).append(...listing.methods.map((m) => el("option", { value: m.name }, m.name)));
    method.value = listing.methods.some((m) => m.name === keep) ? keep : listing.methods[0]?.name;
    clear($("#retriever")).append(
      el("option", { value: "" }, "the method's own"),
      ...listing.retrievers.map((r) => el("option", { value: r }, r)),
    );
    $("#ask-button").textContent = this.answering ? "Ask" : "Retrieve";
    if (!this.answering) notify("This server has no model to answer with: Ask shows the retrieval only.");
    this.showOptions();
  }

  spec() {
    return this.methods.find((m) => m.name === $("#method").value);
  }

  showOptions() {
    const spec = this.spec();
    const box = clear($("#options"));
    box.append(el("legend", {}, "Options"));
    if (!spec) return;
    $("#method-summary").textContent = `${plain(spec.summary)}${spec.retriever ? ` (retriever: ${spec.retriever})` : ""}`;
    for (const option of spec.options) {
      const id = `option-${option.name}`;
      const kind = option.type.replace(/\s*\|\s*None/, "");
      const input =
        kind === "bool"
          ? el("input", { id, type: "checkbox", checked: option.default === true })
          : el("input", {
              id,
              type: kind === "int" || kind === "float" ? "number" : "text",
              step: kind === "float" ? "any" : kind === "int" ? "1" : undefined,
              placeholder: option.default === null ? "default" : String(option.default),
            });
      input.dataset.option = option.name;
      input.dataset.kind = kind;
      const help = plain(option.help);
      box.append(el("div", { class: "option" }, el("label", { for: id, title: help }, option.name), input,
        el("small", { class: "muted" }, help)));
    }
    if (!spec.options.length) box.append(el("p", { class: "muted" }, "This method has no options."));
    $("#options-summary").textContent = `Options (${spec.options.length})`;
  }

  options() {
    const chosen = {};
    for (const input of $("#options").querySelectorAll("input[data-option]")) {
      const { option, kind } = input.dataset;
      if (kind === "bool") {
        const preset = this.spec().options.find((o) => o.name === option).default === true;
        if (input.checked !== preset) chosen[option] = input.checked;
      } else if (input.value.trim() !== "") {
        chosen[option] = kind === "int" ? parseInt(input.value, 10) : kind === "float" ? Number(input.value) : input.value;
      }
    }
    return chosen;
  }

  reset() {
    this.retrievals = [];
    this.cited = new Set();
    this.answer = "";
    this.numbered([]);
    this.written = "";
    this.prompt = null;
    for (const id of ["#answer", "#writing", "#sources", "#usage", "#evidence", "#steps", "#retrieval-pick", "#reached"]) clear($(id));
    $("#reached-box").hidden = true;
    $("#retrieval-pick").disabled = true;
    $("#graph-stats").textContent = "";
    this.graph.show([], []);
  }

  async ask() {
    const question = $("#question").value.trim();
    if (!question) {
      $("#question").focus();
      return;
    }
    this.reset();
    notify(null);
    const ws = this.app.workspace;
    this.controller = new AbortController();
    const status = $("#ask-status");
    $("#ask-button").disabled = true;
    $("#stop-button").disabled = false;
    status.textContent = "Retrieving…";
    const retriever = $("#retriever").value || null;
    try {
      if (!this.answering) {
        // without a model, the method's own retriever (or the one picked) retrieves
        const own = this.retrievers.includes(this.spec().retriever) ? this.spec().retriever : "sa";
        const result = await call(workspacePath(ws, "/retrieve"), {
          method: "POST", signal: this.controller.signal,
          body: { query: question, method: retriever || own, k: this.options().k ?? 8 },
        });
        this.retrieved(result);
        this.evidence({ passages: result.passages, relations: [], kg_triples: [] });
        this.numbered(result.passages.map((p) => [p.chunk_id, p.rank, p.text]));
        this.reached(result.paths);
        status.textContent = `Retrieved in ${number(result.seconds, 2)} s.`;
        return;
      }
      await stream(workspacePath(ws, "/answer"), {
        method: "POST",
        signal: this.controller.signal,
        body: { question, method: $("#method").value, retriever, options: this.options(), stream: true },
        onEvent: (name, data) => this.event(name, data),
      });
    } catch (error) {
      if (error.name === "AbortError") status.textContent = "Stopped.";
      else this.app.failed(error, status);
    } finally {
      $("#ask-button").disabled = false;
      $("#stop-button").disabled = true;
    }
  }

  event(name, data) {
    const status = $("#ask-status");
    if (name === "retrieval") {
      this.retrieved(data);
      status.textContent = "Reading the evidence…";
    } else if (name === "step") {
      this.step(data);
    } else if (name === "token") {
      if (data.prompt !== this.prompt) {
        this.written += `${this.written ? "\n\n" : ""}[${data.prompt}]\n`;
        this.prompt = data.prompt;
      }
      this.written += data.text;
      $("#writing").textContent = this.written;
      $("#answer").textContent = "…";
      status.textContent = `Writing (${data.prompt})…`;
    } else if (name === "final") {
      this.final(data);
      status.textContent = data.error ? "The method could not finish." : "Done.";
    } else if (name === "error") {
      status.textContent = "";
      this.app.failed(new ApiError(data.status, data.detail), status);
    }
  }

  step(step) {
    const list = $("#steps");
    const { kind, ...fields } = step;
    const headline = Object.values(fields).find((v) => typeof v === "string" && v) ?? "";
    const rows = Object.entries(fields).map(([key, value]) =>
      el("div", { class: "field" }, el("dt", {}, key),
        el("dd", {}, typeof value === "string" ? value : el("pre", {}, JSON.stringify(value, null, 2)))));
    list.append(
      el("li", {}, el("details", {}, el("summary", {}, el("strong", {}, kind), " ", short(headline, 90)),
        el("dl", {}, rows))),
    );
  }

  retrieved(view) {
    const index = this.retrievals.length;
    this.retrievals.push({ view, elements: subgraphElements(view) });
    const pick = $("#retrieval-pick");
    pick.append(el("option", { value: index }, `${index + 1}: ${short(view.query, 50)} (${view.method})`));
    pick.value = String(index);
    pick.disabled = this.retrievals.length < 2;
    this.draw(index);
    this.link(index);
  }

  /** Add the describes links and description nodes between the drawn entities and passages. */
  async link(index) {
    const { view, elements } = this.retrievals[index];
    const entities = elements.nodes.filter((n) => n.kind === "entity" && n.entity !== undefined).map((n) => n.entity);
    const chunkIds = view.passages.map((p) => p.chunk_id);
    if (!chunkIds.length) return;
    try {
      const links = await call(workspacePath(this.app.workspace, "/graph/links"), {
        method: "POST", body: { entities, chunk_ids: chunkIds },
      });
      for (const mention of links.mentions) {
        elements.edges.push({ id: `${passageId(mention.chunk_id)}>${entityId(mention.entity)}`,
          source: passageId(mention.chunk_id), target: entityId(mention.entity), kind: "describes", label: "" });
      }
      for (const d of links.descriptions) {
        elements.nodes.push({ id: descriptionId(d.id), label: short(d.text, 40), kind: "description", text: d.text });
        elements.edges.push({ id: `${descriptionId(d.id)}>e`, source: descriptionId(d.id), target: entityId(d.entity), kind: "describes", label: "" });
        elements.edges.push({ id: `${descriptionId(d.id)}<p`, source: passageId(d.chunk_id), target: descriptionId(d.id), kind: "source", label: "" });
      }
      if (Number($("#retrieval-pick").value) === index) this.graph.merge(elements.nodes, elements.edges);
    } catch (error) {
      $("#graph-stats").textContent += ` (links not drawn: ${error.message})`;
    }
  }

  draw(index) {
    const { view, elements } = this.retrievals[index];
    for (const node of elements.nodes) node.cited = node.kind === "passage" && this.cited.has(node.chunk_id);
    this.graph.show(elements.nodes, elements.edges);
    const { ids, answer } = this.reasoning(elements.paths);
    this.graph.highlight(ids, answer);
    // what is drawn: the activated entities and relations, and those the paths add
    const g = view.subgraph;
    const entities = elements.nodes.filter((n) => n.kind === "entity").length;
    const relations = elements.edges.filter((e) => e.kind === "relation").length;
    $("#graph-stats").textContent =
      `${entities} ${entities === 1 ? "entity" : "entities"}, ${relations} ` +
      `${relations === 1 ? "relation" : "relations"}, ${view.passages.length} passages` +
      (g.subgraph_nodes ? ` (activation spread over ${g.subgraph_nodes} nodes, ${g.subgraph_edges} edges)` : "");
  }

  /** Remember the cited passages: [[chunk_id, number, text]]. */
  numbered(cited) {
    this.numbers = new Map(cited.map(([chunk, n]) => [chunk, n]));
    this.sources = cited.map(([, n, text]) => [n, text]);
  }

  /** The citation number a path leads to: its passage's; for the path to the entity
   * the answer names, else that of the cited passage its last relation was read from;
   * undefined if none is cited. */
  citation(path) {
    if (this.numbers.has(path.chunk_id)) return this.numbers.get(path.chunk_id);
    const last = path.steps.at(-1)?.sentence;
    if (!last || !this.answers(path)) return undefined;
    return this.sources.find(([, text]) => text.includes(last))?.[0];
  }

  /** Whether a path ends at the entity the answer names (as the CLI's path). */
  answers(path) {
    const answer = this.answer.trim().toLowerCase();
    return answer !== "" && answer.includes(path.entity.name.toLowerCase());
  }

  /** Highlight the paths to the cited passages (before an answer: to every passage),
   * the one to the entity the answer names the most. */
  reasoning(paths) {
    const ids = new Set();
    const answer = new Set();
    for (const { path, ids: of } of paths) {
      const shown = this.numbers.size ? this.citation(path) !== undefined : path.chunk_id;
      if (!shown) continue;
      for (const id of of) ids.add(id);
      if (this.answers(path)) for (const id of of) if (!id.startsWith("reach:") && !id.startsWith("p:")) answer.add(id);
    }
    return { ids, answer };
  }

  /** "How it was reached": for each cited passage (numbered as cited) the graph reached,
   * the path from the question's seed, the path to the answer's entity first; a click
   * shows that path alone in the graph. */
  reached(paths) {
    const list = clear($("#reached"));
    const shown = paths.map((path) => ({ path, n: this.citation(path) })).filter(({ n }) => n !== undefined)
      .sort((a, b) => this.answers(b.path) - this.answers(a.path) || a.n - b.n ||
        a.path.steps.length - b.path.steps.length); // the answer's path first
    $("#reached-box").hidden = !shown.length;
    for (const { path, n } of shown) {
      const show = () => {
        const drawn = this.retrievals[Number($("#retrieval-pick").value)]?.elements.paths ?? [];
        const match = drawn.find((d) => d.path.chunk_id === path.chunk_id && d.path.entity.entity === path.entity.entity);
        if (match) this.graph.highlight(match.ids, this.answers(path) ? match.ids : new Set());
      };
      const hops = `${path.steps.length} hop${path.steps.length === 1 ? "" : "s"}`;
      list.append(el("li", { "data-chunk": path.chunk_id, "data-cite": n, class: this.answers(path) ? "answers" : null },
        el("button", { type: "button", class: "link cite-number", onclick: show,
          "aria-label": `show the path to source ${n} in the graph` }, `[${n}]`), " ",
        el("span", { class: "muted" }, `to ${path.entity.name}${titled(path) ? ` (${path.title})` : ""} · ${hops}`),
        el("br"), pathLine(path),
        el("ul", { class: "sentences" }, path.steps.map((step) => el("li", {}, el("q", {}, step.sentence))))));
    }
  }

  final(result) {
    const answer = $("#answer");
    answer.textContent = result.answer || (result.error ? "" : "(no answer)");
    if (result.error) answer.append(el("p", { class: "error" }, result.error));
    if (!this.written) $("#writing").textContent = "(the model's reply came from the cache or was not streamed)";
    this.cited = new Set(result.citations.passages.map((p) => p.chunk_id));
    this.evidence(result.citations);
    this.answer = result.answer || "";
    this.numbered(result.citations.passages.map((p, i) => [p.chunk_id, i + 1, p.text]));
    this.reached(result.citations.paths ?? []);
    const u = result.usage;
    $("#usage").textContent =
      `${u.prompt_tokens} prompt + ${u.completion_tokens} completion tokens, ${u.llm_calls} LLM call${u.llm_calls === 1 ? "" : "s"}` +
      `${u.parse_failures ? `, ${u.parse_failures} parse failures` : ""}, ${number(result.seconds, 2)} s`;
    if (this.retrievals.length) this.draw(Number($("#retrieval-pick").value));
  }

  /** The numbered citations under the answer, linking to the evidence list. */
  evidence(citations) {
    const list = clear($("#evidence"));
    const sources = clear($("#sources"));
    // a method whose model read only the relations (kags) cites its passages as support
    const unread = citations.passages_read === false ? " · support, not read by the model" : "";
    const items = [
      ...citations.passages.map((p) => ({ kind: "passage", head: p.title || p.chunk_id, body: p.text,
        meta: `score ${number(p.score)}${unread}`, chunk: p.chunk_id })),
      ...citations.relations.map((r) => ({ kind: "relation", head: `${r.subject} — ${r.predicate} → ${r.object}`,
        body: r.sentence, meta: `weight ${number(r.weight)}` })),
      ...(citations.references ?? []).map((r) => ({ kind: "reference", head: r.source, body: r.text,
        meta: r.score === null || r.score === undefined ? "unscored" : `KG score ${number(r.score)}` })),
      ...(citations.kg_triples ?? []).map((t) => ({ kind: "kg triple", head: `${t.head} — ${t.relation} → ${t.tail}`,
        body: t.sentence, meta: "" })),
    ];
    if (!items.length) return;
    sources.append("Sources: ");
    items.forEach((item, i) => {
      const n = i + 1;
      const show = (event) => {
        if (item.chunk && this.graph.cy.getElementById(passageId(item.chunk)).nonempty()) {
          this.graph.open(passageId(item.chunk));
        }
        event.currentTarget.blur?.();
      };
      sources.append(el("a", { href: `#cite-${n}`, class: "cite", "data-kind": item.kind, onclick: show,
        title: item.head, "aria-label": `source ${n}: ${item.head}` }, `[${n}]`), " ");
      list.append(el("li", { id: `cite-${n}`, tabindex: -1 }, el("span", { class: "tag" }, item.kind), " ",
        el("strong", {}, item.head), " ", el("span", { class: "muted" }, item.meta), el("p", {}, item.body)));
    });
  }

  async describe(node, view) {
    if (node.kind !== "entity" || node.entity === undefined) return textDetails(node);
    const ws = this.app.workspace;
    const expand = el("button", { type: "button", onclick: async () => {
      const near = await neighbourhood(ws, node.entity);
      const { nodes, edges } = neighbourhoodElements(near);
      view.merge(nodes.map((n) => (n.id === node.id ? { ...n, activation: node.activation, seed: node.seed } : n)), edges, node.id);
    } }, "Show its neighbourhood here");
    const explore = el("button", { type: "button", onclick: () => this.app.explore.walk(node.entity, node.label) },
      "Open in Explore");
    const extra = node.seed ? el("p", { class: "muted" }, `seed (${node.source}, score ${number(node.score)})`) : null;
    const activation = el("p", { class: "muted" }, `activation ${number(node.raw ?? 0)}, hop ${node.hop ?? "–"}`);
    return el("div", {}, activation, extra,
      await entityDetails(ws, node.entity, { onWalk: (id, name) => this.app.explore.walk(id, name), actions: [expand, explore] }));
  }
}

/** A retrieval's activated subgraph and passages as graph elements. */
export function subgraphElements(view) {
  const g = view.subgraph;
  const top = Math.max(1e-9, ...g.nodes.map((n) => n.activation), ...g.seeds.map((s) => s.score));
  const nodes = new Map();
  const byName = new Map();
  const entity = (id, name, fields) => {
    const key = entityId(id);
    const node = nodes.get(key) ?? { id: key, label: name, kind: "entity", entity: id, activation: 0, raw: 0 };
    nodes.set(key, Object.assign(node, fields));
    byName.set(name, key);
  };
  for (const n of g.nodes) entity(n.entity, n.name, { activation: n.activation / top, raw: n.activation, hop: n.hop });
  for (const s of g.seeds) {
    const known = nodes.get(entityId(s.entity));
    entity(s.entity, s.name, { seed: true, source: s.source, score: s.score,
      activation: known ? known.activation : s.score / top, raw: known ? known.raw : s.score, hop: known?.hop ?? 0 });
  }
  const edges = [];
  for (const e of g.edges) {
    for (const name of [e.subject, e.object]) {
      if (!byName.has(name)) {
        const key = `n:${name}`;
        nodes.set(key, { id: key, label: name, kind: "entity", activation: 0 });
        byName.set(name, key);
      }
    }
    edges.push({ id: `r:${e.relation}`, source: byName.get(e.subject), target: byName.get(e.object),
      label: e.predicate, sentence: e.sentence, kind: "relation" });
  }
  for (const p of view.passages) {
    nodes.set(passageId(p.chunk_id), { id: passageId(p.chunk_id), label: `${p.rank}. ${p.title || p.chunk_id}`,
      kind: "passage", chunk_id: p.chunk_id, text: p.text, score: p.score });
  }
  const paths = (view.paths ?? []).map((path) => pathElements(path, nodes, edges, entity));
  return { nodes: [...nodes.values()], edges, paths };
}

/** Draw a reasoning path (adding the entities and relations the subgraph lacks) and
 * return it with the ids of its elements: {path, ids}. */
function pathElements(path, nodes, edges, entity) {
  const ids = new Set();
  for (const end of [path.seed, ...path.steps.map((step) => step.target)]) {
    if (!nodes.has(entityId(end.entity))) entity(end.entity, end.name, { hop: undefined });
    ids.add(entityId(end.entity));
  }
  const drawn = new Set(edges.map((e) => e.id));
  for (const step of path.steps) {
    const id = `r:${step.relation}`;
    const byEnd = { [step.source.name]: step.source.entity, [step.target.name]: step.target.entity };
    if (!drawn.has(id)) {
      edges.push({ id, source: entityId(byEnd[step.subject] ?? step.source.entity),
        target: entityId(byEnd[step.object] ?? step.target.entity), label: step.predicate,
        sentence: step.sentence, kind: "relation" });
    }
    edges.find((e) => e.id === id).onpath = true; // laid out short: the path stays compact
    ids.add(id);
  }
  if (path.chunk_id) {
    const id = `reach:${path.entity.entity}>${path.chunk_id}`;
    if (!drawn.has(id)) {
      edges.push({ id, source: entityId(path.entity.entity), target: passageId(path.chunk_id), kind: "reaches",
        label: "", sentence: `${path.entity.name} is what “${path.title}” is about` });
    }
    ids.add(id);
    ids.add(passageId(path.chunk_id));
  }
  return { path, ids };
}

/** A path as one line: seed —predicate→ entity …, each relation's sentence on hover. */
export function pathLine(path) {
  const parts = [el("strong", {}, path.seed.name)];
  for (const step of path.steps) {
    const forward = step.subject === step.source.name;
    const arrow = forward ? ` —${step.predicate}→ ` : ` ←${step.predicate}— `;
    parts.push(el("span", { class: "relation", title: step.sentence }, arrow), el("strong", {}, step.target.name));
  }
  return el("span", { class: "path-line" }, parts);
}

/** Whether a path's passage title says more than its entity's name ("Milwaukee (film)"). */
function titled(path) {
  return path.title !== "" && path.title.toLowerCase() !== path.entity.name.toLowerCase();
}
