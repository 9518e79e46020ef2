"""`train` and `serve`: the `machine` block of --json (keys with units, absent when not computable), the
table's machine section, and every new flag's bad input (one `error:` line, exit 2)."""

from __future__ import annotations

import json

import pytest

from test_cli import one_line_error

PLAN = ("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "16", "--zero", "1", "--global-batch", "256")
ALWAYS = {
    "checkpoint_bytes",
    "checkpoint_write_s",
    "checkpoint_interval_s",
    "cluster_mtbf_s",
    "cpu_cores_per_gpu",
    "host_ram_bytes_per_node",
}
WITH_TOKENS = {
    "dataset_bytes",
    "storage_read_bytes_per_s",
    "expected_interruptions",
    "goodput",
    "wall_time_with_failures_s",
    "network_bytes_per_s_per_gpu",
    "energy_kwh",
    "co2eq_kg",
}


def _machine(run, *args):
    code, out, err = run(*args, "--json")
    assert code == 0, err
    rec = json.loads(out)
    return rec, rec["machine"]


def test_train_machine_block_with_tokens(run):
    rec, m = _machine(run, *PLAN, "--tokens", "100B", "--usd-per-gpu-hour", "2.5")
    assert ALWAYS | WITH_TOKENS | {"cost_with_failures_usd"} <= set(m)
    assert 0 < m["goodput"] <= 1
    assert m["wall_time_with_failures_s"] >= m["wall_time_s"] == pytest.approx(rec["time"]["seconds"])
    assert m["cost_with_failures_usd"] >= rec["cost"]["usd"]
    assert m["dataset_bytes"] == pytest.approx(100e9 * 4)  # Llama 3 vocabulary: int32 tokens
    assert sum(m["checkpoint_parts_bytes"].values()) == pytest.approx(m["checkpoint_bytes"])
    names = {a["name"] for a in rec["assumptions"]}
    assert {"restart_s", "pue", "grid_gco2_per_kwh", "failures_per_gpu_hour"} <= names


def test_time_figures_absent_without_tokens(run):
    _, m = _machine(run, *PLAN)
    assert set(m) >= ALWAYS
    assert not (WITH_TOKENS | {"cost_with_failures_usd"}) & set(m)
    assert all(v is not None for v in m.values())


def test_cost_absent_without_a_price(run):
    _, m = _machine(run, *PLAN, "--tokens", "100B")
    assert "goodput" in m and "cost_with_failures_usd" not in m


def test_flags_change_the_figures(run):
    _, base = _machine(run, *PLAN, "--tokens", "100B")
    _, m = _machine(
        run,
        *PLAN,
        "--tokens",
        "100B",
        "--bytes-per-token",
        "2",
        "--storage",
        "nfs",
        "--storage-write",
        "2GB/s",
        "--async-checkpoint",
        "--mtbf-per-gpu-hours",
        "1000",
        "--grid-gco2-per-kwh",
        "0",
    )
    assert m["dataset_bytes"] == pytest.approx(base["dataset_bytes"] / 2)
    assert m["checkpoint_write_s"] == pytest.approx(m["checkpoint_bytes"] / 2e9)
    assert m["checkpoint_blocking_s"] < m["checkpoint_write_s"]  # asynchronous: only the device-to-host copy
    assert m["failures_per_gpu_hour"] == pytest.approx(1e-3)
    assert m["cluster_mtbf_s"] < base["cluster_mtbf_s"]
    assert m["co2eq_kg"] == 0 and m["energy_kwh"] > 0


def test_assume_reaches_the_machine_assumptions(run):
    _, base = _machine(run, *PLAN, "--tokens", "100B")
    _, m = _machine(run, *PLAN, "--tokens", "100B", "--assume", "pue=1.1")
    assert m["energy_kwh"] == pytest.approx(base["energy_kwh"] / 1.58 * 1.1)


def test_train_table_has_a_machine_section(run):
    code, out, _ = run(*PLAN, "--tokens", "100B")
    assert code == 0
    for frag in ("machine", "checkpoint", "goodput", "CPU cores per GPU", "CO2eq"):
        assert frag in out, frag


def test_serve_machine_block(run):
    _rec, m = _machine(run, "serve", "llama-3.1-8b", "--gpu", "h100")
    assert m["cold_start_s"] > 0 and m["host_ram_bytes_per_node"] > 0
    assert sum(m["cold_start_parts_s"].values()) == pytest.approx(m["cold_start_s"])
    _, fast = _machine(run, "serve", "llama-3.1-8b", "--gpu", "h100", "--storage", "local-nvme")
    assert fast["cold_start_s"] < m["cold_start_s"]
    code, out, _ = run("serve", "llama-3.1-8b", "--gpu", "h100")
    assert code == 0 and "cold start" in out


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--bytes-per-token", "0"),
        ("--bytes-per-token", "nan"),
        ("--bytes-per-token", "-4"),
        ("--bytes-per-token", "x"),
        ("--storage", "tape"),
        ("--storage-write", "0"),
        ("--storage-write", "-5GB/s"),
        ("--storage-write", "inf"),
        ("--storage-write", "fast"),
        ("--mtbf-per-gpu-hours", "0"),
        ("--mtbf-per-gpu-hours", "inf"),
        ("--grid-gco2-per-kwh", "-1"),
        ("--grid-gco2-per-kwh", "1e9"),
        ("--assume", "restart_s=-1"),
        ("--assume", "pcie_efficiency=2"),
    ],
)
def test_bad_machine_flags_exit_2_with_one_line(run, flag, value):
    line = one_line_error(*run(*PLAN, "--tokens", "100B", flag, value))
    assert (
        flag.lstrip("-").split("=")[0].replace("-", "") in line.replace("-", "").replace("_", "")
        or "assumption" in line
    )
