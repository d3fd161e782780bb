// The `accelsched simulate --out DIR` results page: GET /api/sim (accelsched/ui/simview.py) drawn with charts.js.
//
// The same numbers as the folder's PNGs and summary.csv, but interactive: hover a chart for every policy's value,
// untick a policy to hide it in every chart and the table, click a table header to sort. All text reaches the
// page through textContent or setAttribute (policy names may come from a user's KubeSchedulerConfiguration path).
//
// Test hooks: body[data-ready="true"] once drawn (data-error="true" when /api/sim failed), input.policy-toggle
// [data-policy], #sim-summary th[data-col] / tr[data-policy] / td[data-col][data-value].

import { lineChart, PALETTE } from "./charts.js";

const state = { data: null, policies: [], colours: new Map(), shown: new Set(), sort: null };

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function byId(id) {
  return document.getElementById(id);
}

// ------------------------------------------------------------------------------------------------ charts

// [{name, color, points}] for the policies of `table` (policy -> columns), y = f(row, i).
function seriesOf(table, xKey, x, y) {
  const out = [];
  for (const policy of state.policies) {
    const rows = table[policy];
    if (!rows || !rows[xKey]) continue;
    const points = rows[xKey].map((xv, i) => [x(xv, rows), y(rows, i)]);
    out.push({ name: policy, color: state.colours.get(policy), points });
  }
  return out;
}

function hiddenPolicies() {
  return state.policies.filter((p) => !state.shown.has(p));
}

function drawCurves() {
  const curves = state.data.curves || {};
  const section = byId("sim-curves");
  section.hidden = Object.keys(curves).length === 0;
  if (section.hidden) return;
  const hidden = hiddenPolicies();
  const pct = (xv) => xv;
  const charts = [
    ["chart-alloc", "GPU allocation ratio", "GPU allocation ratio (%)", (r, i) => 100 * r.alloc_ratio[i], null],
    // Where the policies part ways: the paper's figure zooms the same way.
    ["chart-alloc-zoom", "GPU allocation ratio, from 70% arrived", "GPU allocation ratio (%)",
      (r, i) => 100 * r.alloc_ratio[i], 70],
    ["chart-frag", "Fragmented GPUs", "fragmented GPUs", (r, i) => r.frag_milli[i] / 1000, null],
    ["chart-frag-ratio", "Fragmented share of free GPU milli", "fragmented share (%)",
      (r, i) => 100 * r.frag_ratio[i], null],
  ];
  for (const [id, title, yLabel, y, from] of charts) {
    let series = seriesOf(curves, "arrived_pct", pct, y);
    if (from !== null) series = series.map((s) => ({ ...s, points: s.points.filter(([x]) => x >= from) }));
    lineChart(byId(id), { title, xLabel: "arrived workload (% of GPU capacity)", yLabel, series, hidden });
  }
}

function drawTimeline() {
  const timeline = state.data.timeline || {};
  const section = byId("sim-timeline");
  section.hidden = Object.keys(timeline).length === 0;
  if (section.hidden) return;
  const hidden = hiddenPolicies();
  const hours = (t, rows) => (t - rows.time_s[0]) / 3600;
  const charts = [
    ["chart-tl-alloc", "Allocated GPUs", "GPUs allocated", (r, i) => r.allocated_milli[i] / 1000],
    ["chart-tl-frag", "Fragmented GPUs", "fragmented GPUs", (r, i) => r.frag_milli[i] / 1000],
    ["chart-tl-waiting", "Pods waiting", "pods waiting", (r, i) => r.waiting_pods[i]],
  ];
  for (const [id, title, yLabel, y] of charts) {
    const series = seriesOf(timeline, "time_s", hours, y);
    lineChart(byId(id), { title, xLabel: "hours since the first arrival", yLabel, series, hidden, step: true });
  }
}

// ------------------------------------------------------------------------------------------------ table

// Which way is better, for the table's highlight: more GPUs allocated, fewer stranded or failed.
function better(col) {
  if (/^(alloc_at_|final_alloc|mean_allocated|peak_allocated)/.test(col)) return 1;
  if (/^(unallocated|frag_|mean_frag|failed|peak_waiting)/.test(col)) return -1;
  return 0;
}

function label(col) {
  const m = /^alloc_at_(\d+)pct$/.exec(col);
  if (m) return `alloc @${m[1]}%`;
  return col.replaceAll("_", " ");
}

// Columns that are ratios of GPU capacity: shown in percent, as the charts draw them (data-value keeps the CSV's).
const RATIO = /^(alloc_at_\d+pct|final_alloc|frag_ratio)$/;

function cellText(v, col) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "number" && RATIO.test(col)) return `${(100 * v).toFixed(1)}%`;
  return String(v);
}

function drawTable() {
  const rows = state.data.summary || [];
  const columns = state.data.columns && state.data.columns.length ? state.data.columns
    : rows.length ? Object.keys(rows[0]) : [];
  const section = byId("sim-table");
  section.hidden = rows.length === 0;
  if (section.hidden) return;
  byId("sim-table-note").textContent = state.data.kind === "timeline"
    ? "From timeline.csv: medians over seeds; means are time-weighted. Click a header to sort."
    : "From summary.csv: medians over seeds. Click a header to sort; the best value of a column is marked.";
  const table = byId("sim-summary");
  const headRow = table.tHead.rows[0];
  headRow.replaceChildren();
  for (const col of columns) {
    const dir = state.sort && state.sort.col === col ? state.sort.dir : 0;
    const th = h("th", {
      "data-col": col, scope: "col", "aria-sort": dir > 0 ? "ascending" : dir < 0 ? "descending" : "none",
      class: col === "policy" ? "text" : "num",
    });
    const button = h("button", { type: "button", class: "sort", title: `sort by ${col}` }, label(col),
      h("span", { class: "sort-mark", "aria-hidden": "true" }, dir > 0 ? " ▲" : dir < 0 ? " ▼" : ""));
    button.addEventListener("click", () => {
      const same = state.sort && state.sort.col === col;
      // First click: the best first where a column has a "better" side, else ascending.
      const first = better(col) > 0 ? -1 : 1;
      state.sort = { col, dir: same ? -state.sort.dir : first };
      drawTable();
    });
    th.appendChild(button);
    headRow.appendChild(th);
  }
  const best = new Map();
  for (const col of columns) {
    const way = better(col);
    const values = rows.filter((r) => state.shown.has(r.policy)).map((r) => r[col]).filter((v) => typeof v === "number");
    if (way && values.length > 1 && new Set(values).size > 1) best.set(col, way > 0 ? Math.max(...values) : Math.min(...values));
  }
  let ordered = rows.slice();
  if (state.sort) {
    const { col, dir } = state.sort;
    ordered.sort((a, b) => {
      const x = a[col];
      const y = b[col];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))) * dir;
    });
  }
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const row of ordered) {
    const tr = h("tr", { "data-policy": row.policy, hidden: !state.shown.has(row.policy) });
    for (const col of columns) {
      const v = row[col];
      const td = h("td", {
        "data-col": col, "data-value": v === null || v === undefined ? "" : String(v),
        class: [col === "policy" ? "text" : "num", best.has(col) && best.get(col) === v ? "best" : ""].join(" ").trim(),
      });
      if (col === "policy") td.appendChild(h("span", { class: "swatch", "data-policy": row.policy }));
      td.appendChild(document.createTextNode(cellText(v, col)));
      tr.appendChild(td);
    }
    body.appendChild(tr);
  }
  // Swatch colours through the CSSOM (allowed by the page's CSP; a style attribute would not be).
  for (const swatch of body.querySelectorAll(".swatch")) {
    swatch.style.background = state.colours.get(swatch.dataset.policy) || "transparent";
  }
}

// ------------------------------------------------------------------------------------------------ policies

function drawPolicies() {
  const list = byId("sim-policy-list");
  list.replaceChildren();
  for (const policy of state.policies) {
    const box = h("input", { type: "checkbox", class: "policy-toggle", "data-policy": policy, checked: true });
    box.checked = state.shown.has(policy);
    box.addEventListener("change", () => {
      if (box.checked) state.shown.add(policy);
      else state.shown.delete(policy);
      drawAll(false);
    });
    const swatch = h("span", { class: "swatch", "aria-hidden": "true" });
    swatch.style.background = state.colours.get(policy);
    list.appendChild(h("label", { class: "policy-item", "data-policy": policy }, box, swatch, policy));
  }
}

function drawAll(withPolicies = true) {
  if (withPolicies) drawPolicies();
  drawCurves();
  drawTimeline();
  drawTable();
  document.body.dataset.shown = String(state.shown.size);
}

function showError(message) {
  const box = byId("sim-error");
  box.textContent = message;
  box.hidden = false;
  document.body.dataset.error = "true";
  document.body.dataset.ready = "true";
}

// With `accelsched ui --sim DIR` alone there is no map: "/" redirects back here, so the link would go nowhere.
async function hideMapLinkWithoutMap() {
  try {
    const response = await fetch("/", { method: "HEAD", redirect: "manual", cache: "no-store" });
    if (response.type === "opaqueredirect" || !response.ok) byId("sim-map-link").hidden = true;
  } catch {
    byId("sim-map-link").hidden = true;
  }
}

async function main() {
  let data;
  try {
    const response = await fetch("/api/sim", { headers: { Accept: "application/json" }, cache: "no-store" });
    const body = await response.json().catch(() => null);
    if (!response.ok) throw new Error((body && body.error) || `HTTP ${response.status}`);
    data = body;
  } catch (err) {
    showError(`Could not load the simulation results: ${err.message}`);
    return;
  }
  state.data = data;
  const names = [
    ...(data.summary || []).map((r) => r.policy),
    ...Object.keys(data.curves || {}),
    ...Object.keys(data.timeline || {}),
  ];
  state.policies = [...new Set(names.map(String))];
  state.policies.forEach((p, i) => state.colours.set(p, PALETTE[i % PALETTE.length]));
  state.shown = new Set(state.policies);
  const title = data.title || "accelsched simulate results";
  byId("sim-title").textContent = title;
  document.title = `${title} — accelsched`;
  byId("sim-dir").textContent = data.dir || "";
  byId("sim-kind").textContent = data.kind === "timeline" ? "timeline replay" : "inflation (FGD paper protocol)";
  if (data.command) {
    byId("sim-command").textContent = data.command;
    byId("sim-command").hidden = false;
  }
  const notes = Array.isArray(data.notes) ? data.notes : [];
  for (const note of notes) byId("sim-notes").appendChild(h("li", { class: "sentence" }, note));
  byId("sim-notes-panel").hidden = notes.length === 0;
  drawAll();
  hideMapLinkWithoutMap();
  let timer = null;
  window.addEventListener("resize", () => {
    clearTimeout(timer);
    timer = setTimeout(() => drawAll(false), 150);
  });
  document.body.dataset.ready = "true";
}

main();
