// The accelerator map: one fixed-height row per node, grouped by a node label, virtualised so that a 5,000-node
// cluster costs what its ~40 visible rows cost. Rows are absolutely positioned inside a canvas as tall as all rows;
// only the rows in view (plus OVERSCAN) exist in the DOM, built in one DocumentFragment per pass, and a row is rebuilt
// only when its node's etag (or the colouring) changed. Everything a test or a user reads is an attribute or text.

import { el, colorClass, colorKey, plural, PALETTE_SIZE } from "./dom.js";

export const ROW_H = 36; // px, matches .node-row / .group-row height in style.css
const OVERSCAN = 12;
const SLOT_W = 8; // px per MIG slice position
const SHARED = new Set(["timeslicing", "milli", "slices"]);
const ARROWS = new Set(["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End"]);
const NO_GROUP = "\u0000";
export const NO_GANG = "no gang"; // colour-by gang: every gang-less pod shares this one neutral key

/** What a holder is coloured by here: dom.colorKey, except that gang-less pods are one "no gang" key (their own
 * colours would read as that many gangs). */
export function holderKey(holder, mode, gangs) {
  if (mode === "gang" && holder && !(gangs && gangs[holder])) return NO_GANG;
  return colorKey(holder, mode, gangs);
}

/** The colour class of a key: the palette's, or the neutral one of "no gang". */
export function keyClass(key, mode, palette = null) {
  if (mode === "gang" && key === NO_GANG) return "c-nogang";
  const given = palette ? palette.get(key) : undefined;
  return given === undefined ? colorClass(key) : given;
}

/** Colours by namespace or by gang, one each while there are no more keys than colours (in their sorted order):
 * hashed, 21 namespaces drew 16 colours, neighbours alike. Past PALETTE_SIZE keys, and by pod, the hash (a pod keeps
 * its colour while the cluster changes). */
function distinctPalette(nodes, mode, gangs) {
  if (mode !== "namespace" && mode !== "gang") return null;
  const keys = new Set();
  for (const n of nodes) for (const h of countCells(n).holders.keys()) keys.add(holderKey(h, mode, gangs));
  keys.delete(NO_GANG);
  if (keys.size > PALETTE_SIZE) return null;
  return new Map([...keys].sort().map((k, i) => [k, `c${i}`]));
}

function collator() {
  return new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
}

// Per-node totals, memoised on the NodeView object: a delta keeps the objects of unchanged nodes, so an update costs
// only the changed nodes' counting (group headers and the legend sum these).
const STATS = new WeakMap();

function countCells(node) {
  let stats = STATS.get(node);
  if (stats) return stats;
  let total = 0;
  let free = 0;
  const holders = new Map(); // holder -> devices (a MIG device counts once per holder)
  for (const g of node.groups || []) {
    for (const sw of g.switches || []) {
      for (const c of sw.devices || []) {
        total++;
        const held = c.kind === "mig" ? (c.slots || []).map((x) => x.holder).filter(Boolean) : c.holders || [];
        if (!held.length) free++;
        if (held.length === 1) holders.set(held[0], (holders.get(held[0]) || 0) + 1);
        else for (const h of new Set(held)) holders.set(h, (holders.get(h) || 0) + 1);
      }
    }
  }
  stats = { total, free, holders };
  STATS.set(node, stats);
  return stats;
}

const UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable:NoSchedule";
const MAX_FLAGS = 3; // what a row's head has room for; past it the last pill says how many more (all in its title)
const NAME_FONT = '600 13px system-ui, -apple-system, "Segoe UI", "Noto Sans", "DejaVu Sans", sans-serif';
const cut = new Map(); // (name, width) -> the text shown: a row is rebuilt often, a name's fit measured once
let measure = null;

/** The name as it fits `width` px, cut in the middle (GKE's `gke-a3-mega-pool-1-2f8c91d0-abcd` and `...-wxyz` differ
 * only at the end), measured in the row's font on a canvas. */
export function middleCut(name, width) {
  const memo = `${width}\u0000${name}`;
  let text = cut.get(memo);
  if (text !== undefined) return text;
  measure = measure || document.createElement("canvas").getContext("2d");
  measure.font = NAME_FONT;
  const fits = (t) => measure.measureText(t).width <= width - 2;
  text = name;
  for (let keep = name.length - 1; keep > 4 && !fits(text); keep--) {
    const head = Math.ceil(keep * 0.55);
    text = `${name.slice(0, head)}\u2026${name.slice(name.length - (keep - head))}`;
  }
  if (cut.size > 20000) cut.clear();
  cut.set(memo, text);
  return text;
}

/** A row's flags as [class, text, title]: new, cordoned, then every taint (a cordoned node's own unschedulable taint
 * is said by "cordoned"). Past MAX_FLAGS the last pill is "+N", its title naming the rest. */
function rowFlags(node, added) {
  const out = [];
  if (added) out.push(["added", "new", "added by the what-if"]);
  const taints = node.taints || [];
  if (node.unschedulable) {
    const own = taints.includes(UNSCHEDULABLE_TAINT) ? ` (taint ${UNSCHEDULABLE_TAINT})` : "";
    out.push(["cordoned", "cordoned", `cordoned: spec.unschedulable${own}`]);
  }
  for (const t of taints) if (!(node.unschedulable && t === UNSCHEDULABLE_TAINT)) out.push(["taint", t, `taint ${t}`]);
  if (out.length <= MAX_FLAGS) return out;
  const rest = out.slice(MAX_FLAGS - 1);
  return [...out.slice(0, MAX_FLAGS - 1),
    ["more", `+${rest.length}`, rest.map(([, , title]) => title).join("\n")]];
}

const SPLIT_UNIT = { mig: "slices", timeslicing: "replicas", slices: "slices", milli: "milli" };

/** Free devices (wholly free / all), and for split devices their free units (MIG slices, replicas, ...) below, with
 * what the node can still take per resource (allocatable - requested) in the title. */
function nodeStats(node) {
  const { total, free } = countCells(node);
  let unit = null;
  let units = 0;
  let unitsFree = 0;
  for (const c of cellsOf(node)) {
    if (c.kind === "mig") {
      const size = c.slotCount || 8;
      units += size;
      unitsFree += size - (c.slots || []).filter((s) => s.holder).reduce((a, s) => a + s.size, 0);
    } else if (c.share) {
      units += c.share.total;
      unitsFree += c.share.total - c.share.used;
    } else continue;
    unit = unit || SPLIT_UNIT[c.kind] || c.share?.unit;
  }
  const left = [];
  for (const [res, alloc] of Object.entries(node.allocatable || {})) {
    if (!res.includes("/")) continue;
    const n = Number(alloc) - Number((node.requested || {})[res] ?? 0);
    if (Number.isFinite(n)) left.push(`${res.slice(res.lastIndexOf("/") + 1).replace(/^mig-/, "")} ${n}`);
  }
  const title = [`${free} of ${total} devices wholly free`,
    unit ? `${unitsFree} of ${units} ${unit} free` : null,
    left.length ? `free to request: ${left.join(", ")}` : null].filter(Boolean).join("\n");
  return el("div", { class: `node-stats${unit ? " split" : ""}`, title },
    el("span", { class: "free-count" }, String(free)), el("span", { class: "muted" }, `/${total}`),
    unit ? el("span", { class: "split-free" }, `${unitsFree}/${units} ${unit}`) : null);
}

function* cellsOf(node) {
  for (const g of node.groups || []) for (const sw of g.switches || []) yield* sw.devices || [];
}

function* nicsOf(node) {
  for (const g of node.groups || []) for (const sw of g.switches || []) yield* sw.nics || [];
}

export class AcceleratorMap {
  /**
   * @param {HTMLElement} root  the scroll container (#map)
   * @param {object} hooks  onCell(info), onNode(name), onHover(info, event), onLeave(), onSelection()
   */
  constructor(root, hooks = {}) {
    this.root = root;
    this.hooks = hooks;
    this.canvas = el("div", { class: "map-canvas", role: "grid", "aria-label": "accelerator map" });
    this.empty = el("p", { class: "map-empty", hidden: true }, "No nodes match.");
    // The group of the topmost visible row stays named (in a 100-node PDU the header scrolls away long before its
    // last node does) in a strip above the map, outside the scrolling area, so it never covers the first row. Not a
    // .group-row, so selectors on the real headers stay unique.
    this.pin = el("div", { class: "group-pin", title: "scroll to this group's header" });
    this.pinKey = null;
    this.pin.addEventListener("click", () => {
      const i = this.index.get(this.pinKey);
      if (i !== undefined) this.root.scrollTop = i * ROW_H;
    });
    this.pinHolder = el("div", { class: "group-pin-holder", hidden: true }, this.pin);
    root.before(this.pinHolder);
    root.replaceChildren(this.canvas, this.empty);
    this.nodes = [];
    this.byName = new Map();
    this.groupBy = null;
    this.colorBy = "pod";
    this.gangs = {};
    this.filter = "";
    this.collapsed = new Set();
    this.selectedNodes = new Set();
    this.selectedGroups = new Set();
    this.explain = null; // Map node -> verdict of the selected pending pod
    this.verdictFilter = null; // "feasible" | a filter's name: only those nodes of the explanation are shown
    this.baseline = null; // Map node -> etag of today's run while the map shows a what-if run
    this.palette = null; // key -> colour class, by namespace or gang while they are few (distinctPalette)
    this.rows = [];
    this.rendered = new Map(); // row key -> {el, index, stamp}
    this.epoch = 0;
    this.structure = "";
    this.frame = 0;
    this.lastHover = null;

    root.addEventListener("scroll", () => {
      if (this.lastHover && this.lastHover !== document.activeElement) this.leave(); // a focused cell keeps its tip
      this.schedule();
    }, { passive: true });
    new ResizeObserver(() => this.schedule()).observe(root);
    this.canvas.addEventListener("click", (e) => this.onClick(e));
    this.canvas.addEventListener("change", (e) => this.onChange(e));
    this.canvas.addEventListener("mouseover", (e) => this.onOver(e));
    this.canvas.addEventListener("mousemove", (e) => this.onMove(e));
    this.canvas.addEventListener("mouseleave", () => this.leave());
    this.canvas.addEventListener("keydown", (e) => {
      if (!e.target.classList.contains("cell")) return;
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        e.target.click();
      } else if (ARROWS.has(e.key)) {
        e.preventDefault();
        this.moveFocus(e.target, e.key);
      }
    });
    // The keyboard: Tab reaches the map, which hands focus to the first cell in view; arrows move from cell to cell
    // (rows scroll in as needed); a focused cell shows its tooltip and marks every cell of its holder, as hovering.
    root.addEventListener("focus", () => this.firstCell()?.focus());
    this.canvas.addEventListener("focusin", (e) => {
      if (!e.target.classList.contains("cell")) return;
      const info = this.info(e.target);
      if (!info) return;
      const box = e.target.getBoundingClientRect();
      this.lastHover = e.target;
      this.hooks.onHover?.(info, { clientX: box.right, clientY: box.bottom });
      this.markHolder(info.holder);
    });
    this.canvas.addEventListener("focusout", () => this.leave());
  }

  // ---- data ---------------------------------------------------------------------------------------------------

  /** Show these NodeViews. Rows whose etag did not change keep their DOM; the layout is redone only if needed. */
  setData(nodes, { gangs, baseline, changed = null } = {}) {
    this.changed = changed;
    this.nodes = nodes;
    this.serial = (this.serial || 0) + 1;
    this.byName = new Map(nodes.map((n) => [n.name, n]));
    if (gangs && gangs !== this.gangs) {
      const sig = Object.entries(gangs).join("|");
      if (sig !== this.gangSig && this.colorBy === "gang") this.epoch++; // gang colours of unchanged rows moved
      this.gangSig = sig;
      this.gangs = gangs;
    }
    if (baseline !== undefined && (baseline || this.baseline)) {
      // Entering, leaving or refreshing the what-if view: every row's "changed" mark may differ.
      this.baseline = baseline;
      this.epoch++;
    }
    // Ticks of nodes this data lacks (a what-if copy ticked, then back to today) and of groups it no longer has
    // would otherwise go on being staged as a ghost selection.
    let pruned = false;
    for (const name of [...this.selectedNodes]) {
      if (!this.byName.has(name)) pruned = this.selectedNodes.delete(name);
    }
    if (this.selectedGroups.size) {
      const present = new Set(nodes.map((n) => this.groupOf(n)));
      for (const g of [...this.selectedGroups]) if (!present.has(g)) pruned = this.selectedGroups.delete(g);
    }
    this.repalette();
    this.relayout();
    if (pruned) {
      this.syncChecks();
      this.hooks.onSelection?.();
    }
  }

  setGroupBy(key) {
    if (key === this.groupBy) return;
    // Ticks survive regrouping by node name: a ticked group becomes its nodes (staged actions may rely on them).
    for (const g of this.selectedGroups) {
      for (const n of this.nodes || []) if (this.groupOf(n) === g) this.selectedNodes.add(n.name);
    }
    this.groupBy = key || null;
    this.selectedGroups.clear();
    this.collapsed.clear();
    this.relayout(true);
  }

  setColorBy(mode) {
    if (mode === this.colorBy) return;
    this.colorBy = mode;
    this.repalette();
    this.epoch++;
    this.schedule();
  }

  /** The distinct colours of the keys held now; rows are redrawn if any key's colour moved. */
  repalette() {
    const palette = distinctPalette(this.nodes, this.colorBy, this.gangs);
    const sig = palette ? [...palette].join("|") : "";
    if (sig !== this.paletteSig) {
      if (this.paletteSig !== undefined) this.epoch++;
      this.paletteSig = sig;
    }
    this.palette = palette;
  }

  setFilter(text) {
    const f = text.trim().toLowerCase();
    if (f === this.filter) return;
    this.filter = f;
    // A match inside a collapsed group would be invisible: open every group that has one.
    if (f && this.collapsed.size) {
      for (const n of this.nodes) if (this.matches(n)) this.collapsed.delete(this.groupOf(n));
    }
    this.relayout(true);
  }

  /** verdicts: [{node, feasible, filter, reasons, ...}] from /api/explain, or null to clear the highlight. */
  setExplain(verdicts) {
    this.explain = verdicts ? new Map(verdicts.map((v) => [v.node, v])) : null;
    if (this.verdictFilter) {
      this.verdictFilter = null; // another pod's (or no) explanation: its verdicts decide nothing here
      this.relayout(true);
    }
    this.root.classList.toggle("explaining", !!verdicts);
    for (const r of this.rendered.values()) if (r.el.classList.contains("node-row")) this.applyExplain(r.el);
  }

  // ---- selection (what-if) ------------------------------------------------------------------------------------

  /** {groups: [{label, value, nodes}], nodes: [name]}: whole groups by label, the rest by name. */
  selection() {
    const groups = [];
    const covered = new Set();
    for (const value of this.selectedGroups) {
      const members = this.nodes.filter((n) => this.groupOf(n) === value).map((n) => n.name);
      members.forEach((m) => covered.add(m));
      groups.push({ label: this.groupBy, value, nodes: members });
    }
    const nodes = this.nodes.filter((n) => this.selectedNodes.has(n.name) && !covered.has(n.name)).map((n) => n.name);
    return { groups, nodes };
  }

  clearSelection() {
    this.selectedNodes.clear();
    this.selectedGroups.clear();
    this.syncChecks();
    this.hooks.onSelection?.();
  }

  /** A group's box is ticked when the group is, or (filtering) when every node of it the filter shows is. */
  groupChecked(value) {
    if (this.selectedGroups.has(value)) return true;
    if (!this.filter) return false;
    const shown = this.nodes.filter((n) => this.groupOf(n) === value && this.matches(n));
    return shown.length > 0 && shown.every((n) => this.selectedNodes.has(n.name));
  }

  isSelected(name) {
    const n = this.byName.get(name);
    return this.selectedNodes.has(name) || (n !== undefined && this.selectedGroups.has(this.groupOf(n)));
  }

  // ---- layout -------------------------------------------------------------------------------------------------

  groupOf(node) {
    if (!this.groupBy) return NO_GROUP;
    const v = node.labels ? node.labels[this.groupBy] : undefined;
    return v === undefined || v === null ? NO_GROUP : String(v);
  }

  /** Show only the nodes of one verdict of the explained pod: "feasible", or a filter's name (the nodes it stops
   * first); null shows every node. At 5,000 nodes the few that fit, or the ones a taint blocks, are otherwise lost. */
  setVerdictFilter(verdict) {
    const v = verdict || null;
    if (v === this.verdictFilter) return;
    this.verdictFilter = v;
    this.relayout(true);
  }

  verdictMatches(node) {
    if (!this.verdictFilter || !this.explain) return true;
    const v = this.explain.get(node.name);
    if (!v) return false;
    return this.verdictFilter === "feasible" ? !!v.feasible : !v.feasible && v.filter === this.verdictFilter;
  }

  matches(node) {
    if (!this.verdictMatches(node)) return false;
    const f = this.filter;
    if (!f) return true;
    if (node.name.toLowerCase().includes(f)) return true;
    for (const [k, v] of Object.entries(node.labels || {})) {
      if (k.toLowerCase().includes(f) || String(v).toLowerCase().includes(f)) return true;
    }
    for (const res of Object.keys(node.allocatable || {})) if (res.toLowerCase().includes(f)) return true;
    for (const res of Object.keys(node.free || {})) if (res.toLowerCase().includes(f)) return true;
    for (const t of node.taints || []) if (t.toLowerCase().includes(f)) return true;
    for (const p of node.pods || []) if (p.toLowerCase().includes(f)) return true;
    return false;
  }

  relayout(force = false) {
    const rows = [];
    const visible = this.nodes.filter((n) => this.matches(n));
    if (!this.groupBy) {
      for (const n of visible) rows.push({ type: "node", key: `n:${n.name}`, node: n });
    } else {
      const groups = new Map();
      for (const n of this.nodes) {
        const g = this.groupOf(n);
        if (!groups.has(g)) groups.set(g, { all: [], shown: [] });
        groups.get(g).all.push(n);
      }
      for (const n of visible) groups.get(this.groupOf(n)).shown.push(n);
      const cmp = collator();
      const values = [...groups.keys()].sort((a, b) => (a === NO_GROUP) - (b === NO_GROUP) || cmp.compare(a, b));
      for (const value of values) {
        const { all, shown } = groups.get(value);
        if (!shown.length) continue;
        let total = 0;
        let free = 0;
        let cordoned = 0;
        let wholeFree = 0; // schedulable nodes with every device free: a gang of whole-node pods fits on these
        for (const n of all) {
          const c = countCells(n);
          total += c.total;
          free += c.free;
          if (n.unschedulable) cordoned++;
          else if (c.total && c.free === c.total) wholeFree++;
        }
        const collapsed = this.collapsed.has(value);
        const hidden = all.length - shown.length;
        rows.push({ type: "group", key: `g:${value}`, value, all, total, free, cordoned, wholeFree, collapsed, hidden });
        if (!collapsed) for (const n of shown) rows.push({ type: "node", key: `n:${n.name}`, node: n, group: value });
      }
    }
    const structure = rows.map((r) => r.key).join("\n");
    if (force || structure !== this.structure) {
      this.structure = structure;
      // Positions moved: drop every row so none is left at a stale offset.
      for (const r of this.rendered.values()) r.el.remove();
      this.rendered.clear();
    }
    this.rows = rows;
    this.index = new Map(rows.map((r, i) => [r.key, i]));
    this.headerOf = [];
    let header = -1;
    rows.forEach((r, i) => {
      if (r.type === "group") header = i;
      this.headerOf.push(header);
    });
    this.pinKey = null;
    this.canvas.style.height = `${rows.length * ROW_H}px`;
    this.empty.hidden = rows.length > 0;
    this.render();
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  /** Build the rows in view that are missing or stale, drop the ones that scrolled away: one DOM pass. */
  render() {
    const top = this.root.scrollTop;
    const height = this.root.clientHeight || 800;
    const first = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
    const last = Math.min(this.rows.length, Math.ceil((top + height) / ROW_H) + OVERSCAN);
    const keep = new Set();
    const frag = document.createDocumentFragment();
    for (let i = first; i < last; i++) {
      const row = this.rows[i];
      const stamp = this.stamp(row);
      keep.add(row.key);
      const have = this.rendered.get(row.key);
      if (have && have.stamp === stamp && have.index === i) continue;
      if (have) have.el.remove();
      const node = row.type === "group" ? this.buildGroup(row) : this.buildNode(row.node);
      node.style.top = `${i * ROW_H}px`;
      this.rendered.set(row.key, { el: node, index: i, stamp });
      frag.appendChild(node);
    }
    for (const [key, r] of this.rendered) {
      if (!keep.has(key)) {
        r.el.remove();
        this.rendered.delete(key);
      }
    }
    if (frag.childNodes.length) this.canvas.appendChild(frag);
    this.renderPin(Math.floor(top / ROW_H));
  }

  renderPin(topIndex) {
    this.pinHolder.hidden = !this.groupBy;
    const h = this.headerOf ? this.headerOf[topIndex] : -1;
    const row = h >= 0 && h < topIndex ? this.rows[h] : null;
    if (!row) {
      // The strip keeps its height (no jump of the map when it fills); empty while the header itself is in view.
      this.pin.classList.add("idle");
      this.pinKey = null;
      return;
    }
    this.pin.classList.remove("idle");
    this.pinKey = row.key;
    const stamp = `${row.key}|${this.stamp(row)}`;
    if (stamp === this.pinStamp) return;
    this.pinStamp = stamp;
    const label = row.value === NO_GROUP ? `no ${this.groupBy} label` : row.value;
    this.pin.replaceChildren(el("span", { class: "group-key" }, this.groupBy),
      el("span", { class: "group-value" }, label),
      el("span", { class: "group-stats" }, plural(row.all.length, "node"), " · ", `${row.free}/${row.total} free`));
  }

  stamp(row) {
    if (row.type === "group") {
      return `${this.epoch}|${row.all.length}|${row.total}|${row.free}|${row.cordoned}|${row.collapsed}|${row.hidden}`;
    }
    return `${this.epoch}|${this.nameWidth()}|${row.node.etag ?? `serial${this.serial}`}`;
  }

  scrollToNode(name) {
    const n = this.byName.get(name);
    if (!n) return false;
    if (this.groupBy && this.collapsed.delete(this.groupOf(n))) this.relayout(true);
    const i = this.index.get(`n:${name}`);
    if (i === undefined) return false;
    const h = this.root.clientHeight;
    if (i * ROW_H < this.root.scrollTop || (i + 1) * ROW_H > this.root.scrollTop + h) {
      this.root.scrollTop = Math.max(0, i * ROW_H - h / 3);
    }
    this.render();
    const r = this.rendered.get(`n:${name}`);
    if (r) {
      r.el.classList.remove("flash");
      void r.el.offsetWidth;
      r.el.classList.add("flash");
    }
    return true;
  }

  // ---- rows ---------------------------------------------------------------------------------------------------

  buildGroup(row) {
    const value = row.value === NO_GROUP ? "" : row.value;
    const label = row.value === NO_GROUP ? `no ${this.groupBy} label` : value;
    const used = row.total - row.free;
    const pct = row.total ? Math.round((used / row.total) * 100) : 0;
    const check = el("input", {
      type: "checkbox",
      class: "select-group",
      "aria-label": `select every node of ${label}`,
      title: row.value === NO_GROUP ? "select these nodes" : `select every node with ${this.groupBy}=${value}`,
    });
    check.checked = this.groupChecked(row.value);
    if (row.hidden) check.title = `select the ${plural(row.all.length - row.hidden, "matching node")} shown`;
    const bar = el("span", { class: "usage", title: `${used} of ${row.total} devices in use` }, el("span"));
    bar.firstChild.style.width = `${pct}%`;
    return el(
      "div",
      { class: `group-row${row.collapsed ? " collapsed" : ""}`, "data-group": value, role: "row" },
      el("span", { class: "group-head", role: "rowheader" }, check,
        el("button", { class: "group-toggle", type: "button", "aria-expanded": String(!row.collapsed),
          title: row.collapsed ? "expand" : "collapse" }, row.collapsed ? "▸" : "▾"),
        el("span", { class: "group-key" }, this.groupBy),
        el("span", { class: "group-value", title: label }, label)),
      el("span", { class: "group-stats" },
        plural(row.all.length, "node"),
        row.hidden
          ? el("span", { class: "group-hidden" }, ` (${row.all.length - row.hidden} match, ${row.hidden} hidden)`)
          : null,
        " · ", `${row.free}/${row.total} free`,
        // The domain's free shape: a gang kept in one domain (an NVLink clique, a rack) fits only on what one
        // group has free, whatever the cluster's total.
        " · ", el("span", { class: "group-shape", title: `${plural(row.wholeFree, "node")} with every device free `
          + `(cordoned ones not counted; taints and selectors not checked): the largest gang of whole-node pods `
          + `that fits in this ${this.groupBy}` }, `${row.wholeFree}/${row.all.length} nodes free, `
          + `gang ≤ ${row.wholeFree} whole nodes`),
        row.cordoned ? el("span", { class: "flag cordoned" }, `${row.cordoned} cordoned`) : null),
      bar,
    );
  }

  buildNode(node) {
    const classes = ["node-row"];
    if (node.unschedulable) classes.push("is-cordoned");
    if (node.taints && node.taints.length) classes.push("is-tainted");
    if (this.baseline) {
      const before = this.baseline.get(node.name);
      if (before === undefined) classes.push("is-added");
      else if (this.changed ? this.changed.has(node.name) : before !== node.etag) classes.push("is-changed");
    }
    const check = el("input", { type: "checkbox", class: "select-node", "aria-label": `select ${node.name}` });
    check.checked = this.isSelected(node.name);
    const flags = el("span", { class: "flags" }, rowFlags(node, classes.includes("is-added")).map(([cls, text, title]) =>
      el("span", { class: `flag ${cls}`, title }, text)));
    const head = el("div", { class: "node-head", role: "rowheader" }, check,
      el("button", { class: "node-name", type: "button", title: `${node.name}: facts and why-pending`,
        "aria-label": node.name }, middleCut(node.name, this.nameWidth())),
      flags);
    const stats = nodeStats(node);
    const explain = el("div", { class: "node-explain" });
    const devices = el("div", { class: "devices" });
    for (const g of node.groups || []) devices.appendChild(this.buildNuma(node, g));
    if (!devices.childNodes.length) devices.appendChild(el("span", { class: "muted no-devices" }, "no devices"));
    const row = el("div", { class: classes.join(" "), "data-node": node.name, role: "row" },
      head, stats, explain, devices);
    this.applyExplain(row);
    return row;
  }

  /** --name-w of the canvas now (a container query changes it with the map's width). */
  nameWidth() {
    if (this.nameW === undefined || this.nameWEpoch !== this.root.clientWidth) {
      this.nameWEpoch = this.root.clientWidth;
      this.nameW = parseFloat(getComputedStyle(this.canvas).getPropertyValue("--name-w")) || 130;
    }
    return this.nameW;
  }

  buildNuma(node, group) {
    const topo = group.numa !== null && group.numa !== undefined;
    const box = el("div", { class: topo ? "numa" : "numa flat" });
    if (topo) {
      box.setAttribute("data-numa", String(group.numa));
      box.setAttribute("title", `NUMA node ${group.numa}`);
      box.appendChild(el("span", { class: "numa-label" }, `N${group.numa}`));
    }
    for (const sw of group.switches || []) {
      const s = el("div", { class: sw.switch ? "switch" : "switch flat" });
      if (sw.switch) s.setAttribute("title", `PCIe switch ${sw.switch}`);
      for (const c of sw.devices || []) s.appendChild(this.buildCell(node.name, c));
      for (const nic of sw.nics || []) s.appendChild(this.buildNic(node.name, nic));
      box.appendChild(s);
    }
    return box;
  }

  holderClass(holder) {
    const key = holderKey(holder, this.colorBy, this.gangs);
    return holder ? `held ${keyClass(key, this.colorBy, this.palette)}` : "free";
  }

  buildCell(nodeName, c) {
    const holders = c.holders || [];
    const holder = holders[0] || "";
    const held = c.kind === "mig" ? [...new Set((c.slots || []).map((s) => s.holder).filter(Boolean))] : holders;
    const attrs = {
      "data-device": `${nodeName}/${c.id}`,
      "data-holder": holder,
      "data-kind": c.kind,
      "data-resource": c.resource,
      tabindex: "-1",
      role: "gridcell",
      // What a screen reader says, and what a holder is without its colour.
      "aria-label": `${nodeName} ${c.id} (${c.kind === "device" ? c.resource : c.kind}): `
        + `${held.length ? `held by ${held.join(", ")}` : "free"}`,
    };
    if (holders.length > 1) attrs["data-holders"] = holders.join(" ");
    if (c.kind === "mig") {
      const count = c.slotCount || 7;
      const cell = el("div", { ...attrs, class: "cell mig" });
      cell.style.width = `${count * SLOT_W + 2}px`;
      for (const s of c.slots || []) {
        const slot = el("div", {
          class: `slot ${s.holder ? this.holderClass(s.holder) : "unheld"}`,
          "data-holder": s.holder || "",
          "data-profile": s.profile,
          "data-start": String(s.start),
        });
        slot.style.left = `${(s.start / count) * 100}%`;
        slot.style.width = `${(s.size / count) * 100}%`;
        cell.appendChild(slot);
      }
      return cell;
    }
    if (SHARED.has(c.kind)) {
      const cell = el("div", { ...attrs, class: `cell shared${holders.length > 1 ? " multi" : ""}` });
      const share = c.share;
      const frac = share && share.total ? Math.min(1, share.used / share.total) : holders.length ? 1 : 0;
      if (frac > 0) {
        const fill = el("div", { class: `fill ${this.holderClass(holder)}` });
        fill.style.height = `${Math.max(8, frac * 100)}%`;
        cell.appendChild(fill);
      }
      return cell;
    }
    return el("div", { ...attrs, class: `cell ${this.holderClass(holder)}${c.kind === "dra" ? " dra" : ""}` });
  }

  buildNic(nodeName, nic) {
    const holders = nic.holders || [];
    return el("div", {
      class: `cell nic ${holders.length ? this.holderClass(holders[0]) : "free"}`,
      "data-nic": `${nodeName}/${nic.id}`,
      "data-holders": holders.join(" "),
      tabindex: "-1",
      role: "gridcell",
      "aria-label": `${nodeName} NIC ${nic.id}: ${holders.length ? `aligned with ${holders.join(", ")}` : "no pod"}`,
    });
  }

  applyExplain(row) {
    const name = row.getAttribute("data-node");
    const slot = row.querySelector(".node-explain");
    const v = this.explain ? this.explain.get(name) : undefined;
    row.removeAttribute("data-filter");
    row.removeAttribute("data-feasible");
    slot.replaceChildren();
    if (!v) return;
    if (v.feasible) {
      row.setAttribute("data-feasible", "true");
      const score = v.score !== undefined && v.score !== null ? ` · ${Math.round(v.score)}` : "";
      slot.appendChild(el("span", { class: "feasible-badge", title: "every filter passes" }, `fits${score}`));
    } else {
      row.setAttribute("data-feasible", "false");
      if (v.filter) row.setAttribute("data-filter", v.filter);
      slot.appendChild(el("span", { class: "filter-badge", title: (v.reasons || []).join("\n") }, v.filter || "?"));
    }
  }

  syncChecks() {
    for (const r of this.rendered.values()) {
      const box = r.el.querySelector("input");
      if (!box) continue;
      if (box.classList.contains("select-node")) box.checked = this.isSelected(r.el.getAttribute("data-node"));
      else {
        const g = r.el.getAttribute("data-group");
        box.checked = this.groupChecked(g === "" ? NO_GROUP : g);
      }
    }
  }

  // ---- events -------------------------------------------------------------------------------------------------

  onChange(e) {
    const t = e.target;
    if (t.classList.contains("select-node")) {
      const name = t.closest(".node-row").getAttribute("data-node");
      const n = this.byName.get(name);
      const g = n ? this.groupOf(n) : NO_GROUP;
      if (!t.checked && this.selectedGroups.has(g)) {
        // Unticking one node of a selected group: the group becomes its other nodes, by name.
        this.selectedGroups.delete(g);
        for (const m of this.nodes) if (this.groupOf(m) === g && m.name !== name) this.selectedNodes.add(m.name);
      }
      if (t.checked) this.selectedNodes.add(name);
      else this.selectedNodes.delete(name);
    } else if (t.classList.contains("select-group")) {
      const raw = t.closest(".group-row").getAttribute("data-group");
      const g = raw === "" ? NO_GROUP : raw;
      const members = this.nodes.filter((m) => this.groupOf(m) === g);
      const shown = this.filter ? members.filter((m) => this.matches(m)) : members;
      if (t.checked && shown.length < members.length) {
        // Filtering: tick only the nodes the filter shows, by name (never the hidden ones of the group).
        for (const m of shown) this.selectedNodes.add(m.name);
      } else if (t.checked) this.selectedGroups.add(g);
      else {
        this.selectedGroups.delete(g);
        for (const m of this.nodes) if (this.groupOf(m) === g) this.selectedNodes.delete(m.name);
      }
    } else return;
    this.syncChecks();
    this.hooks.onSelection?.();
  }

  onClick(e) {
    const t = e.target;
    if (t.closest(".group-toggle")) {
      const raw = t.closest(".group-row").getAttribute("data-group");
      const g = raw === "" ? NO_GROUP : raw;
      if (!this.collapsed.delete(g)) this.collapsed.add(g);
      this.relayout();
      return;
    }
    if (t.closest(".node-name")) {
      this.hooks.onNode?.(t.closest(".node-row").getAttribute("data-node"));
      return;
    }
    const info = this.info(t);
    if (info) this.hooks.onCell?.(info);
  }

  /** What sits under an element of the map: {node, cell | nic, slot, holder}. */
  info(target) {
    const cellEl = target.closest(".cell");
    if (!cellEl) return null;
    const rowEl = cellEl.closest(".node-row");
    const node = rowEl && this.byName.get(rowEl.getAttribute("data-node"));
    if (!node) return null;
    if (cellEl.classList.contains("nic")) {
      const id = cellEl.getAttribute("data-nic").slice(node.name.length + 1);
      for (const nic of nicsOf(node)) {
        if (nic.id === id) return { node, nic, holder: (nic.holders || [])[0] || "", el: cellEl };
      }
      return null;
    }
    const id = cellEl.getAttribute("data-device").slice(node.name.length + 1);
    let cell = null;
    for (const c of cellsOf(node)) {
      if (c.id === id) {
        cell = c;
        break;
      }
    }
    if (!cell) return null;
    const slotEl = target.closest(".slot");
    let slot = null;
    if (slotEl) {
      const start = Number(slotEl.getAttribute("data-start"));
      slot = (cell.slots || []).find((s) => s.start === start) || null;
    }
    const holder = slot ? slot.holder || "" : (cell.holders || [])[0] || "";
    return { node, cell, slot, holder, el: slotEl || cellEl };
  }

  onOver(e) {
    const target = e.target.closest(".slot, .cell");
    if (target === this.lastHover) return;
    this.lastHover = target;
    if (!target) {
      this.leave();
      return;
    }
    const info = this.info(target);
    if (info) {
      this.hooks.onHover?.(info, e);
      this.markHolder(info.holder);
    } else this.leave();
  }

  onMove(e) {
    if (this.lastHover) this.hooks.onHoverMove?.(e);
  }

  leave() {
    this.lastHover = null;
    this.markHolder("");
    this.hooks.onLeave?.();
  }

  /** Outline every drawn cell of `holder` (a holder shown by more than its colour); "" clears. */
  markHolder(holder) {
    for (const c of this.canvas.querySelectorAll(".cell.same-holder")) c.classList.remove("same-holder");
    if (!holder) return;
    for (const c of this.canvas.querySelectorAll(".cell[data-holder], .cell[data-holders]")) {
      const all = (c.getAttribute("data-holders") || c.getAttribute("data-holder") || "").split(" ");
      if (all.includes(holder)) c.classList.add("same-holder");
    }
  }

  firstCell() {
    const top = Math.floor(this.root.scrollTop / ROW_H);
    for (let i = top; i < this.rows.length; i++) {
      if (this.rows[i].type !== "node") continue;
      const cell = this.rendered.get(this.rows[i].key)?.el.querySelector(".cell");
      if (cell) return cell;
    }
    return null;
  }

  /** Arrow keys: left and right along the row's cells (Home, End: its first and last), up and down to the same
   * place in the next node row that has cells, scrolled into view. */
  moveFocus(cell, key) {
    const rowEl = cell.closest(".node-row");
    const cells = [...rowEl.querySelectorAll(".cell")];
    const at = cells.indexOf(cell);
    if (key === "ArrowLeft" || key === "ArrowRight" || key === "Home" || key === "End") {
      const to = { ArrowLeft: at - 1, ArrowRight: at + 1, Home: 0, End: cells.length - 1 }[key];
      cells[Math.max(0, Math.min(cells.length - 1, to))].focus();
      return;
    }
    const step = key === "ArrowDown" ? 1 : -1;
    let i = this.index.get(`n:${rowEl.getAttribute("data-node")}`);
    for (i += step; i >= 0 && i < this.rows.length; i += step) {
      const row = this.rows[i];
      if (row.type !== "node" || !(row.node.groups || []).some((g) => g.switches.some((sw) => (sw.devices || []).length
        || (sw.nics || []).length))) continue;
      const h = this.root.clientHeight;
      if (i * ROW_H < this.root.scrollTop) this.root.scrollTop = i * ROW_H;
      else if ((i + 1) * ROW_H > this.root.scrollTop + h) this.root.scrollTop = (i + 1) * ROW_H - h;
      this.render();
      const next = [...(this.rendered.get(row.key)?.el.querySelectorAll(".cell") || [])];
      if (next.length) next[Math.min(at, next.length - 1)].focus();
      return;
    }
  }

  /** Colour keys by how many devices they hold (the legend), largest first. */
  legend(limit = 10) {
    const counts = new Map();
    let free = 0;
    for (const n of this.nodes) {
      const stats = countCells(n);
      free += stats.free;
      for (const [h, k] of stats.holders) {
        const key = holderKey(h, this.colorBy, this.gangs);
        counts.set(key, (counts.get(key) || 0) + k);
      }
    }
    const top = [...counts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    return { top: top.slice(0, limit), more: Math.max(0, top.length - limit), free };
  }
}

