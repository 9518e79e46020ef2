// gpuplan ui: the Local page. /api/local/detect (the `gpuplan local detect --json` record) of the machine that runs
// the server: its GPUs, or a plain "no GPU detected" with the reason, and the host. Then what is saved in the
// user's gpuplan folder: /api/local/profiles (bench profiles) and /api/local/runs (watch traces, each with the
// `gpuplan local diagnose --json` record). Those calls take no parameter: the page cannot name a file.
"use strict";

import { $, downloads, duration, gb, getJSON, nav, number, percent, shown, status, tableRows } from "./common.js";

let record = null;
let profiles = null;
let runs = null;

function code(text) {
  const c = document.createElement("code");
  c.textContent = text;
  return c;
}

function folderNote(node, folder) {
  node.replaceChildren(...(folder ? ["in ", code(folder)] : []));
}

function td(text, value, cls) {
  return shown("td", value, text == null ? "" : String(text), cls);
}

function profileRows() {
  return profiles.profiles.flatMap((p) => (p.error ? [[p.file, null, p.created, null, null, null, null, p.error]]
    : p.results.map((r) => [p.file, p.gpu_catalog_id || p.gpu_name, p.created, r.name, r.value, r.unit,
      r.fraction_of_datasheet, null])));
}

function showProfiles() {
  const list = profiles.profiles;
  folderNote($("#profiles-folder"), profiles.folder);
  const notice = $("#profiles-notice");
  notice.hidden = list.length > 0;
  if (!list.length) {
    notice.className = "notice";
    notice.replaceChildren(shown("strong", 0, "No bench profile saved here yet."), " Measure this machine with ",
      code(profiles.save_with || "gpuplan local bench --save profile.json"),
      " and it is listed here; pass the file to train and serve with ", code("--calibration"), ".");
  }
  $("#profiles").hidden = !list.length;
  $("#profiles-downloads").hidden = !list.length;
  $("#profiles tbody").replaceChildren(...list.flatMap((p) => {
    const head = (span) => {
      const th = shown("th", null, p.file);
      th.scope = "row";
      th.rowSpan = span;
      return th;
    };
    if (p.error) {
      const tr = document.createElement("tr");
      tr.className = "bad";
      const why = td(p.error, null, "left");
      why.colSpan = 5;
      tr.append(head(1), why);
      return [tr];
    }
    const results = p.results.length ? p.results : [{}];
    return results.map((r, i) => {
      const tr = document.createElement("tr");
      if (i === 0) {
        const gpu = td(p.gpu_name || p.gpu_catalog_id || "no GPU", null, "left");
        const when = td((p.created || p.modified_utc || "").replace("T", " "), null, "left");
        gpu.rowSpan = when.rowSpan = results.length;
        tr.append(head(results.length), gpu, when);
      }
      tr.append(td(r.name, null, "left"),
        td(r.value == null ? "" : `${number(r.value, 1)} ${r.unit || ""}`, r.value),
        td(percent(r.fraction_of_datasheet), r.fraction_of_datasheet));
      return tr;
    });
  }));
}

function runRows() {
  return runs.runs.map((r) => {
    if (r.error) return [r.file, null, null, null, null, null, null, r.error];
    const d = r.diagnosis, t = d.trace;
    return [r.file, t.samples, t.duration_s, t.gpus, t.exit_code,
      d.verdicts.map((v) => `${v.id} (${v.confidence})`).join("; "), d.verdicts.length ? d.verdicts[0].advice : null, null];
  });
}

function showRuns() {
  const list = runs.runs;
  folderNote($("#runs-folder"), runs.folder);
  const notice = $("#runs-notice");
  notice.className = "notice";
  notice.replaceChildren(...(list.length ? [] : [shown("strong", 0, "No watch trace saved here yet."), " "]),
    "Record a job with ", code(runs.watch_with || "gpuplan local watch --out run.jsonl -- CMD"),
    list.length ? " to add one. " : " and it is listed here with its diagnosis. ",
    "A trace saved anywhere else is diagnosed with ", code("gpuplan local diagnose FILE"), ".");
  $("#runs").hidden = !list.length;
  $("#runs-downloads").hidden = !list.length;
  $("#runs tbody").replaceChildren(...list.map((r) => {
    const tr = document.createElement("tr");
    const th = shown("th", null, r.file);
    th.scope = "row";
    tr.append(th);
    if (r.error) {
      tr.className = "bad";
      const why = td(r.error, null, "left");
      why.colSpan = 6;
      tr.append(why);
      return tr;
    }
    const d = r.diagnosis, t = d.trace;
    const verdicts = document.createElement("td");
    verdicts.className = "left";
    if (!d.verdicts.length) verdicts.append(shown("span", 0, "none: every check held or had no data"));
    d.verdicts.forEach((v, i) => {
      verdicts.append(...(i ? ["; "] : []), shown("strong", v.confidence, v.id), ` ${number(v.confidence, 2)}`);
    });
    tr.append(td(number(t.samples), t.samples), td(duration(t.duration_s), t.duration_s), td(number(t.gpus), t.gpus),
      td(t.exit_code, t.exit_code), verdicts, td(d.verdicts.length ? d.verdicts[0].advice : "", null, "left advice"));
    return tr;
  }));
}

function gpuRows() {
  return record.gpus.map((g) => [g.index, g.name, g.catalog_id, g.memory_total_bytes, g.memory_free_bytes,
    g.compute_capability ? g.compute_capability.join(".") : null, g.power_limit_w,
    g.pcie_gen == null ? null : `gen ${g.pcie_gen} x${g.pcie_width}`, g.nvlink_active_links, g.supports_bf16, g.supports_fp8]);
}

function show() {
  const notice = $("#gpu-notice");
  const n = record.gpus.length;
  if (n === 0) {
    notice.className = "notice none";
    notice.replaceChildren(shown("strong", 0, "No GPU detected."), " ",
      shown("span", null, record.gpu_status || "no GPU found"),
      ". Plans still work: pick the GPU on the other pages.");
  } else {
    notice.className = "notice ok";
    const names = [...new Set(record.gpus.map((g) => g.name))].join(", ");
    notice.replaceChildren(shown("strong", n, `${n} GPU${n > 1 ? "s" : ""} detected: ${names}.`), " ",
      `Driver ${record.driver_version || "unknown"}, CUDA ${record.cuda_version || "unknown"}.`);
  }
  $("#gpus-box").hidden = n === 0;
  $("#gpus tbody").replaceChildren(...gpuRows().map((row) => {
    const tr = document.createElement("tr");
    const fmt = [String, String, (x) => x || "not in catalog", gb, gb, String, (w) => number(w, 0) + " W", String, String,
      (b) => (b ? "yes" : "no"), (b) => (b ? "yes" : "no")];
    row.forEach((v, i) => tr.append(shown("td", typeof v === "number" ? v : null, v == null ? "" : fmt[i](v))));
    return tr;
  }));
  const h = record.host;
  tableRows($("#host tbody"), [
    ["host name", h.hostname], ["system", h.os], ["CPU", h.cpu_model],
    ["cores", [`${h.cores_physical} physical, ${h.cores_logical} logical`, h.cores_logical]],
    ["memory", [gb(h.memory_bytes), h.memory_bytes]], ["NUMA nodes", [String(h.numa_nodes), h.numa_nodes]],
    ...h.disks.map((d) => [`disk ${d.mount}`, [`${gb(d.free_bytes)} free of ${gb(d.total_bytes)} (${d.fstype})`, d.free_bytes]]),
    ["Python", h.python],
  ]);
  $("#notes").replaceChildren(...record.notes.map((t) => shown("li", null, t)));
  $("#result").hidden = false;
}

async function start() {
  nav();
  downloads($("#gpus-downloads"), "gpuplan-local-gpus",
    () => [["index", "name", "catalog_id", "memory_total_bytes", "memory_free_bytes", "compute_capability", "power_limit_w",
      "pcie", "nvlink_active_links", "supports_bf16", "supports_fp8"], ...gpuRows()],
    () => record.gpus);
  downloads($("#host-downloads"), "gpuplan-local-detect",
    () => [["field", "value"], ...Object.entries(record.host).filter(([, v]) => typeof v !== "object").map(([k, v]) => [k, v])],
    () => record);
  downloads($("#profiles-downloads"), "gpuplan-local-profiles",
    () => [["file", "gpu", "created", "benchmark", "value", "unit", "fraction_of_datasheet", "error"], ...profileRows()],
    () => profiles);
  downloads($("#runs-downloads"), "gpuplan-local-runs",
    () => [["file", "samples", "duration_s", "gpus", "exit_code", "verdicts", "first_advice", "error"], ...runRows()],
    () => runs);
  status("looking at this machine...");
  try {
    [record, profiles, runs] = await Promise.all([
      getJSON("/api/local/detect"), getJSON("/api/local/profiles"), getJSON("/api/local/runs")]);
    show();
    showProfiles();
    showRuns();
    $("#profiles-box").hidden = $("#runs-box").hidden = false;
    status("");
  } catch (e) {
    status(e.message, true);
  }
}

start();
