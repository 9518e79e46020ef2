"""``local diagnose`` on real ``local watch`` traces (issue #20): four jobs with a known bottleneck each, recorded on
one NVIDIA H200 (driver 580.159.04, 0.5 s interval, 12 s each) from scripts/watch_workloads.py, whose docstring says
what each job does. They sit in tests/fixtures/watch/h200_*.jsonl unedited; the variations below change one field
of a copy to check the rule's mechanism, not its fit to these files."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpuplan.local.diagnose import THRESHOLDS, diagnose

FIXTURES = Path(__file__).parent / "fixtures" / "watch"

#: trace -> the verdict the job was built to show (None: no problem)
EXPECTED = {
    "h200_healthy": None,
    "h200_input-bound": "input-bound",
    "h200_launch-bound": "cpu-launch-bound",
    "h200_memory-bound": "memory-bound",
}


def load(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines() if line.strip()]


def ids(records: list[dict]) -> list[str]:
    return [v.id for v in diagnose(records).verdicts]


def evidence(records: list[dict], vid: str, threshold_name: str) -> float:
    v = next(v for v in diagnose(records).verdicts if v.id == vid)
    return next(e["value"] for e in v.evidence if e["threshold_name"] == threshold_name)


def test_the_fixtures_are_real_h200_traces():
    for name in EXPECTED:
        recs = load(name)
        head = recs[0]
        assert head["record"] == "header" and head["driver_version"] == "580.159.04"
        assert head["gpus"][0]["name"] == "NVIDIA H200" and head["interval_s"] == 0.5
        assert head["command"][2] == name.removeprefix("h200_")  # the workload scripts/watch_workloads.py ran
        assert recs[-1]["record"] == "summary" and recs[-1]["exit_code"] == 0 and recs[-1]["samples"] >= 30


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_top_verdict_is_the_workload_bottleneck(name):
    got = ids(load(name))
    want = EXPECTED[name]
    if want is None:
        assert got == ["healthy"], got  # no problem verdict at all
    else:
        assert got[0] == want, got
        assert "healthy" not in got


def test_healthy_gemm_at_its_power_limit_is_a_note_not_a_finding():
    """The GEMM loop runs with NVML's SW power cap bit (0x4) set in every busy sample, at the 700 W limit, with
    the SM clock at 1755 of 1980 MHz: the GPU holding its limit, as at TDP. That is a note, not a verdict."""
    d = diagnose(load("h200_healthy"))
    check = next(c for c in d.checks if c["id"] == "throttled-power")
    assert check["status"] == "not held"
    note = next(n for n in d.notes if "SW power cap" in n)
    assert "700 W" in note and "89%" in note and "not a finding" in note


def _with_limits(records, limit_w=None, default_w=None, clock_mhz=None, mask=None):
    """A copy of a trace with its busy samples' enforced limit, SM clock or reason bits changed, and the header's
    default limit set (as watch now records it)."""
    recs = copy.deepcopy(records)
    if default_w is not None:
        for g in recs[0]["gpus"]:
            g["power_limit_default_w"] = default_w
    for r in recs:
        for g in r.get("gpus", []) if r["record"] == "sample" else []:
            if g.get("util_percent", 0) < 10:
                continue
            if limit_w is not None:
                g["power_limit_w"] = limit_w
            if clock_mhz is not None:
                g["sm_clock_mhz"] = clock_mhz
            if mask is not None:
                g["throttle_mask"] = mask
    return recs


def test_a_limit_lowered_below_the_default_is_the_verdict():
    healthy = load("h200_healthy")
    # the same samples, but with the limit at 450 W of a 700 W default: capped below the default
    capped = _with_limits(healthy, limit_w=450.0, default_w=700.0)
    assert ids(capped)[0] == "throttled-power"
    assert evidence(capped, "throttled-power", "power_limit_default_fraction") == pytest.approx(450 / 700, abs=1e-3)
    # at the default (the header says 700 W): still no finding, and the note says the limit is the default
    at_default = _with_limits(healthy, default_w=700.0)
    d = diagnose(at_default)
    assert [v.id for v in d.verdicts] == ["healthy"]
    assert any("(the default)" in n for n in d.notes)
    # a limit within detect's 90 % of the default is not "lowered"
    assert ids(_with_limits(healthy, limit_w=0.95 * 700, default_w=700.0)) == ["healthy"]


def test_clocks_far_below_the_maximum_at_the_limit_are_the_verdict():
    healthy = load("h200_healthy")
    cut = THRESHOLDS["power_cap_clock_ratio"].value
    slow = _with_limits(healthy, clock_mhz=int(0.7 * 1980))
    v = next(v for v in diagnose(slow).verdicts if v.id == "throttled-power")
    assert evidence(slow, "throttled-power", "power_cap_clock_ratio") == pytest.approx(0.7, abs=0.01)
    assert any("default power limit" in c for c in v.counter_evidence)  # the trace cannot say the limit is default
    assert ids(_with_limits(healthy, clock_mhz=int((cut + 0.02) * 1980))) == ["healthy"]


def test_the_hardware_power_brake_is_always_a_finding():
    """0x80: the system told the GPU to slow down (NVML: clocks cut 2x or more), whatever the limit and clocks."""
    braked = _with_limits(load("h200_healthy"), default_w=700.0, mask=0x4 | 0x80)
    assert ids(braked)[0] == "throttled-power"
    assert evidence(braked, "throttled-power", "power_throttle_fraction") == 1.0


def test_sm_fill_separates_a_main_thread_loader_from_a_launch_bound_loop():
    """Both jobs keep one thread at 100 % of a core with the GPU mostly idle by NVML's utilization. The input-bound
    job's kernels (8192^3 matmuls) fill the SMs when they run; the launch-bound job's (1024-element adds) leave
    them nearly empty: GPM sm_active over NVML utilization, summed over the samples."""
    low = THRESHOLDS["kernel_sm_fill_low"].value
    inp, launch = load("h200_input-bound"), load("h200_launch-bound")
    assert evidence(inp, "input-bound", "kernel_sm_fill_low") > 3 * low
    assert evidence(launch, "cpu-launch-bound", "kernel_sm_fill_low") < low / 10
    d = diagnose(inp)
    assert "cpu-launch-bound" not in [v.id for v in d.verdicts]
    assert "prepares work" in next(c for c in d.checks if c["id"] == "cpu-launch-bound")["reason"]
    advice = next(v for v in d.verdicts if v.id == "input-bound").advice
    assert all(w in advice for w in ("num_workers", "pin_memory", "prefetch"))


def test_without_gpm_the_launch_verdict_says_it_cannot_tell_a_main_thread_loader():
    """Strip the GPM fields (a GPU before Hopper): the input-bound job then looks launch-bound, and the verdict
    says so in its counter-evidence rather than claiming more than the trace shows."""
    recs = copy.deepcopy(load("h200_input-bound"))
    for r in recs:
        for g in r.get("gpus", []) if r["record"] == "sample" else []:
            for k in ("sm_active", "sm_occupancy", "tensor_active", "dram_active"):
                g.pop(k, None)
    v = next(v for v in diagnose(recs).verdicts if v.id == "cpu-launch-bound")
    assert any("num_workers=0" in c for c in v.counter_evidence)


def test_diagnose_cli_on_a_real_trace(run):
    code, out, err = run("local", "diagnose", str(FIXTURES / "h200_input-bound.jsonl"), "--json")
    assert code == 0 and err == ""
    rec = json.loads(out)
    assert rec["verdicts"][0]["id"] == "input-bound" and rec["trace"]["gpus"] == 1
    assert "kernel_sm_fill_low" in rec["thresholds"] and rec["thresholds"]["kernel_sm_fill_low"]["source"]


def test_watch_records_the_default_power_limit(monkeypatch):
    """watch reads NVML's default limit once per GPU (nvmlDeviceGetPowerManagementDefaultLimit, mW) into each
    sample, so diagnose can tell a lowered cap from the GPU at its own TDP; a driver that does not answer leaves
    the field out."""
    from test_watch_nvml import H100, FakeWatchPynvml, _backend

    fake = FakeWatchPynvml([H100])
    assert "power_limit_default_w" not in _backend(monkeypatch, fake).sample()[0]  # NotSupported: absent, not 0
    fake.nvmlDeviceGetPowerManagementDefaultLimit = lambda h: 700_000
    assert _backend(monkeypatch, fake).sample()[0]["power_limit_default_w"] == 700.0


def test_an_activity_share_outside_0_1_is_refused(tmp_path, run):
    """A GPM share below 0 (or NVML utilization above 100 %) is no reading: one error line, exit 2 (review of
    2026-11-27: sm_active -5 gave 'share of SMs -484.8' at confidence 1.00)."""
    lines = (FIXTURES / "h200_launch-bound.jsonl").read_text().splitlines()
    rec = json.loads(lines[3])
    rec["gpus"][0]["sm_active"] = -5
    lines[3] = json.dumps(rec)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    code, _out, err = run("local", "diagnose", str(bad))
    assert code == 2 and "sm_active -5 is outside 0-1" in err and "Traceback" not in err
