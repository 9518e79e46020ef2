"""local diagnose beyond the per-verdict positive/negative pairs of test_watch.py: the nuances of the GPM, link,
XID/ECC and checkpoint checks, observed vs predicted MFU, the nvidia-smi CSV import, and {host} in --out."""

from __future__ import annotations

import json
import socket

import pytest

import gpuplan
from gpuplan.local.diagnose import diagnose
from gpuplan.local.progress import MfuReference
from gpuplan.local.smi_import import SUGGESTED_QUERY, parse_nvidia_smi
from gpuplan.local.watch import expand_out
from test_watch import POSITIVE, checkpointing, gpu, trace, with_nvlink


def _check(records, cid, **kw):
    d = diagnose(records, **kw)
    return next(c for c in d.checks if c["id"] == cid), next((v for v in d.verdicts if v.id == cid), None)


# ------------------------------------------------------------------------------------------- GPM and links


def test_gpm_checks_say_no_data_without_gpm():
    busy_links = with_nvlink(trace(gpus=[gpu(0, nvlink_rx_bytes_per_s=400e9), gpu(1, nvlink_rx_bytes_per_s=400e9)]))
    check, v = _check(busy_links, "communication-bound")
    assert v is None and check["status"] == "no data" and "GPM" in check["reason"]  # can't tell waiting from overlap
    check, v = _check(trace(gpus=[gpu(0)]), "memory-bound")
    assert v is None and check["status"] == "no data" and "dram_active" in check["reason"]


def test_communication_bound_on_pcie_from_the_link_rate():
    """No NVLink: a Gen5 x16 link (63 GB/s per direction) moving 50 GB/s while the tensor cores idle."""
    t = trace(gpus=[gpu(0, tensor_active=0.03, sm_active=0.1, pcie_rx_bytes_per_s=50e9, pcie_tx_bytes_per_s=1e9)])
    _, v = _check(t, "communication-bound")
    assert v is not None and "PCIe" in v.evidence[0]["metric"] and v.counter_evidence
    slow = trace(gpus=[gpu(0, tensor_active=0.03, sm_active=0.1, pcie_rx_bytes_per_s=5e9)])
    assert _check(slow, "communication-bound")[1] is None  # a link at 8 %: the wait is not the link


def test_memory_bound_counter_evidence_when_the_sms_idle_too():
    _, v = _check(trace(gpus=[gpu(0, sm_active=0.2, tensor_active=0.01, dram_active=0.7)]), "memory-bound")
    assert v is not None and "small kernels" in v.counter_evidence[0]
    _, v = _check(POSITIVE["memory-bound"], "memory-bound")
    assert v is not None and not v.counter_evidence


# ------------------------------------------------------------------------------------------ XID and ECC


def test_hardware_errors_from_ecc_growth_and_application_xids():
    ecc = trace(gpus=[lambda i: gpu(0, ecc_uncorrected_errors=0 if i < 10 else 2, xid_errors=[])])
    _, v = _check(ecc, "hardware-errors")
    assert v is not None and v.confidence == 0.95 and v.evidence[0]["value"] == 2
    app = trace(gpus=[lambda i: gpu(0, xid_errors=[13] if i == 3 else [])])
    _, v = _check(app, "hardware-errors")
    assert v is not None and v.confidence < 0.95 and "application" in v.counter_evidence[0]
    old = trace(gpus=[gpu(0, ecc_uncorrected_errors=4, xid_errors=[])])  # counted before the run started
    _, v = _check(old, "hardware-errors")
    assert v is not None and "predate" in v.counter_evidence[0]
    check, v = _check(trace(gpus=[gpu(0)]), "hardware-errors")
    assert v is None and check["status"] == "no data"  # not watched is not "no errors"


# ----------------------------------------------------------------------------------------- checkpoints


def test_checkpoint_stall_needs_repeated_bursts_and_reads_host_disks_as_a_fallback():
    once = trace(
        proc=lambda i: checkpointing(i) if i < 5 else {}, gpus=[lambda i: gpu(0, util_percent=5 if i in (0, 1) else 95)]
    )
    check, v = _check(once, "checkpoint-stall")
    assert v is None and "1 separate burst" in check["reason"]
    host = trace(
        host=lambda i: {"disk_write_bytes_per_s": (800 << 20) if i % 10 in (0, 1) else 0},
        gpus=[lambda i: gpu(0, util_percent=3 if i % 10 in (0, 1) else 95)],
    )
    _, v = _check(host, "checkpoint-stall")
    assert v is not None and "host's disks" in v.counter_evidence[0]
    assert "every 10 s" in v.evidence[1]["note"]


# -------------------------------------------------------------------------------------------------- MFU

REF = MfuReference("llama-3.1-8b", "h100-sxm-80gb", 8, 4096, "bf16-mixed", 48e9, 989.5e12)


def _with_train(records, tokens_per_s=65_000.0):
    return [
        ({**r, "train": {"tokens_per_s": tokens_per_s, "step_s": 1.0}} if r.get("record") == "sample" else r)
        for r in records
    ]


def test_observed_vs_predicted_mfu_and_what_explains_the_gap():
    t = _with_train(POSITIVE["input-bound"])
    d = diagnose(t, reference=REF, predicted={"mfu": 0.5, "layout": "dp=8", "fits": True, "source": "x"})
    m = d.to_dict()["mfu"]
    assert m["observed"] == round(65_000 * 48e9 / (8 * 989.5e12), 4)
    assert m["predicted"]["mfu"] == 0.5 and m["gap"] == round(0.5 - m["observed"], 4)
    assert m["explained_by"] == ["input-bound"]


def test_mfu_without_progress_says_how_to_get_it():
    d = diagnose(POSITIVE["near-oom"], reference=REF)
    assert "observed" not in d.mfu and any("--log-regex" in n for n in d.notes)
    assert diagnose(POSITIVE["near-oom"]).mfu is None  # no --model and no live MFU: no block at all


def test_diagnose_model_through_the_cli(run, tmp_path):
    path = tmp_path / "t.jsonl"
    recs = _with_train(POSITIVE["input-bound"])
    recs[0] = {**recs[0], "gpus": [{"index": 0, "catalog_id": "h100-sxm-80gb"}, {"index": 1, "catalog_id": None}]}
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    code, out, _ = run("local", "diagnose", str(path), "--model", "llama-3.1-8b", "--json")
    m = json.loads(out)["mfu"]
    assert code == 0 and m["reference"]["gpu"] == "h100-sxm-80gb" and m["reference"]["gpus"] == 2
    assert "predicted" not in m  # no layout given: no prediction to set beside it
    code, out, _ = run("local", "diagnose", str(path), "--model", "llama-3.1-8b", "--gpus", "8", "--zero", "1")
    assert code == 0 and "MFU: observed" in out and "predicted" in out and "the gap: input-bound" in out
    code, _, err = run("local", "diagnose", str(_no_gpu_trace(tmp_path)), "--model", "llama-3.1-8b")
    assert code == 2 and "--gpu" in err and err.count("\n") == 1


def _no_gpu_trace(tmp_path):
    p = tmp_path / "nogpu.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in POSITIVE["near-oom"]))
    return p


# ----------------------------------------------------------------------------------------- nvidia-smi

SMI_HEADER = (
    "timestamp, index, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], "
    "power.limit [W], clocks.sm [MHz], clocks.max.sm [MHz], temperature.gpu, clocks_event_reasons.active, "
    "pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max"
)


def smi_log(n=12, mask="0x0000000000000004", temp="71"):
    """A synthetic nvidia-smi --format=csv -l 1 log of two GPUs (made up for the test, not recorded)."""
    lines = [SMI_HEADER]
    for k in range(n):
        for i in range(2):
            lines.append(
                f"2024/05/01 10:00:{k:02d}.{100 + i:03d}, {i}, NVIDIA H100 80GB HBM3, 97 %, 40000 MiB, 81559 MiB, "
                f"698.50 W, 700.00 W, 1410 MHz, 1980 MHz, {temp}, {mask}, 5, 5, 16, 16"
            )
    return "\n".join(lines) + "\n"


def test_nvidia_smi_log_imports_as_a_trace():
    recs, warnings = parse_nvidia_smi(smi_log().replace(", 71,", ", [N/A],", 1))
    head, samples = recs[0], recs[1:-1]
    assert head["source"] == "nvidia-smi" and head["interval_s"] == 1.0 and [g["index"] for g in head["gpus"]] == [0, 1]
    assert len(samples) == 12 and samples[1]["t_s"] == 1.0 and len(samples[0]["gpus"]) == 2
    g = samples[0]["gpus"][0]
    assert g["util_percent"] == 97 and g["mem_used_bytes"] == 40000 * 2**20 and g["power_w"] == 698.5
    assert g["throttle_mask"] == 4 and g["throttle_reasons"] == ["software power cap"]
    assert "temp_c" not in g and samples[0]["gpus"][1]["temp_c"] == 71  # [N/A]: absent, never 0
    assert warnings == []
    ids = [v.id for v in diagnose(recs).verdicts]
    assert ids[0] == "throttled-power"
    assert [v.id for v in diagnose(parse_nvidia_smi(smi_log(mask="0x0000000000000000"))[0]).verdicts] == ["healthy"]


def test_nvidia_smi_through_the_cli(run, tmp_path):
    path = tmp_path / "smi.csv"
    path.write_text(smi_log() + "2024/05/01 10:00:12.100, 0, NVIDIA H1")  # cut off by Ctrl-C
    code, out, err = run("local", "diagnose", str(path), "--from", "nvidia-smi", "--json")
    assert code == 0 and json.loads(out)["verdicts"][0]["id"] == "throttled-power" and "cut off" in err
    bad = tmp_path / "bad.csv"
    bad.write_text("util, mem\n1, 2\n")
    code, _, err = run("local", "diagnose", str(bad), "--from", "nvidia-smi")
    assert code == 2 and "index" in err and err.count("\n") == 1
    code, _, err = run("local", "diagnose", str(path))  # a CSV read as a watch trace
    assert code == 2 and err.count("\n") == 1


@pytest.mark.parametrize("field", [f.strip() for f in SUGGESTED_QUERY.split(",")])
def test_suggested_query_fields_are_all_read(field):
    from gpuplan.local.smi_import import _HEADER_FIELDS, FIELDS

    assert field in FIELDS or field in _HEADER_FIELDS or field in ("index", "timestamp")


# ----------------------------------------------------------------------------------------------- {host}


def test_host_in_out_is_expanded(tmp_path, run):
    host = socket.gethostname().split(".")[0]
    assert expand_out("run-{host}.jsonl") == f"run-{host}.jsonl" and expand_out("run.jsonl") == "run.jsonl"
    code, _, err = run("local", "watch", "--interval", "50ms", "--out", str(tmp_path / "r-{host}.jsonl"), "--", "true")
    assert code == 0 and (tmp_path / f"r-{host}.jsonl").exists() and "{host}" not in err


# ------------------------------------------------------------------------------------------ many nodes


def node_trace(host, start, n=30, **gpu_kw):
    recs = trace(n=n, gpus=[gpu(i, **gpu_kw) for i in range(8)])
    recs[0] = {**recs[0], "host": {"hostname": host, "cpu_count_logical": 8}, "started_at": start}
    return recs


def test_many_nodes_find_the_straggler_node_and_align_in_time(run, tmp_path):
    from gpuplan.local.diagnose import merge_traces

    nodes = [node_trace(f"node{k}", f"2025-01-01T00:00:0{k}.000+00:00") for k in range(3)]
    nodes.append(node_trace("node3", "2025-01-01T00:00:05.000+00:00", sm_clock_mhz=1500))  # a slow node
    merged, notes = merge_traces([(f"n{k}.jsonl", r) for k, r in enumerate(nodes)])
    samples = [r for r in merged if r.get("record") == "sample"]
    # the window all four cover: 00:00:05 to 00:00:29 (node0 ends there), 25 s of each
    assert {r["node"] for r in samples} == {"node0", "node1", "node2", "node3"}
    assert min(r["t_s"] for r in samples) == 0 and max(r["t_s"] for r in samples) == 24
    assert len(samples) == 4 * 25 and "aligned" in notes[0]
    d = diagnose(merged, notes=notes)
    v = next(v for v in d.verdicts if v.id == "straggler")
    assert {e["metric"].split()[1] for e in v.evidence} == {f"node3:{i}" for i in range(8)}
    assert "node3: the node" in v.evidence[0]["note"] and v.confidence == 0.8
    paths = []
    for k, recs in enumerate(nodes):
        p = tmp_path / f"run-node{k}.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in recs))
        paths.append(str(p))
    code, out, _ = run("local", "diagnose", *paths, "--json")
    rec = json.loads(out)
    assert code == 0 and rec["verdicts"][0]["id"] == "straggler" and rec["trace"]["gpus"] == 32
    assert any("aligned" in n for n in rec["notes"])
    healthy = [node_trace(f"node{k}", "2025-01-01T00:00:00+00:00") for k in range(2)]
    assert [v.id for v in diagnose(merge_traces([("a", healthy[0]), ("b", healthy[1])])[0]).verdicts] == ["healthy"]


def test_many_nodes_without_overlap_are_compared_whole():
    from gpuplan.local.diagnose import merge_traces

    a = node_trace("a", "2025-01-01T00:00:00+00:00")
    b = node_trace("b", "2025-01-01T01:00:00+00:00")
    merged, notes = merge_traces([("a", a), ("b", b)])
    assert "do not overlap" in notes[0] and sum(r.get("record") == "sample" for r in merged) == 60


def test_pid_of_finds_the_one_tree_by_name(tmp_path, run):
    import subprocess
    import sys
    import threading

    mark = f"gpuplan-pid-of-{tmp_path.name}"
    job = subprocess.Popen([sys.executable, "-c", "import time, sys; time.sleep(0.6)", mark])
    reaper = threading.Thread(target=job.wait)
    reaper.start()
    out = tmp_path / "p.jsonl"
    r = gpuplan.local_watch(pid_of=mark, interval="50ms", out=out)
    reaper.join()
    assert r.result.pid == job.pid and r.result.mode == "pid" and r.result.samples >= 3
    code, _, err = run("local", "watch", "--pid-of", mark + "-none", "--out", str(tmp_path / "x.jsonl"))
    assert code == 2 and "no running process matches" in err and err.count("\n") == 1
    code, _, err = run("local", "watch", "--pid-of", mark, "--pid", "1", "--out", str(tmp_path / "x.jsonl"))
    assert code == 2 and err.count("\n") == 1
