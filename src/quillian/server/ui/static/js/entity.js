// An entity's neighbourhood (GET .../entities/{id}) as graph elements, and the details
// panel shared by the Ask and Explore graphs. Ids are the API's content-derived strings
// (entities "ent-…", relations "rel-…", descriptions "desc-…"): the same entity keeps
// its id after uploads and deletes, so a drawn graph never points at another entity.

import { call, workspacePath } from "./api.js";
import { el, short } from "./dom.js";

export const entityId = (entity) => `e:${entity}`;
export const passageId = (chunkId) => `p:${chunkId}`;
export const descriptionId = (id) => `d:${id}`;

export function neighbourhood(ws, entity, limit = 50) {
  return call(workspacePath(ws, `/entities/${encodeURIComponent(entity)}?limit=${limit}`));
}

/** The neighbourhood as nodes and edges: the entity, its neighbours, the relations,
 * its descriptions and the passages they were read from. */
export function neighbourhoodElements(near) {
  const entityNode = (hit, activation) => ({
    id: entityId(hit.id), label: hit.name, kind: "entity", entity: hit.id,
    activation, type: hit.type,
  });
  const nodes = [entityNode(near.entity, 1), ...near.nodes.map((hit) => entityNode(hit, 0.35))];
  const edges = merged(near.edges).map(({ edge, sentences }) => ({
    id: `r:${edge.relation}`, source: entityId(edge.source), target: entityId(edge.target),
    label: sentences.length > 1 ? `${edge.predicate} ×${sentences.length}` : edge.predicate,
    sentence: sentences.join(" · "), count: sentences.length, kind: "relation",
  }));
  near.descriptions.forEach((description) => {
    const id = descriptionId(description.id);
    nodes.push({ id, label: short(description.text, 40), kind: "description", text: description.text });
    edges.push({ id: `${id}>e`, source: id, target: entityId(near.entity.id), kind: "describes", label: "" });
    if (description.chunk_id) {
      edges.push({ id: `${id}<p`, source: passageId(description.chunk_id), target: id, kind: "source", label: "" });
    }
  });
  for (const passage of near.passages) {
    nodes.push({ id: passageId(passage.chunk_id), label: passage.title || passage.chunk_id,
      kind: "passage", chunk_id: passage.chunk_id, title: passage.title, text: passage.text });
  }
  const sourced = new Set(); // one line from a passage to each entity it gave relations of
  for (const edge of near.edges) {
    const id = `${passageId(edge.chunk_id)}>${entityId(edge.source)}`;
    if (!edge.chunk_id || sourced.has(id)) continue;
    sourced.add(id);
    edges.push({ id, source: passageId(edge.chunk_id), target: entityId(edge.source), kind: "source", label: "" });
  }
  return { nodes, edges };
}

/** Relations with the same ends and predicate (the same fact read from several
 * sentences) as one: [{edge, sentences}], in first-seen order. */
export function merged(edges) {
  const groups = new Map();
  for (const edge of edges) {
    const key = `${edge.source}\u001f${edge.predicate}\u001f${edge.target}`;
    const group = groups.get(key) ?? { edge, sentences: [] };
    const sentence = edge.sentence || edge.description;
    if (!group.sentences.includes(sentence)) group.sentences.push(sentence);
    groups.set(key, group);
  }
  return [...groups.values()];
}

/** The details of an entity: descriptions, related entities (buttons that walk to
 * them), relations with their sentences, passages; `actions` adds buttons on top. */
export async function entityDetails(ws, entity, { onWalk, actions = [] }) {
  const near = await neighbourhood(ws, entity);
  const byId = new Map([[near.entity.id, near.entity], ...near.nodes.map((n) => [n.id, n])]);
  const name = (id) => byId.get(id)?.name ?? `#${id}`;
  const hit = near.entity;
  return el(
    "div",
    {},
    el("p", { class: "muted" },
      `${hit.type || "entity"} · ${hit.degree} relation${hit.degree === 1 ? "" : "s"}` +
        (hit.aliases.length ? ` · also ${hit.aliases.join(", ")}` : "")),
    el("div", { class: "row" }, ...actions),
    el("h4", {}, "Descriptions"),
    near.descriptions.length
      ? el("ul", {}, near.descriptions.map((d) => el("li", {}, d.text)))
      : el("p", { class: "muted" }, "none"),
    el("h4", {}, `Relations (${near.edges.length} of ${near.total_edges})`),
    el(
      "ul",
      { class: "relations" },
      merged(near.edges).map(({ edge, sentences }) => {
        const other = edge.source === hit.id ? edge.target : edge.source;
        return el(
          "li",
          { "data-count": sentences.length },
          `${name(edge.source)} — ${edge.predicate} → ${name(edge.target)} `,
          sentences.length > 1 ? el("span", { class: "muted" }, `(×${sentences.length}) `) : null,
          el("button", { type: "button", class: "link", onclick: () => onWalk(other, name(other)) },
            `Walk to ${name(other)}`),
          sentences.flatMap((sentence) => [el("br"), el("q", {}, sentence)]),
        );
      }),
    ),
    el("h4", {}, "Passages"),
    near.passages.length
      ? el("ul", {}, near.passages.map((p) => el("li", {}, el("strong", {}, p.title || p.chunk_id), " ", short(p.text, 400))))
      : el("p", { class: "muted" }, "none"),
  );
}

/** The details of a passage or description node. */
export function textDetails(node) {
  return el(
    "div",
    {},
    el("p", { class: "muted" }, node.kind === "passage" ? `passage ${node.chunk_id}` : "description"),
    el("p", { class: "passage-text" }, node.text || ""),
  );
}
