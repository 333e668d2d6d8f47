// The page: the workspace picker, the API key, the tabs, and the three screens.

import { AskScreen } from "./ask.js";
import { apiKey, call, setApiKey, workspacePath } from "./api.js";
import { $, clear, el, notify } from "./dom.js";
import { DocumentsScreen } from "./documents.js";
import { ExploreScreen } from "./explore.js";

const WORKSPACE = "quillian.workspace";
const TABS = ["ask", "documents", "explore"];

class App {
  constructor() {
    this.workspace = sessionStorage.getItem(WORKSPACE) || "";
    this.ask = new AskScreen(this);
    this.documents = new DocumentsScreen(this);
    this.explore = new ExploreScreen(this);
    $("#api-key").value = apiKey();
    $("#key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      setApiKey($("#api-key").value.trim());
      this.start();
    });
    $("#forget-key").addEventListener("click", () => {
      setApiKey("");
      $("#api-key").value = "";
    });
    $("#workspace").addEventListener("change", (event) => this.use(event.target.value));
    for (const name of TABS) $(`#tab-${name}`).addEventListener("click", () => this.select(name));
    $(".tabs").addEventListener("keydown", (event) => this.arrow(event));
  }

  /** Load the workspaces (asking for the key if the server wants one). */
  async start() {
    notify(null);
    try {
      const spaces = await call("/api/workspaces");
      if (!spaces.length) throw new Error("this server serves no workspace");
      const names = spaces.map((s) => s.name);
      clear($("#workspace")).append(...names.map((n) => el("option", { value: n }, n)));
      await this.ask.load();
      await this.use(names.includes(this.workspace) ? this.workspace : names[0]);
    } catch (error) {
      this.failed(error);
    }
  }

  async use(name) {
    this.workspace = name;
    sessionStorage.setItem(WORKSPACE, name);
    $("#workspace").value = name;
    this.ask.reset();
    this.explore.reset();
    await Promise.all([this.refreshWorkspace(), this.documents.load(0)]).catch((error) => this.failed(error));
  }

  async refreshWorkspace() {
    const info = await call(workspacePath(this.workspace));
    const c = info.counts;
    $("#workspace-info").textContent =
      `${c.documents ?? 0} documents · ${c.entities ?? 0} entities · ${c.relations ?? 0} relations`;
  }

  select(name) {
    for (const tab of TABS) {
      const on = tab === name;
      const button = $(`#tab-${tab}`);
      button.setAttribute("aria-selected", String(on));
      button.tabIndex = on ? 0 : -1;
      $(`#${tab}`).hidden = !on;
    }
    const view = { ask: this.ask.graph, explore: this.explore.graph }[name];
    if (view) requestAnimationFrame(() => view.cy.resize());
  }

  /** Arrow keys, Home and End move between the tabs (the WAI-ARIA tabs pattern). */
  arrow(event) {
    const at = TABS.findIndex((t) => $(`#tab-${t}`).getAttribute("aria-selected") === "true");
    const next = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: TABS.length - 1 }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    const name = TABS[(next + TABS.length) % TABS.length];
    this.select(name);
    $(`#tab-${name}`).focus();
  }

  /** Show an error; a 401 sends the user to the key field. */
  failed(error, where = null) {
    const message = error.status === 401
      ? `${error.message}: enter the server's API key above.`
      : error.message;
    notify(message);
    if (where) where.textContent = "";
    if (error.status === 401) $("#api-key").focus();
  }
}

const app = new App();
app.start();
