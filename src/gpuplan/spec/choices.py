"""Every closed list of choices gpuplan accepts, written once.

Each is a ``StrEnum``: a member *is* its string (``Precision.BF16_MIXED == "bf16-mixed"``), so records and JSON
carry plain strings. The CLI's ``click.Choice`` lists, the Python API's checks, the spec validators and the
docs derive from these classes; no other module spells a choice list out. Defaults live beside them.
This module imports nothing heavy: the CLI reads it to build ``--help``.
"""

from __future__ import annotations

from enum import StrEnum


class Precision(StrEnum):
    """Training precision recipe (``--precision``)."""

    FP32 = "fp32"
    FP16_MIXED = "fp16-mixed"
    BF16_MIXED = "bf16-mixed"
    BF16 = "bf16"
    FP8_MIXED = "fp8-mixed"
    FP4_MIXED = "fp4-mixed"


class MainGrads(StrEnum):
    """dtype of the Megatron recipes' data-parallel gradient buffer (``--main-grads``)."""

    FP32 = "fp32"
    BF16 = "bf16"


class MoeDispatchDtype(StrEnum):
    """dtype of an MoE layer's dispatch all-to-all (``--moe-dispatch-dtype``): 16-bit, or fp8 with per-128 scales."""

    BF16 = "bf16"
    FP8 = "fp8"


class MoeDispatcher(StrEnum):
    """How an MoE layer's tokens reach their experts (``--moe-dispatcher``): one all-to-all carrying a copy per
    routed expert (Megatron-Core's alltoall dispatcher), or DeepEP's, which sends a token once to each node it goes
    to and once to each rank there (Megatron-Core's flex dispatcher with the deepep backend)."""

    ALLTOALL = "alltoall"
    DEEPEP = "deepep"


class AttentionKernel(StrEnum):
    """Flash-attention kernel family (``--attention-kernel``): the stack's default, FlashAttention-2's mma.sync
    kernels, or the Hopper/Blackwell-native ones (cuDNN fused attention, FlashAttention-3, Transformer Engine)."""

    AUTO = "auto"
    FA2 = "fa2"
    CUDNN = "cudnn"


class PipelineSchedule(StrEnum):
    """Pipeline schedule (``--pipeline-schedule``): 1F1B, or interleaved 1F1B with ``--virtual-stages`` chunks."""

    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"


class OptimizerDtype(StrEnum):
    """dtype of the Megatron recipes' optimizer states and main params (``--optimizer-dtype``)."""

    FP32 = "fp32"
    BF16 = "bf16"


class Recipe(StrEnum):
    """Whose memory accounting a training run follows (``--recipe``)."""

    AUTO = "auto"
    AMP = "amp"
    MEGATRON = "megatron"
    DEEPSPEED = "deepspeed"
    FSDP = "fsdp"
    ZERO = "zero"


class Stack(StrEnum):
    """The software stack a training run's step time follows (``--stack``): which kernels are fused, how
    sharded parameters are gathered and what overlaps by default (``estimate/steptime.py`` STACKS)."""

    AUTO = "auto"
    MEGATRON = "megatron"
    MEGATRON_2021 = "megatron-2021"
    FSDP2 = "fsdp2"
    DEEPSPEED = "deepspeed"
    DEEPSPEED_2021 = "deepspeed-2021"
    HF = "hf"
    JAX = "jax"


class Fp8Recipe(StrEnum):
    """How low-precision training scales its tensors (``--fp8-recipe``): the fp8 recipes with ``--precision
    fp8-mixed``, NVFP4 with ``--precision fp4-mixed``."""

    AUTO = "auto"
    DELAYED = "delayed"
    TENSORWISE = "tensorwise"
    ROWWISE = "rowwise"
    BLOCKWISE = "blockwise"
    MXFP8 = "mxfp8"
    NVFP4 = "nvfp4"


class Optimizer(StrEnum):
    """Optimizer (``--optimizer``)."""

    ADAMW = "adamw"
    ADAMW_8BIT = "adamw-8bit"
    SGD = "sgd"
    ADAFACTOR = "adafactor"
    LION = "lion"


class Method(StrEnum):
    """Full training or a parameter-efficient fine-tune (``--method``)."""

    FULL = "full"
    LORA = "lora"
    QLORA = "qlora"


class Recompute(StrEnum):
    """Activation recomputation (``--recompute``): Korthikanti's selective, torchtitan's per-op SAC, full
    recomputation of ``--recompute-layers`` layers per stage (partial), or of every layer (full)."""

    NONE = "none"
    SELECTIVE = "selective"
    PER_OP = "per-op"
    PARTIAL = "partial"
    FULL = "full"


class RecomputeModule(StrEnum):
    """What ``--recompute selective`` re-runs (``--recompute-modules``, Megatron-Core's --recompute-modules,
    TransformerConfig.recompute_modules): the attention core (the default), the norms, a dense layer's MLP, an MoE
    layer's experts, their activation function or its shared experts, and MLA's up projections."""

    CORE_ATTN = "core_attn"
    LAYERNORM = "layernorm"
    MLP = "mlp"
    MOE = "moe"
    MOE_ACT = "moe_act"
    SHARED_EXPERTS = "shared_experts"
    MLA_UP_PROJ = "mla_up_proj"


class Offload(StrEnum):
    """What moves to host memory (``--offload``): ZeRO-Offload's optimizer states or parameters, or the saved
    activations of ``--offload-layers`` decoder layers."""

    NONE = "none"
    OPTIMIZER = "optimizer"
    PARAMS = "params"
    ACTIVATIONS = "activations"


class Quant(StrEnum):
    """Quantized frozen base of a fine-tune (``--quant``)."""

    NF4 = "nf4"
    INT8 = "int8"


class Weights(StrEnum):
    """Weight format when serving (``--weights``); bits per parameter live in ``estimate/quant.py``."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4_G32 = "int4-g32"
    INT4_AWQ = "int4-awq"
    INT4_GPTQ = "int4-gptq"
    GGUF_Q8_0 = "gguf-q8_0"
    GGUF_Q6_K = "gguf-q6_k"
    GGUF_Q5_K_M = "gguf-q5_k_m"
    GGUF_Q4_K_M = "gguf-q4_k_m"
    GGUF_Q4_0 = "gguf-q4_0"
    NVFP4 = "nvfp4"
    MXFP4 = "mxfp4"


class KvCache(StrEnum):
    """KV-cache element type when serving (``--kv-cache``)."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"


class Engine(StrEnum):
    """Serving engine profile (``--engine``); each profile's defaults, with sources, live in
    ``estimate/inference.py`` (``ENGINE_PROFILES``). ``server`` is an alias of ``vllm``."""

    SERVER = "server"
    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"
    TGI = "tgi"
    LLAMA_CPP = "llama.cpp"
    COMPILED = "compiled"
    HF = "hf"


#: Engine names that are another profile's alias.
ENGINE_ALIASES = {Engine.SERVER.value: Engine.VLLM.value}
#: Engines that run one static batch (no scheduler); every other profile batches continuously.
STATIC_ENGINES = frozenset({Engine.COMPILED.value, Engine.HF.value})


class Storage(StrEnum):
    """Storage class of a plan (``--storage``); bandwidths with sources live in ``estimate/machine.py``."""

    LOCAL_NVME = "local-nvme"
    NFS = "nfs"
    LUSTRE = "lustre"
    OBJECT = "object"


class Pricing(StrEnum):
    """How an offer is priced (``offers list --pricing``)."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    RESERVED_1Y = "reserved-1y"
    RESERVED_3Y = "reserved-3y"
    SUBSCRIPTION = "subscription"
    QUOTE = "quote"


class PlanPricing(StrEnum):
    """What ``plan train --pricing`` ranks on: the offers of one pricing kind, or owned hardware priced as ``gpuplan
    tco`` prices it (``owned``, plan/owned.py)."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    RESERVED_1Y = "reserved-1y"
    RESERVED_3Y = "reserved-3y"
    SUBSCRIPTION = "subscription"
    QUOTE = "quote"
    OWNED = "owned"


class OfferSort(StrEnum):
    """Order of ``offers list --sort``."""

    GPU_HOUR = "gpu-hour"
    HOUR = "hour"
    PROVIDER = "provider"
    GPU = "gpu"


class GpuSort(StrEnum):
    """Order of ``gpus list --sort`` (numbers: largest first)."""

    BANDWIDTH = "bandwidth"
    BF16 = "bf16"
    FP32 = "fp32"
    FP4 = "fp4"
    FP8 = "fp8"
    ID = "id"
    MEMORY = "memory"
    NAME = "name"
    TDP = "tdp"
    VENDOR = "vendor"
    YEAR = "year"


class BenchSuite(StrEnum):
    """What ``local bench`` measures."""

    MATMUL = "matmul"
    MEMORY = "memory"
    PCIE = "pcie"
    ALLREDUCE = "allreduce"
    DISK = "disk"
    ALL = "all"


class BenchDtype(StrEnum):
    """Matmul dtypes ``local bench`` can time."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    TF32 = "tf32"
    FP32 = "fp32"


class TraceSource(StrEnum):
    """What ``local diagnose --from`` reads: a ``local watch`` trace, an nvidia-smi CSV log, or a DCGM log
    (``dcgmi dmon`` output or DCGM exporter scrapes; docs/watch.md)."""

    WATCH = "watch"
    NVIDIA_SMI = "nvidia-smi"
    DCGM = "dcgm"


class ValidateCategory(StrEnum):
    """What ``validate --category`` scores (``plan/validate.py``: the files behind each)."""

    TRAINING = "training"
    INFERENCE = "inference"
    MEMORY = "memory"


class Objective(StrEnum):
    """What ``plan train --objective`` ranks by: time to train, cost, or GPU count (ties: the others)."""

    TIME = "time"
    COST = "cost"
    GPUS = "gpus"


class PlanPrune(StrEnum):
    """Why ``gpuplan plan`` set a candidate aside: the fixed reason ids of the ``pruned`` counts (docs/plan.md).

    does_not_fit_memory: the estimate of the busiest GPU exceeds its memory; layout_does_not_divide: tp x pp x ep
    does not divide the GPU count, tp does not divide the heads or exceeds the node, or the global batch is not
    whole micro-batches x dp; batch_above_rule: without --global-batch, micro-batch x dp alone is more than twice
    the default batch rule's sequences; no_offer_of_that_size: no instance of the pricing kind gives that many
    GPUs in whole instances; dominated: the same GPUs, layout and micro-batch fit with less recomputation (which
    is never slower); misses_deadline, over_budget, misses_slo: the constraint; not_supported: the GPU lacks the
    dtype (fp8, fp4) or the estimate refused the combination."""

    DOES_NOT_FIT_MEMORY = "does_not_fit_memory"
    LAYOUT_DOES_NOT_DIVIDE = "layout_does_not_divide"
    BATCH_ABOVE_RULE = "batch_above_rule"
    NO_OFFER_OF_THAT_SIZE = "no_offer_of_that_size"
    DOMINATED = "dominated"
    MISSES_DEADLINE = "misses_deadline"
    OVER_BUDGET = "over_budget"
    MISSES_SLO = "misses_slo"
    NOT_SUPPORTED = "not_supported"


def values(choice: type[StrEnum]) -> tuple[str, ...]:
    """The strings of a choice class, in declaration order (what ``click.Choice`` and messages list)."""
    return tuple(m.value for m in choice)


def check(choice: type[StrEnum], value: object, flag: str) -> str:
    """``value`` if it is one of ``choice``'s strings, else the one-line error the whole tool uses."""
    from ..errors import JobError

    if isinstance(value, str) and value in values(choice):
        return value
    raise JobError(f"{flag} must be one of {', '.join(values(choice))}, got {value!r}")


#: Defaults that differ between commands (each is the command's documented default).
TRAIN_STORAGE_DEFAULT = Storage.LUSTRE
SERVE_STORAGE_DEFAULT = Storage.OBJECT
