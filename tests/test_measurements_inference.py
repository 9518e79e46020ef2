"""Serving estimates against decoding measured on real GPUs (docs/measurements/inference_*.json, recorded by
scripts/measure_inference.py; the analysis is docs/measurements/inference.md).

The recording runs Hugging Face transformers with a StaticCache: its torch.compile rows are gpuplan's
``--engine hf``. The "hf-cuda-graph" rows replay HF's eager kernels from a CUDA graph, a setup no engine
profile describes, so only their memory (the eager prefill's peak, the same in every row) is compared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplan.catalog import load_accelerators, load_models

MEASUREMENTS = Path(__file__).resolve().parent.parent / "docs" / "measurements"

INFERENCE = sorted(MEASUREMENTS.glob("inference_*.json"))

#: TPOT of the torch.compile rows: within 15 % (the three rows sit at -7, -4 and +2 %).
TPOT_REL = 0.15
#: Peak allocated memory: within 10 % (issue #5's bound; the 15 rows sit within 5 %).
MEMORY_REL = 0.10
#: TTFT where the prefill is compute-bound (at least this many prompt tokens in the batch): within 20 %. Below
#: it the recording's eager prefill is bound by Python dispatch (22 ms for 128 tokens of a 1B model against
#: 15 ms for 2,048), which no engine profile describes.
TTFT_MIN_TOKENS = 16384
TTFT_REL = 0.20


def _rows(keep):
    out = []
    for path in INFERENCE:
        rec = json.loads(path.read_text())
        for row in rec["rows"]:
            if "measured" in row and keep(row):
                name = f"{path.stem}:{row['model']}-b{row['batch']}-p{row['prompt_tokens']}"
                out.append(pytest.param(rec, row, id=name))
    return out


def _estimate(rec, row, engine: str = "hf"):
    """gpuplan's plan for the recorded run. The script's StaticCache holds prompt + 3 x steps + 16 tokens
    (scripts/measure_inference.py ``max_len``: the eager, graph and compiled steps each write their own), and a
    static cache is attended in full, so the plan's sequence is that long."""
    from gpuplan.estimate.inference import serving_plan
    from gpuplan.spec.serving import ServingJob, ServingLayout

    steps = row["measured"]["decode_steps"]
    return serving_plan(
        load_models().get(row["model"]),
        load_accelerators().get(rec["gpu_id"]),
        ServingLayout(),
        ServingJob(
            prompt_tokens=row["prompt_tokens"],
            output_tokens=3 * steps + 16,
            batch=row["batch"],
            engine=engine,
        ),
    )


COMPILE_ROWS = _rows(lambda row: row["engine"] == "torch-compile")
MEMORY_ROWS = _rows(lambda row: "max_memory_allocated_bytes" in row["measured"])
TTFT_ROWS = _rows(lambda row: row["batch"] * row["prompt_tokens"] >= TTFT_MIN_TOKENS)


@pytest.mark.skipif(not COMPILE_ROWS, reason="no torch.compile recording in docs/measurements")
@pytest.mark.parametrize("rec,row", COMPILE_ROWS or [pytest.param(None, None, id="none")])
def test_hf_tpot_within_tolerance_of_torch_compile(rec, row):
    r = _estimate(rec, row)
    assert r.tpot_s == pytest.approx(row["measured"]["tpot_s"], rel=TPOT_REL)


@pytest.mark.skipif(not MEMORY_ROWS, reason="no GPU inference recordings in docs/measurements")
@pytest.mark.parametrize("rec,row", MEMORY_ROWS or [pytest.param(None, None, id="none")])
def test_memory_within_tolerance_of_max_allocated(rec, row):
    """The allocator's view: weights + KV + workspace (gpuplan's CUDA context lives outside the allocator).
    The peak is the eager prefill of the whole batch, so the workspace holds every prompt's activations."""
    r = _estimate(rec, row)
    allocator = r.parts["weights"] + r.parts["kv_cache"] + r.parts["activations_workspace"]
    assert allocator == pytest.approx(row["measured"]["max_memory_allocated_bytes"], rel=MEMORY_REL)


@pytest.mark.skipif(not TTFT_ROWS, reason="no GPU inference recordings in docs/measurements")
@pytest.mark.parametrize("rec,row", TTFT_ROWS or [pytest.param(None, None, id="none")])
def test_hf_ttft_within_tolerance_where_compute_bound(rec, row):
    r = _estimate(rec, row)
    assert r.ttft_s == pytest.approx(row["measured"]["ttft_s"], rel=TTFT_REL)


def test_the_gqa_copy_is_what_separates_hf_from_the_compiled_profile_at_large_batch():
    """Batch 64 x 2,136 tokens of Llama 3.1 8B: 17.9 GB of KV. The hf profile moves it (1 + 2 x 4) times
    (repeat_kv), gpt-fast's once; the measured 46 ms sits with the first (inference_compiled_h200.json)."""
    from gpuplan.estimate.inference import gqa_expansion

    spec = load_models().get("llama-3.1-8b")
    assert gqa_expansion(spec, "hf") == 9.0
    for engine in ("compiled", "vllm", "sglang", "trtllm", "tgi", "llama.cpp"):
        assert gqa_expansion(spec, engine) == 1.0
    assert gqa_expansion(load_models().get("llama-2-7b"), "hf") == 1.0  # MHA: nothing to copy
    rec = json.loads((MEASUREMENTS / "inference_compiled_h200.json").read_text())
    row = next(r for r in rec["rows"] if r["batch"] == 64)
    hf, gpt_fast = _estimate(rec, row, "hf").tpot_s, _estimate(rec, row, "compiled").tpot_s
    measured = row["measured"]["tpot_s"]
    assert abs(hf / measured - 1) < TPOT_REL < abs(gpt_fast / measured - 1)


@pytest.mark.parametrize(
    "kw, says",
    [
        (dict(engine="hf", concurrency=64), "runs one static batch"),
        (dict(engine="hf", batch=8, weights="gguf-q4_k_m"), "llama.cpp's format"),
    ],
)
def test_hf_engine_refuses_what_it_does_not_do(kw, says):
    """Review of 2026-11-27: --engine hf accepted --concurrency (and printed continuous batching) and GGUF weights."""
    from gpuplan import api
    from gpuplan.errors import GpuplanError

    with pytest.raises(GpuplanError, match=says):
        api.serve("llama-3.1-8b", gpu="h200", prompt_tokens=512, output_tokens=64, **kw)


def test_hf_prefill_has_the_eager_host_floor():
    """generate() prefills uncompiled: a short prompt's prefill takes the host's dispatch of every layer
    (HF_EAGER_HOST_S_PER_LAYER x layers, from kernel_counts_h200.json), and the measured 8B TTFT of a 128-token
    prompt on the H200 (26.0 ms) is within 10 % of it; gpt-fast's compiled prefill has no such floor."""
    from gpuplan.estimate.inference import HF_EAGER_HOST_S_PER_LAYER, prefill_s
    from gpuplan.spec.serving import ServingJob, ServingLayout

    spec, gpu = load_models().get("llama-3.1-8b"), load_accelerators().get("h200-sxm-141gb")
    from gpuplan.estimate.inference import InferenceAssumptions, assumptions_for

    def ttft(engine):
        job = ServingJob(prompt_tokens=128, output_tokens=8, batch=1, engine=engine)
        return prefill_s(spec, gpu, ServingLayout(), job, assumptions_for(job, InferenceAssumptions(), gpu), 1, 128)

    floor = HF_EAGER_HOST_S_PER_LAYER * spec.layers
    assert ttft("hf") == pytest.approx(floor, rel=1e-12)
    assert ttft("hf") == pytest.approx(26.04e-3, rel=0.10)
    assert ttft("compiled") < floor / 2
