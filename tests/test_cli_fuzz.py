"""Random `train` and `serve` invocations: never a traceback (exit 0, 2 or 3), and every number in a
successful --json record finite and non-negative."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings, strategies as st

MODELS = [
    "llama-3.1-8b",
    "mixtral-8x7b",
    "deepseek-v3",
    "gpt2",
    "falcon-7b",
    "gemma-2-9b",
    "7B",
    "qwen3-30b-a3b",
    "opt-350m",
    "mistral-7b-v0.1",
    "phi-2",
    "nope",
]
GPUS = ["h100", "a100-sxm-80gb", "k80", "tpu-v5p", "l4", "mi300x", "b200", "t4", "a100", "x"]
INTS = ["0", "1", "2", "3", "4", "8", "16", "64", "-1", "abc", "100000"]
TRAIN = {
    "--gpus": INTS,
    "--tp": INTS,
    "--pp": INTS,
    "--cp": INTS,
    "--ep": INTS,
    "--etp": INTS,
    "--zero": ["0", "1", "2", "3", "4"],
    "--micro-batch": INTS,
    "--global-batch": INTS,
    "--seq-len": ["128", "4096", "131072", "0"],
    "--recompute": ["none", "selective", "full"],
    "--precision": ["fp32", "bf16", "fp8-mixed", "fp16-mixed"],
    "--optimizer": ["adamw", "adafactor", "adamw-8bit"],
    "--method": ["full", "lora", "qlora"],
    "--offload": ["none", "optimizer", "params"],
    "--tokens": ["1T", "1", "x", "1e30"],
    "--epochs": ["1", "nan"],
    "--mfu": ["0.4", "2"],
    "--deadline": ["30d", "1ms"],
    "--usd-per-gpu-hour": ["2", "x"],
}
SERVE = {
    "--tp": INTS,
    "--pp": INTS,
    "--weights": ["bf16", "fp8", "int8", "int4-awq", "gguf-q4_k_m", "x"],
    "--kv-cache": ["bf16", "fp8"],
    "--prompt-tokens": INTS,
    "--output-tokens": INTS,
    "--batch": INTS,
    "--concurrency": INTS,
    "--context": INTS,
    "--max-tpot": ["50ms", "x"],
    "--qps": ["1", "0", "1e12"],
    "--usd-per-gpu-hour": ["2", "x"],
    "--engine": ["server", "compiled"],
}


@st.composite
def invocations(draw):
    command = draw(st.sampled_from(["train", "serve"]))
    flags = TRAIN if command == "train" else SERVE
    args = [command, draw(st.sampled_from(MODELS)), "--gpu", draw(st.sampled_from(GPUS))]
    for flag in draw(st.lists(st.sampled_from(sorted(flags)), max_size=4, unique=True)):
        args += [flag, draw(st.sampled_from(flags[flag]))]
    return args + ["--json"]


def _numbers(x):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from ((f"{k}.{p}", n) for p, n in _numbers(v))
    elif isinstance(x, list):
        for v in x:
            yield from _numbers(v)
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        yield "", x


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(invocations())
def test_random_invocations(run, args):
    code, out, err = run(*args)
    assert code in (0, 2, 3) and "Traceback" not in err, (args, err)
    if code == 0:
        for path, value in _numbers(json.loads(out)):
            assert math.isfinite(value) and (value >= 0 or "saves" in path), (args, path, value)
