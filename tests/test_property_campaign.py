"""Property tests over generated inputs (the hardening issue's part 5).

For every generated case: the exit code is 0, 2 or 3 (valid inputs 0 or 3, invalid ones 2); no traceback
(the in-process runner lets an unexpected exception escape, which fails the test); a bad input is exactly one
`gpuplan: error:` line on stderr and nothing on stdout; `--json` output parses and holds only finite numbers;
and the answers keep their invariants:
- a plan fits exactly when its itemized total is within capacity;
- a predicted MFU is in (0, 1];
- cost = GPU-hours x price;
- a fleet is at least one replica when qps > 0;
- under ZeRO-3, more GPUs never mean more memory per GPU.
"""

from __future__ import annotations

import json
import math
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import BUNDLED_ACCELERATORS, BUNDLED_MODELS

HANG_GUARD_S = 10.0  # a generous bound that only a hang (or a quadratic blow-up) can exceed
FAST = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def _numbers(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        yield path, x


def check(run, args):
    """Run one invocation and assert the exit-code contract; the parsed JSON record on 0/3, else None."""
    t0 = time.monotonic()
    code, out, err = run(*args)
    assert time.monotonic() - t0 < HANG_GUARD_S, ("slow", args)
    assert code in (0, 2, 3), (args, code, err)
    assert "Traceback" not in err, (args, err)
    if code == 2:
        lines = [ln for ln in err.strip().splitlines() if not ln.startswith("gpuplan: warning:")]
        assert len(lines) == 1 and lines[0].startswith("gpuplan: error: "), (args, err)
        assert out == "", (args, out)
        return None
    if "--json" in args:
        record = json.loads(out)
        for path, value in _numbers(record):
            assert math.isfinite(value), (args, path, value)
        return record
    return None


# --------------------------------------------------------------------------------------- odd numbers

ODD_TEXT = [
    "nan",
    "NaN",
    "-nan",
    "inf",
    "Infinity",
    "-inf",
    "1e400",
    "-1e400",
    "1e308",
    "-1e308",
    "5e-324",
    "-5e-324",
    "0",
    "-0",
    "0.0",
    "-1",
    "1e-300",
    "1e30",
    "1" + "0" * 400,
    "-" + "9" * 50,
    "0x10",
    "1_000",
    " 7",
    "7 ",
    "",
    " ",
    "1e",
    "e5",
    "++1",
    "1/0",
    "1e296B",
    "1e308T",
    "0.5",
    "2**64",
    "18446744073709551617",
    "9" * 5000,
]


def odd_numbers():
    return st.one_of(
        st.sampled_from(ODD_TEXT),
        st.integers(min_value=-(2**80), max_value=2**80).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.floats(min_value=1e-320, max_value=1e-300).map(repr),
    )


TRAIN_NUMERIC = [
    "--gpus",
    "--tp",
    "--pp",
    "--cp",
    "--ep",
    "--etp",
    "--zero",
    "--micro-batch",
    "--global-batch",
    "--seq-len",
    "--lora-rank",
    "--tokens",
    "--epochs",
    "--mfu",
    "--deadline",
    "--usd-per-gpu-hour",
    "--virtual-stages",
]
SERVE_NUMERIC = [
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
TCO_NUMERIC = ["--gpus", "--years", "--utilization", "--usd-per-kwh", "--pue", "--cost-of-capital"]
ASSUME_NAMES = [
    "cuda_context_bytes",
    "allocator_reserve_fraction",
    "memory_bandwidth_efficiency",
    "compute_efficiency",
    "link_efficiency",
    "engine_step_overhead_s",
    "x",
]


@st.composite
def odd_invocations(draw):
    command = draw(st.sampled_from(["train", "serve", "tco"]))
    if command == "tco":
        args = ["tco", "--gpu", draw(st.sampled_from(["h100", "a100-sxm-80gb", "b200"]))]
        flags = TCO_NUMERIC
    else:
        args = [
            command,
            draw(st.sampled_from(["llama-3.1-8b", "mixtral-8x7b", "7B", "gpt2"])),
            "--gpu",
            draw(st.sampled_from(["h100", "a100-sxm-80gb", "l4"])),
        ]
        flags = TRAIN_NUMERIC if command == "train" else SERVE_NUMERIC
        if command == "train" and draw(st.booleans()):
            args += ["--tokens", "1T"]
    for flag in draw(st.lists(st.sampled_from(flags), min_size=1, max_size=3, unique=True)):
        args += [flag, draw(odd_numbers())]
    if command != "tco" and draw(st.booleans()):
        args += ["--assume", f"{draw(st.sampled_from(ASSUME_NAMES))}={draw(odd_numbers())}"]
    return args + ["--json"] * draw(st.booleans())


@FAST
@given(odd_invocations())
def test_odd_numbers_on_every_numeric_flag(run, args):
    check(run, args)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "Infinity", "-1", "0"])
@pytest.mark.parametrize(
    "flag,base",
    [
        ("--mfu", ["train", "llama-3.1-8b", "--gpu", "h100", "--tokens", "1T"]),
        ("--epochs", ["train", "llama-3.1-8b", "--gpu", "h100", "--tokens", "1T"]),
        ("--tokens", ["train", "llama-3.1-8b", "--gpu", "h100"]),
        ("--usd-per-gpu-hour", ["train", "llama-3.1-8b", "--gpu", "h100", "--tokens", "1T"]),
        ("--qps", ["serve", "llama-3.1-8b", "--gpu", "h100"]),
        ("--years", ["tco", "--gpu", "h100"]),
        ("--utilization", ["tco", "--gpu", "h100"]),
    ],
)
def test_non_finite_or_non_positive_is_one_error_line(run, flag, base, value):
    """Values that can never be right for these flags: exit 2 with one line, in table and JSON output."""
    for extra in ([], ["--json"]):
        code, out, err = run(*base, flag, value, *extra)
        if value == "0" and flag in ("--qps", "--usd-per-gpu-hour"):
            check(run, [*base, flag, value, *extra])  # zero load or a free cluster may be legitimate questions
            continue
        assert code == 2, (flag, value, extra, out[-300:], err)
        check(run, [*base, flag, value, *extra])


# ------------------------------------------------------------------------------------ valid layouts

DENSE = ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.1", "gemma-2-9b"]


@st.composite
def valid_train(draw):
    model = draw(st.sampled_from(DENSE))
    spec = BUNDLED_MODELS.get(model)
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if spec.attention_heads % t == 0 and spec.kv_heads % t == 0]))
    pp = draw(st.sampled_from([p for p in (1, 2, 4) if spec.layers % p == 0]))
    dp = draw(st.integers(1, 8))
    zero = draw(st.integers(0, 3)) if dp > 1 else 0
    mb = draw(st.integers(1, 8))
    args = [
        "train",
        model,
        "--gpu",
        draw(st.sampled_from(["h100", "a100-sxm-80gb", "h200", "l40s"])),
        "--gpus",
        str(tp * pp * dp),
        "--tp",
        str(tp),
        "--pp",
        str(pp),
        "--zero",
        str(zero),
        "--micro-batch",
        str(mb),
        "--seq-len",
        str(draw(st.sampled_from([512, 2048, 4096, 8192]))),
        "--recompute",
        draw(st.sampled_from(["none", "selective", "full"])),
    ]
    if tp > 1 and draw(st.booleans()):
        args.append("--sequence-parallel")
    tokens = draw(st.sampled_from([None, "1B", "300B", "15T"]))
    price = draw(st.sampled_from([None, 0.5, 2.0, 9.75]))
    if tokens:
        args += ["--tokens", tokens]
        if price is not None:
            args += ["--usd-per-gpu-hour", str(price)]
    return args + ["--json"], price if tokens else None


@FAST
@given(valid_train())
def test_valid_training_plans_answer_with_their_invariants(run, case):
    args, price = case
    code, _out, err = run(*args)
    assert code in (0, 3), (args, err)  # a valid plan is answered, fitting or not
    rec = check(run, args)
    mem = rec["memory"]
    assert mem["fits"] == (mem["total_bytes"] <= mem["capacity_bytes"]), mem
    assert (code == 3) == (not mem["fits"])
    parts = sum(mem[f"{g}_bytes"] for g in ("weights", "gradients", "optimizer", "activations", "other"))
    assert parts == pytest.approx(mem["total_bytes"], abs=8)
    if "time" in rec:
        assert 0 < rec["time"]["mfu"] <= 1, rec["time"]
        if price is not None:
            assert rec["cost"]["usd"] == pytest.approx(rec["time"]["gpu_hours"] * price, rel=1e-9)


@st.composite
def valid_serve(draw):
    model = draw(st.sampled_from(DENSE + ["mixtral-8x7b"]))
    spec = BUNDLED_MODELS.get(model)
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if spec.attention_heads % t == 0]))
    qps = draw(st.sampled_from([0.01, 0.5, 3.0, 40.0, 900.0]))
    args = [
        "serve",
        model,
        "--gpu",
        draw(st.sampled_from(["h100", "a100-sxm-80gb", "l40s", "h200"])),
        "--tp",
        str(tp),
        "--prompt-tokens",
        str(draw(st.sampled_from([16, 512, 2048]))),
        "--output-tokens",
        str(draw(st.sampled_from([16, 256, 1024]))),
        "--qps",
        str(qps),
        "--json",
    ]
    return args, qps


@FAST
@given(valid_serve())
def test_valid_serving_plans_size_a_fleet(run, case):
    args, qps = case
    code, _out, err = run(*args)
    assert code in (0, 3), (args, err)
    rec = check(run, args)
    if rec["memory"]["fits"]:
        assert rec["fleet"]["replicas"] >= 1 and rec["fleet"]["gpus"] >= 1, rec["fleet"]
        assert rec["fleet"]["qps"] == pytest.approx(qps)


@settings(max_examples=40, deadline=None)
@given(
    model=st.sampled_from(DENSE + ["mixtral-8x7b", "llama-3.1-70b"]),
    n=st.sampled_from([2, 4, 8, 16, 64, 512]),
    mb=st.integers(1, 4),
    recompute=st.sampled_from(["none", "selective", "full"]),
)
def test_zero3_more_gpus_never_more_memory_per_gpu(model, n, mb, recompute):
    from gpuplan.estimate.memory import training_memory
    from gpuplan.spec.training import Parallelism, TrainingJob

    spec, gpu = BUNDLED_MODELS.get(model), BUNDLED_ACCELERATORS.get("h100")
    job = TrainingJob(micro_batch=mb, seq_len=2048, recompute=recompute)
    few = training_memory(spec, gpu, Parallelism(gpus=n, zero=3), job, find_max_batch=False)
    more = training_memory(spec, gpu, Parallelism(gpus=2 * n, zero=3), job, find_max_batch=False)
    assert more.total_bytes <= few.total_bytes


# ------------------------------------------------------------------------------ generated files

LLAMA = {
    "model_type": "llama",
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "rms_norm_eps": 1e-5,
}
ODD_VALUES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.none(),
    st.booleans(),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
RAW_TOKENS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 330]


@st.composite
def config_texts(draw):
    cfg = dict(LLAMA)
    for key in draw(
        st.lists(
            st.sampled_from(
                sorted(LLAMA) + ["num_local_experts", "num_experts_per_tok", "q_lora_rank", "head_dim", "text_config"]
            ),
            max_size=3,
            unique=True,
        )
    ):
        cfg[key] = draw(ODD_VALUES)
    text = json.dumps(cfg)
    if draw(st.booleans()):  # raw JSON constants json.dumps would not write
        key = draw(
            st.sampled_from(sorted(k for k in cfg if k != "model_type" and k in LLAMA and cfg[k] == LLAMA[k]))
            if any(cfg[k] == LLAMA[k] for k in LLAMA if k != "model_type")
            else "x"
        )
        text = text.replace(f'"{key}": {json.dumps(cfg[key])}', f'"{key}": {draw(st.sampled_from(RAW_TOKENS))}', 1)
    if draw(st.integers(0, 9)) == 0:
        text = "[" * 100_000 + "]" * 100_000  # nesting deep enough for a RecursionError in a naive reader
    return text


@FAST
@given(config_texts(), st.sampled_from(["model-show", "train", "serve"]))
def test_generated_config_json(run, tmp_path_factory, text, command):
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_text(text)
    if command == "model-show":
        args = ["model", "show", str(path), "--json"]
    else:
        args = [command, str(path), "--gpu", "h100", "--json"]
    rec = check(run, args)
    if rec is not None and command == "model-show":
        assert rec["model"]["params"] >= 1


ACC_NUMBERS = {"memory_bytes": "80e9", "memory_bandwidth_bytes_per_s": "3.35e12", "year": "2024"}
ACC_PEAKS = {"bf16": "989.5e12", "fp32": "67e12"}


@st.composite
def accelerator_files(draw):
    """A one-entry accelerator JSON catalog with odd names (markup) and odd numbers written raw."""

    def num(value):
        return draw(st.one_of(st.just(value), st.sampled_from(RAW_TOKENS + ["-1", "0", '"x"', "[]", "1e-320"])))

    name = json.dumps(draw(st.sampled_from(["My card", "My card [/]", "[bold]x", "[link=http://x]a", "a\\x[/b]"])))
    numbers = ", ".join(f'"{k}": {num(v)}' for k, v in ACC_NUMBERS.items())
    peaks = ", ".join(f'"{k}": {num(v)}' for k, v in ACC_PEAKS.items())
    return (
        '{"schema_version": 1, "accelerator": [{"id": "my-card", "name": ' + name + ', "vendor": "nvidia", '
        '"architecture": "X", "form_factor": "PCIe", "memory_type": "GDDR6", ' + numbers + ", "
        '"peak_flops_per_s": {' + peaks + "}, "
        '"sources": {"default": {"title": "t", "url": "https://example.com", "date": "2024-01"}}}]}'
    )


@FAST
@given(accelerator_files())
def test_generated_accelerator_catalog(run, tmp_path_factory, text):
    path = tmp_path_factory.mktemp("cat") / "mine.json"
    path.write_text(text)
    for args in (
        ["--catalog", str(path), "gpus", "list", "--json"],
        ["--catalog", str(path), "gpus", "list"],
        ["--catalog", str(path), "gpus", "show", "my-card"],
    ):
        code, out, _err = run(*args)
        check(run, args)
        if code == 0 and args[-1] == "my-card":
            name = json.loads(text)["accelerator"][0]["name"]
            assert name in " ".join(out.split()) or name[:8] in out, (name, out)  # printed literally
