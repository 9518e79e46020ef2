// gpuplan ui: what every page shares. The navigation, calls to the JSON API (GET /api/<command>, bodies equal to
// the CLI's --json), the form <-> query string state (a page's state is its address, so it is a link), number
// formats, CSV/JSON/PNG downloads and the model picker with its config.json upload. Pages show values of the API's
// answers only: nothing here computes an estimate. No inline script, no eval, no external request (CSP).
"use strict";

export const PAGES = [
  ["/", "Plan"],
  ["/train", "Train"],
  ["/serve", "Serve"],
  ["/gpus", "GPUs"],
  ["/tco", "Rent vs buy"],
  ["/validate", "Validate"],
  ["/local", "Local"],
];

// Okabe-Ito: told apart with the common colour-vision deficiencies; markers differ in shape too
export const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"];

export const $ = (sel, root = document) => root.querySelector(sel);
export const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];

export function nav() {
  const here = location.pathname;
  const links = PAGES.map(([href, label]) => {
    const a = document.createElement("a");
    a.href = href;
    a.textContent = label;
    if (href === here) a.setAttribute("aria-current", "page");
    return a;
  });
  const api = document.createElement("a");
  api.href = "/openapi.json";
  api.textContent = "API schema";
  api.className = "aside";
  $("#nav").replaceChildren(...links, api);
}

export function status(text, isError) {
  const el = $("#status");
  el.textContent = text;
  el.className = isError ? "error" : "";
}

// An answer is on the page: the result section shown, the status line cleared.
export function showResult() {
  $("#result").hidden = false;
  status("");
}

// No answer to show: the result section hidden and `message` in the status line as an error.
export function hideResult(message) {
  $("#result").hidden = true;
  status(message, true);
}

// A page's requests, newest first: each call of the returned function makes the calls before it stale, so a slow
// answer never overwrites a newer one. `run(work)` awaits `work(current)`, where `current()` says whether this call
// is still the newest; an error thrown while it is hides the result and shows the message (a stale one is dropped).
export function newestOnly() {
  let newest = 0;
  return async (work) => {
    const mine = ++newest;
    const current = () => mine === newest;
    try {
      await work(current);
    } catch (e) {
      if (current()) hideResult(e.message);
    }
  };
}

// The search's pruned candidates by reason, as "reason n, reason n" (the reasons with none left out).
export function prunedText(pruned) {
  return Object.entries(pruned).filter(([, n]) => n).map(([k, n]) => `${k.replace(/_/g, " ")} ${number(n)}`).join(", ");
}

// The launch box's two copy buttons: the shown launch line, and the page's address (a link to what is shown).
export function copyButtons() {
  $("#copy-launch").addEventListener("click", () => copyText($("#launch-text").textContent, $("#copied")));
  $("#copy-link").addEventListener("click", () => copyText(location.href, $("#copied")));
}

export async function getJSON(url, init) {
  const response = await fetch(url, { headers: { Accept: "application/json" }, ...init });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

// ------------------------------------------------------------------------------------------- formats

export function number(x, digits = 0) {
  return x == null ? "" : Number(x).toLocaleString("en-US", { maximumFractionDigits: digits });
}

export function sig(x, digits = 3) {
  if (x == null) return "";
  const a = Math.abs(x);
  if (a !== 0 && (a >= 1e6 || a < 1e-3)) return Number(x).toPrecision(digits);
  return Number(Number(x).toPrecision(digits)).toLocaleString("en-US", { maximumFractionDigits: 6 });
}

export function usd(x) {
  if (x == null) return "";
  const a = Math.abs(x);
  if (a >= 1e6) return "$" + sig(x / 1e6, 3) + "M";
  if (a >= 1e4) return "$" + number(x, 0);
  if (a >= 10) return "$" + number(x, 0);
  return "$" + sig(x, 3);
}

// Axis ticks: $800k, $1.2M
export function usdShort(x) {
  if (x == null) return "";
  const a = Math.abs(x);
  if (a >= 1e6) return "$" + sig(x / 1e6, 3) + "M";
  if (a >= 1e3) return "$" + sig(x / 1e3, 3) + "k";
  return "$" + sig(x, 3);
}

export function duration(seconds) {
  if (seconds == null) return "";
  const days = seconds / 86400;
  if (days >= 1) return sig(days, 3) + " days";
  if (seconds >= 3600) return sig(seconds / 3600, 3) + " h";
  if (seconds >= 1) return sig(seconds, 3) + " s";
  return sig(seconds * 1000, 3) + " ms";
}

export function gib(bytes) {
  return bytes == null ? "" : (bytes / 2 ** 30).toFixed(1) + " GiB";
}

export function gb(bytes) {
  return bytes == null ? "" : sig(bytes / 1e9, 3) + " GB";
}

export function percent(x) {
  return x == null ? "" : sig(100 * x, 3) + " %";
}

export function perSecond(x) {
  if (x == null) return "";
  if (x >= 1e12) return sig(x / 1e12, 3) + " T";
  if (x >= 1e9) return sig(x / 1e9, 3) + " G";
  if (x >= 1e6) return sig(x / 1e6, 3) + " M";
  if (x >= 1e4) return sig(x / 1e3, 3) + " k";
  return sig(x, 3);
}

// An element showing one value of an answer: its text, and the exact value in data-value (what the tests read).
export function shown(tag, value, text, cls) {
  const node = document.createElement(tag);
  node.textContent = text;
  if (value != null) node.dataset.value = String(value);
  if (cls) node.className = cls;
  return node;
}

export function cell(tr, text, value, tag = "td") {
  const node = shown(tag, value, text == null ? "" : String(text));
  tr.append(node);
  return node;
}

// A table body from rows of [text, value] pairs (or plain text); a row's first cell is its header.
export function tableRows(tbody, rows) {
  tbody.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    cells.forEach((c, i) => {
      const [text, value] = Array.isArray(c) ? c : [c, undefined];
      const node = cell(tr, text, value, i === 0 ? "th" : "td");
      if (i === 0) node.scope = "row";
    });
    return tr;
  }));
}

// A value with its P10-P90 band: "5.55 days (4.48-7.01)"
export function banded(node, value, p10, p90, format) {
  node.replaceChildren(shown("span", value, format(value), "big"));
  if (p10 != null && p90 != null) {
    const band = document.createElement("small");
    band.append(" P10 ", shown("span", p10, format(p10)), " to P90 ", shown("span", p90, format(p90)));
    node.append(band);
  }
}

// ----------------------------------------------------------------------------------------- state

// The form's fields named in `fields` as a query string (empty ones left out).
export function formQuery(form, fields) {
  const params = new URLSearchParams();
  for (const name of fields) {
    const field = form.elements[name];
    if (!field) continue;
    const value = field.type === "checkbox" ? (field.checked ? "true" : "") : String(field.value).trim();
    if (value !== "") params.set(name, value);
  }
  return params;
}

export function formFromURL(form, fields, params = new URLSearchParams(location.search)) {
  for (const name of fields) {
    const field = form.elements[name];
    if (!field || !params.has(name)) continue;
    if (field.type === "checkbox") field.checked = params.get(name) === "true";
    else {
      if (field.tagName === "SELECT" && ![...field.options].some((o) => o.value === params.get(name))) {
        field.append(new Option(params.get(name), params.get(name)));
      }
      if (field.type === "range" && Number(params.get(name)) > Number(field.max)) field.max = params.get(name);
      field.value = params.get(name);
    }
    field.dispatchEvent(new Event("sync"));
  }
}

// Page-level state beside the form's (the picked option, a chart's axis): read and written in the address.
export function urlParam(name) {
  return new URLSearchParams(location.search).get(name);
}

export function setURLParam(name, value) {
  const params = new URLSearchParams(location.search);
  if (value == null || value === "") params.delete(name);
  else params.set(name, value);
  history.replaceState(null, "", "?" + params);
}

export function fill(list, values) {
  list.replaceChildren(...values.map(([value, label]) => {
    const option = document.createElement("option");
    option.value = value;
    if (label) option.textContent = label;
    return option;
  }));
}

export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

// Range inputs show their value in the <output> beside them.
export function linkOutputs(root = document) {
  for (const range of $$("input[type=range]", root)) {
    const out = $(`output[for="${range.id}"]`, root);
    if (!out) continue;
    const show = () => { out.textContent = range.value; };
    range.addEventListener("input", show);
    range.addEventListener("sync", show);
    show();
  }
}

// ------------------------------------------------------------------------------------- downloads

function csvField(v) {
  if (v == null) return "";
  const s = typeof v === "object" ? JSON.stringify(v) : String(v);
  return /[",\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}

export function toCSV(rows) {
  return rows.map((r) => r.map(csvField).join(",")).join("\n") + "\n";
}

export function save(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// What a chart's look is made of: read from the page's style sheet (app.css) for each drawn element and written
// on a copy as SVG presentation attributes, because an SVG drawn as an image sees no style sheet of the page.
// Attributes, not a style attribute: the CSP refuses inline styles, and it has no say over presentation attributes.
const PAINT = ["fill", "fill-opacity", "stroke", "stroke-width", "stroke-dasharray", "stroke-opacity", "opacity",
  "font-family", "font-size", "font-weight", "text-anchor", "visibility", "paint-order", "stroke-linejoin"];
const SVG_NS = "http://www.w3.org/2000/svg";

// A drawn chart as standalone SVG text (its look inlined), with its size in CSS pixels (the viewBox's).
export function standaloneSVG(svg) {
  const copy = svg.cloneNode(true);
  const from = [svg, ...svg.querySelectorAll("*")];
  const to = [copy, ...copy.querySelectorAll("*")];
  from.forEach((node, i) => {
    const style = getComputedStyle(node);
    for (const name of PAINT) {
      const value = style.getPropertyValue(name);
      if (value) to[i].setAttribute(name, value);
    }
  });
  const box = (svg.getAttribute("viewBox") || "").split(/[\s,]+/).map(Number);
  const rect = svg.getBoundingClientRect();
  const width = box.length === 4 && box[2] > 0 ? box[2] : Math.round(rect.width);
  const height = box.length === 4 && box[3] > 0 ? box[3] : Math.round(rect.height);
  copy.setAttribute("xmlns", SVG_NS);
  copy.setAttribute("width", String(width));
  copy.setAttribute("height", String(height));
  return { text: new XMLSerializer().serializeToString(copy), width, height };
}

// A drawn chart as a PNG (a Blob), `scale` device pixels per CSS pixel, on white. The SVG is loaded into an Image
// from a data: URL (the CSP's img-src already allows data:, and a data: image leaves the canvas readable), drawn
// on a canvas, and the canvas encoded.
export function chartPNG(svg, scale = 2) {
  const { text, width, height } = standaloneSVG(svg);
  return new Promise((resolve, reject) => {
    const image = new Image();
    image.onload = () => {
      const canvas = document.createElement("canvas");
      canvas.width = Math.round(width * scale);
      canvas.height = Math.round(height * scale);
      const ctx = canvas.getContext("2d");
      ctx.fillStyle = "#ffffff";
      ctx.fillRect(0, 0, canvas.width, canvas.height);
      ctx.drawImage(image, 0, 0, canvas.width, canvas.height);
      canvas.toBlob((blob) => (blob ? resolve(blob) : reject(new Error("the browser could not encode the PNG"))),
        "image/png");
    };
    image.onerror = () => reject(new Error("the browser could not draw the chart as an image"));
    image.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(text);
  });
}

// CSV and JSON buttons into `box`: csv() gives rows (the first the header, units in the names), json() the data;
// with chart() (the drawn <svg>, or null while there is none) a PNG button too.
export function downloads(box, name, csv, json, chart) {
  const make = (label, fn) => {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "small";
    b.textContent = label;
    b.dataset.download = name + "." + label.toLowerCase();
    b.addEventListener("click", fn);
    return b;
  };
  const buttons = [
    make("CSV", () => save(name + ".csv", toCSV(csv()), "text/csv")),
    make("JSON", () => save(name + ".json", JSON.stringify(json(), null, 2) + "\n", "application/json")),
  ];
  if (chart) {
    buttons.push(make("PNG", async () => {
      const svg = chart();
      if (!svg) return status("nothing drawn yet", true);
      try {
        save(name + ".png", await chartPNG(svg), "image/png");
      } catch (e) {
        status(e.message, true);
      }
    }));
  }
  box.replaceChildren(...buttons);
}

// --------------------------------------------------------------------------------------- copying

export async function copyText(text, feedback) {
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch {
    const area = document.createElement("textarea"); // older browsers, or a page without clipboard access
    area.value = text;
    area.className = "offscreen";
    document.body.append(area);
    area.select();
    try { ok = document.execCommand("copy"); } catch { ok = false; }
    area.remove();
  }
  if (feedback) {
    feedback.textContent = ok ? "Copied." : "Select the text and copy it (the browser refused).";
    setTimeout(() => { feedback.textContent = ""; }, 4000);
  }
  return ok;
}

// ---------------------------------------------------------------------------------- model picker

// Fills the model datalist from /api/models, and wires the "upload config.json" button: the file is sent to
// POST /api/config (kept in the server's memory) and the model field takes the id it answers.
export async function modelPicker(form, onUploaded) {
  const models = await getJSON("/api/models");
  fill($("#model-ids"), models.models.map((m) => [m.id, m.name]));
  const input = $("#config-file");
  if (!input) return;
  input.addEventListener("change", async () => {
    const file = input.files[0];
    if (!file) return;
    status("reading " + file.name + "...");
    try {
      const record = await getJSON("/api/config", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: file,
      });
      form.elements.model.value = record.model.id;
      status(`${file.name}: ${record.model.name}, ${number(record.model.params / 1e9, 2)}B parameters, as ${record.model.id}`);
      if (onUploaded) onUploaded();
    } catch (e) {
      status(e.message, true);
    }
    input.value = "";
  });
}

// The search pages' pickers: the model picker, and the "GPUs searched" datalist ("all", then every catalog id).
// A failed load is shown in the status line; the page still works with typed ids.
export async function searchPickers(form) {
  try {
    const [, gpus] = await Promise.all([modelPicker(form), getJSON("/api/gpus")]);
    $("#gpu-ids").replaceChildren(...["all", ...gpus.accelerators.map((g) => g.id)].map((id) => new Option(id, id)));
  } catch (e) {
    status(e.message, true);
  }
}

export async function gpuOptions(select, preferred) {
  const gpus = await getJSON("/api/gpus");
  fill(select, gpus.accelerators.map((g) => [g.id, g.name]));
  if (preferred && [...select.options].some((o) => o.value === preferred)) select.value = preferred;
  return gpus;
}

// Launch lines: a radio per tool (the address keeps a chosen one as launcher=), the chosen line shown in
// #launch-text, the share link kept in step. `preferred` (the engine an option was estimated for) is shown
// first when it has a line; else the first tool that has one.
export function launchBox(launch, tools, preferred) {
  const box = $("#launch");
  const pre = $("#launch-text");
  const first = preferred && tools.includes(preferred) && launch[preferred] != null
    ? preferred : tools.find((t) => launch[t] != null);
  const asked = urlParam("launcher");
  const chosen = tools.includes(asked) && launch[asked] != null ? asked : first;
  const show = (tool) => {
    const v = launch[tool];
    pre.textContent = v == null ? "" : typeof v === "string" ? v : JSON.stringify(v, null, 2);
    pre.dataset.tool = tool;
  };
  $(".tools", box).replaceChildren(...tools.map((tool) => {
    const lab = document.createElement("label");
    const radio = document.createElement("input");
    radio.type = "radio";
    radio.name = "launcher";
    radio.value = tool;
    radio.disabled = launch[tool] == null;
    radio.checked = tool === chosen;
    radio.addEventListener("change", () => {
      show(tool);
      setURLParam("launcher", tool === first ? null : tool);
      $("#share-link").value = location.href;
    });
    lab.append(radio, " " + tool + (launch[tool] == null ? " (cannot express this layout)" : ""));
    return lab;
  }));
  if (chosen) show(chosen);
  else pre.textContent = "";
}
