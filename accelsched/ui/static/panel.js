// The fragmentation & capacity panel: the numbers `schedule` prints, as charts and one-line sentences. Free devices
// by type (used / free / stranded), the largest shapes nodes can still take, capacity stranded on nodes no new pod
// can use, the split devices' fragmentation, and DRA devices free. Built from capacity.panel's JSON (see spec).

import { barChart } from "./charts.js";
import { el, replaceChildren, shortResource, plural } from "./dom.js";

export const COLORS = { used: "#4e79a7", free: "#59a14f", stranded: "#e15759", fragmented: "#f28e2b" };
const STRANDED_ROWS = 12;

function chartBox(cls = "chart-box") {
  return el("div", { class: cls });
}

function numberTable(head, rows, cls = "num-table") {
  const table = el("table", { class: cls });
  table.appendChild(el("thead", null, el("tr", null, head.map((h) => el("th", null, h)))));
  const body = el("tbody");
  for (const r of rows) body.appendChild(el("tr", null, r.map((c, i) => (i === 0 ? el("th", { title: String(c) }, c)
    : el("td", null, c === null || c === undefined ? "—" : String(c))))));
  table.appendChild(body);
  return table;
}

/** Charts are drawn after the boxes are in the document, so they can size themselves to the panel's width. */
function draw(jobs) {
  for (const [box, opts] of jobs) {
    try {
      barChart(box, opts);
    } catch (err) {
      replaceChildren(box, el("p", { class: "error" }, `chart: ${err.message}`));
    }
  }
}

export function renderCapacity(root, cap) {
  const jobs = [];
  const parts = [];
  const resources = cap.resources || [];

  const sentences = el("ul", { class: "sentences" });
  for (const s of cap.sentences || []) sentences.appendChild(el("li", { class: "sentence" }, s));
  if (!(cap.sentences || []).length) sentences.appendChild(el("li", { class: "muted" }, "no device capacity"));
  parts.push(sentences);

  const physical = cap.physical || [];
  if (physical.length) {
    parts.push(deviceTable(physical));
    const top = [...physical].sort((a, b) => b.devices - a.devices).slice(0, 5);
    const box = chartBox();
    parts.push(box);
    jobs.push([box, {
      title: physical.length > top.length ? `Devices by type (the ${top.length} largest)` : "Devices by type",
      categories: top.map((r) => label(r.resource)),
      series: [
        { name: "used", values: top.map((r) => r.used), color: COLORS.used },
        { name: "free", values: top.map((r) => Math.max(0, r.free - r.stranded)), color: COLORS.free },
        { name: "stranded", values: top.map((r) => r.stranded), color: COLORS.stranded },
      ],
      stacked: true,
      unit: "devices",
      height: 150,
      legend: true,
    }]);
  }
  if (resources.length) {
    for (const r of topResources(resources, 2)) {
      if (!(r.shapes || []).length) continue;
      const shapes = el("div", { class: "chart-box" });
      parts.push(shapes);
      jobs.push([shapes, {
        title: `Nodes that can still take an N-${label(r.resource)} pod`,
        categories: r.shapes.map((s) => String(s.size)),
        series: [{ name: "nodes", values: r.shapes.map((s) => s.nodes), color: COLORS.free }],
        unit: "nodes",
        height: 130,
      }]);
    }
  }

  const partitions = cap.partitions || [];
  if (partitions.length) {
    parts.push(el("h3", null, "Split devices"));
    parts.push(numberTable(["mode", "used", "free", "fragmented", "total"],
      partitions.map((p) => [`${p.mode} (${p.unit})`, p.used, p.free, p.fragmented, p.total])));
    const box = chartBox();
    parts.push(box);
    jobs.push([box, {
      title: "Fragmentation of split devices",
      categories: partitions.map((p) => p.mode),
      series: [
        { name: "used", values: partitions.map((p) => p.used), color: COLORS.used },
        { name: "free", values: partitions.map((p) => Math.max(0, p.free - p.fragmented)), color: COLORS.free },
        { name: "fragmented", values: partitions.map((p) => p.fragmented), color: COLORS.fragmented },
      ],
      stacked: true,
      height: 120,
      legend: true,
    }]);
  }

  const dra = cap.dra || [];
  if (dra.length) {
    parts.push(el("h3", null, "DRA devices"));
    parts.push(numberTable(["driver", "devices", "free"], dra.map((d) => [d.driver, d.devices, d.free])));
  }

  const stranded = cap.stranded || [];
  if (stranded.length) {
    parts.push(el("h3", null, `Stranded (${plural(stranded.length, "node")})`));
    const rows = stranded.slice(0, STRANDED_ROWS).map((s) => [s.node, shortResource(s.resource), s.free, s.why]);
    const table = numberTable(["node", "device", "free", "why"], rows, "num-table stranded");
    parts.push(table);
    if (stranded.length > STRANDED_ROWS) {
      parts.push(el("p", { class: "muted" }, `and ${stranded.length - STRANDED_ROWS} more`));
    }
  }
  replaceChildren(root, parts);
  draw(jobs);
}

/** Physical devices by type, one row each (a MIG-split or time-sliced GPU is one GPU), with what their partitions
 * serve under them in their own units (MIG instances per profile, replicas): no row adds replicas to devices. */
function deviceTable(physical) {
  const table = el("table", { class: "num-table device-types" });
  table.appendChild(el("thead", null, el("tr", null, ["device", "total", "used", "free", "stranded"].map(
    (h) => el("th", null, h)))));
  const body = el("tbody");
  const td = (v) => el("td", null, v === null || v === undefined ? "—" : String(v));
  for (const p of physical) {
    body.appendChild(el("tr", { class: "physical", "data-resource": p.resource },
      el("th", { title: `${p.resource}: physical devices` }, p.resource), td(p.devices), td(p.used), td(p.free),
      td(p.stranded)));
    for (const x of p.split || []) {
      const what = x.mode === "mig" ? `MIG ${label(x.resource)}` : `${x.mode} ${label(x.resource)}`;
      body.appendChild(el("tr", { class: "split", "data-parent": p.resource, "data-resource": x.resource },
        el("th", { title: `${x.resource}: ${x.unit} on ${p.resource} devices split by ${x.mode}` },
          `↳ ${what} (${x.unit})`), td(x.total), td(x.used), td(x.free), td(null)));
    }
  }
  table.appendChild(body);
  return table;
}

/** Today against the what-if (used by whatif.js): totals, the device types that changed, split-device fragmentation. */
export function renderCapacityCompare(root, before, after) {
  const jobs = [];
  const names = [...new Set([...(before.resources || []), ...(after.resources || [])].map((r) => r.resource))];
  const pick = (cap, name) => (cap.resources || []).find((r) => r.resource === name) || {};
  // Physical devices, each once (capacity.py physical_devices): MIG profiles' counts overlap, so no sum of them.
  const sum = (cap, field) => (cap.devices || {})[field] ?? 0;
  const rows = [
    ["devices free", sum(before, "free"), sum(after, "free"), delta(sum(before, "free"), sum(after, "free"))],
    ["devices stranded", sum(before, "stranded"), sum(after, "stranded"),
      delta(sum(before, "stranded"), sum(after, "stranded"))],
  ];
  const changed = [];
  for (const name of names) {
    const b = pick(before, name);
    const a = pick(after, name);
    const sizes = [...(b.shapes || []), ...(a.shapes || [])].map((x) => x.size);
    const size = sizes.length ? Math.max(...sizes) : 0;
    const at = (r) => ((r.shapes || []).find((x) => x.size === size) || { nodes: 0 }).nodes;
    const same = (b.free ?? 0) === (a.free ?? 0) && (b.stranded ?? 0) === (a.stranded ?? 0) && at(b) === at(a);
    if (same) continue;
    changed.push(name);
    const short = label(name);
    rows.push([`${short} free`, usableFree(b), usableFree(a), delta(usableFree(b), usableFree(a))]);
    rows.push([`${short} stranded`, b.stranded ?? 0, a.stranded ?? 0, delta(b.stranded, a.stranded)]);
    if (size) rows.push([`${short}: nodes fitting ${size}`, at(b), at(a), delta(at(b), at(a))]);
  }
  for (const p of before.partitions || []) {
    const q = (after.partitions || []).find((x) => x.mode === p.mode) || {};
    rows.push([`${p.mode} free (${p.unit})`, p.free, q.free ?? 0, delta(p.free, q.free)]);
    rows.push([`${p.mode} fragmented (${p.unit})`, p.fragmented, q.fragmented ?? 0, delta(p.fragmented, q.fragmented)]);
  }
  const parts = [numberTable(["", "today", "what-if", "Δ"], rows, "num-table compare")];
  if (!changed.length) {
    parts.push(el("p", { class: "muted" }, "No device type's free, stranded or placeable capacity changes."));
  }
  const shown = (changed.length ? changed : topResources(before.resources || [], 4).map((r) => r.resource)).slice(0, 5);
  if (shown.length) {
    const box = chartBox();
    parts.push(box);
    jobs.push([box, {
      title: "Free devices: today vs what-if",
      categories: shown.map(label),
      series: [
        { name: "today", values: shown.map((n) => usableFree(pick(before, n))), color: "#9aa7b8" },
        { name: "what-if", values: shown.map((n) => usableFree(pick(after, n))), color: COLORS.used },
      ],
      height: 130,
      legend: true,
    }]);
  }
  replaceChildren(root, parts);
  draw(jobs);
}

/** Free devices a new pod can use: a stranded one (cordoned, tainted, ...) is no free one, so a drain, which
 * cordons, does not raise it. */
function usableFree(r) {
  return (r.free ?? 0) - (r.stranded ?? 0);
}

/** The device types with the most devices: a chart axis has room for about five names. */
function topResources(resources, n) {
  return [...resources].sort((a, b) => (b.allocatable || 0) - (a.allocatable || 0)).slice(0, n);
}

/** "nvidia.com/mig-1g.5gb" -> "1g.5gb", "qualcomm.com/ai-accelerator" -> "ai-accelerator". */
function label(resource) {
  return shortResource(resource).replace(/^mig-/, "");
}

function delta(b, a) {
  const d = (a ?? 0) - (b ?? 0);
  return d === 0 ? "" : d > 0 ? `+${d}` : String(d);
}
