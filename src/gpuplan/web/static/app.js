// gpuplan ui: the Train page. Calls /api/train with the form's values (the API's keyword names), draws the
// memory as SVG bars and shows time and cost with their P10-P90 bands. The form's state is the page's query
// string, so a plan is a link. No inline script, no eval, no external requests (see the CSP header).
"use strict";

const FIELDS = ["model", "gpu", "gpus", "tp", "pp", "zero", "micro_batch", "tokens", "offer"];
const SVG = "http://www.w3.org/2000/svg";
// Okabe-Ito: distinguishable with the common colour-vision deficiencies
const COLOURS = { weights: "#0072B2", gradients: "#E69F00", optimizer: "#009E73", activations: "#CC79A7", other: "#999999" };

const $ = (sel) => document.querySelector(sel);

function status(text, isError) {
  const el = $("#status");
  el.textContent = text;
  el.className = isError ? "error" : "";
}

async function getJSON(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function fill(list, values) {
  list.replaceChildren(...values.map(([value, label]) => {
    const option = document.createElement("option");
    option.value = value;
    if (label) option.textContent = label;
    return option;
  }));
}

function gib(bytes) {
  return (bytes / 2 ** 30).toFixed(1) + " GiB";
}

function duration(seconds) {
  if (seconds == null) return "";
  const days = seconds / 86400;
  return days >= 1 ? days.toFixed(1) + " days" : (seconds / 3600).toFixed(1) + " h";
}

function number(x, digits) {
  return x == null ? "" : Number(x).toLocaleString("en-US", { maximumFractionDigits: digits });
}

function usd(x) {
  return x == null ? "" : "$" + number(x, 0);
}

function el(name, attrs, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function drawMemory(memory) {
  const groups = ["weights", "gradients", "optimizer", "activations", "other"];
  const rows = groups.map((g) => [g, memory[g + "_bytes"] || 0]);
  rows.push(["total", memory.total_bytes]);
  const scale = Math.max(memory.capacity_bytes, memory.total_bytes);
  const width = 640, left = 100, right = 110, row = 24;
  const plot = width - left - right;
  const height = rows.length * row + 24;
  const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img",
    "aria-label": `memory per GPU: ${gib(memory.total_bytes)} of ${gib(memory.capacity_bytes)}` });
  rows.forEach(([name, bytes], i) => {
    const y = i * row + 4;
    svg.append(el("text", { x: left - 8, y: y + 14, "text-anchor": "end" }, name));
    if (name === "total") {
      let x = left;
      for (const g of groups) {
        const w = (plot * (memory[g + "_bytes"] || 0)) / scale;
        svg.append(el("rect", { x, y, width: w, height: row - 8, fill: COLOURS[g] }));
        x += w;
      }
    } else {
      svg.append(el("rect", { x: left, y, width: (plot * bytes) / scale, height: row - 8, fill: COLOURS[name] }));
    }
    svg.append(el("text", { x: left + (plot * bytes) / scale + 6, y: y + 14 }, gib(bytes)));
  });
  const cap = left + (plot * memory.capacity_bytes) / scale;
  svg.append(el("line", { x1: cap, x2: cap, y1: 0, y2: height - 16, stroke: memory.fits ? "#1d2430" : "#b42318",
    "stroke-dasharray": "4 3" }));
  svg.append(el("text", { x: cap, y: height - 4, "text-anchor": "middle" }, "capacity " + gib(memory.capacity_bytes)));
  $("#memory").replaceChildren(svg);
}

function showFigures(record) {
  const t = record.time, c = record.cost;
  const rows = [];
  if (t) {
    rows.push(["Time to train", duration(t.seconds), duration(t.seconds_p10), duration(t.seconds_p90)]);
    rows.push(["GPU-hours", number(t.gpu_hours, 0), number(t.gpu_hours_p10, 0), number(t.gpu_hours_p90, 0)]);
    rows.push(["MFU", number(t.mfu, 3), number(t.mfu_p10, 3), number(t.mfu_p90, 3)]);
    rows.push(["Tokens/s", number(t.tokens_per_s, 0), number(t.tokens_per_s_p10, 0), number(t.tokens_per_s_p90, 0)]);
  }
  if (c && c.usd != null) rows.push(["Cost", usd(c.usd), usd(c.usd_p10), usd(c.usd_p90)]);
  const body = $("#figures tbody");
  body.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    for (const text of cells) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.append(td);
    }
    return tr;
  }));
  $("#figures").hidden = rows.length === 0;
}

function query() {
  const params = new URLSearchParams();
  const form = $("#train-form");
  for (const name of FIELDS) {
    const value = form.elements[name].value.trim();
    if (value !== "") params.set(name, value);
  }
  return params;
}

async function plan(push) {
  const params = query();
  if (!params.get("model") || !params.get("gpu")) return;
  if (push) history.pushState(null, "", "?" + params);
  status("planning...");
  try {
    const record = await getJSON("/api/train?" + params);
    const m = record.memory;
    $("#headline").textContent = `${record.model.id} on ${record.layout.gpus} x ${record.gpu.name}: ` +
      (m.fits ? `fits (${gib(m.total_bytes)} of ${gib(m.capacity_bytes)}; micro-batch up to ${m.max_micro_batch})`
              : "does not fit: " + m.reasons.join("; "));
    drawMemory(m);
    showFigures(record);
    $("#json-link").href = "/api/train?" + params;
    $("#result").hidden = false;
    status("");
  } catch (e) {
    $("#result").hidden = true;
    status(e.message, true);
  }
}

function fromURL() {
  const params = new URLSearchParams(location.search);
  const form = $("#train-form");
  for (const name of FIELDS) if (params.has(name)) form.elements[name].value = params.get(name);
}

async function start() {
  try {
    const [models, gpus, offers] = await Promise.all(
      [getJSON("/api/models"), getJSON("/api/gpus"), getJSON("/api/offers")]);
    fill($("#model-ids"), models.models.map((m) => [m.id, m.name]));
    fill($("#train-form").elements.gpu, gpus.accelerators.map((g) => [g.id, g.name]));
    fill($("#offer-ids"), offers.offers.map((o) => [o.id, `${o.gpu_count} x ${o.gpu}, $${o.usd_per_gpu_hour}/GPU-h`]));
  } catch (e) {
    status(e.message, true);
  }
  const gpu = $("#train-form").elements.gpu;
  if (!new URLSearchParams(location.search).has("gpu") && [...gpu.options].some((o) => o.value === "h100-sxm-80gb")) {
    gpu.value = "h100-sxm-80gb";
  }
  fromURL();
  $("#train-form").addEventListener("submit", (event) => {
    event.preventDefault();
    plan(true);
  });
  window.addEventListener("popstate", () => {
    fromURL();
    plan(false);
  });
  plan(false);
}

document.addEventListener("DOMContentLoaded", start);
