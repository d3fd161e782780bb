// Plain SVG charts for the accelsched pages: no dependencies, no build step, nothing from a CDN.
//
// Why hand-written: the two pages need two chart kinds (bars for the capacity panel, lines for the simulate
// curves), and a vendored library would bring tens of kilobytes and its own DOM habits. Every text node goes
// through textContent and every element through createElementNS, so a pod or policy name can never become markup.
//
//   barChart(container, {title, categories, series: [{name, values}], unit = "", stacked = false, height = 160})
//   lineChart(container, {title, xLabel, yLabel, series: [{name, points: [[x, y], ...]}], height = 240})
//
// Each replaces the content of `container` with one <svg> and returns it. Hovering a bar or the plot shows a
// tooltip (an SVG <title> plus a floating .chart-tip div); clicking a legend entry toggles its series.
// Optional extras: `series[i].color` (keep a colour stable when the caller filters series), `hidden: [names]`
// (series drawn toggled off), `width` (pixels; default the container's width), lineChart `step: true` (each value
// holds until the next point: event time series).
//
// DOM hooks (tests and CSS): svg.chart[data-chart="bar"|"line"], .chart-title, .legend-item[data-series]
// [data-hidden], bars rect.bar[data-series][data-category][data-value], lines path.series-line[data-series],
// the tooltip div.chart-tip (one per page, shown while hovering).

export const PALETTE = [
  "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
];

const SVG = "http://www.w3.org/2000/svg";
const CHAR_PX = 6.2; // about one character of the 11px axis font
const LABEL_CHARS = 18;

function el(name, attrs = {}, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function colourOf(series, i) {
  return series.color || PALETTE[i % PALETTE.length];
}

// ----------------------------------------------------------------------------------------------- numbers

// 1, 2 or 5 times a power of ten: the steps people read without thinking.
// `integer`: counts (nodes, pods) never get a 0.5 tick.
export function niceTicks(lo, hi, count = 5, integer = false) {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [0, 1];
  if (hi < lo) [lo, hi] = [hi, lo];
  if (hi === lo) {
    const pad = Math.abs(hi) > 0 ? Math.abs(hi) * 0.1 : 1;
    lo -= pad;
    hi += pad;
  }
  const raw = (hi - lo) / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  let step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
  if (integer) step = Math.max(1, Math.round(step));
  const start = Math.floor(lo / step + 1e-9) * step;
  const ticks = [];
  for (let t = start; t <= hi + step * 0.5 && ticks.length < 50; t += step) {
    ticks.push(Number(t.toPrecision(12)));
    if (t >= hi - 1e-9 * step) break;
  }
  if (ticks[ticks.length - 1] < hi - 1e-9 * step) ticks.push(Number((start + ticks.length * step).toPrecision(12)));
  return ticks;
}

export function formatNumber(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  const digits = a >= 100 ? 1 : a >= 1 ? 2 : 3;
  return Number(v.toFixed(digits)).toLocaleString("en-US", { maximumFractionDigits: digits });
}

// ----------------------------------------------------------------------------------------------- tooltip

let tip = null;

function tooltip() {
  if (tip && tip.isConnected) return tip;
  tip = document.createElement("div");
  tip.className = "chart-tip";
  tip.setAttribute("role", "tooltip");
  // CSSOM, not a style attribute: allowed under the page's Content-Security-Policy (style-src 'self').
  Object.assign(tip.style, {
    position: "fixed", pointerEvents: "none", zIndex: "1000", display: "none",
    background: "rgba(20, 24, 31, 0.94)", color: "#f4f6f8", padding: "6px 8px", borderRadius: "4px",
    font: "12px/1.4 system-ui, sans-serif", boxShadow: "0 2px 8px rgba(0,0,0,.25)", whiteSpace: "nowrap",
  });
  document.body.appendChild(tip);
  return tip;
}

// lines: [{text, color?, strong?}]
function showTip(event, lines) {
  const t = tooltip();
  t.replaceChildren();
  for (const line of lines) {
    const row = document.createElement("div");
    if (line.color) {
      const swatch = document.createElement("span");
      Object.assign(swatch.style, {
        display: "inline-block", width: "9px", height: "9px", marginRight: "6px", background: line.color,
        borderRadius: "2px",
      });
      row.appendChild(swatch);
    }
    const text = document.createElement("span");
    text.textContent = line.text;
    if (line.strong) text.style.fontWeight = "600";
    row.appendChild(text);
    t.appendChild(row);
  }
  t.style.display = "block";
  const pad = 14;
  const w = t.offsetWidth;
  const h = t.offsetHeight;
  let x = event.clientX + pad;
  let y = event.clientY + pad;
  if (x + w > window.innerWidth - 4) x = event.clientX - pad - w;
  if (y + h > window.innerHeight - 4) y = event.clientY - pad - h;
  t.style.left = `${Math.max(4, x)}px`;
  t.style.top = `${Math.max(4, y)}px`;
}

function hideTip() {
  if (tip) tip.style.display = "none";
}

// ----------------------------------------------------------------------------------------------- frame

function frame(container, kind, opts, fallbackHeight) {
  container.replaceChildren();
  const width = Math.max(240, Math.round(opts.width || container.clientWidth || 480));
  const height = Math.max(100, Math.round(opts.height || fallbackHeight));
  const svg = el("svg", {
    class: "chart", "data-chart": kind, width, height, viewBox: `0 0 ${width} ${height}`, role: "figure",
    "font-family": "system-ui, sans-serif", "font-size": 11,
  });
  if (opts.title) svg.setAttribute("aria-label", opts.title);
  svg.addEventListener("mouseleave", hideTip);
  container.appendChild(svg);
  return { svg, width, height };
}

// The legend: one entry per series, click (or Enter/Space) toggles it. Returns its height.
function legend(svg, series, hidden, x0, y0, maxWidth, onToggle) {
  const g = el("g", { class: "legend" });
  svg.appendChild(g);
  let x = x0;
  let y = y0;
  series.forEach((s, i) => {
    const off = hidden.has(s.name);
    const item = el("g", {
      class: "legend-item", "data-series": s.name, "data-hidden": off ? "true" : "false", tabindex: 0,
      role: "button", "aria-pressed": off ? "false" : "true", cursor: "pointer",
    });
    item.appendChild(el("title", {}, `${s.name}: click to ${off ? "show" : "hide"}`));
    const swatch = el("rect", { x: 0, y: -8, width: 10, height: 10, rx: 2, fill: off ? "none" : colourOf(s, i) });
    swatch.setAttribute("stroke", colourOf(s, i));
    item.appendChild(swatch);
    const label = el("text", { x: 14, y: 1, fill: "currentColor", opacity: off ? 0.45 : 1 }, s.name);
    item.appendChild(label);
    g.appendChild(item);
    const w = 14 + Math.min(200, 6.5 * String(s.name).length) + 14;
    if (x + w > x0 + maxWidth && x > x0) {
      x = x0;
      y += 16;
    }
    item.setAttribute("transform", `translate(${x},${y})`);
    x += w;
    const toggle = () => onToggle(s.name);
    item.addEventListener("click", toggle);
    item.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        toggle();
      }
    });
  });
  return y - y0 + 16;
}

function titleText(svg, title, width) {
  if (!title) return 0;
  const fits = Math.max(8, Math.floor((width - 16) / 7.4)); // about one character of the 13px bold title
  const text = String(title);
  const node = el("text", { class: "chart-title", x: 8, y: 15, "font-size": 13, "font-weight": 600,
    fill: "currentColor" }, text.length > fits ? `${text.slice(0, fits - 1)}…` : text);
  if (text.length > fits) node.appendChild(el("title", {}, text));
  svg.appendChild(node);
  return 22;
}

function tickLabels(ticks, unit) {
  return ticks.map((t) => formatNumber(t) + (unit && unit.length <= 2 ? unit : ""));
}

// The pixel width of the widest label, measured in this svg's own font (the labels differ: "8" vs "40,000"), so
// the rotated axis title can sit left of them instead of on top. An svg not laid out yet (a hidden panel) measures
// 0: then the character estimate stands in.
function widestLabel(svg, labels) {
  const probe = el("text", { visibility: "hidden" });
  svg.appendChild(probe);
  let widest = 0;
  for (const text of labels) {
    probe.textContent = text;
    let w = 0;
    try {
      w = probe.getComputedTextLength();
    } catch {
      w = 0;
    }
    widest = Math.max(widest, w > 0 ? w : text.length * CHAR_PX);
  }
  probe.remove();
  return Math.ceil(widest);
}

// The left edge of the plot: the tick labels end TICK_GAP px before it; a rotated axis title (11px, its glyphs about
// 9px above and 3px below the baseline) goes left of the widest one.
const TICK_GAP = 6;
const TITLE_W = 14;

function plotLeft(widest, withTitle, minimum) {
  return Math.max(minimum, Math.ceil(4 + (withTitle ? TITLE_W + 4 : 0) + widest + TICK_GAP));
}

// The x of a rotated axis title's baseline: right of it only the descenders, then a gap, then the labels.
function titleX(left, widest) {
  return Math.max(10, left - TICK_GAP - widest - 7);
}

function yAxis(svg, ticks, labels, scale, left, right) {
  const g = el("g", { class: "axis axis-y" });
  ticks.forEach((t, k) => {
    const y = scale(t);
    g.appendChild(el("line", { x1: left, x2: right, y1: y, y2: y, stroke: "currentColor", "stroke-opacity": 0.12 }));
    g.appendChild(el("text", { x: left - TICK_GAP, y: y + 4, "text-anchor": "end", fill: "currentColor",
      opacity: 0.75 }, labels[k]));
  });
  svg.appendChild(g);
}

// ----------------------------------------------------------------------------------------------- bar chart

export function barChart(container, opts) {
  const { title = "", categories = [], series = [], unit = "", stacked = false } = opts;
  const hidden = new Set(opts.hidden || []);
  const { svg, width, height } = frame(container, "bar", opts, 160);
  svg.dataset.stacked = stacked ? "true" : "false";

  function draw() {
    svg.replaceChildren();
    let top = titleText(svg, title, width);
    const legendH = series.length > 1 || opts.legend ? legend(svg, series, hidden, 8, top + 10, width - 16, (name) => {
      if (hidden.has(name)) hidden.delete(name);
      else hidden.add(name);
      draw();
    }) : 0;
    top += legendH + 8;
    const visible = series.map((s, i) => ({ s, i })).filter(({ s }) => !hidden.has(s.name));
    const value = (s, c) => {
      const v = Number(s.values?.[c]);
      return Number.isFinite(v) ? v : 0;
    };
    let max = 0;
    for (let c = 0; c < categories.length; c++) {
      if (stacked) max = Math.max(max, visible.reduce((sum, { s }) => sum + Math.max(0, value(s, c)), 0));
      else for (const { s } of visible) max = Math.max(max, value(s, c));
    }
    const whole = (v) => !Number.isFinite(Number(v)) || Number.isInteger(Number(v));
    const integer = series.every((s) => (s.values || []).every(whole));
    const ticks = niceTicks(0, max > 0 ? max : 1, 4, integer);
    const yMax = ticks[ticks.length - 1];
    const axisTitle = unit && unit.length > 2;
    const yLabels = tickLabels(ticks, unit);
    const widest = widestLabel(svg, yLabels);
    const left = plotLeft(widest, axisTitle, axisTitle ? 36 : 30);
    const right = width - 10;
    // Category names wider than their band are drawn slanted (cut at LABEL_CHARS), the full name in a <title>.
    const band = (right - left) / Math.max(1, categories.length);
    const longest = Math.max(0, ...categories.map((c) => Math.min(LABEL_CHARS, String(c).length)));
    const slant = longest * CHAR_PX > band * 0.95;
    // The slanted names get room of their own below: the plot keeps the height asked for.
    const labels = slant ? Math.min(80, 14 + longest * CHAR_PX * 0.64) : 22;
    const total = height + labels - 22;
    svg.setAttribute("height", total);
    svg.setAttribute("viewBox", `0 0 ${width} ${total}`);
    const bottom = total - labels;
    const plotH = Math.max(20, bottom - top);
    const scale = (v) => bottom - (v / yMax) * plotH;
    yAxis(svg, ticks, yLabels, scale, left, right);
    const inner = band * 0.72;
    const g = el("g", { class: "bars" });
    svg.appendChild(g);
    categories.forEach((cat, c) => {
      const x0 = left + c * band + (band - inner) / 2;
      const lines = [{ text: String(cat), strong: true }];
      for (const { s, i } of visible) {
        lines.push({ text: `${s.name}: ${formatNumber(value(s, c))}${unit ? ` ${unit}` : ""}`, color: colourOf(s, i) });
      }
      let acc = 0;
      visible.forEach(({ s, i }, k) => {
        const v = value(s, c);
        let x;
        let w;
        let y;
        let h;
        if (stacked) {
          x = x0;
          w = inner;
          y = scale(acc + Math.max(0, v));
          h = scale(acc) - y;
          acc += Math.max(0, v);
        } else {
          w = inner / Math.max(1, visible.length);
          x = x0 + k * w;
          y = scale(Math.max(0, v));
          h = bottom - y;
        }
        const bar = el("rect", {
          class: "bar", x: x.toFixed(1), y: y.toFixed(1), width: Math.max(1, w - (stacked ? 0 : 1)).toFixed(1),
          height: Math.max(0, h).toFixed(1), fill: colourOf(s, i), "data-series": s.name, "data-category": cat,
          "data-value": v,
        });
        bar.appendChild(el("title", {}, `${cat} — ${s.name}: ${formatNumber(v)}${unit ? ` ${unit}` : ""}`));
        bar.addEventListener("mousemove", (e) => showTip(e, lines));
        bar.addEventListener("mouseleave", hideTip);
        g.appendChild(bar);
      });
      const name = String(cat);
      const cx = (left + c * band + band / 2).toFixed(1);
      const label = el("text", {
        class: "category", x: cx, y: bottom + 14, "text-anchor": slant ? "end" : "middle",
        fill: "currentColor", opacity: 0.8,
      }, name.length > LABEL_CHARS ? `${name.slice(0, LABEL_CHARS - 1)}…` : name);
      if (slant) label.setAttribute("transform", `rotate(-40 ${cx} ${bottom + 10})`);
      const wrap = el("g", { class: "category-label" });
      wrap.appendChild(el("title", {}, name));
      wrap.appendChild(label);
      g.appendChild(wrap);
    });
    svg.appendChild(el("line", { x1: left, x2: right, y1: bottom, y2: bottom, stroke: "currentColor",
      "stroke-opacity": 0.4 }));
    if (axisTitle) {
      const cy = (top + bottom) / 2;
      const tx = titleX(left, widest);
      svg.appendChild(el("text", { class: "axis-label", x: tx, y: cy, "text-anchor": "middle",
        transform: `rotate(-90 ${tx} ${cy})`, fill: "currentColor", opacity: 0.7 }, unit));
    }
  }
  draw();
  return svg;
}

// ----------------------------------------------------------------------------------------------- line chart

// Index of the point of `xs` (sorted ascending) nearest to x.
function nearest(xs, x) {
  let lo = 0;
  let hi = xs.length - 1;
  if (hi < 0) return -1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] < x) lo = mid;
    else hi = mid;
  }
  return Math.abs(xs[lo] - x) <= Math.abs(xs[hi] - x) ? lo : hi;
}

export function lineChart(container, opts) {
  const { title = "", xLabel = "", yLabel = "" } = opts;
  const series = (opts.series || []).map((s, i) => {
    const pts = (s.points || [])
      .map(([x, y]) => [Number(x), y === null || y === undefined ? NaN : Number(y)])
      .filter(([x]) => Number.isFinite(x))
      .sort((a, b) => a[0] - b[0]);
    return { name: String(s.name), color: colourOf(s, i), pts, xs: pts.map((p) => p[0]) };
  });
  const hidden = new Set(opts.hidden || []);
  const { svg, width, height } = frame(container, "line", opts, 240);

  function draw() {
    svg.replaceChildren();
    let top = titleText(svg, title, width);
    top += legend(svg, series, hidden, 8, top + 10, width - 16, (name) => {
      if (hidden.has(name)) hidden.delete(name);
      else hidden.add(name);
      draw();
    }) + 10;
    const visible = series.filter((s) => !hidden.has(s.name));
    const domainFrom = visible.length ? visible : series;
    let xlo = Infinity;
    let xhi = -Infinity;
    let ylo = Infinity;
    let yhi = -Infinity;
    for (const s of domainFrom) {
      for (const [x, y] of s.pts) {
        xlo = Math.min(xlo, x);
        xhi = Math.max(xhi, x);
        if (Number.isFinite(y)) {
          ylo = Math.min(ylo, y);
          yhi = Math.max(yhi, y);
        }
      }
    }
    if (!Number.isFinite(xlo)) [xlo, xhi] = [0, 1];
    if (!Number.isFinite(ylo)) [ylo, yhi] = [0, 1];
    if (ylo > 0 && ylo < (yhi - ylo) * 0.5) ylo = 0; // start at zero unless the data sits far above it
    // x spans the data exactly (ticks inside it); y widens to its nice ticks.
    if (xhi === xlo) [xlo, xhi] = [xlo - 1, xhi + 1];
    const xt = niceTicks(xlo, xhi, Math.max(2, Math.floor(width / 70))).filter(
      (t) => t >= xlo - 1e-9 * (xhi - xlo) && t <= xhi + 1e-9 * (xhi - xlo),
    );
    const yt = niceTicks(ylo, yhi, Math.max(2, Math.floor(height / 50)));
    const [x0, x1] = [xlo, xhi];
    const [y0, y1] = [yt[0], yt[yt.length - 1]];
    const yLabels = tickLabels(yt, "");
    const widest = widestLabel(svg, yLabels);
    const left = plotLeft(widest, !!yLabel, yLabel ? 40 : 30);
    const right = width - 12;
    const bottom = height - (xLabel ? 38 : 24);
    const plotH = Math.max(20, bottom - top);
    const sx = (x) => left + ((x - x0) / (x1 - x0 || 1)) * (right - left);
    const sy = (y) => bottom - ((y - y0) / (y1 - y0 || 1)) * plotH;
    yAxis(svg, yt, yLabels, sy, left, right);
    const xg = el("g", { class: "axis axis-x" });
    for (const t of xt) {
      const x = sx(t);
      xg.appendChild(el("line", { x1: x, x2: x, y1: bottom, y2: bottom + 4, stroke: "currentColor",
        "stroke-opacity": 0.5 }));
      xg.appendChild(el("text", { x, y: bottom + 16, "text-anchor": "middle", fill: "currentColor", opacity: 0.75 },
        formatNumber(t)));
    }
    xg.appendChild(el("line", { x1: left, x2: right, y1: bottom, y2: bottom, stroke: "currentColor",
      "stroke-opacity": 0.4 }));
    svg.appendChild(xg);
    if (xLabel) {
      svg.appendChild(el("text", { class: "axis-label", x: (left + right) / 2, y: height - 6, "text-anchor": "middle",
        fill: "currentColor", opacity: 0.8 }, xLabel));
    }
    if (yLabel) {
      const cy = (top + bottom) / 2;
      const tx = titleX(left, widest);
      svg.appendChild(el("text", { class: "axis-label", x: tx, y: cy, "text-anchor": "middle",
        transform: `rotate(-90 ${tx} ${cy})`, fill: "currentColor", opacity: 0.8 }, yLabel));
    }
    const lines = el("g", { class: "lines" });
    svg.appendChild(lines);
    for (const s of visible) {
      let d = "";
      let pen = false;
      let lastY = 0;
      for (const [x, y] of s.pts) {
        if (!Number.isFinite(y)) {
          pen = false;
          continue;
        }
        // step: each value holds until the next point (a time series of events), as matplotlib's where="post".
        if (pen && opts.step) d += `L${sx(x).toFixed(1)},${lastY.toFixed(1)}`;
        d += `${pen ? "L" : "M"}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`;
        lastY = sy(y);
        pen = true;
      }
      const path = el("path", { class: "series-line", d, fill: "none", stroke: s.color, "stroke-width": 2,
        "stroke-linejoin": "round", "data-series": s.name });
      path.appendChild(el("title", {}, s.name));
      lines.appendChild(path);
    }
    // Hover: a guide at the nearest x, a dot per series at its nearest point, the values in the tooltip.
    const guide = el("line", { class: "guide", y1: top, y2: bottom, stroke: "currentColor", "stroke-opacity": 0.35,
      "stroke-dasharray": "3 3", visibility: "hidden" });
    svg.appendChild(guide);
    const dots = visible.map((s) => {
      const dot = el("circle", { class: "hover-dot", r: 3.5, fill: s.color, stroke: "#fff", "stroke-width": 1,
        visibility: "hidden", "data-series": s.name });
      svg.appendChild(dot);
      return dot;
    });
    const overlay = el("rect", { class: "hover-area", x: left, y: top, width: Math.max(1, right - left),
      height: plotH, fill: "transparent", "pointer-events": "all" });
    svg.appendChild(overlay);
    const hide = () => {
      guide.setAttribute("visibility", "hidden");
      for (const dot of dots) dot.setAttribute("visibility", "hidden");
      hideTip();
    };
    overlay.addEventListener("mouseleave", hide);
    overlay.addEventListener("mousemove", (e) => {
      const box = svg.getBoundingClientRect();
      const px = (e.clientX - box.left) * (width / (box.width || width));
      const x = x0 + ((px - left) / (right - left || 1)) * (x1 - x0);
      // The x shown: the visible series' point nearest to the pointer.
      let best = null;
      for (const s of visible) {
        const k = nearest(s.xs, x);
        if (k >= 0 && (best === null || Math.abs(s.xs[k] - x) < Math.abs(best - x))) best = s.xs[k];
      }
      if (best === null) return hide();
      guide.setAttribute("x1", sx(best).toFixed(1));
      guide.setAttribute("x2", sx(best).toFixed(1));
      guide.setAttribute("visibility", "visible");
      const rows = [{ text: `${xLabel || "x"}: ${formatNumber(best)}`, strong: true }];
      visible.forEach((s, k) => {
        const j = nearest(s.xs, best);
        const y = j >= 0 ? s.pts[j][1] : NaN;
        if (j >= 0 && Number.isFinite(y)) {
          dots[k].setAttribute("cx", sx(s.pts[j][0]).toFixed(1));
          dots[k].setAttribute("cy", sy(y).toFixed(1));
          dots[k].setAttribute("visibility", "visible");
        } else dots[k].setAttribute("visibility", "hidden");
        rows.push({ text: `${s.name}: ${formatNumber(y)}`, color: s.color });
      });
      showTip(e, rows);
    });
  }
  draw();
  return svg;
}
