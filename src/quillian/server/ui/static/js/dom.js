// Building DOM nodes: every text from the server (answers, passages, file names) goes
// in as text, never as HTML.

/** `el("li", {class: "x", onclick: f}, "text", child)` */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "class") node.className = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

export function $(selector) {
  return document.querySelector(selector);
}

export function short(text, length = 120) {
  const flat = String(text ?? "").replace(/\s+/g, " ").trim();
  return flat.length > length ? `${flat.slice(0, length - 1)}…` : flat;
}

export function number(value, digits = 3) {
  return Number(value).toFixed(digits);
}

/** Show an error (or clear it with null) in the page's alert line. */
export function notify(message) {
  const notice = $("#notice");
  notice.textContent = message || "";
  notice.hidden = !message;
}

/** Docstring markup as plain text: Sphinx roles (:mod:`x`, :func:`~a.b`), ``literals``
 * and `titles` lose their markup; the text stays. */
export function plain(text) {
  return String(text ?? "")
    .replace(/:[a-z]+(?::[a-z]+)?:`(~?)([^`]*)`/g, (_, tilde, inner) => {
      const target = inner.replace(/^.*<(.*)>$/, "$1").trim(); // :ref:`text <target>`
      const titled = inner.includes("<") ? inner.replace(/\s*<.*>$/, "") : target;
      return tilde ? target.split(".").pop() : titled;
    })
    .replace(/``([^`]*)``/g, "$1")
    .replace(/`([^`]*)`_{0,2}/g, "$1");
}
