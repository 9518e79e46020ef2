// gpuplan ui: the Plan page. /api/plan/train searches GPU x count x layout x offer; every option drawn is a
// point (time, cost). The picked option (the best by the objective unless the address names another, pick=N)
// shows its layout, its P10-P90 bands (the search's own, the same as /api/train gives for that layout), its
// launch lines and a link to the Train page with its settings. A row of the options table picks its option too
// (near-equal options overlap in the chart). "What about my layout?" asks the same search with explain= (the
// CLI's --explain) and shows the answer's rank or pruning reason and its term-by-term difference to option #1.
// The address holds the whole state (the form, pick, launcher, explain).
"use strict";

import { bars, scatter } from "./chart.js";
import {
  $, banded, copyButtons, downloads, duration, formFromURL, formQuery, getJSON, gib, hideResult, launchBox, nav,
  number, percent, prunedText, searchPickers, setURLParam, shown, sig, status, urlParam, usd, usdShort,
} from "./common.js";

// The launcher that runs the stack an option's step time was estimated for (the search's layout.stack): its line
// is shown first. torchtitan is the FSDP2 stack's trainer.
const STACK_LAUNCHER = { megatron: "megatron", fsdp2: "torchtitan", deepspeed: "deepspeed" };
const FIELDS = ["model", "tokens", "deadline", "budget", "gpu", "pricing", "objective", "max_gpus", "top"];
const form = $("#plan-form");
const explainForm = $("#explain-form");
let record = null;
let query = null;
let picked = 0;
let searches = 0;

function layoutText(o) {
  return layoutWords(o.layout);
}

function layoutWords(L) {
  const parts = [`TP ${L.tp}`, `PP ${L.pp}`, `DP ${L.dp}`];
  if (L.virtual_stages > 1) parts.push(`${L.virtual_stages} virtual stages`);
  if (L.cp > 1) parts.push(`CP ${L.cp}`);
  if (L.ep > 1) parts.push(`EP ${L.ep}`);
  if (L.etp != null && L.etp !== L.tp) parts.push(`ETP ${L.etp}`);
  parts.push(L.fsdp ? "FSDP" : `ZeRO-${L.zero}`, `micro-batch ${L.micro_batch}`, `global batch ${L.global_batch}`,
    `recompute ${L.recompute}`);
  if (L.stack) parts.push(L.stack);
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
  if (L.etp != null && L.etp !== L.tp) p.set("etp", L.etp); // unset, train's expert TP follows tp
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
  const e = record.explain;
  if (e && e.estimate && !e.shown) {
    points.push({ x: e.estimate.time_s / 86400, y: e.estimate.cost_usd, group: "your layout", id: "explain", strong: true,
      label: `your layout (${e.gpus} x ${e.gpu}, ${layoutWords(e.layout)}): ${duration(e.estimate.time_s)}, ` +
        `${usd(e.estimate.cost_usd)}; ${verdict(e)}` });
  }
  const refX = c.deadline_s != null ? [{ value: c.deadline_s / 86400, label: "deadline " + duration(c.deadline_s) }] : [];
  const refY = c.budget_usd != null ? [{ value: c.budget_usd, label: "budget " + usd(c.budget_usd) }] : [];
  const svg = scatter({
    points, xLabel: "time to train (days)", yLabel: "cost (USD)", xLog: true, yLog: true,
    xFormat: (d) => number(d, 2), yFormat: usdShort, front: front(record.options), refX, refY, selected: String(picked),
    onSelect: (id) => (id === "explain" ? $("#explain-box").scrollIntoView() : pick(Number(id))),
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
    // the row picks its option: a click anywhere on it, or the button in its first cell (keyboard)
    const button = document.createElement("button");
    button.type = "button";
    button.className = "small";
    button.textContent = `#${i + 1}`;
    button.setAttribute("aria-label", `pick option #${i + 1}`);
    tr.firstChild.replaceChildren(button);
    tr.dataset.id = String(i);
    tr.addEventListener("click", () => {
      pick(i);
      $("#chosen").scrollIntoView({ block: "nearest" });
    });
    return tr;
  }));
}

function csvRows() {
  const head = ["rank", "gpu", "gpus", "offer", "provider", "instance", "pricing", "usd_per_gpu_hour", "tp", "pp", "dp",
    "cp", "ep", "etp", "virtual_stages", "zero", "fsdp", "offload", "micro_batch", "global_batch", "seq_len", "recompute",
    "stack", "precision", "time_s", "time_s_p10", "time_s_p90", "cost_usd", "cost_usd_p10", "cost_usd_p90",
    "gpu_hours", "mfu", "step_s", "peak_memory_bytes", "capacity_bytes", "pareto"];
  return [head, ...record.options.map((o, i) => {
    const L = o.layout;
    const offer = o.offer || {};
    return [i + 1, o.gpu, o.gpus, offer.id ?? null, offer.provider ?? null, offer.instance ?? null, o.pricing,
      o.usd_per_gpu_hour, L.tp, L.pp, L.dp, L.cp, L.ep, L.etp ?? null, L.virtual_stages, L.zero, L.fsdp, L.offload, L.micro_batch,
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
  for (const tr of $("#options tbody").children) {
    const here = tr.dataset.id === String(i);
    tr.classList.toggle("picked", here);
    if (here) tr.setAttribute("aria-current", "true");
    else tr.removeAttribute("aria-current");
  }
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
  launchBox(o.launch, ["torchtitan", "megatron", "deepspeed"], STACK_LAUNCHER[o.layout.stack]);
  const train = trainParams(o);
  $("#train-link").href = "/train?" + train;
  $("#share-link").value = location.href;
  $("#chosen").dataset.bands = "loaded";
}

// ------------------------------------------------------------------------------------ explain=

// The answer's verdict in words: its rank among the feasible options, or why it was pruned; and what lies
// outside the searched grid.
function verdict(e) {
  let text;
  if (e.status === "pruned") {
    text = `Pruned by the search (${e.pruned.replace(/_/g, " ")})` + (e.pruned_why ? `: ${e.pruned_why}` : "") + ".";
  } else if (e.shown) {
    text = `Rank ${number(e.rank)} of ${number(e.feasible)} feasible options: it is option #${e.rank} above.`;
  } else if (e.status === "outside_grid") {
    text = `Outside the searched grid; it would rank ${number(e.rank)} of ${number(e.feasible)} feasible options.`;
  } else {
    text = `Rank ${number(e.rank)} of ${number(e.feasible)} feasible options (not among the ${number(record.options.length)} drawn).`;
  }
  if (e.outside_grid.length) text += " Not searched: " + e.outside_grid.join("; ") + ".";
  return text;
}

// rows of the comparison: [label, versus_best key, format]
const VERSUS = [
  ["time to train", "time_s", duration],
  ["cost", "cost_usd", usd],
  ["GPUs", "gpus", (x) => number(x)],
  ["GPU-hours", "gpu_hours", (x) => number(x)],
  ["price per GPU-hour", "usd_per_gpu_hour", usd],
  ["step time", "step_s", duration],
  ["MFU", "mfu", percent],
  ["memory on the busiest GPU", "peak_memory_bytes", gib],
];

const percentPoints = (x) => sig(100 * x, 3) + " points";
// a term a layout does not have (no pipeline: no bubble) is 0 in the answer
const termTime = (x) => (x === 0 ? "0" : duration(x));

// the rows whose difference reads as better or worse without more context (true: lower is better)
const LOWER_IS_BETTER = { time_s: true, cost_usd: true, gpu_hours: true, mfu: false };

function signed(format, x) {
  if (x == null) return "";
  return (x > 0 ? "+" : x < 0 ? "\u2212" : "") + format(Math.abs(x));
}

function versusRows(v) {
  const rows = VERSUS.filter(([, key]) => v[key]).map(([name, key, format]) => [name, key, v[key], format]);
  for (const [group, x] of Object.entries(v.memory_bytes || {})) rows.push([`memory: ${group}`, `memory_bytes.${group}`, x, gib]);
  return rows;
}

function explainCSV() {
  const e = record && record.explain;
  if (!e || !e.versus_best) return [["term", "this_s", "best_s", "difference_s"]];
  return [["term", "this_s", "best_s", "difference_s"],
    ...Object.entries(e.versus_best.time_by_part_s).map(([k, t]) => [k, t.this, t.best, t.difference])];
}

function showExplain(error) {
  const e = record && record.explain;
  const box = $("#explain-result");
  $("#explain-status").textContent = error || "";
  $("#explain-status").className = error ? "error" : "";
  box.hidden = !e;
  if (!e) return;
  const v = $("#explain-verdict");
  v.replaceChildren(verdict(e));
  v.dataset.status = e.status;
  if (e.rank != null) v.dataset.rank = String(e.rank);
  else delete v.dataset.rank;
  if (e.shown) {
    const go = document.createElement("button");
    go.type = "button";
    go.className = "small";
    go.textContent = `Pick option #${e.rank}`;
    go.addEventListener("click", () => pick(e.rank - 1));
    v.append(" ", go);
  }
  $("#explain-layout").textContent = `${e.gpus} x ${e.gpu}` + (e.offer ? ` on ${e.offer.provider} ${e.offer.instance}` : "") +
    ": " + layoutWords(e.layout);
  const vb = e.versus_best;
  $("#explain-compare").hidden = !vb;
  if (!vb) return;
  $("#explain-table tbody").replaceChildren(...versusRows(vb).map(([name, key, t, format]) => {
    const tr = document.createElement("tr");
    tr.dataset.key = key;
    const th = shown("th", null, name);
    th.scope = "row";
    // an MFU difference is in percentage points, not a percentage of either MFU
    const diff = shown("td", t.difference, signed(key === "mfu" ? percentPoints : format, t.difference));
    if (key in LOWER_IS_BETTER && t.difference !== 0) {
      diff.className = (LOWER_IS_BETTER[key] ? t.difference > 0 : t.difference < 0) ? "worse" : "better";
    }
    tr.append(th, shown("td", t.this, format(t.this)), shown("td", t.best, format(t.best)), diff);
    return tr;
  }));
  const parts = vb.time_by_part_s;
  const terms = Object.keys(parts);
  $("#explain-chart").replaceChildren(bars({
    categories: terms.map((k) => k.replace(/_/g, " ")),
    series: [
      { name: "your layout", values: Object.fromEntries(terms.map((k) => [k.replace(/_/g, " "), parts[k].this])) },
      { name: "option #1", values: Object.fromEntries(terms.map((k) => [k.replace(/_/g, " "), parts[k].best])) },
    ],
    format: termTime,
    aria: "time to train by step-time term, your layout against option #1",
  }));
}

async function plan(push) {
  const params = formQuery(form, FIELDS);
  if (!params.get("model") || !params.get("tokens")) return;
  const explain = explainForm.elements.explain.value.trim();
  const keep = push ? null : urlParam("pick");
  const launcher = push ? null : urlParam("launcher");
  const address = new URLSearchParams(params);
  if (keep) address.set("pick", keep);
  if (launcher) address.set("launcher", launcher);
  if (explain) address.set("explain", explain);
  if (push) history.pushState(null, "", "?" + address);
  status("searching GPUs, counts, layouts and offers...");
  form.setAttribute("aria-busy", "true");
  try {
    const mine = ++searches;
    let body, explainError = null;
    try {
      body = await getJSON("/api/plan/train?" + params + (explain ? "&" + new URLSearchParams({ explain }) : ""));
    } catch (e) {
      if (!explain) throw e;
      body = await getJSON("/api/plan/train?" + params); // the layout was the trouble: the plan without it
      explainError = e.message;
    }
    if (mine !== searches) return;
    record = body;
    query = params;
    $("#searched").textContent = `${number(record.searched)} candidates searched, ${number(record.evaluated)} ` +
      `evaluated, ${number(record.feasible)} feasible, ${number(record.pareto_size)} on the Pareto front. Pruned: ` +
      prunedText(record.pruned) + ".";
    if (!record.options.length) {
      hideResult("No option meets these constraints. " + $("#searched").textContent);
      return;
    }
    $("#result").hidden = false;
    optionsTable();
    downloads($("#chart-downloads"), "gpuplan-plan-train", csvRows, () => record, () => $("#chart svg"));
    downloads($("#explain-downloads"), "gpuplan-plan-train-explain", explainCSV, () => record.explain,
      () => $("#explain-chart svg"));
    status("");
    showExplain(explainError);
    pick(Math.min(Number(keep) || 0, record.options.length - 1));
  } catch (e) {
    hideResult(e.message);
  } finally {
    form.removeAttribute("aria-busy");
  }
}

// The layout of an option in explain= words (the keys of its layout, as the CLI's --explain takes them).
function explainText(o) {
  const L = o.layout;
  const parts = [`gpu=${o.gpu}`, `tp=${L.tp}`, `pp=${L.pp}`, `dp=${L.dp}`];
  if (L.cp > 1) parts.push(`cp=${L.cp}`);
  if (L.ep > 1) parts.push(`ep=${L.ep}`);
  if (L.etp != null && L.etp !== L.tp) parts.push(`etp=${L.etp}`);
  if (L.virtual_stages > 1) parts.push(`virtual_stages=${L.virtual_stages}`);
  parts.push(`micro_batch=${L.micro_batch}`, `recompute=${L.recompute}`, L.fsdp ? "fsdp=true" : `zero=${L.zero}`);
  if (L.offload && L.offload !== "none") parts.push(`offload=${L.offload}`);
  return parts.join(",");
}

function explainFromURL() {
  explainForm.elements.explain.value = urlParam("explain") || "";
}

async function start() {
  nav();
  formFromURL(form, FIELDS);
  explainFromURL();
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    plan(true);
  });
  explainForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = explainForm.elements.explain.value.trim();
    if (!text) return;
    const address = new URLSearchParams(location.search);
    address.set("explain", text);
    history.pushState(null, "", "?" + address);
    $("#explain-status").textContent = "asking the search about this layout...";
    $("#explain-status").className = "";
    plan(false);
  });
  $("#explain-picked").addEventListener("click", () => {
    if (record && record.options[picked]) explainForm.elements.explain.value = explainText(record.options[picked]);
    explainForm.elements.explain.focus();
  });
  $("#explain-clear").addEventListener("click", () => {
    explainForm.elements.explain.value = "";
    setURLParam("explain", null);
    if (record) {
      record.explain = null;
      showExplain(null);
      draw();
    }
  });
  window.addEventListener("popstate", () => {
    formFromURL(form, FIELDS);
    explainFromURL();
    plan(false);
  });
  copyButtons();
  await searchPickers(form);
  plan(false);
}

start();
