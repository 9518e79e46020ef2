// gpuplan ui: the Local page. /api/local/detect (the `gpuplan local detect --json` record) of the machine that runs
// the server: its GPUs, or a plain "no GPU detected" with the reason, and the host.
"use strict";

import { $, downloads, gb, getJSON, nav, number, shown, status, tableRows } from "./common.js";

let record = null;

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
  status("looking at this machine...");
  try {
    record = await getJSON("/api/local/detect");
    show();
    status("");
  } catch (e) {
    status(e.message, true);
  }
}

start();
