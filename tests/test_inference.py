"""Inference estimates against published figures (src/gpuplan/data/validation/inference.json).

Tolerances are the issue's: KV-cache bytes and the MBU example exactly; gpt-fast decode tokens/s within
15 % each, with one set of defaults; Databricks TTFT and static-batch throughput within 25 %.
Which rows calibrated which default is stated in the assumption's source (InferenceAssumptions).
"""

from __future__ import annotations

import re

import pytest

from conftest import BUNDLED_ACCELERATORS, BUNDLED_MODELS
from gpuplan.errors import JobError
from gpuplan.estimate.inference import decode_mbu, kv_bytes_per_token, kv_cache_bytes, serving_plan, weight_bytes
from gpuplan.spec.serving import ServingJob, ServingLayout
from gpuplan.units import GiB

MODELS = BUNDLED_MODELS
ACCS = BUNDLED_ACCELERATORS


def rec(validation, rid):
    return next(r for r in validation("inference")["records"] if r["id"] == rid)


def val(record, metric):
    return next(v["value"] for v in record["values"] if v["metric"] == metric)


@pytest.mark.parametrize(
    "rid,mid",
    [
        ("kv-formula-llama31-8b", "llama-3.1-8b"),
        ("kv-formula-llama31-70b", "llama-3.1-70b"),
        ("kv-formula-llama31-405b", "llama-3.1-405b"),
        ("kv-formula-llama2-7b", "llama-2-7b"),
        ("kv-formula-deepseek-v3-mla", "deepseek-v3"),
    ],
)
def test_kv_bytes_per_token_exactly(validation, rid, mid):
    r = rec(validation, rid)
    metric = "cache_bytes_per_token" if "mla" in rid else "kv_bytes_per_token"
    assert kv_bytes_per_token(MODELS.get(mid), "bf16") == val(r, metric)
    if "mla" not in rid:
        assert kv_cache_bytes(MODELS.get(mid), 131072, "bf16") / GiB == val(r, "kv_for_131072_tokens")


def test_kv_llama2_70b_databricks_table(validation):
    r = rec(validation, "databricks-kv-cache-llama2-70b")
    spec = MODELS.get("llama-2-70b")
    for batch in (1, 16, 32, 64):
        for dtype, key in (("fp16", "fp16"), ("int8", "int8")):
            got = batch * kv_cache_bytes(spec, 1024, dtype) / GiB
            assert got == pytest.approx(val(r, f"kv_cache_bs{batch}_{key}"), rel=0.005)  # printed 0.312 for 0.3125


def test_kv_opt13b_vllm(validation):
    r = rec(validation, "vllm-opt13b-kv-cache")
    assert kv_bytes_per_token(MODELS.get("opt-13b"), "fp16") == val(r, "kv_bytes_per_token_formula")
    assert kv_cache_bytes(MODELS.get("opt-13b"), 2048, "fp16") / 1e9 == pytest.approx(1.6, rel=0.05)  # '1.6 GB'


def test_mbu_worked_example(validation):
    """7B in 16-bit at 14 ms per token on a 2 TB/s device: 1 TB/s achieved, MBU 50 %."""
    r = rec(validation, "databricks-mbu-worked-example")
    assert decode_mbu(14e9, 0.0, val(r, "time_per_output_token") / 1e3, 2e12) == pytest.approx(val(r, "mbu") / 100)


GPT_FAST = [
    ("gptfast-a100-7b-bf16", "llama-2-7b", "bf16", 1),
    ("gptfast-a100-7b-int8", "llama-2-7b", "int8", 1),
    ("gptfast-a100-7b-int4", "llama-2-7b", "int4-g32", 1),
    ("gptfast-a100-70b-int8", "llama-2-70b", "int8", 1),
    ("gptfast-a100-70b-int4", "llama-2-70b", "int4-g32", 1),
    ("gptfast-a100-7b-tp2", "llama-2-7b", "bf16", 2),
    ("gptfast-a100-7b-tp4", "llama-2-7b", "bf16", 4),
    ("gptfast-a100-7b-tp8", "llama-2-7b", "bf16", 8),
    ("gptfast-a100-70b-tp2", "llama-2-70b", "bf16", 2),
    ("gptfast-a100-70b-tp4", "llama-2-70b", "bf16", 4),
]


@pytest.mark.parametrize("rid,mid,fmt,tp", GPT_FAST, ids=[g[0] for g in GPT_FAST])
def test_gpt_fast_decode_tokens_per_s(validation, rid, mid, fmt, tp):
    """gpt-fast: batch 1, 5-token prompt, torch.compile + CUDA graphs (--engine compiled), A100 80GB."""
    r = serving_plan(
        MODELS.get(mid),
        ACCS.get("a100-sxm-80gb"),
        ServingLayout(tp=tp),
        ServingJob(weights=fmt, prompt_tokens=5, output_tokens=200, batch=1, engine="compiled"),
    )
    assert 1 / r.tpot_s == pytest.approx(val(rec(validation, rid), "decode_tokens_per_second"), rel=0.15)


def test_gpt_fast_mean_error_below_5_percent(validation):
    errors = []
    for rid, mid, fmt, tp in GPT_FAST:
        r = serving_plan(
            MODELS.get(mid),
            ACCS.get("a100-sxm-80gb"),
            ServingLayout(tp=tp),
            ServingJob(weights=fmt, prompt_tokens=5, output_tokens=200, batch=1, engine="compiled"),
        )
        errors.append(abs(1 / r.tpot_s / val(rec(validation, rid), "decode_tokens_per_second") - 1))
    assert sum(errors) / len(errors) < 0.05


TTFT = [
    ("databricks-ttft-mpt7b-1xa100-40gb", "mpt-7b", 1),
    ("databricks-ttft-mpt7b-2xa100-40gb", "mpt-7b", 2),
    ("databricks-ttft-mpt7b-4xa100-40gb", "mpt-7b", 4),
    ("databricks-ttft-llama270b-4xa100-40gb", "llama-2-70b", 4),
    ("databricks-ttft-llama270b-8xa100-40gb", "llama-2-70b", 8),
]  # -23 %: the closest to the bound


@pytest.mark.parametrize("rid,mid,tp", TTFT)
def test_databricks_ttft(validation, rid, mid, tp):
    r = serving_plan(
        MODELS.get(mid),
        ACCS.get("a100-sxm-40gb"),
        ServingLayout(tp=tp),
        ServingJob(prompt_tokens=512, output_tokens=64, batch=1),
    )
    assert r.ttft_s * 1e3 == pytest.approx(val(rec(validation, rid), "time_to_first_token"), rel=0.25)


@pytest.mark.parametrize(
    "rid,gpu",
    [
        ("databricks-mpt7b-static-batch-throughput-1xa10", "a10"),
        ("databricks-mpt7b-static-batch-throughput-1xa100", "a100-sxm-40gb"),
    ],
)
def test_databricks_static_batch_throughput(validation, rid, gpu):
    """MPT-7B, 512 input + 64 output tokens, static batches 1-64: requests/s within 25 %."""
    r = rec(validation, rid)
    checked = 0
    for v in r["values"]:
        if v["metric"].startswith("requests_per_second_batch_"):
            batch = int(v["metric"].rsplit("_", 1)[1])
            plan = serving_plan(
                MODELS.get("mpt-7b"),
                ACCS.get(gpu),
                ServingLayout(),
                ServingJob(prompt_tokens=512, output_tokens=64, batch=batch),
            )
            assert plan.requests_per_s == pytest.approx(v["value"], rel=0.25), batch
            checked += 1
    assert checked >= 4


# ------------------------------------------------------------------------------------- properties


@pytest.mark.parametrize("mid", ["llama-3.1-8b", "mistral-7b-v0.1", "deepseek-v3", "gemma-2-9b", "mixtral-8x7b"])
def test_kv_linear_in_context_and_batch(mid):
    spec = MODELS.get(mid)
    one = kv_cache_bytes(spec, 1024, "bf16")
    assert kv_cache_bytes(spec, 2048, "bf16") <= 2 * one + 1e-6  # windows cap it; never more than linear
    if not spec.sliding_window:
        assert kv_cache_bytes(spec, 2048, "bf16") == 2 * one
    assert kv_cache_bytes(spec, 1024, "fp8") == one / 2
    r1 = serving_plan(
        spec, ACCS.get("h200"), ServingLayout(tp=8 if spec.moe else 1), ServingJob(batch=1, weights="fp8")
    )
    r4 = serving_plan(
        spec, ACCS.get("h200"), ServingLayout(tp=8 if spec.moe else 1), ServingJob(batch=4, weights="fp8")
    )
    assert r4.parts["kv_cache"] == pytest.approx(4 * r1.parts["kv_cache"])


def test_sliding_window_caps_the_cache():
    spec = MODELS.get("mistral-7b-v0.1")  # 4096-token window on every layer
    assert kv_cache_bytes(spec, 32768, "bf16") == kv_cache_bytes(spec, 4096, "bf16")


def test_chunked_attention_layers_hold_at_most_one_chunk():
    """Llama 4: 3 of every 4 layers attend within 8,192-token chunks, so at 131,072 tokens the cache is
    (12 x 131,072 + 36 x 8,192) tokens of layers, not 48 x 131,072 (exact, no tolerance)."""
    spec = MODELS.get("llama-4-scout-17b-16e")
    assert (spec.attention_chunk, spec.chunked_layers, spec.layers) == (8192, 36, 48)
    per_layer_token = kv_bytes_per_token(spec, "bf16") / spec.layers
    assert kv_cache_bytes(spec, 131072, "bf16") == per_layer_token * (12 * 131072 + 36 * 8192)
    # below one chunk every layer holds every token
    assert kv_cache_bytes(spec, 4096, "bf16") == kv_bytes_per_token(spec, "bf16") * 4096


def pytest_generate_tests(metafunc):
    """Every built-in architecture as a parameter, read at collection (after conftest isolated the environment)."""
    if "builtin_model_id" in metafunc.fixturenames:
        metafunc.parametrize("builtin_model_id", sorted(m.id for m in MODELS if getattr(m, "layers", 0)))


def test_bf16_weight_bytes_are_twice_the_exact_parameter_count(builtin_model_id):
    """Every parameter transformers builds is held: biases (Qwen2's q/k/v, gpt-oss's experts and router), q/k
    norms, MLA's latent norms and attention sinks included (exact to one byte)."""
    from gpuplan.estimate.params import count_params
    from gpuplan.spec.model import ModelSpec

    spec = MODELS.get(builtin_model_id)
    if not isinstance(spec, ModelSpec):
        pytest.fail(f"{builtin_model_id} is not an architecture")
    assert weight_bytes(spec, "bf16", ServingLayout()).total == pytest.approx(2 * count_params(spec).total, abs=1)


@pytest.mark.parametrize("mid,fmt", [("qwen2.5-7b", "int4-awq"), ("gpt-oss-120b", "mxfp4")])
def test_biases_stay_16bit_beside_quantized_matrices(mid, fmt):
    """Dropping the biases (qkv for Qwen2; experts and router for gpt-oss) takes exactly 2 bytes per bias
    parameter off the weights, whatever the format of the matrices."""
    import dataclasses

    from gpuplan.estimate.params import count_params

    spec = MODELS.get(mid)
    if spec.moe is not None:
        moe = dataclasses.replace(spec.moe, expert_bias=False, router_bias=False)
        plain = dataclasses.replace(spec, moe=moe, qkv_bias=False, o_bias=False)
    else:
        plain = dataclasses.replace(spec, qkv_bias=False)
    biases = count_params(spec).total - count_params(plain).total
    assert biases > 0
    diff = weight_bytes(spec, fmt, ServingLayout()).total - weight_bytes(plain, fmt, ServingLayout()).total
    assert diff == pytest.approx(2 * biases, rel=1e-9)


@pytest.mark.parametrize("mid", ["llama-3.1-8b", "qwen2.5-7b", "gemma-2-9b"])
def test_quantized_weights_are_smaller_and_tp_never_raises_memory(mid):
    spec = MODELS.get(mid)
    # int8's per-channel scales make it a hair larger than fp8; AWQ keeps embeddings and head in fp16, so on
    # these models it is larger than GGUF Q4_K_M, which quantizes them too
    sizes = [
        weight_bytes(spec, f, ServingLayout()).total
        for f in ("bf16", "int8", "fp8", "gguf-q6_k", "int4-awq", "gguf-q4_k_m")
    ]
    assert sizes == sorted(sizes, reverse=True)
    totals = [
        serving_plan(spec, ACCS.get("h100"), ServingLayout(tp=t), ServingJob(batch=8)).total_bytes for t in (1, 2, 4)
    ]
    assert totals == sorted(totals, reverse=True)


def test_kv_heads_fewer_than_tp_are_replicated():
    spec = MODELS.get("llama-3.1-70b")  # 8 KV heads
    assert kv_cache_bytes(spec, 1000, "bf16", tp=16) == kv_cache_bytes(spec, 1000, "bf16", tp=8)


def test_max_concurrent_sequences_and_slo_batch():
    spec, gpu = MODELS.get("llama-3.1-8b"), ACCS.get("h100")
    r = serving_plan(spec, gpu, ServingLayout(), ServingJob(prompt_tokens=1000, output_tokens=1000, max_tpot_s=0.03))
    assert 1 <= r.batch <= r.max_concurrent_sequences and r.tpot_s <= 0.03
    above = serving_plan(
        spec, gpu, ServingLayout(), ServingJob(prompt_tokens=1000, output_tokens=1000, concurrency=r.batch + 1)
    )
    assert above.tpot_s > 0.03 or r.batch == r.max_concurrent_sequences
    # a continuous batch plans its KV at mean occupancy: prompt + half the output, in 16-token blocks
    assert r.kv_tokens_per_sequence == 1504
    kv_seq = kv_cache_bytes(spec, 1504, "bf16")
    free = r.planning_bytes - (r.total_bytes - r.parts["kv_cache"])
    assert r.max_concurrent_sequences == int(free // kv_seq)


@pytest.mark.parametrize(
    "kw,fragment",
    [
        (dict(weights="int3"), "--weights must be one of"),
        (dict(batch=2, concurrency=4), "not both"),
        (dict(context=100), "shorter than prompt + output"),
        (dict(kv_cache="fp4"), "--kv-cache"),
        (dict(prompt_tokens=0), "--prompt-tokens"),
    ],
)
def test_bad_serving_jobs(kw, fragment):
    with pytest.raises(JobError, match=re.escape(fragment)):
        ServingJob(**kw)


def test_fp8_needs_hardware_and_context_fits():
    with pytest.raises(JobError, match="no fp8"):
        serving_plan(MODELS.get("llama-3.1-8b"), ACCS.get("a100-sxm-80gb"), ServingLayout(), ServingJob(weights="fp8"))
    # a little beyond the context: a warning (RoPE extension); beyond 4x the context: refused
    r = serving_plan(
        MODELS.get("gpt2"), ACCS.get("h100"), ServingLayout(), ServingJob(prompt_tokens=1000, output_tokens=100)
    )
    assert any("context length" in n for n in r.notes)
    with pytest.raises(JobError, match="context length"):
        serving_plan(
            MODELS.get("gpt2"), ACCS.get("h100"), ServingLayout(), ServingJob(prompt_tokens=4000, output_tokens=100)
        )


def test_gpus_without_16bit_tensor_cores_use_fp32():
    r = serving_plan(MODELS.get("llama-3.2-1b"), ACCS.get("k80"), ServingLayout(), ServingJob(batch=1))
    assert r.tpot_s > 0 and r.ttft_s > 0


def test_pipeline_parallel_does_not_cut_latency():
    spec, gpu = MODELS.get("llama-3.1-70b"), ACCS.get("h100")
    tpot = [
        serving_plan(spec, gpu, ServingLayout(pp=p), ServingJob(batch=1, engine="compiled")).tpot_s for p in (1, 2, 4)
    ]
    assert tpot == sorted(tpot)  # stages run in turn: pipelining buys memory, not speed


def test_serve_rejects_tp_that_does_not_divide_heads():
    with pytest.raises(JobError, match="must divide"):
        serving_plan(MODELS.get("llama-3.1-8b"), ACCS.get("h100"), ServingLayout(tp=3), ServingJob())


def test_cached_weight_bytes_follow_tp_pp_and_format():
    """weight_bytes is cached on (spec, format, tp, pp): each of them still changes the answer once the cache is warm
    (TP divides the whole; PP keeps the busier stage; int4 holds under half of bf16)."""
    spec = BUNDLED_MODELS.get("llama-3.1-70b")
    one = weight_bytes(spec, "bf16", ServingLayout()).total
    assert weight_bytes(spec, "bf16", ServingLayout(tp=4)).total == pytest.approx(one / 4, rel=1e-12)
    # 80 layers in two stages of 40, the embedding on the first and the (untied, same-size) LM head on the last
    assert weight_bytes(spec, "bf16", ServingLayout(pp=2)).total == pytest.approx(one / 2, rel=1e-3)
    assert weight_bytes(spec, "int4-awq", ServingLayout()).total < one / 2
    assert weight_bytes(spec, "bf16", ServingLayout(replicas=3)).total == one  # replicas do not split a replica


def test_step_s_matches_serving_plan_tpot():
    """The step bound once per plan (serving_plan) and the public step_s agree: a continuous batch's unloaded TPOT
    is one mixed step at the running sequences and the others' prompt tokens (serving_plan's docstring)."""
    from gpuplan.estimate.inference import assumptions_for, step_s

    spec = BUNDLED_MODELS.get("llama-3.1-70b")
    gpu = BUNDLED_ACCELERATORS.get("h100-sxm")
    layout = ServingLayout(tp=4)
    job = ServingJob(engine="vllm", weights="fp8", concurrency=32)
    r = serving_plan(spec, gpu, layout, job)
    a = assumptions_for(job, None, gpu)
    b = r.running_sequences
    tpot, _ = step_s(spec, gpu, layout, job, a, b, 512 + 256 // 2, (b - 1) * 512 / 256, 512)
    assert r.tpot_s == pytest.approx(tpot, rel=1e-12)


def test_hf_engine_moves_the_kv_cache_nine_times_per_decode_step():
    """--engine hf (transformers + StaticCache): each extra sequence adds its whole static cache times
    (1 + 2 g) to a memory-bound step (repeat_kv: read, write the g-fold copy, read it), g = 4 for Llama 3 8B;
    the engines that read grouped K/V in place add it once, at the mean context."""
    from gpuplan.estimate.inference import InferenceAssumptions, decode_step_s

    spec, gpu = MODELS.get("llama-3.1-8b"), ACCS.get("h200-sxm-141gb")
    a = InferenceAssumptions()
    bandwidth = a.memory_bandwidth_efficiency * gpu.memory_bandwidth_bytes_per_s
    job = ServingJob(prompt_tokens=2048, output_tokens=88, batch=64, engine="hf")
    t64, bound = decode_step_s(spec, gpu, ServingLayout(), job, a, 64, 2048 + 44)
    t1, _ = decode_step_s(spec, gpu, ServingLayout(), job, a, 1, 2048 + 44)
    assert bound == "memory"
    kv = kv_cache_bytes(spec, 2048 + 88, "bf16")  # the whole cache, not the mean context
    assert t64 - t1 == pytest.approx(63 * 9 * kv / bandwidth, rel=1e-9)
    vllm = ServingJob(prompt_tokens=2048, output_tokens=88, batch=64, engine="vllm")
    v64 = decode_step_s(spec, gpu, ServingLayout(), vllm, a, 64, 2048 + 44)[0]
    v1 = decode_step_s(spec, gpu, ServingLayout(), vllm, a, 1, 2048 + 44)[0]
    assert v64 - v1 == pytest.approx(63 * kv_cache_bytes(spec, 2048 + 44, "bf16") / bandwidth, rel=1e-9)


def test_hf_prefill_runs_the_head_once_and_every_masked_score():
    """A compute-bound prefill: transformers keeps the last position's logits (the LM head runs once per
    sequence, not per token) but attends the whole static cache under a mask (every score, no causal half);
    gpt-fast's profile (compiled) runs the head on every token and counts the causal half."""
    from gpuplan.estimate.flops import attention_flops_forward
    from gpuplan.estimate.inference import (
        DENSE_LAYER_KERNELS,
        GQA_EXPAND_KERNELS,
        HF_EXTRA_KERNELS,
        InferenceAssumptions,
        gemm_peak_flops_per_s,
        prefill_s,
    )

    spec, gpu = MODELS.get("llama-3.2-1b"), ACCS.get("h200-sxm-141gb")
    a = InferenceAssumptions()
    batch, prompt, output = 64, 2048, 88
    jobs = {
        e: ServingJob(prompt_tokens=prompt, output_tokens=output, batch=batch, engine=e) for e in ("hf", "compiled")
    }
    t = {e: prefill_s(spec, gpu, ServingLayout(), j, a, batch, prompt) for e, j in jobs.items()}
    peak = a.compute_efficiency * gemm_peak_flops_per_s(gpu, jobs["hf"])
    head = spec.vocab_size * spec.hidden_size
    tokens = batch * prompt
    extra_attention = tokens * (
        attention_flops_forward(spec, prompt + output) - attention_flops_forward(spec, prompt, causal=True)
    )
    # and its layers run 4 + 2 more kernels of the fixed per-layer latency (layer_kernels)
    launches = spec.layers * a.layer_overhead_s * (HF_EXTRA_KERNELS + GQA_EXPAND_KERNELS) / DENSE_LAYER_KERNELS
    expected = (extra_attention - (tokens - batch) * 2 * head) / peak + launches
    assert t["hf"] - t["compiled"] == pytest.approx(expected, rel=1e-6)
    assert t["hf"] < t["compiled"]  # for this 1B model the tied 262M-parameter head outweighs the masked scores
