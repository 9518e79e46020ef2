"""Serving accuracy (issue #14): packed prefill, engine profiles, FP4 weights, KV planning at mean occupancy.

The error bounds are the ones reached on the bundled validation files (``gpuplan validate --category
inference``), with a little headroom, so a regression fails here.
"""

from __future__ import annotations

import statistics

import pytest

import gpuplan
from conftest import BUNDLED_ACCELERATORS, BUNDLED_MODELS
from gpuplan.estimate.inference import (
    ENGINE_PROFILES,
    InferenceAssumptions,
    assumptions_for,
    cost_per_million,
    engine_profile,
    fleet_for,
    prefill_s,
    serving_plan,
    weight_bytes,
)
from gpuplan.estimate.quant import WEIGHT_FORMATS, bytes_per_param
from gpuplan.spec.choices import Engine, values
from gpuplan.spec.serving import ServingJob, ServingLayout

MODELS = BUNDLED_MODELS
ACCS = BUNDLED_ACCELERATORS


@pytest.fixture(scope="module")
def inference_rows():
    report = gpuplan.validate(category="inference")
    return report.rows, report.summary()["inference"]


# ------------------------------------------------------------------------------------------ error bounds


def _mae(rows, pred):
    errors = [abs(r.error) for r in rows if pred(r)]
    assert errors
    return statistics.fmean(errors)


def test_error_bounds_reached(inference_rows):
    rows, summary = inference_rows
    by_q = summary["quantity"]
    assert summary["all"]["count"] >= 110
    assert by_q["output_tokens_per_s_total"]["mae"] <= 0.08  # was 10.4 % before packing
    assert by_q["requests_per_s_total"]["mae"] <= 0.05
    # throughput of the continuous and static runs together (output tokens/s and requests/s)
    assert _mae(rows, lambda r: r.case.quantity in ("output_tokens_per_s_total", "requests_per_s_total")) <= 0.065
    # decode latency (TPOT/ITL and tokens/s per user) outside FP4 (the FP4 rows: see the report's open items)
    decode = ("tpot_s", "decode_tokens_per_s_per_user")
    assert _mae(rows, lambda r: r.case.quantity in decode and r.case.precision not in ("nvfp4", "mxfp4")) <= 0.10
    # TTFT, the closed-loop rows included (NIM c100/c250 against ttft_s + queue_wait_s: -94/-99.5 % before the
    # wait was added and TensorRT-LLM's slots reserved the whole output)
    assert _mae(rows, lambda r: r.case.quantity == "ttft_s") <= 0.21
    c250 = next(r for r in rows if r.case.id.endswith("c250#ttft_ms_mean"))
    assert abs(c250.error) <= 0.15
    # vLLM on an A100 steps 2048 tokens (its V1 server default there): gpt-oss-20b 4000/200 TPOT was +141 % at 8192
    long = next(r for r in rows if r.case.id == "gpustack-vllm0110-gptoss20b-1xa100-long#tpot_ms_mean")
    assert abs(long.error) <= 0.15
    assert summary["stack"]["nim"]["mae"] <= 0.15  # was 30.8 %, then 22 %
    assert summary["stack"]["gpt-fast"]["mae"] <= 0.03
    assert summary["stack"]["databricks"]["mae"] <= 0.06


def test_measured_runs_fit(inference_rows):
    """The NIM runs at concurrency 50/100/250 were "does not fit" when every sequence reserved its prompt and
    whole output; with paged KV at mean occupancy the server runs what fits and queues the rest."""
    _, summary = inference_rows
    assert summary["all"]["does_not_fit"] == 0


# ------------------------------------------------------------------------------------------------ packing


def _old_style_input_cost(spec, gpu, job, report, usd):
    """$ per million input tokens if each prompt took a step of its own (the model before packing)."""
    a = assumptions_for(job)
    alone = prefill_s(spec, gpu, ServingLayout(), job, a, 1, job.prompt_tokens)
    return usd / 3600 * alone / job.prompt_tokens * 1e6


def test_packed_prompts_are_cheaper_than_a_step_each():
    spec, gpu = MODELS.get("llama-3-8b"), ACCS.get("h100-sxm-80gb")
    job = ServingJob(prompt_tokens=2000, output_tokens=200, engine="vllm")
    r = serving_plan(spec, gpu, ServingLayout(), job)
    cost = cost_per_million(r, ServingLayout(), job, 2.0)
    assert cost["usd_per_million_input_tokens"] < _old_style_input_cost(spec, gpu, job, r, 2.0)
    assert 0 < r.prefill_share < 1
    assert r.prefill_tokens_per_step == pytest.approx((r.running_sequences - 1) * 2000 / 200)


def test_packing_sizes_a_smaller_fleet_than_a_prompt_per_step():
    """Requests per second with packed prompts beat a replica that spends a whole step per prompt."""
    spec, gpu = MODELS.get("llama-3-8b"), ACCS.get("h100-sxm-80gb")
    job = ServingJob(prompt_tokens=2000, output_tokens=200, concurrency=64, engine="vllm")
    r = serving_plan(spec, gpu, ServingLayout(), job)
    a = assumptions_for(job)
    one_step_each = 1 / (prefill_s(spec, gpu, ServingLayout(), job, a, 1, 2000) + 200 * r.tpot_s / 64)
    assert r.requests_per_s > one_step_each
    fleet = fleet_for(r, ServingLayout(), job, 40.0)
    assert fleet.replicas == -(-40.0 // r.requests_per_s)
    assert fleet.replicas < -(-40.0 // one_step_each)


def test_itl_grows_with_the_prompts_packed_beside_it():
    spec, gpu = MODELS.get("llama-3.1-70b"), ACCS.get("h100-sxm-80gb")
    lay = ServingLayout(tp=2)
    tpot = [
        serving_plan(
            spec, gpu, lay, ServingJob(weights="fp8", prompt_tokens=5000, output_tokens=500, concurrency=c)
        ).tpot_s
        for c in (1, 5, 25)
    ]
    assert tpot[0] < tpot[1] < tpot[2]


def test_token_budget_limits_the_running_batch():
    spec, gpu = MODELS.get("llama-3-8b"), ACCS.get("h100-sxm-80gb")
    job = ServingJob(prompt_tokens=8000, output_tokens=10, concurrency=200, engine="vllm")
    r = serving_plan(spec, gpu, ServingLayout(), job)
    # B + (B - 1) x 800 <= 8192 -> about 11 sequences at once
    assert r.running_sequences == pytest.approx((8192 + 800) / 801)
    assert any("token budget" in n for n in r.notes)


# ------------------------------------------------------------------------------------------ engine profiles


def test_engine_choices_come_from_the_enum():
    assert set(values(Engine)) == {"server", "vllm", "sglang", "trtllm", "tgi", "llama.cpp", "compiled", "hf"}
    assert set(ENGINE_PROFILES) | {"server"} == set(values(Engine))
    assert engine_profile("server") is ENGINE_PROFILES["vllm"]


@pytest.mark.parametrize(
    "engine,gpu,overhead,seqs,budget",
    [
        # vLLM V1 server: 1024 / 8192 on >= 70 GiB GPUs other than the A100, else 256 / 2048
        ("vllm", "h100-sxm-80gb", 4e-3, 1024, 8192),
        ("server", "mi300x", 4e-3, 1024, 8192),
        ("vllm", "a100-sxm-80gb", 4e-3, 256, 2048),
        ("vllm", "l40s", 4e-3, 256, 2048),
        # SGLang chunked_prefill_size by memory: < 35 GiB 2048, < 160 GiB 8192, above 16384
        ("sglang", "h100-sxm-80gb", 0.0, 0, 8192),
        ("sglang", "rtx-4090", 0.0, 0, 2048),
        ("sglang", "b200", 0.0, 0, 16384),
        ("trtllm", "h100-sxm-80gb", 0.0, 2048, 8192),
        ("tgi", "h100-sxm-80gb", 4e-3, 0, 4096),
        ("llama.cpp", "rtx-4090", 0.0, 1, 2048),
        ("compiled", "a100-sxm-80gb", 0.0, 0, 10**7),
    ],
)
def test_engine_profile_defaults(engine, gpu, overhead, seqs, budget):
    job = ServingJob(engine=engine)
    unresolved = assumptions_for(job)
    assert unresolved.max_num_seqs is None and unresolved.prefill_chunk_tokens is None  # filled per GPU
    a = assumptions_for(job, gpu=ACCS.get(gpu))
    assert a.engine_step_overhead_s == overhead
    assert a.max_num_seqs == seqs
    assert a.prefill_chunk_tokens == budget
    assert engine_profile(engine).source


def test_engine_defaults_follow_the_gpu_under_assume():
    """An --assume of one field leaves the others at the engine's rule for the planned GPU (vLLM on an A100:
    2048 tokens per step), and a whole-number assumption stays a whole number."""
    r = gpuplan.serve("llama-3-8b", gpu="a100-sxm-80gb", engine="vllm", assume={"max_num_seqs": "300"})
    used = {x.name: x.value for x in r.serving.assumptions}
    assert used["prefill_chunk_tokens"] == 2048 and used["max_num_seqs"] == 300
    assert isinstance(used["max_num_seqs"], int)


def test_profiles_are_overridable_with_assume():
    r = gpuplan.serve(
        "llama-3-8b",
        gpu="h100-sxm-80gb",
        engine="sglang",
        concurrency=8,
        assume={"engine_step_overhead_s": 0.002, "prefill_chunk_tokens": 2048},
    )
    used = {x.name: x.value for x in r.serving.assumptions}
    assert used["engine_step_overhead_s"] == 0.002 and used["prefill_chunk_tokens"] == 2048


def test_trtllm_sizes_the_batch_from_kv_memory():
    spec, gpu = MODELS.get("llama-3-8b"), ACCS.get("h100-sxm-80gb")
    job = ServingJob(prompt_tokens=128, output_tokens=128, engine="trtllm")
    r = serving_plan(spec, gpu, ServingLayout(), job)
    assert r.batch == min(2048, r.max_concurrent_sequences) and r.batch > 1024
    v = serving_plan(spec, gpu, ServingLayout(), ServingJob(prompt_tokens=128, output_tokens=128, engine="vllm"))
    assert v.batch == 1024
    a100 = serving_plan(
        spec,
        ACCS.get("a100-sxm-80gb"),
        ServingLayout(),
        ServingJob(prompt_tokens=128, output_tokens=128, engine="vllm"),
    )
    assert a100.batch == 256


def test_trtllm_reserves_the_whole_output_per_slot():
    """GUARANTEED_NO_EVICT: a TensorRT-LLM slot holds prompt + whole output; vLLM's paged KV the mean P + O/2."""
    spec, gpu = MODELS.get("llama-3.1-70b"), ACCS.get("h100-sxm-80gb")
    lay = ServingLayout(tp=2)
    kw = dict(weights="fp8", kv_cache="fp8", prompt_tokens=5000, output_tokens=500, concurrency=100)
    t = serving_plan(spec, gpu, lay, ServingJob(engine="trtllm", **kw))
    v = serving_plan(spec, gpu, lay, ServingJob(engine="vllm", **kw))
    assert t.kv_tokens_per_sequence == 5500
    assert v.kv_tokens_per_sequence == 5264  # 5000 + 250, rounded up to a 16-token block


def test_trtllm_logits_buffer_and_build_time_workspace_take_kv_room():
    """TensorRT-LLM holds max_batch_size x vocab float32 logits and sizes its activations at max_num_tokens before
    the KV pool takes 0.9 of what is free: 2048 x 128,256 x 4 B = 1.05 GB on each TP rank, and the workspace
    of an 8,192-token step whatever the prompt; vLLM keeps neither part."""
    spec, gpu = MODELS.get("llama-3.1-70b"), ACCS.get("h100-sxm-80gb")
    lay = ServingLayout(tp=2)
    kw = dict(weights="fp8", kv_cache="fp8", prompt_tokens=5000, output_tokens=500, concurrency=100)
    t = serving_plan(spec, gpu, lay, ServingJob(engine="trtllm", **kw))
    v = serving_plan(spec, gpu, lay, ServingJob(engine="vllm", **kw))
    assert t.parts["logits_buffer"] == 2048 * spec.vocab_size * 4
    assert "logits_buffer" not in v.parts
    short = serving_plan(spec, gpu, lay, ServingJob(engine="trtllm", **{**kw, "prompt_tokens": 500}))
    assert short.parts["activations_workspace"] == t.parts["activations_workspace"]  # sized at the budget
    # 91 slots of 5,500 tokens: the ~2.3 GB the two parts and the larger workspace take cost 2 slots of 93
    assert t.max_concurrent_sequences == 91
    capped = serving_plan(spec, gpu, lay, ServingJob(engine="trtllm", **kw), InferenceAssumptions(max_num_seqs=256))
    assert capped.parts["logits_buffer"] == 256 * spec.vocab_size * 4
    assert capped.max_concurrent_sequences > t.max_concurrent_sequences


def test_mla_decode_attends_over_the_latent():
    """Absorbed MLA: 2 (2 x 512 + 64) FLOPs per head and context token for DeepSeek-V3, not 2 (192 + 128)."""
    from gpuplan.estimate.flops import attention_flops_forward
    from gpuplan.estimate.inference import decode_attention_flops

    spec = MODELS.get("deepseek-v3")
    ratio = decode_attention_flops(spec, 4096) / attention_flops_forward(spec, 4096)
    assert ratio == pytest.approx(1088 / 320)
    dense = MODELS.get("llama-3-8b")
    assert decode_attention_flops(dense, 4096) == attention_flops_forward(dense, 4096)


def test_sglang_overhead_zero_holds_on_a_held_out_source():
    """SGLang's step overhead is 0 (overlap scheduler). The SGLang cookbook's gpt-oss batch-1/8 ITLs (not scored:
    the page does not say H100 or H200) bracket the prediction at 0: within 15 % on an H200, 16-28 % slow on an
    H100 since the MoE block's kernels count (MOE_EXTRA_KERNELS: +0.8 ms over 36 layers; without them H100 was
    4-11 % slow and H200 11-19 % fast); the ~6 ms that would have fit the Qwen/H20 rows of the validation set puts
    them 48-210 % off, so those rows' gap is not a step overhead (it was the tensor tile floor, ``tile_floor_s``)."""
    published = {
        ("gpt-oss-120b", 1, 1024): 4.73e-3,
        ("gpt-oss-120b", 8, 1024): 10.17e-3,
        ("gpt-oss-20b", 1, 1024): 3.29e-3,
    }
    for overhead, lo, hi in ((0.0, -0.15, 0.30), (0.006, 0.45, 2.5)):
        for gpu in ("h100-sxm-80gb", "h200-sxm-141gb"):
            for (model, batch, prompt), itl in published.items():
                r = gpuplan.serve(
                    model,
                    gpu=gpu,
                    weights="mxfp4",
                    engine="sglang",
                    batch=batch,
                    prompt_tokens=prompt,
                    output_tokens=1024,
                    assume={"engine_step_overhead_s": overhead},
                )
                assert lo <= r.serving.tpot_s / itl - 1 <= hi, (overhead, gpu, model, batch)


# ---------------------------------------------------------------------------------------------------- FP4


def test_fp4_bits_per_parameter():
    assert WEIGHT_FORMATS["nvfp4"].bits_per_param == 4.5  # e2m1 + one e4m3 scale per 16
    assert WEIGHT_FORMATS["mxfp4"].bits_per_param == 4.25  # e2m1 + one e8m0 scale per 32
    assert bytes_per_param("nvfp4") == pytest.approx(0.5625)


def test_fp4_weight_bytes_dense_and_moe():
    dense = MODELS.get("llama-3-8b")
    bf16 = weight_bytes(dense, "bf16", ServingLayout()).total
    nv = weight_bytes(dense, "nvfp4", ServingLayout()).total
    assert 0.28 < nv / bf16 < 0.40  # linear layers at 4.5 bits, embeddings and head in 16-bit
    moe = MODELS.get("deepseek-v3")
    mx = weight_bytes(moe, "mxfp4", ServingLayout(tp=8))
    nvm = weight_bytes(moe, "nvfp4", ServingLayout(tp=8))
    assert mx.experts == pytest.approx(nvm.experts * 4.25 / 4.5)
    assert mx.total > mx.experts  # mxfp4 leaves attention in bf16 (gpt-oss layout)


def test_fp4_computes_in_fp4_on_blackwell_only():
    from gpuplan.estimate.inference import compute_dtype

    assert compute_dtype("nvfp4", ACCS.get("b200")) == "fp4"
    assert compute_dtype("nvfp4", ACCS.get("h100-sxm-80gb")) == "bf16"
    assert compute_dtype("mxfp4", ACCS.get("a100-sxm-80gb")) == "bf16"


def test_fp4_records_are_scored(inference_rows):
    rows, _ = inference_rows
    assert any(r.case.precision == "nvfp4" for r in rows)


# ------------------------------------------------------------------------------------------------ KV plan


def test_continuous_plans_kv_at_mean_occupancy():
    spec, gpu = MODELS.get("llama-3.1-70b"), ACCS.get("h100-sxm-80gb")
    lay = ServingLayout(tp=2)
    cont = serving_plan(
        spec, gpu, lay, ServingJob(weights="fp8", prompt_tokens=5000, output_tokens=500, concurrency=250)
    )
    assert cont.fits
    assert cont.kv_tokens_per_sequence == 5264  # 5000 + 250, rounded up to a 16-token block
    assert cont.batch < 250 and any("wait in the queue" in n for n in cont.notes)
    static = serving_plan(spec, gpu, lay, ServingJob(weights="fp8", prompt_tokens=5000, output_tokens=500, batch=8))
    assert static.kv_tokens_per_sequence == 5500


def test_context_guard_warns_then_refuses():
    spec, gpu = MODELS.get("llama-3-8b"), ACCS.get("rtx-4090")
    r = serving_plan(spec, gpu, ServingLayout(), ServingJob(prompt_tokens=8192, output_tokens=8192, batch=1))
    assert any("beyond" in n and "context length" in n for n in r.notes)
    from gpuplan.errors import JobError

    with pytest.raises(JobError, match="context length"):
        serving_plan(spec, gpu, ServingLayout(), ServingJob(prompt_tokens=30000, output_tokens=8192, batch=1))


# ------------------------------------------------------------------- tensor-core tiles, llama.cpp prefill


def _cluster_mae(rows, prefix, quantity=None):
    return _mae(rows, lambda r: r.case.record.startswith(prefix) and (quantity is None or r.case.quantity == quantity))


def test_mma_min_rows_by_architecture_and_kernel():
    from gpuplan.estimate.inference import mma_min_rows

    assert mma_min_rows("bf16", ACCS.get("h20")) == 64  # wgmma m64nNk16
    assert mma_min_rows("fp8", ACCS.get("h100-sxm-80gb")) == 64
    assert mma_min_rows("nvfp4", ACCS.get("b200")) == 64  # tcgen05.mma
    assert mma_min_rows("bf16", ACCS.get("a100-sxm-80gb")) == 16  # mma.sync m16n8k16
    assert mma_min_rows("int4-awq", ACCS.get("h20")) == 16  # weight-only kernels stay on mma.sync
    assert mma_min_rows("gguf-q4_k_m", ACCS.get("h100-sxm-80gb")) == 1  # llama.cpp's GEMV: no tensor core


def test_h20_batch1_decode_is_bound_by_the_padded_tile():
    """H20: 148 TFLOP/s against 4.0 TB/s, so a 64-row tile over the weights outlasts their read; the same tile
    on an H100 stays under the read (memory-bound, unchanged)."""
    from gpuplan.estimate.inference import decode_step_s, tile_floor_s

    spec = MODELS.get("qwen3-8b")
    job = ServingJob(prompt_tokens=1, output_tokens=2048, engine="sglang", batch=1)
    a = InferenceAssumptions()
    h20, h100 = ACCS.get("h20"), ACCS.get("h100-sxm-80gb")
    t, bound = decode_step_s(spec, h20, ServingLayout(), job, a, 1, 1024)
    assert bound == "compute"
    floor = tile_floor_s(spec, h20, ServingLayout(), "bf16", 1, 1.0)
    read = weight_bytes(spec, "bf16", ServingLayout()).total / (a.memory_bandwidth_efficiency * 4000e9)
    assert floor > 1.5 * read
    # flat up to the tile: 32 sequences cost the tile of one (the KV reads aside)
    assert decode_step_s(spec, h20, ServingLayout(), job, a, 32, 1)[0] == pytest.approx(t, rel=0.05)
    assert decode_step_s(spec, h100, ServingLayout(), job, a, 1, 1024)[1] == "memory"


def test_h20_cluster_error(inference_rows):
    """Qwen's H20 speed table (SGLang, batch 1): MAE 58 % (+42..+110 % at input 1) before the tile floor."""
    rows, _ = inference_rows
    assert _cluster_mae(rows, "qwen-speed-") <= 0.31
    dense = [r for r in rows if r.case.record.startswith(("qwen-speed-qwen3-8b-", "qwen-speed-qwen3-32b-"))]
    dense = [r for r in dense if "int4" not in r.case.record and "-in1-" in r.case.record]
    assert len(dense) == 4 and max(abs(r.error) for r in dense) <= 0.25


def test_llamacpp_prefill_expands_quantized_weights_to_fp16():
    """Above 8 tokens llama.cpp dequantizes each matrix to an fp16 copy before cuBLAS: a q4_k_m prompt costs
    more than an f16 one, while its batch-1 decode (GEMV on the packed blocks) stays faster."""
    spec, gpu = MODELS.get("llama-3-8b"), ACCS.get("h100-pcie-80gb")
    a = InferenceAssumptions()
    times = {}
    for fmt in ("fp16", "gguf-q4_k_m"):
        job = ServingJob(prompt_tokens=512, output_tokens=1, engine="llama.cpp", batch=1, weights=fmt)
        prefill = prefill_s(spec, gpu, ServingLayout(), job, a, 1, 512)
        times[fmt] = (prefill, serving_plan(spec, gpu, ServingLayout(), job).tpot_s)
    assert times["gguf-q4_k_m"][0] > times["fp16"][0]
    assert times["gguf-q4_k_m"][1] < times["fp16"][1]


def test_llamacpp_fp16_accumulate_doubles_geforce_only():
    from gpuplan.estimate.inference import gemm_peak_flops_per_s

    llama = ServingJob(prompt_tokens=512, output_tokens=1, engine="llama.cpp", weights="fp16")
    vllm = ServingJob(prompt_tokens=512, output_tokens=1, engine="vllm", weights="fp16")
    g3090, l40s = ACCS.get("rtx-3090"), ACCS.get("l40s")
    assert gemm_peak_flops_per_s(g3090, llama) == pytest.approx(2 * gemm_peak_flops_per_s(g3090, vllm))
    assert gemm_peak_flops_per_s(l40s, llama) == pytest.approx(gemm_peak_flops_per_s(l40s, vllm))


def test_llamacpp_long_prompt_pays_for_the_score_matrix():
    """Unfused attention writes heads x tokens x context scores: per token, an 8k prompt costs llama.cpp far more
    than a 512 one (published 4090 q4_k_m: 7139 -> 4040 tokens/s), more than it costs a fused-attention engine."""
    spec, gpu = MODELS.get("llama-3-8b"), ACCS.get("rtx-4090")

    def per_token(engine, prompt):
        job = ServingJob(prompt_tokens=prompt, output_tokens=1, engine=engine, batch=1, weights="gguf-q4_k_m")
        return serving_plan(spec, gpu, ServingLayout(), job).ttft_s / prompt

    llama = per_token("llama.cpp", 8192) / per_token("llama.cpp", 512)
    assert 1.3 <= llama <= 2.2  # published 7139 / 4040 = 1.77; 1.43 here (the 512 row is 23 % pessimistic)
    assert llama > per_token("compiled", 8192) / per_token("compiled", 512) + 0.2


def test_llamacpp_prompt_cluster_error(inference_rows):
    """llama.cpp pp rows (XiongjieDai, May 2024): MAE 58 % before the fp16 copy, fp16 accumulation and the
    score matrix; the H100 PCIe rows stay optimistic (+60..+80 %, open)."""
    rows, _ = inference_rows
    assert _cluster_mae(rows, "llamacpp-xd-", "prompt_tokens_per_s") <= 0.27


def test_layer_kernels_scale_the_fixed_latency():
    from gpuplan.estimate.inference import DENSE_LAYER_KERNELS, layer_kernels

    dense, moe, mla = MODELS.get("llama-3-8b"), MODELS.get("qwen3-30b-a3b"), MODELS.get("deepseek-v3")
    assert layer_kernels(dense, 32, 0) == 32 * DENSE_LAYER_KERNELS
    assert layer_kernels(moe, 48, 48) == 48 * 13
    assert layer_kernels(mla, 61, 58) / (61 * DENSE_LAYER_KERNELS) == pytest.approx((61 * 14 + 58 * 4) / (61 * 9))
    # transformers (--engine hf): 4 more kernels per layer (separate q/k/v and gate/up projections, the cache
    # writes), and the two repeat_kv copies of a GQA model; the engines that read grouped K/V in place run neither
    assert layer_kernels(dense, 32, 0, "hf") == 32 * (DENSE_LAYER_KERNELS + 4 + 2)
    assert layer_kernels(MODELS.get("llama-2-7b"), 32, 0, "hf") == 32 * (DENSE_LAYER_KERNELS + 4)
    for engine in ("compiled", "vllm", "sglang", "trtllm", "tgi", "llama.cpp"):
        assert layer_kernels(dense, 32, 0, engine) == 32 * DENSE_LAYER_KERNELS
    # the batch-1 step grows by exactly the extra kernels' share of layer_overhead_s
    from dataclasses import replace

    from gpuplan.estimate.inference import decode_step_s

    job = ServingJob(prompt_tokens=1, output_tokens=256, engine="sglang", batch=1)
    a = assumptions_for(job, None, ACCS.get("h100-sxm-80gb"))
    gpu = ACCS.get("h100-sxm-80gb")
    t = decode_step_s(moe, gpu, ServingLayout(), job, a, 1, 64)[0]
    t0 = decode_step_s(moe, gpu, ServingLayout(), job, replace(a, layer_overhead_s=0.0), 1, 64)[0]
    assert t - t0 == pytest.approx(48 * 13 / 9 * a.layer_overhead_s)


def test_moe_batch1_clusters_error(inference_rows):
    """Batch-1 MoE decode: TensorRT-LLM DeepSeek-R1 on 8xB200 without MTP was +111 % (tokens/s per user) and the
    Qwen3 MoE rows on H20 +23..+56 %; the tile floor and the MoE/MLA kernels bring them within 30 %."""
    rows, _ = inference_rows
    dsr1 = [r for r in rows if r.case.record == "trtllm-blog1-dsr1-8xb200-nomtp"]
    assert dsr1 and max(abs(r.error) for r in dsr1) <= 0.30
    moe = [r for r in rows if r.case.record.startswith(("qwen-speed-qwen3-30b", "qwen-speed-qwen3-235b"))]
    assert len(moe) == 6 and max(abs(r.error) for r in moe) <= 0.30


def test_overall_inference_error(inference_rows):
    """All 119 scored serving values: MAE 23.0 % before the tile floor, llama.cpp's prompt path and the kernel
    counts (issue #14)."""
    _, summary = inference_rows
    assert summary["all"]["mae"] <= 0.15
