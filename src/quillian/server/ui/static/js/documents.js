// The Documents screen: upload (drag and drop or the file picker, several files at
// once), each job's progress live from its event stream, the documents with their
// status and error, and deletion after a confirmation.

import { call, stream, workspacePath } from "./api.js";
import { $, clear, el, notify } from "./dom.js";

const PAGE = 50;

export class DocumentsScreen {
  constructor(app) {
    this.app = app;
    this.offset = 0;
    const drop = $("#drop");
    drop.addEventListener("dragover", (event) => {
      event.preventDefault();
      drop.classList.add("over");
    });
    drop.addEventListener("dragleave", () => drop.classList.remove("over"));
    drop.addEventListener("drop", (event) => {
      event.preventDefault();
      drop.classList.remove("over");
      this.upload([...event.dataTransfer.files]);
    });
    $("#files").addEventListener("change", (event) => {
      this.upload([...event.target.files]);
      event.target.value = "";
    });
    $("#doc-prev").addEventListener("click", () => this.load(Math.max(0, this.offset - PAGE)));
    $("#doc-next").addEventListener("click", () => this.load(this.offset + PAGE));
    $("#doc-refresh").addEventListener("click", () => this.load(this.offset));
  }

  async load(offset = this.offset) {
    const ws = this.app.workspace;
    const page = await call(workspacePath(ws, `/documents?offset=${offset}&limit=${PAGE}`));
    this.offset = offset;
    const last = Math.min(page.total, offset + page.documents.length);
    $("#doc-count").textContent = page.total
      ? `Documents ${offset + 1}–${last} of ${page.total}`
      : "No documents yet.";
    $("#doc-prev").disabled = offset === 0;
    $("#doc-next").disabled = last >= page.total;
    clear($("#doc-list")).append(...page.documents.map((doc) => this.card(doc)));
  }

  card(doc) {
    const name = doc.title || doc.source || doc.id;
    return el(
      "li",
      { class: "card", "data-doc": doc.id, "data-status": doc.status },
      el("div", { class: "row spread" },
        el("strong", {}, name),
        el("span", { class: `status ${doc.status}` }, doc.status)),
      el("p", { class: "muted" }, `${doc.source} · ${doc.chunks} chunks · ${doc.characters} characters · ${doc.id}`),
      doc.error ? el("p", { class: "error" }, doc.error) : null,
      el("button", { type: "button", class: "danger", "aria-label": `Delete ${name}`,
        onclick: () => this.remove(doc, name) }, "Delete"),
    );
  }

  async upload(files) {
    if (!files.length) return;
    notify(null);
    const form = new FormData();
    for (const file of files) form.append("files", file, file.name);
    const names = files.map((f) => f.name).join(", ");
    try {
      const job = await call(workspacePath(this.app.workspace, "/documents/files"), { method: "POST", body: form });
      this.follow(job, `Adding ${names}`);
    } catch (error) {
      this.app.failed(error);
      $("#jobs").prepend(el("li", { class: "job failed" }, el("strong", {}, `Upload of ${names} refused`),
        el("p", { class: "error" }, error.message)));
    }
  }

  async remove(doc, name) {
    const dialog = $("#confirm");
    $("#confirm-text").textContent =
      `Delete “${name}”? What only it supported goes; entities and relations other documents support stay.`;
    dialog.returnValue = "cancel";
    dialog.showModal();
    await new Promise((resolve) => dialog.addEventListener("close", resolve, { once: true }));
    if (dialog.returnValue !== "ok") return;
    try {
      const job = await call(workspacePath(this.app.workspace, `/documents/${encodeURIComponent(doc.id)}`), { method: "DELETE" });
      this.follow(job, `Deleting ${name}`);
    } catch (error) {
      this.app.failed(error);
    }
  }

  /** Show a job's progress from its event stream until it finishes. */
  async follow(job, title) {
    const state = el("span", { class: "status" });
    const detail = el("p", { class: "muted" });
    const failures = el("ul", { class: "failures" });
    const item = el("li", { class: "job", "data-job": job.id }, el("div", { class: "row spread" },
      el("strong", {}, title), state), detail, failures);
    $("#jobs").prepend(item);
    const show = (j) => {
      item.dataset.state = j.state;
      state.className = `status ${j.state}`;
      state.textContent = j.state;
      const stage = j.stage ? ` · ${j.stage} ${j.stage_done}/${j.stage_total}` : "";
      const refused = j.documents_failed ? ` · ${j.documents_failed} refused (listed below)` : "";
      detail.textContent = `${j.documents_done}/${j.documents_total} documents${refused}${stage}${j.error ? ` · ${j.error}` : ""}`;
      clear(failures).append(...j.failures.map((f) => {
        const who = f.title || f.source;
        return el("li", { class: "error" }, f.error.startsWith(who) ? f.error : `${who}: ${f.error}`);
      }));
    };
    show(job);
    let refreshed = 0;
    try {
      await stream(workspacePath(this.app.workspace, `/jobs/${job.id}/events`), {
        onEvent: (name, data) => {
          show(data);
          if (name === "done" || Date.now() - refreshed > 1000) {
            refreshed = Date.now();
            this.load().catch((error) => this.app.failed(error));
          }
        },
      });
    } catch (error) {
      this.app.failed(error);
    }
    await this.load();
    this.app.refreshWorkspace();
  }
}
