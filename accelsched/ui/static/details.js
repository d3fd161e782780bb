// The map's hover tooltip and the two drawers: #pod-panel (a pod's detail from /api/pod) and #node-panel (a node's
// facts plus `explain`'s verdict for the selected Pending pod on it). All content is built with el(): text only.

import { el, factList, kvTable, replaceChildren, shortResource } from "./dom.js";

// ---- tooltip ----------------------------------------------------------------------------------------------------

export class Tooltip {
  constructor(root) {
    this.root = root;
    this.token = 0;
  }

  /** info: from AcceleratorMap.info(); podDetail(key) -> Promise of the pod detail (cached per version);
   * whatifText(key) -> the pod's what-if placement in words, or null when the map shows today. */
  show(info, event, podDetail, whatifText = null) {
    const token = ++this.token;
    const { node, cell, slot, nic, holder } = info;
    const body = [];
    if (nic) {
      body.push(el("div", { class: "tt-title" }, `${node.name} / ${nic.id}`), el("div", { class: "tt-sub" }, "NIC"));
      const holders = nic.holders || [];
      body.push(el("div", { class: "tt-row" }, holders.length ? `used by ${holders.join(", ")}` : "no pod aligned"));
    } else {
      body.push(el("div", { class: "tt-title" }, `${node.name} / ${cell.id}`));
      const sub = [cell.resource, cell.kind === "device" ? null : cell.kind].filter(Boolean).join(" · ");
      body.push(el("div", { class: "tt-sub" }, sub));
      if (slot) {
        body.push(el("div", { class: "tt-row" },
          `MIG ${slot.profile} at slices ${slot.start}–${slot.start + slot.size - 1} of ${cell.slotCount}`));
      } else if (cell.kind === "mig") {
        const used = (cell.slots || []).filter((s) => s.holder).reduce((a, s) => a + s.size, 0);
        body.push(el("div", { class: "tt-row" }, `MIG: ${used} of ${cell.slotCount} slices held`));
      }
      if (cell.share) {
        body.push(el("div", { class: "tt-row" }, `share ${cell.share.used}/${cell.share.total} ${cell.share.unit}`));
      }
      if (cell.driver) body.push(el("div", { class: "tt-row" }, `DRA ${cell.driver} · pool ${cell.pool || "—"}`));
      const others = (cell.holders || []).filter((h) => h !== holder);
      if (!holder && !(cell.holders || []).length) body.push(el("div", { class: "tt-free" }, "free"));
      else if (others.length && !slot) body.push(el("div", { class: "tt-row muted" }, `also ${others.join(", ")}`));
    }
    const podBox = el("div", { class: "tt-pod" });
    if (holder) {
      podBox.appendChild(el("div", { class: "tt-holder", "data-field": "holder" }, holder));
      podBox.appendChild(el("div", { class: "tt-row muted" }, "loading requests…"));
      podDetail(holder).then(
        (pod) => {
          if (token !== this.token) return;
          const whatif = whatifText ? whatifText(holder) : null;
          const today = `${pod.phase}${pod.node ? ` on ${pod.node}` : ""}`;
          replaceChildren(podBox, el("div", { class: "tt-holder", "data-field": "holder" }, holder),
            el("div", { class: "tt-row", "data-field": "requests" }, formatRequests(pod.requests)),
            el("div", { class: "tt-row", "data-field": "alignment" }, formatAlignment(pod.alignment)),
            el("div", { class: "tt-row muted" },
              `${whatif ? `today: ${today}` : pod.phase}${pod.gang ? ` · gang ${pod.gang}` : ""}`),
            whatif ? el("div", { class: "tt-row whatif-place", "data-field": "whatif" }, whatif) : null);
          this.place(this.x, this.y);
        },
        (err) => {
          if (token !== this.token) return;
          const whatif = whatifText ? whatifText(holder) : null;
          replaceChildren(podBox, el("div", { class: "tt-holder" }, holder),
            whatif ? el("div", { class: "tt-row whatif-place", "data-field": "whatif" }, whatif) : null,
            el("div", { class: "tt-row error" }, err.message));
        },
      );
    }
    replaceChildren(this.root, body, podBox);
    this.root.hidden = false;
    this.root.classList.add("visible");
    this.move(event);
  }

  move(event) {
    this.place(event.clientX, event.clientY);
  }

  place(x, y) {
    this.x = x;
    this.y = y;
    const r = this.root.getBoundingClientRect();
    const left = x + 14 + r.width > window.innerWidth ? x - r.width - 10 : x + 14;
    const top = y + 16 + r.height > window.innerHeight ? y - r.height - 10 : y + 16;
    this.root.style.left = `${Math.max(4, left)}px`;
    this.root.style.top = `${Math.max(4, top)}px`;
  }

  hide() {
    this.token++;
    this.root.hidden = true;
    this.root.classList.remove("visible");
  }
}

export function formatRequests(requests) {
  const parts = Object.entries(requests || {}).map(([k, v]) => `${shortResource(k)} ${v}`);
  return parts.length ? `requests ${parts.join(", ")}` : "no requests";
}

export function formatAlignment(alignment) {
  const a = alignment || {};
  const parts = [];
  if (a.numaNodes) parts.push(`NUMA ${a.numaNodes}`);
  if (a.nic) parts.push(`NIC ${a.nic}`);
  return parts.length ? `aligned: ${parts.join(" · ")}` : "alignment: none recorded";
}

function alignmentText(alignment) {
  const a = alignment || {};
  const parts = [];
  if (a.numaNodes) parts.push(`NUMA ${a.numaNodes}`);
  if (a.nic) parts.push(`NIC ${a.nic}`);
  return parts.join(" · ") || "none recorded";
}

// ---- drawers ----------------------------------------------------------------------------------------------------

/** Open one drawer, close the other: the two share the right edge of the page. */
export function openDrawer(which) {
  for (const id of ["pod-panel", "node-panel"]) {
    const d = document.getElementById(id);
    d.hidden = id !== which;
    d.classList.toggle("open", id === which);
  }
}

export function closeDrawers() {
  for (const id of ["pod-panel", "node-panel"]) {
    const d = document.getElementById(id);
    d.hidden = true;
    d.classList.remove("open");
  }
}

function drawerHead(kind, title, extra) {
  return el("header", { class: "drawer-head" },
    el("div", null, el("span", { class: "drawer-kind" }, kind), el("h2", { class: "drawer-title", title }, title)),
    extra, el("button", { type: "button", class: "close", "data-close": "", "aria-label": "close" }, "×"));
}

function devicesList(devices) {
  const entries = Object.entries(devices || {});
  if (!entries.length) return "none";
  const ul = el("ul", { class: "plain" });
  for (const [res, ids] of entries) {
    ul.appendChild(el("li", null, el("span", { class: "muted" }, `${res}: `), (ids || []).join(", ")));
  }
  return ul;
}

/** pod: /api/pod's body (today's run). hooks: onNode(name), onPending(key). whatif: the pod's placement in the
 * what-if run in words while the map shows it (the detail below is then labelled "today"), else null. */
export function renderPod(root, pod, hooks = {}, whatif = null) {
  const actions = el("div", { class: "drawer-actions" });
  if (pod.node) {
    actions.appendChild(el("button", { type: "button", class: "link", "data-action": "node" }, `show ${pod.node}`));
  }
  if (!pod.node || pod.phase === "Pending" || pod.phase === "Gated" || pod.phase === "Preempted") {
    actions.appendChild(el("button", { type: "button", class: "link", "data-action": "why" }, "why Pending"));
  }
  actions.addEventListener("click", (e) => {
    const a = e.target.closest("[data-action]");
    if (!a) return;
    if (a.getAttribute("data-action") === "node") hooks.onNode?.(pod.node);
    else hooks.onPending?.(pod.key);
  });
  const claims = pod.claims && pod.claims.length
    ? el("pre", { class: "json" }, JSON.stringify(pod.claims, null, 2)) : "none";
  replaceChildren(root,
    drawerHead("pod", pod.key),
    el("div", { class: "drawer-body" },
      whatif ? el("p", { class: "whatif-place", "data-field": "whatif" }, whatif) : null,
      el("p", { class: `phase-line phase-${String(pod.phase).toLowerCase()}` },
        whatif ? el("span", { class: "scope", title: "the detail below is of today's run" }, "today") : null,
        el("span", { class: "status", "data-field": "phase" }, pod.phase),
        pod.node ? [" on ", el("strong", { "data-field": "node" }, pod.node)]
          : el("span", { "data-field": "node" }, ""),
      ),
      actions,
      factList([
        ["namespace", pod.namespace, "namespace"],
        ["name", pod.name, "name"],
        ["priority", String(pod.priority ?? 0), "priority"],
        ["gang", pod.gang, "gang"],
        ["owner", pod.owner, "owner"],
        ["alignment", alignmentText(pod.alignment), "alignment"],
        ["message", pod.message, "message"],
      ]),
      el("h3", null, "Requests"), wrapField("requests", kvTable(pod.requests)),
      el("h3", null, "Devices"), wrapField("devices", devicesList(pod.devices)),
      el("h3", null, "Claims"), wrapField("claims", claims),
      el("details", null, el("summary", null, `Labels (${Object.keys(pod.labels || {}).length})`),
        wrapField("labels", kvTable(pod.labels))),
      el("details", null, el("summary", null, `Annotations (${Object.keys(pod.annotations || {}).length})`),
        wrapField("annotations", kvTable(pod.annotations))),
    ));
}

function wrapField(field, child) {
  return el("div", { "data-field": field }, child);
}

/** A pod panel saying why it could not be shown (no such pod): the key given, as text. */
export function renderPodError(root, key, message) {
  replaceChildren(root, drawerHead("pod", key),
    el("div", { class: "drawer-body" }, el("p", { class: "error" }, message)));
}

/**
 * node: its NodeView; pending: the selected PendingEntry or null; verdict: its explain verdict on this node (or
 * undefined while loading); hooks: onPod(key).
 */
export function renderNode(root, node, { pending, verdict, loading, error } = {}, hooks = {}) {
  const body = el("div", { class: "drawer-body" });
  const state = [];
  if (node.unschedulable) state.push(el("span", { class: "flag cordoned" }, "cordoned"));
  for (const t of node.taints || []) state.push(el("span", { class: "flag taint" }, t));
  if (!state.length) state.push(el("span", { class: "flag ok" }, "schedulable"));
  body.appendChild(el("p", { class: "flag-line" }, state));

  // Why the selected pending pod does or does not fit here.
  const why = el("section", { class: "explain" });
  if (!pending) {
    why.appendChild(el("p", { class: "muted" },
      "Select a Pending pod to see, for this node, the filter that stops it and what would make it fit."));
  } else {
    why.appendChild(el("h3", null, `${pending.key} on ${node.name}`));
    if (error) why.appendChild(el("p", { class: "error" }, error));
    else if (loading || !verdict) {
      why.appendChild(el("p", { class: "muted" }, loading ? "explaining…" : "no verdict"));
    }
    else {
      why.appendChild(el("p", { class: verdict.feasible ? "verdict ok" : "verdict bad", "data-field": "verdict" },
        verdict.feasible ? "fits: every filter passes" : `blocked by ${verdict.filter}`));
      if (!verdict.feasible && (verdict.failingFilters || []).length > 1) {
        why.appendChild(el("p", { class: "muted" }, `failing filters: ${verdict.failingFilters.join(", ")}`));
      }
      if ((verdict.reasons || []).length) {
        why.appendChild(el("ul", { class: "reasons" }, verdict.reasons.map((r) => el("li", { class: "reason" }, r))));
      }
      if ((verdict.details || []).length) {
        why.appendChild(el("h4", null, "Facts"));
        why.appendChild(el("ul", { class: "details" }, verdict.details.map((d) => el("li", { class: "detail" }, d))));
      }
      if ((verdict.remedies || []).length) {
        why.appendChild(el("h4", null, "Remedies"));
        why.appendChild(el("ul", { class: "remedies" }, verdict.remedies.map((r) => el("li", { class: "remedy" }, r))));
      }
      if (verdict.feasible && verdict.score !== undefined && verdict.score !== null) {
        why.appendChild(el("p", null, `score ${Math.round(verdict.score)}`));
        if (verdict.scores && Object.keys(verdict.scores).length) why.appendChild(kvTable(verdict.scores));
      }
      if (verdict.claims) why.appendChild(claimFunnel(verdict.claims));
    }
  }
  body.appendChild(why);

  // Resources: allocatable against requested, and free devices.
  const table = el("table", { class: "kv res" });
  table.appendChild(el("thead", null, el("tr", null, el("th", null, "resource"), el("th", null, "allocatable"),
    el("th", null, "requested"), el("th", { title: "allocatable - requested: what a pod can still request here" }, "free"))));
  const tbody = el("tbody");
  const names = new Set([...Object.keys(node.allocatable || {}), ...Object.keys(node.requested || {})]);
  for (const res of names) {
    const free = freeOf(node, res);
    tbody.appendChild(el("tr", null, el("th", { title: res }, res),
      el("td", null, String(node.allocatable?.[res] ?? "")),
      el("td", null, String(node.requested?.[res] ?? "")), el("td", null, free)));
  }
  // Devices that are no resource of the node's own (DRA devices by driver, MIG-split GPUs): how many no pod holds.
  for (const [res, n] of Object.entries(node.free || {})) {
    if (names.has(res)) continue;
    tbody.appendChild(el("tr", null, el("th", { title: res }, res), el("td", null, "—"), el("td", null, "—"),
      el("td", { title: "devices no pod holds" }, String(n))));
  }
  table.appendChild(tbody);
  body.appendChild(el("h3", null, "Resources"));
  body.appendChild(table);
  if (node.policy) body.appendChild(el("p", { class: "muted" }, `Topology Manager policy: ${node.policy}`));

  const pods = el("ul", { class: "pod-links" });
  for (const key of node.pods || []) {
    pods.appendChild(el("li", null, el("button", { type: "button", class: "link", "data-pod": key }, key)));
  }
  pods.addEventListener("click", (e) => {
    const b = e.target.closest("[data-pod]");
    if (b) hooks.onPod?.(b.getAttribute("data-pod"));
  });
  body.appendChild(el("h3", null, `Pods (${(node.pods || []).length})`));
  body.appendChild((node.pods || []).length ? pods : el("p", { class: "muted" }, "none"));
  body.appendChild(el("details", null, el("summary", null, `Labels (${Object.keys(node.labels || {}).length})`),
    kvTable(node.labels)));
  replaceChildren(root, drawerHead("node", node.name), body);
}

/** What a pod can still request of a device resource here (allocatable - requested: MIG instances of a profile,
 * replicas, cards), 0 said as 0; blank for cpu, memory and pods (their quantities are formatted). */
function freeOf(node, res) {
  if (!res.includes("/")) return "";
  const n = Number(node.allocatable?.[res] ?? 0) - Number(node.requested?.[res] ?? 0);
  return Number.isFinite(n) ? String(n) : "";
}

/**
 * A DRA pod's requests on one node, device by device (explain's funnel): the node's devices, those of the request's
 * class, those its selectors match, those held by other claims, and the free ones, with what cut each step short.
 */
function claimFunnel(claims) {
  const head = el("tr", null, ["request", "needs", "on node", "of class", "match", "held", "free"].map(
    (h) => el("th", null, h)));
  const rows = claims.map((c) => {
    const held = Object.values(c.allocated || {}).reduce((a, b) => a + b, 0);
    const free = (c.free || []).length;
    const holders = Object.entries(c.allocated || {}).map(([who, n]) => `${n} held by ${who}`);
    const cuts = [
      c.classMissing ? `no DeviceClass ${c.deviceClassName}` : null,
      ...Object.entries(c.failingSelectors || {}).map(([sel, n]) => `${n} fail ${sel}`),
      ...(c.celErrors || []),
      ...Object.entries(c.untoleratedTaints || {}).map(([t, n]) => `${n} tainted ${t}`),
      ...Object.entries(c.counterSetsExhausted || {}).map(([set, n]) => `${n} short of counters in ${set}`),
      c.capacityExhausted ? `${c.capacityExhausted} without the capacity asked` : null,
      ...holders,
    ].filter(Boolean);
    const short = free < (c.needed ?? 0);
    return [
      el("tr", { class: short ? "claim-short" : null, "data-request": c.request },
        el("th", { title: `${c.claim} (${c.deviceClassName})` }, c.request),
        el("td", null, String(c.needed ?? "all")), el("td", null, String(c.nodeDevices ?? "")),
        el("td", null, String(c.ofClass ?? "")), el("td", null, String(c.matching ?? "")),
        el("td", null, String(held)), el("td", { class: short ? "bad" : null }, String(free))),
      cuts.length ? el("tr", { class: "claim-why" }, el("td", { colspan: "7" }, cuts.join("; "))) : null,
    ];
  });
  return el("div", { class: "claims" }, el("h4", null, "DRA devices on this node"),
    el("table", { class: "kv funnel" }, el("thead", null, head), el("tbody", null, rows)));
}
