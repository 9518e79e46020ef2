// gpuplan ui: the charts, as inline SVG drawn here (no plotting library, nothing from another origin, no eval):
// a scatter (log or linear axes, a Pareto front, reference lines, clickable points), grouped bars and lines.
// They place the values they are given; they compute no estimate.
"use strict";

import { PALETTE } from "./common.js";

const SVG = "http://www.w3.org/2000/svg";
const SHAPES = ["circle", "square", "triangle", "diamond"];
const STACK_PX = 4; // points closer than this (viewBox pixels, about a marker's radius) are one stack

export function el(name, attrs = {}, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) if (v != null) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

// An axis: value -> pixel, and "nice" ticks (1-2-5 steps; on a log axis 1, 2 and 5 times each power of ten).
function axis(values, lo, hi, log, pad = 0.06) {
  const v = values.filter((x) => Number.isFinite(x) && (!log || x > 0)).map((x) => (log ? Math.log10(x) : x));
  let a = v.length ? Math.min(...v) : 0, b = v.length ? Math.max(...v) : 1;
  if (a === b) { a -= log ? 0.3 : Math.abs(a) * 0.1 || 1; b += log ? 0.3 : Math.abs(b) * 0.1 || 1; }
  const span = b - a;
  a -= pad * span; b += pad * span;
  if (!log && v.length && Math.min(...v) >= 0 && a < 0) a = 0;
  const f = (x) => lo + ((log ? Math.log10(x) : x) - a) / (b - a) * (hi - lo);
  const linear = (lo, hi) => {
    const raw = (hi - lo) / 6, mag = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
    const out = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + 1e-9 * step; t += step) out.push(Math.abs(t) < 1e-12 * step ? 0 : t);
    return out;
  };
  const ticks = () => {
    if (!log) return linear(a, b);
    let out = [];
    for (let e = Math.floor(a) - 1; e <= Math.ceil(b) + 1; e++) for (const m of [1, 2, 5]) out.push(m * 10 ** e);
    out = out.filter((t) => Math.log10(t) >= a && Math.log10(t) <= b);
    if (out.length > 9) out = out.filter((t) => String(t).startsWith("1"));
    // less than a decade drawn: evenly stepped ticks read better than one or two powers of ten
    return out.length >= 3 ? out : linear(10 ** a, 10 ** b).filter((t) => t > 0);
  };
  return { f, ticks, lo: log ? 10 ** a : a, hi: log ? 10 ** b : b };
}

function marker(shape, x, y, r, attrs) {
  if (shape === "square") return el("rect", { x: x - r, y: y - r, width: 2 * r, height: 2 * r, ...attrs });
  if (shape === "triangle") {
    return el("polygon", { points: `${x},${y - 1.2 * r} ${x - 1.1 * r},${y + 0.8 * r} ${x + 1.1 * r},${y + 0.8 * r}`, ...attrs });
  }
  if (shape === "diamond") {
    return el("polygon", { points: `${x},${y - 1.3 * r} ${x + 1.3 * r},${y} ${x},${y + 1.3 * r} ${x - 1.3 * r},${y}`, ...attrs });
  }
  return el("circle", { cx: x, cy: y, r, ...attrs });
}

export function styleOf(groups) {
  const index = new Map(groups.map((g, i) => [g, i]));
  return (g) => {
    const i = index.get(g) ?? 0;
    return { colour: PALETTE[i % PALETTE.length], shape: SHAPES[Math.floor(i / PALETTE.length) % SHAPES.length] };
  };
}

function legend(svg, groups, style, x0, y, width) {
  let x = x0;
  for (const g of groups) {
    const w = 28 + 7 * String(g).length;
    if (x + w > width && x > x0) { x = x0; y += 18; }
    const s = style(g);
    svg.append(marker(s.shape, x + 6, y - 4, 5, { fill: s.colour, stroke: "#1d2430", "stroke-width": 0.5 }));
    svg.append(el("text", { x: x + 16, y }, g));
    x += w;
  }
  return y;
}

function axes(svg, X, Y, box, spec) {
  const { left, top, right, bottom } = box;
  svg.append(el("line", { x1: left, y1: bottom, x2: right, y2: bottom, class: "axis" }));
  svg.append(el("line", { x1: left, y1: top, x2: left, y2: bottom, class: "axis" }));
  for (const t of X.ticks()) {
    const x = X.f(t);
    if (x < left - 1 || x > right + 1) continue;
    svg.append(el("line", { x1: x, x2: x, y1: top, y2: bottom, class: "grid" }));
    svg.append(el("text", { x, y: bottom + 16, "text-anchor": "middle", class: "tick" }, spec.xFormat(t)));
  }
  for (const t of Y.ticks()) {
    const y = Y.f(t);
    if (y < top - 1 || y > bottom + 1) continue;
    svg.append(el("line", { x1: left, x2: right, y1: y, y2: y, class: "grid" }));
    svg.append(el("text", { x: left - 6, y: y + 4, "text-anchor": "end", class: "tick" }, spec.yFormat(t)));
  }
  svg.append(el("text", { x: (left + right) / 2, y: bottom + 34, "text-anchor": "middle", class: "label" }, spec.xLabel));
  const ym = (top + bottom) / 2;
  svg.append(el("text", { x: 14, y: ym, "text-anchor": "middle", class: "label", transform: `rotate(-90 14 ${ym})` }, spec.yLabel));
}

// spec: points [{x, y, group, id, label, strong}], xLabel, yLabel, xLog, yLog, xFormat, yFormat, groups,
// front [[x, y], ...] (a staircase through them), refX / refY [{value, label}], diagonal (y = x), selected (id),
// onSelect(id), aria.
export function scatter(spec) {
  const width = 760, height = spec.height || 420;
  const groups = spec.groups || [...new Set(spec.points.map((p) => p.group))];
  const style = styleOf(groups);
  const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "group", "aria-label": spec.aria,
    class: "chart scatter" });
  const legendBottom = legend(svg, groups, style, 70, 16, width - 20);
  const box = { left: 70, top: legendBottom + 14, right: width - 20, bottom: height - 48 };
  const xs = spec.points.map((p) => p.x).concat((spec.refX || []).map((r) => r.value));
  const ys = spec.points.map((p) => p.y).concat((spec.refY || []).map((r) => r.value));
  const X = axis(xs, box.left, box.right, spec.xLog), Y = axis(ys, box.bottom, box.top, spec.yLog);
  axes(svg, X, Y, box, spec);
  if (spec.diagonal) {
    const lo = Math.max(X.lo, Y.lo), hi = Math.min(X.hi, Y.hi);
    if (hi > lo) {
      svg.append(el("line", { x1: X.f(lo), y1: Y.f(lo), x2: X.f(hi), y2: Y.f(hi), class: "ref" }));
      svg.append(el("text", { x: X.f(hi) - 4, y: Y.f(hi) + 14, "text-anchor": "end", class: "ref-label" }, "predicted = published"));
    }
  }
  for (const r of spec.refX || []) {
    const x = X.f(r.value);
    svg.append(el("line", { x1: x, x2: x, y1: box.top, y2: box.bottom, class: "ref" }));
    svg.append(el("text", { x: x - 4, y: box.top + 12, "text-anchor": "end", class: "ref-label" }, r.label));
  }
  for (const r of spec.refY || []) {
    const y = Y.f(r.value);
    svg.append(el("line", { x1: box.left, x2: box.right, y1: y, y2: y, class: "ref" }));
    svg.append(el("text", { x: box.right - 4, y: y - 5, "text-anchor": "end", class: "ref-label" }, r.label));
  }
  if (spec.front && spec.front.length) {
    const pts = [...spec.front].sort((a, b) => a[0] - b[0]);
    let d = `M${X.f(pts[0][0])},${Y.f(pts[0][1])}`;
    for (let i = 1; i < pts.length; i++) d += ` H${X.f(pts[i][0])} V${Y.f(pts[i][1])}`;
    svg.append(el("path", { d, class: "front" }));
  }
  // Drawing order is stacking order in SVG: open markers first, then the Pareto ones, the selected one last, so
  // the picked option is never hidden under a near-equal one. A hovered point moves to the front too (a
  // focused one is not moved: moving a node drops its focus). Options that land within STACK_PX of each other form
  // a stack: a click on a stack that holds the selected option picks the stack's next option (in the order given),
  // so clicking again reaches every option in it.
  const layer = el("g", { class: "points" });
  const rank = (p) => (p.id === spec.selected ? 2 : p.strong ? 1 : 0);
  const ordered = [...spec.points].filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y))
    .sort((a, b) => rank(a) - rank(b));
  const at = new Map(ordered.map((p) => [p.id, [X.f(p.x), Y.f(p.y)]]));
  const stackOf = (p) => {
    const [x, y] = at.get(p.id);
    return ordered.filter((q) => Math.hypot(at.get(q.id)[0] - x, at.get(q.id)[1] - y) <= STACK_PX)
      .sort((a, b) => spec.points.indexOf(a) - spec.points.indexOf(b));
  };
  const choose = (p) => {
    const stack = stackOf(p);
    const here = stack.findIndex((q) => q.id === spec.selected);
    spec.onSelect(here >= 0 && stack.length > 1 ? stack[(here + 1) % stack.length].id : p.id);
  };
  for (const p of ordered) {
    const s = style(p.group);
    const stacked = stackOf(p).length;
    const label = stacked > 1 ? `${p.label} (${stacked} options drawn here: click again for the next)` : p.label;
    const g = el("g", { class: "pt" + (p.id === spec.selected ? " selected" : ""), "data-id": p.id,
      "data-x": p.x, "data-y": p.y, "data-stack": stacked > 1 ? stacked : null, tabindex: spec.onSelect ? 0 : null,
      role: spec.onSelect ? "button" : "img", "aria-label": p.label });
    const [x, y] = at.get(p.id);
    if (p.id === spec.selected) g.append(el("circle", { cx: x, cy: y, r: 11, class: "ring" }));
    g.append(marker(s.shape, x, y, p.strong ? 5.5 : 4.5, {
      fill: p.strong ? s.colour : "#ffffff", stroke: s.colour, "stroke-width": p.strong ? 1 : 1.6 }));
    g.append(el("title", {}, label));
    const front = () => { if (layer.lastChild !== g) layer.append(g); };
    g.addEventListener("pointerenter", front);
    if (spec.onSelect) {
      g.addEventListener("click", () => choose(p));
      g.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); spec.onSelect(p.id); }
      });
    }
    layer.append(g);
  }
  svg.append(layer);
  return svg;
}

// Grouped horizontal bars. spec: categories [name], series [{name, values: {category: value}}], format(value,
// category), aria.
export function bars(spec) {
  const width = 760, left = 90, right = 110, bar = 13, gap = 10;
  const series = spec.series;
  const cats = spec.categories.filter((c) => series.some((s) => s.values[c] != null));
  const style = styleOf(series.map((s) => s.name));
  const svg = el("svg", { width: "100%", role: "img", "aria-label": spec.aria, class: "chart bars" });
  const legendBottom = legend(svg, series.map((s) => s.name), style, left, 16, width - 20);
  const top = legendBottom + 12;
  const max = Math.max(1e-300, ...cats.flatMap((c) => series.map((s) => s.values[c] || 0)));
  const plot = width - left - right;
  let y = top;
  for (const c of cats) {
    svg.append(el("text", { x: left - 8, y: y + (series.length * bar) / 2 + 4, "text-anchor": "end", class: "label" }, c));
    series.forEach((s, i) => {
      const v = s.values[c];
      const yy = y + i * bar;
      if (v == null) {
        svg.append(el("text", { x: left + 4, y: yy + bar - 3, class: "tick" }, "n/a"));
        return;
      }
      const st = style(s.name);
      svg.append(el("rect", { x: left, y: yy + 1, width: Math.max(1, (plot * v) / max), height: bar - 2, fill: st.colour,
        "data-series": s.name, "data-category": c, "data-value": v }, undefined));
      svg.append(el("text", { x: left + (plot * v) / max + 5, y: yy + bar - 3, class: "tick" }, spec.format(v, c)));
    });
    y += series.length * bar + gap;
  }
  const height = y + 8;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  return svg;
}

// Lines over a numeric x. spec: series [{name, points: [[x, y]]}], xLabel, yLabel, xFormat, yFormat, marks
// [{x, label}] (vertical lines: a crossover, the current setting), aria.
export function lines(spec) {
  const width = 760, height = spec.height || 360;
  const names = spec.series.map((s) => s.name);
  const style = styleOf(names);
  const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", "aria-label": spec.aria,
    class: "chart lines" });
  const legendBottom = legend(svg, names, style, 70, 16, width - 20);
  const box = { left: 70, top: legendBottom + 14, right: width - 20, bottom: height - 48 };
  const all = spec.series.flatMap((s) => s.points);
  const X = axis(all.map((p) => p[0]).concat((spec.marks || []).map((m) => m.x)), box.left, box.right, false, 0.02);
  const Y = axis(all.map((p) => p[1]).concat([0]), box.bottom, box.top, false, 0.04);
  axes(svg, X, Y, box, spec);
  spec.series.forEach((s, i) => {
    const st = style(s.name);
    const d = s.points.map((p, j) => `${j ? "L" : "M"}${X.f(p[0]).toFixed(1)},${Y.f(p[1]).toFixed(1)}`).join(" ");
    svg.append(el("path", { d, fill: "none", stroke: st.colour, "stroke-width": 2.2,
      "stroke-dasharray": i % 2 ? "6 3" : null, "data-series": s.name }));
    for (const p of s.points) {
      svg.append(marker(st.shape, X.f(p[0]), Y.f(p[1]), 3.5, { fill: st.colour, "data-x": p[0], "data-y": p[1] }));
    }
  });
  for (const m of spec.marks || []) {
    const x = X.f(m.x);
    svg.append(el("line", { x1: x, x2: x, y1: box.top, y2: box.bottom, class: m.strong ? "mark" : "ref",
      "data-mark": m.label, "data-x": m.x }));
    svg.append(el("text", { x: x + 4, y: box.top + 12 + (m.row || 0) * 14, class: m.strong ? "mark-label" : "ref-label" }, m.label));
  }
  return svg;
}
