"""Training and fine-tuning memory per GPU: model states, activations, and what a real process holds.

Everything here is a pure function of frozen values (model, accelerator, layout, job, assumptions).
The result names every part, so a reader can see where the bytes go and which source each follows.

Sources, by part:
- Model states per precision recipe: ZeRO (Rajbhandari et al. 2020, section 3.1 and Table 1) for the
  mixed-precision Adam accounting and the sharding of each stage; Megatron-LM
  docs/api-guide/dist_optimizer.md (bytes per parameter, with and without the distributed optimizer);
  DeepSpeed docs/code-docs/source/memory.rst (the memory estimator's ZeRO-2/3 formulas); PyTorch
  autocast (aten/src/ATen/autocast_mode.cpp, cached casts); bitsandbytes 8-bit optimizers (block-wise
  uint8 states, block 256, fp32 absmax); QLoRA (Dettmers et al. 2023, section 3: NF4 with double
  quantization, 0.127 bits/parameter of constants).
- Activations: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models", Table 2 and equations 1-6, generalized term by term (see ``layer_activation_terms``).
- Runtime overheads: named assumptions (``MemoryAssumptions``), each with its source; the cuBLAS workspace
  and the fp8 weight copies follow the accelerator's catalog figures (``cublas_workspace_bytes``,
  ``fp8_gemm_any_layout``), with the defaults below where an entry has none.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar

from ..errors import JobError
from ..spec.accelerator import Accelerator
from ..spec.model import ModelSpec, ParamsOnlyModel
from ..spec.training import Parallelism, TrainingJob
from ..units import MAX_BATCH, MAX_GPUS, MAX_LORA_RANK, MAX_SEQ_TOKENS, GiB, MiB, check_range
from . import xp
from .assumptions import Assumption, AssumptionSet, check_assumptions
from .itemized import Itemized  # the base class, also memory.Itemized
from .params import count_params, largest_module_params, linear_shapes

# ------------------------------------------------------------------------------------------- recipes


@dataclass(frozen=True)
class Recipe:
    """Bytes per trained parameter of each kind a precision recipe keeps.

    ``weights``: the copy forward/backward read. ``grads``: the gradient autograd writes.
    ``grad_copy``: an fp32 gradient the optimizer keeps beside 16-bit grads. ``master``: fp32 master
    weights. ``state``: bytes of one optimizer state element. ``grads_shard_stage``: the ZeRO stage
    from which ``grads`` are partitioned (DeepSpeed's estimator budgets full 16-bit grads below stage 3).
    """

    name: str
    title: str
    source: str
    weights: float
    grads: float
    grad_copy: float
    master: float
    state: float
    grads_shard_stage: int = 2
    autocast_copy: float = 0.0
    grads_only_in_flight_at_stage3: bool = False


RECIPES: Mapping[str, Recipe] = MappingProxyType(
    {
        "amp": Recipe(
            "amp",
            "PyTorch AMP: fp32 weights, grads and states; 16-bit copies made by autocast",
            "PyTorch autocast (cached_cast in aten/src/ATen/autocast_mode.cpp keeps one 16-bit copy per fp32 weight "
            "until the autocast region exits)",
            weights=4,
            grads=4,
            grad_copy=0,
            master=0,
            state=4,
            autocast_copy=2,
        ),
        "megatron": Recipe(
            "megatron",
            "Megatron-LM: bf16 weights, fp32 main grads, fp32 main params and states",
            "Megatron-LM docs/api-guide/dist_optimizer.md: 18 B/param (bf16 param, fp32 grad); 6 + 12/d with the "
            "distributed optimizer",
            weights=2,
            grads=4,
            grad_copy=0,
            master=4,
            state=4,
        ),
        "megatron-fp16": Recipe(
            "megatron-fp16",
            "Megatron-LM fp16: fp16 weights and grads, fp32 grad copy, main params and states",
            "Megatron-LM docs/api-guide/dist_optimizer.md: 20 B/param (fp16 param, fp16 grad); 4 + 16/d distributed",
            weights=2,
            grads=2,
            grad_copy=4,
            master=4,
            state=4,
        ),
        "deepspeed": Recipe(
            "deepspeed",
            "DeepSpeed ZeRO: 16-bit weights and grads, fp32 grad partition, master and states",
            "DeepSpeed docs/code-docs/source/memory.rst: ZeRO-2 4P + 16P/N, ZeRO-3 18P/N + 4 x largest layer",
            weights=2,
            grads=2,
            grad_copy=4,
            master=4,
            state=4,
            grads_shard_stage=3,
            grads_only_in_flight_at_stage3=True,
        ),
        "zero": Recipe(
            "zero",
            "ZeRO paper accounting: 2 + 2 + K=12 bytes per parameter (theoretical minimum)",
            "Rajbhandari et al. 2020, ZeRO, section 3.1 and Table 1",
            weights=2,
            grads=2,
            grad_copy=0,
            master=4,
            state=4,
        ),
        "fsdp": Recipe(
            "fsdp",
            "PyTorch FSDP mixed precision: sharded fp32 params, grads and states; bf16 copies of the units in flight",
            "PyTorch FSDP MixedPrecision / FSDP2 MixedPrecisionPolicy docs (param_dtype bf16, sharded fp32 parameters)",
            weights=4,
            grads=4,
            grad_copy=0,
            master=0,
            state=4,
        ),
        "fp32": Recipe(
            "fp32",
            "fp32 everywhere",
            "IEEE fp32: 4 bytes per element",
            weights=4,
            grads=4,
            grad_copy=0,
            master=0,
            state=4,
        ),
        "bf16": Recipe(
            "bf16",
            "pure bf16: bf16 weights, grads and optimizer states",
            "torch.optim creates states with zeros_like(param): the parameter's dtype",
            weights=2,
            grads=2,
            grad_copy=0,
            master=0,
            state=2,
        ),
    }
)

#: Bytes per element of the gradients FSDP2 reduces and, with gradient sync off between micro-batches, accumulates
#: unsharded: the MixedPrecisionPolicy reduce_dtype, float32 in torchtitan (mixed_precision_reduce) and NeMo
#: AutoModel (components/moe/parallelizer.py), which FSDPParam.to_accumulated_grad_if_needed casts to.
FSDP_REDUCE_BYTES = 4.0


def fsdp_reduce_bytes(job: TrainingJob) -> float:
    """Bytes per element of FSDP's reduce dtype: :data:`FSDP_REDUCE_BYTES`, or bf16's 2 with ``--main-grads bf16``
    (MixedPrecisionPolicy ``reduce_dtype``, as IBM's fms-fsdp sets it)."""
    return 2.0 if job.main_grads == "bf16" else FSDP_REDUCE_BYTES


#: Optimizer states per parameter, in units of one state element, and what each is.
OPTIMIZER_STATES: Mapping[str, tuple[float, str]] = MappingProxyType(
    {
        "adamw": (2.0, "AdamW: first and second moments (Loshchilov & Hutter 2019)"),
        "sgd": (1.0, "SGD with momentum: one momentum buffer (torch.optim.SGD)"),
        "lion": (1.0, "Lion: one momentum buffer (Chen et al. 2023)"),
    }
)

#: bitsandbytes 8-bit Adam: two uint8 states plus one fp32 absmax per 256-element block.
ADAM_8BIT_BYTES_PER_PARAM = 2 * (1 + 4 / 256)

#: NF4 storage with double quantization: 4 bits + 0.127 bits of constants (QLoRA section 3).
NF4_BYTES_PER_PARAM = (4 + 0.127) / 8
#: LLM.int8 storage: 1 byte; the per-row fp32 scale is counted from the matrix shapes.
INT8_BYTES_PER_PARAM = 1.0


def resolve_recipe(job: TrainingJob, layout: Parallelism) -> tuple[Recipe, str]:
    """The recipe that ``job.precision`` / ``job.recipe`` name, and why it was chosen; ``--main-grads``,
    ``--optimizer-dtype`` and ``--fp8-params`` adjust the Megatron recipes' gradient buffer, optimizer and weights."""
    recipe, why = _named_recipe(job, layout)
    if job.main_grads is not None or job.fp8_params or job.optimizer_dtype is not None:
        flag = (
            "--main-grads" if job.main_grads is not None else "--fp8-params" if job.fp8_params else "--optimizer-dtype"
        )
        if job.method != "full":
            raise JobError(f"{flag} applies to full training (LoRA/QLoRA train adapters only): drop it")
        if job.main_grads == "bf16" and recipe.name == "megatron-fp16":
            raise JobError("--main-grads bf16 goes with bf16 training; fp16 keeps fp16 grads beside an fp32 copy")
        fsdp_reduce = recipe.name == "fsdp" and job.main_grads is not None
        if fsdp_reduce and (job.fp8_params or job.optimizer_dtype is not None):
            other = "--fp8-params" if job.fp8_params else "--optimizer-dtype"
            raise JobError(f"{other} applies to the Megatron recipes (Megatron-LM, NeMo); with FSDP drop it")
        if not recipe.name.startswith("megatron") and not fsdp_reduce:
            fsdp_too = flag == "--main-grads"
            raise JobError(
                f"{flag} applies to the Megatron recipes (Megatron-LM, NeMo)"
                + (" and to FSDP (its reduce dtype)" if fsdp_too else "")
                + f"; this job's recipe is {recipe.name}: add --recipe megatron"
                + (" or --fsdp" if fsdp_too else "")
            )
        if fsdp_reduce:
            # FSDP's MixedPrecisionPolicy reduce_dtype: the dtype of the gradient reduce-scatter and of unsharded
            # gradients accumulated across micro-batches; the sharded gradients stay in the parameters' fp32
            why += f"; --main-grads {job.main_grads} (FSDP reduce dtype)"
        elif job.main_grads is not None:
            # Megatron-LM keeps its data-parallel gradient buffer in fp32 unless --grad-reduce-in-bf16
            # (megatron/core/distributed/distributed_data_parallel_config.py, grad_reduce_in_fp32); fp16 training
            # keeps fp16 grads beside an fp32 copy either way
            grads = 2 if job.main_grads == "bf16" or recipe.name == "megatron-fp16" else 4
            if grads != recipe.grads:
                title = recipe.title.replace("fp32 main grads", f"{job.main_grads} main grads (--main-grads)")
                recipe = replace(recipe, grads=grads, title=title)
            why += f"; --main-grads {job.main_grads}"
        if job.optimizer_dtype == "bf16":
            # Apex DistributedFusedAdam with dtype bf16 (NeMo's distributed_fused_adam ``dtype``) keeps its states
            # and its distributed copy of the parameters (store_params) in bf16; Megatron-Core's precision-aware
            # optimizer does the same with --exp-avg-dtype/--exp-avg-sq-dtype/--main-params-dtype
            title = recipe.title.replace("fp32 main params and states", "bf16 main params and states")
            recipe = replace(recipe, state=2, master=2, title=title)
            why += "; --optimizer-dtype bf16"
        if job.fp8_params:
            # --fp8-param-gather: Transformer Engine's Float8Tensor parameters replace the 16-bit weights
            # (megatron/core/fp8_utils.py; the fp32 main params stay in the optimizer)
            title = recipe.title.replace("bf16 weights", "fp8 weights (--fp8-params)")
            recipe = replace(recipe, weights=1, title=title)
            why += "; --fp8-params"
    return recipe, why


def stack_job(job: TrainingJob, gpu: Accelerator) -> TrainingJob:
    """``job`` with ``--stack auto`` resolved where the accelerator decides it: on a Google TPU (catalog vendor
    ``google``) training runs as XLA-compiled JAX (MaxText, Levanter, AXLearn; PyTorch/XLA aside), so auto means
    ``jax``; on every other accelerator the job is returned as it is and auto follows the recipe."""
    if job.stack == "auto" and gpu.vendor == "google":
        return replace(job, stack="jax")
    return job


def _named_recipe(job: TrainingJob, layout: Parallelism) -> tuple[Recipe, str]:
    """The recipe that ``job.precision`` / ``job.recipe`` name, and why it was chosen."""
    if job.precision == "fp32":
        return RECIPES["fp32"], "precision fp32"
    if job.precision == "bf16":
        return RECIPES["bf16"], "precision bf16 (pure bf16, no fp32 master weights)"
    if job.recipe != "auto":
        name = job.recipe
        if name == "megatron" and job.precision == "fp16-mixed":
            name = "megatron-fp16"
        return RECIPES[name], f"--recipe {job.recipe}"
    if job.stack == "jax":
        # MaxText's base.yml (AI-Hypercomputer/maxtext e591f30) keeps the parameters in weight_dtype float32 (line
        # 174) and computes in dtype bfloat16 (line 114), its gradients in grad_dtype float32 (line 111) and AdamW's
        # mu in mu_dtype, which inherits weight_dtype (line 993; nu always does): 4 + 4 + 8 bytes per parameter,
        # sharded with the parameters, with no separate master copy, and bf16 copies only of the layer in flight. That
        # is the fsdp recipe's bookkeeping, whatever the sharding (ici_fsdp_parallelism, or none)
        why = "auto (--stack jax: MaxText's float32 weights, gradients and AdamW states); --recipe to change"
        return RECIPES["fsdp"], why
    if layout.zero == 3 and job.fsdp:
        # FSDP2 composes with TP/PP/CP (torchtitan, NeMo AutoModel) and keeps its recipe: sharded fp32 params
        name, why = "fsdp", "--fsdp"
    elif xp.same(layout.tp * layout.pp * layout.cp > 1):  # a grid of layouts shares the recipe (xp.same)
        name, why = "megatron", "tensor/pipeline/context parallelism: Megatron-style"
    elif layout.zero > 0:
        name, why = "deepspeed", f"--zero {layout.zero}: DeepSpeed"
    else:
        name, why = "amp", "one GPU or plain data parallel: PyTorch AMP (as Hugging Face Trainer and Accelerate run it)"
    if name == "megatron" and job.precision == "fp16-mixed":
        name = "megatron-fp16"
    return RECIPES[name], f"auto ({why}); --recipe to change"


#: cuBLAS workspace assumed for a GPU whose catalog entry has no ``cublas_workspace_bytes``: PyTorch's
#: ':4096:2:16:8' default with CUBLAS_WORKSPACE_CONFIG unset, 2 x 4 MiB + 8 x 16 KiB = 8,519,680 bytes
#: (aten/src/ATen/cuda/CublasHandlePool.cpp, pytorch/pytorch#91564).
DEFAULT_CUBLAS_WORKSPACE_BYTES = 4096 * 1024 * 2 + 16 * 1024 * 8


def cublas_workspace_bytes(gpu: Accelerator) -> int:
    """The cuBLAS workspace PyTorch allocates on this GPU: the catalog figure, else
    :data:`DEFAULT_CUBLAS_WORKSPACE_BYTES`."""
    return gpu.cublas_workspace_bytes if gpu.cublas_workspace_bytes is not None else DEFAULT_CUBLAS_WORKSPACE_BYTES


#: Share of decoder layers fp4 training keeps in bf16, the last ones (StepAssumptions.SOURCES
#: ["fp4_bf16_tail_fraction"]: torchtitan's NVFP4 recipe, ~15 % of the final blocks; arXiv:2509.25149).
#: The default of the ``fp4_bf16_tail_fraction`` assumption, which memory and step time both read (``--assume``).
FP4_BF16_TAIL_FRACTION = 0.15


def fp4_bf16_tail_layers(layers: int, fraction: float = FP4_BF16_TAIL_FRACTION) -> int:
    """Decoder layers an fp4 run keeps in bf16: the last ceil(``fraction`` x layers) (torchtitan's Llama 3 8B
    recipe: 5 of 32, Qwen3 8B: 6 of 36), at most all of them."""
    return min(layers, math.ceil(fraction * layers - 1e-9))


def fp8_weight_copies(gpu: Accelerator) -> tuple[int, str]:
    """Bytes per trained parameter of fp8 weight copies Transformer Engine keeps, and why.

    A software rule on a hardware fact: TE quantizes each weight once per step and keeps it; where the GPU's fp8
    GEMMs take only the TN layout (cuBLASLt below compute capability 10.0) it keeps a transposed fp8 copy too, for
    the backward GEMMs. The catalog's ``fp8_gemm_any_layout`` says which; an entry without it is taken as TN-only
    (Hopper's case: the larger figure).
    """
    if gpu.fp8_gemm_any_layout:
        return 1, f"fp8 GEMMs on {gpu.id} take any layout, so no transposed copy"
    if gpu.fp8_gemm_any_layout is None:
        return 2, (
            f"no fp8 GEMM layout figure for {gpu.id} in the catalog: taken as TN-only like Hopper, so a "
            "transposed copy too"
        )
    return 2, f"fp8 GEMMs on {gpu.id} take only the TN layout, so a transposed copy too"


# --------------------------------------------------------------------------------------- assumptions


@dataclass(frozen=True)
class MemoryAssumptions(AssumptionSet):
    """Defaults for what the formulas cannot know; each is overridable and shown with its source."""

    cuda_context_bytes: int = 500 * MiB
    allocator_reserve_fraction: float = 0.05
    nccl_buffer_bytes_per_communicator: int = 256 * MiB
    deepspeed_bucket_elements: int = 500_000_000
    fsdp_units_in_flight: int = 2
    logits_bytes_per_element_hf: float = 12.0
    logits_bytes_per_element_megatron: float = 4.0
    gated_mlp_saved_tensors: int = 4
    fused_gated_mlp_saved_tensors: int = 3
    fp8_saved_input_bytes_per_element: float = 1.0
    fp4_saved_bytes_per_element: float = 0.5625
    fp4_bf16_tail_fraction: float = FP4_BF16_TAIL_FRACTION
    activation_bytes_per_element: float = 2.0

    SOURCES = MappingProxyType(
        {
            "cuda_context_bytes": (
                "bytes",
                "CUDA context with lazy module loading: 0.47 GB measured on an A100 80GB "
                "with torch 2.1 + CUDA 12.1 (stas00/ml-engineering, 'CUDA context'); PyTorch PR "
                "#86509 reports 274 MiB lazy vs 636 MiB eager",
            ),
            "allocator_reserve_fraction": (
                "fraction of activations, gradients and buffers",
                "PyTorch's caching allocator rounds "
                "to 512 B and carves 2 MiB / 20 MiB segments (CUDACachingAllocator.cpp); 5 % "
                "is gpuplan's placeholder until measurements in docs/measurements/ replace it",
            ),
            "nccl_buffer_bytes_per_communicator": (
                "bytes",
                "NCCL_BUFFSIZE 4 MiB per channel and peer connection "
                "(NCCL environment docs) x 2 ring peers x 32 channels; allocated "
                "outside PyTorch's allocator",
            ),
            "deepspeed_bucket_elements": (
                "elements",
                "DeepSpeed ZeRO config default reduce_bucket_size = "
                "allgather_bucket_size = 5e8 (16-bit elements, double-buffered)",
            ),
            "fsdp_units_in_flight": (
                "decoder layers",
                "FSDP BackwardPrefetch.BACKWARD_PRE: current and next "
                "unit's parameters are gathered at once (FSDP docs)",
            ),
            "logits_bytes_per_element_hf": (
                "bytes per token per vocabulary entry",
                "transformers' loss upcasts the "
                "logits: bf16 logits 2 + fp32 log-softmax output 4 + fp32 grad 4 + bf16 "
                "grad 2 live at the start of backward (derived from the ForCausalLMLoss code "
                "path and torch's log_softmax saving its output)",
            ),
            "logits_bytes_per_element_megatron": (
                "bytes per token per vocabulary entry",
                "Megatron's vocab-parallel "
                "cross-entropy works in place on fp32 logits: 4sbv/t (Korthikanti et "
                "al. 2022, section 4.3)",
            ),
            "gated_mlp_saved_tensors": (
                "tensors of b x s x ffn",
                "eager SwiGLU saves gate output, SiLU output, up "
                "output and their product (the down projection's input); fused kernels save 3",
            ),
            "fused_gated_mlp_saved_tensors": (
                "tensors of b x s x ffn",
                "Megatron-Core/NeMo (the megatron recipes): the fused SwiGLU saves only its input, the fc1 output "
                "of width 2 x ffn (megatron/core/fusions/fused_bias_swiglu.py, SwiGLUFunction: "
                "ctx.save_for_backward(input)), and fc2 saves the product: 3 tensors of ffn width",
            ),
            "fp8_saved_input_bytes_per_element": (
                "bytes",
                "Transformer Engine fp8 (the megatron recipes with --precision fp8-mixed): Linear and "
                "LayerNormLinear save their input cast to fp8 for the weight-gradient GEMM, 1 byte per element "
                "(transformer_engine/pytorch/module/linear.py, _Linear.forward saves the fp8 inputmat); "
                "torchao's Float8Linear (FSDP stacks) saves the bf16 input and is left at 2 bytes",
            ),
            "fp4_bf16_tail_fraction": (
                "share of decoder layers",
                "the last decoder layers fp4 training keeps in bf16 (ceil(layers x this)): torchtitan's NVFP4 recipe "
                "(0.15, _NVFP4_BF16_TAIL_FRACTION; arXiv:2509.25149 keeps ~15 % of the final blocks); the step "
                "time reads the same assumption (--assume sets both)",
            ),
            "fp4_saved_bytes_per_element": (
                "bytes per element",
                "NVFP4 training (--precision fp4-mixed) as torchao runs it (prototype/moe_training/nvfp4_training/"
                "nvfp4_linear.py, nvfp4_mm_triton.forward, 36027d82): each quantized Linear saves for backward only "
                "the column-wise fp4 codes of its input and of its weight with their e4m3 block scales (4 bits + one "
                "byte per 16 elements: 0.5625 B), not the bf16 input; the weight's codes are of the gathered (FSDP) "
                "weight and are re-made every forward, so each micro-batch in flight holds its own",
            ),
            "activation_bytes_per_element": (
                "bytes",
                "16-bit activations (Korthikanti et al. 2022 assume 2 bytes, "
                "1 for dropout masks); fp32 training doubles it",
            ),
        }
    )

    def __post_init__(self) -> None:
        check_assumptions(
            self,
            fractions=("allocator_reserve_fraction", "fp4_bf16_tail_fraction"),
            ranges={
                "gated_mlp_saved_tensors": (2, 4),
                "fused_gated_mlp_saved_tensors": (2, 4),
                "fp8_saved_input_bytes_per_element": (0.5, 8),
                "fsdp_units_in_flight": (1, 64),
                "activation_bytes_per_element": (1, 8),
                "logits_bytes_per_element_hf": (0, 64),
                "logits_bytes_per_element_megatron": (0, 64),
            },
        )


# --------------------------------------------------------------------------------------- activations


@dataclass(frozen=True)
class ActivationTerm:
    """One saved tensor (or group) of a decoder layer: bytes for one micro-batch, on one GPU."""

    name: str
    bytes: float
    note: str


def layer_activation_terms(
    spec: ModelSpec,
    job: TrainingJob,
    layout: Parallelism,
    micro_batch: int,
    bytes_per_element: float = 2.0,
    gated_saved: int = 4,
    trainable: frozenset[str] | None = None,
    moe_layer: bool = False,
    linear_input_bytes: float | None = None,
    norm_saved_bytes: float | None = None,
) -> list[ActivationTerm]:
    """Activations one decoder layer saves for backward, term by term (Korthikanti et al. 2022, section 4).

    With MHA, a plain 4h GeLU MLP, LayerNorm, dropout on and no flash attention the terms add up to
    Table 2's sbh(34 + 5as/h) (and its tensor/sequence-parallel rows). Generalized here:
    - GQA/MQA: K and V hold ``kv_heads`` heads; MLA saves its query/key/value widths and both latents.
    - Gated MLP of width f: ``gated_saved`` tensors of s·b·f (4 in eager PyTorch, 3 with fused SwiGLU);
      plain MLP: the activation's input and output, 2 tensors of s·b·f.
    - Flash attention (Dao et al. 2022) saves Q, K, V, O and an fp32 log-sum-exp of b·heads·s instead
      of the s² score, softmax and dropout tensors.
    - Dropout off (modern pre-training) saves no masks.
    - Every norm saves its input (``norms_per_layer`` of them).
    - Frozen linear layers (LoRA) do not save their inputs: autograd keeps a matmul operand only when
      the other operand needs a gradient. ``trainable`` names the linears that do (None: all).
    - Tensor parallelism t divides the terms inside the TP region; sequence parallelism divides the
      rest; context parallelism cp divides the sequence.
    - ``linear_input_bytes``: bytes per element of the saved inputs of the linear layers (Q/K/V, output
      projection, MLP input, the down projection's input) where they differ from the activations' (Transformer
      Engine fp8 saves them cast to fp8); None: ``bytes_per_element``.
    - ``norm_saved_bytes``: bytes per element each norm saves where it is not a fused kernel saving its input
      (the eager RMSNorm of Hugging Face models: :func:`_stack_saving`); None: ``bytes_per_element``.
    """
    s = job.seq_len / layout.cp
    b = micro_batch
    h = spec.hidden_size
    t = layout.tp
    rep = xp.where(layout.sequence_parallel, t, 1)  # divisor of the terms outside the TP region
    e = bytes_per_element
    lin = e if linear_input_bytes is None else linear_input_bytes
    H = spec.attention_heads
    needs: Callable[[str], bool] = (lambda name: True) if trainable is None else (lambda name: name in trainable)
    terms: list[ActivationTerm] = []

    def add(name: str, elements: float, divisor: float, note: str, per_element: float = e) -> None:
        terms.append(ActivationTerm(name, elements * per_element / divisor, note))

    norms = spec.norms_per_layer
    if norm_saved_bytes is None:
        add("norm_inputs", norms * s * b * h, rep, f"{norms} norms save their input")
    else:
        note = f"{norms} eager RMSNorms save their input upcast to fp32 and the normalized tensor"
        add("norm_inputs", norms * s * b * h, rep, note, per_element=norm_saved_bytes)
    if any(needs(n) for n in ("q_proj", "k_proj", "v_proj", "q_a_proj", "kv_a_proj")):
        add("qkv_input", s * b * h, rep, "input of the Q/K/V projections", per_element=lin)
    if spec.mla is not None:
        m = spec.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        latents = (m.q_lora_rank or 0) + m.kv_lora_rank
        add("mla_latents", s * b * latents, 1, "compressed q and kv latents (inputs of the up projections)")
        add("q_k_v", s * b * H * (2 * qk + m.v_head_dim), t, "decompressed queries, keys and values")
        o_width = H * m.v_head_dim
    else:
        # flash reads K and V at kv_heads heads; eager attention (transformers' repeat_kv) saves them at all H.
        # With fewer KV heads than TP ranks each rank still holds one.
        kv_heads = spec.kv_heads if job.flash_attention else H
        kv_per_rank = xp.maximum(kv_heads / t, 1.0)
        q_k_v = s * b * spec.head_dim * (H / t + 2 * kv_per_rank)
        add("q_k_v", q_k_v, 1, "queries, keys and values (flash: kv_heads heads; eager: repeated to all heads)")
        o_width = H * spec.head_dim
    if job.flash_attention:
        add("attention_lse", b * H * s, t, "flash attention's fp32 log-sum-exp", per_element=4.0)
    else:
        score = b * H * s * s
        add("attention_scores", score, t, "softmax output (s x s per head)")
        if job.dropout:
            add("attention_dropout", score, t, "attention dropout mask (1 byte) and output", per_element=1.0 + e)
    if job.flash_attention or needs("o_proj"):
        # flash keeps O for its own backward; the eager path needs it only for the out projection's weight grad
        add("attention_output", s * b * o_width, t, "attention output (input of the output projection)")
        if lin != e and needs("o_proj"):  # the output projection saves its own (fp8) copy; flash keeps O too
            add("o_proj_input", s * b * o_width, t, "output projection's saved input", per_element=lin)
    if job.dropout:
        add("dropout_masks", 2 * s * b * h, rep, "residual dropout masks after attention and MLP", per_element=1.0)
    moe = spec.moe
    if not moe_layer or moe is None:
        input_saved, hidden = _mlp_terms(spec.ffn_size, spec.mlp_gated, gated_saved, needs, "")
        if input_saved:
            add("mlp_input", s * b * h, rep, "input of the MLP", per_element=lin)
        if lin != e and needs("down_proj"):  # the down projection's input is saved at lin bytes
            add("mlp_hidden", s * b * (hidden - spec.ffn_size), t, "MLP hidden tensors (of the ffn width)")
            add("mlp_down_input", s * b * spec.ffn_size, t, "down projection's saved input", per_element=lin)
        else:
            add("mlp_hidden", s * b * hidden, t, "MLP hidden tensors (of the ffn width)")
    else:
        k = moe.experts_per_token
        add("mlp_input", s * b * h, rep, "input of the router and experts", per_element=lin)
        add("router_logits", s * b * moe.experts, 1, "router logits (fp32)", per_element=4.0)
        # Megatron-Core's all-to-all dispatcher (token_dispatcher.py MoEAlltoAllTokenDispatcher) routes each rank's
        # 1/tp of the tokens (the sequence-parallel shard), sends the k copies over the EP group, then all-gathers
        # them over the expert-TP group: an expert GEMM's saved input holds etp ranks' tokens at the full hidden
        # size, its hidden tensors the same rows at 1/etp of the expert width
        etp = layout.expert_tp
        add("expert_dispatch", s * b * k * h * etp, t, f"tokens copied to their {k} experts", per_element=lin)
        _, hidden = _mlp_terms(moe.expert_ffn_size, spec.mlp_gated, gated_saved, needs, "expert_")
        add("expert_hidden", s * b * k * hidden, t, f"expert MLP hidden tensors x {k} experts per token")
        if moe.shared_ffn_size:
            _, shared = _mlp_terms(moe.shared_ffn_size, spec.mlp_gated, gated_saved, needs, "shared_")
            add("shared_expert_hidden", s * b * shared, t, "shared experts' hidden tensors")
    return terms


def activation_bytes_per_layer(
    spec: ModelSpec, job: TrainingJob, layout: Parallelism, a: MemoryAssumptions | None = None
) -> dict[str, float]:
    """Bytes one decoder layer keeps for backward under ``job.recompute``, averaged over dense and MoE layers.

    - none (and partial, whose layers that are not recomputed keep everything): every term of
      ``layer_activation_terms``;
    - selective: without the attention core's s² terms (Korthikanti et al. 2022, section 5);
    - per-op: torchtitan's per-op selective activation checkpointing (``per_op_sac_terms``);
    - full: only the layer's input, 2sbh (Korthikanti Table 2, last row); the one layer being
      recomputed is counted separately by the caller.
    """
    a = a or MemoryAssumptions()
    e = 4.0 if job.precision == "fp32" else a.activation_bytes_per_element
    if job.recompute == "per-op":
        # an fp4 layer's GEMMs are torch._scaled_mm_v2, which per-op SAC does not save (steptime's per-op recompute):
        # such a layer keeps its input and the attention output only
        tail = fp4_bf16_tail_layers(spec.layers, a.fp4_bf16_tail_fraction)
        fp4_share = 1.0 - tail / spec.layers if job.precision == "fp4-mixed" else 0.0
        out_op: dict[str, float] = {}
        for count, moe_layer in ((spec.dense_layers, False), (spec.layers - spec.dense_layers, True)):
            for term in per_op_sac_terms(spec, job, layout, e, moe_layer) if count else ():
                kept = 1.0 if term.name in ("layer_input", "attention_output", "attention_lse") else 1.0 - fp4_share
                out_op[term.name] = out_op.get(term.name, 0.0) + term.bytes * count / spec.layers * kept
        return out_op
    if job.recompute == "full":
        # each layer keeps its input, 2sbh; sequence parallelism splits it over the TP group (Korthikanti section 4.3)
        rep = xp.where(layout.sequence_parallel, layout.tp, 1)
        return {"layer_input": job.seq_len / layout.cp * job.micro_batch * spec.hidden_size * e / rep}
    trainable = _saving_linears(spec, job)
    gated, lin, norm_bytes = _stack_saving(job, layout, a, spec)
    # fp4 training: the quantized layers' linears save fp4 codes of their inputs (fp4_saved_bytes_per_element), the
    # bf16 tail's (FP4_BF16_TAIL_FRACTION) their 16-bit inputs; averaged over the layers like dense and MoE ones
    variants: list[tuple[float, float | None]] = [(1.0, lin)]
    if job.precision == "fp4-mixed":
        bf16_share = fp4_bf16_tail_layers(spec.layers, a.fp4_bf16_tail_fraction) / spec.layers
        variants = [(1.0 - bf16_share, a.fp4_saved_bytes_per_element), (bf16_share, lin)]
    out: dict[str, float] = {}
    for count, moe_layer in ((spec.dense_layers, False), (spec.layers - spec.dense_layers, True)):
        for share, saved in variants:
            if not count or not share:
                continue
            for term in layer_activation_terms(
                spec, job, layout, job.micro_batch, e, gated, trainable, moe_layer, saved, norm_bytes
            ):
                kept = _selective_kept(term.name, job, spec, moe_layer, gated)
                if kept:
                    out[term.name] = out.get(term.name, 0.0) + term.bytes * count / spec.layers * share * kept
    return out


def _selective_kept(name: str, job: TrainingJob, spec: ModelSpec, moe_layer: bool, gated: int) -> float:
    """The share of one activation term a layer still keeps under ``--recompute selective`` with its
    ``--recompute-modules`` (Megatron-Core TransformerConfig.recompute_modules; 1 for the other modes):

    - core_attn: the attention core re-runs from Q, K and V: its s x s scores and dropout (Korthikanti et al. 2022,
      section 5); flash attention keeps none of them anyway;
    - layernorm: the outputs of the norms Transformer Engine's layer spec keeps apart from a linear are discarded
      and re-computed (output-discarding checkpointing; a norm fused into its linear is an IdentityOp, which
      Megatron-Core does not recompute, megatron/core/transformer/transformer_layer.py): MLA's input norm (the
      Q/K/V down projections' input) and an MoE layer's pre-MLP norm (the router's and experts' input); in fp8 and
      fp4 the consuming linears are set to save that original tensor instead of a quantized copy, so it goes too;
    - mlp: a dense layer's MLP re-runs from its input: its hidden tensors go;
    - moe: an MoE layer's experts re-run from its input: router logits, dispatched tokens and expert hidden tensors;
    - moe_act: the experts' activation output is discarded: one of the expert hidden tensors of the ffn width;
    - shared_experts: the shared experts' hidden tensors;
    - mla_up_proj: MLA's up-projected queries, keys and values go; the latents stay."""
    mods = set(job.selective_modules)
    if not mods:
        return 1.0
    if name in ("attention_scores", "attention_dropout") and "core_attn" in mods:
        return 0.0
    if "layernorm" in mods and ((name == "qkv_input" and spec.mla is not None) or (name == "mlp_input" and moe_layer)):
        return 0.0
    if not moe_layer and name in ("mlp_hidden", "mlp_down_input") and "mlp" in mods:
        return 0.0
    if moe_layer and "moe" in mods and name in ("router_logits", "expert_dispatch", "expert_hidden"):
        return 0.0
    if moe_layer and name == "shared_expert_hidden" and ({"moe", "shared_experts"} & mods):
        return 0.0
    if moe_layer and name == "expert_hidden" and "moe_act" in mods:
        tensors = gated if spec.mlp_gated else 2  # the hidden tensors of the ffn width an expert MLP saves
        return (tensors - 1) / tensors
    if name == "q_k_v" and spec.mla is not None and "mla_up_proj" in mods:
        return 0.0
    return 1.0


def _stack_saving(
    job: TrainingJob, layout: Parallelism, a: MemoryAssumptions, spec: ModelSpec | None = None
) -> tuple[int, float | None, float | None]:
    """(gated-MLP tensors saved, bytes per saved linear input or None, bytes per element a norm saves or None) for
    the stack the recipe names: Megatron-Core/Transformer Engine fuse SwiGLU and, in fp8, save fp8 linear inputs;
    eager PyTorch does neither.

    Hugging Face's RMSNorm (LlamaRMSNorm and the Mistral/Qwen/Gemma copies of it) is eager Python: it upcasts its
    input to fp32, which ``pow`` and the ``* rsqrt`` product save (4 bytes), and multiplies the weight by the
    normalized tensor cast back to the input's dtype, which that product saves (the residual stream's dtype: fp32
    when AMP keeps fp32 weights, else 2 bytes). Measured on an H200 (docs/measurements/training_memory_h200.json):
    with a fused norm's 2 bytes the 1B/8B runs without recomputation come out 6-11 % under the measured peak, with
    these bytes within 4 %. Applied on the plain data-parallel stack (``--stack hf``, or auto without FSDP and with
    a PyTorch recipe); FSDP2/torchtitan (nn.RMSNorm) and the Megatron/DeepSpeed recipes keep the input only."""
    recipe, _ = resolve_recipe(job, layout)
    norm_bytes: float | None = None
    eager_hf = not job.compile and (
        job.stack == "hf" or (job.stack == "auto" and not job.fsdp and recipe.name in ("amp", "bf16", "fp32"))
    )
    if eager_hf and spec is not None and spec.norm == "rmsnorm":
        # fp32 embeddings (AMP's fp32 weights; QLoRA's embeddings cast by PEFT) make the residual stream fp32
        peft_kbit = job.method != "full" and job.quant is not None
        fp32_residual = (job.method == "full" and recipe.weights == 4) or peft_kbit
        residual = 4.0 if fp32_residual else a.activation_bytes_per_element
        norm_bytes = 4.0 + residual
    if not recipe.name.startswith("megatron") or job.method != "full":
        return a.gated_mlp_saved_tensors, None, norm_bytes
    lin = a.fp8_saved_input_bytes_per_element if job.precision == "fp8-mixed" else None
    return a.fused_gated_mlp_saved_tensors, lin, norm_bytes


def per_op_sac_terms(
    spec: ModelSpec, job: TrainingJob, layout: Parallelism, bytes_per_element: float, moe_layer: bool = False
) -> list[ActivationTerm]:
    """What one decoder layer keeps under torchtitan's per-op selective activation checkpointing (SAC).

    torchtitan (torchtitan/models/llama3/parallelize_llama.py, ``_apply_ac_to_transformer_block`` with
    ``selective_ac_option = "op"``, the llama3_8b.toml default) saves the outputs of the ops in ``_save_list``
    (``aten.mm``, the SDPA kernels, ``reduce_scatter``, ``abs``/``max``) "except every second mm", counted per layer
    in forward order, and recomputes every other op (norms, RoPE, SiLU, products) in backward. So a layer keeps:
    its input (the checkpoint's input), the outputs of the 1st, 3rd, 5th... matmul, and the attention output with
    its fp32 log-sum-exp. Korthikanti's selective recomputation instead keeps everything but the s² attention
    core, which flash attention never stores: with flash attention it saves nothing more than no recomputation.
    Routed experts run grouped GEMMs, not ``aten.mm``: their activations are recomputed.
    """
    s = job.seq_len / layout.cp
    sb = s * job.micro_batch
    h, t = spec.hidden_size, layout.tp
    rep = xp.where(layout.sequence_parallel, t, 1)
    H = spec.attention_heads
    e = bytes_per_element
    if spec.mla is not None:
        m = spec.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        mms = ([("q_a_proj", m.q_lora_rank)] if m.q_lora_rank else []) + [
            ("q_proj", H * qk / t),
            ("kv_a_proj", m.kv_lora_rank + m.qk_rope_head_dim),
            ("kv_b_proj", H * (m.qk_nope_head_dim + m.v_head_dim) / t),
        ]
        o_width = H * m.v_head_dim / t
    else:
        kv = xp.maximum(spec.kv_heads / t, 1.0) * spec.head_dim
        mms = [("q_proj", H * spec.head_dim / t), ("k_proj", kv), ("v_proj", kv)]
        o_width = H * spec.head_dim / t
    mms.append(("o_proj", h / rep))
    moe = spec.moe
    if moe_layer and moe is not None:
        mms.append(("router", moe.experts))
        if moe.shared_ffn_size:
            f = moe.shared_ffn_size / t
            mms += [("shared_gate_proj", f), ("shared_up_proj", f)] if spec.mlp_gated else [("shared_up_proj", f)]
            mms.append(("shared_down_proj", h / rep))
    else:
        f = spec.ffn_size / t
        mms += [("gate_proj", f), ("up_proj", f)] if spec.mlp_gated else [("up_proj", f)]
        mms.append(("down_proj", h / rep))
    terms = [ActivationTerm("layer_input", sb * h / rep * e, "the checkpointed layer's input")]
    terms += [
        ActivationTerm(f"{name}_output", sb * w * e, "saved matmul output (odd-numbered mm)") for name, w in mms[::2]
    ]
    terms.append(ActivationTerm("attention_output", sb * o_width * e, "SDPA output (in the save list)"))
    terms.append(ActivationTerm("attention_lse", sb * H / t * 4.0, "SDPA's fp32 log-sum-exp"))
    return terms


def _mlp_terms(
    ffn: int, gated: bool, gated_saved: int, needs: Callable[[str], bool], prefix: str
) -> tuple[bool, float]:
    """(whether the MLP input is saved, saved hidden width per token) for one MLP block."""
    if gated:
        saved = gated_saved - (0 if needs(f"{prefix}down_proj") else 1)  # the product feeds only down_proj
        return needs(f"{prefix}gate_proj") or needs(f"{prefix}up_proj"), saved * ffn
    saved = 2 - (0 if needs(f"{prefix}down_proj") else 1)
    return needs(f"{prefix}up_proj"), saved * ffn


# ----------------------------------------------------------------------------------------- the result


@dataclass(frozen=True)
class MemoryReport(Itemized):
    """Memory of the most loaded GPU, itemized; totals derive from the parts."""

    group_order: ClassVar[tuple[str, ...]] = ("weights", "gradients", "optimizer", "activations", "other")

    parts: Mapping[str, float]
    groups: Mapping[str, str]
    capacity_bytes: int
    stage: str
    recipe: Recipe
    recipe_reason: str
    trainable_params: int
    max_micro_batch: int | None  # None: not estimated (activations need the architecture)
    reasons: tuple[str, ...]
    assumptions: tuple[Assumption, ...]
    cpu_offload_bytes: float = 0.0
    notes: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes


GROUPS = MemoryReport.group_order


# --------------------------------------------------------------------------------------- the estimate


def stage_layers(layers: int, pp: int, stage: str) -> int:
    """Decoder layers on a pipeline stage: an even split, the first (layers mod pp) stages one more."""
    base, extra = divmod(layers, pp)
    return base + xp.where(extra > 0, 1, 0) if stage in ("first", "only") else base


def validate_layout(model: ModelSpec | ParamsOnlyModel, layout: Parallelism, job: TrainingJob) -> list[str]:
    """Raise on a layout this model cannot run; return notes for what runs but deserves a word."""
    notes: list[str] = []
    check_range(layout.gpus, "--gpus", 1, MAX_GPUS)
    check_range(job.seq_len, "--seq-len", 1, MAX_SEQ_TOKENS)
    check_range(job.micro_batch, "--micro-batch", 1, MAX_BATCH)
    check_range(job.lora_rank, "--lora-rank", 1, MAX_LORA_RANK)
    if job.global_batch is not None:
        check_range(job.global_batch, "--global-batch", 1, MAX_BATCH)
    if job.offload_layers is not None and layout.offload != "activations":
        raise JobError("--offload-layers goes with --offload activations")
    if layout.cp > 1:
        if job.seq_len % layout.cp:
            raise JobError(
                f"--seq-len {job.seq_len} is not divisible by cp({layout.cp}): context parallelism "
                "gives each rank an equal slice of the sequence"
            )
        if not job.flash_attention:
            raise JobError("context parallelism (ring attention) needs flash attention; drop --no-flash-attention")
    splits_experts = layout.etp is not None and layout.etp != layout.tp  # an expert TP of its own
    if not isinstance(model, ModelSpec):
        if layout.ep > 1 or splits_experts:
            raise JobError("--ep/--etp need the architecture (experts); give a model id or config.json")
        return notes
    spec = model
    if layout.pp > spec.layers:
        raise JobError(f"--pp {layout.pp} is more than {spec.id}'s {spec.layers} layers: each stage needs at least one")
    if spec.attention_heads % layout.tp:
        raise JobError(f"tp({layout.tp}) must divide {spec.id}'s {spec.attention_heads} attention heads")
    moe_flags = [f for f, on in (("--ep-comm-overlap", job.ep_comm_overlap),
                                 ("--moe-dispatch-dtype fp8", job.moe_dispatch_dtype != "bf16"),
                                 ("--moe-dispatcher deepep", job.moe_dispatcher != "alltoall")) if on]  # fmt: skip
    if moe_flags and spec.moe is None:
        raise JobError(f"{moe_flags[0]} is for MoE models, but {spec.id} is a dense model; drop {moe_flags[0]}")
    if "layernorm" in job.selective_modules and spec.moe is None and spec.mla is None:
        notes.append(
            f"--recompute-modules layernorm: Transformer Engine fuses {spec.id}'s norms into the linears after them, "
            "which Megatron-Core does not recompute: no change"
        )
    need = {"moe": spec.moe is not None, "moe_act": spec.moe is not None, "mla_up_proj": spec.mla is not None}
    need["shared_experts"] = spec.moe is not None and bool(spec.moe.shared_ffn_size)
    need["mlp"] = bool(spec.dense_layers)
    for mod in job.selective_modules:
        if not need.get(mod, True):
            what = {"mla_up_proj": "MLA (multi-head latent attention)", "shared_experts": "shared experts",
                    "mlp": "dense MLP layers"}.get(mod, "experts (an MoE model)")  # fmt: skip
            raise JobError(f"--recompute-modules {mod} re-runs {what}, which {spec.id} does not have; drop {mod}")
    if job.ep_comm_overlap and layout.ep == 1:
        raise JobError("--ep-comm-overlap overlaps the expert-parallel all-to-all: it needs --ep > 1")
    if job.moe_dispatcher != "alltoall" and layout.ep == 1:
        raise JobError(
            f"--moe-dispatcher {job.moe_dispatcher} dispatches over expert parallelism, which --ep 1 does not run: "
            "give --ep > 1 or drop it"
        )
    if job.moe_dispatch_dtype != "bf16" and layout.ep == 1:
        raise JobError(
            f"--moe-dispatch-dtype {job.moe_dispatch_dtype} is the dtype of the expert-parallel all-to-all, which "
            "--ep 1 does not run: give --ep > 1 or drop it"
        )
    if layout.ep > 1:
        if spec.moe is None:
            raise JobError(f"--ep {layout.ep} splits experts, but {spec.id} is a dense model; drop --ep")
        if spec.moe.experts % layout.ep:
            raise JobError(f"ep({layout.ep}) must divide {spec.id}'s {spec.moe.experts} experts")
    if spec.moe is not None and layout.etp is None and (layout.tp > 1 or layout.ep > 1):
        notes.append(
            f"expert tensor parallelism not given (--etp): etp = tp = {layout.tp}, Megatron-Core's default "
            "(--expert-tensor-parallel-size follows --tensor-model-parallel-size, megatron/training/arguments.py)"
        )
    if splits_experts:
        if spec.moe is None:
            raise JobError(f"--etp {layout.etp} splits experts, but {spec.id} is a dense model; drop --etp")
        if spec.moe.expert_ffn_size % layout.expert_tp:
            raise JobError(
                f"etp({layout.expert_tp}) must divide {spec.id}'s expert width {spec.moe.expert_ffn_size}: each "
                "expert-TP rank holds an equal slice of every expert"
            )
    per_stage = -(-spec.layers // layout.pp)  # the busiest stage's layers
    for name, value in (("recompute-layers", job.recompute_layers), ("offload-layers", job.offload_layers)):
        if value is not None and xp.nonzero(value > per_stage):
            raise JobError(
                f"--{name} {value} is more than the {per_stage} layers a pipeline stage of {spec.id} holds "
                f"(--pp {layout.pp}): at most {per_stage}"
            )
    if layout.offload == "activations" and (layout.pp > 1 or job.recompute in ("full", "selective", "partial")):
        notes.append(
            "--offload activations with pipeline parallelism or recomputation: Megatron-Core's CPU offloading "
            "refuses both (torch.autograd.graph.save_on_cpu does not); the estimate prices it as asked"
        )
    if spec.learned_positions and job.seq_len > spec.learned_positions:
        raise JobError(f"--seq-len {job.seq_len} exceeds {spec.id}'s {spec.learned_positions} learned positions")
    if job.seq_len > spec.context_length:
        notes.append(f"--seq-len {job.seq_len:,} is beyond {spec.id}'s context length {spec.context_length:,}")
    return notes


def training_memory(
    model: ModelSpec | ParamsOnlyModel,
    gpu: Accelerator,
    layout: Parallelism,
    job: TrainingJob,
    assumptions: MemoryAssumptions = MemoryAssumptions(),
    *,
    find_max_batch: bool = True,
    largest_layer_params: int | None = None,
) -> MemoryReport:
    """Memory per GPU for one training step, on the most loaded GPU.

    With pipeline parallelism both ends are computed in full: stage 0 holds the embedding and, under
    1F1B, activations of min(pp, micro-batches per step) micro-batches (Korthikanti et al. 2022, eq. 5);
    the last stage holds the LM head, one micro-batch and the logits. The larger is reported. Without
    --global-batch a pipeline runs pp micro-batches per step (the fewest that fill it).
    A bare parameter count (``ParamsOnlyModel``) gives model states only, with a note.
    """
    if job.precision == "fp8-mixed" and not gpu.supports("fp8"):
        raise JobError(f"{gpu.id} has no fp8 tensor cores; use --precision bf16-mixed (or a GPU with fp8)")
    if job.precision == "fp8-mixed" and job.fp8_recipe == "mxfp8" and not gpu.supports("fp4"):
        # MX formats and block-scaled MMA came with the tensor cores that also run fp4 (Blackwell: tcgen05.mma
        # kind::mxf8f6f4; CDNA 4); Transformer Engine's MXFP8BlockScaling and torchao's mx_formats need them
        raise JobError(
            f"--fp8-recipe mxfp8 needs block-scaled (MX) tensor cores, which {gpu.id} lacks (they came with fp4: "
            "Blackwell, CDNA 4); use tensorwise, delayed, rowwise or blockwise"
        )
    if job.precision == "fp4-mixed" and not gpu.supports("fp4"):
        raise JobError(
            f"{gpu.id} has no fp4 peak in the catalog; use --precision fp8-mixed or bf16-mixed (or a GPU with fp4, "
            "e.g. b200)"
        )
    if job.precision == "fp4-mixed" and gpu.vendor != "nvidia":
        raise JobError(
            f"NVFP4 is NVIDIA's 4-bit format (Blackwell tensor cores); {gpu.id} has no NVFP4 GEMMs: use --precision "
            "fp8-mixed or bf16-mixed"
        )
    if job.method != "full" and not isinstance(model, ModelSpec):
        raise JobError("LoRA/QLoRA needs the architecture to size the adapters; give a model id or config.json")
    notes = validate_layout(model, layout, job)
    if job.compile and stack_job(job, gpu).stack != job.stack:
        notes.append(f"--compile ignored: on {gpu.id} --stack auto is jax, whose whole step XLA compiles already")
    job.grad_accumulation(layout.dp)  # validates --global-batch against micro-batch x dp
    if layout.pp > 1 and job.global_batch is None:
        notes.append(
            f"no --global-batch: assuming pp={layout.pp} micro-batches per step, the fewest that fill the pipeline"
        )
    report = _busiest(model, gpu, layout, job, assumptions, largest_layer_params)
    report = replace(report, notes=report.notes + tuple(notes))
    if find_max_batch:
        best = (
            _max_micro_batch(model, gpu, layout, job, assumptions, largest_layer_params)
            if isinstance(model, ModelSpec)
            else None
        )
        report = replace(report, max_micro_batch=best)
    return report


def micro_batches_per_step(job: TrainingJob, layout: Parallelism) -> int:
    """Micro-batches per step per data-parallel rank (pp when a pipeline runs without --global-batch)."""
    if job.global_batch is None:
        return layout.pp
    return job.grad_accumulation(layout.dp)


def _stage_reports(
    model: ModelSpec | ParamsOnlyModel,
    gpu: Accelerator,
    layout: Parallelism,
    job: TrainingJob,
    a: MemoryAssumptions,
    largest: int | None,
) -> list[MemoryReport]:
    """Both ends of a pipeline (first: embedding and the most micro-batches in flight; last: the head and the
    logits), or the one stage without one. A grid of layouts shares pp > 1 or pp = 1 (xp.same)."""
    pipelined = xp.same(layout.pp > 1) and isinstance(model, ModelSpec)
    stages = ("first", "last") if pipelined else ("only",)
    return [_memory_at(model, gpu, layout, job, a, largest, st) for st in stages]


def _busiest(
    model: ModelSpec | ParamsOnlyModel,
    gpu: Accelerator,
    layout: Parallelism,
    job: TrainingJob,
    a: MemoryAssumptions,
    largest: int | None,
) -> MemoryReport:
    report = max(_stage_reports(model, gpu, layout, job, a, largest), key=lambda r: r.total_bytes)
    if report.fits:
        return report
    top = sorted(((report.group_bytes(g), g) for g in GROUPS), reverse=True)[:2]
    where = f" (pipeline stage: {report.stage})" if report.stage != "only" else ""
    reason = (
        f"need {report.total_bytes / GiB:.1f} GiB > {report.capacity_bytes / GiB:.1f} GiB on {gpu.id}{where}; "
        f"largest: {top[0][1]} {top[0][0] / GiB:.1f} GiB, {top[1][1]} {top[1][0] / GiB:.1f} GiB"
    )
    return replace(report, reasons=(reason,))


def busiest_total_bytes(
    model: ModelSpec,
    gpu: Accelerator,
    layout: Parallelism,
    job: TrainingJob,
    a: MemoryAssumptions = MemoryAssumptions(),
) -> Any:
    """``training_memory(...).total_bytes`` without the checks and the itemized report: the planner's entry, for
    one layout or a grid of them (:class:`~gpuplan.spec.training.ParallelismGrid` with a
    :class:`~gpuplan.spec.training.TrainingJobGrid`: arrays of totals, element by element the same numbers).
    The caller passes only layouts that ``training_memory`` accepts (``validate_layout``, whole steps)."""
    return functools.reduce(xp.maximum, (r.total_bytes for r in _stage_reports(model, gpu, layout, job, a, None)))


def _is_prime(n: int) -> bool:
    """Miller-Rabin with the first 13 prime bases: exact below 3.3e24 (Sorenson & Webster 2015), and a
    probable-prime test beyond (error below 4**-13 per composite)."""
    if n < 2:
        return False
    bases = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
    for p in bases:
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d, r = d // 2, r + 1
    for a in bases:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _pollard_rho(n: int) -> int:
    """A non-trivial factor of the odd composite ``n`` (Pollard 1975, Brent's cycle detection, 1980)."""
    for c in range(1, 1000):
        y, m, g, r, q = 2, 128, 1, 1, 1
        x = ys = y
        while g == 1:
            x = y
            for _ in range(r):
                y = (y * y + c) % n
            k = 0
            while k < r and g == 1:
                ys = y
                for _ in range(min(m, r - k)):
                    y = (y * y + c) % n
                    q = q * abs(x - y) % n
                g = math.gcd(q, n)
                k += m
            r *= 2
        if g == n:
            g = 1
            while g == 1:
                ys = (ys * ys + c) % n
                g = math.gcd(abs(x - ys), n)
        if g != n:
            return g
    raise ArithmeticError(f"no factor found for {n}")  # pragma: no cover (never met: c varies)


def _prime_factors(n: int) -> dict[int, int]:
    """Prime factorization {p: exponent}: trial division by small primes, then Miller-Rabin and Pollard's
    rho, so a batch of 2**62 or 10**30 sequences factors in milliseconds (a loop to sqrt(n) would not end)."""
    out: dict[int, int] = {}
    for p in (2, 3, 5, 7, 11, 13):
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
    p = 17
    while n > 1 and p * p <= n and p < 10_000:
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
        p += 2
    stack = [n] if n > 1 else []
    while stack:
        m = stack.pop()
        if m < 10_000**2 or _is_prime(m):  # below 1e8 every factor under 1e4 is gone: m is prime
            out[m] = out.get(m, 0) + 1
            continue
        f = _pollard_rho(m)
        stack += [f, m // f]
    return out


def _divisors(n: int) -> list[int]:
    """Every divisor of ``n`` >= 1, ascending, from its prime factorization (bounded time for any size)."""
    if n < 1:
        return []
    divisors = [1]
    for p, e in _prime_factors(n).items():
        divisors = [d * p**k for d in divisors for k in range(e + 1)]
    return sorted(divisors)


def _max_micro_batch(
    model: ModelSpec | ParamsOnlyModel,
    gpu: Accelerator,
    layout: Parallelism,
    job: TrainingJob,
    a: MemoryAssumptions,
    largest: int | None,
) -> int:
    """Largest micro-batch whose estimate fits (0 if even 1 does not).

    Memory grows with the micro-batch, so the boundary is found by exponential then binary search; with
    --global-batch only micro-batches that divide it (per data-parallel rank) are candidates.
    """

    def fits(b: int) -> bool:
        return _busiest(model, gpu, layout, replace(job, micro_batch=b), a, largest).fits

    if job.global_batch is not None:
        candidates = _divisors(job.global_batch // layout.dp)
    else:
        hi = 1
        while hi < 2**24 and fits(hi):
            hi *= 2
        candidates = list(range(max(1, hi // 2), hi + 1))
    lo, hi = 0, len(candidates)  # candidates[:lo] fit, candidates[hi:] do not
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(candidates[mid]):
            lo = mid + 1
        else:
            hi = mid
    return candidates[lo - 1] if lo else 0


def trainable_linears(spec: ModelSpec | None, job: TrainingJob) -> frozenset[str] | None:
    """Names of the linear layers that receive gradients (None: all of them, full training); under LoRA/QLoRA
    the targets, whose adapters train while the base weight stays frozen."""
    if job.method == "full" or spec is None:
        return None
    shapes = linear_shapes(spec)
    names = set()
    for target in job.targets:
        for prefix in ("", "expert_", "shared_"):
            if f"{prefix}{target}" in shapes:
                names.add(f"{prefix}{target}")
        if target == "q_proj" and spec.mla is not None:
            names.update(n for n in ("q_a_proj", "q_b_proj") if n in shapes)
        if target in ("k_proj", "v_proj") and spec.mla is not None:
            names.update(n for n in ("kv_a_proj", "kv_b_proj") if n in shapes)
    return frozenset(names)


def lora_adapter_params(spec: ModelSpec, job: TrainingJob) -> dict[str, int]:
    """Parameters of the LoRA adapters by target linear: A (din x r) and B (r x dout) for each of its matrices
    (Hu et al. 2021)."""
    names = trainable_linears(spec, job) or frozenset()
    return {k: job.lora_rank * (din + dout) * n for k, (din, dout, n) in linear_shapes(spec).items() if k in names}


def _saving_linears(spec: ModelSpec | None, job: TrainingJob) -> frozenset[str] | None:
    """Names of the linear layers that save their input for backward (None: all of them). A frozen nn.Linear
    saves none (autograd keeps a matmul operand only when the other one needs a gradient), so LoRA saves the
    inputs of its targets only; a QLoRA layer is bitsandbytes' Linear4bit, whose MatMul4Bit autograd function
    saves its input whenever that input needs a gradient (bitsandbytes/autograd/_functions.py,
    ``ctx.tensors = (A, B)``), as it does with trainable adapters below it: every quantized linear saves it."""
    if job.method != "full" and job.quant == "nf4":
        return None
    return trainable_linears(spec, job)


@dataclass(frozen=True)
class _Held:
    """Parameters one GPU holds, split into the parts that shard differently."""

    dense: float  # on this GPU after TP (and PP); experts excluded
    experts: float  # routed experts on this GPU after ETP x EP (and PP)

    @property
    def total(self) -> float:
        return self.dense + self.experts


def _memory_at(
    model: ModelSpec | ParamsOnlyModel,
    gpu: Accelerator,
    layout: Parallelism,
    job: TrainingJob,
    a: MemoryAssumptions,
    largest_layer_params: int | None,
    stage: str,
) -> MemoryReport:
    """Itemized memory of one GPU in pipeline stage ``stage`` ("first", "last", or "only" without pp)."""
    spec = model if isinstance(model, ModelSpec) else None
    job = stack_job(job, gpu)
    recipe, why = resolve_recipe(job, layout)
    parts: dict[str, float] = {}
    groups: dict[str, str] = {}
    notes: list[str] = []

    def put(name: str, group: str, value: float) -> None:
        if xp.nonzero(value):  # a part that is zero (everywhere, on a grid) is left out
            parts[name] = parts.get(name, 0.0) + value
            groups[name] = group

    tp, pp, dp, ep, cp, zero = layout.tp, layout.pp, layout.dp, layout.ep, layout.cp, layout.zero
    etp = layout.expert_tp  # routed experts split over etp x ep (Megatron-Core MoE parallel folding)
    # ZeRO / the distributed optimizer partition over every data-parallel replica of a parameter: dense
    # parameters over dp x cp (Megatron builds them on the data-parallel group with context parallelism),
    # experts over their expert-data-parallel group, gpus / (pp x ep x etp) (Parallelism.expert_dp)
    dense_shards = dp * cp
    expert_shards = xp.maximum(1, layout.expert_dp)
    holds_embedding = stage in ("first", "only")
    holds_head = stage in ("last", "only")

    # ---------------------------------------------------------------- parameters this GPU holds
    if spec is not None:
        b = count_params(spec)
        L = spec.layers
        layers_here = stage_layers(L, pp, stage)
        shared_per_layer = (
            b.parts["attention"]
            + b.parts["mlp"]
            + b.parts["norms"]
            + b.parts.get("router", 0)
            + b.parts.get("shared_experts", 0)
        ) / L
        dense = layers_here * shared_per_layer
        if holds_embedding:  # a vision-language model's vision tower sits before the first decoder layer
            dense += b.parts["embeddings"] + b.parts.get("vision", 0)
        if holds_head:
            # a tied head lives in the embedding; split across stages, the last stage keeps its own copy
            dense += b.parts["lm_head"] or (b.parts["embeddings"] if stage == "last" else 0)
        held = _Held(dense / tp, b.parts.get("experts", 0) * layers_here / L / (etp * ep))
        total_params = b.total
        largest = largest_layer_params if largest_layer_params is not None else largest_module_params(spec)
        # a ZeRO-3 layer gather collects only the parameters that are partitioned (more than one replica)
        layer_params = xp.where(dense_shards > 1, shared_per_layer / tp, 0.0) + xp.where(
            expert_shards > 1, b.parts.get("experts", 0) / L / (etp * ep), 0.0
        )
    else:
        assert isinstance(model, ParamsOnlyModel)  # (spec is None exactly then)
        layers_here = 0
        held = _Held(model.params / tp / pp, 0.0)
        total_params = model.params
        largest = largest_layer_params or 0
        layer_params = 0.0
        notes.append("only a parameter count was given: activations are not estimated (they need the architecture)")
    sharded = held.dense / dense_shards + held.experts / expert_shards

    # ---------------------------------------------------------------- what is trained
    cpu = 0.0
    if job.method == "full":
        trainable, trainable_sharded, trainable_total = held.total, sharded, total_params
        if layout.offload == "params":
            cpu += trainable_sharded * recipe.weights
        else:
            put("weights", "weights", (trainable_sharded if zero >= 3 else trainable) * recipe.weights)
    else:
        # LoRA/QLoRA: training_memory refused a bare parameter count, so the architecture is known
        assert spec is not None
        shapes = linear_shapes(spec)
        share = layers_here / spec.layers

        def on_gpu(params_by_name: Mapping[str, float]) -> float:
            """Per-GPU share of per-layer matrices: experts split over ETP x EP, the rest over TP."""
            return sum(v / (etp * ep if k.startswith("expert_") else tp) for k, v in params_by_name.items()) * share

        adapters = lora_adapter_params(spec, job)
        if not adapters:
            raise JobError(
                f"--lora-targets {','.join(job.lora_targets)} match no module of {spec.id}; "
                f"its linear layers are {', '.join(k for k in shapes if k not in ('lm_head', 'router'))}"
            )
        trainable_total = sum(adapters.values())
        trainable = on_gpu(adapters)
        trainable_sharded = trainable / dense_shards
        linears = {k: din * dout * n for k, (din, dout, n) in shapes.items() if k not in ("lm_head", "router")}
        quantizable = on_gpu(linears)
        frozen_on_gpu = held.total
        if job.quant == "nf4":
            base = {"frozen_base_quantized": quantizable * NF4_BYTES_PER_PARAM}
            notes.append(
                "frozen base: NF4 with double quantization, 4.127 bits/param (QLoRA section 3); "
                "embeddings, norms and LM head unquantized, in fp32 as PEFT's prepare_model_for_kbit_training "
                "casts them"
            )
        elif job.quant == "int8":
            rows = on_gpu({k: dout * n for k, (din, dout, n) in shapes.items() if k in linears})
            base = {"frozen_base_quantized": quantizable * INT8_BYTES_PER_PARAM + rows * 4}
            notes.append(
                "frozen base: LLM.int8, 1 byte/param + an fp32 scale per output row (Dettmers et al. "
                "2022); embeddings, norms and LM head stay 16-bit"
            )
        else:
            base, quantizable = {}, 0.0
        # PEFT's prepare_model_for_kbit_training casts every parameter that is not quantized (embeddings, norms,
        # LM head) to fp32 (peft/utils/other.py), so a QLoRA model keeps them at 4 bytes
        base_16 = 4 if job.precision == "fp32" or job.quant is not None else 2
        base["frozen_base_unquantized" if job.quant else "frozen_base"] = (frozen_on_gpu - quantizable) * base_16
        if zero >= 3:  # FSDP/ZeRO-3 shards the frozen base too (FSDP-QLoRA); one layer is gathered at a time
            gathered = sum(base.values()) * xp.where(layers_here > 0, 1 / xp.maximum(1, layers_here), 0)
            base = {k: v / dense_shards for k, v in base.items()}
            if layout.offload == "params":
                cpu += sum(base.values())
                base = {}
            put("zero3_gathered_layers", "other", gathered)
        for k, v in base.items():
            put(k, "weights", v)
        if job.quant is not None and job.precision == "bf16-mixed" and holds_head:
            # the LM head PEFT left in fp32 runs under autocast, which caches a 16-bit copy of it for the step
            # (aten/src/ATen/autocast_mode.cpp cached_cast); a tied head is the embedding matrix
            head = b.parts["lm_head"] or b.parts["embeddings"]
            put("autocast_weight_copies", "other", head / tp * 2)
        # adapters: PEFT keeps them fp32 (autocast_adapter_dtype=True); the QLoRA reference code casts to bf16
        adapter_bytes = 2 if job.method == "qlora" and job.precision != "fp32" else 4
        put("adapters", "weights", trainable * adapter_bytes)
        recipe = replace(
            recipe,
            weights=adapter_bytes,
            grads=adapter_bytes,
            master=0,
            grad_copy=0,
            autocast_copy=0,
            state=2 if job.precision == "bf16" else 4,
        )

    # ---------------------------------------------------------------- gradients and optimizer
    offload = layout.offload in ("optimizer", "params")
    g = trainable_sharded if zero >= recipe.grads_shard_stage else trainable
    if zero >= 3 and recipe.grads_only_in_flight_at_stage3:
        g = 0.0  # reduced straight into the fp32 partition; the module in flight is in the gathered buffer
    if offload and recipe.name == "deepspeed":
        cpu += g * recipe.grads  # ZeRO-Offload streams the reduced 16-bit grads to the CPU, bucket by bucket
        g = 0.0
    grad_bytes = g * recipe.grads  # placed after the activations: whether they are live at the peak depends on them
    opt_params = trainable_sharded if zero >= 1 else trainable
    per_param = {
        "optimizer_states": _optimizer_bytes_per_param(job, recipe, spec),
        "master_weights": recipe.master,
        "fp32_grad_copy": recipe.grad_copy,
    }
    for name, bytes_per in per_param.items():
        if offload:
            cpu += opt_params * bytes_per
        else:
            put(name, "optimizer", opt_params * bytes_per)
    # FSDP's behaviour (units in flight, the stage kept gathered under pipeline parallelism) belongs to FSDP, not to
    # its mixed-precision recipe: a pure-bf16 model (--precision bf16, bf16 parameters and states) wrapped by
    # FSDP2 behaves the same way (NeMo AutoModel builds its MoE models in bf16 and shards them with fully_shard)
    fsdp = recipe.name == "fsdp" or (job.fsdp and zero >= 3)
    units = a.fsdp_units_in_flight if fsdp else 1
    if job.method == "full" and zero >= 3:
        if recipe.name == "deepspeed":
            put("zero3_gathered_largest_module", "other", 4 * largest / tp)  # its 16-bit params and grads
        else:
            # torchtitan's apply_fsdp: "For PP, do not reshard after forward to avoid per-microbatch
            # all-gathers": the stage's parameters stay gathered (16-bit) through the step. The pipeline schedule
            # turns gradient sync off for every micro-batch but the last (torch.distributed.pipelining stage.py,
            # backward_maybe_with_nosync: set_requires_gradient_sync(False)), so FSDP2 accumulates the stage's
            # unsharded gradients in the reduce dtype (FSDPParam.to_accumulated_grad_if_needed; torchtitan's
            # mixed_precision_reduce is float32, as is NeMo AutoModel's MixedPrecisionPolicy reduce_dtype, whatever
            # the parameters' dtype: FSDP_REDUCE_BYTES) until the one reduce-scatter at the end
            stage_kept = fsdp and (pp > 1) & (dense_shards > 1)
            put("fsdp_unsharded_stage_params", "other", xp.where(stage_kept, 2 * held.total, 0.0))
            unsharded = fsdp_reduce_bytes(job) * held.total
            put("fsdp_unsharded_stage_grads", "gradients", xp.where(stage_kept, unsharded, 0.0))
            # otherwise the units in flight: 16-bit params + grads
            put("zero3_gathered_layers", "other", xp.where(stage_kept, 0.0, (2 * units + 2) * layer_params))
    if job.method == "full" and recipe.autocast_copy:
        put("autocast_weight_copies", "other", trainable * recipe.autocast_copy)
    if job.precision == "fp4-mixed" and spec is not None and job.recompute not in ("per-op", "full"):
        # torchao's NVFP4 Linear saves the column-wise fp4 codes of its (gathered) weight for backward, re-made every
        # forward: one copy per quantized layer of the stage and micro-batch in flight (fp4_saved_bytes_per_element);
        # recomputed layers (full, per-op) save none of it
        linear_per_layer = (
            b.parts["attention"] + b.parts["mlp"] + b.parts.get("shared_experts", 0)
        ) / L / tp + b.parts.get("experts", 0) / L / (tp * ep)
        tail = fp4_bf16_tail_layers(L, a.fp4_bf16_tail_fraction)
        quantized_here = layers_here * (1.0 - tail / L)
        v = layout.virtual_stages
        flight = xp.minimum(xp.where(v > 1, pp + (pp - 1) / v, pp), micro_batches_per_step(job, layout))
        flight = flight if stage == "first" else 1
        put("fp4_weight_copies", "other", linear_per_layer * quantized_here * a.fp4_saved_bytes_per_element * flight)
        notes.append(
            f"fp4: the last {tail} of {L} decoder layers and the LM head in bf16; the others save "
            f"fp4 codes of their inputs and weights for backward ({a.fp4_saved_bytes_per_element:g} B per element)"
        )
    if job.precision == "fp8-mixed" and job.method == "full":
        fp8_copies, why = fp8_weight_copies(gpu)
        if job.fp8_params:  # the fp8 parameter is the first of those copies (counted as the weights)
            fp8_copies, why = fp8_copies - 1, why + "; the fp8 parameter itself counted as the weights"
        if zero >= 3:
            # sharded like the weights they are cast from: a GPU casts its shard (fp8 all-gather) or the units it
            # has gathered, never the whole model
            put("fp8_weight_copies", "other", (trainable_sharded + units * layer_params) * fp8_copies)
            notes.append(f"fp8: {fp8_copies} byte(s)/param of fp8 weights, sharded with ZeRO-3/FSDP ({why})")
        else:
            put("fp8_weight_copies", "other", trainable * fp8_copies)
            notes.append(f"fp8: Transformer Engine keeps {fp8_copies} byte(s)/param of fp8 weights ({why})")

    # ---------------------------------------------------------------- activations
    if spec is not None:
        e = 4.0 if job.precision == "fp32" else a.activation_bytes_per_element
        # micro-batches of the stage's activations held at once on the first stage: pp under 1F1B; under the
        # interleaved schedule with v chunks per rank, pp + (pp - 1) / v (its warm-up runs (v - 1) x pp + 2(pp - 1)
        # chunk forwards before the first backward; Korthikanti et al. 2022, section 4.2.3: L(1 + (p-1)/(pv)))
        v = layout.virtual_stages
        stage_mbs = xp.where(v > 1, pp + (pp - 1) / v, pp)
        in_flight = xp.minimum(stage_mbs, micro_batches_per_step(job, layout)) if stage == "first" else 1
        s_b = job.seq_len / cp * job.micro_batch
        kept = sum(activation_bytes_per_layer(spec, job, layout, a).values())
        # layers whose saved activations go to host memory (--offload activations): the stage's first ones
        offloaded = 0
        if layout.offload == "activations":
            offloaded = layers_here if job.offload_layers is None else xp.minimum(job.offload_layers, layers_here)
        if job.recompute == "partial":
            # Megatron-LM --recompute-method block: the first N layers of each stage keep only their input
            n = xp.minimum(0 if job.recompute_layers is None else job.recompute_layers, layers_here)
            full_kept = sum(
                activation_bytes_per_layer(
                    spec, replace(job, recompute="full", recompute_layers=None, recompute_modules=None), layout, a
                ).values()
            )
            working = n > 0
        else:
            n, full_kept = 0, 0.0
            working = job.recompute in ("full", "per-op") or bool(set(job.selective_modules) - {"core_attn"})
        # layers [0, n) keep full_kept each, [n, layers_here) keep kept; layers [0, offloaded) are on the host
        kept_on_gpu = full_kept * xp.maximum(0, n - offloaded) + kept * (layers_here - xp.maximum(n, offloaded))
        name = "layer_inputs" if job.recompute == "full" else "layer_activations"
        put(name, "activations", kept_on_gpu * in_flight)
        if xp.nonzero(offloaded):
            full_off = xp.minimum(n, offloaded)
            cpu += (full_kept * full_off + kept * xp.maximum(0, offloaded - n)) * in_flight
            # torch.autograd.graph.save_on_cpu / Megatron-Core cpu_offloading.py: the layer being copied out
            # (forward) or back (backward) is on the GPU too
            largest_off = xp.maximum(xp.where(full_off > 0, full_kept, 0.0), xp.where(offloaded > n, kept, 0.0))
            put("activation_offload_buffer", "activations", largest_off)
        if xp.nonzero(working):
            put(
                "recompute_working_layer",
                "activations",
                xp.where(working, _working_layer_bytes(spec, job, layout, a), 0.0),
            )
        if holds_head:
            sp = xp.where(layout.sequence_parallel, tp, 1)
            put("final_norm_and_head_inputs", "activations", 2 * s_b * spec.hidden_size * e / sp)
            per_logit = (
                a.logits_bytes_per_element_megatron
                if recipe.name.startswith("megatron")
                else a.logits_bytes_per_element_hf
            )
            put("logits_and_loss", "activations", s_b * spec.vocab_size * per_logit / tp)

    # ---------------------------------------------------------------- gradients live at the peak
    # A PyTorch optimizer frees the gradients every step (zero_grad(set_to_none=True), the default since PyTorch
    # 2.0), so without gradient accumulation backward allocates them layer by layer while it frees the saved
    # activations. The peak is then the larger of the two ends of backward: all activations (and the autocast
    # weight copies they hold) at its start, all gradients at its end; the gradients count only what exceeds the
    # activations. Measured on an H200 (docs/measurements/training_memory_h200.json): an 8B pure-bf16 run with full
    # recompute peaks at weights + states + gradients (60.5 GiB) while the sum with its activations says 68.6.
    # Megatron's and DeepSpeed's contiguous gradient buffers, a ZeRO optimizer's partitions, FSDP and accumulated
    # micro-batches keep them, and so do DDP's gradient buckets (the separate ddp_gradient_buckets part).
    transient_grads = (
        recipe.name in ("amp", "bf16", "fp32") and not job.fsdp and not offload and zero == 0 and spec is not None
    )
    if transient_grads:
        live_before = sum(v for k, v in parts.items() if groups[k] == "activations") + parts.get(
            "autocast_weight_copies", 0.0
        )
        # Without --global-batch the step time's batch rule accumulates many micro-batches (default_global_batch):
        # their gradients persist, so only an explicit one-micro-batch step counts them this way (on a search grid
        # the micro-batches per step are an array: element by element)
        one_pass = job.global_batch is not None and micro_batches_per_step(job, layout) == 1
        live = xp.where(one_pass, xp.maximum(0.0, grad_bytes - live_before), grad_bytes)
        if xp.nonzero(grad_bytes - live):
            notes.append(
                "gradients: freed every step and not accumulated, so backward allocates them as it frees the "
                "activations; only the part above the activations adds to the peak"
            )
        grad_bytes = live
    put("gradients", "gradients", grad_bytes)

    # ---------------------------------------------------------------- what the process also holds
    put("cuda_context", "other", a.cuda_context_bytes)
    put("cublas_workspace", "other", cublas_workspace_bytes(gpu))
    communicators = sum(xp.where(n > 1, 1, 0) for n in (dp, tp, pp, cp, ep))
    communicators = communicators + xp.where((etp > 1) & (etp != tp), 1, 0)  # an expert-TP group of its own
    put("nccl_buffers", "other", communicators * a.nccl_buffer_bytes_per_communicator)
    if job.method == "full":
        replicated = dp * cp > 1
        if recipe.name in ("amp", "bf16", "fp32") and zero == 0 and not job.fsdp:  # gradient_as_bucket_view=False
            put("ddp_gradient_buckets", "other", xp.where(replicated, trainable * recipe.grads, 0.0))
        elif recipe.name == "deepspeed":
            put("deepspeed_buckets", "other", xp.where(replicated, 2 * 2 * a.deepspeed_bucket_elements, 0))
    # fragmentation comes from churn: activations, gradients and transient buffers, not weights allocated once
    persistent = {"cuda_context", "nccl_buffers", "cublas_workspace"}
    dynamic = sum(
        v for k, v in parts.items() if k not in persistent and groups[k] in ("activations", "gradients", "other")
    )
    put("allocator_reserve", "other", a.allocator_reserve_fraction * dynamic)

    return MemoryReport(
        parts=MappingProxyType(parts),
        groups=MappingProxyType(groups),
        capacity_bytes=gpu.usable_memory_bytes,
        stage=stage,
        recipe=recipe,
        recipe_reason=why,
        trainable_params=int(trainable_total),
        max_micro_batch=0,
        reasons=(),
        assumptions=tuple(a.items()),
        cpu_offload_bytes=cpu,
        notes=tuple(notes),
    )


def _working_layer_bytes(spec: ModelSpec, job: TrainingJob, layout: Parallelism, a: MemoryAssumptions) -> float:
    """Recomputation rebuilds one layer at a time: the largest layer kind's (MoE or dense) activations, all of them
    under full recomputation, those its ``--recompute-modules`` dropped under selective."""
    e = 4.0 if job.precision == "fp32" else a.activation_bytes_per_element
    no_recompute = replace(job, recompute="none", recompute_layers=None, recompute_modules=None)
    gated, lin, norm_bytes = _stack_saving(job, layout, a, spec)
    saving = _saving_linears(spec, job)
    kinds = [False] if spec.moe is None else ([True] + ([False] if spec.dense_layers else []))
    selective = job.recompute == "selective"
    return functools.reduce(
        xp.maximum,
        (
            sum(
                t.bytes * ((1.0 - _selective_kept(t.name, job, spec, moe, gated)) if selective else 1.0)
                for t in layer_activation_terms(
                    spec, no_recompute, layout, job.micro_batch, e, gated, saving, moe, lin, norm_bytes
                )
            )
            for moe in kinds
        ),
    )


def _optimizer_bytes_per_param(job: TrainingJob, recipe: Recipe, spec: ModelSpec | None) -> float:
    """Optimizer-state bytes per trained parameter."""
    if job.optimizer == "adamw-8bit":
        return ADAM_8BIT_BYTES_PER_PARAM
    if job.optimizer == "adafactor":
        # factored second moment: a row and a column vector per matrix (Shazeer & Stern 2018), no momentum
        if spec is None:
            return 0.0
        shapes = linear_shapes(spec)
        if job.method == "full":
            mats = [(din, dout, n) for din, dout, n in shapes.values()]
        else:  # LoRA trains A (d_in x r) and B (r x d_out) of each target
            names = trainable_linears(spec, job)
            assert names is not None  # (None only for full training)
            mats = [
                m
                for k, (din, dout, n) in shapes.items()
                if k in names
                for m in ((din, job.lora_rank, n), (job.lora_rank, dout, n))
            ]
        weights = sum(din * dout * n for din, dout, n in mats)
        vectors = sum((din + dout) * n for din, dout, n in mats)
        return recipe.state * vectors / weights
    n_states, _ = OPTIMIZER_STATES[job.optimizer]
    return n_states * recipe.state
