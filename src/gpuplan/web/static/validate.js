// gpuplan ui: the Validate page. /api/validate runs every bundled published figure through the API; the page
// draws predicted against published for one quantity (log axes, coloured by the chosen class) and lists the
// answer's own summary of that class (count, mean absolute error, median signed error).
"use strict";

import { scatter } from "./chart.js";
import {
  $, downloads, formFromURL, formQuery, getJSON, hideResult, nav, newestOnly, number, percent, showResult, shown, sig,
  status,
} from "./common.js";

const API_FIELDS = ["category"];
const FIELDS = ["category", "quantity", "by"];
const form = $("#validate-form");
let record = null;
let loadedFor = null;
const request = newestOnly();

function rows() {
  const q = form.elements.quantity.value;
  return record.rows.filter((r) => r.quantity === q && r.published > 0 && r.predicted > 0);
}

function quantities() {
  const counts = new Map();
  for (const r of record.rows) counts.set(r.quantity, (counts.get(r.quantity) || 0) + 1);
  const select = form.elements.quantity;
  const keep = new URLSearchParams(location.search).get("quantity") || select.value;
  const sorted = [...counts].sort((a, b) => b[1] - a[1]);
  select.replaceChildren(...sorted.map(([q, n]) => new Option(`${q} (${n})`, q)));
  if (counts.has(keep)) select.value = keep;
}

function draw() {
  const by = form.elements.by.value;
  const shownRows = rows();
  if (!shownRows.length) {
    hideResult("No scored value of that quantity.");
    return;
  }
  showResult();
  const unit = shownRows[0].unit;
  const fmt = (x) => (unit === "bytes" ? sig(x / 2 ** 30, 3) + " GiB" : sig(x, 3));
  const groups = [...new Set(shownRows.map((r) => String(r[by])))].sort();
  $("#chart").replaceChildren(scatter({
    points: shownRows.map((r, i) => ({
      x: r.published, y: r.predicted, group: String(r[by]), id: String(i), strong: r.measured,
      label: `${r.record}: published ${fmt(r.published)}, predicted ${fmt(r.predicted)} (${r.error >= 0 ? "+" : ""}${percent(r.error)}), ${r.source}`,
    })),
    groups, xLabel: `published (${unit})`, yLabel: `predicted (${unit})`, xLog: true, yLog: true, xFormat: fmt, yFormat: fmt,
    diagonal: true, aria: `predicted against published ${shownRows[0].quantity} for ${shownRows.length} values`,
  }));
  const category = shownRows[0].category;
  const summary = (record.summary[category] || {})[by] || {};
  $("#headline").textContent = `${shownRows.length} published values of ${shownRows[0].quantity} (${category}); filled ` +
    "points are measured runs.";
  $("#summary-note").textContent = `(gpuplan validate's summary of every ${category} value by ${by.replace("_", " ")})`;
  $("#summary tbody").replaceChildren(...Object.entries(summary).map(([name, s]) => {
    const tr = document.createElement("tr");
    const th = shown("th", null, name);
    th.scope = "row";
    tr.append(th, shown("td", s.count, number(s.count)), shown("td", s.mae, percent(s.mae)),
      shown("td", s.median_signed_error, percent(s.median_signed_error)));
    return tr;
  }));
  $("#definition").textContent = record.error_definition;
}

async function load(push) {
  const params = formQuery(form, API_FIELDS);
  if (push) history.pushState(null, "", "?" + formQuery(form, FIELDS));
  const key = params.toString();
  if (record && loadedFor === key) {
    draw();
    return;
  }
  status("running every published figure through the API... (a few seconds)");
  await request(async (current) => {
    const body = await getJSON("/api/validate?" + params);
    if (!current()) return;
    record = body;
    loadedFor = key;
    quantities();
    history.replaceState(null, "", "?" + formQuery(form, FIELDS));
    draw();
  });
}

function start() {
  nav();
  formFromURL(form, FIELDS);
  downloads($("#chart-downloads"), "gpuplan-validate-values",
    () => [["record", "quantity", "unit", "published", "predicted", "error", "class", "source", "measured"],
      ...rows().map((r) => [r.record, r.quantity, r.unit, r.published, r.predicted, r.error, r[form.elements.by.value], r.source, r.measured])],
    () => rows(), () => $("#chart svg"));
  downloads($("#table-downloads"), "gpuplan-validate-summary",
    () => {
      const category = rows()[0].category, by = form.elements.by.value;
      return [["category", "class_by", "class", "count", "mae", "median_signed_error"],
        ...Object.entries(record.summary[category][by]).map(([n, s]) => [category, by, n, s.count, s.mae, s.median_signed_error])];
    },
    () => record.summary);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    load(true);
  });
  form.addEventListener("change", () => {
    history.replaceState(null, "", "?" + formQuery(form, FIELDS));
    load(false);
  });
  window.addEventListener("popstate", () => {
    formFromURL(form, FIELDS);
    load(false);
  });
  load(false);
}

start();
