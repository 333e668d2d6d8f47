// The HTTP API, as the UI uses it: JSON calls and server-sent-event streams read with
// fetch (EventSource cannot send the API key header, nor POST a question).
// The API key lives in sessionStorage: it lasts the browser session, never enters a URL.

const KEY = "quillian.api-key";

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

export function apiKey() {
  return sessionStorage.getItem(KEY) || "";
}

export function setApiKey(value) {
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
}

function headers(extra = {}) {
  const key = apiKey();
  return key ? { ...extra, "X-API-Key": key } : extra;
}

async function failure(response) {
  let detail = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && typeof body.detail === "string") detail = body.detail;
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, detail);
}

/** A JSON call; `body` is sent as JSON, or as is when it is FormData. */
export async function call(path, { method = "GET", body, signal } = {}) {
  const init = { method, signal, headers: headers() };
  if (body instanceof FormData) init.body = body;
  else if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = headers({ "Content-Type": "application/json" });
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await failure(response);
  return response.json();
}

/** Read a server-sent-event stream, calling `onEvent(name, data)` for each event. */
export async function stream(path, { method = "GET", body, signal, onEvent }) {
  const init = { method, signal, headers: headers({ Accept: "text/event-stream" }) };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = headers({ Accept: "text/event-stream", "Content-Type": "application/json" });
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      dispatch(buffer.slice(0, end), onEvent);
      buffer = buffer.slice(end + 2);
    }
  }
  if (buffer.trim()) dispatch(buffer, onEvent);
}

function dispatch(block, onEvent) {
  let name = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) name = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
  }
  if (data.length) onEvent(name, JSON.parse(data.join("\n")));
}

/** `/api/workspaces/{ws}` followed by `rest`, with the name escaped. */
export function workspacePath(ws, rest = "") {
  return `/api/workspaces/${encodeURIComponent(ws)}${rest}`;
}
