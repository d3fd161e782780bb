// What-if: stage cordon / uncordon / drain / taint / add-copies actions on the nodes ticked on the map (a whole group
// goes as its label selector), POST them to /api/whatif, and show the answer beside today: the pods that would lose
// their place, move or get placed, and the capacity before and after. The server runs the same engine on a copy of
// the state; nothing is written anywhere (the panel's sentence says so and stays visible).

import { postWhatif } from "./api.js";
import { el, replaceChildren, plural } from "./dom.js";
import { renderCapacityCompare } from "./panel.js";
import { WHATIF_COLUMNS, download, toCSV, whatifRows } from "./export.js";

const NO_GROUP = "\u0000";
const MAX_ADD_TARGETS = 20;
const LIST_LIMIT = 200;
// kube's taint syntax (key[=value]:Effect), checked before staging: the server would refuse it anyway, but only at
// Run, after other rows were staged around it.
const TAINT_RE = /^[^=:\s]+(=[^:\s]*)?:(NoSchedule|PreferNoSchedule|NoExecute)$/;

/** Pods in PendingEntries: a gang counts its pending members (as the header's "pending" does), not as one. */
export function pendingPods(entries) {
  return (entries || []).reduce((n, e) => n + (e.kind === "gang" ? (e.members || []).length || 1 : 1), 0);
}

/** A staged action in words; `sizes` (action -> node count) says how many nodes a label target covered. */
function describe(action, sizes) {
  const target = (nodes) => {
    if (!Array.isArray(nodes)) {
      const n = sizes?.get(action);
      return `${nodes.label}=${nodes.value}${n ? ` (${plural(n, "node")})` : ""}`;
    }
    return nodes.length > 4 ? `${nodes.slice(0, 3).join(", ")} +${nodes.length - 3}` : nodes.join(", ");
  };
  switch (action.op) {
    case "taint":
      return `taint ${target(action.nodes)} with ${action.taint}`;
    case "add":
      return `add ${action.count} × ${action.node}`;
    default:
      return `${action.op} ${target(action.nodes)}`;
  }
}

/** An action of a link is staged only in the shapes the panel stages (the server checks the rest at Run). */
function wellFormed(a) {
  if (!a || typeof a !== "object" || typeof a.op !== "string") return false;
  if (a.op === "add") return typeof a.node === "string" && Number.isInteger(a.count);
  const nodes = a.nodes;
  const ok = Array.isArray(nodes) ? nodes.every((n) => typeof n === "string")
    : !!nodes && typeof nodes === "object" && typeof nodes.label === "string" && typeof nodes.value === "string";
  return ok && (a.op !== "taint" || typeof a.taint === "string");
}

/** A what-if result as exported: everything but the what-if map's node views (megabytes at 5,000 nodes). */
function exportable(result) {
  const { nodes, order, ...rest } = result;
  return rest;
}

/** The evicted pods under one heading, then one group per cause ("drain", "taint K=V:NoExecute"): the taint
 * manager's evictions are not a drain's. */
function evictedSection(evicted, section) {
  const causes = new Map();
  for (const x of evicted) {
    const cause = x.cause || "drain";
    if (!causes.has(cause)) causes.set(cause, []);
    causes.get(cause).push(x);
  }
  const line = (x) => [el("span", { class: "pod" }, x.pod), " from ",
    el("button", { type: "button", class: "link", "data-jump": x.from }, x.from),
    el("span", { class: "muted" }, x.recreated ? " · recreated by its controller" : " · deleted (no controller)")];
  const s = el("section", { class: "wi-list evicted" }, el("h4", null, `Evicted (${evicted.length})`));
  if (!evicted.length) s.appendChild(el("p", { class: "muted" }, "none"));
  for (const [cause, rows] of causes) {
    const group = section("evicted-by", `by ${cause}`, rows, line);
    group.setAttribute("data-cause", cause);
    group.querySelector("h4").replaceWith(el("h5", null, `by ${cause} (${rows.length})`));
    s.appendChild(group);
  }
  return s;
}

export class WhatIfPanel {
  /**
   * root: #whatif. hooks: selection() -> {groups, nodes} (AcceleratorMap.selection), version() -> current state
   * version, onResult(result | null), onShowMap(bool), onPod(key), onNode(name).
   */
  constructor(root, hooks) {
    this.root = root;
    this.hooks = hooks;
    this.actions = [];
    this.sizes = new WeakMap(); // staged action -> nodes its label target covered when staged (for its description)
    this.ran = []; // the staged actions of the shown result
    this.errorIndex = null; // the staged row the server's `actions[i]` error names
    this.result = null;
    this.resultVersion = null;
    this.showing = false;
    this.abort = null;
    this.selectionText = root.querySelector("#whatif-selection");
    this.list = root.querySelector("#whatif-actions");
    this.runButton = root.querySelector("#whatif-run");
    this.resetButton = root.querySelector("#whatif-reset");
    this.error = root.querySelector("#whatif-error");
    this.out = root.querySelector("#whatif-result");
    this.taint = root.querySelector("#taint-text");
    this.count = root.querySelector("#add-count");
    for (const b of root.querySelectorAll("button[data-op]")) {
      b.addEventListener("click", () => this.stage(b.dataset.op));
    }
    this.runButton.addEventListener("click", () => this.run());
    this.resetButton.addEventListener("click", () => this.reset());
    this.taint.addEventListener("keydown", (e) => e.key === "Enter" && this.stage("taint"));
    this.list.addEventListener("click", (e) => {
      const b = e.target.closest("[data-remove]");
      if (!b) return;
      this.actions.splice(Number(b.getAttribute("data-remove")), 1);
      this.showError("");
      this.renderActions();
    });
    this.out.addEventListener("click", (e) => {
      if (e.target.closest("#whatif-map")) {
        this.showing = !this.showing;
        this.renderToggle();
        this.hooks.onShowMap?.(this.showing);
        return;
      }
      const format = e.target.closest("[data-export]")?.getAttribute("data-export");
      if (format && this.result) {
        if (format === "csv") download("whatif.csv", toCSV(WHATIF_COLUMNS, whatifRows(this.result)), "text/csv");
        else download("whatif.json", `${JSON.stringify(exportable(this.result), null, 2)}\n`, "application/json");
        return;
      }
      const node = e.target.closest("[data-jump]");
      if (node) {
        this.hooks.onNode?.(node.getAttribute("data-jump"));
        return;
      }
      const pod = e.target.closest("[data-pod]");
      if (pod) this.hooks.onPod?.(pod.getAttribute("data-pod"));
    });
    this.out.addEventListener("keydown", (e) => {
      if (e.key !== "Enter" && e.key !== " ") return;
      const pod = e.target.closest?.("li[data-pod]");
      if (!pod || e.target !== pod) return; // a jump button inside keeps its own Enter
      e.preventDefault();
      this.hooks.onPod?.(pod.getAttribute("data-pod"));
    });
    this.selectionChanged();
    this.renderActions();
  }

  /** The map's ticks changed: say what is selected and enable the buttons that can act on it. */
  selectionChanged() {
    const sel = this.hooks.selection();
    const parts = [];
    for (const g of sel.groups) {
      parts.push(g.value === NO_GROUP ? `${plural(g.nodes.length, "node")} without ${g.label}`
        : `${g.label}=${g.value} (${plural(g.nodes.length, "node")})`);
    }
    if (sel.nodes.length) {
      parts.push(sel.nodes.length > 5 ? `${sel.nodes.slice(0, 4).join(", ")} and ${sel.nodes.length - 4} more`
        : sel.nodes.join(", "));
    }
    const any = parts.length > 0;
    this.selectionText.textContent = any ? `Selected: ${parts.join("; ")}`
      : "Tick nodes on the map, or a whole group by its header, to act on them.";
    this.selectionText.classList.toggle("muted", !any);
    this.root.querySelectorAll("button[data-op]").forEach((b) => {
      b.disabled = !any;
    });
  }

  /** Targets for a node-set action: one per selected group (by label; unlabelled ones by name) plus the named nodes. */
  targets() {
    const sel = this.hooks.selection();
    const out = [];
    const loose = [...sel.nodes];
    for (const g of sel.groups) {
      if (g.value === NO_GROUP || !g.label) loose.push(...g.nodes);
      else out.push({ label: g.label, value: g.value });
    }
    if (loose.length) out.push(loose);
    return { out, sel };
  }

  stage(op) {
    this.showError("");
    const { out, sel } = this.targets();
    if (!out.length) {
      this.showError("Select nodes on the map first.");
      return;
    }
    if (op === "add") {
      const count = Number(this.count.value);
      if (!Number.isInteger(count) || count < 1 || count > 1000) {
        this.showError("copies: a whole number from 1 to 1000");
        return;
      }
      const names = [...sel.nodes, ...sel.groups.map((g) => g.nodes[0]).filter(Boolean)];
      if (names.length > MAX_ADD_TARGETS) {
        this.showError(`add copies of at most ${MAX_ADD_TARGETS} nodes at once (one node per type is enough)`);
        return;
      }
      for (const node of names) this.actions.push({ op: "add", node, count });
    } else if (op === "taint") {
      const taint = this.taint.value.trim();
      if (!TAINT_RE.test(taint)) {
        this.showError(`taint${taint ? ` "${taint}"` : ""}: write it as key=value:NoSchedule `
          + "(or key:Effect; the effect one of NoSchedule, PreferNoSchedule, NoExecute)");
        this.taint.focus();
        return;
      }
      for (const nodes of out) this.push({ op, nodes, taint }, sel);
    } else {
      for (const nodes of out) this.push({ op, nodes }, sel);
    }
    if (this.actions.length > 100) this.actions.length = 100;
    this.renderActions();
  }

  /** Stage a node-set action, noting how many nodes its label target covers now. */
  push(action, sel) {
    if (!Array.isArray(action.nodes)) {
      const g = sel.groups.find((x) => x.label === action.nodes.label && x.value === action.nodes.value);
      if (g) this.sizes.set(action, g.nodes.length);
    }
    this.actions.push(action);
  }

  renderActions() {
    const items = this.actions.map((a, i) =>
      el("li", { class: `wi-action op-${a.op}${i === this.errorIndex ? " invalid" : ""}`,
        "aria-invalid": i === this.errorIndex ? "true" : null }, el("span", null, describe(a, this.sizes)),
        el("button", { type: "button", class: "close small", "data-remove": String(i), "aria-label": "remove" },
          "×")));
    replaceChildren(this.list, items);
    this.list.hidden = !items.length;
    this.runButton.disabled = !this.actions.length;
    this.resetButton.disabled = !this.actions.length && !this.result;
  }

  /** Show (or clear, with "") the error; a server error naming `actions[i]` marks that staged row. */
  showError(message) {
    this.error.textContent = message;
    this.error.hidden = !message;
    const m = /^actions\[(\d+)\]/.exec(message || "");
    const index = m && Number(m[1]) < this.actions.length ? Number(m[1]) : null;
    if (index !== this.errorIndex) {
      this.errorIndex = index;
      this.renderActions();
    }
  }

  reset() {
    this.abort?.abort();
    this.actions = [];
    this.ran = [];
    this.result = null;
    this.showError("");
    this.out.hidden = true;
    replaceChildren(this.out);
    if (this.showing) {
      this.showing = false;
      this.hooks.onShowMap?.(false);
    }
    this.renderActions();
    this.hooks.onResult?.(null);
    this.hooks.onRan?.(null);
  }

  /** Stage `actions` as they came from a shared link (the server checks them at Run, as any body) and run them. */
  async restore(actions) {
    if (!Array.isArray(actions) || !actions.length) return;
    this.actions = actions.filter(wellFormed).slice(0, 100);
    this.renderActions();
    await this.run();
    if (this.actions.length < actions.length && !this.error.textContent) {
      this.showError("the link's what-if had malformed actions: left out");
    }
  }

  async run() {
    if (!this.actions.length) return;
    this.abort?.abort();
    this.abort = new AbortController();
    this.showError("");
    this.runButton.disabled = true;
    this.root.classList.add("busy");
    const version = this.hooks.version();
    const staged = [...this.actions];
    try {
      const result = await postWhatif({ actions: staged }, { signal: this.abort.signal });
      this.ran = staged;
      this.result = result;
      this.hooks.onRan?.(staged);
      this.resultVersion = version;
      this.renderResult();
      this.hooks.onResult?.(result);
      if (this.showing) this.hooks.onShowMap?.(true);
    } catch (err) {
      if (err.name !== "AbortError") this.showError(err.message);
    } finally {
      this.root.classList.remove("busy");
      this.renderActions();
    }
  }

  /** The state moved on under a shown result: say so (the numbers are of the older state). */
  stateChanged(version) {
    const stale = this.out.querySelector(".stale");
    if (stale) stale.hidden = !this.result || version === this.resultVersion;
  }

  renderToggle() {
    const b = this.out.querySelector("#whatif-map");
    if (b) {
      b.textContent = this.showing ? "Show today on the map" : "Show the what-if on the map";
      b.setAttribute("aria-pressed", String(this.showing));
    }
  }

  renderResult() {
    const r = this.result;
    const lost = r.lost || [];
    const moved = r.moved || [];
    const placed = r.placed || [];
    const evicted = r.evicted || [];
    const replaced = r.replaced || [];
    // Every number here counts pods (a gang as its pending members), as the header's "pending" does.
    const pb = pendingPods(r.pendingBefore);
    const pa = pendingPods(r.pendingAfter);
    const pods = (n) => (n === 1 ? "pod" : "pods");
    const summary = el("div", { class: "wi-summary" },
      el("span", { class: `stat ${lost.length ? "bad" : ""}` }, el("b", null, String(lost.length)),
        ` ${pods(lost.length)} lose their place`),
      el("span", { class: "stat" }, el("b", null, String(moved.length)), ` ${pods(moved.length)} move`),
      el("span", { class: `stat ${placed.length ? "good" : ""}` }, el("b", null, String(placed.length)),
        ` ${pods(placed.length)} get placed`),
      el("span", { class: "stat" }, el("b", null, String(evicted.length)), ` ${pods(evicted.length)} evicted`),
      replaced.length ? el("span", { class: "stat muted", title: "Pending in the input, placed by this run on "
        + "another node than today's run chose: the queue's order, not the action, moved them" },
      el("b", null, String(replaced.length)), ` ${pods(replaced.length)} placed elsewhere by the run`) : null);
    const side = el("div", { class: "side-by-side" },
      el("div", { class: "side today" }, el("h4", null, "Today"), el("p", { class: "big" }, String(pb)),
        el("p", { class: "muted" }, `${pods(pb)} pending`)),
      el("div", { class: "side after" }, el("h4", null, "What-if"), el("p", { class: "big" }, String(pa)),
        el("p", { class: "muted" }, `${pods(pa)} pending`)));
    const compare = el("div", { class: "wi-compare" });
    const notes = (r.notes || []).length ? el("ul", { class: "notes" }, r.notes.map((n) => el("li", null, n))) : null;

    // A drain of a whole PDU can move thousands of pods: list the first LIST_LIMIT, then offer the rest.
    const section = (cls, title, rows, line) => {
      const s = el("section", { class: `wi-list ${cls}` }, el("h4", null, `${title} (${rows.length})`));
      if (!rows.length) {
        s.appendChild(el("p", { class: "muted" }, "none"));
        return s;
      }
      const ul = el("ul");
      const add = (part) => ul.append(...part.map((x) => el("li", { "data-pod": x.pod, tabindex: "0" }, line(x))));
      add(rows.slice(0, LIST_LIMIT));
      s.appendChild(ul);
      if (rows.length > LIST_LIMIT) {
        const more = el("button", { type: "button", class: "link more" }, `show all ${rows.length}`);
        more.addEventListener("click", (e) => {
          e.stopPropagation();
          add(rows.slice(LIST_LIMIT));
          more.remove();
        });
        s.appendChild(more);
      }
      return s;
    };
    const ran = this.ran.length ? this.ran : r.actions || []; // as staged: label targets, not their nodes
    const jump = (name) => el("button", { type: "button", class: "link", "data-jump": name }, name);
    replaceChildren(this.out,
      el("p", { class: "stale", hidden: true },
        "The cluster changed since this ran: run it again for current numbers."),
      el("p", { class: "wi-ran" }, `Ran: ${ran.map((a) => describe(a, this.sizes)).join("; ")}`),
      summary, notes, side,
      el("h4", null, "Capacity: today vs what-if"), compare,
      section("lost", "Lose their place", lost, (x) => [el("span", { class: "pod" }, x.pod), " from ", jump(x.from),
        x.placedByRun ? el("span", { class: "muted" }, " · placed by today's run (Pending in the input)") : null,
        x.message ? el("div", { class: "message" }, x.message) : null]),
      section("moved", "Move", moved, (x) => [el("span", { class: "pod" }, x.pod), " ", jump(x.from), " → ",
        jump(x.to)]),
      section("placed", "Get placed", placed, (x) => [el("span", { class: "pod" }, x.pod), " → ", jump(x.to)]),
      evictedSection(evicted, section),
      replaced.length ? el("details", { class: "wi-replaced" },
        el("summary", null, `Placed elsewhere by the run (${replaced.length}): Pending in the input, not moved`),
        section("replaced", "Today's run → what-if run", replaced, (x) => [el("span", { class: "pod" }, x.pod), " ",
          jump(x.from), " → ", jump(x.to)])) : null,
      el("button", { type: "button", id: "whatif-map", class: "toggle", "aria-pressed": "false" }, ""),
      el("p", { class: "exports" }, "export ",
        el("button", { type: "button", class: "link", "data-export": "csv" }, "CSV"), " ",
        el("button", { type: "button", class: "link", "data-export": "json" }, "JSON")),
    );
    this.out.hidden = false;
    renderCapacityCompare(compare, r.before || {}, r.after || {});
    this.renderToggle();
    this.stateChanged(this.hooks.version());
  }
}
