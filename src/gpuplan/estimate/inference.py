"""Inference: memory per GPU, time to first token, time per output token, throughput, fleet and cost.

The latency model is a roofline per step with the overheads that dominate small batches:
- decode (one token per running sequence): every step streams the weights (for MoE, only the experts
  the batch touches) and each sequence's KV cache from HBM; it takes the longer of that memory time at
  an achievable bandwidth and the compute time at an achievable fraction of the dense peak (Williams
  et al. 2009, "Roofline"; the MBU framing of Databricks' "LLM Inference Performance Engineering"),
  plus a fixed latency per decoder layer, the tensor-parallel all-reduces (two per layer, Megatron-LM
  section 3), and the serving engine's per-step overhead;
- prefill (the prompt): the same with the prompt's FLOPs, 2N per token plus causal attention.
Quantized weights are read through dequantizing kernels that reach a lower effective bandwidth
(a per-kernel factor). The weight GEMMs never take less than their tokens padded to the tensor-core tile
(``tile_floor_s``: 64 rows on Hopper and Blackwell), which binds on parts with cut compute (H20); the fixed
per-layer latency scales with the kernels a layer runs (``layer_kernels``); llama.cpp's prompt path expands
quantized weights to fp16, accumulates in fp16 and writes the attention scores; transformers (``--engine hf``)
attends its whole static cache under a mask, copies grouped K/V heads out to every query head first and keeps only
the last prompt position's logits (``EngineProfile``; measured on an H200: docs/measurements/inference.md).
Every constant is a named assumption with its source (``InferenceAssumptions``), or a module constant with its own.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

from ..errors import JobError
from ..spec.accelerator import Accelerator
from ..spec.choices import ENGINE_ALIASES, STATIC_ENGINES
from ..spec.model import ModelSpec, ParamsOnlyModel
from ..spec.serving import KV_DTYPES, ServingJob, ServingLayout
from ..units import (
    MAX_BATCH,
    MAX_DURATION_S,
    MAX_GPUS,
    MAX_QPS,
    MAX_SEQ_TOKENS,
    MAX_USD_PER_HOUR,
    MIN_DURATION_S,
    MIN_QPS,
    GiB,
    MiB,
    check_range,
)
from .assumptions import Assumption, AssumptionSet, check_assumptions
from .flops import attended_span, attention_flops_forward, matmul_params
from .itemized import Itemized
from .mamf import matmul_efficiency
from .params import count_params, linear_shapes
from .quant import FP4_FORMATS, WEIGHT_FORMATS, bytes_per_param
from .queueing import closed_loop_wait, mean_wait, poisson_quantile, wait_quantile


@dataclass(frozen=True)
class InferenceAssumptions(AssumptionSet):
    """Efficiencies and overheads of real kernels and engines; each overridable, each with a source."""

    memory_bandwidth_efficiency: float = 0.83
    compute_efficiency: float = 0.45
    int8_kernel_bandwidth_factor: float = 1.2
    int4_kernel_bandwidth_factor: float = 1.4
    layer_overhead_s: float = 50e-6
    allreduce_latency_s: float = 6e-6
    allreduce_latency_large_s: float = 40e-6
    link_efficiency: float = 0.75
    # None: the engine profile's value on the planned GPU (ENGINE_PROFILES; resolved by ``assumptions_for``)
    engine_step_overhead_s: float | None = None
    gpu_memory_utilization: float | None = None
    cuda_context_bytes: int = 500 * MiB
    cuda_graph_bytes: int = 512 * MiB
    prefill_chunk_tokens: int | None = None
    max_num_seqs: int | None = None
    request_overhead_s: float = 0.0
    max_utilization: float = 0.85
    arrival_scv: float = 1.0
    service_scv: float = 1.0

    SOURCES = MappingProxyType(
        {
            "memory_bandwidth_efficiency": (
                "fraction of datasheet bandwidth",
                "gpt-fast README: ~1700 GB/s empirical peak on A100 80GB (2039 GB/s datasheet) = 0.83",
            ),
            "compute_efficiency": (
                "fraction of dense peak",
                "prefill as served: chosen so Databricks' MPT-7B and "
                "Llama-2-70B time-to-first-token and static-batch throughput on A100 (2023) fall "
                "within 25 % together (those rows calibrate it; gpt-fast decode does not depend on "
                "it). Pope et al. 2022 reach 76 % for large-batch prefill on TPU v4: a well-tuned "
                "stack can beat this default",
            ),
            "int8_kernel_bandwidth_factor": (
                "x weight bytes",
                "weight-only int8 GEMV reads at 1/1.2 of the 16-bit "
                "kernel's bandwidth: gpt-fast Llama-2-7B int8 vs bf16 on A100 (calibration "
                "row; the 70B rows are predictions)",
            ),
            "int4_kernel_bandwidth_factor": (
                "x weight bytes",
                "int4 GEMV with dequantization: 1/1.4 of the 16-bit "
                "kernel's bandwidth, gpt-fast Llama-2-7B int4 vs bf16 on A100 (calibration "
                "row; the 70B rows are predictions)",
            ),
            "layer_overhead_s": (
                "seconds per decoder layer per step",
                "kernel launch and small-kernel tail per layer: "
                "gpt-fast Llama-2-7B bf16 batch 1 on A100 is 1.6 ms slower than its bytes at "
                "1700 GB/s over 32 layers (calibration row); a layer with more kernels pays in proportion "
                "(layer_kernels: MoE blocks and MLA attention run 4 and 5 more than the 9 of a dense GQA layer)",
            ),
            "allreduce_latency_s": (
                "seconds per all-reduce",
                "small-message all-reduce on NVLink: ~6 us on H100 "
                "(NVIDIA/nccl issue #1259, NVLS, 128 B-64 KB), 10 us on A100 (issue #583); custom "
                "one-shot all-reduces reach 4-10 us (sgl-project/sglang PR #2904)",
            ),
            "allreduce_latency_large_s": (
                "seconds per all-reduce on 8 GPUs",
                "messages above 64 KiB leave NCCL's "
                "low-latency protocol: 1 MiB takes ~46 us on 8 H200s (40 GB/s bus bandwidth "
                "against 480 peak; ml-engineering network/benchmarks all-reduce-8xH200), "
                "so ~40 us of fixed cost, scaled by (n-1)/7 for n GPUs",
            ),
            "link_efficiency": (
                "fraction of link bandwidth",
                "NCCL ring bus bandwidth reaches ~75 % of NVLink peak at large messages (nccl-tests on DGX A100/H100)",
            ),
            "engine_step_overhead_s": (
                "seconds per step",
                "CPU work per engine step the GPU waits for (scheduling, input preparation, sampling, "
                "detokenization); default: the engine profile's (ENGINE_PROFILES, each with its source): 0 where "
                "an overlap scheduler hides it behind the GPU (SGLang >= 0.4, TensorRT-LLM) or nothing schedules "
                "(gpt-fast, llama.cpp); 4 ms for vLLM and TGI (SERVER_STEP_OVERHEAD_S: not measured, see there)",
            ),
            "gpu_memory_utilization": (
                "fraction of GPU memory",
                "default: the engine profile's: vLLM's gpu_memory_utilization 0.90 of the whole GPU "
                "(vllm/config/cache.py), SGLang's mem_fraction_static 0.88, TensorRT-LLM's "
                "free_gpu_memory_fraction 0.9 of what the weights leave, TGI's cuda_memory_fraction 1.0",
            ),
            "cuda_context_bytes": (
                "bytes",
                "CUDA context with lazy loading: 0.47 GB on A100 + CUDA 12.1 (stas00/ml-engineering)",
            ),
            "cuda_graph_bytes": (
                "bytes",
                "captured CUDA graphs as vLLM logs them ('Graph capturing finished ... took X "
                "GiB'): 0.13-0.21 GiB for 1B-8B models, 1.4 GiB for Llama-4-Maverick (vLLM PR #11349, "
                "sglang issue #8538)",
            ),
            "prefill_chunk_tokens": (
                "tokens per step",
                "the token budget of one engine step (decode tokens + packed prefill chunks, chunked "
                "prefill); default: the engine profile's rule for the GPU (ENGINE_PROFILES): vLLM's "
                "max_num_batched_tokens, 8192 for its server on GPUs of >= 70 GiB other than the A100, else 2048 "
                "(vllm/engine/arg_utils.py EngineArgs.get_batch_defaults); also sizes the activation workspace",
            ),
            "max_num_seqs": (
                "sequences",
                "most sequences a server batches at once (0: as many as the KV cache holds); default: the "
                "engine profile's rule for the GPU: vLLM's max_num_seqs, 1024 on GPUs of >= 70 GiB other than "
                "the A100, else 256 (vllm/engine/arg_utils.py EngineArgs.get_batch_defaults)",
            ),
            "request_overhead_s": (
                "seconds per request",
                "fixed latency a request pays outside the GPU steps (HTTP, tokenization, "
                "detokenization), added to TTFT: 0 by default, since no bundled source separates it from "
                "the prefill; set it from your own measurements",
            ),
            "max_utilization": (
                "fraction of a replica's saturation request rate",
                "planning headroom for --qps: a fleet keeps each replica at or below this share of the requests "
                "per second it serves when every slot is busy. Not measured: it bounds the queueing term, which "
                "grows as rho / (1 - rho) (Kingman 1961): at 0.85 the mean wait of one server is 5.7 service "
                "times (M/M/1), at 0.95 19; set it from your latency targets (0.95 for a steady load)",
            ),
            "arrival_scv": (
                "squared coefficient of variation of inter-arrival times",
                "1: Poisson arrivals, the load vLLM's benchmark_serving.py generates for --request-rate (gamma "
                "inter-arrival times with --burstiness 1.0, i.e. exponential); above 1 for burstier traffic",
            ),
            "service_scv": (
                "squared coefficient of variation of a slot's service time",
                "1: request times spread like an exponential (chat output lengths vary widely: ShareGPT, the "
                "dataset of vLLM's benchmark_serving.py); 0 for fixed-length benchmark requests. Only the "
                "queue wait depends on it (Allen-Cunneen, estimate/queueing.py)",
            ),
        }
    )

    def __post_init__(self) -> None:
        check_assumptions(
            self,
            fractions=(
                "memory_bandwidth_efficiency",
                "compute_efficiency",
                "link_efficiency",
                "gpu_memory_utilization",
            ),
            ranges={
                "int8_kernel_bandwidth_factor": (1, 10),
                "int4_kernel_bandwidth_factor": (1, 10),
                "prefill_chunk_tokens": (1, 10**7),
                "max_num_seqs": (0, 10**6),
                "max_utilization": (0.01, 0.99),
                "arrival_scv": (0, 100),
                "service_scv": (0, 100),
            },
            positive=("memory_bandwidth_efficiency", "compute_efficiency", "link_efficiency", "gpu_memory_utilization"),
        )


#: Per-step CPU time the GPU waits for in a Python-scheduled server without an overlap scheduler (vLLM, TGI).
#: Not measured: a judgment between its bounds. vLLM's v0.6.0 blog (2024-09-05) profiled Llama-3-8B on one H100
#: before its fixes: "only 38% of the time was spent on the actual GPU execution" (API server 33 %, scheduling
#: 29 %), i.e. ~1.6x the GPU time on top of a few-ms decode step; v0.6 then overlapped output processing and
#: split the API server into its own process, and the V1 engine (2025) caches input tensors between steps, so
#: today's figure is lower; 0 is the floor the overlap schedulers reach (SGLang v0.4 blog: no GPU idle time
#: between decode batches in Nsight). Override with ``--assume engine_step_overhead_s=...`` from a profile.
SERVER_STEP_OVERHEAD_S = 4e-3

#: vLLM's split between its large-GPU and default batch limits: total memory of at least 70 GiB
#: (vllm/engine/arg_utils.py EngineArgs.get_batch_defaults, "For GPUs like H100 and MI300x").
VLLM_LARGE_GPU_BYTES = 70 * GiB


def _vllm_limits(gpu: Accelerator) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) of vLLM's OpenAI server (V1 engine, EngineArgs.get_batch_defaults):
    1024 and 8192 on a GPU with >= 70 GiB whose name is not an A100's (a large budget on the A100 cut its
    throughput: vLLM PR #17885), else 256 and 2048."""
    large = gpu.memory_bytes >= VLLM_LARGE_GPU_BYTES and "a100" not in gpu.name.lower()
    return (1024, 8192) if large else (256, 2048)


#: SGLang's chunked_prefill_size by GPU memory (python/sglang/srt/server_args.py, 2025 releases): below
#: 35 GiB ("A10, L40, 4090") 2048, below 160 GiB ("H100, H200, A100, H20") 8192, above ("B200, MI300") 16384.
SGLANG_PREFILL_TIERS: tuple[tuple[float, int], ...] = ((35 * GiB, 2048), (160 * GiB, 8192))
SGLANG_PREFILL_LARGEST = 16384


def _sglang_limits(gpu: Accelerator) -> tuple[int, int]:
    """(0: running requests sized from the KV pool, chunked_prefill_size by GPU memory: SGLANG_PREFILL_TIERS)."""
    budget = next((b for bound, b in SGLANG_PREFILL_TIERS if gpu.memory_bytes < bound), SGLANG_PREFILL_LARGEST)
    return 0, budget


#: Kernels a decode step of a Llama layer in transformers (modeling_llama under torch.compile) runs beyond the
#: 9 of DENSE_LAYER_KERNELS: q_proj, k_proj and v_proj are three GEMMs where the count has one fused QKV (+2),
#: gate_proj and up_proj two where it has one (+1), and StaticCache.update writes keys and values with one
#: index_copy_ each (+1). Counted from the code, not profiled; the repeat_kv copies come on top
#: (GQA_EXPAND_KERNELS).
HF_EXTRA_KERNELS = 4

#: generate() runs the prefill through the uncompiled forward and only the decode steps through the compiled one
#: (transformers generation/utils.py, _sample: the first forward is self(...), the rest get_compiled_call), so
#: the prefill's kernels are dispatched from Python one by one: 0.83 ms per Llama layer, measured on an H200 host
#: (docs/measurements/kernel_counts_h200.json: an eager one-token forward of Llama 3.2 1B, 16 layers, 678 kernels,
#: 13.3 ms of wall time while its kernels kept the GPU busy 1.9 ms); the 8B model's 32 layers prefilled 128
#: tokens in 26 ms on the same machine (inference_h200.json), 0.81 ms per layer
HF_EAGER_HOST_S_PER_LAYER = 13.35e-3 / 16


@dataclass(frozen=True)
class EngineProfile:
    """A serving engine's defaults: how it batches, how it packs a step, what it costs per step.

    ``max_num_seqs`` is the batch cap (0: as many as the KV cache holds, the engines that size the batch
    from memory); ``token_budget`` the tokens one step carries (decodes + prefill chunks); ``memory_rule``
    whether the KV cache gets ``gpu_memory_utilization`` of the whole GPU ("total", vLLM/SGLang) or of what
    is free after the weights and workspace ("free", TensorRT-LLM, TGI). Each becomes the default of the
    matching assumption, so ``--assume`` overrides it. ``gpu_limits``, where the engine picks its batch cap and
    token budget from the GPU, replaces ``max_num_seqs`` and ``token_budget`` (``limits``). ``reserves_output``:
    the scheduler admits a request only when the KV blocks of its prompt and its whole output are free
    (TensorRT-LLM's GUARANTEED_NO_EVICT), so a slot holds P + O tokens, not the mean occupancy P + O/2."""

    name: str
    engine_step_overhead_s: float
    max_num_seqs: int
    token_budget: int
    gpu_memory_utilization: float
    memory_rule: str
    cuda_graphs: bool
    source: str
    gpu_limits: Callable[[Accelerator], tuple[int, int]] | None = None
    reserves_output: bool = False
    #: its GEMMs accumulate in fp16 (llama.cpp: cublasGemmEx with CUBLAS_COMPUTE_16F on fp16 and dequantized
    #: weights, ggml-cuda.cu ggml_cuda_op_mul_mat_cublas), which GeForce parts run at twice the catalog's rate
    fp16_accumulate: bool = False
    #: its prefill attention writes the score matrix to memory (no fused/flash attention by default):
    #: llama.cpp's flash_attn defaulted to false through 2024 (common/common.h), so KQ, soft_max and KQV run as
    #: separate kernels over a heads x tokens x context matrix (SCORE_BYTES_PER_ELEMENT)
    materializes_scores: bool = False
    #: bytes per vocabulary entry of a logits buffer the runtime allocates up front for every batch slot (its
    #: max_num_seqs rows of the full vocabulary; 0: none beyond the workspace). TensorRT-LLM's runtime keeps
    #: [max_batch_size, vocab_size_padded] logits in the engine's logits dtype, float32 unless the checkpoint
    #: conversion is told otherwise (the ``--logits_dtype`` default of its examples' convert_checkpoint.py and
    #: build scripts), gathered to the whole vocabulary on every TP rank; it is allocated before the KV pool
    #: takes its fraction of what is free
    logits_bytes: int = 0
    #: the activation workspace is sized for the engine's largest step (its token budget), not the job's
    #: prompt: TensorRT pre-computes an engine's activation memory at build time from the profile's max tensor
    #: shapes (TensorRT-LLM docs, reference/memory.md "Activation size"; max_num_tokens bounds them)
    workspace_at_budget: bool = False
    #: the KV cache is one static buffer per sequence of prompt + output tokens and attention runs over all of
    #: it under an explicit mask, not over the tokens written so far (transformers StaticCache: update() hands
    #: SDPA the whole max_cache_len buffer and the mask hides the unwritten tail; gpt-fast's model.py KVCache
    #: and causal_mask do the same): a decode step reads the whole cache, and the prompt's attention, given a
    #: mask instead of is_causal, computes every score of prompt x cache (no causal skip)
    static_kv_cache: bool = False
    #: grouped K/V heads are copied out to every query head before an attention kernel that cannot take them
    #: grouped (transformers: repeat_kv ahead of SDPA whenever a mask is passed, which a static cache always
    #: does), so a decode step reads the cache, writes the g-fold copy and reads that copy back: (1 + 2 g) x the
    #: cache bytes (``gqa_expansion``), in two more kernels per layer (GQA_EXPAND_KERNELS). Paged engines (vLLM,
    #: SGLang, TensorRT-LLM, TGI) and llama.cpp read each K/V head once for its group of query heads; gpt-fast
    #: also calls repeat_interleave, but under coordinate_descent_tuning Inductor turns its one-query attention
    #: matmuls into reductions that index the grouped cache (torch/_inductor/decomposition.py bmm), so no copy
    expands_gqa: bool = False
    #: its prefill computes logits for each sequence's last prompt position only (transformers generate passes
    #: logits_to_keep=1), so the LM head's FLOPs count once per sequence, not once per prompt token. The other
    #: profiles count them for every prompt token (gpt-fast's prefill returns every position's logits)
    prefill_last_logits: bool = False
    #: kernels per dense decoder layer beyond the 9 that ``layer_overhead_s`` was calibrated on (DENSE_LAYER_KERNELS)
    extra_layer_kernels: int = 0
    #: host time to dispatch one decoder layer of an eager (uncompiled) prefill; the prefill takes at least
    #: layers x this (0: a compiled or C++ prefill, no such floor)
    eager_prefill_host_s_per_layer: float = 0.0

    def limits(self, gpu: Accelerator | None) -> tuple[int, int]:
        """(max_num_seqs, token budget) on ``gpu`` (None: the profile's listed values)."""
        if gpu is not None and self.gpu_limits is not None:
            return self.gpu_limits(gpu)
        return self.max_num_seqs, self.token_budget


ENGINE_PROFILES: Mapping[str, EngineProfile] = MappingProxyType(
    {
        p.name: p
        for p in (
            EngineProfile(
                "vllm",
                SERVER_STEP_OVERHEAD_S,
                1024,
                8192,
                0.90,
                "total",
                True,
                "vLLM (V1 engine, OpenAI server): max_num_seqs and max_num_batched_tokens by GPU, 1024 and 8192 on "
                "GPUs of >= 70 GiB other than the A100, else 256 and 2048 (vllm/engine/arg_utils.py "
                "EngineArgs.get_batch_defaults; chunked prefill always on in V1); gpu_memory_utilization 0.90 of "
                "the whole GPU (vllm/config/cache.py through 2025; 0.92 in 2026 releases); a 4 ms CPU step "
                "(SERVER_STEP_OVERHEAD_S: not measured)",
                _vllm_limits,
            ),
            EngineProfile(
                "sglang",
                0.0,
                0,
                8192,
                0.88,
                "total",
                True,
                "SGLang: chunked_prefill_size by GPU memory, 2048 below 35 GiB, 8192 below 160 GiB, 16384 above "
                "(python/sglang/srt/server_args.py, 2025); max_running_requests sized from the KV pool when "
                "unset; mem_fraction_static 0.88 of the whole GPU at tp 1 (server_args.py: 0.87/0.85/0.81 at tp "
                "2/4/8 in the same releases); step overhead 0: the overlap scheduler prepares step n+1 while the "
                "GPU runs step n (SGLang v0.4 blog, 2024-12-04: no GPU idle time between decode batches in Nsight)",
                _sglang_limits,
            ),
            EngineProfile(
                "trtllm",
                0.0,
                2048,
                8192,
                0.90,
                "free",
                True,
                "TensorRT-LLM: max_batch_size 2048 and max_num_tokens 8192 (tensorrt_llm/builder.py BuildConfig, "
                "the defaults of trtllm-serve's flags), the running batch then limited by the KV blocks: "
                "KvCacheConfig.free_gpu_memory_fraction 0.9 of the memory free after the weights "
                "(tensorrt_llm/llmapi/llm_args.py); a request admitted only with the blocks of its whole output "
                "free (SchedulerConfig.capacity_scheduler_policy GUARANTEED_NO_EVICT, 'reserve blocks for "
                "completion, no eviction'); step overhead 0: the overlap scheduler, on by default (docs "
                "'Overlap Scheduler')",
                reserves_output=True,
                logits_bytes=4,
                workspace_at_budget=True,
            ),
            EngineProfile(
                "tgi",
                SERVER_STEP_OVERHEAD_S,
                0,
                4096,
                1.0,
                "free",
                True,
                "TGI: max_batch_prefill_tokens 4096 (the 1.x default; TGI 2 and 3 default it to max_input_tokens "
                "+ 50, launcher/src/main.rs), max_batch_total_tokens inferred from the memory free after warm-up "
                "(so the batch is sized from the KV cache), cuda_memory_fraction 1.0 (launcher/src/main.rs); a "
                "Python model server stepped by the Rust router without an overlap scheduler: vLLM's 4 ms "
                "(SERVER_STEP_OVERHEAD_S, not measured)",
            ),
            EngineProfile(
                "llama.cpp",
                0.0,
                1,
                2048,
                1.0,
                "total",
                True,
                "llama.cpp: one slot (common_params n_parallel 1, llama-server's --parallel default in 2024), "
                "n_batch 2048 (common/common.h; n_ubatch 512), KV allocated for the context it is given; C++ with CUDA "
                "graphs for batch-1 decode (ggml-cuda, 2024), no scheduler overhead; GEMMs with fp16 accumulation "
                "(CUBLAS_COMPUTE_16F in ggml_cuda_op_mul_mat_cublas)",
                fp16_accumulate=True,
                materializes_scores=True,
            ),
            EngineProfile(
                "compiled",
                0.0,
                0,
                10**7,
                1.0,
                "total",
                False,
                "one compiled stream (gpt-fast: torch.compile + CUDA graphs): no scheduler, the "
                "whole prompt prefilled in one call, the batch as given; grouped K/V read in place (gpt-fast's "
                "repeat_interleave is indexed, not copied, by the reductions Inductor generates for its one-query "
                "attention: generate.py sets coordinate_descent_tuning and the math SDPA backend). Its static "
                "cache is attended in full (model.py KVCache), which static_kv_cache would model; left off: on the "
                "bundled gpt-fast rows (5-token prompts) it moves TPOT +0.3 points the wrong way "
                "(docs/measurements/inference.md)",
            ),
            EngineProfile(
                "hf",
                0.0,
                0,
                10**7,
                1.0,
                "total",
                False,
                "Hugging Face transformers with a static cache and torch.compile(mode='reduce-overhead', "
                "fullgraph=True) of the forward (the transformers docs' recipe for fast generate): the batch as "
                "given, its prompts prefilled in one call with logits for the last position only (logits_to_keep); "
                "attention through SDPA over the whole StaticCache under an explicit mask, so repeat_kv copies the "
                "grouped K/V out to every query head first (transformers sdpa_attention_forward: enable_gqa only "
                "without a mask); separate q/k/v and gate/up projections (modeling_llama); the prefill runs "
                "uncompiled, so Python's dispatch of its kernels is its floor (HF_EAGER_HOST_S_PER_LAYER). Eager "
                "decode (no "
                "compile at all) is not modelled. Step overhead 0: not measured",
                static_kv_cache=True,
                expands_gqa=True,
                prefill_last_logits=True,
                extra_layer_kernels=HF_EXTRA_KERNELS,
                eager_prefill_host_s_per_layer=HF_EAGER_HOST_S_PER_LAYER,
            ),
        )
    }
)


def engine_profile(engine: str) -> EngineProfile:
    """The profile of an ``--engine`` choice (``server`` is vLLM's)."""
    return ENGINE_PROFILES[ENGINE_ALIASES.get(engine, engine)]


def decode_mbu(weight_bytes: float, kv_bytes: float, tpot_s: float, peak_bandwidth: float) -> float:
    """Model bandwidth utilization: (weights + KV cache read per token) / TPOT / peak bandwidth
    (Databricks, "LLM Inference Performance Engineering: Best Practices", 2023)."""
    return (weight_bytes + kv_bytes) / tpot_s / peak_bandwidth


def assumptions_for(
    job: ServingJob, base: InferenceAssumptions | None = None, gpu: Accelerator | None = None
) -> InferenceAssumptions:
    """``base`` (default: ``InferenceAssumptions()``) with the fields left None filled from the engine's profile
    on ``gpu`` (its batch cap and token budget depend on the GPU: ``EngineProfile.limits``); without ``gpu`` those
    stay None, to be filled when the GPU is known (``serving_plan`` and the step functions do it)."""
    a = base if base is not None else InferenceAssumptions()
    if gpu is None:
        return a
    return _with_engine_defaults(a, job.engine, *engine_profile(job.engine).limits(gpu))


_ENGINE_FIELDS = ("engine_step_overhead_s", "gpu_memory_utilization", "max_num_seqs", "prefill_chunk_tokens")


@functools.lru_cache(maxsize=1024)
def _with_engine_defaults(a: InferenceAssumptions, engine: str, seqs: int, budget: int) -> InferenceAssumptions:
    # cached: a ranking plans hundreds of replicas, and each new set re-checks every value
    p = engine_profile(engine)
    fill: dict[str, Any] = {
        "engine_step_overhead_s": p.engine_step_overhead_s,
        "gpu_memory_utilization": p.gpu_memory_utilization,
        "max_num_seqs": seqs,
        "prefill_chunk_tokens": budget,
    }
    changes = {k: v for k, v in fill.items() if getattr(a, k) is None}
    return replace(a, **changes) if changes else a


class EngineValues(NamedTuple):
    """The engine-dependent assumptions once resolved for a GPU (``engine_values``)."""

    step_overhead_s: float
    gpu_memory_utilization: float
    max_num_seqs: int
    token_budget: int


def engine_values(a: InferenceAssumptions, job: ServingJob, gpu: Accelerator) -> EngineValues:
    """The step overhead, memory share, batch cap and token budget ``a`` gives, or the engine profile's on
    ``gpu`` where ``a`` leaves them None."""
    if any(getattr(a, k) is None for k in _ENGINE_FIELDS):
        a = assumptions_for(job, a, gpu)
    assert a.engine_step_overhead_s is not None and a.gpu_memory_utilization is not None
    assert a.max_num_seqs is not None and a.prefill_chunk_tokens is not None
    return EngineValues(a.engine_step_overhead_s, a.gpu_memory_utilization, a.max_num_seqs, a.prefill_chunk_tokens)


# -------------------------------------------------------------------------------------------- memory


def kv_bytes_per_token(spec: ModelSpec, kv_dtype: str) -> float:
    """KV-cache bytes for one token across all layers (no window cap).

    MHA/GQA/MQA: 2 (K and V) x kv_heads x head_dim x bytes per layer (Pope et al. 2022, "Efficiently
    Scaling Transformer Inference", section 2). MLA caches the compressed latent and the shared rotary
    key: (kv_lora_rank + qk_rope_head_dim) x bytes per layer (DeepSeek-V2 paper, section 2.1.3).
    """
    e = KV_DTYPES[kv_dtype]
    if spec.mla is not None:
        return spec.layers * (spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim) * e
    return spec.layers * 2 * spec.kv_heads * spec.head_dim * e


def kv_cache_bytes(spec: ModelSpec, tokens: int, kv_dtype: str, tp: int = 1) -> float:
    """KV cache of one sequence of ``tokens`` tokens on one tensor-parallel GPU.

    Sliding-window layers keep at most ``window`` tokens; Llama 4's chunked-attention layers at most
    ``attention_chunk`` tokens (a query attends only within its chunk, so vLLM's chunked local attention frees
    the blocks of earlier chunks). TP splits the KV heads; with fewer KV heads than GPUs each GPU still holds
    one. MLA's latent is not split by head: every TP rank holds all of it.
    """
    per_layer = kv_bytes_per_token(spec, kv_dtype) / spec.layers
    windowed = spec.sliding_window_layers if spec.sliding_window else 0
    chunked = spec.chunked_layers if spec.attention_chunk else 0
    held = (
        spec.full_attention_layers * tokens
        + windowed * min(tokens, spec.sliding_window or tokens)
        + chunked * min(tokens, spec.attention_chunk or tokens)
    )
    if spec.mla is not None:
        share = 1.0
    else:
        share = math.ceil(spec.kv_heads / tp) / spec.kv_heads
    return per_layer * held * share


@dataclass(frozen=True)
class WeightBytes:
    """Weight bytes of one GPU (busiest pipeline stage), and what a decode step reads of them."""

    total: float
    experts: float
    per_expert: float
    moe_layers_here: int


def weight_bytes(model: ModelSpec | ParamsOnlyModel, fmt: str, layout: ServingLayout) -> WeightBytes:
    """Weights one GPU holds: linear layers at the format's bits (scales included); embeddings, norms and
    LM head in 16-bit where the format keeps them so. TP splits everything; PP splits layers, the first
    stage also holds the embedding and the last the LM head (the busier one is returned)."""
    return _weight_bytes(model, fmt, layout.tp, layout.pp)


@functools.lru_cache(maxsize=1024)
def _weight_bytes(model: ModelSpec | ParamsOnlyModel, fmt: str, tp: int, pp: int) -> WeightBytes:
    # cached on every input it reads (the spec, the format, tp and pp): a plan takes the step of one model
    # thousands of times, and each would recount the parameters
    f = WEIGHT_FORMATS[fmt]
    q = bytes_per_param(fmt)
    if isinstance(model, ParamsOnlyModel):
        return WeightBytes(model.params * q / tp / pp, 0.0, 0.0, 0)
    spec = model
    b = count_params(spec)
    shapes = linear_shapes(spec)
    rest_bytes = 2.0 if f.head_16bit else q
    dense_q = 2.0 if f.experts_only and spec.moe is not None else q  # non-expert linear layers
    per_layer_linear = (
        sum(
            din * dout * n
            for k, (din, dout, n) in shapes.items()
            if k not in ("lm_head", "router") and not k.startswith("expert_")
        )
        / spec.layers
    )
    expert_params = sum(din * dout * n for k, (din, dout, n) in shapes.items() if k.startswith("expert_"))
    # routed experts' biases (gpt-oss) stay 16-bit beside the quantized expert matrices
    expert_bias = b.parts.get("experts", 0) - expert_params
    # everything else a layer holds, in 16-bit: norms, the router (with its bias), the biases of the linear
    # layers (Qwen2's q/k/v, GPT-2's every projection), q/k norms, MLA's latent norms, attention sinks and
    # shared-expert gates: the exact count less the matrices, the embeddings, the LM head and the vision tower
    per_layer_other = (
        b.total
        - per_layer_linear * spec.layers
        - b.parts.get("experts", 0)
        - b.parts["embeddings"]
        - b.parts["lm_head"]
        - b.parts.get("vision", 0)
    ) / spec.layers
    layers_here = math.ceil(spec.layers / pp)
    body = layers_here * (per_layer_linear * dense_q + per_layer_other * 2.0)
    experts = (expert_params * q + expert_bias * 2.0) * layers_here / spec.layers
    # a vision-language model's vision tower (kept in 16-bit, like the embeddings) runs before the first layer
    first = (
        body
        + experts
        + (b.parts["embeddings"] + b.parts.get("vision", 0)) * rest_bytes
        + (b.parts["lm_head"] * rest_bytes if pp == 1 else 0)
    )
    last = body + experts + (b.parts["lm_head"] or b.parts["embeddings"]) * rest_bytes if pp > 1 else first
    moe_here = round(spec.moe.layers * layers_here / spec.layers) if spec.moe else 0
    per_expert = (experts / (moe_here * spec.moe.experts)) if spec.moe and moe_here else 0.0
    return WeightBytes(max(first, last) / tp, experts / tp, per_expert / tp, moe_here)


@dataclass(frozen=True)
class LoadedLatency:
    """One replica of a fleet under ``qps`` Poisson arrivals (``serving_plan``'s docstring: the model).

    ``utilization`` is the per-replica rate over the rate the replica serves with every slot busy
    (``capacity_requests_per_s``); ``wait_s`` the mean wait for a slot; ``ttft_s``/``tpot_s`` the means a
    request sees at that load and ``*_q90_s``/``*_q99_s`` their 90th/99th percentiles (None: unbounded, the
    load is at or above saturation). ``limited_by`` says what sized the fleet."""

    qps: float
    replicas: int
    requests_per_s: float  # arrival rate per replica
    capacity_requests_per_s: float
    slots: float
    utilization: float
    max_utilization: float
    running_sequences: float
    wait_s: float | None
    ttft_s: float | None
    tpot_s: float
    request_latency_s: float | None
    ttft_q90_s: float | None
    ttft_q99_s: float | None
    tpot_q90_s: float
    tpot_q99_s: float
    limited_by: str
    # continuous batching: the mean wait for the prompts ahead to be prefilled (M/D/1, in ttft_s); None where
    # the prefills alone saturate the replica
    prefill_wait_s: float | None = 0.0


@dataclass(frozen=True)
class ServingReport(Itemized):
    """One replica's memory per GPU (itemized), latency and throughput."""

    group_order: ClassVar[tuple[str, ...]] = ("weights", "kv_cache", "activations", "other")
    parts: Mapping[str, float]
    groups: Mapping[str, str]
    capacity_bytes: int
    planning_bytes: float
    max_concurrent_sequences: int
    batch: int
    ttft_s: float
    tpot_s: float
    request_latency_s: float
    tokens_per_s: float
    requests_per_s: float
    decode_bound: str
    prefill_share: float
    reasons: tuple[str, ...]
    assumptions: tuple[Assumption, ...]
    notes: tuple[str, ...] = ()
    engine_profile: str = ""
    running_sequences: float = 0.0  # sequences decoding at once (continuous: after the token budget)
    kv_tokens_per_sequence: int = 0  # KV tokens planned per sequence (mean occupancy, or the whole sequence)
    prefill_tokens_per_step: float = 0.0  # other requests' prompt tokens packed into each decode step
    # without a load: the same as ttft_s/tpot_s/request_latency_s; with --qps those become the loaded figures
    # (``load``) and these keep the replica's own (at ``batch``, no queue); with --concurrency above the slots,
    # ``queue_wait_s`` is the closed loop's wait for a slot, kept out of ttft_s (see serving_plan)
    ttft_unloaded_s: float = 0.0
    tpot_unloaded_s: float = 0.0
    request_latency_unloaded_s: float = 0.0
    queue_wait_s: float = 0.0
    load: LoadedLatency | None = None
    # with --concurrency N > 1 (a closed loop): the mean wait for the prefill of the prompts ahead, inside
    # ttft_s and request_latency_s (closed_loop_prefill_wait_s); 0 otherwise
    prefill_wait_s: float = 0.0

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.planning_bytes


SERVING_GROUPS = ServingReport.group_order


# ------------------------------------------------------------------------------------------- latency


def compute_dtype(fmt: str, gpu: Accelerator) -> str:
    """The dtype the matmuls run in: fp8 for fp8 weights where supported, fp4 for NVFP4/MXFP4 weights on
    parts with an fp4 peak (Blackwell: activations quantized too), else bf16, fp16, then fp32 (pre-Volta
    parts such as the K80 have no fast 16-bit path)."""
    preferred: tuple[str, ...] = ("fp8",) if fmt == "fp8" else ("fp4",) if fmt in FP4_FORMATS else ()
    return next(d for d in (*preferred, "bf16", "fp16", "fp32") if gpu.supports(d))


def _kernel_factor(fmt: str, a: InferenceAssumptions, gpu: Accelerator | None = None) -> float:
    """Effective-bandwidth penalty of the kernel that reads ``fmt``: fp4 read natively (Blackwell) costs
    nothing extra; elsewhere fp4 goes through weight-only dequantizing kernels, like int4."""
    kernel = WEIGHT_FORMATS[fmt].kernel
    if kernel == "fp4":
        return 1.0 if gpu is not None and gpu.supports("fp4") else a.int4_kernel_bandwidth_factor
    return {
        "int8": a.int8_kernel_bandwidth_factor,
        "int4": a.int4_kernel_bandwidth_factor,
        "gguf": a.int4_kernel_bandwidth_factor,
    }.get(kernel, 1.0)


#: NCCL switches from its low-latency protocol to the bandwidth protocols around here.
SMALL_MESSAGE_BYTES = 64 * 1024


def _allreduce_s(message_bytes: float, n: int, gpu: Accelerator, a: InferenceAssumptions) -> float:
    """Ring all-reduce: latency + 2 (n-1)/n x message / (link bandwidth x efficiency) (Patarasuk & Yuan 2009).

    The latency depends on the message: decode's few-KiB messages ride NCCL's low-latency protocol; the
    megabyte messages of prefill pay a larger fixed cost that grows with the ring.
    """
    if n <= 1:
        return 0.0
    latency = (
        a.allreduce_latency_s if message_bytes <= SMALL_MESSAGE_BYTES else a.allreduce_latency_large_s * (n - 1) / 7
    )
    return latency + 2 * (n - 1) / n * message_bytes / (gpu.scale_up_bytes_per_s * a.link_efficiency)


@functools.lru_cache(maxsize=256)
def _active_matmul_params(model: ModelSpec | ParamsOnlyModel) -> float:
    # cached on the spec: the step function asks for it twice a step
    return model.params if isinstance(model, ParamsOnlyModel) else matmul_params(model)


#: Fewest token rows one tensor-core instruction multiplies, by architecture: Hopper's warpgroup MMA is
#: wgmma.mma_async.m64nNk16 (PTX ISA 8.0, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"), and
#: Blackwell's tcgen05.mma takes M = 64 or 128 per CTA (PTX ISA 8.6); the mma.sync of Volta to Ada and AMD's
#: MFMA take 16 (m16n8k16, 16x16x16). A GEMM over fewer tokens pads them to this many rows, so its tensor work
#: is that of the padded tile (DeepGEMM issue #35: an H800 fp8 GEMM takes no less time at m = 1 than at 64).
MMA_MIN_ROWS: Mapping[str, int] = MappingProxyType({"Hopper": 64, "Blackwell": 64})
MMA_MIN_ROWS_DEFAULT = 16
#: Weight-only kernels (Marlin, tinygemm, the int4/int8 GEMVs) multiply on mma.sync m16n8k16 on every
#: architecture (Marlin README: "16xN tiles"); llama.cpp's batch-1 GEMV (mmvq, dp4a dot products) uses no
#: tensor core at all.
WEIGHT_ONLY_MIN_ROWS = 16


def mma_min_rows(fmt: str, gpu: Accelerator) -> int:
    """Token rows a decode GEMM of weights in ``fmt`` pads to on ``gpu`` (MMA_MIN_ROWS)."""
    kernel = WEIGHT_FORMATS[fmt].kernel
    if kernel == "gguf":
        return 1
    rows = MMA_MIN_ROWS.get(gpu.architecture, MMA_MIN_ROWS_DEFAULT)
    native = kernel in ("16bit", "fp8") or (kernel == "fp4" and gpu.supports("fp4"))
    return rows if native else min(rows, WEIGHT_ONLY_MIN_ROWS)


def gemm_peak_flops_per_s(gpu: Accelerator, job: ServingJob) -> float:
    """Dense peak of the weight GEMMs: the compute dtype's (``compute_dtype``); where the engine accumulates 16-bit
    GEMMs in fp16 (``EngineProfile.fp16_accumulate``: llama.cpp), the fp16 peak times the GPU's catalog figure
    ``fp16_accumulate_factor`` (2 on GeForce cards, each citing NVIDIA's GA102 / AD102 / GB202 whitepaper table of
    fp16 tensor rates with FP16 and with FP32 accumulate; absent, 1: the two rates are one)."""
    dtype = compute_dtype(job.weights, gpu)
    kernel = WEIGHT_FORMATS[job.weights].kernel
    if engine_profile(job.engine).fp16_accumulate and kernel in ("16bit", "gguf") and gpu.supports("fp16"):
        factor = gpu.fp16_accumulate_factor if gpu.fp16_accumulate_factor is not None else 1.0
        return gpu.peak_flops_per_s["fp16"] * factor
    return gpu.peak_flops_per_s[dtype]


#: Memory traffic per attention score where the engine materializes the score matrix (ggml's unfused
#: attention, counted from its ops): the KQ product written in fp16 and widened to fp32 (2 + 2 + 4 bytes),
#: soft_max reading and writing fp32 (8), the scores narrowed to fp16 for the KQV product (4 + 2) and read by
#: it (2): 24 bytes.
SCORE_BYTES_PER_ELEMENT = 24


#: Kernels one decode step of a dense GQA decoder layer runs, the unit ``layer_overhead_s`` (calibrated on such
#: a layer) is spread over: RMSNorm, QKV GEMM, RoPE with the KV-cache write, attention, O GEMM, RMSNorm, gate/up
#: GEMM, activation, down GEMM.
DENSE_LAYER_KERNELS = 9
#: Kernels a MoE block runs beyond the dense MLP's (gate/up GEMM, activation, down GEMM): router GEMM, top-k,
#: the sort that groups tokens by expert, grouped gate/up GEMM, activation, grouped down GEMM and the weighted
#: sum of the experts' outputs, 7 in all (vLLM/SGLang fused_moe: moe_align_block_size between two fused_moe
#: kernels; TensorRT-LLM blog 1, modules 10-13 of its DeepSeek-R1 decode layer).
MOE_EXTRA_KERNELS = 4
#: Kernels MLA attention runs beyond GQA's (QKV GEMM, RoPE, attention, O GEMM): the fused down-projection GEMM,
#: two RMSNorms on the latents, the query up-projection GEMM, the batched GEMM that absorbs W_UK, KV concat with
#: RoPE, attention, the batched W_UV GEMM and the O GEMM, 9 in all (TensorRT-LLM blog 1, modules 1-8, B200).
MLA_EXTRA_KERNELS = 5


#: Kernels an engine that repeats grouped K/V heads to every query head (``EngineProfile.expands_gqa``) runs
#: beyond the 9: one copy for K and one for V (transformers repeat_kv, called on each). The layer_overhead_s
#: calibration (gpt-fast Llama-2-7B, 32 heads and 32 KV heads) ran neither.
GQA_EXPAND_KERNELS = 2


def gqa_group(spec: ModelSpec) -> float:
    """Query heads per K/V head (g): 1 for MHA and for MLA (whose latent is not split into K/V heads)."""
    if spec.mla is not None or not spec.kv_heads:
        return 1.0
    return spec.attention_heads / spec.kv_heads


def gqa_expansion(spec: ModelSpec, engine: str) -> float:
    """Bytes a decode step moves per byte of KV cache it attends: 1 where the attention kernel reads each K/V
    head once for its group of query heads (paged engines); 1 + 2 g where the engine first copies the cache out
    to every query head (``EngineProfile.expands_gqa``): the cache read once, the g-fold copy written, then read
    by the attention (9x for Llama 3 8B, g = 4). MHA (g = 1) copies nothing."""
    g = gqa_group(spec)
    return 1.0 + 2.0 * g if engine_profile(engine).expands_gqa and g > 1 else 1.0


def static_cache_tokens(job: ServingJob) -> int:
    """Tokens of a static KV cache (``EngineProfile.static_kv_cache``): the sequence, --context or else prompt +
    output (transformers generate sizes its StaticCache to max_length, the prompt plus max_new_tokens)."""
    return job.sequence_tokens


def layer_kernels(spec: ModelSpec, layers: int, moe_layers: int, engine: str | None = None) -> float:
    """Kernels ``layers`` decoder layers run per step (``moe_layers`` of them MoE): the fixed per-layer latency
    (``layer_overhead_s``, launches and small-kernel tails) scales with them, so an MLA + MoE layer of
    DeepSeek-V3 costs (9 + 5 + 4) / 9 = 2x a Llama layer's. With ``engine``, the profile's own extra kernels
    (``EngineProfile.extra_layer_kernels``), and GQA_EXPAND_KERNELS more per layer of a GQA model where the engine
    repeats grouped K/V heads (``gqa_expansion``)."""
    per_layer = DENSE_LAYER_KERNELS + (MLA_EXTRA_KERNELS if spec.mla is not None else 0)
    if engine is not None:
        per_layer += engine_profile(engine).extra_layer_kernels
        if gqa_expansion(spec, engine) > 1:
            per_layer += GQA_EXPAND_KERNELS
    return float(layers * per_layer + moe_layers * MOE_EXTRA_KERNELS)


#: Most tokens llama.cpp multiplies with its quantized GEMV kernels (mmvq, dp4a dot products on the packed
#: blocks); a larger batch (a prompt) goes through ggml_cuda_op_mul_mat_cublas, which first expands the quantized
#: matrix to a temporary fp16 copy (to_fp16_cuda) and then calls cublasGemmEx on it (ggml-cuda.cu, 2024 builds:
#: MMVQ_MAX_BATCH_SIZE 8; the int8 tensor-core MMQ path that skips the copy became the default later in 2024).
LLAMA_CPP_MMVQ_MAX_TOKENS = 8


def tile_floor_s(
    model: ModelSpec | ParamsOnlyModel, gpu: Accelerator, layout: ServingLayout, fmt: str, tokens: float, share: float
) -> float:
    """Least time the weight GEMMs of one step take on the tensor cores: each GEMM multiplies its tokens
    padded up to the instruction's rows (``mma_min_rows``), at the GPU's best-shape matmul rate (MAMF,
    ``mamf.matmul_efficiency``). The dense layers pad the step's tokens; each routed expert its own
    share of them (uniform routing: k x tokens spread over the experts touched; fused-MoE kernels pad every
    expert's rows to their block size: vLLM/SGLang moe_align_block_size). Invisible where the weight read
    is slower (a 64-row tile is ~4x below the bandwidth roof on an H100); it binds on parts whose tensor
    rate is cut but not their bandwidth (H20: 148 TFLOP/s against 4.0 TB/s), where batch-1 decode is
    compute-bound."""
    return _tile_floor_fn(model, gpu, layout, fmt, share)(tokens)


def _tile_floor_fn(
    model: ModelSpec | ParamsOnlyModel, gpu: Accelerator, layout: ServingLayout, fmt: str, share: float
) -> Callable[[float], float]:
    """``tile_floor_s`` as a function of the step's tokens, what does not depend on them worked out once."""
    rows = mma_min_rows(fmt, gpu)

    def padded(n: float) -> float:
        return math.ceil(n / rows - 1e-9) * rows if n > 0 else 0.0

    dtype = compute_dtype(fmt, gpu)
    rate = matmul_efficiency(gpu, dtype)[0] * gpu.peak_flops_per_s[dtype]
    tp = layout.tp
    if not isinstance(model, ModelSpec) or model.moe is None:
        n_params = _active_matmul_params(model)
        return lambda tokens: 2 * padded(tokens) * n_params * share / tp / rate
    moe = model.moe
    active, per_expert = _matmul_split(model)

    def floor_s(tokens: float) -> float:
        touched = moe.experts * (1 - (1 - moe.experts_per_token / moe.experts) ** float(tokens))
        work = padded(tokens) * (active - per_expert * moe.experts_per_token * moe.layers)
        work += touched * padded(tokens * moe.experts_per_token / touched) * per_expert * moe.layers
        return float(2 * work * share / tp / rate)

    return floor_s


@functools.lru_cache(maxsize=256)
def _matmul_split(spec: ModelSpec) -> tuple[float, float]:
    """(active matmul parameters, parameters of one routed expert in one layer) of a MoE model; cached, since a
    plan evaluates the step of one model many times."""
    assert spec.moe is not None
    routed = sum(din * dout * n for k, (din, dout, n) in linear_shapes(spec).items() if k.startswith("expert_"))
    return float(matmul_params(spec)), routed / (spec.moe.layers * spec.moe.experts)


def _stage_share(model: ModelSpec | ParamsOnlyModel, layout: ServingLayout) -> tuple[int, float]:
    """(decoder layers on the busiest pipeline stage, that stage's share of the model's layers)."""
    if not isinstance(model, ModelSpec):
        return 0, 1 / layout.pp
    layers = math.ceil(model.layers / layout.pp)
    return layers, layers / model.layers


def _p2p_s(message: float, gpu: Accelerator, a: InferenceAssumptions) -> float:
    return a.allreduce_latency_s + message / (gpu.scale_up_bytes_per_s * a.link_efficiency)


def decode_attention_flops(spec: ModelSpec, context: int) -> float:
    """Attention FLOPs of one decode token at ``context`` tokens. MHA/GQA: ``flops.attention_flops_forward``.
    MLA as served (vLLM, SGLang, TensorRT-LLM decode kernels such as FlashMLA) absorbs the key and value
    up-projections into the query and output ones and attends over the cached latent itself (DeepSeek-V2
    paper, section 2.1.2): per head and context token QK^T spans kv_lora_rank + qk_rope_head_dim dimensions
    and PV kv_lora_rank, 2 (2 d_c + d_r) FLOPs in all, instead of 2 (d_qk + d_v) on decompressed heads (3.4x
    for DeepSeek-V3: 1,088 against 320 dimensions)."""
    base = attention_flops_forward(spec, context)
    if spec.mla is None:
        return base
    absorbed = 2 * spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim
    return base * absorbed / (spec.qk_head_dim + spec.v_head_dim)


def step_s(
    model: ModelSpec | ParamsOnlyModel,
    gpu: Accelerator,
    layout: ServingLayout,
    job: ServingJob,
    a: InferenceAssumptions,
    decodes: float,
    context: int,
    prefill_tokens: float = 0.0,
    prompt: int = 0,
) -> tuple[float, str]:
    """One engine step: ``decodes`` sequences each add a token at ``context`` tokens, and ``prefill_tokens``
    prompt tokens (of prompts of ``prompt`` tokens) ride in the same step (chunked prefill packs them into
    the step's token budget). (seconds, 'memory' or 'compute' for the weight GEMMs).

    Roofline per kernel family (Williams et al. 2009): the weight GEMMs take the longer of the weight read
    (for MoE, the experts the step's tokens touch, uniform routing) and their FLOPs (2N per token); the
    attention takes the longer of the KV-cache read of the decoding sequences and its FLOPs (decode tokens
    attend to their whole context, prompt tokens causally to half the prompt on average: PaLM appendix B,
    halved as FlashAttention counts it). The two run as separate kernels one after the other, so their
    times add. Plus a fixed latency per layer, two all-reduces per layer under TP (Megatron-LM section 3),
    the stages in turn under PP (a token passes each stage; pipelining serves memory, not latency) and the
    engine's per-step overhead. Engine mechanisms (``EngineProfile``): a static cache is attended in full,
    decode and prompt alike (``static_kv_cache``); a GQA copy multiplies the KV bytes a decode step moves
    (``gqa_expansion``) and adds its kernels to the per-layer latency (``layer_kernels``); a prefill that keeps
    the last position's logits runs the LM head once per prompt (``prefill_last_logits``).
    """
    return _step_fn(model, gpu, layout, job, a)(decodes, context, prefill_tokens, prompt)


#: ``step_s`` with its replica, job and assumptions bound: (decodes, context, prefill_tokens, prompt) ->
#: (seconds, bound).
StepFn = Callable[[float, int, float, int], tuple[float, str]]


def _step_fn(
    model: ModelSpec | ParamsOnlyModel,
    gpu: Accelerator,
    layout: ServingLayout,
    job: ServingJob,
    a: InferenceAssumptions,
) -> StepFn:
    """``step_s`` as a function of the step's sequences and tokens: what depends only on the model, the GPU, the
    layout, the job and the assumptions (weight bytes, bandwidth, peak, launches) is worked out once, the same
    arithmetic in the same order, so a plan that takes hundreds of steps of one replica does not redo it."""
    w = weight_bytes(model, job.weights, layout)
    stage_layers, share = _stage_share(model, layout)
    tp, pp = layout.tp, layout.pp
    spec = model if isinstance(model, ModelSpec) else None
    moe = spec.moe if spec is not None and w.moe_layers_here else None
    bandwidth = a.memory_bandwidth_efficiency * gpu.memory_bandwidth_bytes_per_s
    gguf = WEIGHT_FORMATS[job.weights].kernel == "gguf"
    q = bytes_per_param(job.weights)
    kernel_factor = _kernel_factor(job.weights, a, gpu)
    peak = a.compute_efficiency * gemm_peak_flops_per_s(gpu, job)
    n_params = _active_matmul_params(model)
    floor_s = _tile_floor_fn(model, gpu, layout, job.weights, share)
    # the LM head's parameters, which a prefill with last-position logits runs once per sequence, not per token
    head_params = 0.0
    if isinstance(model, ModelSpec) and engine_profile(job.engine).prefill_last_logits:
        head_params = float(model.vocab_size * model.hidden_size)
    profile = engine_profile(job.engine)
    materializes = profile.materializes_scores
    hidden = spec.hidden_size if spec is not None else 0
    launches = stage_layers * a.layer_overhead_s
    if spec is not None:
        kernels = layer_kernels(spec, stage_layers, w.moe_layers_here, job.engine)
        launches *= kernels / (stage_layers * DENSE_LAYER_KERNELS)
    overhead = engine_values(a, job, gpu).step_overhead_s
    expansion = gqa_expansion(spec, job.engine) if spec is not None else 1.0
    # a static cache is attended in full whatever the step's position (EngineProfile.static_kv_cache)
    static_tokens = static_cache_tokens(job) if profile.static_kv_cache else 0

    def step(decodes: float, context: int, prefill_tokens: float = 0.0, prompt: int = 0) -> tuple[float, str]:
        tokens = decodes + prefill_tokens
        read = w.total
        if moe is not None:
            touched = moe.experts * (1 - (1 - moe.experts_per_token / moe.experts) ** tokens)  # uniform routing
            read = w.total - w.experts + w.per_expert * touched * w.moe_layers_here
        t_dequant = 0.0
        if gguf and tokens > LLAMA_CPP_MMVQ_MAX_TOKENS:
            # llama.cpp above its GEMV batch: each quantized matrix is expanded to an fp16 copy (read the
            # quantized bytes, write 2 bytes a weight) and cuBLAS multiplies that copy (reads the 2 bytes again)
            f16_bytes = read * 2.0 / q
            t_dequant = (read + f16_bytes) / bandwidth
            read = f16_bytes
        else:
            read *= kernel_factor
        t_mem = read / bandwidth
        gemm_flops = tokens * 2 * n_params
        if head_params and prefill_tokens and prompt:
            gemm_flops -= (prefill_tokens - prefill_tokens / prompt) * 2 * head_params
        t_comp = max(gemm_flops * share / tp / peak, floor_s(tokens))
        t_attn = 0.0
        if spec is not None:
            attended = max(context, static_tokens)
            kv_read = decodes * kv_cache_bytes(spec, attended, job.kv_cache, tp) * share * expansion if decodes else 0.0
            attn = decodes * decode_attention_flops(spec, attended) if decodes else 0.0
            if prefill_tokens:
                if static_tokens:  # a mask over the whole cache: every score computed, none skipped
                    attn += prefill_tokens * attention_flops_forward(spec, max(prompt, static_tokens))
                else:
                    attn += prefill_tokens * attention_flops_forward(spec, prompt, causal=True)
            t_attn = max(kv_read / bandwidth, attn * share / tp / peak)
            if prefill_tokens and materializes:
                span = attended_span(prompt, None, causal=True)
                scores = prefill_tokens * span * spec.attention_heads * spec.layers * share / tp
                t_attn += scores * SCORE_BYTES_PER_ELEMENT / bandwidth
        message = tokens * hidden * 2
        comm = 2 * stage_layers * _allreduce_s(message, tp, gpu, a)
        t_stage = max(t_mem, t_comp) + t_dequant + t_attn + launches + comm
        t = pp * t_stage + (pp - 1) * _p2p_s(message, gpu, a) + overhead
        return t, "memory" if t_mem >= t_comp else "compute"

    return step


def decode_step_s(
    model: ModelSpec | ParamsOnlyModel,
    gpu: Accelerator,
    layout: ServingLayout,
    job: ServingJob,
    a: InferenceAssumptions,
    batch: int,
    context: int,
) -> tuple[float, str]:
    """One decode step for ``batch`` sequences at ``context`` tokens each, no prompt in the step."""
    return step_s(model, gpu, layout, job, a, batch, context)


def prefill_s(
    model: ModelSpec | ParamsOnlyModel,
    gpu: Accelerator,
    layout: ServingLayout,
    job: ServingJob,
    a: InferenceAssumptions,
    batch: int,
    prompt: int,
) -> float:
    """Prefill of ``batch`` prompts of ``prompt`` tokens in one step (a static batch; compute-bound at
    useful sizes): FLOPs = tokens x 2N + causal attention (``flops.attended_span``); an engine whose prefill is
    eager takes at least its host's dispatch of every layer (``eager_prefill_host_s_per_layer``)."""
    gpu_s = step_s(model, gpu, layout, job, a, 0, 0, batch * prompt, prompt)[0]
    host = engine_profile(job.engine).eager_prefill_host_s_per_layer
    if host and isinstance(model, ModelSpec):
        return max(gpu_s, host * model.layers)
    return gpu_s


def chunked_prefill_s(
    model: ModelSpec | ParamsOnlyModel,
    gpu: Accelerator,
    layout: ServingLayout,
    job: ServingJob,
    a: InferenceAssumptions,
    prompt: int,
    decodes: float,
    context: int,
) -> float:
    """One prompt prefilled in chunks of the step's token budget left beside ``decodes`` running sequences
    (vLLM/SGLang chunked prefill, TRT-LLM max_num_tokens): each chunk is one mixed step."""
    step = _step_fn(model, gpu, layout, job, a)
    return _chunked_prefill(step, engine_values(a, job, gpu).token_budget, prompt, decodes, context)


def _chunked_prefill(step: StepFn, token_budget: int, prompt: int, decodes: float, context: int) -> float:
    """``chunked_prefill_s`` on a bound step function (``_step_fn``)."""
    room = max(1.0, token_budget - decodes)
    full, rest = divmod(prompt, room)
    t = 0.0
    if full:
        t += full * step(decodes, context, room, prompt)[0]
    if rest >= 1 or not full:
        t += step(decodes, context, max(1.0, rest), prompt)[0]
    return t


def closed_loop_prefill_wait_s(users: int, prefill_s: float, decode_phase_s: float) -> float:
    """Mean wait of a prompt for the engine's prefill in a closed loop of ``users`` sequences (each sends its
    next request when the last one ends: GenAI-Perf's --concurrency, vllm bench serve --max-concurrency), in s.

    A step packs at most the token budget of prompt tokens (vLLM's scheduler, TRT-LLM max_num_tokens;
    Sarathi-Serve section 4: prefill chunks share a step's budget with the decodes), so prompts that arrive
    while another prompt is being prefilled wait for it: the prefills form one first-come-first-served server
    of deterministic service ``prefill_s`` (DistServe, Zhong et al. OSDI 2024, section 3.1, models the prefill
    instance as an M/D/1 queue). The arrivals are not Poisson: a fixed number of users each return after
    their decode phase (``decode_phase_s``, (O - 1) x TPOT), a closed network of a delay station and that
    server. Mean value analysis solves it exactly for exponential service (Reiser & Lavenberg, "Mean-value
    analysis of closed multichain queuing networks", JACM 27 (1980) 313-322; the arrival theorem: an arriving
    request sees the network in equilibrium with one user fewer); for a deterministic server the one in
    service is met halfway on average (residual S/2: Reiser's approximation for FCFS non-exponential
    service, as Lazowska et al., "Quantitative System Performance", 1984, section 7.2 give it):

        R(n) = S + S (Q(n-1) - U(n-1)) + U(n-1) S / 2,   X(n) = n / (R(n) + Z),   Q = X R,   U = X S

    ``prefill_s`` is the work the prefill queue serves per prompt: what its chunks add to the steps they ride
    on (serving_plan's ``prefill_work``). The wait is R(N) - S, at least N S - Z - S: the server prefills
    at most 1/S prompts a second, so the cycle R + Z is at least N S (the asymptotic bound of a closed
    network, Lazowska et al. section 5.3), where the residual S/2 undercounts (a saturated loop's request
    meets the one in service at its start). Unlike an M/D/1 queue at the same rate it stays finite (N - 1
    prompts ahead at most), and a few users returning after a long decode phase rarely meet each other. A
    discrete-event simulation of the loop agrees within 10 % (tests/test_serving_load.py).
    """
    if users <= 1 or prefill_s <= 0:
        return 0.0
    queue = busy = 0.0
    response = prefill_s
    for n in range(1, int(users) + 1):
        response = prefill_s + prefill_s * max(0.0, queue - busy) + busy * prefill_s / 2
        rate = n / (response + decode_phase_s)
        queue, busy = rate * response, min(1.0, rate * prefill_s)
    return max(response, users * prefill_s - decode_phase_s) - prefill_s


#: Tokens per KV-cache block of paged engines: vLLM's default block_size 16 (vllm/config/cache.py).
KV_BLOCK_TOKENS = 16
#: Beyond this multiple of its trained context a model is not run: YaRN factor 4 is the largest
#: extension model cards recommend (Qwen3: 32,768 native, 131,072 with YaRN factor 4).
MAX_CONTEXT_EXTENSION = 4


# ----------------------------------------------------------------------------------------- the plan


def _check_serving_ranges(layout: ServingLayout, job: ServingJob) -> None:
    """Counts, token lengths and latency targets within the ranges of ``units.py`` (beyond them the
    estimates overflow or mean nothing): a QuantityError naming the flag."""
    for flag, gpus in (("--tp", layout.tp), ("--pp", layout.pp), ("--replicas", layout.replicas)):
        check_range(gpus, flag, 1, MAX_GPUS)
    check_range(layout.gpus_per_replica * layout.replicas, "GPUs (tp x pp x replicas)", 1, MAX_GPUS)
    for flag, tokens in (
        ("--prompt-tokens", job.prompt_tokens),
        ("--output-tokens", job.output_tokens),
        ("--context", job.context),
    ):
        if tokens is not None:
            check_range(tokens, flag, 1, MAX_SEQ_TOKENS)
    for flag, batch in (("--batch", job.batch), ("--concurrency", job.concurrency)):
        if batch is not None:
            check_range(batch, flag, 1, MAX_BATCH)
    for flag, seconds in (("--max-tpot", job.max_tpot_s), ("--max-ttft", job.max_ttft_s)):
        if seconds is not None:
            check_range(seconds, flag, MIN_DURATION_S, MAX_DURATION_S, why="seconds, from 1 us to 1000 years")


def serving_plan(
    model: ModelSpec | ParamsOnlyModel,
    gpu: Accelerator,
    layout: ServingLayout,
    job: ServingJob,
    assumptions: InferenceAssumptions | None = None,
    qps: float | None = None,
    replicas: int | None = None,
) -> ServingReport:
    """Memory, latency and throughput of one replica; the batch is --batch/--concurrency, else the largest
    that fits memory and meets --max-tpot / --max-ttft (1 when none is given and nothing else limits).

    Continuous batching (a server engine, or --concurrency) is planned in steady state: every step decodes
    one token for each running sequence and packs the prompts of arriving requests into the rest of the
    step's token budget (chunked prefill), so a prompt shares the weight read, the launches and the step
    overhead of the decode steps it rides on. With B sequences running, each of output O, a request arrives
    per O/B steps, so a step carries (B - 1) x P / O prompt tokens of the others on average (the time per
    output token a request sees); its own prompt takes ceil(P / (budget - B)) mixed steps (its TTFT). The
    requests per second follow from Little's law: B / (TTFT + (O - 1) x TPOT). Where the budget cannot
    carry the prompts of B sequences, fewer run at once (the rest wait). The mean step is taken at the mean
    prompt tokens per step: splitting it into decode-only and prompt-carrying steps (convex step time, so a
    longer mean) overshot the NIM ITL series of the validation set (c25/c50: +20/+24 % against -9/+10 %).

    Under load (``qps``, Poisson arrivals; ``_under_load``): the fleet is the fewest replicas (or
    ``replicas``) that keep each at or below ``max_utilization`` of its saturation rate (every slot busy) and
    the mean loaded TPOT/TTFT within the targets; at its rate per replica lambda, n = max(1, lambda S(n))
    sequences run (Little's law; S, the request latency, grows with n through the decodes and the prompts
    packed beside them), and a request waits for a slot as in a G/G/c queue (Allen-Cunneen with Sakasegawa's
    M/M/c term, ``estimate/queueing.py``), then for the prompts ahead of it as in an M/D/1 queue of their
    prefill work (``_under_load``'s ``prefill_wait``; DistServe's model of a prefill instance).
    ``ttft_s``/``tpot_s``/``request_latency_s`` become those means (``load`` has the utilization and the
    q90/q99 percentiles: the running count's Poisson quantiles for TPOT and the service, plus the waits'
    quantiles, for TTFT); ``*_unloaded_s`` keep the replica's own. A closed
    loop (--concurrency N above the slots) waits S (N / slots - 1) per request (Little's law): reported as
    ``queue_wait_s`` beside TTFT, not in it, because it rests on the slot count of the KV estimate (a benchmark
    that times TTFT from the send sees the sum: ``gpuplan validate`` compares that). On NIM's published 70B fp8
    runs (TensorRT-LLM, fp8 KV, whole output reserved) 91 slots (93 before the engine's float32 logits buffer and
    its workspace sized at max_num_tokens were counted) against the ~86 that their throughput and ITL imply give
    the sum -22 % (was -37 %) at concurrency 100 and +5 % (was +4 %) at 250. Inside the slots, a closed loop's prompts
    also queue for the prefill: the steps serve the prompts' work (what a prompt's chunks add to the steps
    they ride on, ``prefill_work``) one after another, so ``prefill_wait_s`` (mean value analysis,
    ``closed_loop_prefill_wait_s``) is in ``ttft_s`` and the request latency. On the same runs TTFT at
    concurrency 5/25/50 goes from -17/-34/-45 % (no prefill queue) to -9/+13/+8 %; an M/D/1 queue at the
    loop's rate (Poisson arrivals) overshot 25 and 50 by +33 %. What is left follows the prefill (+11 % at
    concurrency 1) and the TPOT (-19 % at 25: the loop's rate) that the queue is given.

    KV memory: a continuous batch holds each sequence's prompt and, on average over its life, half its
    output (paged KV: blocks are allocated as tokens arrive and freed at the end), so the plan reserves
    P + O/2 tokens per sequence, rounded up to a block; a static batch (or --context) reserves the whole
    sequence. More requests than fit run as many as fit (the rest queue), which a note says.
    """
    if not isinstance(model, ModelSpec):
        raise JobError("serving estimates need the architecture (KV cache, attention); give a model id or config.json")
    _check_serving_ranges(layout, job)
    if job.weights == "fp8" and not gpu.supports("fp8"):
        raise JobError(f"{gpu.id} has no fp8 path; use --weights bf16, int8 or an int4 format")
    if layout.pp > model.layers:
        raise JobError(f"--pp {layout.pp} is more than the model's {model.layers} layers")
    if model.attention_heads % layout.tp:
        raise JobError(f"tp({layout.tp}) must divide {model.id}'s {model.attention_heads} attention heads")
    a = assumptions_for(job, assumptions, gpu)
    ev = engine_values(a, job, gpu)
    profile = engine_profile(job.engine)
    w = weight_bytes(model, job.weights, layout)
    seq = job.sequence_tokens
    notes: list[str] = []
    if seq > MAX_CONTEXT_EXTENSION * model.context_length:
        raise JobError(
            f"prompt + output = {seq} tokens exceeds {MAX_CONTEXT_EXTENSION} x {model.id}'s context length "
            f"{model.context_length} (beyond any RoPE extension model cards recommend)"
        )
    if seq > model.context_length:
        notes.append(
            f"prompt + output = {seq:,} tokens is beyond {model.id}'s context length {model.context_length:,}: "
            "the engine needs a RoPE extension (YaRN) or stops generating at the context length"
        )
    prompt, output = job.prompt_tokens, job.output_tokens
    share = _stage_share(model, layout)[1]
    if job.continuous and job.context is None and not profile.reserves_output:
        occupancy = min(seq, prompt + math.ceil(output / 2))
        occupancy = min(seq, math.ceil(occupancy / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS)
    else:
        occupancy = seq
    per_seq_kv = kv_cache_bytes(model, occupancy, job.kv_cache, layout.tp) * share
    chunk = ev.token_budget if profile.workspace_at_budget else min(ev.token_budget, max(seq, prompt))
    ffn = max(model.ffn_size, model.moe.expert_ffn_size * model.moe.experts_per_token if model.moe else 0)
    act_per_token = (4 * model.hidden_size + 3 * ffn / layout.tp) * 2  # hidden states and the MLP's widest tensors
    act = chunk * act_per_token
    # an engine without a scheduler prefills a static batch in one call (prefill_s: one step of batch x prompt
    # tokens), so its workspace holds the activations of every prompt at once: each sequence beyond
    # max(seq, prompt) / prompt adds its prompt's share (measured: Llama 3.1 8B, batch 64 x 2048 on an H200,
    # peak allocated 49.6 GB against weights 16.1 + KV 17.9 + 15.6 GB of prefill activations; inference.md)
    whole_batch = not job.continuous and job.engine in STATIC_ENGINES and prompt * act_per_token > 0
    parts: dict[str, float] = {"weights": w.total, "activations_workspace": act, "cuda_context": a.cuda_context_bytes}
    groups = {"weights": "weights", "activations_workspace": "activations", "cuda_context": "other"}
    if profile.logits_bytes and ev.max_num_seqs:
        parts["logits_buffer"] = float(ev.max_num_seqs * model.vocab_size * profile.logits_bytes)
        groups["logits_buffer"] = "activations"
    if profile.cuda_graphs:
        parts["cuda_graphs"] = a.cuda_graph_bytes
        groups["cuda_graphs"] = "other"
    if layout.tp > 1 or layout.pp > 1:
        parts["nccl_buffers"] = 256 * MiB
        groups["nccl_buffers"] = "other"
    capacity = gpu.usable_memory_bytes
    if profile.memory_rule == "free":
        planning = float(capacity)
        free_for_kv = ev.gpu_memory_utilization * (capacity - sum(parts.values()))
    else:
        planning = capacity * ev.gpu_memory_utilization
        free_for_kv = planning - sum(parts.values())
    max_seqs = max(0, int(free_for_kv // per_seq_kv)) if per_seq_kv else 0
    if whole_batch and per_seq_kv and max_seqs * prompt > chunk:
        # past the batch whose prompts fit the one-sequence workspace, each sequence costs its KV and its
        # prompt's activations: B (kv + P a) <= free + chunk a
        max_seqs = max(chunk // prompt, int((free_for_kv + act) // (per_seq_kv + prompt * act_per_token)))
    if job.continuous and job.context is None and not profile.reserves_output:
        notes.append(
            f"KV cache planned at mean occupancy (paged KV): {occupancy:,} tokens per sequence (prompt + half "
            f"the output), room for {max_seqs:,} sequences"
        )
    elif job.continuous and job.context is None:
        notes.append(
            f"KV cache reserved for the whole sequence at admission ({profile.name}: no eviction): {occupancy:,} "
            f"tokens per sequence, room for {max_seqs:,} sequences"
        )

    def running(batch: int) -> float:
        """Sequences decoding at once: the batch, or fewer where the step's token budget cannot also carry
        the prompts that keep them fed (B + (B - 1) P / O <= budget)."""
        if not job.continuous:
            return float(batch)
        ratio = prompt / output
        return max(1.0, min(float(batch), (ev.token_budget + ratio) / (1 + ratio)))

    mean_ctx = prompt + output // 2
    step = _step_fn(model, gpu, layout, job, a)  # step_s of this replica, bound once (hundreds of calls under load)

    def at(b: float) -> tuple[float, float, float, str]:
        """(ttft, mean tpot, request latency, bound) with ``b`` sequences running (continuous batching)."""
        others = (b - 1) * prompt / output  # the other requests' prompt tokens in each step
        tpot, bound = step(b, mean_ctx, others, prompt)
        ttft = _chunked_prefill(step, ev.token_budget, prompt, b - 1, mean_ctx) + a.request_overhead_s
        return ttft, tpot, ttft + (output - 1) * tpot, bound

    def prefill_work(b: float) -> float:
        """The time a prompt's chunks add to the steps they ride on with ``b`` sequences running (the work
        the prefill queue serves): its mixed steps less the same steps without it. A short prompt riding a
        memory-bound decode step adds little; a long one is its own compute-bound steps."""
        decodes = max(0.0, b - 1)
        with_prompt = _chunked_prefill(step, ev.token_budget, prompt, decodes, mean_ctx)
        if decodes < 1:
            return with_prompt
        chunks = math.ceil(prompt / max(1.0, ev.token_budget - decodes))
        return max(0.0, with_prompt - chunks * step(decodes, mean_ctx, 0.0, 0)[0])

    def latency(batch: int) -> tuple[float, float, float, str, float]:
        """(ttft, mean tpot, request latency, bound, running sequences) for a batch of ``batch``."""
        if not job.continuous:
            tpot, bound = decode_step_s(model, gpu, layout, job, a, batch, mean_ctx)
            ttft = prefill_s(model, gpu, layout, job, a, batch, prompt) + a.request_overhead_s
            return ttft, tpot, ttft + (output - 1) * tpot, bound, float(batch)
        b = running(batch)
        return (*at(b), b)

    def meets(batch: int) -> bool:
        ttft, tpot, _, _, _ = latency(batch)
        return (job.max_tpot_s is None or tpot <= job.max_tpot_s) and (job.max_ttft_s is None or ttft <= job.max_ttft_s)

    requested = job.batch or job.concurrency
    engine_cap = ev.max_num_seqs if (ev.max_num_seqs and job.engine not in STATIC_ENGINES) else max_seqs
    cap = max(1, min(max_seqs, engine_cap))
    if requested:
        batch = requested
        if job.continuous and requested > cap and max_seqs >= 1:
            batch = cap
            why = f"max_num_seqs={ev.max_num_seqs}" if cap < max_seqs else "the KV cache"
            notes.append(
                f"{requested} requests in flight but {why} holds {cap} at once: {cap} run, the rest wait in "
                "the queue (TTFT here excludes the wait; latency.queue_wait_s has it, Little's law on the closed loop)"
            )
    elif job.max_tpot_s is not None or job.max_ttft_s is not None:
        lo, hi = 0, cap  # largest batch in [1, cap] that meets the targets (latency grows with the batch)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if meets(mid):
                lo = mid
            else:
                hi = mid - 1
        batch = max(1, lo)
        if not lo:
            notes.append("no batch meets the latency targets; showing batch 1")
    elif job.continuous:
        batch = cap
        cap_rule = f"max_num_seqs={ev.max_num_seqs}" if ev.max_num_seqs else "the KV cache"
        notes.append(
            f"no --batch/--concurrency/--max-tpot: the server runs as many sequences as fit, up to "
            f"{cap_rule}: {max_seqs if max_seqs < 1 else batch}" + (" (none fit; shown for 1)" if max_seqs < 1 else "")
        )
    else:
        batch = 1
    parts["kv_cache"] = per_seq_kv * batch
    if whole_batch:
        parts["activations_workspace"] = max(chunk, min(ev.token_budget, batch * prompt)) * act_per_token
    groups["kv_cache"] = "kv_cache"
    ttft, tpot, total, bound, live = latency(batch)
    if job.continuous and live < batch:
        notes.append(
            f"the token budget ({ev.token_budget:,} per step) carries the prompts of {live:.0f} "
            f"sequences at once, not {batch}: the others wait"
        )
    prefill_wait = 0.0
    if job.continuous and job.concurrency and job.concurrency > 1:
        # the prompts of the closed loop's users queue for the prefill (closed_loop_prefill_wait_s): the
        # users in the engine are the running sequences, the rest wait for a slot (queue_wait_s below)
        users = min(job.concurrency, math.floor(live))
        prefill_wait = closed_loop_prefill_wait_s(users, prefill_work(live), (output - 1) * tpot)
        ttft, total = ttft + prefill_wait, total + prefill_wait
        if prefill_wait > 0:
            notes.append(
                f"TTFT includes {prefill_wait * 1e3:,.0f} ms waiting for the prompts ahead to be prefilled "
                f"({users} users in a closed loop: mean value analysis)"
            )
    requests_per_s = live / total
    # a closed loop (--concurrency N: N requests always in flight) with fewer slots than N: each request
    # waits S (N / slots - 1) for a slot (Little's law on the saturated cycle, estimate/queueing.py)
    wait = 0.0
    if job.continuous and job.concurrency and job.concurrency > live:
        wait = float(closed_loop_wait(job.concurrency, live, total))
    # the share of the replica's time the prompts cost: what the steps take beyond decoding alone
    decode_only = decode_step_s(model, gpu, layout, job, a, max(1, round(live)), prompt + output // 2)[0]
    decode_time = output * decode_only / max(1.0, live)
    prefill_share = min(1.0, max(0.0, 1 - decode_time * requests_per_s))
    report = ServingReport(
        parts=MappingProxyType(parts),
        groups=MappingProxyType(groups),
        capacity_bytes=capacity,
        planning_bytes=planning,
        max_concurrent_sequences=max_seqs,
        batch=batch,
        ttft_s=ttft,
        tpot_s=tpot,
        request_latency_s=total,
        tokens_per_s=requests_per_s * output,
        requests_per_s=requests_per_s,
        decode_bound=bound,
        prefill_share=prefill_share,
        reasons=(),
        assumptions=tuple(a.items()),
        notes=tuple(notes),
        engine_profile=profile.name,
        running_sequences=live,
        kv_tokens_per_sequence=occupancy,
        prefill_tokens_per_step=(live - 1) * prompt / output if job.continuous else 0.0,
        ttft_unloaded_s=ttft,
        tpot_unloaded_s=tpot,
        request_latency_unloaded_s=total,
        queue_wait_s=wait,
        prefill_wait_s=prefill_wait,
    )
    if qps is not None and report.fits:
        check_range(qps, "--qps", MIN_QPS, MAX_QPS, why="requests per second")
        slots = running(requested or cap) if job.continuous else float(batch)
        fixed = latency(batch)[:3] if not job.continuous else None
        load = _under_load(
            qps,
            slots,
            (lambda b: fixed) if fixed else (lambda b: at(b)[:3]),
            job,
            a,
            replicas,
            None if fixed else prefill_work,
        )
        report = replace(
            report,
            ttft_s=load.ttft_s if load.ttft_s is not None else math.inf,
            tpot_s=load.tpot_s,
            request_latency_s=load.request_latency_s if load.request_latency_s is not None else math.inf,
            queue_wait_s=load.wait_s if load.wait_s is not None else math.inf,
            load=load,
        )
    reasons = []
    if not report.fits:
        what = "the weights alone" if w.total > planning else f"a batch of {batch} at {occupancy:,} tokens"
        reasons.append(
            f"need {report.total_bytes / GiB:.1f} GiB > {planning / GiB:.1f} GiB planned on {gpu.id} "
            f"({what}); add tensor parallelism (--tp) or quantize (--weights, --kv-cache)"
        )
    where = ""
    if report.load is not None:
        ld = report.load
        where = (
            f" under load ({ld.requests_per_s:.3g} requests/s per replica of {ld.replicas}, utilization "
            f"{ld.utilization:.0%})"
        )
    tpot, ttft = report.tpot_s, report.ttft_s
    if job.max_tpot_s is not None and tpot > job.max_tpot_s:
        reasons.append(f"time per output token {tpot * 1e3:.1f} ms{where} > --max-tpot {job.max_tpot_s * 1e3:.1f} ms")
    if job.max_ttft_s is not None and ttft > job.max_ttft_s:
        shown = f"{ttft * 1e3:.0f} ms" if math.isfinite(ttft) else "unbounded (the queue grows)"
        reasons.append(f"time to first token {shown}{where} > --max-ttft {job.max_ttft_s * 1e3:.0f} ms")
    return replace(report, reasons=tuple(reasons))


#: Bisection steps of the load model (continuous sequence counts and rates): 2^-40 of the range.
_BISECTION_STEPS = 40


def _under_load(
    qps: float,
    slots: float,
    service: Callable[[float], tuple[float, float, float]],
    job: ServingJob,
    a: InferenceAssumptions,
    replicas: int | None = None,
    prefill_work: Callable[[float], float] | None = None,
) -> LoadedLatency:
    """The fleet for ``qps`` and the latency one replica sees under it (``serving_plan``'s docstring).

    ``service(n)`` is (ttft, mean tpot, request latency) with ``n`` sequences running; ``slots`` the most
    that run at once. Continuous batching: a request arriving at rate lambda finds n = max(1, lambda S(n))
    sequences running (Little's law, solved by bisection; S grows with n, as the steps carry more decodes
    and more packed prompts); a static batch's times do not depend on the load. Either way the replica
    saturates at capacity = slots / S(slots) requests per second and waits for a slot as G/G/c with c =
    slots (estimate/queueing.py). The fleet is the fewest replicas whose rate keeps every replica at or below
    ``max_utilization`` of its capacity and the mean loaded TPOT/TTFT within --max-tpot/--max-ttft; with
    ``replicas`` given, the load is that fleet's (``limited_by`` "given"; at or above saturation the running
    sequences are the slots and the wait is unbounded)."""
    continuous = job.continuous
    s_full = service(slots)
    capacity = slots / s_full[2]
    rho_max, ca2, cs2 = a.max_utilization, a.arrival_scv, a.service_scv

    def wait(lam: float) -> float:
        return float(mean_wait(lam / capacity, slots, s_full[2], ca2, cs2))

    def prefill_wait(lam: float, n: float, p: float | None = None) -> float:
        """The wait of a prompt for the prompts ahead with ``n`` sequences running: the steps serve the
        prompts' work (``prefill_work(n)``, fixed) first come first served, Poisson arrivals: M/D/1
        (Pollaczek-Khinchine, ``mean_wait`` with cs2 = 0), as DistServe models a prefill instance (Zhong et
        al., OSDI 2024, section 3.1). Its ``p`` quantile where given. 0 for a static batch (its prompts are
        prefilled with the batch)."""
        if prefill_work is None:
            return 0.0
        service_s = prefill_work(n)
        if service_s <= 0:
            return 0.0
        if p is None:
            return float(mean_wait(lam * service_s, 1, service_s, ca2, 0.0))
        return float(wait_quantile(p, lam * service_s, 1, service_s, ca2, 0.0))

    failed = ["max_utilization"]  # the last target a rate above the best one failed

    def ok(lam: float, ttft: float, tpot: float, n: float = 1.0) -> bool:
        why = (
            "max_utilization"
            if lam > rho_max * capacity * (1 + 1e-12)
            else "max_tpot"
            if job.max_tpot_s is not None and tpot > job.max_tpot_s
            else "max_ttft"
            if job.max_ttft_s is not None and ttft + wait(lam) + prefill_wait(lam, n) > job.max_ttft_s
            else ""
        )
        if why:
            failed[0] = why
        return not why

    s_one = service(1.0) if continuous else s_full
    lam_one = 1 / s_one[2] if continuous else capacity  # the highest rate at which one sequence runs alone
    if continuous and slots > 1 and ok(lam_one, *s_one[:2]):
        lo, hi = 1.0, slots  # the most sequences running at a rate that meets the targets
        if ok(slots / s_full[2], *s_full[:2], slots):
            lo = slots
        for _ in range(_BISECTION_STEPS if lo < hi else 0):
            mid = (lo + hi) / 2
            f = service(mid)
            lo, hi = (mid, hi) if ok(mid / f[2], f[0], f[1], mid) else (lo, mid)
        best = lo / service(lo)[2]
    elif ok(lam_one * 1e-9, *s_one[:2]):
        lo, hi = 0.0, min(lam_one, capacity)  # the highest rate at the unloaded figures
        for _ in range(_BISECTION_STEPS + 20):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if ok(mid, *s_one[:2]) else (lo, mid)
        best = lo
    else:  # no load meets the targets: size for the utilization alone (the reasons say what fails)
        best = rho_max * capacity
    limited_by = failed[0] if replicas is None else "given"
    if replicas is None:
        replicas = max(1, math.ceil(qps / best * (1 - 1e-12)))
    lam = qps / replicas

    if continuous:
        if lam * s_one[2] <= 1:
            n = 1.0
        elif lam * s_full[2] >= slots:
            n = slots
        else:
            lo, hi = 1.0, slots
            for _ in range(_BISECTION_STEPS):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if lam * service(mid)[2] > mid else (lo, mid)
            n = hi
    else:
        n = min(slots, lam * s_full[2])
    rho = lam / capacity
    here = service(n) if continuous else s_full
    w = wait(lam) + prefill_wait(lam, n)
    finite = math.isfinite(w)
    quantiles: dict[str, tuple[float | None, float]] = {}
    for q, p in (("q90", 0.90), ("q99", 0.99)):
        f = service(min(slots, float(poisson_quantile(n, q)))) if continuous else s_full
        # the two waits' quantiles added: at least the sum's quantile (the safe side)
        wq = float(wait_quantile(p, rho, slots, s_full[2], ca2, cs2)) + prefill_wait(lam, n, p)
        quantiles[q] = (f[0] + wq if math.isfinite(wq) else None, f[1])
    pw = prefill_wait(lam, n)
    return LoadedLatency(
        qps=qps,
        replicas=replicas,
        requests_per_s=lam,
        capacity_requests_per_s=capacity,
        slots=slots,
        utilization=rho,
        max_utilization=rho_max,
        running_sequences=n,
        wait_s=w - pw if finite else None,
        ttft_s=here[0] + w if finite else None,
        tpot_s=here[1],
        request_latency_s=here[2] + w if finite else None,
        ttft_q90_s=quantiles["q90"][0],
        ttft_q99_s=quantiles["q99"][0],
        tpot_q90_s=quantiles["q90"][1],
        tpot_q99_s=quantiles["q99"][1],
        limited_by=limited_by,
        prefill_wait_s=pw if math.isfinite(pw) else None,
    )


@dataclass(frozen=True)
class Fleet:
    """The replicas (and GPUs) that serve a request rate, with the seed rule of thumb beside them."""

    replicas: int
    gpus: int
    rule_of_thumb_gpus: float | None  # None without a request rate (or without throughput): not computable


def fleet_for(report: ServingReport, layout: ServingLayout, job: ServingJob, qps: float | None) -> Fleet:
    """Replicas for a request rate: the load model's (``report.load``, from ``serving_plan(..., qps=)``: the
    fewest replicas within the utilization cap and the latency targets under load), else ceil(qps / requests
    per second per replica) at full capacity; the seed rule beside it: GPUs = output_tokens / throughput per
    GPU x queries per minute / 60."""
    if qps is None:
        return Fleet(layout.replicas, layout.replicas * layout.gpus_per_replica, None)
    check_range(qps, "--qps", MIN_QPS, MAX_QPS, why="requests per second")
    if report.load is not None and report.load.qps == qps:
        replicas = report.load.replicas
    else:
        replicas = max(1, math.ceil(qps / report.requests_per_s)) if report.requests_per_s > 0 else 0
    per_gpu = report.tokens_per_s / layout.gpus_per_replica
    rule = job.output_tokens / per_gpu * (qps * 60) / 60 if per_gpu else None
    return Fleet(replicas, replicas * layout.gpus_per_replica, rule)


def cost_per_million(
    report: ServingReport, layout: ServingLayout, job: ServingJob, usd_per_gpu_hour: float
) -> dict[str, Any]:
    """$ per hour per replica, and $ per million output and input tokens, splitting the replica time each
    request costs between its prefill (input) and its share of the decode steps (output)."""
    check_range(usd_per_gpu_hour, "--usd-per-gpu-hour", 0.0, MAX_USD_PER_HOUR)
    usd_per_s = usd_per_gpu_hour * layout.gpus_per_replica / 3600
    per_request = usd_per_s / report.requests_per_s if report.requests_per_s else float("inf")
    decode_share = 1 - report.prefill_share
    return {
        "usd_per_gpu_hour": usd_per_gpu_hour,
        "usd_per_hour": usd_per_s * 3600,
        "usd_per_million_output_tokens": per_request * decode_share / job.output_tokens * 1e6,
        "usd_per_million_input_tokens": per_request * (1 - decode_share) / job.prompt_tokens * 1e6,
        "usd_per_million_tokens_blended": per_request / (job.output_tokens + job.prompt_tokens) * 1e6,
    }
