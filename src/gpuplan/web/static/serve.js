// gpuplan ui: the Serve page. /api/plan/serve searches GPU x weight format x KV cache x TP x engine for a request
// rate under the latency targets; each option it keeps is a point (throughput, latency at the asked load). The
// picked one (pick=N in the address) shows its launch lines, and /api/serve with its settings gives its latency
// at the asked load, with P10-P90 bands. The address holds the whole state (form, pick, axes, launcher).
"use strict";

import { scatter } from "./chart.js";
import {
  $, banded, copyButtons, downloads, duration, formFromURL, formQuery, gb, getJSON, hideResult, launchBox, nav, number,
  perSecond, prunedText, searchPickers, setURLParam, shown, sig, status, urlParam, usd,
} from "./common.js";

const FIELDS = ["model", "qps", "prompt_tokens", "output_tokens", "max_ttft", "max_tpot", "gpu", "pricing", "engine", "top"];
const AXES = {
  tpot_s: ["TPOT", duration],
  ttft_s: ["TTFT", duration],
  request_latency_s: ["request latency", duration],
  tokens_per_s: ["tokens/s per replica", perSecond],
  usd_per_million_output_tokens: ["$ per million output tokens", (x) => "$" + sig(x, 3)],
};
const form = $("#serve-form");
let record = null;
let query = null;
let picked = 0;
let ticket = 0;
let searches = 0;

function optionText(o) {
  return `${o.gpus} x ${o.gpu} (${o.offer.provider}), ${o.engine}, ${o.weights} weights, ${o.kv_cache} KV, TP ${o.tp}`;
}

function serveParams(o) {
  const p = new URLSearchParams({
    model: query.get("model"), gpu: o.gpu, tp: o.tp, pp: o.pp, replicas: o.replicas, weights: o.weights,
    kv_cache: o.kv_cache, engine: o.engine, qps: query.get("qps"), offer: o.offer.id,
  });
  for (const k of ["prompt_tokens", "output_tokens", "max_ttft", "max_tpot"]) if (query.get(k)) p.set(k, query.get(k));
  return p;
}

function draw() {
  const yKey = $("#y-axis").value, xKey = $("#x-axis").value;
  const [yLabel, yFormat] = AXES[yKey], [xLabel, xFormat] = AXES[xKey];
  const req = record.request;
  const refY = [];
  if (yKey === "tpot_s" && req.max_tpot_s != null) refY.push({ value: req.max_tpot_s, label: "SLO: TPOT " + duration(req.max_tpot_s) });
  if (yKey === "ttft_s" && req.max_ttft_s != null) refY.push({ value: req.max_ttft_s, label: "SLO: TTFT " + duration(req.max_ttft_s) });
  const points = record.options.map((o, i) => ({
    x: o[xKey], y: o[yKey], group: o.gpu, id: String(i), strong: o.pareto,
    label: `#${i + 1}: ${optionText(o)}: ${AXES[yKey][0]} ${yFormat(o[yKey])}, ${xFormat(o[xKey])} ${xKey === "tokens_per_s" ? "tokens/s" : ""}`,
  }));
  $("#chart").replaceChildren(scatter({
    points, xLabel, yLabel, xLog: true, yLog: true, xFormat, yFormat, refY, selected: String(picked),
    onSelect: (id) => pick(Number(id)), aria: `${yLabel} against ${xLabel} of ${points.length} serving options`,
  }));
}

function csvRows() {
  const head = ["rank", "gpu", "gpus", "instances", "offer", "provider", "weights", "kv_cache", "tp", "pp", "replicas",
    "engine", "max_batch", "ttft_s", "tpot_s", "request_latency_s", "tokens_per_s", "requests_per_s_per_replica",
    "usd_per_million_tokens", "usd_per_million_output_tokens", "usd_per_million_input_tokens", "usd_per_hour",
    "peak_memory_bytes", "meets_slo", "pareto"];
  return [head, ...record.options.map((o, i) => [i + 1, o.gpu, o.gpus, o.instances, o.offer.id, o.offer.provider,
    o.weights, o.kv_cache, o.tp, o.pp, o.replicas, o.engine, o.max_batch, o.ttft_s, o.tpot_s, o.request_latency_s,
    o.tokens_per_s, o.requests_per_s_per_replica, o.usd_per_million_tokens, o.usd_per_million_output_tokens,
    o.usd_per_million_input_tokens, o.usd_per_hour, o.peak_memory_bytes, o.meets_slo, o.pareto])];
}

// /api/serve with the option's offer checks the instance against one replica: host RAM to stage the weights and
// local disk to cache them, per node (machine.instance_checks; a figure the offer does not publish is absent and
// shows as "unknown"), with the answer's warnings.
const CHECKS = [
  ["host_ram", "host RAM", "host_memory_bytes_per_node"],
  ["local_disk", "local disk (weights)", "local_nvme_bytes_per_node"],
];

function instanceChecks(machine) {
  const checks = machine && machine.instance_checks;
  $("#instance-box").hidden = !checks;
  if (!checks) return;
  const inst = machine.instance || {};
  $("#instance-name").textContent = `(${inst.instance || ""}, ${inst.gpus_per_node} GPUs per node: gpuplan serve --offer)`;
  $("#instance-checks tbody").replaceChildren(...CHECKS.filter(([key]) => checks[key]).map(([key, name, have]) => {
    const c = checks[key];
    const tr = document.createElement("tr");
    tr.dataset.check = key;
    tr.className = c.status === "short" ? "bad" : "";
    const th = shown("th", null, name);
    th.scope = "row";
    tr.append(th, shown("td", c.needed_bytes_per_node, gb(c.needed_bytes_per_node)),
      shown("td", c[have], c[have] == null ? "unknown" : gb(c[have])), shown("td", null, c.status));
    return tr;
  }));
  $("#instance-warnings").replaceChildren(...(machine.warnings || []).map((w) => shown("li", null, "warning: " + w)));
}

async function pick(i) {
  if (!record || !record.options[i]) i = 0;
  picked = i;
  setURLParam("pick", i === 0 ? null : String(i));
  const o = record.options[i];
  draw();
  const mine = ++ticket;
  $("#headline").replaceChildren(i === 0 ? "Cheapest per output token: " : `Option #${i + 1}: `,
    shown("span", o.gpus, String(o.gpus)), ` x ${o.gpu} on ${o.offer.provider} ${o.offer.instance} (`,
    shown("span", o.usd_per_hour, usd(o.usd_per_hour)), " per hour)");
  $("#layout-line").textContent = `${o.engine} \u00b7 ${o.weights} weights \u00b7 ${o.kv_cache} KV cache \u00b7 TP ${o.tp} ` +
    `\u00b7 ${o.replicas} replica${o.replicas > 1 ? "s" : ""} \u00b7 batch up to ${o.max_batch}`;
  banded($("#card-ttft"), o.ttft_s, null, null, duration);
  banded($("#card-tpot"), o.tpot_s, null, null, duration);
  banded($("#card-throughput"), o.tokens_per_s, null, null, (x) => number(x, 0));
  banded($("#card-cost"), o.usd_per_million_output_tokens, null, null, (x) => "$" + sig(x, 3));
  launchBox(o.launch, ["vllm", "sglang", "trtllm"], o.engine);
  $("#share-link").value = location.href;
  $("#load-note").textContent = `(${query.get("qps")} requests/s, gpuplan serve with this option's settings; P10-P90 bands)`;
  for (const id of ["#load-ttft", "#load-tpot", "#load-latency", "#load-fleet"]) $(id).textContent = "...";
  $("#instance-box").hidden = true;
  try {
    const s = await getJSON("/api/serve?" + serveParams(o));
    if (mine !== ticket) return;
    const L = s.latency;
    banded($("#load-ttft"), L.ttft_s, L.ttft_s_p10, L.ttft_s_p90, duration);
    banded($("#load-tpot"), L.tpot_s, L.tpot_s_p10, L.tpot_s_p90, duration);
    banded($("#load-latency"), L.request_latency_s, L.request_latency_s_p10, L.request_latency_s_p90, duration);
    $("#load-fleet").replaceChildren(shown("span", s.fleet.gpus, String(s.fleet.gpus), "big"), s.fleet.gpus === 1 ? " GPU, " : " GPUs, ",
      shown("span", L.utilization, sig(100 * L.utilization, 3) + " %"), " busy");
    instanceChecks(s.machine);
    $("#chosen").dataset.load = "loaded";
  } catch (e) {
    if (mine === ticket) status("at your load: " + e.message, true);
  }
}

async function plan(push) {
  const params = formQuery(form, FIELDS);
  if (!params.get("model") || !params.get("qps")) return;
  const keep = push ? null : urlParam("pick");
  const address = new URLSearchParams(params);
  for (const k of ["y", "x", "launcher"]) if (urlParam(k)) address.set(k, urlParam(k));
  if (keep) address.set("pick", keep);
  if (push) history.pushState(null, "", "?" + address);
  status("searching GPUs, formats, engines and offers...");
  try {
    const mine = ++searches;
    const body = await getJSON("/api/plan/serve?" + params);
    if (mine !== searches) return;
    record = body;
    query = params;
    $("#searched").textContent = `${number(record.searched)} candidates searched, ${number(record.evaluated)} ` +
      `planned, ${number(record.feasible)} meet the targets; ` +
      `${number(record.pareto_size)} on the Pareto front. Pruned: ` + prunedText(record.pruned) + ".";
    if (!record.options.length) {
      hideResult("No option meets these targets. " + $("#searched").textContent);
      return;
    }
    $("#result").hidden = false;
    downloads($("#chart-downloads"), "gpuplan-plan-serve", csvRows, () => record, () => $("#chart svg"));
    status("");
    await pick(Math.min(Number(keep) || 0, record.options.length - 1));
  } catch (e) {
    hideResult(e.message);
  }
}

async function start() {
  nav();
  formFromURL(form, FIELDS);
  for (const [id, key] of [["#y-axis", "y"], ["#x-axis", "x"]]) {
    const select = $(id);
    if (urlParam(key) && [...select.options].some((o) => o.value === urlParam(key))) select.value = urlParam(key);
    select.addEventListener("change", () => {
      setURLParam(key, select.selectedIndex === 0 ? null : select.value);
      $("#share-link").value = location.href;
      if (record) draw();
    });
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    plan(true);
  });
  window.addEventListener("popstate", () => {
    formFromURL(form, FIELDS);
    plan(false);
  });
  copyButtons();
  await searchPickers(form);
  plan(false);
}

start();
