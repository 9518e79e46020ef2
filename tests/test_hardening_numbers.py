"""Non-finite and out-of-range numbers on every numeric flag, and the classes of crash, hang and wrong
answer found by the bad-input campaign: a bad number is exit 2 with exactly one ``error:`` line; a good
one gives finite numbers everywhere (JSON and tables); MFU stays in (0, 1] at any context length; a huge
--global-batch never hangs; the annuity has its limit at tiny rates."""

from __future__ import annotations

import functools
import json
import math
import time

import pytest

from gpuplan.catalog import load_accelerators, load_models
from gpuplan.errors import GpuplanError
from gpuplan.estimate.flops import attended_span, flops_per_token
from gpuplan.estimate.memory import _divisors
from gpuplan.estimate.steptime import StepAssumptions, training_step
from gpuplan.estimate.tco import capital_recovery_factor
from gpuplan.spec.training import Parallelism, TrainingJob
from gpuplan.units import check_range, parse_bytes, parse_count, parse_duration, parse_usd, parse_usd_per_hour

BAD_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "9" * 500, "abc", "", "-1"]
HUGE = ["1e308", str(10**30), str(2**62)]
TINY = ["5e-324", "-0", "0"]

TRAIN = ["train", "llama-3.1-8b", "--gpu", "h100", "--zero", "3", "--gpus", "8", "--tokens", "1T"]
SERVE = ["serve", "llama-3.1-8b", "--gpu", "h100"]
TCO = ["tco", "--gpu", "h100"]

TRAIN_FLAGS = [
    "--gpus",
    "--tp",
    "--pp",
    "--cp",
    "--ep",
    "--etp",
    "--micro-batch",
    "--global-batch",
    "--seq-len",
    "--lora-rank",
    "--epochs",
    "--mfu",
    "--virtual-stages",
    "--tokens",
    "--usd-per-gpu-hour",
]
SERVE_FLAGS = [
    "--tp",
    "--pp",
    "--replicas",
    "--prompt-tokens",
    "--output-tokens",
    "--batch",
    "--concurrency",
    "--context",
    "--max-tpot",
    "--max-ttft",
    "--qps",
    "--qpm",
    "--usd-per-gpu-hour",
]
TCO_FLAGS = [
    "--gpus",
    "--years",
    "--life-years",
    "--utilization",
    "--purchase-usd-per-gpu",
    "--server-usd-per-gpu",
    "--pue",
    "--usd-per-kwh",
    "--hosting-usd-per-kw-month",
    "--staff-usd-per-gpu-year",
    "--cost-of-capital",
]


def _bad_input(code: int, out: str, err: str) -> str:
    """Exit 2, nothing on stdout, exactly one 'error:' line on stderr (warnings may come beside it)."""
    errors = [line for line in err.splitlines() if "error:" in line]
    assert code == 2, (code, err)
    assert len(errors) == 1 and errors[0].startswith("gpuplan: error: "), err
    assert "Traceback" not in err
    return errors[0]


def _finite_numbers(value, path="") -> None:
    """Every number of a JSON record is finite."""
    if isinstance(value, float):
        assert math.isfinite(value), path
    elif isinstance(value, dict):
        for k, v in value.items():
            _finite_numbers(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _finite_numbers(v, f"{path}[{i}]")


def _no_nonfinite_text(text: str) -> None:
    for word in ("nan", "inf"):
        assert f" {word} " not in f" {text.lower()} ".replace("\n", " "), text[:500]


# ------------------------------------------------------------------------------ bad numbers on every flag


@pytest.mark.parametrize("flag", TRAIN_FLAGS)
@pytest.mark.parametrize("value", BAD_NUMBERS + HUGE)
def test_train_refuses_bad_and_huge_numbers(run, flag, value):
    args = list(TRAIN)
    if flag == "--gpus":
        del args[args.index("--gpus") : args.index("--gpus") + 2]
    _bad_input(*run(*args, flag, value))


@pytest.mark.parametrize("value", BAD_NUMBERS + HUGE + ["0.5", "5e-324", "1ms"])
def test_train_deadline_refuses_bad_numbers(run, value):
    _bad_input(*run("train", "llama-3.1-8b", "--gpu", "h100", "--zero", "3", "--tokens", "1T", "--deadline", value))


@pytest.mark.parametrize(
    "flag",
    [
        "--gpus",
        "--tp",
        "--pp",
        "--cp",
        "--ep",
        "--etp",
        "--micro-batch",
        "--global-batch",
        "--seq-len",
        "--lora-rank",
        "--epochs",
        "--mfu",
        "--virtual-stages",
        "--tokens",
    ],
)
@pytest.mark.parametrize("value", TINY)
def test_train_refuses_zero_and_subnormal(run, flag, value):
    args = list(TRAIN)
    if flag == "--gpus":
        del args[args.index("--gpus") : args.index("--gpus") + 2]
    _bad_input(*run(*args, flag, value))


@pytest.mark.parametrize("flag", SERVE_FLAGS)
@pytest.mark.parametrize("value", BAD_NUMBERS + HUGE)
def test_serve_refuses_bad_and_huge_numbers(run, flag, value):
    _bad_input(*run(*SERVE, flag, value))


@pytest.mark.parametrize(
    "flag",
    [
        "--tp",
        "--pp",
        "--replicas",
        "--prompt-tokens",
        "--output-tokens",
        "--batch",
        "--concurrency",
        "--context",
        "--max-tpot",
        "--max-ttft",
        "--qps",
        "--qpm",
    ],
)
@pytest.mark.parametrize("value", TINY)
def test_serve_refuses_zero_and_subnormal(run, flag, value):
    _bad_input(*run(*SERVE, flag, value))


@pytest.mark.parametrize("flag", TCO_FLAGS)
@pytest.mark.parametrize("value", BAD_NUMBERS + HUGE)
def test_tco_refuses_bad_and_huge_numbers(run, flag, value):
    _bad_input(*run(*TCO, flag, value))


@pytest.mark.parametrize(
    "flag,value",
    [
        ("--gpus", "0"),
        ("--gpus", "-0"),
        ("--years", "0"),
        ("--years", "-0"),
        ("--life-years", "0"),
        ("--utilization", "0"),
        ("--utilization", "5e-324"),
        ("--utilization", "-0"),
        ("--pue", "0.5"),
        ("--cost-of-capital", "1.5"),
    ],
)
def test_tco_refuses_zero_and_out_of_range(run, flag, value):
    _bad_input(*run(*TCO, flag, value))


@pytest.mark.parametrize("args", [("gpus", "list", "--min-memory"), ("model", "show", "llama-3.1-8b", "--seq-len")])
@pytest.mark.parametrize("value", ["nan", "inf", "Infinity", "1e400", "-1", "abc", "9" * 500, "1e300GB"])
def test_list_and_show_refuse_bad_numbers(run, args, value):
    _bad_input(*run(*args, value))


@pytest.mark.parametrize(
    "item",
    [
        "cuda_context_bytes=1e308",
        "cuda_context_bytes=nan",
        "hbm_efficiency=5e-324",
        "matmul_efficiency=5e-324",
        "hbm_efficiency=nan",
        "link_efficiency=inf",
        "gpus_per_node=1e308",
        "gpus_per_node=" + str(10**30),
        "collective_latency_s=1e308",
        "optimizer_bytes_per_param=-0.5",
        "x=1e308",
        "hbm_efficiency=Infinity",
    ],
)
def test_train_assume_refuses_bad_numbers(run, item):
    _bad_input(*run(*TRAIN, "--assume", item))


@pytest.mark.parametrize(
    "item",
    [
        "compute_efficiency=5e-324",
        "max_num_seqs=1e308",
        "layer_overhead_s=nan",
        "cuda_graph_bytes=1e308",
        "memory_bandwidth_efficiency=inf",
    ],
)
def test_serve_assume_refuses_bad_numbers(run, item):
    _bad_input(*run(*SERVE, "--assume", item))


def test_messages_name_the_flag_and_the_range(run):
    line = _bad_input(*run(*TRAIN, "--mfu", "5e-324"))
    assert "--mfu" in line and "0.001" in line
    line = _bad_input(*run(*TCO, "--utilization", "5e-324"))
    assert "--utilization" in line and "0.001" in line
    line = _bad_input(*run(*SERVE, "--qpm", "5e-324"))
    assert "--qpm" in line
    assert "finite" in _bad_input(*run(*TCO, "--years", "nan"))


# ------------------------------------------------------------------------------ good numbers: finite results


@pytest.mark.parametrize(
    "extra",
    [
        (),
        ("--epochs", "1e6"),
        ("--epochs", "1e-9", "--tokens", "1e18"),
        ("--mfu", "0.001"),
        ("--mfu", "1"),
        ("--usd-per-gpu-hour", "0"),
        ("--usd-per-gpu-hour", "-0"),
        ("--usd-per-gpu-hour", "1e6"),
        ("--tokens", "1e18"),
        ("--assume", "collective_latency_s=1e15"),
        ("--assume", "optimizer_bytes_per_param=1e15"),
        ("--global-batch", str(2**40)),
        ("--global-batch", str(2**40 - 1)),
    ],
)
def test_train_good_numbers_give_finite_results(run, extra):
    args = list(TRAIN)
    if "--tokens" in extra:
        i = args.index("--tokens")
        del args[i : i + 2]
    code, out, err = run(*args, *extra, "--json")
    if code == 2:  # a range refused is fine (one line), a silent nan or inf is not
        _bad_input(code, out, err)
        return
    assert code in (0, 3), err
    rec = json.loads(out)
    _finite_numbers(rec)
    if "time" in rec:
        assert rec["time"]["seconds"] > 0 and rec["time"]["gpus"] >= 1 and 0 < rec["time"]["mfu"] <= 1
        assert rec["compute"]["total_flops"] > 0
        assert rec["cost"]["usd"] is None or rec["cost"]["usd"] >= 0


@pytest.mark.parametrize(
    "extra",
    [
        (),
        ("--qps", "1e9"),
        ("--qps", "1e-6"),
        ("--qpm", "1"),
        ("--usd-per-gpu-hour", "0"),
        ("--usd-per-gpu-hour", "1e6", "--qps", "1e9"),
        ("--max-tpot", "1us"),
        ("--max-ttft", "1000y"),
        ("--concurrency", str(2**40)),
        ("--batch", "1"),
        ("--assume", "layer_overhead_s=1e15", "--qps", "1e9", "--usd-per-gpu-hour", "1e6"),
    ],
)
def test_serve_good_numbers_give_finite_results(run, extra):
    code, out, err = run(*SERVE, *extra, "--json")
    if code == 2:
        _bad_input(code, out, err)
        return
    assert code in (0, 3), err
    rec = json.loads(out)
    _finite_numbers(rec)


@pytest.mark.parametrize(
    "extra",
    [
        (),
        ("--cost-of-capital", "1e-17"),
        ("--cost-of-capital", "5e-324"),
        ("--cost-of-capital", "0"),
        ("--cost-of-capital", "-0"),
        ("--cost-of-capital", "1"),
        ("--utilization", "0.001"),
        ("--years", "1000"),
        ("--life-years", "0.01"),
        ("--purchase-usd-per-gpu", "1e12"),
        ("--staff-usd-per-gpu-year", "1e12"),
        ("--pue", "10", "--usd-per-kwh", "100"),
        ("--gpus", str(2**20)),
    ],
)
def test_tco_good_numbers_give_finite_results(run, extra):
    code, out, err = run(*TCO, *extra, "--json")
    assert code == 0, err
    rec = json.loads(out)
    _finite_numbers(rec)
    assert rec["owned"]["usd_per_gpu_year"] > 0


@pytest.mark.parametrize("extra", [("--cost-of-capital", "1e-17"), ("--utilization", "0.001"), ()])
def test_tco_table_has_no_nan_or_inf(run, extra):
    code, out, err = run(*TCO, *extra)
    assert code == 0, err
    _no_nonfinite_text(out)


def test_table_output_checks_finiteness_too():
    """A record with a non-finite number is an error in table mode as well as under --json."""
    import click

    from gpuplan.cli._common import Ctx, emit as _emit

    ctx = click.Context(click.Command("x"), obj=Ctx((), False))
    for as_json in (False, True):
        with pytest.raises(GpuplanError, match=r"time\.seconds"):
            _emit(ctx, {"time": {"seconds": float("inf")}}, as_json, lambda r: "")
        with pytest.raises(GpuplanError, match=r"rows\.1"):
            _emit(ctx, {"rows": [1.0, float("nan")]}, as_json, lambda r: "")


# ------------------------------------------------------------------------------ hangs: every answer < 2 s


@pytest.mark.parametrize(
    "args",
    [
        TRAIN[:-2] + ["--tokens", "1T", "--deadline", "30d", "--global-batch", str(2**40)],
        TRAIN[:-2] + ["--tokens", "1T", "--deadline", "30d", "--global-batch", str(2**40 - 5)],
        TRAIN[:-2] + ["--tokens", "1T", "--deadline", "30d", "--global-batch", str(10**30)],
        TRAIN[:-2] + ["--tokens", "1T", "--deadline", "30d", "--global-batch", str(2**62)],
        TRAIN[:-4] + ["--gpus", "8", "--global-batch", str(2**40 - 8)],
        TRAIN[:-4] + ["--gpus", "8", "--global-batch", str(2**62)],
        TRAIN[:-4] + ["--tokens", "1T", "--deadline", "1s"],
        TRAIN[:-4] + ["--tokens", "1e18", "--deadline", "1000y"],
        SERVE + ["--max-tpot", "1us", "--assume", "max_num_seqs=1000000"],
    ],
)
def test_estimates_answer_fast(run, args):
    started = time.perf_counter()
    code, out, err = run(*_drop_gpus_with_deadline(args), "--json")
    assert time.perf_counter() - started < 2.0
    assert code in (0, 2, 3) and "Traceback" not in err
    if code == 2:
        _bad_input(code, out, err)


def _drop_gpus_with_deadline(args):
    args = list(args)
    if "--deadline" in args and "--gpus" in args:
        i = args.index("--gpus")
        del args[i : i + 2]
    return args


@pytest.mark.parametrize(
    "n",
    [
        1,
        12,
        49,
        2**10 * 3**5 * 7,
        2**40,
        2**40 - 1,
        2**62,
        10**30,
        2**61 - 1,
        (2**31 - 1) * (2**61 - 1),
        3**60,
        600851475143,
    ],
)
def test_divisors_are_exact_and_fast(n):
    started = time.perf_counter()
    divisors = _divisors(n)
    assert time.perf_counter() - started < 0.5
    assert divisors == sorted(set(divisors)) and divisors[0] == 1 and divisors[-1] == n
    assert all(n % d == 0 for d in divisors)
    if n < 10**6:
        assert divisors == [d for d in range(1, n + 1) if n % d == 0]
    assert all(n // d in divisors for d in divisors[:64])  # divisors pair up


# ------------------------------------------------------------------------------ MFU in (0, 1] at any context


@functools.cache
def _catalogs():
    """The bundled catalogs, read on first use (never at import: tests/test_isolation.py)."""
    return load_models(), load_accelerators()


@pytest.mark.parametrize("model", ["llama-3.2-1b", "llama-3.1-8b", "mistral-7b-v0.1", "deepseek-v3"])
@pytest.mark.parametrize("seq", [2048, 32768, 131072, 1_048_576])
@pytest.mark.parametrize("flash", [True, False])
@pytest.mark.parametrize("efficiency", ["default", "perfect"])
def test_long_context_mfu_stays_in_unit_interval(model, seq, flash, efficiency):
    """The MFU numerator and the step time count causal attention the same way, so MFU <= 1 even when
    attention dominates and every efficiency is set to 1."""
    models, accs = _catalogs()
    if model not in {m.id for m in models}:
        pytest.skip(f"{model} not in the catalog")
    spec = models.get(model)
    a = (
        StepAssumptions()
        if efficiency == "default"
        else StepAssumptions(
            matmul_efficiency=1.0,
            flash_attention_efficiency=1.0,
            hbm_efficiency=1.0,
            link_efficiency=1.0,
            model_shape_factor=1.0,
        )
    )
    cp = 8 if flash else 1
    job = TrainingJob(seq_len=seq, flash_attention=flash, global_batch=8)
    for gpu in ("a100-sxm-80gb", "h100", "b200"):
        step = training_step(spec, accs.get(gpu), Parallelism(gpus=8 * cp, cp=cp), job, a)
        assert 0 < step.mfu <= 1, (model, seq, gpu, step.mfu)
        assert math.isfinite(step.iteration_s) and step.iteration_s > 0


def test_long_context_reproducer_plans_and_ranks(run):
    """The campaign's reproducer: 131072 tokens on cp 8 plans (exit 0, MFU <= 1) and keeps its offers in --rank."""
    base = [
        "train",
        "llama-3.2-1b",
        "--gpu",
        "a100-sxm-80gb",
        "--gpus",
        "64",
        "--cp",
        "8",
        "--seq-len",
        "131072",
        "--tokens",
        "100B",
    ]
    code, out, err = run(*base, "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert 0 < rec["time"]["mfu"] <= 1
    assert "causal" in rec["compute"]["convention"]
    code, out, err = run(*base, "--rank", "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["options"] and not any("MFU" in c.get("reason", "") for c in rec["cannot_run"])


@pytest.mark.parametrize("seq,window", [(1, None), (4096, None), (4096, 4096), (4096, 1024), (10**6, 4096), (7, 8)])
def test_causal_span_is_half_the_full_span_without_a_window(seq, window):
    full = attended_span(seq, window)
    causal = attended_span(seq, window, causal=True)
    assert 0 < causal <= full
    if window is None or seq <= window:
        assert causal == pytest.approx(seq / 2)
    else:  # the mean of min(t, w) over [0, T]
        assert causal == pytest.approx((window**2 / 2 + (seq - window) * window) / seq)


def test_causal_flops_below_noncausal_and_model_show_unchanged():
    spec = _catalogs()[0].get("llama-3.1-8b")
    full, causal = flops_per_token(spec, 8192), flops_per_token(spec, 8192, causal=True)
    assert causal.forward_matmul_flops == full.forward_matmul_flops
    assert causal.forward_attention_flops == pytest.approx(full.forward_attention_flops / 2)
    assert 3 * full.forward_attention_flops == 12 * 32 * 32 * 128 * 8192  # PaLM's term, as model show prints it


# ------------------------------------------------------------------------------ the annuity and the parsers


@pytest.mark.parametrize("rate", [0.0, 5e-324, 1e-300, 1e-17, 1e-12, 1e-10, 1e-9, 1e-6, 0.08, 1.0])
@pytest.mark.parametrize("years", [0.01, 1, 5, 100])
def test_capital_recovery_factor_is_finite_and_continuous(rate, years):
    crf = capital_recovery_factor(rate, years)
    assert math.isfinite(crf) and crf >= 1 / years - 1e-12
    if rate * years > 1e-6:
        assert crf == pytest.approx(rate / (1 - (1 + rate) ** -years), rel=1e-9)
    else:  # the limit: straight-line 1/n, plus r (n + 1) / (2n)
        assert crf == pytest.approx(1 / years, rel=1e-5)


@pytest.mark.parametrize("parse", [parse_count, parse_bytes, parse_duration, parse_usd, parse_usd_per_hour])
@pytest.mark.parametrize(
    "value", ["nan", "inf", "Infinity", "-inf", "1e400", "9" * 500, float("nan"), float("inf"), 10**400, -1]
)
def test_parsers_refuse_non_finite(parse, value):
    with pytest.raises(GpuplanError):
        parse(value)


@pytest.mark.parametrize("parse", [parse_bytes, parse_usd, parse_usd_per_hour])
def test_parsers_read_minus_zero_as_zero(parse):
    assert math.copysign(1.0, parse("-0")) == 1.0


@pytest.mark.parametrize(
    "value,ok",
    [
        (0.5, True),
        (1.0, True),
        (0.0, False),
        (float("nan"), False),
        (float("inf"), False),
        (2, False),
        (True, False),
        ("1", False),
    ],
)
def test_check_range(value, ok):
    if ok:
        assert check_range(value, "x", 0.0, 1.0, low_open=True) == value
    else:
        with pytest.raises(GpuplanError):
            check_range(value, "x", 0.0, 1.0, low_open=True)
