// gpuplan ui: the Train page. Calls /api/train with the form's values (the API's keyword names), draws the
// memory as SVG bars and shows time and cost with their P10-P90 bands. Sliders re-plan as they move (the API
// answers one estimate in milliseconds). The form's state is the page's query string, so a plan is a link.
"use strict";

import { el } from "./chart.js";
import {
  $, debounce, downloads, duration, fill, formFromURL, formQuery, getJSON, gib, gpuOptions, linkOutputs,
  modelPicker, nav, newestOnly, number, showResult, status, tableRows, usd,
} from "./common.js";

const FIELDS = ["model", "gpu", "gpus", "tokens", "offer", "micro_batch", "tp", "pp", "zero", "seq_len", "global_batch",
  "recompute", "recompute_modules", "precision", "fsdp", "sequence_parallel", "cp", "ep", "etp", "ep_comm_overlap", "moe_dispatch_dtype", "moe_dispatcher",
  "attention_kernel", "stack", "recipe"];
// Okabe-Ito, as on every page
const COLOURS = { weights: "#0072B2", gradients: "#E69F00", optimizer: "#009E73", activations: "#CC79A7", other: "#999999" };
const GROUPS = ["weights", "gradients", "optimizer", "activations", "other"];
const form = $("#train-form");
let record = null;
const request = newestOnly();

function drawMemory(memory) {
  const rows = GROUPS.map((g) => [g, memory[g + "_bytes"] || 0]);
  rows.push(["total", memory.total_bytes]);
  const scale = Math.max(memory.capacity_bytes, memory.total_bytes);
  const width = 760, left = 100, right = 110, row = 24;
  const plot = width - left - right;
  const height = rows.length * row + 24;
  const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", class: "chart memory",
    "aria-label": `memory per GPU: ${gib(memory.total_bytes)} of ${gib(memory.capacity_bytes)}` });
  rows.forEach(([name, bytes], i) => {
    const y = i * row + 4;
    svg.append(el("text", { x: left - 8, y: y + 14, "text-anchor": "end" }, name));
    if (name === "total") {
      let x = left;
      for (const g of GROUPS) {
        const w = (plot * (memory[g + "_bytes"] || 0)) / scale;
        svg.append(el("rect", { x, y, width: w, height: row - 8, fill: COLOURS[g] }));
        x += w;
      }
    } else {
      svg.append(el("rect", { x: left, y, width: (plot * bytes) / scale, height: row - 8, fill: COLOURS[name],
        "data-part": name, "data-value": bytes }));
    }
    svg.append(el("text", { x: left + (plot * bytes) / scale + 6, y: y + 14, "data-value": bytes }, gib(bytes)));
  });
  const cap = left + (plot * memory.capacity_bytes) / scale;
  svg.append(el("line", { x1: cap, x2: cap, y1: 0, y2: height - 16, stroke: memory.fits ? "#1d2430" : "#b42318",
    "stroke-dasharray": "4 3" }));
  svg.append(el("text", { x: cap, y: height - 4, "text-anchor": "middle" }, "capacity " + gib(memory.capacity_bytes)));
  $("#memory").replaceChildren(svg);
}

function figureRows(r) {
  const t = r.time, c = r.cost;
  const rows = [];
  if (t) {
    rows.push(["time_s", "Time to train", t.seconds, t.seconds_p10, t.seconds_p90, duration]);
    rows.push(["gpu_hours", "GPU-hours", t.gpu_hours, t.gpu_hours_p10, t.gpu_hours_p90, (x) => number(x, 0)]);
    rows.push(["mfu", "MFU", t.mfu, t.mfu_p10, t.mfu_p90, (x) => number(x, 3)]);
    rows.push(["tokens_per_s", "Tokens/s", t.tokens_per_s, t.tokens_per_s_p10, t.tokens_per_s_p90, (x) => number(x, 0)]);
  }
  if (c && c.usd != null) rows.push(["cost_usd", "Cost", c.usd, c.usd_p10, c.usd_p90, usd]);
  return rows;
}

function showFigures(r) {
  const rows = figureRows(r);
  tableRows($("#figures tbody"), rows.map(([, name, v, lo, hi, f]) => [name, [f(v), v], [f(lo), lo], [f(hi), hi]]));
  $("#figures").hidden = rows.length === 0;
}

async function plan(push) {
  const params = formQuery(form, FIELDS);
  if (!params.get("model") || !params.get("gpu")) return;
  if (push === true) history.pushState(null, "", "?" + params);
  else if (push === "replace") history.replaceState(null, "", "?" + params);
  status("planning...");
  await request(async (current) => {
    const r = await getJSON("/api/train?" + params);
    if (!current()) return;
    record = r;
    const m = r.memory;
    $("#headline").textContent = `${r.model.id} on ${r.layout.gpus} x ${r.gpu.name}: ` +
      (m.fits ? `fits (${gib(m.total_bytes)} of ${gib(m.capacity_bytes)}; micro-batch up to ${m.max_micro_batch})`
              : "does not fit: " + m.reasons.join("; "));
    drawMemory(m);
    showFigures(r);
    $("#json-link").href = "/api/train?" + params;
    showResult();
  });
}

async function start() {
  nav();
  linkOutputs(form);
  try {
    const [, , offers] = await Promise.all([modelPicker(form, () => plan(true)), gpuOptions(form.elements.gpu, "h100-sxm-80gb"),
      getJSON("/api/offers")]);
    fill($("#offer-ids"), offers.offers.map((o) => [o.id, `${o.gpu_count} x ${o.gpu}, $${o.usd_per_gpu_hour}/GPU-h`]));
  } catch (e) {
    status(e.message, true);
  }
  formFromURL(form, FIELDS);
  downloads($("#memory-downloads"), "gpuplan-train-memory",
    () => [["part", "bytes"], ...GROUPS.map((g) => [g, record.memory[g + "_bytes"] || 0]),
      ["total", record.memory.total_bytes], ["capacity", record.memory.capacity_bytes]],
    () => record.memory, () => $("#memory svg"));
  downloads($("#figures-downloads"), "gpuplan-train-time-cost",
    () => [["quantity", "estimate", "p10", "p90"], ...figureRows(record).map(([k, , v, lo, hi]) => [k, v, lo, hi])],
    () => record);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    plan(true);
  });
  // what-if: every change re-plans at once and keeps the address in step
  const live = debounce(() => plan("replace"), 120);
  form.addEventListener("input", (event) => {
    if (event.target.type === "range" || event.target.tagName === "SELECT" || event.target.type === "checkbox") live();
  });
  form.addEventListener("change", (event) => {
    if (event.target.type === "number") live();
  });
  window.addEventListener("popstate", () => {
    formFromURL(form, FIELDS);
    plan(false);
  });
  plan(false);
}

start();
