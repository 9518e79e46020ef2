"""estimate/machine.py and plan/machine.py: the formulas against worked examples (tolerances stated), and
the invariants the machine block keeps."""

from __future__ import annotations

import math
import tomllib

import pytest

from conftest import REPO
from gpuplan.errors import GpuplanError, QuantityError
from gpuplan.estimate import machine as mx
from gpuplan.plan.machine import STORAGE_CHOICES, MachineOptions, parse_bytes_per_s
from gpuplan.units import TiB


def test_bloom_checkpoint_is_14_bytes_per_param():
    """BLOOM 176B: bf16 weights 2 + fp32 master 4 + Adam moments 8 = 14 B/param = 2.46e12 B = 2.24 TiB (the
    model card's "2.3TB"); exact arithmetic, tolerance 0.1 %."""
    c = mx.checkpoint_size(176e9, 2, 4, 8)
    assert c.total_bytes == pytest.approx(2.464e12, rel=1e-3)
    assert c.total_bytes / TiB == pytest.approx(2.24, rel=1e-3)
    assert (c.weights_bytes, c.master_weights_bytes, c.optimizer_bytes) == (352e9, 704e9, 1408e9)


def test_sharded_checkpoint_per_rank():
    """tp x pp = 8 shards the weights; ZeRO-1 over dp = 4 also shards master weights and states (32 writers)."""
    c = mx.checkpoint_size(176e9, 2, 4, 8, model_shards=8, optimizer_shards=32)
    assert c.per_rank_bytes == pytest.approx(352e9 / 8 + 2112e9 / 32)
    assert c.writer_ranks == 32


def test_llama3_interruptions_reproduced_from_the_per_gpu_rate():
    """419 unexpected interruptions in 54 days on 16,384 H100 (Llama 3 paper): the exact rate gives 419 back,
    and the rounded 2e-5 per GPU-hour gives 425, within 2 %."""
    hours = 54 * 24
    assert pytest.approx(1.97e-5, rel=2e-3) == mx.LLAMA3_FAILURES_PER_GPU_HOUR
    assert mx.expected_failures(mx.LLAMA3_FAILURES_PER_GPU_HOUR, 16_384, hours) == pytest.approx(419, rel=1e-9)
    assert mx.expected_failures(2e-5, 16_384, hours) == pytest.approx(419, rel=0.02)
    # one failure every ~3 hours, as Meta reported
    assert mx.cluster_mtbf_s(mx.LLAMA3_FAILURES_PER_GPU_HOUR, 16_384) / 3600 == pytest.approx(3.09, rel=0.01)


def test_rsc_rate_from_the_1024_gpu_mttf():
    """Kokolis et al.: MTTF 7.9 h for 1,024-GPU jobs -> 1.24e-4 per GPU-hour, ~6x Llama 3's rate."""
    assert pytest.approx(1.236e-4, rel=1e-3) == mx.RSC_FAILURES_PER_GPU_HOUR
    assert mx.cluster_mtbf_s(mx.RSC_FAILURES_PER_GPU_HOUR, 1024) == pytest.approx(7.9 * 3600)
    assert 5 < mx.RSC_FAILURES_PER_GPU_HOUR / mx.LLAMA3_FAILURES_PER_GPU_HOUR < 7


@pytest.mark.parametrize("mtbf_min, expected_min", [(24 * 60, 117), (6 * 60, 57), (15, 9.1)])
def test_daly_interval_matches_dalys_worked_cases(mtbf_min, expected_min):
    """Daly 2006, figures 3-5 (delta = 5 min): tau_opt = 117 min at M = 24 h, 57 min at 6 h, 9.1 min at 15 min;
    the paper rounds, so 1 % tolerance."""
    assert mx.daly_interval_s(300, mtbf_min * 60) / 60 == pytest.approx(expected_min, rel=0.01)


def test_young_hand_computed():
    """delta = 5 min, M = 24 h: sqrt(2 x 300 x 86,400) = 7,200 s exactly; Daly adds (1/3)sqrt(delta/2M) and
    subtracts delta: 7,200 (1 + 0.013889 + 0.000193) - 300 = 7,001.4 s (hand-computed, 0.01 %)."""
    assert mx.young_interval_s(300, 86_400) == pytest.approx(7200)
    assert mx.daly_interval_s(300, 86_400) == pytest.approx(7001.39, rel=1e-4)
    assert mx.daly_interval_s(10_000, 1_000) == 1_000  # delta >= 2M: checkpoint every M


def test_interval_grows_with_the_square_root_of_mtbf():
    small = mx.young_interval_s(60, 3600)
    assert mx.young_interval_s(60, 4 * 3600) == pytest.approx(2 * small)
    assert mx.daly_interval_s(6, 4 * 3600) / mx.daly_interval_s(6, 3600) == pytest.approx(2, rel=0.02)  # delta << M


def test_daly_wall_time_first_order_and_itemized():
    """For tau + delta, R << M the wall time is T_s (1 + delta/tau)(1 + R/M + (tau + delta)/2M); the parts add up."""
    ts, tau, delta, r, m = 1e6, 3600.0, 60.0, 600.0, 1e6
    fc = mx.run_with_failures(ts, tau, delta, r, m)
    first = ts * (1 + delta / tau) * (1 + r / m + (tau + delta) / (2 * m))
    assert fc.wall_s == pytest.approx(first, rel=1e-3)
    assert fc.solve_s + fc.checkpoint_s + fc.restart_s + fc.rework_s == pytest.approx(fc.wall_s)
    assert fc.interruptions == pytest.approx(fc.wall_s / m)
    # rework is half an interval (plus the checkpoint) per interruption, to first order
    assert fc.rework_s / fc.interruptions == pytest.approx((tau + delta) / 2, rel=0.02)


@pytest.mark.parametrize("m", [60.0, 3600.0, 1e5, 1e9])
def test_goodput_in_zero_one(m):
    fc = mx.run_with_failures(1e6, mx.daly_interval_s(120, m), 120, 600, m)
    assert 0 < fc.goodput <= 1
    assert math.isfinite(fc.wall_s)


def test_goodput_falls_as_failures_rise():
    g = [mx.run_with_failures(1e6, mx.daly_interval_s(60, m), 60, 600, m).goodput for m in (1e7, 1e5, 1e4)]
    assert g[0] > g[1] > g[2]


def test_async_checkpoint_blocks_only_for_the_copy():
    assert mx.checkpoint_blocking_s(100.0, 2.0, asynchronous=True) == 2.0
    assert mx.checkpoint_blocking_s(100.0, 2.0, asynchronous=False) == 100.0


def test_llama31_model_card_emissions():
    """Llama 3.1 405B: 30.84M H100 GPU-hours at 700 W TDP -> 8,930 t CO2eq location-based. Over TDP energy
    (21.59 GWh; the card folds PUE into its power figure without stating it) that implies 413.6 g/kWh, and
    the formula gives 8,930 t back (0.1 %)."""
    kwh = mx.energy_kwh(30.84e6, 700)
    assert kwh == pytest.approx(21.588e6)
    implied = 8_930e6 / kwh * 1000 / 1000  # g/kWh: 8,930 t = 8.93e9 g
    assert implied == pytest.approx(413.65, rel=1e-3)
    assert mx.co2eq_kg(kwh, 413.65) / 1000 == pytest.approx(8_930, rel=1e-3)


def test_energy_uses_host_factor_and_pue():
    assert mx.energy_kwh(1000, 700, 1.82, 1.58) == pytest.approx(1000 * 0.7 * 1.82 * 1.58)


def test_energy_defaults_match_the_tco_defaults():
    """The host-power factor and PUE are the TCO module's sourced defaults (data/ownership.toml)."""
    d = tomllib.loads((REPO / "src" / "gpuplan" / "data" / "ownership.toml").read_text())["defaults"]
    a = mx.MachineAssumptions()
    assert (a.host_power_factor, a.pue) == (d["host_power_factor"], d["pue"])


def test_token_dtype_and_dataset_bytes():
    assert mx.token_dtype_bytes(50_257) == 2 and mx.token_dtype_bytes(128_256) == 4 and mx.token_dtype_bytes(None) == 4
    assert mx.dataset_bytes(15.6e12, 4) == pytest.approx(62.4e12)
    assert mx.read_bytes_per_s(1e6, 4) == 4e6


def test_allreduce_volume_and_exposure():
    assert mx.allreduce_bytes_per_rank(1e9, 1) == 0
    assert mx.allreduce_bytes_per_rank(1e9, 4) == pytest.approx(1.5e9)
    assert mx.exposed_s(48e9, 48e9, 0.5) == pytest.approx(0.5)
    assert mx.exposed_s(1e9, 48e9, 0.5) == 0


def test_cpu_and_host_ram_rules():
    assert mx.cpu_cores_per_gpu(2) == 3  # Bekman: 1 per process + 2 workers
    assert mx.host_ram_floor_bytes(80e9, 8) == 640e9  # at least the node's GPU memory


def test_storage_classes_are_sourced_and_the_cli_lists_them():
    from gpuplan.cli.main import cli

    flags = {p.name: p for p in cli.commands["train"].params}
    cli_choices = set(flags["storage"].type.choices)
    assert set(STORAGE_CHOICES) == cli_choices == {"local-nvme", "nfs", "lustre", "object"}
    for sc in mx.STORAGE_CLASSES.values():
        assert sc.source and sc.read_bytes_per_s_per_node > 0 and sc.write_bytes_per_s_per_node > 0
    lustre = mx.STORAGE_CLASSES["lustre"]
    assert mx.storage_write_bytes_per_s(lustre, 10_000) == lustre.aggregate_write_bytes_per_s  # capped
    assert mx.storage_write_bytes_per_s(lustre, 2) == 2 * lustre.write_bytes_per_s_per_node


def test_failure_source_by_generation():
    assert mx.default_failure_source("Ampere") == "rsc"
    assert mx.default_failure_source("Hopper") == "llama3"


def test_every_assumption_has_a_source_and_is_checked():
    a = mx.MachineAssumptions()
    assert all(x.source for x in a.items())
    with pytest.raises(GpuplanError):
        mx.MachineAssumptions(pue=0.9)
    with pytest.raises(GpuplanError):
        mx.MachineAssumptions(restart_s=float("nan"))


@pytest.mark.parametrize("text, value", [("20GB/s", 20e9), ("1.5GiB/s", 1.5 * 2**30), ("800MB", 800e6)])
def test_parse_bytes_per_s(text, value):
    assert parse_bytes_per_s(text) == value


@pytest.mark.parametrize(
    "kwargs",
    [
        {"storage_write": "0GB/s"},
        {"storage_write": "fast"},
        {"bytes_per_token": "nan"},
        {"bytes_per_token": "-2"},
        {"mtbf_per_gpu_hours": "0"},
        {"grid_gco2_per_kwh": "1e6"},
        {"storage": "tape"},
    ],
)
def test_bad_options_raise_quantity_error(kwargs):
    with pytest.raises(QuantityError):
        MachineOptions.from_flags(**kwargs)


def test_options_reject_non_finite_values_directly():
    with pytest.raises(QuantityError):
        MachineOptions(bytes_per_token=float("inf"))
    assert MachineOptions(grid_gco2_per_kwh=0.0).grid_gco2_per_kwh == 0.0  # market-based: zero is allowed


def test_train_machine_without_a_plan_has_no_time_figures():
    from gpuplan.catalog import load_accelerators, resolve_model
    from gpuplan.estimate.memory import training_memory
    from gpuplan.plan.machine import train_machine
    from gpuplan.spec.training import Parallelism, TrainingJob

    model = resolve_model("llama-3.1-8b")
    gpu = load_accelerators().get("h100")
    layout, job = Parallelism(gpus=16, zero=1), TrainingJob(seq_len=4096)
    rep = train_machine(model, gpu, layout, job, training_memory(model, gpu, layout, job))
    d = rep.to_dict()
    assert d["checkpoint_bytes"] == pytest.approx(rep.figures["checkpoint_bytes"])
    for key in ("dataset_bytes", "goodput", "wall_time_with_failures_s", "energy_kwh", "network_bytes_per_s_per_gpu"):
        assert key not in d
    assert d["cluster_mtbf_s"] > d["checkpoint_interval_s"] > 0


def test_storage_choice_is_the_estimate_table():
    from gpuplan.spec.choices import Storage, values

    assert tuple(mx.STORAGE_CLASSES) == values(Storage)


def test_serving_node_default_is_the_step_time_default():
    from gpuplan.estimate.steptime import StepAssumptions
    from gpuplan.plan.machine import DEFAULT_GPUS_PER_NODE

    assert StepAssumptions().gpus_per_node == DEFAULT_GPUS_PER_NODE
