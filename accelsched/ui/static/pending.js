// The Pending list: every pod the run left without a node, largest first (the server sorts), a gang as one entry with
// its members. Identical replicas (same namespace, owner, requests, priority, status and message) are one card with
// a count. Selecting a card asks /api/explain for its pod; the map then marks each node's first failing filter.
// `.message` is kube-scheduler's message exactly as `schedule -o json` has it: shown whole, never rewritten.
//
// At 5,000 nodes the list is thousands of pods: the cards are few once replicas fold, and at most CARD_PAGE more are
// drawn per "show more" (the page's DOM budget: under 2,000 elements with the map). The search (the top bar's filter
// box) and the grouping (by reason, namespace or owner) work on the cards, never on the DOM.

import { el, replaceChildren, shortResource, plural } from "./dom.js";

export const CARD_PAGE = 30;
const EAGER_MEMBERS = 8; // a gang or replica card lists this many members at once; more wait for "members"

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

/** The filter a message blames on the most nodes ("0/16 nodes are available: 3 Insufficient x, 1 node(s) had
 * untolerated taint(s)" -> "Insufficient x"), for grouping by reason; a message of another form is its own reason. */
export function reasonOf(entry) {
  const message = entry.message || "";
  const m = /nodes are available: (.*?)(?:\.\s|\.?$)/.exec(message); // resource names have dots of their own
  if (!m) return entry.status === "Gated" ? "Gated" : message.split(";")[0].slice(0, 90) || entry.status || "Pending";
  let best = null;
  for (const part of m[1].split(/,\s*/)) {
    const n = /^(\d+)\s+(.*)$/.exec(part.trim());
    if (n && (!best || Number(n[1]) > best[0])) best = [Number(n[1]), n[2]];
  }
  return best ? best[1] : m[1];
}

/** Cards: a gang or a single pod is one; replicas alike in everything the scheduler looks at are one with a count. */
export function foldReplicas(entries) {
  const cards = [];
  const alike = new Map();
  for (const e of entries) {
    if (e.kind === "gang") {
      cards.push({ key: e.key, kind: "gang", entry: e, pods: (e.members || []).map((m) => m.key), entries: [e] });
      continue;
    }
    const sig = JSON.stringify([e.namespace, e.owner || "", e.requests, e.devices, e.priority, e.status, e.message]);
    const card = alike.get(sig);
    if (card) {
      card.entries.push(e);
      card.pods.push(e.key);
      card.kind = "replicas";
      continue;
    }
    const fresh = { key: e.key, kind: "pod", entry: e, pods: [e.key], entries: [e] };
    alike.set(sig, fresh);
    cards.push(fresh);
  }
  return cards;
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

const GROUPS = {
  reason: (card) => reasonOf(card.entry),
  namespace: (card) => card.entry.namespace,
  owner: (card) => card.entry.owner || (card.kind === "gang" ? `gang ${card.key}` : "no owner (bare pods)"),
};

export class PendingList {
  /** @param {HTMLElement} root  #pending's list container; hooks: onSelect(entry | null), onJump(node),
   * onVerdict("feasible" | filter name | null): show only those nodes of the explanation on the map */
  constructor(root, hooks = {}) {
    this.root = root;
    this.hooks = hooks;
    this.entries = [];
    this.cards = [];
    this.selected = null; // the selected card's key
    this.selectedPod = null; // the pod of it explained (a replica card's first, or the one a link named)
    this.summary = null;
    this.verdict = null; // the verdict the map shows alone, if any
    this.query = "";
    this.groupBy = "";
    this.shown = CARD_PAGE;
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

  /** The search box's text: matches pod names, namespaces, owners, messages and resource names. */
  setQuery(text) {
    const q = text.trim().toLowerCase();
    if (q === this.query) return;
    this.query = q;
    this.shown = CARD_PAGE;
    this.draw();
  }

  setGroupBy(key) {
    this.groupBy = GROUPS[key] ? key : "";
    this.draw();
  }

  matches(card) {
    const q = this.query;
    if (!q) return true;
    const e = card.entry;
    const fields = [e.namespace, e.owner, e.message, e.key, ...Object.keys(e.requests || {})];
    if (fields.some((f) => f && String(f).toLowerCase().includes(q))) return true;
    return card.pods.some((p) => p.toLowerCase().includes(q));
  }

  render(entries) {
    this.entries = entries || [];
    this.cards = foldReplicas(this.entries);
    if (this.selected && !this.cards.some((c) => c.key === this.selected)) {
      const holder = this.selectedPod && this.cards.find((c) => c.pods.includes(this.selectedPod));
      this.selected = holder ? holder.key : null;
    }
    this.draw();
  }

  draw() {
    if (!this.entries.length) {
      replaceChildren(this.root, el("p", { class: "empty-note" }, "Nothing is Pending: every pod has a node."));
      return;
    }
    const cards = this.cards.filter((c) => this.matches(c) || c.key === this.selected);
    const pods = cards.reduce((n, c) => n + c.pods.length, 0);
    const parts = [];
    if (this.query) {
      parts.push(el("p", { class: "muted pending-found" },
        `${plural(pods, "pod")} in ${plural(cards.length, "card")} match \u201c${this.query}\u201d`));
    }
    let budget = this.shown;
    const list = (items) => {
      const ol = el("ol", { class: "pending-list" });
      for (const card of items) {
        if (budget <= 0) break;
        budget--;
        ol.appendChild(this.item(card));
      }
      return ol;
    };
    if (this.groupBy) {
      const groups = new Map();
      for (const c of cards) {
        const g = GROUPS[this.groupBy](c);
        if (!groups.has(g)) groups.set(g, []);
        groups.get(g).push(c);
      }
      // Largest group first (by pods): the reason that keeps most pods waiting leads.
      const ordered = [...groups.entries()].map(([g, items]) => [g, items, items.reduce((n, c) => n + c.pods.length, 0)])
        .sort((a, b) => b[2] - a[2] || String(a[0]).localeCompare(String(b[0])));
      for (const [g, items, n] of ordered) {
        if (budget <= 0) break;
        parts.push(el("section", { class: "pending-group", "data-group": g },
          el("h3", { class: "pending-group-head", title: g }, el("span", { class: "pg-name" }, g),
            el("span", { class: "muted" }, ` ${plural(n, "pod")}`)), list(items)));
      }
    } else {
      parts.push(list(cards));
    }
    const left = cards.length - (this.shown - Math.max(0, budget));
    if (left > 0) {
      parts.push(el("button", { type: "button", class: "link more pending-more", "data-more": "" },
        `show ${Math.min(CARD_PAGE, left)} more of ${plural(left, "card")}`));
    }
    replaceChildren(this.root, parts);
  }

  item(card) {
    const entry = card.entry;
    const gang = card.kind === "gang";
    const replicas = card.kind === "replicas";
    const selected = card.key === this.selected;
    const li = el("li", {
      class: `pending-item${selected ? " selected" : ""}`,
      "data-key": card.key,
      "data-kind": card.kind,
      "data-pods": card.pods.join(" "),
      "aria-current": selected ? "true" : null,
    });
    const name = replicas ? `${entry.owner ? entry.owner.split("/").pop() : entry.name}` : entry.name;
    // The name on a line of its own, whole (names that differ only at the end must not truncate to the same text);
    // namespace, status and device count below it.
    // Named by its visible text (axe's label-content-name-mismatch: a speech user says what they see).
    li.appendChild(el("div", { class: "pi-head", role: "button", tabindex: "0", "aria-pressed": String(selected) },
      el("span", { class: "pi-name", title: replicas ? card.pods.join("\n") : card.key }, name,
        replicas ? el("span", { class: "pi-count", title: `${card.pods.length} identical replicas` },
          ` \u00d7${card.pods.length}`) : null),
      el("span", { class: "pi-meta" },
        el("span", { class: "pi-ns" }, entry.namespace),
        el("span", { class: statusClass(entry.status) }, entry.status || "Pending"),
        el("span", { class: "pi-devices", title: "devices requested (each)" }, String(entry.devices ?? 0)))));
    li.appendChild(el("div", { class: "pi-req" },
      gang ? el("span", { class: "badge gang" }, `gang · ${plural((entry.members || []).length, "pod")}`) : null,
      requestChips(entry.requests),
      entry.priority ? el("span", { class: "chip prio", title: "priority" }, `prio ${entry.priority}`) : null));
    li.appendChild(el("div", { class: "message", title: entry.message || "" }, entry.message || ""));
    const members = gang ? (entry.members || []).map((m) => [m.key || `${m.namespace}/${m.name}`, m.name, m.status, m.message])
      : replicas ? card.entries.map((e) => [e.key, e.name, e.status, ""]) : [];
    if (members.length) li.appendChild(this.memberList(members, selected));
    if (selected && this.summary) li.appendChild(this.summary);
    return li;
  }

  /** The members of a gang or replica card: a few at once, the rest behind a button (or all once selected). */
  memberList(members, all) {
    const ul = el("ul", { class: "members" });
    const shown = all ? members.slice(0, 200) : members.slice(0, EAGER_MEMBERS);
    for (const [key, name, status, message] of shown) {
      ul.appendChild(el("li", { class: "member", "data-key": key, title: message || "" },
        el("span", { class: "member-name" }, name),
        el("span", { class: statusClass(status) }, status || "Pending")));
    }
    if (members.length > shown.length) {
      ul.appendChild(el("li", { class: "member muted" }, `and ${members.length - shown.length} more`));
    }
    return ul;
  }

  onClick(e) {
    if (e.target.closest("[data-more]")) {
      this.shown += CARD_PAGE;
      this.draw();
      return;
    }
    const item = e.target.closest(".pending-item");
    if (!item) return;
    if (e.target.closest(".pi-summary")) {
      const verdict = e.target.closest("[data-verdict]");
      if (verdict) {
        const v = verdict.getAttribute("data-verdict");
        this.verdict = this.verdict === v ? null : v;
        for (const b of this.root.querySelectorAll(".pi-summary [data-verdict]")) {
          b.setAttribute("aria-pressed", String(b.getAttribute("data-verdict") === this.verdict));
        }
        this.hooks.onVerdict?.(this.verdict);
        return;
      }
      const jump = e.target.closest("[data-jump]");
      if (jump) this.hooks.onJump?.(jump.getAttribute("data-jump"));
      return;
    }
    this.toggle(item.getAttribute("data-key"));
  }

  toggle(key) {
    this.select(this.selected === key ? null : key);
  }

  /** Select the card holding `key` (a card's key, or any pod of it), or none. */
  select(key) {
    const card = key ? this.cards.find((c) => c.key === key) || this.cards.find((c) => c.pods.includes(key)) : null;
    this.selected = card ? card.key : null;
    this.selectedPod = card ? (card.pods.includes(key) && card.kind !== "gang" ? key : card.pods[0]) : null;
    this.summary = null;
    this.verdict = null;
    if (card && !this.matches(card) && this.query) this.query = ""; // a deep link to a pod the search hides
    this.draw();
    let entry = null;
    if (card) entry = card.kind === "replicas" ? card.entries.find((e) => e.key === this.selectedPod) : card.entry;
    this.hooks.onSelect?.(entry || null);
    if (card) this.root.querySelector(".pending-item.selected")?.scrollIntoView({ block: "nearest" });
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
      const only = (v, child) => el("button", { type: "button", class: "verdict-only", "data-verdict": v,
        "aria-pressed": String(this.verdict === v), title: "show only these nodes on the map (again: all)" }, child);
      box.appendChild(el("p", { class: feasible.length ? "fits" : "fits none" },
        `fits ${feasible.length} of ${plural(verdicts.length, "node")}`,
        feasible.length ? [" ", only("feasible", "only these")] : null));
      const list = el("ul", { class: "filter-counts" });
      for (const [filter, n] of [...byFilter.entries()].sort((a, b) => b[1] - a[1])) {
        const first = verdicts.find((v) => !v.feasible && v.filter === filter);
        list.appendChild(el("li", null,
          only(filter, el("span", { class: "filter-name" }, filter || "?")),
          el("span", { class: "muted" }, ` ${plural(n, "node")}`),
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
