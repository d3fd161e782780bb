// Boot and state of the accelerator map page. One view (GET /api/state) drives every part; live updates arrive as
// `version` events on /api/events, each answered with GET /api/state?since=V: a delta (changed nodes by etag,
// removed names, the small parts whole) that is merged in place, so the map rebuilds only the changed visible rows.
// body[data-version] is set after each render completes: the browser tests wait on it.

import { getJSON, getState, getExplain, PodCache } from "./api.js";
import { lineChart } from "./charts.js";
import { AcceleratorMap, NO_GANG, keyClass } from "./map.js";
import { PendingList, explainKey, findEntry } from "./pending.js";
import { WhatIfPanel, pendingPods } from "./whatif.js";
import { renderCapacity } from "./panel.js";
import { renderQueues } from "./queues.js";
import { Tooltip, renderPod, renderPodError, renderNode, openDrawer, closeDrawers } from "./details.js";
import { el, replaceChildren, plural } from "./dom.js";
import { PENDING_COLUMNS, download, pendingRows, toCSV } from "./export.js";

const $ = (id) => document.getElementById(id);

const app = {
  view: null,
  pending: null, // the selected PendingEntry
  explain: null, // its /api/explain body
  explainError: "",
  explainToken: 0,
  whatif: null, // the last /api/whatif body
  mapMode: "today",
  openNode: null,
  openPod: null,
  refreshing: false,
  again: false,
  groupKeys: "",
};

const pods = new PodCache();
const tooltip = new Tooltip($("tooltip"));

/** Pod keys today's view knows (on a node or Pending): the what-if map can show pods that exist only there (copies
 * of DaemonSet pods on added nodes), and asking /api/pod about them would only earn a 404. */
let known = null;
function knownPod(key) {
  if (!known || known.version !== app.view.version) {
    const keys = new Set();
    for (const n of app.view.nodes || []) for (const k of n.pods || []) keys.add(k);
    for (const e of app.view.pending || []) {
      if (e.kind !== "gang") keys.add(e.key);
      for (const m of e.members || []) keys.add(`${m.namespace}/${m.name}`);
    }
    known = { version: app.view.version, keys };
  }
  return known.keys.has(key);
}

function podDetail(key) {
  if (!knownPod(key)) return Promise.reject(new Error("it exists only in the what-if run"));
  return pods.get(key, app.view.version);
}

/** A pod's place in the what-if run, in words, while the map shows it (null while it shows today): the drawer and
 * the tooltip describe today's run, and must not pass for the what-if's. */
function whatifPlacement(key) {
  const r = app.mapMode === "whatif" ? app.whatif : null;
  if (!r) return null;
  const find = (list) => (list || []).find((x) => x.pod === key);
  let x;
  if ((x = find(r.moved))) return `What-if: moves ${x.from} → ${x.to}`;
  if ((x = find(r.placed))) return `What-if: placed on ${x.to}`;
  if ((x = find(r.lost))) return `What-if: loses its place on ${x.from}${x.message ? `: ${x.message}` : ""}`;
  if ((x = find(r.evicted))) {
    return `What-if: evicted from ${x.from}${x.recreated ? ", recreated Pending by its controller" : " and deleted"}`;
  }
  const node = (r.nodes || []).find((n) => (n.pods || []).includes(key));
  if (node) return `What-if: on ${node.name}, as today`;
  if (findEntry(r.pendingAfter || [], key)) return "What-if: still Pending";
  return "What-if: not in the what-if run";
}

const map = new AcceleratorMap($("map"), {
  onHover: (info, e) => tooltip.show(info, e, podDetail, app.mapMode === "whatif" ? whatifPlacement : null),
  onHoverMove: (e) => tooltip.move(e),
  onLeave: () => tooltip.hide(),
  onCell: (info) => {
    if (info.holder) showPod(info.holder);
  },
  onNode: (name) => showNode(name),
  onSelection: () => whatif.selectionChanged(),
});

const pending = new PendingList($("pending"), {
  onSelect: (entry) => selectPending(entry),
  onVerdict: (verdict) => map.setVerdictFilter(verdict),
  onJump: (name) => {
    map.scrollToNode(name);
    showNode(name);
  },
});

const whatif = new WhatIfPanel($("whatif"), {
  selection: () => map.selection(),
  version: () => app.view?.version,
  onResult: (result) => {
    app.whatif = result ? withAllNodes(result) : null;
    if (!result && app.mapMode === "whatif") setMapMode("today");
  },
  onShowMap: (show) => setMapMode(show ? "whatif" : "today"),
  // The URL keeps the actions run last (a link runs them again on open), as it keeps the filter and the node.
  onRan: (actions) => setUrl({ wi: actions ? JSON.stringify(actions) : null }),
  onPod: (key) => showPod(key),
  onNode: (name) => {
    map.scrollToNode(name);
    showNode(name);
  },
});

/** A what-if answer sends only the node views that differ from today's (`nodesDelta`): the map's what-if nodes are
 * those, and today's for the rest, in cluster order (a what-if removes no node; the copies it adds come last). */
function withAllNodes(result) {
  if (!result.nodesDelta) return result;
  const changed = new Map(result.nodes.map((n) => [n.name, n]));
  const nodes = app.view.nodes.map((n) => changed.get(n.name) || n);
  const today = new Set(app.view.nodes.map((n) => n.name));
  for (const n of result.nodes) if (!today.has(n.name)) nodes.push(n);
  return { ...result, nodes, nodesDelta: false };
}

// ---- rendering ------------------------------------------------------------------------------------------------

function mapNodes() {
  return app.mapMode === "whatif" && app.whatif ? app.whatif.nodes : app.view.nodes;
}

function renderStatus() {
  const v = app.view;
  const status = $("status");
  status.querySelector('[data-field="mode"]').textContent = v.mode;
  status.querySelector('[data-field="mode"]').className = `badge mode mode-${v.mode}`;
  status.querySelector('[data-field="source"]').textContent = v.source;
  status.querySelector('[data-field="source"]').title = v.source;
  status.querySelector('[data-field="version"]').textContent = `v${v.version}`;
  renderConnection(status, v.status);
  const c = v.counts || {};
  replaceChildren($("counts"), todayTag("the header counts are today's; the map shows the what-if"),
    count(c.nodes, "nodes"), count(c.devices, "devices"), count(c.freeDevices, "free", "free"),
    count(c.pods, "pods"), count(c.pending, "pending", c.pending ? "pending" : ""));
  const warnings = v.warnings || [];
  const button = $("warnings-button");
  button.hidden = !warnings.length;
  button.textContent = plural(warnings.length, "warning");
  replaceChildren($("warnings"), el("ul", null, warnings.map((w) => el("li", null, w))));
  if (!warnings.length) $("warnings").hidden = true;
  // Pods, as the header's "pending" and the what-if's numbers count them (a gang is its pending members).
  const pendingCount = $("pending-count");
  pendingCount.textContent = plural(pendingPods(v.pending), "pod");
  pendingCount.title = `${plural((v.pending || []).length, "entry", "entries")} (a gang is one entry)`;
}

/** Live mode: whether the informers still watch the API server. Disconnected, the page keeps the last state it had,
 * and must say so rather than pass it off as live. */
function renderConnection(status, conn) {
  let box = status.querySelector('[data-field="connection"]');
  if (!conn) {
    delete status.dataset.connected;
    box?.remove();
    return;
  }
  status.dataset.connected = String(!!conn.connected);
  if (!box) {
    box = el("span", { class: "conn-warning", "data-field": "connection", role: "alert" });
    status.insertBefore(box, $("warnings-button"));
  }
  if (conn.connected) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  const since = String(conn.since || "").replace("T", " ").replace(/Z$/, " UTC");
  box.hidden = false;
  box.textContent = `disconnected from the API server since ${since}: ${conn.error || "unknown error"}`;
  box.title = `${box.textContent}. The page shows the cluster as it was then; it updates again once the watches `
    + "resume.";
}

function todayTag(title) {
  return el("span", { class: "today-tag", title }, "today");
}

/** While the map shows the what-if, everything else on the page (header counts, Pending, capacity) is today's:
 * tag it so, and say where the what-if's numbers are. */
function renderScope() {
  const showing = app.mapMode === "whatif" && app.whatif;
  const r = app.whatif;
  const pendingNote = $("pending-today-note");
  pendingNote.textContent = showing
    ? `This list is today's. In the what-if: ${plural(pendingPods(r.pendingAfter), "pod")} pending `
      + `(today ${pendingPods(r.pendingBefore)}); see the What-if panel.`
    : "";
  $("capacity-today-note").textContent = showing
    ? "Today's capacity. The what-if's is under \u201cCapacity: today vs what-if\u201d in the What-if panel." : "";
}

/** The today tags and notes (their elements are made once; CSS shows them only while body.showing-whatif). */
function addScopeMarks() {
  $("pending-panel").querySelector("h2").appendChild(todayTag("this list is today's; the map shows the what-if"));
  $("capacity").querySelector("h2").appendChild(todayTag("this panel is today's; the map shows the what-if"));
  const note = (id) => el("p", { id, class: "today-note" });
  $("pending-panel").querySelector(".hint").after(note("pending-today-note"));
  $("capacity-body").before(note("capacity-today-note"));
}

function count(n, label, cls = "") {
  return el("span", { class: `count-item ${cls}` }, el("b", null, String(n ?? 0)), ` ${label}`);
}

function renderGroupSelect() {
  const keys = app.view.groupKeys || [];
  const sig = keys.join("\n");
  if (sig === app.groupKeys) return;
  app.groupKeys = sig;
  const select = $("group-by");
  const current = map.groupBy ?? "";
  const options = [el("option", { value: "" }, "(no grouping)"), ...keys.map((k) => el("option", { value: k }, k))];
  replaceChildren(select, options);
  select.value = keys.includes(current) ? current : "";
}

function renderLegend() {
  const { top, more, free } = map.legend(8);
  const items = top.map(([key, n]) => map.colorBy === "gang" && key === NO_GANG
    ? el("span", { class: "legend-item", title: `pods outside any gang: ${plural(n, "device")}` },
      el("span", { class: `swatch held ${keyClass(key, map.colorBy, map.palette)}` }), el("span", { class: "legend-key" }, key),
      el("span", { class: "muted" }, String(n)))
    : el("button", { type: "button", class: "legend-item", "data-filter": key,
      title: `${key}: ${plural(n, "device")} (click: show only its nodes)` },
      el("span", { class: `swatch held ${keyClass(key, map.colorBy, map.palette)}` }), el("span", { class: "legend-key" }, key),
      el("span", { class: "muted" }, String(n))));
  if (more) items.push(el("span", { class: "legend-item muted" }, `+${more} more`));
  items.push(el("span", { class: "legend-item" }, el("span", { class: "swatch free" }), "free",
    el("span", { class: "muted" }, String(free))));
  items.push(el("span", { class: "legend-item key" }, el("span", { class: "swatch mig-key" }), "MIG",
    el("span", { class: "swatch shared-key" }), "shared", el("span", { class: "swatch nic-key" }), "NIC"));
  replaceChildren($("legend"), items);
}

function renderMap() {
  const baseline = app.mapMode === "whatif" ? new Map(app.view.nodes.map((n) => [n.name, n.etag])) : null;
  // The nodes the action changed (the server's list), not every node whose holders differ: with -f input the re-run
  // queue may place Pending pods elsewhere without the action touching their nodes.
  const changed = app.mapMode === "whatif" && app.whatif?.changedNodes ? new Set(app.whatif.changedNodes) : null;
  map.setData(mapNodes(), { gangs: app.view.gangs || {}, baseline, changed });
  renderLegend();
  const banner = $("map-banner");
  banner.hidden = app.mapMode !== "whatif";
  if (app.mapMode === "whatif" && app.whatif) {
    const differ = app.whatif.nodes.filter((n) => baseline.has(n.name) && baseline.get(n.name) !== n.etag).length;
    const added = app.whatif.nodes.filter((n) => !baseline.has(n.name)).length;
    const touched = changed ? [...changed].filter((n) => baseline.has(n)).length : differ;
    const others = differ - touched;
    $("map-banner-text").textContent = `The map shows the what-if run: ${plural(touched, "node")} changed by the `
      + `action, ${added} added${others > 0 ? `; ${others} more differ only in where the run placed pods Pending `
      + "in the input" : ""}. Nothing was written.`;
  }
}

function renderAll() {
  performance.mark("accelsched:render-start");
  renderStatus();
  renderGroupSelect();
  renderMap();
  renderScope();
  pending.render(app.view.pending || []);
  if (app.pending) pending.showExplain(app.explain, app.explainError);
  renderCapacity($("capacity-body"), app.view.capacity || {});
  renderQueues($("queues-panel"), $("queues-body"), app.view.queues);
  whatif.stateChanged(app.view.version);
  document.body.dataset.version = String(app.view.version);
  performance.measure(`accelsched:render v${app.view.version}`, "accelsched:render-start");
}

/** Allocation and Pending pods over the published versions (GET /api/history: a point per version, kept by the
 * server): drawn once there are two, i.e. in live mode, or whenever a state is published again. */
async function renderHistory() {
  let points;
  try {
    points = (await getJSON("/api/history")).points || [];
  } catch {
    return; // the map stays; the next version tries again
  }
  const box = $("history");
  box.hidden = points.length < 2;
  box.dataset.points = String(points.length);
  if (box.hidden) return;
  const t0 = points[0].t;
  const minutes = points[points.length - 1].t - t0 >= 120;
  const x = (p) => (minutes ? (p.t - t0) / 60 : p.t - t0);
  const xLabel = minutes ? "minutes" : "seconds";
  const share = (p, n) => (p.devices ? (100 * n) / p.devices : 0);
  lineChart($("history-alloc"), { title: "Devices over time (% of all)", xLabel, yLabel: "%", height: 150, series: [
    { name: "used", points: points.map((p) => [x(p), share(p, p.used)]) },
    { name: "stranded", points: points.map((p) => [x(p), share(p, p.stranded)]) },
  ] });
  const last = points[points.length - 1].pendingByReason || {};
  const reasons = Object.keys(last).slice(0, 3); // the server sorts by count
  lineChart($("history-pending"), { title: "Pending pods over time", xLabel, yLabel: "pods", height: 150, series: [
    { name: "all", points: points.map((p) => [x(p), p.pending]) },
    ...reasons.map((r) => ({ name: r, points: points.map((p) => [x(p), (p.pendingByReason || {})[r] || 0]) })),
  ] });
}

// ---- state updates --------------------------------------------------------------------------------------------

/** Merge a delta into the current view (or take a full view); the node array keeps cluster order. */
function apply(body) {
  const current = app.view;
  if (!current || !body.delta || body.since !== current.version) {
    app.view = body;
    return;
  }
  const changed = new Map(body.nodes.map((n) => [n.name, n]));
  const removed = new Set(body.removed || []);
  const nodes = [];
  for (const n of current.nodes) {
    if (removed.has(n.name)) continue;
    nodes.push(changed.get(n.name) || n);
    changed.delete(n.name);
  }
  for (const n of changed.values()) nodes.push(n);
  const next = { ...body, nodes };
  delete next.delta;
  delete next.since;
  delete next.removed;
  app.view = next;
}

async function refresh() {
  if (app.refreshing) {
    app.again = true;
    return;
  }
  app.refreshing = true;
  try {
    do {
      app.again = false;
      const body = await getState(app.view ? app.view.version : null);
      if (app.view && body.version === app.view.version && !body.delta) continue;
      apply(body);
      afterUpdate();
    } while (app.again);
  } catch (err) {
    showWarning(`update failed: ${err.message}`);
  } finally {
    app.refreshing = false;
  }
}

/** A new version arrived: re-render, then refresh what depends on it (explanation, open drawers). */
function afterUpdate() {
  if (app.pending) {
    const entry = (app.view.pending || []).find((e) => e.key === app.pending.key);
    if (entry) {
      app.pending = entry;
      explainSelected();
    } else {
      app.pending = null;
      app.explain = null;
      map.setExplain(null);
      setUrl({ pod: null });
    }
  }
  renderAll();
  renderHistory();
  if (app.openNode) showNode(app.openNode, { keepScroll: true });
  if (app.openPod) showPod(app.openPod);
}

function showWarning(text) {
  const box = $("warnings");
  box.hidden = false;
  replaceChildren(box, el("p", { class: "error" }, text));
}

// ---- pending selection and explain ----------------------------------------------------------------------------

function selectPending(entry) {
  app.pending = entry;
  app.explain = null;
  app.explainError = "";
  $("deep-link-error").hidden = true;
  if (!entry) {
    app.explainToken++;
    app.explainAbort?.abort();
    map.setExplain(null);
    delete document.body.dataset.explain;
    setUrl({ pod: null });
    if (app.openNode) showNode(app.openNode, { keepScroll: true });
    return;
  }
  setUrl({ pod: entry.key });
  explainSelected();
}

function explainSelected() {
  const entry = app.pending;
  const token = ++app.explainToken;
  const key = explainKey(entry);
  pending.showExplain(app.explain, "");
  // A newer pick cancels the older request: its answer would be stale, and the server stops computing it.
  app.explainAbort?.abort();
  const abort = (app.explainAbort = new AbortController());
  getExplain(key, { signal: abort.signal }).then(
    (body) => {
      if (token !== app.explainToken) return;
      app.explain = body;
      app.explainError = "";
      map.setExplain(app.mapMode === "whatif" ? null : body.nodes || []); // today's verdicts, not the what-if's
      if (app.mapMode !== "whatif") map.setVerdictFilter(pending.verdict); // a refreshed explanation keeps it
      pending.showExplain(body, "");
      document.body.dataset.explain = entry.key;
      if (app.openNode) showNode(app.openNode, { keepScroll: true });
    },
    (err) => {
      if (token !== app.explainToken || err.name === "AbortError") return;
      app.explainError = err.message;
      map.setExplain(null);
      pending.showExplain(null, err.message);
    },
  );
}

// ---- drawers --------------------------------------------------------------------------------------------------

function showPod(key) {
  app.openPod = key;
  app.openNode = null;
  tooltip.hide();
  const root = $("pod-panel");
  if (root.hidden || root.dataset.key !== key) {
    replaceChildren(root, el("div", { class: "drawer-body" }, el("p", { class: "muted" }, `loading ${key}…`)));
  }
  root.dataset.key = key;
  openDrawer("pod-panel");
  podDetail(key).then(
    (pod) => {
      if (app.openPod !== key) return;
      renderPod(root, pod, {
        onNode: (name) => {
          map.scrollToNode(name);
          showNode(name);
        },
        onPending: (podKey) => {
          const entry = findEntry(app.view.pending || [], podKey);
          if (entry) pending.select(entry.key);
        },
      }, whatifPlacement(key));
    },
    (err) => {
      if (app.openPod !== key) return;
      const whatif = whatifPlacement(key);
      const why = knownPod(key) ? err.message : `no pod ${key} today: ${err.message}`;
      renderPodError(root, key, whatif ? `${whatif}. ${why}` : why);
    },
  );
}

function showNode(name, { keepScroll = false } = {}) {
  const node = mapNodes().find((n) => n.name === name) || app.view.nodes.find((n) => n.name === name);
  const root = $("node-panel");
  if (!node) {
    if (!keepScroll) closeDrawers();
    app.openNode = null;
    return;
  }
  app.openNode = name;
  app.openPod = null;
  const body = root.querySelector(".drawer-body");
  const scroll = keepScroll && body ? body.scrollTop : 0;
  const verdict = app.explain ? (app.explain.nodes || []).find((v) => v.node === name) : undefined;
  renderNode(root, node, {
    pending: app.pending,
    verdict,
    loading: !!app.pending && !app.explain && !app.explainError,
    error: app.explainError,
  }, { onPod: (key) => showPod(key) });
  root.dataset.node = name;
  openDrawer("node-panel");
  setUrl({ node: name });
  if (scroll) root.querySelector(".drawer-body").scrollTop = scroll;
}

function setMapMode(mode) {
  app.mapMode = mode === "whatif" && app.whatif ? "whatif" : "today";
  document.body.classList.toggle("showing-whatif", app.mapMode === "whatif");
  // Explain's verdicts are of today's run: on the what-if map they would mark rows with a stale answer.
  map.setExplain(app.mapMode === "whatif" ? null : app.explain?.nodes || null);
  renderMap();
  renderScope();
  if (app.openNode) showNode(app.openNode, { keepScroll: true });
  if (app.openPod) showPod(app.openPod);
}

// ---- URL, controls, boot --------------------------------------------------------------------------------------

function setUrl(changes) {
  const url = new URL(location.href);
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === undefined || v === "") url.searchParams.delete(k);
    else url.searchParams.set(k, v);
  }
  history.replaceState(null, "", url);
}

async function deepLink(key) {
  const entry = findEntry(app.view.pending || [], key);
  if (entry) {
    pending.select(entry.key);
    return;
  }
  // Only ask the server about a pod the view knows (bound or placed on a node): no 404 for a mistyped link.
  if (knownPod(key)) {
    showPod(key);
    return;
  }
  const box = $("deep-link-error");
  box.textContent = `no pod ${key}`;
  box.hidden = false;
}

function wireControls(params) {
  const group = $("group-by");
  group.addEventListener("change", () => {
    map.setGroupBy(group.value || null);
    setUrl({ group: group.value || "none" });
    whatif.selectionChanged();
  });
  const color = $("color-by");
  const wanted = params.get("color");
  if (["pod", "namespace", "gang"].includes(wanted)) color.value = wanted;
  map.setColorBy(color.value);
  color.addEventListener("change", () => {
    map.setColorBy(color.value);
    renderLegend();
    setUrl({ color: color.value === "pod" ? null : color.value });
  });
  const filter = $("node-filter");
  let timer = 0;
  filter.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      map.setFilter(filter.value);
      pending.setQuery(filter.value);
      setUrl({ q: filter.value });
    }, 120);
  });
  const wantedQuery = params.get("q");
  if (wantedQuery) {
    filter.value = wantedQuery;
    map.setFilter(wantedQuery);
    pending.setQuery(wantedQuery);
  }
  const groupPending = $("pending-group");
  const wantedGroup = params.get("pgroup");
  if (["reason", "namespace", "owner"].includes(wantedGroup)) groupPending.value = wantedGroup;
  pending.setGroupBy(groupPending.value);
  groupPending.addEventListener("change", () => {
    pending.setGroupBy(groupPending.value);
    setUrl({ pgroup: groupPending.value });
  });
  $("legend").addEventListener("click", (e) => {
    const item = e.target.closest("[data-filter]");
    if (!item) return;
    const key = item.getAttribute("data-filter");
    filter.value = filter.value === key ? "" : key;
    map.setFilter(filter.value);
    pending.setQuery(filter.value);
  });
  $("map-banner-back").addEventListener("click", () => {
    whatif.showing = false;
    whatif.renderToggle();
    setMapMode("today");
  });
  $("pending-csv").addEventListener("click", () => {
    download("pending.csv", toCSV(PENDING_COLUMNS, pendingRows(app.view.pending)), "text/csv");
  });
  $("pending-json").addEventListener("click", () => {
    download("pending.json", `${JSON.stringify(app.view.pending || [], null, 2)}\n`, "application/json");
  });
  $("warnings-button").addEventListener("click", () => {
    $("warnings").hidden = !$("warnings").hidden;
  });
  document.addEventListener("click", (e) => {
    if (e.target.closest("[data-close]")) {
      closeDrawers();
      app.openNode = null;
      app.openPod = null;
      setUrl({ node: null });
    }
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      closeDrawers();
      app.openNode = null;
      app.openPod = null;
      setUrl({ node: null });
      tooltip.hide();
    } else if (e.key === "/" && !/^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement?.tagName || "")) {
      e.preventDefault();
      filter.focus();
    }
  });
}

function connect() {
  const live = document.querySelector('#status [data-field="live"]');
  // Only live mode follows a cluster: files and the demo are read once, and a green dot would say otherwise. The
  // event stream is still held (a Hub may publish a new state, as the benchmark does), without the claim.
  const following = () => app.view?.mode === "live";
  if (!following()) {
    live.textContent = "static snapshot";
    live.classList.add("static");
    live.title = "read once from the input: the page does not follow a cluster (accelsched ui --from-cluster does)";
  }
  const source = new EventSource("/api/events");
  source.addEventListener("open", () => {
    if (!following()) return;
    live.classList.add("on");
    live.title = "connected: updates arrive as they happen";
    // No refetch here: the server's first event is its current version, which tells whether anything was missed.
  });
  source.addEventListener("error", () => {
    if (!following()) return;
    live.classList.remove("on");
    live.title = "disconnected: reconnecting";
  });
  source.addEventListener("version", (e) => {
    let version = null;
    try {
      version = JSON.parse(e.data).version;
    } catch {
      return;
    }
    if (!app.view || version !== app.view.version) refresh();
  });
}

async function boot() {
  const params = new URLSearchParams(location.search);
  try {
    app.view = await getState(null);
  } catch (err) {
    showWarning(`could not load the state: ${err.message}`);
    return;
  }
  wireControls(params);
  addScopeMarks();
  const g = params.get("group");
  const keys = app.view.groupKeys || [];
  map.groupBy = g === "none" ? null : g && keys.includes(g) ? g : app.view.groupBy || null;
  renderAll();
  $("group-by").value = map.groupBy ?? "";
  whatif.selectionChanged();
  renderHistory();
  const pod = params.get("pod");
  if (pod) await deepLink(pod);
  const staged = params.get("wi");
  if (staged) {
    try {
      whatif.restore(JSON.parse(staged));
    } catch {
      showWarning("the link's what-if actions are not JSON; nothing was run");
    }
  }
  const node = params.get("node");
  if (node && app.view.nodes.some((n) => n.name === node)) {
    map.scrollToNode(node);
    showNode(node);
  }
  connect();
}

boot();
