"""Training step time from the layout: a predicted MFU instead of a guessed one.

One iteration on the busiest GPU, by part:
- matmuls at the fraction of dense peak the GPU reaches on large GEMMs: the accelerator's catalog figure
  ``matmul_efficiency`` (Bekman's "maximum achievable matmul FLOPS" table, stas00/ml-engineering
  compute/accelerator), else ``mamf.DEFAULT_MATMUL_EFFICIENCY``;
- attention: flash attention at its own efficiency on the causal half of the score and context matmuls
  (the FLOPs FlashAttention's causal kernels execute, and the count ``flops.py`` uses with ``causal=True``
  for the MFU numerator, so both sides count attention the same way and MFU stays at most 1), or the
  materialized s x s scores of eager/Megatron-2021 attention (all of them computed, then masked), whose
  softmax and dropout are memory-bound traffic; a flash kernel's backward recomputes the scores, 2.5x the forward
  FLOPs (``flash_backward_flops_ratio``), and where a GPU's kernels are measured well below the A100 share (the
  accelerator's catalog figure ``attention_flops_per_s``, with its own source) that measurement caps the rate;
  each query tile (forward) and key tile (backward) of a flash kernel also pays a fixed cost worth
  ``attention_forward_tile_tokens`` / ``attention_backward_tile_tokens`` more positions of its span, so short
  sequences run well below the long-sequence rate (measured on an H200, docs/measurements/kernels_h200.json);
- context parallelism as ring attention: each of the cp - 1 ring steps' K/V exchange (and dK/dV in the backward)
  behind that step's attention, what it cannot cover exposed, and the fp32 merge of partial outputs and
  accumulation of gradients as memory traffic;
- element-wise kernels (norms, residual adds, activation, dropout) as HBM traffic per token;
- tensor-parallel collectives: two all-reduces per layer forward and two backward (Megatron-LM, Shoeybi
  et al. 2019, section 3), at NCCL bus bandwidth (nccl-tests PERFORMANCE.md: t = S x 2(n-1)/n / busbw);
- the pipeline bubble: (p - 1) / v micro-batch times for p stages and v interleaved chunks (Narayanan et
  al. 2021, section 2.2), plus point-to-point sends between stages;
- data-parallel gradient reduction over the scale-out network (one NIC per GPU: the accelerator's catalog
  figure ``scale_out_bytes_per_s_per_gpu``, else :data:`DEFAULT_SCALE_OUT_BYTES_PER_S_PER_GPU`), exposed
  unless the framework overlaps it with backward;
- the optimizer step, memory-bound (about 30 bytes read and written per locally held parameter); with
  ``--offload optimizer|params`` it runs on the host instead (:func:`offload_step_s`: CPU-Adam at host memory
  bandwidth, the gradients down and parameters up PCIe, ZeRO-Infinity's per-layer parameter fetches);
- recomputation re-runs the forward (full) or the attention core (selective);
- the software stack (:data:`STACKS`, ``--stack``): fused element-wise kernels (Megatron/Transformer Engine, or
  ``--compile``) or PyTorch's eager ones, what overlaps by default, how ZeRO-3/FSDP gathers parameters;
- fp8 as it runs (:data:`FP8_RECIPES`): only the linear layers' GEMMs at the GPU's measured fp8 ceiling (the
  catalog's ``matmul_efficiency.fp8``), attention and the LM head at their 16-bit precision, and the
  quantization (amax, cast, transposed copies) as memory traffic;
- each GEMM on a roofline: the longer of its FLOPs at the matmul efficiency and its operand traffic at HBM
  bandwidth, so small micro-batches and MoE experts with few tokens turn memory-bound;
- MoE: the dispatch and combine all-to-all of each expert layer (forward and backward) over NVLink inside a
  node, the NICs across nodes; a token's hidden state travels once per routed expert, or once per destination
  rank under a deduplicating dispatcher such as DeepEP (``moe_dispatch_ranks_per_token``);
- with no global batch, the batch of :func:`default_global_batch_sequences`: published pretraining recipes by
  model size, or the fine-tuning recipes' sequences per step for LoRA/QLoRA;
- a power cap below the catalog TDP (``power_limit_w``) slows matmul and attention by (cap / TDP)^(1/3), or along
  the vendor's rating of the same GPU at a lower power where the catalog has one (:func:`power_clock_factor`);
  FlashAttention-2's mma.sync kernels stop at ``fa2_ceiling_flops_per_s`` on Hopper and Blackwell alike;
- MoE beyond the all-to-all: the token permutation around the experts (``moe_permute``, :func:`moe_permute_bytes`),
  the busiest expert rank's share (``moe_load_imbalance``), an fp8 dispatch (``--moe-dispatch-dtype``) and the
  exchange beside the paired micro-batch's compute (``--ep-comm-overlap``);
- Megatron's backward tensor-parallel collectives beside their GEMMs (:func:`_async_tp_backward_s`; not on
  ``megatron-2021``);
- PyTorch AMP's autocast casts of fp32 weights and their gradients (``amp_casts``), and LoRA's branch joining the base
  output (element-wise);
- NCCL's costs beyond bandwidth: an overlapped collective holds ``collective_sms`` SMs while it runs
  (``comm_sm_contention``), a ring takes NVLink steps as well as network steps, and FSDP2 copies every gathered
  parameter and gradient through HBM (``sharding_copies``, :attr:`StackProfile.sharding_copy_bytes_per_param`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from ..spec.accelerator import Accelerator
from ..spec.model import ModelSpec
from ..spec.training import Parallelism, TrainingJob
from . import xp
from .assumptions import AssumptionSet, check_assumptions
from .flops import attention_flops_forward, flops_per_token
from .machine import MachineAssumptions, cpu_cores_per_gpu
from .mamf import matmul_efficiency
from .memory import (
    FP4_BF16_TAIL_FRACTION,
    FSDP_REDUCE_BYTES,
    NF4_BYTES_PER_PARAM,
    MemoryAssumptions,
    Recipe,
    activation_bytes_per_layer,
    fp4_bf16_tail_layers,
    fsdp_reduce_bytes,
    lora_adapter_params,
    micro_batches_per_step,
    resolve_recipe,
    stack_job,
    stage_layers,
    trainable_linears,
)
from .params import count_params, linear_shapes
from .time import peak_for, training_dtype


@dataclass(frozen=True)
class StackProfile:
    """What a software stack does to the step: fused element-wise kernels, the data-parallel reduction
    overlapped with backward by default, ZeRO-3/FSDP parameter gathers prefetched behind compute, and how
    many collectives a layer's gather takes (one per block, or one per parameter tensor)."""

    name: str
    fused_elementwise: bool
    overlap_grad_reduce: bool
    prefetch_gathers: bool
    gather_per_tensor: bool
    source: str
    #: the stack's flash-attention kernels are written for Hopper's wgmma/TMA (cuDNN, FlashAttention-3, Transformer
    #: Engine), or FlashAttention-2's mma.sync; ``--attention-kernel`` overrides it. PyTorch's SDPA prefers cuDNN on
    #: sm90 and sm100 since 2.9 (pytorch/pytorch#162073; on an H200 with torch 2.11 both a bare causal SDPA call and
    #: a Hugging Face Llama's "sdpa" path run cuDNN's sm90 kernels: docs/measurements/hf_attention_kernels_h200.json),
    #: FlashAttention-2 up to 2.8 (pytorch/pytorch#142132)
    hopper_attention: bool = True
    #: HBM bytes per gathered parameter and micro-batch that FSDP2's per-parameter sharding copies: the all-gather
    #: copy-out into each unsharded parameter (read + write 16 bits, forward and backward gathers: 8 B) and the
    #: reduce-scatter copy-in of the unsharded gradient into the reduce dtype (read 2 B, write fp32 4 B: 6 B)
    sharding_copy_bytes_per_param: float = 0.0
    #: the model code repeats grouped-query K and V heads up to the query heads before the attention call
    #: (torchtitan models/llama3/model.py, Hugging Face's repeat_kv), so context parallelism's ring carries them so
    expands_gqa_kv: bool = False
    #: each gather's output is a list of one tensor per rank (DeepSpeed v0.3's torch.distributed.all_gather into
    #: narrow views), which PyTorch fills by one copy per rank after the collective: a per-rank cost per gather
    list_output_gathers: bool = False
    #: backward tensor-parallel collectives launched beside the same layer's GEMMs (Megatron's
    #: LinearWithGradAccumulationAndAsyncCommunication, :func:`_async_tp_backward_s`); elsewhere they run in turn
    async_tp_backward: bool = False
    #: MXFP8's row-wise and column-wise copies written by one quantize kernel (Transformer Engine's MXFP8Quantizer
    #: with both usages, transformer_engine/common/util/cast_kernels.cuh); elsewhere (torchao mx_formats: to_mx along
    #: dim0, then a separate Triton kernel along dim1) the column-wise copy is a second pass over the 16-bit tensor
    fused_mx_quantize: bool = False


#: The stacks ``--stack`` names; ``auto`` follows the memory recipe (:func:`resolve_stack`).
STACKS: Mapping[str, StackProfile] = MappingProxyType(
    {
        "megatron": StackProfile(
            "megatron",
            fused_elementwise=True,
            overlap_grad_reduce=False,
            prefetch_gathers=True,
            gather_per_tensor=False,
            async_tp_backward=True,
            fused_mx_quantize=True,
            source="Megatron-LM / NeMo with Transformer Engine: fused layer-norm+GEMM, bias-GeLU/SwiGLU, RoPE and "
            "softmax kernels; --overlap-grad-reduce is off unless set (megatron/training/arguments.py); the "
            "column-parallel layers' backward TP collectives run beside their GEMMs (tensor_parallel/layers.py)",
        ),
        "megatron-2021": StackProfile(
            "megatron-2021",
            fused_elementwise=True,
            overlap_grad_reduce=False,
            prefetch_gathers=True,
            gather_per_tensor=False,
            source="Megatron-LM as the 2021 paper ran it (Narayanan et al. 2021, v2.x): fused kernels as above, but "
            "each backward TP all-reduce in turn after its GEMM; the asynchronous one beside the weight-gradient "
            "GEMM came in September 2021 (Megatron-LM commit 16c90445, async_tensor_model_parallel_allreduce)",
        ),
        "fsdp2": StackProfile(
            "fsdp2",
            fused_elementwise=False,
            overlap_grad_reduce=True,
            prefetch_gathers=True,
            gather_per_tensor=False,
            sharding_copy_bytes_per_param=14.0,
            expands_gqa_kv=True,
            source="torchtitan-style PyTorch: eager RMSNorm/RoPE/SwiGLU unless --compile (torchtitan "
            "models/llama3/model.py); FSDP2 fully_shard per transformer block: one all-gather per block, "
            "prefetched, reduce-scatter overlapped with backward (torch.distributed.fsdp, Liang et al. 2024); "
            "per-parameter sharding copies every gathered parameter out of the all-gather buffer "
            "(_fsdp_collectives.foreach_all_gather_copy_out, split_with_sizes_copy) and every gradient into the "
            "reduce-scatter buffer in the reduce dtype (foreach_reduce, torch._chunk_cat; torchtitan reduces in "
            "float32)",
        ),
        "deepspeed": StackProfile(
            "deepspeed",
            fused_elementwise=False,
            overlap_grad_reduce=True,
            prefetch_gathers=True,
            gather_per_tensor=True,
            source="DeepSpeed ZeRO as it runs since 2022 (v0.6+): overlap_comm reduction; ZeRO-3 gathers each "
            "sub-module's parameters in one coalesced all_gather_into_tensor (partition_parameters.py "
            "all_gather_coalesced) and prefetches the next ones behind compute (PartitionedParameterCoordinator, "
            "stage3_prefetch_bucket_size)",
        ),
        "deepspeed-2021": StackProfile(
            "deepspeed-2021",
            fused_elementwise=False,
            overlap_grad_reduce=True,
            prefetch_gathers=False,
            gather_per_tensor=True,
            hopper_attention=False,
            list_output_gathers=True,
            source="DeepSpeed ZeRO-3 of 2021 (v0.3.x, the ZeRO-Infinity and Megatron-LM Table 2 era): each parameter "
            "gathered alone when its module runs, after a torch.cuda.synchronize (partition_parameters.py "
            "_allgather_param, v0.3.16), into a list of one view per rank, so PyTorch's list all_gather copies the "
            "result out rank by rank (ProcessGroupNCCL::allgather)",
        ),
        "hf": StackProfile(
            "hf",
            fused_elementwise=False,
            overlap_grad_reduce=True,
            prefetch_gathers=True,
            gather_per_tensor=False,
            expands_gqa_kv=True,
            source="Hugging Face Trainer / Accelerate: eager PyTorch modules, DDP bucketed all-reduce overlapped "
            "with backward",
        ),
        "jax": StackProfile(
            "jax",
            fused_elementwise=True,
            overlap_grad_reduce=True,
            prefetch_gathers=True,
            gather_per_tensor=False,
            source="MaxText-style JAX under XLA SPMD (AI-Hypercomputer/maxtext e591f30, "
            "src/maxtext/configs/base.yml): the whole step is one XLA program, so norms, RoPE, SwiGLU and the loss "
            "are compiled fusions and no Python dispatches kernels; scan_layers: true (line 387) scans one decoder "
            "layer, so FSDP's parameter all-gather is one collective per layer, which XLA's latency-hiding "
            "scheduler issues ahead of the layer that needs it, and the gradient reduce-scatter runs behind "
            "backward; attention: autoselected (line 392) runs the Pallas splash/flash kernel on TPU, and the GPU "
            "configs (configs/gpu/models/*.yml) set cudnn_flash_te, cuDNN's Hopper kernels; grouped K/V heads go "
            "to the kernel as they are",
        ),
    }
)


def resolve_stack(job: TrainingJob, layout: Parallelism, gpu: Accelerator | None = None) -> tuple[StackProfile, str]:
    """The stack profile ``job.stack`` names, else the one the accelerator or the memory recipe implies (a Google
    TPU: jax, the stack that trains on TPUs; --fsdp: fsdp2; Megatron recipes: megatron; ZeRO: deepspeed; plain data
    parallel: hf)."""
    if job.stack != "auto":
        return STACKS[job.stack], f"--stack {job.stack}"
    if gpu is not None and stack_job(job, gpu).stack == "jax":
        return STACKS["jax"], "auto (Google TPU: XLA-compiled JAX, MaxText-style); --stack to change"
    if job.fsdp:
        return STACKS["fsdp2"], "auto (--fsdp: PyTorch FSDP2, torchtitan-style); --stack to change"
    recipe, _ = resolve_recipe(job, layout)
    name = {"megatron": "megatron", "megatron-fp16": "megatron", "deepspeed": "deepspeed", "zero": "deepspeed"}.get(
        recipe.name, "hf"
    )
    return STACKS[name], f"auto (recipe {recipe.name}); --stack to change"


@dataclass(frozen=True)
class Fp8Recipe:
    """Bytes of HBM traffic an fp8 recipe adds per element it quantizes: ``cast`` for a 16-bit tensor turned
    into fp8 (amax and cast), ``transpose`` for the column-wise copy the weight-gradient GEMM needs where the
    GPU's fp8 GEMMs take only the TN layout (``fp8_gemm_any_layout`` false)."""

    name: str
    cast: float
    transpose: float
    source: str
    #: bytes per element of the column-wise copy where the stack writes it in a pass of its own (MXFP8 outside
    #: Transformer Engine, ``StackProfile.fused_mx_quantize`` false); None: ``transpose`` everywhere
    transpose_separate: float | None = None


#: fp8 scaling recipes. A 16-bit read is 2 B, an fp8 write 1 B.
FP8_RECIPES: Mapping[str, Fp8Recipe] = MappingProxyType(
    {
        "delayed": Fp8Recipe(
            "delayed",
            3.0,
            1.0,
            "Transformer Engine DelayedScaling (the NeMo/Megatron default to 2025): the scale comes from the amax "
            "history, the amax of this step is taken inside the cast kernel: read 2 B, write 1 B; cast_transpose "
            "writes the transposed copy in the same pass (+1 B)",
        ),
        "tensorwise": Fp8Recipe(
            "tensorwise",
            5.0,
            1.0,
            "torchao Float8Linear dynamic tensorwise (current) scaling: one pass for the amax (read 2 B), one to "
            "cast (read 2 B, write 1 B); the transposed copy +1 B (torchao float8 README)",
        ),
        "rowwise": Fp8Recipe(
            "rowwise",
            5.0,
            3.0,
            "torchao rowwise scaling: amax pass and cast per row (read 2 + 2 B, write 1 B); the weight-gradient "
            "operands are re-quantized along the other axis (read 2 B, write 1 B)",
        ),
        "blockwise": Fp8Recipe(
            "blockwise",
            3.0,
            3.0,
            "1x128 / 128x128 block scaling (DeepSeek-V3, arXiv:2412.19437 section 3.3; TE Float8BlockScaling): "
            "amax and cast fused per block (read 2 B, write 1 B), re-quantized along the other axis for wgrad",
        ),
        "mxfp8": Fp8Recipe(
            "mxfp8",
            3.0,
            1.0,
            "MXFP8 (OCP MX v1.0: 32-element blocks, e8m0 scales; TE MXFP8BlockScaling, torchao mx_formats): fused "
            "quantize (read 2 B, write 1 B + 1/32 B scale). The scales run along the reduction axis, so the "
            "weight-gradient GEMM needs a copy quantized along the other axis on every GPU: Transformer Engine "
            "writes it in the same kernel (+1 B); torchao casts along dim1 in a second kernel (TorchAO mx_formats "
            "README at d8bb51f6, 'to_mx cast across dim0 and dim1': read 2 B, write 1 B + 1/32 B scale again)",
            transpose_separate=3.0 + 1.0 / 32.0,
        ),
        # NVFP4 (--precision fp4-mixed): e2m1 values in 16-element blocks, one e4m3 scale per block (1/16 B) and an
        # fp32 scale per tensor: NVFP4_BYTES_PER_ELEMENT per quantized element
        "nvfp4": Fp8Recipe(
            "nvfp4",
            4.0 + 0.5625,
            0.5625,
            "NVFP4 training (NVIDIA, 'Pretraining Large Language Models with NVFP4', arXiv:2509.25149: "
            "1x16 blocks with e4m3 scales and a per-tensor fp32 scale, 16x16 blocks for weights, random Hadamard "
            "transforms on the weight-gradient GEMM's inputs, stochastic rounding of gradients) as torchao runs it "
            "(prototype/moe_training/nvfp4_training/nvfp4_linear.py, nvfp4_mm_triton at 36027d82): a per-tensor "
            "amax pass (read 2 B), then one fused kernel per operand (read 2 B) writes the row-wise codes for the "
            "forward or dgrad GEMM and the Hadamard-transformed column-wise codes for wgrad (0.5 B + 1/16 B scale "
            "each); inputs, weights (2D, row- and column-wise) and output gradients (stochastically rounded) alike",
        ),
    }
)


def resolve_fp8_recipe(job: TrainingJob, stack: StackProfile) -> Fp8Recipe | None:
    """The low-precision recipe of an fp8 job (``auto``: delayed on Megatron/TE and on JAX, whose MaxText fp8
    einsums scale from an amax history, maxtext src/maxtext/layers/quantizations.py Fp8Einsum; tensorwise elsewhere)
    or an fp4 job (``auto``: nvfp4, the one 4-bit training recipe a framework ships), None otherwise."""
    if job.precision == "fp4-mixed":
        return FP8_RECIPES["nvfp4" if job.fp8_recipe == "auto" else job.fp8_recipe]
    if job.precision != "fp8-mixed":
        return None
    if job.fp8_recipe != "auto":
        return FP8_RECIPES[job.fp8_recipe]
    return FP8_RECIPES["delayed" if stack.name in ("megatron", "megatron-2021", "jax") else "tensorwise"]


def fp4_matmul_efficiency(gpu: Accelerator) -> tuple[float, str]:
    """The fraction of the dense fp4 peak the best fp4 GEMM reaches, and where it comes from: the catalog's fp4 MAMF
    where it has one, else its fp8 one as the proxy (an NVFP4 GEMM runs on the same block-scaled tensor-core path as
    MXFP8 on Blackwell, tcgen05.mma with per-block scales, at twice the rate; no MAMF table measures fp4 yet), else
    the bf16 chain of :func:`matmul_efficiency`."""
    if gpu.matmul_efficiency.get("fp4") is not None:
        return matmul_efficiency(gpu, "fp4")
    if gpu.matmul_efficiency.get("fp8") is not None:
        value, src = matmul_efficiency(gpu, "fp8")
        return value, f"{src} (fp8 MAMF as the fp4 proxy: the same block-scaled tensor-core path; no fp4 MAMF)"
    return matmul_efficiency(gpu, "fp4")


#: Tokens per optimizer step when no global batch is given, by parameter count: GPT-3's batch sizes (Brown et al.
#: 2020, Table 2.1: 0.5M tokens to 760M parameters, 1M to 2.7B, 2M to 13B, 3.2M for 175B) and Llama 2's 4M tokens
#: for 7B-70B (Touvron et al. 2023, section 2.2) bracket them; the larger value is taken from 100B parameters.
DEFAULT_GLOBAL_BATCH_TOKENS: tuple[tuple[float, float], ...] = (
    (1e9, 0.5e6),
    (5e9, 1e6),
    (100e9, 2e6),
    (math.inf, 4e6),
)


def default_global_batch_tokens(params: float) -> float:
    """Tokens per step for a model of ``params`` parameters (:data:`DEFAULT_GLOBAL_BATCH_TOKENS`)."""
    for upto, tokens in DEFAULT_GLOBAL_BATCH_TOKENS:
        if params < upto:
            return tokens
    return DEFAULT_GLOBAL_BATCH_TOKENS[-1][1]


def global_batch_of(sequences: float, unit: int) -> int:
    """``sequences`` per step rounded to a whole number of ``unit`` (micro-batch x data-parallel) groups, at
    least one."""
    return xp.maximum(1, xp.rint(sequences / unit)) * unit


#: Sequences per optimizer step of a LoRA/QLoRA fine-tune when no global batch is given. Fine-tuning recipes state
#: their batch in examples (sequences), not tokens, and it does not grow with the model: the QLoRA paper's Guanaco
#: runs on OASST1 (Dettmers et al. 2023, as released in artidoro/qlora scripts/finetune_guanaco_{7b,13b,33b,65b}.sh:
#: per_device_train_batch_size 4 x gradient_accumulation_steps 4 on one GPU) take 16 at every size from 7B to 65B,
#: and torchtune's Llama 3.1 70B LoRA recipe (pytorch/torchtune recipes/configs/llama3_1/70B_lora.yaml:
#: batch_size 2 x gradient_accumulation_steps 1 x its 8 GPUs) is 16 as well. torchtune's other Llama 3.1 recipes
#: span 32 (8B_qlora_single_device: 2 x 16 on one GPU) to 128 (8B_lora: 2 x 32 on its 2 GPUs), and 405B_qlora is
#: 64 (1 x 8 on 8 GPUs): 16 is the batch the published fine-tuning comparison used, the low end of that range.
FINETUNE_GLOBAL_BATCH_SEQUENCES = 16


def default_global_batch_sequences(model: ModelSpec, job: TrainingJob) -> float:
    """Sequences per step when ``--global-batch`` is not given, before rounding to the layout.

    LoRA/QLoRA (``job.method``): :data:`FINETUNE_GLOBAL_BATCH_SEQUENCES` (QLoRA's Guanaco recipes, torchtune's
    LoRA configs). Full training: the pretraining rule, :func:`default_global_batch_tokens` / seq_len (GPT-3
    Table 2.1, Llama 2 section 2.2). The job does not say whether a full run pretrains or fine-tunes, so a full
    fine-tune takes the pretraining rule too; ``--global-batch`` sets its batch."""
    if job.method != "full":
        return float(FINETUNE_GLOBAL_BATCH_SEQUENCES)
    return default_global_batch_tokens(count_params(model).total) / job.seq_len


def default_global_batch_source(model: ModelSpec, job: TrainingJob) -> str:
    """Where :func:`default_global_batch_sequences` comes from, in words, for the report's ``global_batch_source``."""
    if job.method != "full":
        return (
            f"default: {FINETUNE_GLOBAL_BATCH_SEQUENCES} sequences per step for a {job.method} fine-tune (QLoRA's "
            "Guanaco recipes, torchtune's Llama 3.1 70B LoRA config), in whole micro-batch x dp groups; "
            "--global-batch to change"
        )
    return (
        f"default: {default_global_batch_tokens(count_params(model).total) / 1e6:g}M tokens per step for this "
        "model size (GPT-3 Table 2.1, Llama 2), in whole micro-batch x dp groups; --global-batch to change"
    )


def default_global_batch(model: ModelSpec, job: TrainingJob, layout: Parallelism) -> int:
    """Sequences per step when ``--global-batch`` is not given: :func:`default_global_batch_sequences`, rounded to a
    whole number of micro-batch x data-parallel groups (at least one)."""
    return global_batch_of(default_global_batch_sequences(model, job), job.micro_batch * layout.dp)


#: Inter-node bandwidth per GPU and direction, in bytes/s, assumed for a GPU whose catalog entry has no
#: ``scale_out_bytes_per_s_per_gpu``: one 200 Gb/s HDR InfiniBand NIC per GPU, ~24 GB/s of NCCL bus bandwidth
#: (NVIDIA/nccl#412, 2023-04).
DEFAULT_SCALE_OUT_BYTES_PER_S_PER_GPU = 24e9


@dataclass(frozen=True)
class StepAssumptions(AssumptionSet):
    """Efficiencies and traffic constants of the step-time model; each overridable, each with a source."""

    matmul_efficiency: float | None = None  # None: the GPU's MAMF fraction (catalog, else 0.75) x model_shape_factor
    model_shape_factor: float = 0.77
    flash_attention_efficiency: float = 0.55
    fa2_on_hopper_efficiency: float = 0.33
    fa2_ceiling_flops_per_s: float = 330e12
    flash_backward_flops_ratio: float = 2.5
    attention_forward_tile_tokens: float = 180.0
    attention_backward_tile_tokens: float = 510.0
    fa2_head_dim_overhead: float = 19.0
    hopper_attention_head_dim_overhead: float = 52.0
    attention_softmax_channels: float = 80.0
    attention_softmax_exp2_share: float = 0.40
    ring_merge_bytes_per_element: float = 38.0
    fused_ring_merge_bytes_per_element: float = 10.0
    ring_grad_bytes_per_element: float = 4.0
    power_limit_w: float | None = None  # None: the GPU's catalog TDP (no cap)
    collective_sms: float = 20.0
    hbm_efficiency: float = 0.85
    elementwise_bytes_per_token_hidden: float = 46.0
    eager_elementwise_bytes_per_token_hidden: float = 144.0
    score_bytes_per_element: float = 9.0
    link_efficiency: float = 0.77
    scale_out_bytes_per_s_per_gpu: float | None = None  # None: the GPU's catalog figure, else 24 GB/s (one HDR NIC)
    gpus_per_node: int = 8
    nvlink_domain_gpus: int | None = None  # None: the larger of gpus_per_node and the catalog's rack-scale domain
    collective_latency_s: float = 10e-6
    ring_step_latency_s: float = 14e-6
    intra_ring_step_latency_s: float = 3.4e-6
    optimizer_bytes_per_param: float = 30.0
    offload_pcie_efficiency: float = 0.8
    host_memory_bytes_per_s_per_gpu: float = 51.2e9
    host_cores_per_gpu: float | None = None  # None: the machine block's cores per GPU (default_host_cores_per_gpu)
    host_core_bytes_per_s: float = 10e9
    moe_dispatch_ranks_per_token: float | None = None  # None: one copy per routed expert (experts_per_token)
    eager_host_s_per_layer: float = 5.05e-3
    eager_loss_bytes_per_logit: float = 46.0
    megatron_loss_bytes_per_logit: float = 52.0
    fused_loss_bytes_per_logit: float = 10.0
    list_gather_s_per_rank: float = 5e-6
    moe_load_imbalance: float = 1.0
    fp4_bf16_tail_fraction: float = FP4_BF16_TAIL_FRACTION

    SOURCES = MappingProxyType(
        {
            "fp4_bf16_tail_fraction": (
                "fraction of decoder layers (the last ones, rounded up to whole layers)",
                "fp4 training keeps the final blocks in bf16: torchtitan's NVFP4 recipe 'leave approximately the "
                "final 15% of decoder blocks in BF16' and the LM head (torchtitan components/quantization/nvfp4.md; "
                "nvfp4.py nvfp4_bf16_tail_fqns keeps the last ceil(layers x 0.15), _NVFP4_BF16_TAIL_FRACTION in "
                "models/llama3/config_registry.py, b5bcd76c: Llama 3 8B layers 27-31 of 32, Qwen3 8B 30-35 of 36); "
                "NVIDIA's NVFP4 paper (arXiv:2509.25149, as nvfp4.md cites it) keeps fewer than ~15% of the final "
                "layers in BF16 (its 12B run also the first two blocks); 0 runs every decoder layer in fp4 (--assume "
                "sets the memory estimate's too)",
            ),
            "eager_loss_bytes_per_logit": (
                "bytes of HBM traffic per token per vocabulary entry, forward + backward",
                "the eager loss path counted from its code (transformers ForCausalLMLoss: logits.float(), "
                "cross_entropy = log_softmax + nll_loss): forward writes the 16-bit logits (2), upcasts them (read 2, "
                "write 4), log_softmax reads twice and writes (12); backward writes the dense nll gradient (4), "
                "log_softmax's backward reads gradient twice and output once and writes (16), the cast back reads 4 "
                "and writes 2: 46 bytes; a fused loss pays fused_loss_bytes_per_logit instead, Megatron's unfused one "
                "megatron_loss_bytes_per_logit",
            ),
            "list_gather_s_per_rank": (
                "seconds per rank of the group, per gathered tensor",
                "a list-output all_gather (DeepSpeed v0.3 ZeRO-3) costs, per rank, a Python narrow() of the flat "
                "buffer (partition_parameters.py _allgather_param) and a copy_ from PyTorch's flattened output "
                "(ProcessGroupNCCL::allgather), each a dispatched ATen op with a kernel launch for the copy: about "
                "half the 10.6 us per Python-issued ATen op measured on an H200 host (docs/measurements/"
                "kernel_counts_h200.json: 80.8 ms for 7,624 ops), since the copies are issued from C++; an estimate, "
                "not a measurement of DeepSpeed",
            ),
            "fused_loss_bytes_per_logit": (
                "bytes of HBM traffic per token per vocabulary entry (on this TP rank), forward + backward",
                "a fused cross-entropy as Liger-Kernel writes it (ops/cross_entropy.py, the design Transformer "
                "Engine's triton cross_entropy follows): forward reads each 16-bit logit for the online max and sum "
                "(2 B), then again to write its gradient in place (2 + 2 B); backward's element_mul_kernel scales "
                "that gradient by the loss gradient in place (2 + 2 B): 10 B. Charged with --cross-entropy-fusion "
                "and where a compiled stack fuses the loss",
            ),
            "megatron_loss_bytes_per_logit": (
                "bytes of HBM traffic per token per vocabulary entry (on this TP rank), forward + backward",
                "Megatron-Core's unfused vocab-parallel cross-entropy counted from its code (core_r0.8.0 "
                "tensor_parallel/cross_entropy.py): forward upcasts the 16-bit logits (read 2, write 4), takes the "
                "max (read 4), subtracts it, exponentiates and divides by the sum in place (3 x read 4 + write 4) "
                "and sums (read 4): 38 B, keeping the fp32 softmax for backward; backward scales it in place by the "
                "output gradient (8) and casts it to 16 bits (read 4, write 2): 52 B. Not charged with "
                "--cross-entropy-fusion (Megatron-LM --cross-entropy-loss-fusion)",
            ),
            "eager_host_s_per_layer": (
                "seconds per decoder layer and micro-batch, forward + backward + optimizer",
                "the host's time to dispatch one eager PyTorch training step of a Hugging Face Llama layer, measured "
                "where the host sets the pace: Llama 3.2 1B, pure bf16, batch 1 x 2048, one H200 with a Xeon host, "
                "torch 2.11: 80.8 ms a step for 16 layers (7,624 aten ops) while its kernels kept the GPU busy "
                "52.9 ms (docs/measurements/kernel_counts_h200.json); dispatch does not grow with the tensors, so "
                "it is the floor of an eager step whatever the model's width",
            ),
            "matmul_efficiency": (
                "fraction of dense peak",
                "unset: the GPU's matmul_efficiency in the catalog (Bekman, "
                "ml-engineering 'Maximum Achievable Matmul FLOPS' table: A100 SXM 271.2/312, H100 "
                "794.5/989, B200 1745/2250, MI300X 668.4/1300), 0.75 where it has none, x "
                "model_shape_factor",
            ),
            "model_shape_factor": (
                "x best-shape MAMF",
                "a model's GEMMs run below the best shape MAMF finds (tile and wave "
                "quantization, Anthony et al. 2024; older cuBLAS): one global factor, fitted by gpuplan "
                "validate on the 80 bundled training-throughput values of 9 sources (the median of "
                "published / predicted, 0.769 on 2026-11-27); held out one source at a time it scored MAE "
                "17.4 % against 18.4 % for the earlier hand value 0.85 (Megatron-LM Table 1 alone). validate's "
                "loso block shows today's fit (0.749 after later mapping fixes, MAE 15.0 % vs 15.1 % at 0.77)",
            ),
            "flash_attention_efficiency": (
                "fraction of dense peak",
                "FlashAttention-2 (Dao 2023) reaches 50-73 % of "
                "A100 peak forward and less backward; 0.55 for forward + backward",
            ),
            "fa2_on_hopper_efficiency": (
                "fraction of dense 16-bit peak",
                "FlashAttention-2 kernels (PyTorch SDPA's flash backend, written for Ampere's mma.sync) on a "
                "Hopper/Blackwell GPU: ~330 of 989 TFLOP/s forward and less backward on H100, head dim 128, causal "
                "(Shah et al. 2024, FlashAttention-3, Figures 5-7); stacks with cuDNN/FlashAttention-3 kernels "
                "(Transformer Engine) get flash_attention_efficiency",
            ),
            "fa2_ceiling_flops_per_s": (
                "FLOP/s",
                "FlashAttention-2 (mma.sync) forward + backward on datacenter Blackwell runs no faster than on "
                "Hopper: 333 TFLOP/s on B200 (flash-attn 2.7.4, head dim 64, 8k, Dao-AILab/flash-attention#1589), "
                "350-360 forward at head dim 128 (meta-pytorch/tritonbench#171), against ~330 on H100 (PyTorch "
                "SDPA's flash backend, pytorch/pytorch#142132), in the benchmark's count (backward 2.5x the "
                "forward FLOPs): the warp-level MMA path does not scale with tcgen05's 2250 TFLOP/s; caps "
                "fa2_on_hopper_efficiency x peak wherever FA2 runs on a wgmma/tcgen05 GPU",
            ),
            "flash_backward_flops_ratio": (
                "x forward attention FLOPs",
                "a flash-attention backward keeps no s x s probabilities, so it recomputes the scores QK^T beside "
                "dV, dP, dQ and dK: five matmuls against the forward's two, 2.5x the forward FLOPs (Dao 2023, "
                "FlashAttention-2, Algorithm 2; Dao-AILab/flash-attention benchmarks/benchmark_flash_attention.py "
                "counts bwd = 2.5 x fwd, and the TFLOP/s it and fa2_ceiling_flops_per_s quote use that count); "
                "materialized attention keeps the probabilities and its backward is 2x the forward",
            ),
            "attention_forward_tile_tokens": (
                "key positions per query and kernel call",
                "a flash-attention kernel's fixed work per query tile (loading Q, rescaling and writing O and the "
                "log-sum-exp) costs as much as attending this many more keys: time = FLOPs x (span + c) / span / "
                "rate. Measured in this repo on one H200 with PyTorch 2.11 SDPA, head dim 128, causal and full "
                "masks, spans 512-65536 (docs/measurements/kernels_h200.json, kernels_attention_extended_h200.json): "
                "fitted c = 128 (flash backend, FlashAttention-2) and 236 (cuDNN), the mean 180; the long-span rates "
                "of that fit (FA2 forward + backward 330 TFLOP/s, cuDNN 571) are the ones fa2_ceiling_flops_per_s "
                "and flash_attention_efficiency already give",
            ),
            "attention_backward_tile_tokens": (
                "query positions per key and kernel call",
                "the same for the backward, whose kernel walks the queries for each key tile and pays loading K and "
                "V, writing dK and dV and the dQ accumulation per tile: fitted c = 552 (FlashAttention-2) and 472 "
                "(cuDNN) on the same H200 measurements, the mean 510. With both, the forward + backward rate of "
                "FA2 is fitted within 1.4 % rms (2.7 % worst) over 16 shapes, where one flat rate misses by 17 % "
                "rms: at 2k tokens causal the backward runs at 209 TFLOP/s against 315 at 32k",
            ),
            "fa2_head_dim_overhead": (
                "head-dim channels",
                "a flash kernel's per-score work outside the tensor cores (exponentials, rescaling, masking) is the "
                "same at every head dim while the matmul FLOPs grow with it, so the rate scales as d / (d + d0), "
                "normalized at d = 128 where the efficiencies are quoted. FlashAttention-2 (PyTorch SDPA's flash "
                "backend) on one H200, causal 4k: 240 TFLOP/s forward + backward at head dim 64 against 270 at 128 "
                "(docs/measurements/kernels_attention_extended_h200.json), d0 = 19; d is the mean of the query/key "
                "and value head dims",
            ),
            "hopper_attention_head_dim_overhead": (
                "head-dim channels",
                "the same for cuDNN's Hopper kernels, whose tensor-core work is faster and the exponentials' share "
                "larger (Shah et al. 2024, FlashAttention-3, section 3.1): 381 TFLOP/s at head dim 64 against 492 at "
                "128 on the same H200 measurements, d0 = 52",
            ),
            "attention_softmax_channels": (
                "head-dim channels at Hopper's tensor rate per SM clock",
                "the clock-normalized form of the overhead above, which carries a kernel's per-score softmax work "
                "to another architecture: per SM and clock, cuDNN's forward + backward on one H200 ran at 1,585 "
                "FLOPs at head dim 64 and 2,196 at 128 (docs/measurements/kernels_headdim_sfu_h200.json: rate / (132 "
                "SMs x the NVML SM clock the kernel held, 1,845 and 1,680 MHz)), d / (d + 80) with a tensor-only "
                "3,569 FLOPs per SM clock: each attended position costs 14 x 80 / 3,569 = 0.31 SM clocks outside "
                "the tensor cores (the exponentials, the softmax's other FP32 work and shared-memory traffic). Those "
                "units do not grow from Hopper to Blackwell while the tensor work per SM clock doubles (Together AI, "
                "FlashAttention-4, 2025: B200 attention is bound by the exponential unit forward and shared memory "
                "backward), so on a GPU whose catalog gives tensor_flops_per_clock_per_sm T and "
                "exp2_per_clock_per_sm e the Hopper-kernel rate is scaled by (d + 80) / (d + 80 rho), rho = (T / "
                "4096) x (1 - s + s x 16 / e) with s the share below: 0.72 at head dim 128 on a B200",
            ),
            "attention_softmax_exp2_share": (
                "fraction",
                "the exponentials' share of that per-position work: 2 per position (the forward's and the "
                "backward's recomputed one) at the 15.6 per SM clock the H200 measured (Triton ex2.approx chain, the "
                "same file; the CUDA guide's 16) is 0.128 of the 0.31 clocks: what a GPU with faster "
                "special-function units (Blackwell Ultra: twice Blackwell's MUFU.EX2 rate, NVIDIA technical blog "
                "'Making Softmax More Efficient with NVIDIA Blackwell Ultra') saves",
            ),
            "ring_merge_bytes_per_element": (
                "bytes per attention-output element and ring step, forward",
                "context parallelism as PyTorch runs it (torch.distributed.tensor.experimental._attention, "
                "_templated_ring_attention, _SDPAMerger): after each of the cp - 1 ring steps the partial output is "
                "merged into the running fp32 result in eager ops, out - sigmoid(lse_b - lse) * (out - out_b): read "
                "4 + 2 B, write 4 B for the difference, read 4 + 4 B and write 4 B twice more (30 B), and K and V "
                "are packed into one send buffer (torch.cat: read 2 B, write 2 B per element of each, 8 B)",
            ),
            "fused_ring_merge_bytes_per_element": (
                "bytes per attention-output element and ring step, forward",
                "the same correction in one fused kernel (Transformer Engine's context-parallel attention, "
                "flash_attn_fwd_out_correction): read the fp32 running output (4 B) and the step's 16-bit one (2 B), "
                "write fp32 (4 B)",
            ),
            "ring_grad_bytes_per_element": (
                "bytes per element",
                "ring attention's backward accumulates dQ, dK and dV across the cp steps in fp32 (PyTorch "
                "_templated_ring_attention_backward: accum_dtype float32 under convert_to_f32, the default) and passes "
                "dK and dV around the ring in that dtype beside K and V; each step's accumulation reads the fp32 sum "
                "and the step's 16-bit gradient and writes the sum (4 + 2 + 4 = 10 B per element, 2.5x this figure)",
            ),
            "power_limit_w": (
                "W",
                "unset: the catalog TDP. A lower cap scales the sustained SM clock, so the matmul and attention "
                "rates, by (cap / TDP)^(1/3): dynamic power ~ C V^2 f with V rising with f over the boost range; "
                "the rule gives NVIDIA's H100 NVL (400 W) peak from the SXM's (700 W) within 2 % (821 vs 835.5 "
                "TFLOP/s). Where the catalog rates the same GPU at a lower power (low_power_rating: the B200 as "
                "HGX B100, 1.75 of 2.25 PFLOP/s at 700 of 1,000 W) a cap interpolates that rating instead "
                "(power_clock_factor). Estimated, not measured; HBM bandwidth is kept (its clock is separate)",
            ),
            "collective_sms": (
                "SMs",
                "SMs a running NCCL collective holds (one CTA per channel): DeepSeek-V3 (arXiv:2412.19437, "
                "section 3.2.2) needs 20 of the H800's 132 SMs to saturate InfiniBand and NVLink; a GEMM running "
                "beside an overlapped collective loses that share of the GPU for as long as the collective runs",
            ),
            "hbm_efficiency": (
                "fraction of memory bandwidth",
                "element-wise kernels stream at ~85 % of HBM peak "
                "(device-copy benchmarks; gpt-fast's ~1700 of 2039 GB/s on A100)",
            ),
            "elementwise_bytes_per_token_hidden": (
                "bytes per token per hidden unit, forward",
                "GPT layer op list: "
                "2 norms (read+write, 8h), 2 residual adds (12h), bias-GeLU on 4h "
                "(16h), 2 dropouts with masks (10h) in 16-bit = 46h; backward is "
                "taken as twice the forward",
            ),
            "eager_elementwise_bytes_per_token_hidden": (
                "bytes per token per hidden unit, forward",
                "the same op list run as PyTorch eager kernels (torchtitan models/llama3/model.py): RMSNorm "
                "upcast to fp32, square, mean, scale, weight, downcast (2 norms, 72h); RoPE through complex64 "
                "(q and k, ~25h); SwiGLU silu and product over 3.5h (35h); 2 residual adds (12h) = 144h; "
                "backward twice the forward; --compile or a fused stack uses the 46h count",
            ),
            "score_bytes_per_element": (
                "bytes per s x s score element, forward",
                "eager attention: fused "
                "scale-mask-softmax reads and writes 16-bit scores (4 B), dropout writes a "
                "1-byte mask and a 16-bit output after reading (5 B); 4 B without dropout",
            ),
            "link_efficiency": (
                "fraction of scale-up link bandwidth",
                "NCCL all-reduce bus bandwidth on one DGX A100 "
                "node: 232.5 GB/s of NVLink 3's 300 GB/s per direction (NVIDIA/nccl-tests#175); "
                "~370 of 450 GB/s on H100 (nccl-tests#212)",
            ),
            "scale_out_bytes_per_s_per_gpu": (
                "bytes/s",
                "unset: the GPU's scale_out_bytes_per_s_per_gpu in the catalog "
                "(one NIC per GPU: 46-49 GB/s per NDR 400 Gb/s NIC, nccl-tests#290), "
                "24 GB/s where it has none (one HDR 200 Gb/s NIC, NVIDIA/nccl#412)",
            ),
            "gpus_per_node": ("GPUs", "DGX/HGX nodes hold 8 GPUs on one NVLink domain"),
            "nvlink_domain_gpus": (
                "GPUs",
                "GPUs whose collectives cross the scale-up link rather than the NICs. Unset: gpus_per_node, or the "
                "accelerator's scale_up_domain_gpus where one NVLink switch domain spans several hosts (GB200 / "
                "GB300 NVL72: 72 GPUs in 18 compute trays of 4, NVIDIA GB200 NVL72 datasheet); NVLink-bridged "
                "PCIe cards (H100 NVL pairs) keep the 8-GPU host",
            ),
            "collective_latency_s": (
                "seconds",
                "small-message NCCL collective latency, ~6-10 us (nccl issues #583, #1259)",
            ),
            "ring_step_latency_s": (
                "seconds",
                "latency of one inter-node step of an NCCL ring collective, Simple protocol: 14 us "
                "(NCCL src/graph/tuning.cc, hwLat[NET][RING][SIMPLE]); a ring all-gather over n nodes takes "
                "n - 1 such steps",
            ),
            "intra_ring_step_latency_s": (
                "seconds",
                "latency of one NVLink step of an NCCL ring collective, Simple protocol: 3.4 us (NCCL "
                "src/graph/tuning.cc, hwLat[NVLINK][RING][SIMPLE]); a ring all-gather over r ranks on n nodes "
                "takes n - 1 network steps and r - n NVLink steps (tuning.cc: nsteps - nInterSteps)",
            ),
            "optimizer_bytes_per_param": (
                "bytes",
                "fused Adam reads fp32 master, grad, m, v (16 B) and writes master, m, v and the 16-bit copy (14 B)",
            ),
            "offload_pcie_efficiency": (
                "fraction of PCIe bandwidth",
                "offload copies (pinned host buffers) reach ~80 % of the PCI-SIG x16 rate, the machine block's "
                "pcie_efficiency (TLP headers, flow control); applied to the catalog's PCIe generation",
            ),
            "host_memory_bytes_per_s_per_gpu": (
                "bytes/s",
                "host DRAM bandwidth per GPU, theoretical: a DGX A100's two EPYC 7742 with 8 DDR4-3200 channels "
                "each (2 x 8 x 25.6 GB/s = 409.6 GB/s) over its 8 GPUs = 51.2 GB/s (a DGX-2: 2 x 6 x DDR4-2666 = "
                "256 GB/s over 16 GPUs = 16 GB/s; a DGX H100: 2 x 8 x DDR5-4800 = 614 GB/s over 8 = 76.8 GB/s); "
                "CPU-Adam streams it (ZeRO-Offload)",
            ),
            "host_cores_per_gpu": (
                "cores",
                "unset: the machine block's cores per GPU (Bekman, ml-engineering compute/cpu: one for the "
                "training process plus one per DataLoader worker, 2 workers: 3); DeepSpeed's CPU-Adam runs its "
                "OpenMP threads on the cores of its rank",
            ),
            "moe_dispatch_ranks_per_token": (
                "expert-parallel ranks per token",
                "unset: a token's hidden state is sent once per routed expert (experts_per_token copies), what a "
                "dispatcher that permutes tokens by expert before one all-to-all sends (Megatron-Core's alltoall "
                "token dispatcher); DeepEP sends it once per destination rank (deep_ep Buffer.get_dispatch_layout "
                "returns is_token_in_rank / num_tokens_per_rank, and the dispatch moves each token once to each "
                "rank it is in; DeepSeek-V3, arXiv:2412.19437 section 3.2.2), so set this to the distinct ranks a "
                "token's experts live on when the run uses DeepEP (validate sets it for NeMo AutoModel's "
                "fake-balanced-gate benchmarks from the gate's own rule)",
            ),
            "moe_load_imbalance": (
                "x the mean tokens per expert rank",
                "tokens the busiest expert-parallel rank receives over the mean, per MoE layer: a dropless dispatcher "
                "(Megatron-Core without --moe-expert-capacity-factor) makes every rank wait for it, in the expert "
                "GEMMs, the all-to-all and the permutation. 1 is the balanced routing the published MoE benchmarks "
                "ran (NeMo AutoModel's fake balanced gate; DeepSeek's profile data, DualPipe README) and what an "
                "auxiliary-loss-free balancer approaches (Wang et al. 2024, arXiv:2408.15664, Table 2: MaxVio_global "
                "0.04 per expert, against 0.52-0.72 with an auxiliary loss); no per-rank measurement is published, so "
                "a real router's factor is the user's to set (e.g. 1.2)",
            ),
            "host_core_bytes_per_s": (
                "bytes/s",
                "memory bandwidth one server core streams (single-thread STREAM on Xeon Scalable / EPYC reaches "
                "~10-15 GB/s, limited by its outstanding cache misses); a judgment, measure your host",
            ),
        }
    )

    def __post_init__(self) -> None:
        check_assumptions(
            self,
            fractions=(
                "matmul_efficiency",
                "flash_attention_efficiency",
                "fa2_on_hopper_efficiency",
                "hbm_efficiency",
                "link_efficiency",
                "model_shape_factor",
                "offload_pcie_efficiency",
            ),
            ranges={
                "gpus_per_node": (1, 1024),
                "nvlink_domain_gpus": (1, 65536),
                "collective_sms": (0, 1024),
                "host_cores_per_gpu": (0, 4096),
                "moe_dispatch_ranks_per_token": (1, 4096),
                "moe_load_imbalance": (1, 64),
                "eager_host_s_per_layer": (0, 1),
                "eager_loss_bytes_per_logit": (0, 1024),
                "megatron_loss_bytes_per_logit": (0, 1024),
                "fused_loss_bytes_per_logit": (0, 1024),
                "list_gather_s_per_rank": (0, 1),
                "fp4_bf16_tail_fraction": (0, 1),
                "attention_forward_tile_tokens": (0, 1e6),
                "attention_backward_tile_tokens": (0, 1e6),
                "fa2_head_dim_overhead": (0, 4096),
                "hopper_attention_head_dim_overhead": (0, 4096),
                "attention_softmax_channels": (0, 4096),
                "attention_softmax_exp2_share": (0, 1),
            },
            positive=(
                "flash_attention_efficiency",
                "fa2_on_hopper_efficiency",
                "hbm_efficiency",
                "link_efficiency",
                "model_shape_factor",
                "elementwise_bytes_per_token_hidden",
                "eager_elementwise_bytes_per_token_hidden",
                "matmul_efficiency",
                "scale_out_bytes_per_s_per_gpu",
                "fa2_ceiling_flops_per_s",
                "power_limit_w",
                "flash_backward_flops_ratio",
                "ring_merge_bytes_per_element",
                "fused_ring_merge_bytes_per_element",
                "ring_grad_bytes_per_element",
                "offload_pcie_efficiency",
                "host_memory_bytes_per_s_per_gpu",
                "host_cores_per_gpu",
                "host_core_bytes_per_s",
                "moe_dispatch_ranks_per_token",
            ),
            efficiencies=("matmul_efficiency",),
        )


@dataclass(frozen=True)
class StepTime:
    """One iteration, seconds by part (they add up to ``iteration_s``), and the rates it implies."""

    parts: Mapping[str, float]
    tokens_per_iteration: float
    gpus: int
    model_flops_per_iteration: float
    peak_flops_per_s: float
    matmul_efficiency: float
    matmul_efficiency_source: str
    micro_batches: int

    @property
    def iteration_s(self) -> float:
        return sum(self.parts.values())

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_iteration / self.iteration_s

    attention_flops_share: float = 0.0
    stack: str = ""
    fp8_recipe: str | None = None
    #: the flash-attention kernels priced (fa2, or cudnn: Hopper/Blackwell-native); None with materialized attention
    attention_kernel: str | None = None
    #: whether the loss ran as one fused kernel (--cross-entropy-fusion, or the stack's default)
    cross_entropy_fusion: bool | None = None
    global_batch: int | None = None
    global_batch_source: str = ""

    @property
    def mfu(self) -> float:
        """Model FLOPs (PaLM appendix B with causal attention, ``flops.py``; no recompute) / (time x GPUs x
        dense peak)."""
        return self.model_flops_per_iteration / (self.iteration_s * self.gpus * self.peak_flops_per_s)


def _allreduce_s(message: float, n: int, busbw: float, latency: float) -> float:
    """Ring all-reduce: S x 2(n-1)/n / bus bandwidth (nccl-tests PERFORMANCE.md) plus latency: a reduce-scatter's
    traffic twice over."""
    return _reduce_scatter_s(2 * message, n, busbw, latency)


def nvlink_domain_gpus(gpu: Accelerator, a: StepAssumptions) -> int:
    """GPUs on one scale-up (NVLink) domain, whose collectives use ``link`` rather than the NICs: the
    ``nvlink_domain_gpus`` assumption where set, else the larger of ``gpus_per_node`` (the host, or the offer's
    instance) and the catalog's ``scale_up_domain_gpus`` (72 on GB200/GB300 NVL72, whose NVLink switches join 18
    hosts of 4). A scalar or, on the planner's grid, an array like ``gpus_per_node``."""
    if a.nvlink_domain_gpus is not None:
        return a.nvlink_domain_gpus
    domain = gpu.scale_up_domain_gpus if gpu.vendor != "google" and gpu.interconnect is not None else None
    return xp.maximum(a.gpus_per_node, domain) if domain is not None else a.gpus_per_node


def _reduce_scatter_s(message: float, n: int, busbw: float, latency: float) -> float:
    """Ring reduce-scatter: S x (n-1)/n / bus bandwidth (nccl-tests PERFORMANCE.md) plus latency."""
    return xp.where(n > 1, latency + message * (n - 1) / n / busbw, 0.0)


def _reduce_bytes_per_param(job: TrainingJob, recipe: Recipe) -> float:
    """Bytes per parameter the data-parallel gradient collective moves: the recipe's gradient dtype, or under
    FSDP the MixedPrecisionPolicy reduce dtype (fp32 as torchtitan sets it, bf16 with --main-grads bf16)."""
    if recipe.name == "fsdp" and job.main_grads is not None:
        return fsdp_reduce_bytes(job)
    return float(recipe.grads)


def _data_parallel_busbw(
    gpu: Accelerator, layout: Parallelism, a: StepAssumptions, link: float, scale_out: float, inner: int | None = None
) -> float:
    """Bus bandwidth of the data-parallel reduction.

    Inside one node (or a TPU slice, whose chips reach each other over ICI) it is the scale-up link.
    Across nodes each GPU has its own NIC and NCCL runs a ring per NIC, so the k members of a
    data-parallel group that share a node move their data over k NICs at once: ~192 GB/s measured across
    DGX A100 nodes with 8 HDR NICs (NVIDIA/nccl#812), one NIC's ~24 GB/s when tensor x pipeline
    parallelism fills the node and each group has one GPU per node. ``inner``: the model-parallel ranks between two
    members of the group, tp x pp unless given (an expert-data-parallel group: etp x ep x pp).
    """
    if gpu.vendor == "google":
        return link
    domain = nvlink_domain_gpus(gpu, a)
    inner = layout.tp * layout.pp if inner is None else inner
    per_node = xp.maximum(1, domain // inner)
    return xp.where(layout.gpus <= domain, link, xp.minimum(link, per_node * scale_out))


def scale_out(gpu: Accelerator, a: StepAssumptions) -> tuple[float, str]:
    """Inter-node bandwidth per GPU, per direction, in bytes/s, and where it comes from: the set assumption
    (``--assume``, an offer's network), else the GPU's catalog figure, else
    :data:`DEFAULT_SCALE_OUT_BYTES_PER_S_PER_GPU`."""
    if a.scale_out_bytes_per_s_per_gpu is not None:
        return a.scale_out_bytes_per_s_per_gpu, "set (scale_out_bytes_per_s_per_gpu: --assume or the offer's network)"
    if gpu.scale_out_bytes_per_s_per_gpu is not None:
        src = gpu.source_for("scale_out_bytes_per_s_per_gpu")
        return gpu.scale_out_bytes_per_s_per_gpu, f"{src.title} ({src.date})"
    return DEFAULT_SCALE_OUT_BYTES_PER_S_PER_GPU, (
        f"no scale-out figure for this GPU ({gpu.id}) in the catalog: default "
        f"{DEFAULT_SCALE_OUT_BYTES_PER_S_PER_GPU / 1e9:g} GB/s (one HDR 200 Gb/s NIC per GPU, NVIDIA/nccl#412)"
    )


def scale_out_bytes_per_s_per_gpu(gpu: Accelerator, a: StepAssumptions) -> float:
    """Inter-node bandwidth per GPU, per direction, in bytes/s (:func:`scale_out` without the source)."""
    return scale_out(gpu, a)[0]


def power_clock_factor(gpu: Accelerator, a: StepAssumptions) -> float:
    """The sustained tensor rate under ``a.power_limit_w`` as a fraction of the rate at the GPU's catalog TDP, at
    most 1; 1 when no cap is set or the catalog has no TDP.

    Where the vendor rates the same GPU at a lower power (the catalog's ``low_power_rating``: B200 at 700 W as
    HGX B100, 0.78 of its 1,000 W peak), a cap between the two ratings interpolates them linearly in watts and a cap
    below scales the lower rating by (cap / its watts)^(1/3); elsewhere the rate goes as (cap / TDP)^(1/3)
    (StepAssumptions.SOURCES["power_limit_w"]; estimated, not measured)."""
    if a.power_limit_w is None or not gpu.tdp_w:
        return 1.0
    cap = min(a.power_limit_w, gpu.tdp_w)
    rating = gpu.low_power_rating
    if rating is None or rating[0] >= gpu.tdp_w:
        return float((cap / gpu.tdp_w) ** (1 / 3))
    low_w, low_frac = rating
    if cap >= low_w:
        return float(low_frac + (1.0 - low_frac) * (cap - low_w) / (gpu.tdp_w - low_w))
    return float(low_frac * (cap / low_w) ** (1 / 3))


#: Bytes an fp8 dispatch sends per 16-bit byte: one fp8 byte per element and one fp32 scale per 128 elements
#: (DeepEP v1.2.1 buffer.py: x as float8 [tokens, hidden] with float32 scales [tokens, hidden / 128]; MXFP8's
#: 1-byte scale per 32 elements is the same 1 + 1/32)
FP8_DISPATCH_BYTES_PER_ELEMENT = 1.0 + 4.0 / 128


#: parts of a layer's step that are communication, not work another collective can run beside
_COMM_PARTS = frozenset({"tp_comm", "moe_all_to_all", "cp_ring"})


def moe_dispatch_bytes_ratio(dtype: str, bytes_e: float) -> float:
    """Bytes an all-to-all of ``dtype`` sends per byte of the 16-bit (``bytes_e``) activations it replaces: 1 for
    ``bf16``; for ``fp8``, :data:`FP8_DISPATCH_BYTES_PER_ELEMENT` over ``bytes_e`` (0.52 against bf16)."""
    return 1.0 if dtype != "fp8" else FP8_DISPATCH_BYTES_PER_ELEMENT / bytes_e


def moe_permute_bytes(
    model: ModelSpec, layout: Parallelism, tokens_mb: float, bytes_e: float, a: StepAssumptions
) -> float:
    """HBM bytes of one MoE layer's token permutation on one rank, forward (its backward is the mirror image).

    Megatron-Core's all-to-all dispatcher (core_v0.16.0 transformer/moe/token_dispatcher.py) permutes the rank's
    tokens by expert before the all-to-all and un-permutes them after the combine; with ``--moe-permute-fusion``
    Transformer Engine's kernels read each token once and write it once per routed expert, and read the k copies
    and write their sum (triton/permutation.py): (2 + 2k) x hidden x bytes per token. With more than one local
    expert, ``sort_chunks_by_idxs`` regroups the received rows by expert before the experts and back after them,
    reading and writing each row twice (4 x hidden x bytes per received row, moe_load_imbalance x the mean on the
    busiest rank). The router's own element-wise work (softmax and top-k over the expert logits) is below 2 % of
    this for every catalog MoE and is left out.

    A deduplicating dispatcher (DeepEP, ``moe_dispatch_ranks_per_token`` = m set) permutes on the sending side
    inside its dispatch kernel and lands the received rows grouped by local expert: the rank only expands each of
    the m copies it receives per token into its k expert rows and folds them back after the experts (Megatron-Core
    flex dispatcher, token_dispatcher.py: read m, write k rows; the combine's mirror), 2 (m + k) x hidden x bytes per
    token of the rank, on the receiving side."""
    moe = model.moe
    assert moe is not None
    k, h = moe.experts_per_token, model.hidden_size
    own = tokens_mb / layout.tp
    if a.moe_dispatch_ranks_per_token is not None:
        m = xp.minimum(a.moe_dispatch_ranks_per_token, xp.maximum(1, layout.ep))
        return own * 2 * (m + k) * h * bytes_e * a.moe_load_imbalance
    received = own * k * layout.expert_tp * a.moe_load_imbalance
    regroup = xp.where(moe.experts / layout.ep > 1, 4 * received * h * bytes_e, 0.0)
    return own * (2 + 2 * k) * h * bytes_e + regroup


def _async_tp_backward_s(dense_comm: float, mm_f: float, sequence_parallel: bool) -> tuple[float, float]:
    """A layer's backward tensor-parallel collectives as Megatron runs them, in seconds: (exposed, hidden).

    Megatron-Core's ``LinearWithGradAccumulationAndAsyncCommunication`` (core_r0.8.0
    tensor_parallel/layers.py; the Megatron-Core API guide's tensor_parallel page) launches a column-parallel
    layer's (QKV, MLP up) backward collectives asynchronously: with sequence parallelism it all-gathers the saved
    input shard while the input-gradient GEMM runs and reduce-scatters the input gradient while the weight-gradient
    GEMM runs; without it, it all-reduces the input gradient beside the weight-gradient GEMM. A row-parallel layer
    (attention output, MLP down) must all-gather its output gradient before its GEMMs under sequence parallelism,
    and has no backward collective without it. ``dense_comm`` is the forward's collectives of those layers (one
    all-gather + one reduce-scatter, or one all-reduce, per block): the column-parallel side moves as much again,
    hidden where the layer's GEMMs (``mm_f``, the forward's, which the backward's two GEMMs per layer exceed) are
    longer; the row-parallel side's all-gathers, half of ``dense_comm``, stay exposed."""
    exposed_col = xp.maximum(0.0, dense_comm - mm_f)
    exposed_row = xp.where(sequence_parallel, 0.5 * dense_comm, 0.0)
    return exposed_row + exposed_col, dense_comm - exposed_col


def _recompute_module(linear: str, model: ModelSpec) -> str | None:
    """The ``--recompute-modules`` name that re-runs a linear layer of ``params.linear_shapes``: a dense MLP's
    (mlp), the router and routed experts (moe), the shared experts (shared_experts), MLA's up projections, the
    queries' too where MLA has no query LoRA (mla_up_proj); None for the attention projections."""
    if linear in ("gate_proj", "up_proj", "down_proj"):
        return "mlp"
    if linear == "router" or linear.startswith("expert_"):
        return "moe"
    if linear.startswith("shared_"):
        return "shared_experts"
    if linear in ("q_b_proj", "kv_b_proj") or (linear == "q_proj" and model.mla is not None):
        return "mla_up_proj"
    return None


def _selective_recompute_s(
    modules: tuple[str, ...],
    model: ModelSpec,
    *,
    attention: float,
    mm_module: Mapping[str, float],
    mm_scale: float,
    tokens: float,
    expert_rows: float,
    tp: float,
    sp: float,
    etp: float,
    ep: float,
    element_bytes: float,
    bw: float,
    moe_exchange: float,
    dense_mlp_comm: float,
    moe_mlp_comm: float,
) -> float:
    """Seconds per layer and micro-batch that ``--recompute selective`` re-runs in backward, by module (Megatron-Core
    TransformerConfig.recompute_modules, megatron/core/transformer/transformer_layer.py; averaged over dense and MoE
    layers like the rest of the step):

    - core_attn: the attention core, with its ring under context parallelism;
    - layernorm: the norms Transformer Engine's layer spec keeps apart from a linear (a fused norm is an IdentityOp,
      which Megatron-Core does not recompute): MLA's input norm and an MoE layer's pre-MLP norm; each reads its input
      and writes its output (2 x 16 bits per element);
    - mlp: a dense layer's MLP GEMMs, its activation (read the gate and up outputs, write the product) and its
      tensor-parallel collectives;
    - moe: an MoE layer's router, expert and shared-expert GEMMs and activations, its expert-TP collectives, and the
      dispatch and combine with their permutation (Megatron-Core checkpoints the whole MoE layer, token dispatcher
      included);
    - moe_act: the experts' activation alone;
    - shared_experts: the shared experts' GEMMs and activation;
    - mla_up_proj: MLA's up projections.

    GEMM times are the forward's of each module (``mm_module``, x ``mm_scale`` where fp4 training mixes in its bf16
    layers); element-wise passes are HBM traffic at ``bw``; the fp8 re-quantization of a recomputed GEMM's input is
    not counted."""
    mods = set(modules)
    total = attention if "core_attn" in mods else 0.0
    h, L = model.hidden_size, model.layers
    act_reads = 3.0 if model.mlp_gated else 2.0  # gate and up read, product written; or input read, output written
    moe = model.moe
    share = moe.layers / L if moe is not None else 0.0
    if "layernorm" in mods:
        norms = (1.0 if model.mla is not None else 0.0) + share
        total = total + norms * tokens * h * 2 * element_bytes / sp / bw
    if "mlp" in mods:
        dense = model.dense_layers / L
        total = (
            total
            + mm_scale * mm_module.get("mlp", 0.0)
            + dense * tokens * model.ffn_size / tp * act_reads * element_bytes / bw
            + dense_mlp_comm
        )
    if moe is not None:
        local = moe.experts / ep  # local experts on the rank, each with expert_rows tokens
        act = share * local * expert_rows * moe.expert_ffn_size / etp * act_reads * element_bytes / bw
        shared_act = share * tokens * (moe.shared_ffn_size or 0) / tp * act_reads * element_bytes / bw
        if "moe" in mods:
            gemms = mm_module.get("moe", 0.0) + mm_module.get("shared_experts", 0.0)
            total = total + mm_scale * gemms + act + shared_act + moe_exchange + moe_mlp_comm
        else:
            if "moe_act" in mods:
                total = total + act
            if "shared_experts" in mods:
                total = total + mm_scale * mm_module.get("shared_experts", 0.0) + shared_act
    if "mla_up_proj" in mods:
        total = total + mm_scale * mm_module.get("mla_up_proj", 0.0)
    return total


#: Hopper's dense 16-bit tensor FLOPs and special-function exponentials per SM and clock (H100 whitepaper: twice the
#: A100's 1,024 dense FP16 FMA per SM clock; the CUDA guide's 16 MUFU results, 15.6 measured on one H200 in
#: docs/measurements/kernels_headdim_sfu_h200.json): the reference of attention_softmax_factor
HOPPER_TENSOR_FLOPS_PER_CLOCK_PER_SM = 4096.0
HOPPER_EXP2_PER_CLOCK_PER_SM = 16.0


def expected_groups_hit(experts: float, k: float, groups: float) -> float:
    """How many of ``groups`` equal groups of ``experts`` (the ranks or the nodes of expert parallelism) a token's
    ``k`` routed experts fall in, on average, when they are k distinct experts drawn uniformly (balanced routing):
    groups x (1 - C(E - E/g, k) / C(E, k)), the product form taking numpy arrays of ``groups``. DeepSeek-V3 (256
    experts, top 8) over 32 ranks: 7.2 ranks; over 4 nodes: 3.6 nodes. Dimensionless."""
    miss: float = 1.0
    per_group = experts / groups
    for i in range(int(k)):
        miss = miss * xp.maximum(0.0, experts - per_group - i) / (experts - i)
    return groups * (1.0 - miss)


def attention_softmax_factor(gpu: Accelerator, head_dim: float, a: StepAssumptions) -> float:
    """How much slower than its tensor peak suggests a Hopper-class flash-attention kernel runs on ``gpu``, at head
    dim ``head_dim``: (d + c) / (d + c rho), 1 on Hopper. A kernel's time per attended position is its tensor work
    plus c = ``attention_softmax_channels`` channels' worth (at Hopper's tensor rate per SM clock) of work in units
    that do not scale with the tensor cores: the exponentials (MUFU.EX2), the softmax's other FP32 work and shared
    memory. rho = (T / 4096) x (1 - s + s x 16 / e) for the GPU's tensor FLOPs T and exponentials e per SM clock
    (catalog ``tensor_flops_per_clock_per_sm`` / ``exp2_per_clock_per_sm``, Hopper's where absent) and the
    exponentials' share s = ``attention_softmax_exp2_share``: on a B200 (T 8192, e 16) rho = 2 and the factor is
    0.72 at head dim 128 (FlashAttention-4, Together AI 2025: on B200 the forward is bound by the exponential unit
    and the backward by shared memory, neither of which grew from H100). Dimensionless."""
    tensor = gpu.tensor_flops_per_clock_per_sm or HOPPER_TENSOR_FLOPS_PER_CLOCK_PER_SM
    exp2 = gpu.exp2_per_clock_per_sm or HOPPER_EXP2_PER_CLOCK_PER_SM
    share = a.attention_softmax_exp2_share
    rho = (tensor / HOPPER_TENSOR_FLOPS_PER_CLOCK_PER_SM) * (1.0 - share + share * HOPPER_EXP2_PER_CLOCK_PER_SM / exp2)
    c = a.attention_softmax_channels
    return (head_dim + c) / (head_dim + c * rho)


def _gemm_s(m: float, n: float, k: float, flops_per_s: float, bw: float, operand_bytes: float = 2.0) -> float:
    """One (m x k) @ (k x n) GEMM on a roofline: the longer of its FLOPs at ``flops_per_s`` and the traffic of its
    operands and result (``operand_bytes`` each) at ``bw`` (Williams et al. 2009). A large GEMM is compute-bound;
    one with few rows (tokens), such as an expert's share of a small micro-batch, is memory-bound."""
    return xp.maximum(2 * m * n * k / flops_per_s, operand_bytes * (m * k + k * n + m * n) / bw)


def host_link_bytes_per_s(gpu: Accelerator, a: StepAssumptions) -> float:
    """One GPU's link to the host, one direction, in bytes/s: a Grace superchip's NVLink-C2C where the catalog gives
    ``host_link_bytes_per_s``, else the catalog's PCIe generation at x16 (PCI-SIG rates,
    ``spec.accelerator.pcie_bytes_per_s``; generation 4 where the catalog has none, as the machine block takes it),
    x ``offload_pcie_efficiency``."""
    return gpu.host_bytes_per_s * a.offload_pcie_efficiency


def cpu_optimizer_bytes_per_s(a: StepAssumptions) -> float:
    """Host memory traffic one GPU's CPU optimizer sustains, in bytes/s: the lesser of the host memory bandwidth per
    GPU and what its cores stream (``host_cores_per_gpu`` x ``host_core_bytes_per_s``). CPU-Adam is vectorized
    (AVX-512, Ren et al. 2021 section 5.1), so its ~12 FLOPs per parameter are far below a core's peak and the
    step is bound by the bytes it streams."""
    cores = a.host_cores_per_gpu if a.host_cores_per_gpu is not None else default_host_cores_per_gpu()
    return xp.minimum(a.host_memory_bytes_per_s_per_gpu, cores * a.host_core_bytes_per_s)


def default_host_cores_per_gpu() -> float:
    """Host cores per GPU when ``host_cores_per_gpu`` is unset: the machine block's provisioning rule (one core for
    the training process and one per DataLoader worker, :func:`estimate.machine.cpu_cores_per_gpu` with its default
    workers), the cores a node sized by that rule leaves each GPU's optimizer."""
    return cpu_cores_per_gpu(MachineAssumptions().loader_workers_per_gpu)


def offload_step_s(
    gpu: Accelerator,
    a: StepAssumptions,
    opt_params: float,
    shard_params: float,
    micro_batches: float,
    fwd_s: float,
    bwd_s: float,
    *,
    params_offloaded: bool,
    prefetch: bool,
    refetch: bool,
    element_bytes: float = 2.0,
) -> dict[str, float]:
    """The host's share of a step under ZeRO-Offload (``--offload optimizer``) or ZeRO-Infinity (``--offload
    params``), seconds by part, for the ``opt_params`` parameters whose optimizer states this GPU holds and the
    ``shard_params`` of its parameter shard; ``fwd_s`` and ``bwd_s`` are one micro-batch's forward and backward on
    the GPU. Numbers or numpy arrays.

    - ``offload_grads``: each micro-batch's gradients of the partition (``element_bytes`` each) go down PCIe as the
      backward produces them, overlapped with it (Ren et al. 2021, ZeRO-Offload, section 4.1 and Figure 5; DeepSpeed's
      stage-2 CPU offload copies and accumulates them on the host every micro-batch); only the excess waits;
    - ``cpu_optimizer``: the Adam step on the host after the last backward, memory-bound at
      :func:`cpu_optimizer_bytes_per_s` (fp32 master, gradient, m, v read, three written, the 16-bit copy: the
      GPU optimizer's ``optimizer_bytes_per_param``). Not overlapped: ZeRO-Offload's one-step delayed parameter
      update, which hides it behind the next step, is optional and off by default (section 4.1), so not counted;
    - ``offload_params_up``: the updated 16-bit parameters go back up PCIe tile by tile while CPU-Adam runs
      (DeepSpeed cpu_adam's step-plus-copy), so only what the step cannot cover waits;
    - ``offload_param_fetch`` (params offload): the parameters live on the host, so each micro-batch's forward and
      backward (and a full recompute) first bring this GPU's shard of every layer up PCIe before the all-gather;
      each GPU fetches only its 1/dp shard, so the data-parallel group uses all its links at once (Rajbhandari et
      al. 2021, ZeRO-Infinity, section 6.1, bandwidth-centric partitioning). A stack that prefetches hides a fetch
      behind the pass's compute; one that does not waits for it. The updated parameters stay on the host (no
      upload after the step).
    """
    pcie = host_link_bytes_per_s(gpu, a)
    grads = opt_params * element_bytes / pcie  # the partition's gradients, per micro-batch
    parts = {"offload_grads": micro_batches * xp.maximum(0.0, grads - bwd_s)}
    cpu = opt_params * a.optimizer_bytes_per_param / cpu_optimizer_bytes_per_s(a)
    parts["cpu_optimizer"] = cpu
    if params_offloaded:
        fetch = shard_params * element_bytes / pcie  # one pass's shard of every layer of the stage
        passes = 3.0 if refetch else 2.0
        if prefetch:
            exposed = xp.maximum(0.0, fetch - fwd_s) + xp.maximum(0.0, fetch - bwd_s) * (passes - 1)
        else:
            exposed = passes * fetch
        parts["offload_param_fetch"] = micro_batches * exposed
    else:
        parts["offload_params_up"] = xp.maximum(0.0, opt_params * element_bytes / pcie - cpu)
    return parts


def training_step(
    model: ModelSpec,
    gpu: Accelerator,
    layout: Parallelism,
    job: TrainingJob,
    a: StepAssumptions = StepAssumptions(),
    virtual_stages: int = 1,
    overlap_dp: bool | None = None,
    memory: MemoryAssumptions | None = None,
) -> StepTime:
    """Predict one training iteration of ``job`` on ``layout`` (see the module docstring for the parts).
    ``memory``: the memory estimate's assumptions, where a part of the step moves what it counts (activation
    offload copies the saved activations); the defaults where not given."""
    peak = peak_for(gpu, job.precision)
    stack, _ = resolve_stack(job, layout, gpu)
    job = stack_job(job, gpu)  # the recipe of the stack the accelerator picks (a TPU's jax)
    fp8 = resolve_fp8_recipe(job, stack)
    fp4 = job.precision == "fp4-mixed"
    # attention, the LM head and the element-wise work run at 16 bits in fp8/fp4 training: their peak is the bf16 one
    peak16 = peak_for(gpu, "bf16-mixed") if fp8 is not None else peak
    if a.matmul_efficiency is not None:
        # a set value cites its own source where the set carries one (a calibration profile overrides SOURCES)
        cited = a.SOURCES["matmul_efficiency"][1]
        eta_mm = eta16 = a.matmul_efficiency
        eta_src = cited if cited != StepAssumptions.SOURCES["matmul_efficiency"][1] else "--assume matmul_efficiency"
    else:
        best, eta_src = fp4_matmul_efficiency(gpu) if fp4 else matmul_efficiency(gpu, training_dtype(job.precision))
        eta_mm, eta_src = best * a.model_shape_factor, f"{eta_src}, x {a.model_shape_factor:g} for a model's shapes"
        eta16 = eta_mm if fp8 is None else matmul_efficiency(gpu, "bf16")[0] * a.model_shape_factor
    bw = gpu.memory_bandwidth_bytes_per_s * a.hbm_efficiency
    clock = power_clock_factor(gpu, a)  # a power cap slows the tensor cores, not HBM
    tp, pp, cp, dp = layout.tp, layout.pp, layout.cp, layout.dp
    etp = layout.expert_tp  # routed experts' own tensor parallelism (Megatron-Core MoE parallel folding)
    link = gpu.scale_up_bytes_per_s * a.link_efficiency
    scale_out = scale_out_bytes_per_s_per_gpu(gpu, a)
    domain = nvlink_domain_gpus(gpu, a)  # GPUs whose collectives stay on the scale-up link
    recipe, _ = resolve_recipe(job, layout)
    bytes_e = 4 if job.precision == "fp32" else 2

    global_batch, gb_source = job.global_batch, "--global-batch"
    if global_batch is None:
        global_batch = default_global_batch(model, job, layout)
        gb_source = default_global_batch_source(model, job)
        job_steps = replace(job, global_batch=global_batch)
    else:
        job_steps = job
    micro = job.micro_batch
    m = micro_batches_per_step(job_steps, layout)
    tokens_mb = micro * job.seq_len / cp  # tokens per micro-batch on one rank
    h, L = model.hidden_size, model.layers
    layers_here = stage_layers(L, pp, "first")

    # ---- per layer, per micro-batch, forward, on one TP rank: the GEMMs on a roofline
    shapes = linear_shapes(model)
    mm_peak = eta_mm * peak * clock
    # fp4 training keeps the last decoder layers' linears in bf16 (fp4_bf16_tail_fraction): a layer's GEMM time
    # and quantization are averaged over the quantized and the bf16 layers
    quantized = 1.0 - (fp4_bf16_tail_layers(L, a.fp4_bf16_tail_fraction) / L if fp4 else 0.0)
    mm_f = 0.0
    mm_f16 = 0.0  # the same GEMMs at 16 bits, for fp4's bf16 layers
    cast_elements = 0.0  # elements quantized to fp8 per layer, forward (inputs) and backward (output grads)
    cast_grad_elements = 0.0
    weight_elements = 0.0
    expert_rows = 0.0  # rows of one local expert's GEMM on the busiest expert rank (below)
    if model.moe is not None:
        # the tokens routed to each local expert form one GEMM of a grouped GEMM. A rank routes its 1/tp of the tokens
        # (the sequence-parallel shard); the all-to-all brings each of its experts/ep experts the tokens of the ep
        # ranks, and the expert-TP group all-gathers them (Megatron-Core MoEAlltoAllTokenDispatcher: A2A over EP, then
        # AG over expert TP): tokens_mb x k / experts x ep x etp / tp rows, and 1/etp of the columns; the busiest
        # rank sets the pace (moe_load_imbalance: its tokens over the mean; 1 for the balanced routing of the
        # published benchmarks)
        moe = model.moe
        expert_rows = tokens_mb * moe.experts_per_token / moe.experts * layout.ep * etp / tp * a.moe_load_imbalance
    mm_module: dict[str, float] = {}  # forward GEMM time per layer of the modules --recompute-modules can name
    track_modules = bool(set(job.selective_modules) - {"core_attn"})  # only they need it (the search does not)
    for k, (din, dout, n) in shapes.items():
        if k == "lm_head":
            continue
        if k.startswith("expert_"):
            rows = expert_rows
            per_layer = n / L / layout.ep  # local expert matrices per layer on average (over the MoE layers)
            gemm = per_layer * _gemm_s(rows, dout / etp, din, mm_peak, bw)
            if fp4:
                mm_f16 += per_layer * _gemm_s(rows, dout / etp, din, eta16 * peak16 * clock, bw)
            cast_elements += per_layer * rows * din / etp
            cast_grad_elements += per_layer * rows * dout / etp
        else:
            per_layer = n / L
            gemm = per_layer * _gemm_s(tokens_mb, dout / tp, din, mm_peak, bw)
            if fp4:
                mm_f16 += per_layer * _gemm_s(tokens_mb, dout / tp, din, eta16 * peak16 * clock, bw)
            cast_elements += per_layer * tokens_mb * din / tp
            cast_grad_elements += per_layer * tokens_mb * dout / tp
        mm_f = mm_f + gemm  # (not +=: with numpy arrays that would change what mm_module holds)
        weight_elements += n / L * din * dout / (etp * layout.ep if k.startswith("expert_") else tp)
        module = _recompute_module(k, model) if track_modules else None
        if module is not None:
            mm_module[module] = mm_module.get(module, 0.0) + gemm
    mm_f4 = mm_f  # the fp4 layers' GEMMs alone
    if fp4:
        mm_f = quantized * mm_f + (1.0 - quantized) * mm_f16
        cast_elements, cast_grad_elements = quantized * cast_elements, quantized * cast_grad_elements
        weight_elements *= quantized
    # score and context matmul FLOPs per attended position, per layer, micro-batch and TP rank (PaLM appendix B)
    per_position_flops = 2 * tokens_mb * model.attention_heads * (model.qk_head_dim + model.v_head_dim) / tp
    score_flops = per_position_flops * job.seq_len
    if job.flash_attention:
        # the causal spans of flops.py (half the scores; sliding windows), per layer on average: the kernel
        # skips masked blocks, and the MFU numerator counts exactly these FLOPs
        causal_flops = tokens_mb * attention_flops_forward(model, job.seq_len, causal=True) / L / tp
        # FlashAttention-2 kernels use mma.sync; the tensor-core generation that brought fp8 (Hopper, Blackwell:
        # the catalog's fp8 peak) needs wgmma/TMA kernels to reach its peak (Shah et al. 2024). Ada parts, which
        # also list fp8, are counted with it: a known approximation
        kernel = job.attention_kernel
        hopper_kernels = stack.hopper_attention if kernel == "auto" else kernel == "cudnn"
        attention_kernel = "cudnn" if hopper_kernels else "fa2"
        wgmma_gpu = gpu.vendor == "nvidia" and gpu.peak("fp8") is not None
        fa2_on_hopper = not hopper_kernels and wgmma_gpu
        eta_attn = a.fa2_on_hopper_efficiency if fa2_on_hopper else a.flash_attention_efficiency
        # the mma.sync path of FlashAttention-2 reaches ~330 TFLOP/s on H100 and B200 alike (fa2_ceiling_flops_per_s)
        attn_rate = eta_attn * peak16 * clock
        if fa2_on_hopper:
            attn_rate = min(attn_rate, a.fa2_ceiling_flops_per_s * clock)
        if gpu.attention_flops_per_s is not None:  # measured on this GPU (catalog, at head dim 128): a cap
            attn_rate = min(attn_rate, gpu.attention_flops_per_s * clock)
        # the head dim's share of non-tensor-core work per score: d / (d + d0), 1 at d = 128
        d0 = a.hopper_attention_head_dim_overhead if hopper_kernels and wgmma_gpu else a.fa2_head_dim_overhead
        d = (model.qk_head_dim + model.v_head_dim) / 2.0
        attn_rate = attn_rate * (d / (d + d0)) * ((128.0 + d0) / 128.0)
        if hopper_kernels and wgmma_gpu:
            # the softmax's units per SM clock stay while the tensor work per SM clock grows (Blackwell: 2x)
            attn_rate = attn_rate * attention_softmax_factor(gpu, d, a)
        # each query (forward) and key (backward) tile pays a fixed cost worth attention_*_tile_tokens positions of
        # its span in every layer (full, windowed and chunked alike), once per kernel call: a ring runs the layer's
        # attention as cp calls
        tile_flops = per_position_flops * cp
        attn_f = (causal_flops + a.attention_forward_tile_tokens * tile_flops) / attn_rate
        attn_b = (
            a.flash_backward_flops_ratio * (causal_flops + a.attention_backward_tile_tokens * tile_flops) / attn_rate
        )
        score_traffic = 0.0
    else:
        attention_kernel = None
        attn_f = score_flops / (eta16 * peak16 * clock)
        per_element = a.score_bytes_per_element if job.dropout else 4.0
        score_traffic = micro * model.attention_heads / tp * (job.seq_len / cp) * job.seq_len * per_element / bw
    sp = xp.where(layout.sequence_parallel, tp, 1)
    fused = stack.fused_elementwise or job.compile
    ew_bytes = a.elementwise_bytes_per_token_hidden if fused else a.eager_elementwise_bytes_per_token_hidden
    ew_f = tokens_mb * h * ew_bytes * (bytes_e / 2) / sp / bw + score_traffic
    fp8_f = fp8_b = 0.0
    if fp8 is not None:
        transpose = 0.0 if gpu.fp8_gemm_any_layout else fp8.transpose
        if fp8.name in ("rowwise", "blockwise", "nvfp4", "mxfp8"):
            # scales along the other axis (MXFP8: 32-element blocks along K; NVFP4: 16): a re-quantization on every
            # GPU, in the quantize kernel itself or (MXFP8 outside Transformer Engine) in a pass of its own
            transpose = fp8.transpose
            if fp8.transpose_separate is not None and not stack.fused_mx_quantize:
                transpose = fp8.transpose_separate
        # forward: inputs and weights quantized; backward: output gradients, plus the transposed copies
        fp8_f = (cast_elements + weight_elements) * fp8.cast / bw
        fp8_b = (
            cast_grad_elements * fp8.cast + (cast_elements + cast_grad_elements + weight_elements) * transpose
        ) / bw
    # tensor-parallel collectives per layer: one all-reduce (or all-gather + reduce-scatter with sequence parallelism)
    # around the attention and one around the MLP. An MoE layer's routed experts gather instead over the expert-TP
    # group what the all-to-all brought (Megatron-Core MoEAlltoAllTokenDispatcher dispatch_postprocess: all-gather
    # over expert TP; combine_preprocess: reduce-scatter): k copies of each of its etp ranks' 1/tp of the tokens;
    # shared experts are a dense MLP on the attention's TP group (Megatron-Core SharedExpertMLP)
    # (a TP group wider than the NVLink domain, which a smaller --assume nvlink_domain_gpus can make, crosses NICs)
    tp_bw = xp.where(tp <= domain, link, scale_out)
    tp_block = _allreduce_s(tokens_mb * h * bytes_e, tp, tp_bw, a.collective_latency_s)
    mlp_comm = tp_block
    expert_comm = 0.0  # the routed experts' expert-TP collectives, per layer on average
    if model.moe is not None:
        moe_share = model.moe.layers / L
        gathered = tokens_mb * model.moe.experts_per_token * etp / tp * h * bytes_e
        etp_bw = xp.where(etp <= domain, link, scale_out)
        expert_comm = moe_share * _allreduce_s(gathered, etp, etp_bw, a.collective_latency_s)
        shared_comm = tp_block if model.moe.shared_ffn_size else 0.0
        mlp_comm = (1 - moe_share) * tp_block + moe_share * shared_comm + expert_comm
    comm = tp_block + mlp_comm
    comm_b = comm
    tp_hidden_b = 0.0  # backward TP collective time run beside GEMMs (it still holds SMs)
    if job.tp_comm_overlap:
        # Transformer Engine userbuffers / async TP split the GEMMs next to each collective into chunks and
        # run the collective behind them: only what the GEMMs cannot cover stays exposed
        comm = comm_b = xp.maximum(0.0, comm - mm_f)
    elif stack.async_tp_backward:
        # Megatron's linear layers run their backward TP collectives beside the GEMMs of the same layer
        # (_async_tp_backward_s); the routed experts' expert-TP collectives (in the dispatcher) stay exposed
        dense_b, tp_hidden_b = _async_tp_backward_s(comm - expert_comm, mm_f, layout.sequence_parallel)
        comm_b = expert_comm + dense_b
    cast_key = "fp4_cast" if fp4 else "fp8_cast"  # the quantization traffic's part
    fwd = {"matmul": mm_f, "attention": attn_f, "elementwise": ew_f, "tp_comm": comm, cast_key: fp8_f}
    bwd = {k: 2 * v if k not in ("tp_comm", cast_key) else v for k, v in fwd.items()}
    bwd["tp_comm"] = comm_b
    bwd[cast_key] = fp8_b
    if job.method != "full":
        # LoRA/QLoRA (Hu et al. 2021): the base weights are frozen, so backward computes the input gradients of
        # every linear layer (to reach the adapters below) but no weight gradient: one GEMM of the forward's
        # shape, not two. Each target adds its adapter, x A then (x A) B at rank r: two thin GEMMs forward, four
        # backward (input and weight gradients of both), which the roofline prices by their bytes
        targets = trainable_linears(model, job) or frozenset()
        r = job.lora_rank
        adapter_f = 0.0
        merge_f = merge_b = 0.0  # the adapter output's scaling and sum into the base output, and their backward
        # the adapter's branch joins the base output in element-wise ops (PEFT LoraLayer / torchtune LoRALinear:
        # result + lora_B(lora_A(x)) * scaling): forward, the scaling (read and write the output) and the sum (read
        # two, write one), one kernel where a compiler or fused stack merges them; backward, the scaling of the
        # output gradient and the sum of the branch's input gradient into the base's, in the activations' dtype
        merge_out = 3.0 if fused else 5.0
        for k, (din, dout, n) in shapes.items():
            if k not in targets:
                continue
            # the same rows and matrices as the base GEMM above (an expert's: a local expert's routed tokens)
            rows, shard, count = tokens_mb, tp, n / L
            if k.startswith("expert_"):
                rows, shard, count = expert_rows, etp, n / L / layout.ep
            adapter_f += count * (_gemm_s(rows, r, din, mm_peak, bw) + _gemm_s(rows, dout / shard, r, mm_peak, bw))
            merge_f += count * rows * merge_out * dout / shard * bytes_e / bw
            merge_b += count * rows * (2.0 * dout / shard + 3.0 * din) * bytes_e / bw
        fwd["matmul"] = mm_f + adapter_f
        bwd["matmul"] = mm_f + 2 * adapter_f
        fwd["elementwise"] = fwd["elementwise"] + merge_f
        bwd["elementwise"] = bwd["elementwise"] + merge_b
        if job.quant == "nf4":
            # bitsandbytes dequantizes every NF4 weight to 16 bits before each use (MatMul4Bit: forward, and again
            # for the input gradient): read 4.127 bits, write 2 bytes per weight, each pass
            fwd["nf4_dequant"] = weight_elements * (NF4_BYTES_PER_PARAM + 2) / bw
            bwd["nf4_dequant"] = fwd["nf4_dequant"]
    if job.flash_attention:
        # the backward recomputes the scores: 2.5x the forward FLOPs at the same kernel rate, with its own tile cost
        bwd["attention"] = attn_b
    ring_hidden = 0.0  # per layer and micro-batch: the ring's K/V exchange hidden behind its attention steps
    ring_rerun = 0.0
    if xp.nonzero(cp > 1):
        # ring attention (Liu et al. 2023, arXiv:2310.01889; PyTorch's _templated_ring_attention): cp steps, each
        # the local queries against one rank's K and V while the next K and V travel; the backward passes dK and
        # dV around the ring as well. A step's exchange hides behind that step's attention (load-balanced causal
        # chunks: 1/cp of the layer's attention each); what it cannot cover waits. The partial outputs are merged
        # and the gradients accumulated in fp32 every step: memory traffic
        steps = cp - 1
        kv_heads = model.attention_heads if stack.expands_gqa_kv else model.kv_heads
        kv_el = tokens_mb * kv_heads * (model.qk_head_dim + model.v_head_dim) / tp
        q_el = tokens_mb * model.attention_heads * model.qk_head_dim / tp
        out_el = tokens_mb * model.attention_heads * model.v_head_dim / tp
        ring_bw = xp.where(cp * tp <= domain, link, scale_out)
        send_f = a.collective_latency_s + kv_el * bytes_e / ring_bw
        send_b = a.collective_latency_s + kv_el * (bytes_e + a.ring_grad_bytes_per_element) / ring_bw
        exposed_f = xp.maximum(0.0, send_f - fwd["attention"] / cp)
        exposed_b = xp.maximum(0.0, send_b - bwd["attention"] / cp)
        merge = a.fused_ring_merge_bytes_per_element if stack.fused_elementwise else a.ring_merge_bytes_per_element
        fwd["cp_ring"] = xp.where(cp > 1, steps * (exposed_f + out_el * merge / bw), 0.0)
        grad_traffic = (q_el + kv_el) * 2.5 * a.ring_grad_bytes_per_element / bw
        bwd["cp_ring"] = xp.where(cp > 1, steps * (exposed_b + grad_traffic), 0.0)
        ring_hidden = xp.where(cp > 1, steps * (send_f - exposed_f + send_b - exposed_b), 0.0)
        ring_rerun = xp.where(cp > 1, steps * (send_f - exposed_f), 0.0)
    if model.moe is not None and xp.nonzero(layout.ep > 1):
        # dispatch and combine: each token's hidden state to its k experts and back, forward and backward;
        # all-to-all sends (ep - 1) / ep of it, over NVLink inside a node and the NICs across nodes
        # an expert group wider than a node still has its node's peers on NVLink: the NICs carry only the share
        # bound for other nodes, while the rest crosses NVLink at the same time (NCCL's all-to-all is one send and
        # receive per peer, each over the path to that peer)
        # copies of a token's hidden state per dispatch: one per routed expert, or one per destination rank where
        # the dispatcher deduplicates (DeepEP; moe_dispatch_ranks_per_token), never more than the expert ranks
        copies = (
            model.moe.experts_per_token
            if a.moe_dispatch_ranks_per_token is None
            else xp.minimum(a.moe_dispatch_ranks_per_token, xp.maximum(1, layout.ep))
        )
        moe_share = model.moe.layers / L
        # the busiest rank receives moe_load_imbalance x the mean, and the exchange ends when it has
        sent = tokens_mb * copies * h * bytes_e / tp * (layout.ep - 1) / layout.ep * a.moe_load_imbalance
        # a rank sends its own 1/tp of the tokens whatever etp is (the dispatcher routes the sequence-parallel
        # shard); the EP group strides over the etp ranks of an expert shard (Megatron-Core's expert rank order
        # tp-ep-dp-pp, parallel_state.py), so etp sets how many of its members share an NVLink domain
        local = xp.minimum(layout.ep, xp.maximum(1, domain // etp))  # expert ranks on this NVLink domain
        peers = xp.maximum(1, layout.ep - 1)
        a2a_s = xp.maximum(sent * (layout.ep - local) / peers / scale_out, sent * (local - 1) / peers / link)
        if job.moe_dispatcher == "deepep" and a.moe_dispatch_ranks_per_token is None:
            # DeepEP (DeepSeek-V3, arXiv:2412.19437 section 3.2.2; deep_ep Buffer.get_dispatch_layout's
            # num_tokens_per_rank / num_tokens_per_rdma_rank): a token crosses the network once to each other node
            # holding one of its experts, to the GPU of the same local index, which forwards it over NVLink to each
            # rank there holding one; a rank's own node gets it over NVLink once per rank. Under balanced routing the
            # k experts are k of the E without replacement
            token_bytes = tokens_mb * h * bytes_e / tp * a.moe_load_imbalance
            nodes = xp.maximum(1, xp.ceil(layout.ep / local))  # a partly filled last node is a node of its own
            ranks = expected_groups_hit(model.moe.experts, model.moe.experts_per_token, layout.ep)
            remote_nodes = (
                expected_groups_hit(model.moe.experts, model.moe.experts_per_token, nodes)
                * (nodes - 1)
                / xp.maximum(nodes, 1)
            )
            a2a_s = xp.maximum(
                token_bytes * remote_nodes / scale_out, token_bytes * ranks * (layout.ep - 1) / layout.ep / link
            )
        # an fp8 dispatch (DeepEP's, DeepSeek-V3 section 3.3.3) sends the forward dispatch and the backward's
        # gradient into the experts in fp8 with one fp32 scale per 128 channels; the forward combine and the
        # backward's gradient out of the experts stay 16-bit (moe_dispatch_bytes_ratio)
        ratio = moe_dispatch_bytes_ratio(job.moe_dispatch_dtype, bytes_e)
        a2a = xp.where(layout.ep > 1, moe_share * ((1 + ratio) * a2a_s + 2 * a.collective_latency_s), 0.0)
        fwd["moe_all_to_all"] = a2a
        bwd["moe_all_to_all"] = a2a
    if model.moe is not None:
        # the permutation around the experts, memory-bound (Megatron-Core MoEAlltoAllTokenDispatcher with
        # Transformer Engine's fused permute, moe_permute_bytes): forward, and its mirror in backward
        fwd["moe_permute"] = model.moe.layers / L * moe_permute_bytes(model, layout, tokens_mb, bytes_e, a) / bw
        bwd["moe_permute"] = fwd["moe_permute"]
    ep_taken = 0.0  # the exchange time --ep-comm-overlap took out of a layer's own micro-batch time (paired or not)
    paired = 0.0  # the share of micro-batches with a partner to run beside (the rest pay ep_taken back)
    if job.ep_comm_overlap and "moe_all_to_all" in fwd:
        # Megatron-Core --overlap-moe-expert-parallel-comm (combined 1F1B, model_chunk_schedule_plan.py: one
        # micro-batch's dispatch and combine on a side stream beside another's attention and expert work) and
        # DeepSeek-V3's DualPipe (section 3.2.1) run the exchange beside the compute of the micro-batch paired with
        # it; only what that compute cannot cover waits. Micro-batches with no partner (the first forward, and a
        # pipeline's warm-up and cool-down: min(m, pp) of them) pay their exchange in full
        total = fwd["moe_all_to_all"] + bwd["moe_all_to_all"]
        busy = sum(v for k, v in fwd.items() if k not in _COMM_PARTS) + sum(
            v for k, v in bwd.items() if k not in _COMM_PARTS
        )
        exposed = xp.maximum(0.0, total - busy)
        paired = xp.maximum(0.0, m - xp.minimum(m, pp)) / m
        ep_taken = total - exposed
        fwd["moe_all_to_all"] = bwd["moe_all_to_all"] = 0.5 * exposed
    full_layer = sum(v for k, v in fwd.items() if k != "moe_all_to_all") + fwd.get("moe_all_to_all", 0.0)
    # --recompute partial: the stage's layers that re-run their forward (Megatron --recompute-method block)
    n_recomputed = xp.minimum(0 if job.recompute_layers is None else job.recompute_layers, layers_here)
    if job.recompute == "full":
        recompute = full_layer
    elif job.recompute == "partial":
        recompute = full_layer * n_recomputed / layers_here
    elif job.recompute == "selective":
        recompute = _selective_recompute_s(
            job.selective_modules,
            model,
            attention=attn_f + score_traffic + fwd.get("cp_ring", 0.0),
            mm_module=mm_module,
            mm_scale=mm_f / mm_f4 if fp4 else 1.0,
            tokens=tokens_mb,
            expert_rows=expert_rows,
            tp=tp,
            sp=xp.where(layout.sequence_parallel, tp, 1),
            etp=etp,
            ep=layout.ep,
            element_bytes=bytes_e,
            bw=bw,
            moe_exchange=fwd.get("moe_all_to_all", 0.0) + fwd.get("moe_permute", 0.0),
            dense_mlp_comm=model.dense_layers / L * tp_block,  # (mlp_comm itself on a dense model)
            moe_mlp_comm=mlp_comm - model.dense_layers / L * tp_block,
        )
    elif job.recompute == "per-op" and fp4:
        # the NVFP4 GEMM is torch._scaled_mm_v2 (F.scaled_mm, as torchao's nvfp4_mm_triton calls it), which is not
        # among the ops per-op SAC saves (torch._functorch.partitioners.get_default_op_list's compute-intensive ops
        # hold aten.mm and aten._scaled_mm, torch 2.13): the fp4 layers re-run every GEMM and its quantization,
        # the bf16 tail every other matmul
        recompute = quantized * mm_f4 + (1.0 - quantized) * 0.5 * mm_f16 + fp8_f + ew_f
    elif job.recompute == "per-op":
        # torchtitan's per-op SAC saves every other matmul output and the attention output: half the
        # matmuls and the element-wise ops between them run again (torchtitan distributed/activation_checkpoint.py)
        recompute = 0.5 * (mm_f + fp8_f) + ew_f
        # It saves the sequence-parallel reduce-scatters' outputs but not the all-gathers' (torchtitan
        # distributed/activation_checkpoint.py: _COMM_OPS lists reduce_scatter_tensor and all_to_all_single, not
        # all_gather_into_tensor): the backward gathers each block's input again, half the forward's TP traffic
        recompute = recompute + xp.where(layout.sequence_parallel & (tp > 1), 0.5 * comm, 0.0)
    else:
        recompute = 0.0

    # ---- the stage's work per micro-batch, and the head on the last stage (16-bit in fp8 training too)
    per_mb = {k: (fwd[k] + bwd.get(k, 0.0)) * layers_here for k in fwd}
    per_mb["recompute"] = recompute * layers_here
    head_dims = (model.vocab_size / tp, model.token_embedding_dim)
    head_passes = 3 if job.method == "full" else 2  # a frozen head: forward and input gradient only
    per_mb["matmul"] += head_passes * _gemm_s(tokens_mb, head_dims[0], head_dims[1], eta16 * peak16 * clock, bw)
    # Megatron-LM's loss is unfused unless --cross-entropy-loss-fusion (arguments.py: store_true, off), however
    # fused its layers; eager stacks fuse it under --compile, XLA always
    fused_loss = (
        job.cross_entropy_fusion
        if job.cross_entropy_fusion is not None
        else fused and not stack.name.startswith("megatron")
    )
    if fused_loss:
        # a fused loss still streams every logit: the online max/sum pass, the pass writing the gradient in place,
        # and backward's scaling of it (fused_loss_bytes_per_logit)
        per_mb["loss"] = tokens_mb * model.vocab_size / tp * a.fused_loss_bytes_per_logit / bw
    else:
        # memory-bound passes over every vocabulary entry of every token: the loss as eager PyTorch runs it over the
        # logits (transformers' ForCausalLMLoss, torchtitan's cross_entropy on .float() logits), or Megatron's
        # vocab-parallel cross-entropy
        per_logit = (
            a.megatron_loss_bytes_per_logit if stack.name.startswith("megatron") else a.eager_loss_bytes_per_logit
        )
        per_mb["loss"] = tokens_mb * model.vocab_size / tp * per_logit / bw
    if layout.offload == "activations":
        # --offload activations (Megatron-Core cpu_offloading, torch.autograd.graph.save_on_cpu): each offloaded
        # layer's saved tensors cross PCIe to the host during the next layer's forward and back during its
        # backward, on a side stream; only what a layer's compute cannot cover waits
        n_off = layers_here if job.offload_layers is None else xp.minimum(job.offload_layers, layers_here)
        kept = sum(activation_bytes_per_layer(model, job, layout, memory or MemoryAssumptions()).values())
        copy_s = kept / host_link_bytes_per_s(gpu, a)
        exposed = xp.maximum(0.0, copy_s - sum(fwd.values())) + xp.maximum(0.0, copy_s - sum(bwd.values()))
        per_mb["activation_offload"] = n_off * exposed
    t_mb = sum(per_mb.values())

    parts = {k: v * m for k, v in per_mb.items()}
    # ---- pipeline: bubble and point-to-point
    if xp.nonzero(pp > 1):
        # the warm-up and cool-down micro-batches that make the bubble have no partner under --ep-comm-overlap:
        # their stages wait for the whole exchange (ep_taken), as without the overlap
        parts["pp_bubble"] = (pp - 1) / virtual_stages * (t_mb + ep_taken * layers_here)
        send = tokens_mb * h * bytes_e / tp  # scatter-gather: each TP rank sends its slice
        p2p_bw = xp.where(tp * pp > domain, scale_out, link)
        parts["pp_p2p"] = xp.where(pp > 1, 2 * virtual_stages * m * (a.collective_latency_s + send / p2p_bw), 0.0)
    # ---- data parallel: gradient reduction of the parameters this GPU holds
    # dense parameters are replicated over dp x cp; routed experts, split over etp x ep, over the expert-data-parallel
    # group gpus / (pp x ep x etp) (Megatron-Core reduces and shards expert gradients there, parallel_state.py
    # _EXPERT_DATA_PARALLEL_GROUP)
    b = count_params(model)
    local_dense = (b.total - b.parts.get("experts", 0)) / (tp * pp)
    local_experts = b.parts.get("experts", 0) / (etp * pp * layout.ep)
    local_params = local_dense + local_experts
    if recipe.name == "amp" and job.method == "full":
        # autocast (the amp recipe: fp32 weights) casts each weight to 16 bits in every forward (cached_cast: read
        # 4 B, write 2 B), casts its 16-bit gradient back to fp32 (read 2, write 4) and adds it into .grad from the
        # second micro-batch on (AccumulateGrad: read 4 + 4, write 4). A LoRA/QLoRA base is held in 16 bits (or
        # NF4): only its adapters, a few MB, are fp32, and they are left out
        parts["amp_casts"] = m * local_params * (12.0 + 12.0 * (m - 1) / m) / bw
    dp_group, edp = dp * cp, layout.expert_dp
    sharded_params = local_dense / dp_group + local_experts / edp  # one ZeRO/FSDP shard
    # collective time hidden behind compute (it still holds SMs): Megatron's backward TP collectives, then the
    # data-parallel ones below
    overlapped = (tp_hidden_b + paired * ep_taken) * layers_here * m
    if xp.nonzero((1 - paired) * ep_taken):
        parts["moe_all_to_all"] = parts.get("moe_all_to_all", 0.0) + (1 - paired) * ep_taken * layers_here * m
    replicated = (dp_group > 1) | (edp > 1)  # (elements of a grid with neither get 0 from every where below)
    if job.method == "full" and xp.nonzero(replicated):
        dp_bw = _data_parallel_busbw(gpu, layout, a, link, scale_out)
        grad_b = _reduce_bytes_per_param(job, recipe)
        edp_bw = _data_parallel_busbw(gpu, layout, a, link, scale_out, inner=etp * layout.ep * pp)
        # ZeRO-3/FSDP reduce-scatter the gradients and gather parameters layer by layer (zero3_gather below): the
        # gradient collective is half an all-reduce (Rajbhandari et al. 2020, section 7: 3 x params in all, of
        # which one is the reduce-scatter); routed experts reduce on their own expert-data-parallel group
        grads_rs = _reduce_scatter_s(local_dense * grad_b, dp_group, dp_bw, a.collective_latency_s)
        grads_ar = _allreduce_s(local_dense * grad_b, dp_group, dp_bw, a.collective_latency_s)
        if model.moe is not None:
            grads_rs = grads_rs + _reduce_scatter_s(local_experts * grad_b, edp, edp_bw, a.collective_latency_s)
            grads_ar = grads_ar + _allreduce_s(local_experts * grad_b, edp, edp_bw, a.collective_latency_s)
        t_dp = xp.where(layout.zero >= 3, grads_rs, grads_ar)
        if overlap_dp is None:
            overlap_dp = job.overlap_grad_reduce if job.overlap_grad_reduce is not None else stack.overlap_grad_reduce
        # hidden behind the last micro-batch's backward. With ZeRO-1/2 (Megatron's distributed optimizer) the
        # all-reduce is a reduce-scatter of the gradients during backward and an all-gather of the updated
        # parameters after the optimizer step (Megatron-LM docs/api-guide/dist_optimizer.md), half the bytes each:
        # only the first can hide behind backward; the second hides behind the next forward with
        # --overlap-param-gather, else it waits
        bwd_s, fwd_s = sum(bwd.values()) * layers_here, sum(fwd.values()) * layers_here
        # ZeRO-3/FSDP reduce-scatter unit by unit as backward goes: the last units' collectives (the first decoder
        # layer's and the unit of the parameters outside the layers: embeddings and LM head, torchtitan's root
        # fully_shard) start when no backward is left to hide them
        outside = (b.parts.get("embeddings", 0) + b.parts.get("lm_head", 0)) / (tp * pp)
        layer_params = (local_params - outside) / layers_here
        drain = xp.where(
            layout.zero >= 3,
            _reduce_scatter_s(outside * grad_b, dp_group, dp_bw, a.collective_latency_s)
            + _reduce_scatter_s(layer_params * grad_b, dp_group, dp_bw, a.collective_latency_s),
            0.0,
        )
        drain = xp.minimum(drain, t_dp) if overlap_dp else 0.0
        plain = xp.minimum(t_dp - drain, bwd_s) if overlap_dp else 0.0
        gather_ag = bool(job.overlap_param_gather)
        split = (xp.minimum(t_dp / 2, bwd_s) if overlap_dp else 0.0) + (
            xp.minimum(t_dp / 2, fwd_s) if gather_ag else 0.0
        )
        hidden = xp.where((layout.zero >= 1) & (layout.zero < 3), split, plain)
        parts["dp_comm"] = t_dp - hidden
        overlapped += hidden
        if layout.zero >= 3:
            # ZeRO-3/FSDP gather each layer's 16-bit parameters before its forward and again before its
            # backward, every micro-batch (Rajbhandari et al. 2020, section 7: 1.5x the traffic of plain data
            # parallelism). A ring collective over n nodes takes n - 1 inter-node steps; a stack that gathers
            # tensor by tensor pays them per parameter tensor, one that gathers a block at once per layer
            nodes = xp.maximum(1, xp.ceil(dp_group * tp * pp / domain)) if gpu.vendor != "google" else 1
            group_nodes = xp.minimum(nodes, dp_group)  # nodes the data-parallel ring crosses
            per_layer = sum(1 for k in shapes if k != "lm_head") * 2 if stack.gather_per_tensor else 1
            # NCCL's ring latency (tuning.cc): n - 1 network steps and r - n NVLink steps for r ranks on n nodes
            ring = (group_nodes - 1) * a.ring_step_latency_s + (dp_group - group_nodes) * a.intra_ring_step_latency_s
            # a list-output gather (DeepSpeed 2021) then copies the result out rank by rank
            per_rank = dp_group * a.list_gather_s_per_rank if stack.list_output_gathers else 0.0
            one = (a.collective_latency_s + ring + per_rank) * per_layer  # a layer's gather collectives
            latency = one * layers_here
            gather = (
                local_dense * 2 * (dp_group - 1) / dp_group / dp_bw
                + local_experts * 2 * (edp - 1) / edp / edp_bw
                + latency
            )
            fwd_compute = sum(fwd.values()) * layers_here
            bwd_compute = sum(bwd.values()) * layers_here
            if stack.prefetch_gathers:  # prefetching hides a gather behind the compute of the same pass
                # but not the pass's first: the forward waits for the unit outside the layers and the first layer
                # (the backward starts on the last layer and the head, still gathered: torchtitan keeps them,
                # reshard_after_forward False for the last block; FSDP2 keeps the root's)
                fill = (outside + layer_params) * 2 * (dp_group - 1) / dp_group / dp_bw + 2 * one
                exposed = xp.maximum(xp.minimum(fill, gather), gather - fwd_compute) + xp.maximum(
                    0.0, gather - bwd_compute
                )
                overlapped += xp.where(replicated, (2 * gather - exposed) * m, 0.0)
            else:
                exposed = 2 * gather + (gather if job.recompute in ("full", "partial") else 0.0)
            parts["zero3_gather"] = xp.where(replicated, exposed * m, 0.0)
            # FSDP2's copy-out / copy-in of the gathered parameters and their gradients, every micro-batch; once a
            # step under pipeline parallelism, whose schedule keeps the stage gathered and defers the reduce-scatter
            # to the last micro-batch (torchtitan apply_fsdp; torch.distributed.pipelining stage.py)
            copies = xp.where(pp == 1, m, 1)
            # the gradient copy-in writes the reduce dtype (the profile counts fp32's): less where it is bf16
            copy_bytes = stack.sharding_copy_bytes_per_param - (
                FSDP_REDUCE_BYTES - grad_b if recipe.name == "fsdp" else 0.0
            )
            copy_s = local_params * xp.maximum(0.0, copy_bytes) * copies / bw
            parts["sharding_copies"] = xp.where(replicated, copy_s, 0.0)
    # ---- context parallelism's hidden K/V exchanges hold SMs as well: forward, backward, and the forward again
    # where the layer's attention is recomputed
    if xp.nonzero(ring_hidden):
        if job.recompute in ("full", "selective"):
            rerun = 1.0
        elif job.recompute == "partial":
            rerun = n_recomputed / layers_here
        else:
            rerun = 0.0
        overlapped = overlapped + (ring_hidden + ring_rerun * rerun) * layers_here * m
    # ---- the SMs an overlapped NCCL collective holds are lost to the compute it runs beside
    if gpu.sm_count and xp.nonzero(overlapped):
        parts["comm_sm_contention"] = overlapped * min(1.0, a.collective_sms / gpu.sm_count)
    # ---- optimizer step: on the GPU, or on the host with ZeRO-Offload / ZeRO-Infinity
    opt_params = xp.where(layout.zero >= 1, sharded_params, local_params)
    if job.method != "full":  # the optimizer steps the adapters only
        opt_params = sum(lora_adapter_params(model, job).values()) / (tp * pp)
    if layout.offload in ("optimizer", "params"):
        parts.update(
            offload_step_s(
                gpu,
                a,
                opt_params,
                sharded_params,
                m,
                sum(fwd.values()) * layers_here,
                sum(bwd.values()) * layers_here,
                params_offloaded=layout.offload == "params",
                prefetch=stack.prefetch_gathers,
                refetch=job.recompute in ("full", "partial"),
                element_bytes=bytes_e,
            )
        )
    else:
        parts["optimizer"] = opt_params * a.optimizer_bytes_per_param / bw

    # ---- an eager stack launches every kernel from Python: the host's dispatch is a floor under the step. The GPU
    # runs behind the host's queue, so the step is the longer of the two; with little work per kernel (small
    # models, short micro-batches) the host sets the pace
    if not fused:
        host_s = a.eager_host_s_per_layer * layers_here * m
        gpu_s = sum(parts.values())
        parts["host_dispatch_wait"] = xp.maximum(0.0, host_s - gpu_s)

    tokens_iter = m * micro * job.seq_len * dp
    per_token = flops_per_token(model, job.seq_len, causal=True)
    model_flops = per_token.step_flops(job.method) * tokens_iter
    return StepTime(
        parts=MappingProxyType({k: v for k, v in parts.items() if xp.nonzero(v)}),
        tokens_per_iteration=tokens_iter,
        gpus=layout.gpus,
        model_flops_per_iteration=model_flops,
        peak_flops_per_s=peak,
        matmul_efficiency=eta_mm,
        matmul_efficiency_source=eta_src,
        micro_batches=m,
        attention_flops_share=per_token.forward_attention_flops / per_token.forward_flops,
        stack=stack.name,
        fp8_recipe=fp8.name if fp8 is not None else None,
        attention_kernel=attention_kernel,
        cross_entropy_fusion=bool(fused_loss),
        global_batch=global_batch,
        global_batch_source=gb_source,
    )
