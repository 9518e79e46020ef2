// gpuplan ui: the Rent vs buy page. /api/tco with the form's values gives owning against every rental offer;
// the charts are more /api/tco answers: the same inputs at utilizations from 5 % to 100 % (where owning and the
// compared rental cross: the answer's break-even utilization, marked) and at periods up to the one asked
// (cost over time). Every number drawn is a value of an answer; the page computes none.
"use strict";

import { lines } from "./chart.js";
import {
  $, debounce, downloads, formFromURL, formQuery, getJSON, gpuOptions, hideResult, linkOutputs, nav, newestOnly,
  percent, setURLParam, showResult, shown, sig, status, urlParam, usd, usdShort,
} from "./common.js";

const FIELDS = ["gpu", "gpus", "utilization", "years", "life_years", "purchase_usd_per_gpu", "server_usd_per_gpu", "pue",
  "usd_per_kwh", "hosting_usd_per_kw_month", "staff_usd_per_gpu_year", "cost_of_capital"];
const UTILIZATIONS = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1];
const form = $("#tco-form");
let record = null;
let byUtil = [];
let byTime = [];
const request = newestOnly();

function rental() {
  const id = $("#rental").value;
  return record.rentals.find((r) => r.offer === id) || record.rentals[0];
}

function rentOf(answer, offer) {
  const r = answer.rentals.find((x) => x.offer === offer);
  return r ? r.rent_usd : null;
}

function draw() {
  const r = rental();
  const u = record.inputs.utilization;
  $("#card-rent").replaceChildren(shown("span", r.rent_usd, usd(r.rent_usd), "big"),
    shown("small", r.usd_per_gpu_hour, `${r.provider} ${r.instance}, ${r.pricing}, $${sig(r.usd_per_gpu_hour, 3)}/GPU-hour`));
  const be = r.break_even_utilization;
  $("#card-break").replaceChildren(shown("span", be, be == null ? "none" : percent(be), "big"),
    shown("small", r.owning_saves_usd, (r.owning_saves_usd >= 0 ? "owning saves " : "renting saves ") +
      usd(Math.abs(r.owning_saves_usd)) + " at " + percent(u)));
  $("#headline").textContent = r.owning_saves_usd >= 0
    ? `At ${percent(u)} utilization, owning ${record.gpus} x ${record.gpu.id} costs less than renting from ${r.provider}.`
    : `At ${percent(u)} utilization, renting ${record.gpus} x ${record.gpu.id} from ${r.provider} costs less than owning.`;
  const marks = [{ x: u, label: "you: " + percent(u), row: 1 }];
  if (be != null && be <= 1) marks.push({ x: be, label: "crossover " + percent(be), strong: true });
  $("#chart-util").replaceChildren(lines({
    series: [
      { name: "owning", points: byUtil.map((a) => [a.inputs.utilization, a.owned.total_usd]) },
      { name: "renting: " + r.offer, points: byUtil.map((a) => [a.inputs.utilization, rentOf(a, r.offer)]).filter((p) => p[1] != null) },
    ],
    xLabel: "utilization (share of hours doing paid work)", yLabel: `cost over ${sig(record.period_years, 3)} years (USD)`,
    xFormat: percent, yFormat: usdShort, marks,
    aria: `owning and renting cost by utilization; they cross at ${be == null ? "no utilization" : percent(be)}`,
  }));
  $("#chart-time").replaceChildren(lines({
    series: [
      { name: "owning", points: byTime.map((a) => [a.period_years, a.owned.total_usd]) },
      { name: "renting: " + r.offer, points: byTime.map((a) => [a.period_years, rentOf(a, r.offer)]).filter((p) => p[1] != null) },
    ],
    xLabel: "years", yLabel: "cost so far (USD)", xFormat: (y) => sig(y, 2), yFormat: usdShort,
    aria: "owning and renting cost over time", height: 300,
  }));
}

function table() {
  $("#rentals tbody").replaceChildren(...record.rentals.map((r) => {
    const tr = document.createElement("tr");
    tr.append(shown("td", null, `${r.provider} ${r.instance}`), shown("td", null, r.pricing),
      shown("td", r.usd_per_gpu_hour, "$" + sig(r.usd_per_gpu_hour, 3)), shown("td", r.rent_usd, usd(r.rent_usd)),
      shown("td", r.owning_saves_usd, usd(r.owning_saves_usd)),
      shown("td", r.break_even_utilization, r.break_even_utilization == null ? "none" : percent(r.break_even_utilization)));
    return tr;
  }));
}

async function compare(push) {
  const params = formQuery(form, FIELDS);
  if (!params.get("gpu")) return;
  const address = new URLSearchParams(params);
  if (urlParam("rental")) address.set("rental", urlParam("rental"));
  if (push === true) history.pushState(null, "", "?" + address);
  else if (push === "replace") history.replaceState(null, "", "?" + address);
  status("comparing...");
  await request(async (current) => {
    const main = await getJSON("/api/tco?" + params);
    const at = (key, value) => {
      const p = new URLSearchParams(params);
      p.set(key, String(value));
      return getJSON("/api/tco?" + p);
    };
    const period = main.period_years;
    const years = [1, 2, 3, 4, 5, 6, 7, 8].map((k) => Number((period * k / 8).toPrecision(6)));
    const [u, t] = await Promise.all([Promise.all(UTILIZATIONS.map((x) => at("utilization", x))),
      Promise.all(years.map((y) => at("years", y)))]);
    if (!current()) return;
    record = main;
    byUtil = u;
    byTime = t;
    if (!record.rentals.length) {
      hideResult(`No rental offer of ${record.gpu.id} in the catalog to compare with.`);
      return;
    }
    const select = $("#rental");
    const keep = urlParam("rental") || select.value;
    select.replaceChildren(...record.rentals.map((r) => new Option(`${r.provider} ${r.instance} (${r.pricing}, $${sig(r.usd_per_gpu_hour, 3)}/GPU-h)`, r.offer)));
    if (record.rentals.some((r) => r.offer === keep)) select.value = keep;
    const o = record.owned;
    $("#card-owned").replaceChildren(shown("span", o.total_usd, usd(o.total_usd), "big"),
      shown("small", record.period_years, `${sig(record.period_years, 3)} years, ${sig(o.used_gpu_hours, 4)} used GPU-hours`));
    $("#card-hour").replaceChildren(shown("span", o.usd_per_used_gpu_hour, "$" + sig(o.usd_per_used_gpu_hour, 3), "big"),
      shown("small", o.usd_per_gpu_year, usd(o.usd_per_gpu_year) + " per GPU-year"));
    $("#method").textContent = "Method: " + record.method;
    table();
    draw();
    showResult();
  });
}

async function start() {
  nav();
  linkOutputs(form);
  try {
    await gpuOptions(form.elements.gpu, "h100-sxm-80gb");
  } catch (e) {
    status(e.message, true);
  }
  formFromURL(form, FIELDS);
  $("#rental").addEventListener("change", () => {
    setURLParam("rental", $("#rental").selectedIndex === 0 ? null : $("#rental").value);
    draw();
  });
  downloads($("#util-downloads"), "gpuplan-tco-by-utilization",
    () => [["utilization", "owned_total_usd", "rent_usd"], ...byUtil.map((a) => [a.inputs.utilization, a.owned.total_usd, rentOf(a, rental().offer)])],
    () => byUtil, () => $("#chart-util svg"));
  downloads($("#time-downloads"), "gpuplan-tco-over-time",
    () => [["period_years", "owned_total_usd", "rent_usd"], ...byTime.map((a) => [a.period_years, a.owned.total_usd, rentOf(a, rental().offer)])],
    () => byTime, () => $("#chart-time svg"));
  downloads($("#table-downloads"), "gpuplan-tco",
    () => [["offer", "provider", "instance", "pricing", "usd_per_gpu_hour", "rent_usd", "owning_saves_usd", "break_even_utilization"],
      ...record.rentals.map((r) => [r.offer, r.provider, r.instance, r.pricing, r.usd_per_gpu_hour, r.rent_usd, r.owning_saves_usd, r.break_even_utilization])],
    () => record);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    compare(true);
  });
  const live = debounce(() => compare("replace"), 120);
  form.addEventListener("input", (event) => { if (event.target.type === "range") live(); });
  form.addEventListener("change", (event) => { if (event.target.tagName === "SELECT") live(); });
  window.addEventListener("popstate", () => {
    formFromURL(form, FIELDS);
    compare(false);
  });
  compare(false);
}

start();
