// Small DOM helpers shared by the page's modules. Every string goes in as a text node or an attribute value, never as
// markup: names in a cluster are user input (a pod may be called `<img src=x onerror=alert(1)>`).

/**
 * el("div", {class: "a b", "data-node": name, title: "..."}, child, "text", [more]) -> HTMLElement.
 * Attribute values are set with setAttribute (strings only; null/undefined/false skip the attribute, true sets "").
 * Event handler attributes are refused outright so a caller can never wire script through an attribute by mistake.
 */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (/^on/i.test(name) || name === "style") throw new Error(`el(): refusing attribute ${name}`);
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(node, children);
  return node;
}

export function append(parent, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else if (child instanceof Node) parent.appendChild(child);
    else parent.appendChild(document.createTextNode(String(child)));
  }
  return parent;
}

/** Replace every child of `parent` with `children` in one DOM operation. */
export function replaceChildren(parent, ...children) {
  const frag = document.createDocumentFragment();
  append(frag, children);
  parent.replaceChildren(frag);
  return parent;
}

/** The number of colours in the holder palette (style.css defines .c0 .. .c23). */
export const PALETTE_SIZE = 24;

/** FNV-1a over the string: stable across reloads and runs, so a pod keeps its colour while the cluster changes. */
export function hash(text) {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function colorClass(key) {
  return `c${hash(key) % PALETTE_SIZE}`;
}

/** What a holder is coloured by: the pod itself, its namespace, or its gang (a pod outside any gang keeps its own). */
export function colorKey(holder, mode, gangs) {
  if (!holder) return "";
  if (mode === "namespace") return holder.split("/", 1)[0];
  if (mode === "gang") return (gangs && gangs[holder]) || holder;
  return holder;
}

/** "nvidia.com/gpu" -> "gpu"; short enough for a chip or a chart axis, the full name stays in titles. */
export function shortResource(name) {
  const slash = name.lastIndexOf("/");
  return slash >= 0 ? name.slice(slash + 1) : name;
}

export function plural(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}

/** A <dl> of [label, value, field] rows; a value element carries data-field so tests and users can find it. */
export function factList(rows) {
  const dl = el("dl", { class: "facts" });
  for (const [label, value, field] of rows) {
    dl.appendChild(el("dt", null, label));
    const dd = el("dd", field ? { "data-field": field } : null);
    append(dd, [value === null || value === undefined || value === "" ? "—" : value]);
    dl.appendChild(dd);
  }
  return dl;
}

/** A compact key/value table for requests, allocatable and labels. */
export function kvTable(obj, { empty = "none", cls = "kv" } = {}) {
  const entries = Object.entries(obj || {});
  if (!entries.length) return el("p", { class: "muted" }, empty);
  const table = el("table", { class: cls });
  const body = el("tbody");
  for (const [k, v] of entries) {
    body.appendChild(el("tr", null, el("th", { title: k }, k), el("td", null, String(v))));
  }
  table.appendChild(body);
  return table;
}
