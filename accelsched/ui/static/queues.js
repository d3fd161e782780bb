// The queue panel: Kueue's ClusterQueues by cohort, each flavor's quota, usage and borrowing per resource, and the
// workloads Kueue has not admitted with their QuotaReserved message. Built from queues.py's JSON (the view's
// `queues`: `schedule -o json`'s clusterQueues and workloads, plus quota); hidden when the input has no Kueue objects.

import { el, replaceChildren, plural } from "./dom.js";

const COLUMNS = ["ClusterQueue", "flavor", "resource", "used", "nominal", "borrowed", "borrowing limit"];

function quotaRows(name, entry, kind) {
  const rows = [];
  for (const [flavor, resources] of Object.entries(entry.usage || {})) {
    for (const [resource, used] of Object.entries(resources)) {
      const borrowed = kind === "cq" ? entry.borrowed[flavor][resource] : null;
      const limit = kind === "cq" ? ((entry.borrowingLimit || {})[flavor] || {})[resource] : null;
      const cells = { used, nominal: entry.nominal[flavor][resource], borrowed, limit };
      rows.push(el("tr", { [`data-${kind}`]: name, "data-flavor": flavor, "data-resource": resource,
        class: borrowed && borrowed !== "0" ? "borrowing" : null },
        el("th", { scope: "row" }, kind === "cq" ? name : `cohort ${name}`),
        el("td", null, flavor), el("td", null, resource),
        Object.entries(cells).map(([field, value]) => el("td", { "data-field": field }, value ?? "—"))));
    }
  }
  return rows;
}

function queueTable(cqs, cohort) {
  const table = el("table", { class: "num-table queue-table" });
  table.appendChild(el("thead", null, el("tr", null, COLUMNS.map((h) => el("th", { scope: "col" }, h)))));
  const body = el("tbody");
  for (const cq of cqs) body.append(...quotaRows(cq.name, cq, "cq"));
  if (cohort) body.append(...quotaRows(cohort.name, cohort, "cohort"));
  table.appendChild(body);
  return table;
}

export function renderQueues(section, root, q) {
  section.hidden = !q;
  if (!q) return;
  const parts = [];
  const byName = new Map(q.clusterQueues.map((cq) => [cq.name, cq]));
  const grouped = new Set();
  for (const cohort of q.cohorts) {
    const cqs = cohort.clusterQueues.map((n) => byName.get(n));
    cqs.forEach((cq) => grouped.add(cq.name));
    parts.push(el("h3", null, `Cohort ${cohort.name}: ${plural(cqs.length, "ClusterQueue")}`), queueTable(cqs, cohort));
  }
  const alone = q.clusterQueues.filter((cq) => !grouped.has(cq.name));
  if (alone.length) parts.push(el("h3", null, "Without a cohort"), queueTable(alone, null));
  const admitted = Object.entries(q.admitted || {}).map(([cq, n]) => `${cq} ${n}`).join(", ");
  parts.push(el("p", { class: "muted" }, `Admitted workloads: ${admitted || "none"}`));
  parts.push(el("h3", null, `Queued, not admitted (${q.queued.length})`));
  const list = el("ul", { class: "queued" });
  for (const w of q.queued) {
    list.appendChild(el("li", { "data-workload": `${w.namespace}/${w.name}` },
      el("span", { class: "wl-name" }, `${w.namespace}/${w.name}`),
      el("span", { class: "muted" }, ` in ${w.localQueue} \u2192 ${w.clusterQueue || "?"}`),
      el("div", { class: "message" }, w.message)));
  }
  if (!q.queued.length) list.appendChild(el("li", { class: "muted" }, "none"));
  parts.push(list);
  replaceChildren(root, parts);
}
