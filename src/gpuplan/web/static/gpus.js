// gpuplan ui: the GPUs page. /api/gpus (the filters are its keywords) lists the catalog; the ticked GPUs (ids= in
// the address) are drawn as grouped bars of their dense peak per data type and set side by side in a table.
"use strict";

import { bars } from "./chart.js";
import {
  $, downloads, formFromURL, formQuery, gb, getJSON, nav, number, sig, status, shown,
} from "./common.js";

const API_FIELDS = ["vendor", "min_memory", "dtype", "sort"];
const FIELDS = [...API_FIELDS, "ids"];
const DTYPES = ["fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4"];
const DEFAULT_IDS = ["a100-sxm-80gb", "h100-sxm-80gb", "b200", "mi300x"];
const form = $("#gpus-form");
let listed = [];

const tera = (x) => (x == null ? "" : sig(x / 1e12, 3));
// An integer peak counts operations, not floating-point operations: tera-operations per second (TOPS), as the
// datasheets state int8 (e.g. NVIDIA's H100 datasheet, "INT8 Tensor Core ... TOPS").
const isInteger = (dtype) => /^u?int\d*$/.test(dtype);
const unitOf = (dtype) => (isInteger(dtype) ? "TOPS" : "TFLOP/s");

// rows of the side-by-side table: [label, key, value of an accelerator record, format]
const ROWS = [
  ["vendor", "vendor", (a) => a.vendor, String],
  ["architecture", "architecture", (a) => a.architecture, String],
  ["year", "year", (a) => a.year, String],
  ["memory", "memory_bytes", (a) => a.memory_bytes, gb],
  ["usable memory", "usable_memory_bytes", (a) => a.usable_memory_bytes, gb],
  ["memory type", "memory_type", (a) => a.memory_type, String],
  ["memory bandwidth (TB/s)", "memory_bandwidth_bytes_per_s", (a) => a.memory_bandwidth_bytes_per_s, (x) => sig(x / 1e12, 3)],
  ...DTYPES.map((d) => [`${d} dense peak (${unitOf(d)})`, `peak_flops_per_s.${d}`, (a) => a.peak_flops_per_s[d], tera]),
  ["scale-up link", "interconnect.kind", (a) => a.interconnect && a.interconnect.kind, String],
  ["scale-up bandwidth (GB/s)", "interconnect.bandwidth_bytes_per_s",
    (a) => a.interconnect && a.interconnect.bandwidth_bytes_per_s, (x) => sig(x / 1e9, 3)],
  ["scale-up domain (GPUs)", "scale_up_domain_gpus", (a) => a.scale_up_domain_gpus, String],
  ["PCIe generation", "pcie_gen", (a) => a.pcie_gen, String],
  ["SMs / compute units", "sm_count", (a) => a.sm_count, String],
  ["TDP (W)", "tdp_w", (a) => a.tdp_w, (x) => number(x, 0)],
];

function chosenIds() {
  const text = form.elements.ids.value.trim();
  return text ? text.split(",").map((s) => s.trim()).filter(Boolean) : [];
}

function chosen() {
  const ids = chosenIds();
  return ids.map((id) => listed.find((a) => a.id === id || a.aliases.includes(id))).filter(Boolean);
}

function picker() {
  const ids = new Set(chosenIds());
  $("#picker").replaceChildren(...listed.map((a) => {
    const lab = document.createElement("label");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.value = a.id;
    box.checked = ids.has(a.id);
    box.addEventListener("change", () => {
      const now = chosenIds().filter((id) => id !== a.id);
      if (box.checked) now.push(a.id);
      form.elements.ids.value = now.join(",");
      history.replaceState(null, "", "?" + formQuery(form, FIELDS));
      draw();
    });
    lab.append(box, " " + a.name);
    return lab;
  }));
}

function draw() {
  const accs = chosen();
  $("#result").hidden = accs.length === 0;
  if (!accs.length) {
    status("Tick one or more GPUs to compare.");
    return;
  }
  status("");
  $("#chart").replaceChildren(bars({
    categories: DTYPES,
    series: accs.map((a) => ({ name: a.name, values: Object.fromEntries(DTYPES.map((d) => [d, a.peak_flops_per_s[d]])) })),
    format: (x, dtype) => sig(x / 1e12, 3) + " " + unitOf(dtype),
    aria: "dense peak per data type of " + accs.map((a) => a.name).join(", "),
  }));
  const head = document.createElement("tr");
  head.append(shown("th", null, ""), ...accs.map((a) => shown("th", null, a.name)));
  $("#compare thead").replaceChildren(head);
  $("#compare tbody").replaceChildren(...ROWS.map(([label, key, get, fmt]) => {
    const tr = document.createElement("tr");
    tr.dataset.key = key;
    const th = shown("th", null, label);
    th.scope = "row";
    tr.append(th, ...accs.map((a) => {
      const v = get(a);
      return shown("td", v, v == null ? "n/a" : fmt(v));
    }));
    return tr;
  }));
}

async function load(push) {
  const params = formQuery(form, API_FIELDS);
  if (push) history.pushState(null, "", "?" + formQuery(form, FIELDS));
  try {
    const body = await getJSON("/api/gpus?" + params);
    listed = body.accelerators;
    picker();
    draw();
  } catch (e) {
    status(e.message, true);
  }
}

async function start() {
  nav();
  try {
    const all = await getJSON("/api/gpus");
    const vendors = [...new Set(all.accelerators.map((a) => a.vendor))].sort();
    form.elements.vendor.append(...vendors.map((v) => new Option(v, v)));
  } catch (e) {
    status(e.message, true);
  }
  if (!new URLSearchParams(location.search).has("ids")) form.elements.ids.value = DEFAULT_IDS.join(",");
  formFromURL(form, FIELDS);
  downloads($("#chart-downloads"), "gpuplan-gpus-peaks",
    () => [["gpu", ...DTYPES.map((d) => d + (isInteger(d) ? "_ops_per_s" : "_flops_per_s"))], ...chosen().map((a) => [a.id, ...DTYPES.map((d) => a.peak_flops_per_s[d])])],
    () => chosen().map((a) => ({ id: a.id, peak_flops_per_s: a.peak_flops_per_s })),
    () => $("#chart svg"));
  downloads($("#table-downloads"), "gpuplan-gpus",
    () => [["field", ...chosen().map((a) => a.id)], ...ROWS.map(([, key, get]) => [key, ...chosen().map(get)])],
    () => ({ schema_version: 1, kind: "gpus.list", accelerators: chosen() }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    load(true);
  });
  form.addEventListener("change", (event) => {
    if (event.target.name === "ids") {
      history.replaceState(null, "", "?" + formQuery(form, FIELDS));
      picker();
      draw();
    } else if (event.target.tagName === "SELECT") load(false).then(() => history.replaceState(null, "", "?" + formQuery(form, FIELDS)));
  });
  window.addEventListener("popstate", () => {
    formFromURL(form, FIELDS);
    load(false);
  });
  load(false);
}

start();
