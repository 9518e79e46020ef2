// gpuplan ui: the Plan page. /api/plan/train searches GPU x count x layout x offer; every option drawn is a
// point (time, cost). The picked option (the best by the objective unless the address names another, pick=N)
// shows its layout, its P10-P90 bands (the search's own, the same as /api/train gives for that layout), its
// launch lines and a link to the Train page with its settings. The address holds the whole state.
"use strict";

import { scatter } from "./chart.js";
import {
  $, banded, copyText, downloads, duration, formFromURL, formQuery, getJSON, gib, launchBox, modelPicker, nav,
  number, percent, setURLParam, shown, status, urlParam, usd, usdShort,
} from "./common.js";

const FIELDS = ["model", "tokens", "deadline", "budget", "gpu", "pricing", "objective", "max_gpus", "top"];
const form = $("#plan-form");
let record = null;
let query = null;
let picked = 0;
let searches = 0;

function layoutText(o) {
  const L = o.layout;
  const parts = [`TP ${L.tp}`, `PP ${L.pp}`, `DP ${L.dp}`];
  if (L.virtual_stages > 1) parts.push(`${L.virtual_stages} virtual stages`);
  if (L.cp > 1) parts.push(`CP ${L.cp}`);
  if (L.ep > 1) parts.push(`EP ${L.ep}`);
  parts.push(L.fsdp ? "FSDP" : `ZeRO-${L.zero}`, `micro-batch ${L.micro_batch}`, `global batch ${L.global_batch}`,
    `recompute ${L.recompute}`, L.stack);
  if (L.offload && L.offload !== "none") parts.push(`offload ${L.offload}`);
  return parts.join(" \u00b7 ");
}

function label(o, i) {
  return `#${i + 1}: ${o.gpus} x ${o.gpu} (${where(o)}), ${layoutText(o)}: ${duration(o.time_s)}, ${usd(o.cost_usd)}`;
}

// Where an option runs: the offer's provider and instance, or owned hardware (offer null, --pricing owned).
function where(o) {
  return o.offer ? `${o.offer.provider} ${o.offer.instance}` : "owned";
}

// The train call that reproduces option o (gpuplan train with its layout, offer and tokens).
function trainParams(o) {
  const L = o.layout;
  const p = new URLSearchParams({
    model: query.get("model"), gpu: o.gpu, gpus: o.gpus, tp: L.tp, pp: L.pp, cp: L.cp, ep: L.ep, zero: L.zero,
    fsdp: L.fsdp, sequence_parallel: L.sequence_parallel, micro_batch: L.micro_batch, global_batch: L.global_batch,
    seq_len: L.seq_len, recompute: L.recompute, stack: L.stack, recipe: L.recipe, precision: o.precision,
    tokens: query.get("tokens"), virtual_stages: L.virtual_stages ?? 1, offload: L.offload ?? "none",
  });
  if (o.offer) p.set("offer", o.offer.id);
  return p;
}

// The time-cost front of the options drawn: those the search flags as Pareto (over time, cost and GPUs) that no
// other is at least as fast and as cheap as. A choice among the answer's points, no estimate.
function front(options) {
  const flagged = options.filter((o) => o.pareto).sort((a, b) => a.time_s - b.time_s || a.cost_usd - b.cost_usd);
  const out = [];
  let best = Infinity;
  for (const o of flagged) {
    if (o.cost_usd < best) {
      out.push([o.time_s / 86400, o.cost_usd]);
      best = o.cost_usd;
    }
  }
  return out;
}

function draw() {
  const c = record.constraints;
  const points = record.options.map((o, i) => ({
    x: o.time_s / 86400, y: o.cost_usd, group: o.gpu, id: String(i), strong: o.pareto, label: label(o, i),
  }));
  const refX = c.deadline_s != null ? [{ value: c.deadline_s / 86400, label: "deadline " + duration(c.deadline_s) }] : [];
  const refY = c.budget_usd != null ? [{ value: c.budget_usd, label: "budget " + usd(c.budget_usd) }] : [];
  const svg = scatter({
    points, xLabel: "time to train (days)", yLabel: "cost (USD)", xLog: true, yLog: true,
    xFormat: (d) => number(d, 2), yFormat: usdShort, front: front(record.options), refX, refY, selected: String(picked),
    onSelect: (id) => pick(Number(id)),
    aria: `time against cost of ${points.length} training options; the picked one is #${picked + 1}`,
  });
  $("#chart").replaceChildren(svg);
}

function optionsTable() {
  const body = $("#options tbody");
  body.replaceChildren(...record.options.map((o, i) => {
    const tr = document.createElement("tr");
    const cells = [
      [String(i + 1)], [`${o.gpus} x ${o.gpu}`], [where(o)], [layoutText(o)],
      [duration(o.time_s), o.time_s], [usd(o.cost_usd), o.cost_usd], [number(o.mfu, 3), o.mfu], [o.pareto ? "yes" : ""],
    ];
    for (const [text, value] of cells) tr.append(shown("td", value, text));
    return tr;
  }));
}

function csvRows() {
  const head = ["rank", "gpu", "gpus", "offer", "provider", "instance", "pricing", "usd_per_gpu_hour", "tp", "pp", "dp",
    "cp", "ep", "virtual_stages", "zero", "fsdp", "offload", "micro_batch", "global_batch", "seq_len", "recompute",
    "stack", "precision", "time_s", "time_s_p10", "time_s_p90", "cost_usd", "cost_usd_p10", "cost_usd_p90",
    "gpu_hours", "mfu", "step_s", "peak_memory_bytes", "capacity_bytes", "pareto"];
  return [head, ...record.options.map((o, i) => {
    const L = o.layout;
    const offer = o.offer || {};
    return [i + 1, o.gpu, o.gpus, offer.id ?? null, offer.provider ?? null, offer.instance ?? null, o.pricing,
      o.usd_per_gpu_hour, L.tp, L.pp, L.dp, L.cp, L.ep, L.virtual_stages, L.zero, L.fsdp, L.offload, L.micro_batch,
      L.global_batch, L.seq_len, L.recompute, L.stack, o.precision, o.time_s, o.time_s_p10, o.time_s_p90, o.cost_usd,
      o.cost_usd_p10, o.cost_usd_p90, o.gpu_hours, o.mfu, o.step_s, o.peak_memory_bytes, o.capacity_bytes, o.pareto];
  })];
}

function pick(i) {
  if (!record || !record.options[i]) i = 0;
  picked = i;
  setURLParam("pick", i === 0 ? null : String(i));
  const o = record.options[i];
  draw();
  $("#headline").textContent = "";
  $("#headline").append(
    i === 0 ? "Best by " + record.objective + ": " : `Option #${i + 1}: `,
    shown("span", o.gpus, String(o.gpus)), ` x ${o.gpu} ${o.offer ? "on " + where(o) : "owned"} (${o.pricing}, `,
    shown("span", o.usd_per_gpu_hour, usd(o.usd_per_gpu_hour)), " per GPU-hour)");
  $("#layout-line").textContent = layoutText(o) + " \u00b7 " + o.precision;
  banded($("#card-time"), o.time_s, o.time_s_p10, o.time_s_p90, duration);
  banded($("#card-cost"), o.cost_usd, o.cost_usd_p10, o.cost_usd_p90, usd);
  banded($("#card-mfu"), o.mfu, o.mfu_p10, o.mfu_p90, percent);
  $("#card-memory").replaceChildren(shown("span", o.peak_memory_bytes, gib(o.peak_memory_bytes), "big"),
    " of ", shown("span", o.capacity_bytes, gib(o.capacity_bytes)));
  launchBox(o.launch, ["torchtitan", "megatron", "deepspeed"]);
  const train = trainParams(o);
  $("#train-link").href = "/train?" + train;
  $("#share-link").value = location.href;
  $("#chosen").dataset.bands = "loaded";
}

async function plan(push) {
  const params = formQuery(form, FIELDS);
  if (!params.get("model") || !params.get("tokens")) return;
  const keep = push ? null : urlParam("pick");
  const launcher = push ? null : urlParam("launcher");
  const address = new URLSearchParams(params);
  if (keep) address.set("pick", keep);
  if (launcher) address.set("launcher", launcher);
  if (push) history.pushState(null, "", "?" + address);
  status("searching GPUs, counts, layouts and offers...");
  form.setAttribute("aria-busy", "true");
  try {
    const mine = ++searches;
    const body = await getJSON("/api/plan/train?" + params);
    if (mine !== searches) return;
    record = body;
    query = params;
    const p = record.pruned;
    $("#searched").textContent = `${number(record.searched)} candidates searched, ${number(record.evaluated)} ` +
      `evaluated, ${number(record.feasible)} feasible, ${number(record.pareto_size)} on the Pareto front. Pruned: ` +
      Object.entries(p).filter(([, n]) => n).map(([k, n]) => `${k.replace(/_/g, " ")} ${number(n)}`).join(", ") + ".";
    if (!record.options.length) {
      $("#result").hidden = true;
      status("No option meets these constraints. " + $("#searched").textContent, true);
      return;
    }
    $("#result").hidden = false;
    optionsTable();
    downloads($("#chart-downloads"), "gpuplan-plan-train", csvRows, () => record, () => $("#chart svg"));
    status("");
    pick(Math.min(Number(keep) || 0, record.options.length - 1));
  } catch (e) {
    $("#result").hidden = true;
    status(e.message, true);
  } finally {
    form.removeAttribute("aria-busy");
  }
}

async function start() {
  nav();
  formFromURL(form, FIELDS);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    plan(true);
  });
  window.addEventListener("popstate", () => {
    formFromURL(form, FIELDS);
    plan(false);
  });
  $("#copy-launch").addEventListener("click", () => copyText($("#launch-text").textContent, $("#copied")));
  $("#copy-link").addEventListener("click", () => copyText(location.href, $("#copied")));
  try {
    const [, gpus] = await Promise.all([modelPicker(form), getJSON("/api/gpus")]);
    const list = $("#gpu-ids");
    list.replaceChildren(...["all", ...gpus.accelerators.map((g) => g.id)].map((id) => new Option(id, id)));
  } catch (e) {
    status(e.message, true);
  }
  plan(false);
}

start();
