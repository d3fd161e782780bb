// The Pending list: every pod the run left without a node, largest first (the server sorts), a gang as one entry with
// its members. Selecting an entry asks /api/explain for it; the map then marks each node's first failing filter.
// `.message` is kube-scheduler's message exactly as `schedule -o json` has it: shown whole, never rewritten.

import { el, replaceChildren, shortResource, plural } from "./dom.js";

/** The pod key /api/explain is asked about for an entry: the pod itself, or a gang's first pending member. */
export function explainKey(entry) {
  if (entry.kind !== "gang") return entry.key;
  const m = (entry.members || [])[0];
  return m ? `${m.namespace}/${m.name}` : entry.key;
}

/** The entry a pod key belongs to (a pending pod, a gang by its key, or a gang by one of its members). */
export function findEntry(entries, key) {
  for (const e of entries) {
    if (e.key === key) return e;
    if (e.kind === "gang" && (e.members || []).some((m) => `${m.namespace}/${m.name}` === key)) return e;
  }
  return null;
}

function statusClass(status) {
  return `status status-${String(status || "Pending").toLowerCase()}`;
}

function requestChips(requests) {
  const chips = el("span", { class: "chips" });
  for (const [res, qty] of Object.entries(requests || {})) {
    const device = res.includes("/");
    chips.appendChild(el("span", { class: device ? "chip device" : "chip", title: `${res}: ${qty}` },
      `${shortResource(res)} ${qty}`));
  }
  return chips;
}

export class PendingList {
  /** @param {HTMLElement} root  #pending's list container; hooks: onSelect(entry | null), onMember(key) */
  constructor(root, hooks = {}) {
    this.root = root;
    this.hooks = hooks;
    this.entries = [];
    this.selected = null;
    this.summary = null;
    root.addEventListener("click", (e) => this.onClick(e));
    root.addEventListener("keydown", (e) => {
      // The entry's head is its button (the li holds other buttons: the summary's jumps); the li itself stays
      // focusable for the keyboard too.
      const head = e.target.classList.contains("pi-head") || e.target.classList.contains("pending-item");
      if ((e.key === "Enter" || e.key === " ") && head) {
        e.preventDefault();
        this.toggle(e.target.closest(".pending-item").getAttribute("data-key"));
      }
    });
  }

  render(entries) {
    this.entries = entries || [];
    if (this.selected && !this.entries.some((e) => e.key === this.selected)) this.selected = null;
    const list = el("ol", { class: "pending-list" });
    for (const entry of this.entries) list.appendChild(this.item(entry));
    if (!this.entries.length) {
      replaceChildren(this.root, el("p", { class: "empty-note" }, "Nothing is Pending: every pod has a node."));
      return;
    }
    replaceChildren(this.root, list);
  }

  item(entry) {
    const gang = entry.kind === "gang";
    const selected = entry.key === this.selected;
    const li = el("li", {
      class: `pending-item${selected ? " selected" : ""}`,
      "data-key": entry.key,
      "data-kind": entry.kind,
      "aria-current": selected ? "true" : null,
    });
    // The name on a line of its own, whole (names that differ only at the end must not truncate to the same text);
    // namespace, status and device count below it.
    li.appendChild(el("div", { class: "pi-head", role: "button", tabindex: "0", "aria-pressed": String(selected),
      "aria-label": `${entry.key}: ${entry.status || "Pending"}` },
      el("span", { class: "pi-name", title: entry.key }, entry.name),
      el("span", { class: "pi-meta" },
        el("span", { class: "pi-ns" }, entry.namespace),
        el("span", { class: statusClass(entry.status) }, entry.status || "Pending"),
        el("span", { class: "pi-devices", title: "devices requested" }, String(entry.devices ?? 0)))));
    li.appendChild(el("div", { class: "pi-req" },
      gang ? el("span", { class: "badge gang" }, `gang · ${plural((entry.members || []).length, "pod")}`) : null,
      requestChips(entry.requests),
      entry.priority ? el("span", { class: "chip prio", title: "priority" }, `prio ${entry.priority}`) : null));
    li.appendChild(el("div", { class: "message" }, entry.message || ""));
    if (gang) {
      const members = el("ul", { class: "members" });
      for (const m of entry.members || []) {
        const key = `${m.namespace}/${m.name}`;
        members.appendChild(el("li", { class: "member", "data-key": key, title: m.message || "" },
          el("span", { class: "member-name" }, m.name),
          el("span", { class: statusClass(m.status) }, m.status || "Pending")));
      }
      li.appendChild(members);
    }
    if (selected && this.summary) li.appendChild(this.summary);
    return li;
  }

  onClick(e) {
    const item = e.target.closest(".pending-item");
    if (!item) return;
    if (e.target.closest(".pi-summary")) {
      const jump = e.target.closest("[data-jump]");
      if (jump) this.hooks.onJump?.(jump.getAttribute("data-jump"));
      return;
    }
    this.toggle(item.getAttribute("data-key"));
  }

  toggle(key) {
    this.select(this.selected === key ? null : key);
  }

  select(key) {
    this.selected = key;
    this.summary = null;
    this.render(this.entries);
    const entry = key ? this.entries.find((e) => e.key === key) || null : null;
    this.hooks.onSelect?.(entry);
    if (key) this.root.querySelector(`.pending-item.selected`)?.scrollIntoView({ block: "nearest" });
  }

  /** Under the selected entry: how many nodes fit and which filter stops the rest (from the explanation). */
  showExplain(explanation, error) {
    const box = el("div", { class: "pi-summary" });
    if (error) {
      box.appendChild(el("p", { class: "error" }, error));
    } else if (!explanation) {
      box.appendChild(el("p", { class: "muted" }, "explaining…"));
    } else {
      const verdicts = explanation.nodes || [];
      const feasible = verdicts.filter((v) => v.feasible);
      const byFilter = new Map();
      for (const v of verdicts) if (!v.feasible) byFilter.set(v.filter, (byFilter.get(v.filter) || 0) + 1);
      box.appendChild(el("p", { class: feasible.length ? "fits" : "fits none" },
        `fits ${feasible.length} of ${plural(verdicts.length, "node")}`));
      const list = el("ul", { class: "filter-counts" });
      for (const [filter, n] of [...byFilter.entries()].sort((a, b) => b[1] - a[1])) {
        const first = verdicts.find((v) => !v.feasible && v.filter === filter);
        list.appendChild(el("li", null,
          el("span", { class: "filter-name" }, filter || "?"), el("span", { class: "muted" }, ` ${plural(n, "node")}`),
          first ? el("button", { type: "button", class: "link", "data-jump": first.node, title: "show on the map" },
            first.node) : null));
      }
      if (feasible.length) {
        const best = [...feasible].sort((a, b) => (b.score ?? 0) - (a.score ?? 0))[0];
        list.appendChild(el("li", null, el("span", { class: "filter-name ok" }, "best fit"), " ",
          el("button", { type: "button", class: "link", "data-jump": best.node }, best.node)));
      }
      box.appendChild(list);
      for (const note of explanation.notes || []) box.appendChild(el("p", { class: "note" }, note));
    }
    this.summary = box;
    const item = this.root.querySelector(".pending-item.selected");
    if (item) {
      item.querySelector(".pi-summary")?.remove();
      item.appendChild(box);
    }
  }
}
