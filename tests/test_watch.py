"""local watch (real child processes on the CPU, GPUs through a fake NVML seam) and local diagnose (synthetic
traces: every verdict once held, once not)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import pytest

import gpuplan
from gpuplan.local.detect import GpuReading
from gpuplan.local.diagnose import diagnose

PY = sys.executable

H100 = GpuReading(
    index=0,
    name="NVIDIA H100 80GB HBM3",
    pci_device_id="0x2330",
    pci_bus_id="00000000:18:00.0",
    memory_total_bytes=81559 * 2**20,
    memory_free_bytes=80000 * 2**20,
    uuid="GPU-0",
)


class FakeGpu:
    """The watch GPU seam: one H100; a field NVML cannot read (temp) is absent from the samples."""

    def available(self):
        return True, ""

    def driver_version(self):
        return "550.54.15"

    def readings(self):
        return [H100]

    def sample(self):
        return [{"index": 0, "util_percent": 97, "mem_used_bytes": 40 << 30, "mem_total_bytes": 80 << 30}]


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _watch(tmp_path, code, **kw):
    out = tmp_path / "run.jsonl"
    r = gpuplan.local_watch([PY, "-c", code], interval="50ms", out=out, **kw)
    return r, _lines(out)


def test_exit_0_header_samples_summary(tmp_path):
    r, recs = _watch(tmp_path, "import time; time.sleep(0.4)", gpu_backend=FakeGpu())
    assert r.exit_code == 0 and r.result.exit_code == 0
    head, samples, last = recs[0], recs[1:-1], recs[-1]
    assert head["record"] == "header" and head["kind"] == "local.watch" and head["schema_version"] == 1
    assert head["gpus"][0]["catalog_id"] == "h100-sxm-80gb" and head["driver_version"] == "550.54.15"
    assert head["command"][0] == PY and head["host"]["cpu_count_logical"] >= 1
    assert len(samples) >= 3 and all(s["record"] == "sample" for s in samples)
    assert [s["t_s"] for s in samples] == sorted(s["t_s"] for s in samples)
    s = samples[-1]
    assert {"cpu_percent", "mem_used_bytes", "mem_total_bytes"} <= s["host"].keys()
    assert {"cpu_percent", "rss_bytes", "num_procs"} <= s["proc"].keys()
    assert s["gpus"][0]["util_percent"] == 97 and "temp_c" not in s["gpus"][0]  # absent, never 0
    assert last == {**last, "record": "summary", "exit_code": 0, "ended": "exited"}


def test_exit_3_is_watch_exit_3(tmp_path, run):
    out = tmp_path / "r.jsonl"
    code, _, err = run("local", "watch", "--interval", "50ms", "--out", str(out), "--", PY, "-c", "raise SystemExit(3)")
    assert code == 3 and "exit code 3" in err
    assert _lines(out)[-1]["exit_code"] == 3


def test_killed_by_a_signal_still_writes_the_summary(tmp_path):
    r, recs = _watch(tmp_path, "import os, signal, time; time.sleep(0.1); os.kill(os.getpid(), signal.SIGKILL)")
    assert r.exit_code == 128 + 9 and r.result.signal == "SIGKILL"
    assert recs[-1]["record"] == "summary" and recs[-1]["signal"] == "SIGKILL" and recs[-1]["ended"] == "signal"


def test_sigterm_is_forwarded_to_the_job(tmp_path):
    """The job runs in its own process group: only watch's forwarding can reach it."""
    out, mark = tmp_path / "r.jsonl", tmp_path / "got-term"
    job = (
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *a: (open({str(mark)!r}, 'w').close(), sys.exit(5)))\n"
        "time.sleep(30)\n"
    )
    p = subprocess.Popen(
        [PY, "-m", "gpuplan", "local", "watch", "--interval", "50ms", "--out", str(out), "--", PY, "-c", job]
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 3):
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 5
    assert mark.exists() and _lines(out)[-1]["exit_code"] == 5


def test_pid_mode_follows_and_never_signals(tmp_path):
    sleeper = subprocess.Popen([PY, "-c", "import time; time.sleep(0.5)"])
    reaper = threading.Thread(target=sleeper.wait)
    reaper.start()
    out = tmp_path / "p.jsonl"
    r = gpuplan.local_watch(pid=sleeper.pid, interval="50ms", out=out)
    reaper.join()
    assert sleeper.returncode == 0  # ended on its own
    recs = _lines(out)
    assert r.exit_code == 0 and r.result.mode == "pid" and recs[0]["mode"] == "pid" and recs[0]["pid"] == sleeper.pid
    assert r.result.samples >= 3 and recs[-1]["ended"] == "gone"


def test_bad_inputs_are_one_line_errors(tmp_path, run):
    code, _, err = run("local", "watch", "--out", str(tmp_path / "x.jsonl"))
    assert code == 2 and "--pid" in err
    code, _, err = run("local", "watch", "--pid", "1", "--out", str(tmp_path / "x.jsonl"), "--", "true")
    assert code == 2
    code, _, err = run("local", "watch", "--interval", "1ms", "--out", str(tmp_path / "x.jsonl"), "--", "true")
    assert code == 2 and "--interval" in err
    code, _, err = run("local", "watch", "--out", str(tmp_path / "x.jsonl"), "--", str(tmp_path / "nope"))
    assert code == 2 and "can't run" in err
    (tmp_path / "junk.jsonl").write_text("hello\n{}\n")
    code, _, err = run("local", "diagnose", str(tmp_path / "junk.jsonl"))
    assert code == 2 and err.count("\n") == 1


# ------------------------------------------------------------------------------------------------ diagnose


def trace(n=20, host=None, proc=None, gpus=None, cores=8):
    """A synthetic trace: n samples of the same readings (callables of the sample index are evaluated)."""

    def ev(x, i):
        return x(i) if callable(x) else x

    recs = [{"record": "header", "kind": "local.watch", "schema_version": 1, "host": {"cpu_count_logical": cores}}]
    for i in range(n):
        s = {
            "record": "sample",
            "t_s": float(i),
            "host": {"cpu_percent": 30, "iowait_percent": 1, "mem_used_bytes": 10 << 30, "mem_total_bytes": 64 << 30}
            | ev(host or {}, i),
            "proc": {"cpu_percent": 100, "max_thread_cpu_percent": 40, "rss_bytes": 1 << 30, "num_procs": 1}
            | ev(proc or {}, i),
        }
        if gpus is not None:
            s["gpus"] = [ev(g, i) for g in gpus]
        recs.append(s)
    recs.append({"record": "summary", "t_s": float(n), "exit_code": 0})
    return recs


def gpu(i=0, **kw):
    base = {
        "index": i,
        "util_percent": 95,
        "mem_used_bytes": 40 << 30,
        "mem_total_bytes": 80 << 30,
        "power_w": 500.0,
        "power_limit_w": 700.0,
        "sm_clock_mhz": 1980,
        "sm_clock_max_mhz": 1980,
        "temp_c": 60,
        "throttle_mask": 0,
        "throttle_reasons": [],
        "pcie_gen": 5,
        "pcie_gen_max": 5,
        "pcie_width": 16,
        "pcie_width_max": 16,
    }
    return base | kw


HEALTHY = trace(gpus=[gpu(0), gpu(1)])


def with_nvlink(records, per_direction=450e9):
    """A trace whose header gives each GPU the catalog's NVLink bandwidth (as watch writes it)."""
    ids = sorted({g["index"] for r in records for g in r.get("gpus", []) if r.get("record") == "sample"})
    return [{**records[0], "gpus": [{"index": i, "nvlink_bytes_per_s_max": per_direction} for i in ids]}, *records[1:]]


def _nvlink_busy(**activity):
    """Two GPUs whose NVLink carries 300 / 310 GB/s each way (two thirds of the header's bandwidth), at the given
    SM and tensor activity."""
    gpus = [gpu(i, **activity, nvlink_rx_bytes_per_s=300e9, nvlink_tx_bytes_per_s=310e9) for i in range(2)]
    return with_nvlink(trace(gpus=gpus))


def checkpointing(i):
    """The job's writes: every 10 s, 2 s of writing at 500 MiB/s."""
    return {"write_bytes_per_s": (500 << 20) if i % 10 in (0, 1) else 0.0}


def _ckpt_gpus(util_when_writing=5):
    return [lambda i: gpu(0, util_percent=util_when_writing if i % 10 in (0, 1) else 95)]


POSITIVE = {
    "input-bound": trace(host={"iowait_percent": 25}, gpus=[gpu(0, util_percent=20), gpu(1, util_percent=20)]),
    "host-swapping": trace(
        host=lambda i: {"swap_in_bytes_per_s": 50 << 20, "swap_used_bytes": i * (100 << 20)}, gpus=[gpu(0)]
    ),
    "near-oom": trace(gpus=[gpu(0, mem_used_bytes=79 << 30)]),
    "throttled-power": trace(
        gpus=[gpu(0, throttle_mask=0x4, throttle_reasons=["software power cap"], sm_clock_mhz=1500, power_w=699.0)]
    ),
    "throttled-thermal": trace(
        gpus=[gpu(0, throttle_mask=0x20, throttle_reasons=["software thermal slowdown"], temp_c=90)]
    ),
    "pcie-downtrained": trace(gpus=[gpu(0, pcie_gen=3)]),
    "straggler": trace(gpus=[gpu(0), gpu(1), gpu(2, sm_clock_mhz=1400), gpu(3)]),
    "cpu-launch-bound": trace(
        proc={"max_thread_cpu_percent": 99}, gpus=[gpu(0, util_percent=45), gpu(1, util_percent=45)]
    ),
    "memory-bound": trace(gpus=[gpu(0, sm_active=0.9, tensor_active=0.05, dram_active=0.85)]),
    "communication-bound": _nvlink_busy(sm_active=0.15, tensor_active=0.02),
    "hardware-errors": trace(gpus=[gpu(0, xid_errors=[]), lambda i: gpu(1, xid_errors=[79] if i == 5 else [])]),
    "checkpoint-stall": trace(proc=checkpointing, gpus=_ckpt_gpus()),
}

NEGATIVE = {
    "input-bound": trace(host={"iowait_percent": 25}, gpus=[gpu(0)]),  # iowait, but the GPU is busy
    "host-swapping": trace(host={"swap_in_bytes_per_s": 0, "swap_used_bytes": 1 << 30}, gpus=[gpu(0)]),
    "near-oom": trace(gpus=[gpu(0, mem_used_bytes=70 << 30)]),
    "throttled-power": trace(gpus=[gpu(0, util_percent=0, throttle_mask=0x4 | 0x1)]),  # idle GPU: not a problem
    "throttled-thermal": trace(gpus=[gpu(0, throttle_mask=0x4)]),  # power bits are not thermal
    "pcie-downtrained": trace(gpus=[gpu(0, util_percent=0, pcie_gen=1)]),  # idle links may downshift
    "straggler": trace(gpus=[gpu(0), gpu(1, sm_clock_mhz=1950)]),
    "cpu-launch-bound": trace(proc={"max_thread_cpu_percent": 99}, gpus=[gpu(0)]),  # the GPU is busy
    # DRAM busy, but so are the tensor cores: a well-fed GEMM, not a bandwidth-bound kernel
    "memory-bound": trace(gpus=[gpu(0, sm_active=0.9, tensor_active=0.55, dram_active=0.85)]),
    # the links are as busy, but the tensor cores keep computing: the transfers overlap the compute
    "communication-bound": _nvlink_busy(sm_active=0.9, tensor_active=0.6),
    "hardware-errors": trace(gpus=[gpu(0, xid_errors=[], ecc_uncorrected_errors=0, ecc_corrected_errors=3)]),
    # the same bursts, but the GPUs keep working while they are written (an asynchronous save)
    "checkpoint-stall": trace(proc=checkpointing, gpus=_ckpt_gpus(util_when_writing=95)),
}


def _ids(records):
    return [v.id for v in diagnose(records).verdicts]


@pytest.mark.parametrize("vid", sorted(POSITIVE))
def test_each_verdict_holds_on_its_trace(vid):
    d = diagnose(POSITIVE[vid])
    v = next(v for v in d.verdicts if v.id == vid)
    assert "healthy" not in _ids(POSITIVE[vid])
    assert 0 < v.confidence <= 1 and v.evidence and v.advice
    for e in v.evidence:
        assert {"metric", "value", "threshold", "source"} <= e.keys() and e["source"]


@pytest.mark.parametrize("vid", sorted(NEGATIVE))
def test_each_verdict_does_not_hold_on_its_negative(vid):
    assert vid not in _ids(NEGATIVE[vid])


def test_healthy_only_when_nothing_else_holds():
    assert _ids(HEALTHY) == ["healthy"]
    assert all("healthy" not in _ids(t) for t in POSITIVE.values())
    # no GPU in the trace: the GPU checks say "no data", healthy is less sure and says why
    d = diagnose(trace())
    assert [v.id for v in d.verdicts] == ["healthy"] and d.verdicts[0].confidence < diagnose(HEALTHY).verdicts[
        0
    ].confidence
    assert any(c["status"] == "no data" for c in d.checks)


def test_no_verdict_when_nothing_could_be_checked():
    """Samples with neither host nor GPU fields: every check says "no data", and diagnose gives no verdict (a
    "healthy" would claim what nothing showed) but a note that says so."""
    bare = [r if r["record"] != "sample" else {"record": "sample", "t_s": r["t_s"]} for r in trace()]
    d = diagnose(bare)
    assert all(c["status"] == "no data" for c in d.checks), d.checks
    assert d.verdicts == () and any("no check had data" in n for n in d.notes)


def test_verdicts_are_ranked():
    both = trace(
        host={"iowait_percent": 25},
        gpus=[gpu(0, util_percent=20, mem_used_bytes=79 << 30), gpu(1, util_percent=20)],
    )
    d = diagnose(both)
    assert {"input-bound", "near-oom"} <= {v.id for v in d.verdicts}
    assert [v.confidence for v in d.verdicts] == sorted((v.confidence for v in d.verdicts), reverse=True)


def test_diagnose_json_is_the_api_report(tmp_path, run):
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in POSITIVE["near-oom"]) + '{"record": "sam')  # cut off
    code, out, err = run("local", "diagnose", str(path), "--json")
    report = gpuplan.local_diagnose(path)
    assert code == 0 and json.loads(out) == report.to_dict()
    assert "cut off" in err and report.to_dict()["verdicts"][0]["id"] == "near-oom"
    code, out, _ = run("local", "diagnose", str(path))
    assert code == 0 and "near-oom" in out


def test_a_real_trace_diagnoses(tmp_path):
    _, recs = _watch(tmp_path, "import time; time.sleep(0.2)")
    assert diagnose(recs).samples >= 2


def test_signal_handlers_are_restored(tmp_path):
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    _watch(tmp_path, "pass")
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_diagnose_refuses_devices_and_fifos_without_blocking(run, tmp_path):
    """A trace path that is a device or a FIFO is one line and exit 2, never a read without end."""
    import os

    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        code, _, err = run("local", "diagnose", path)
        assert code == 2 and "not a regular file" in err and err.count("\n") == 1, err
