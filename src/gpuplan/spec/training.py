"""A training job as gpuplan describes it: the parallel layout, and the recipe (precision, optimizer,
method, batch, recomputation). Frozen values, validated on construction: an impossible layout or a
negative size raises :class:`~gpuplan.errors.LayoutError` / :class:`~gpuplan.errors.JobError` with a line
that shows every factor.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import JobError, LayoutError
from .choices import (
    AttentionKernel,
    Fp8Recipe,
    MainGrads,
    Method,
    MoeDispatchDtype,
    MoeDispatcher,
    Offload,
    Optimizer,
    OptimizerDtype,
    Precision,
    Quant,
    Recipe,
    Recompute,
    RecomputeModule,
    Stack,
    values,
)

# the choice lists as tuples of strings (the classes in choices.py are the single source)
PRECISIONS = values(Precision)
RECIPES = values(Recipe)
MAIN_GRADS = values(MainGrads)
OPTIMIZER_DTYPES = values(OptimizerDtype)
MOE_DISPATCH_DTYPES = values(MoeDispatchDtype)
MOE_DISPATCHERS = values(MoeDispatcher)
ATTENTION_KERNELS = values(AttentionKernel)
OPTIMIZERS = values(Optimizer)
METHODS = values(Method)
RECOMPUTE = values(Recompute)
RECOMPUTE_MODULES = values(RecomputeModule)
OFFLOAD = values(Offload)
QUANT = values(Quant)
STACKS = values(Stack)
FP8_RECIPES = values(Fp8Recipe)
#: the ``--fp8-recipe`` values that quantize to 4 bits (with ``--precision fp4-mixed``); the others are fp8's
FP4_RECIPES = (Fp8Recipe.NVFP4.value,)

#: Module names LoRA can target, as PEFT calls them on Llama-style models.
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class Parallelism:
    """How ``gpus`` devices split the work: tensor (tp), pipeline (pp), context (cp), expert (ep) and data
    parallelism (dp = gpus / (tp x pp x cp), derived), plus ZeRO stage and offload; ``virtual_stages``: interleaved
    pipeline chunks per rank (``--virtual-stages``; the first stage then holds more micro-batches' activations).

    Expert layers lay their own grid over the same GPUs, Megatron-Core's MoE parallel folding (Liu et al. 2025,
    arXiv:2504.14960; Megatron-LM megatron/core/parallel_state.py initialize_model_parallel): expert tensor
    parallelism ``etp`` x ``ep`` x expert data parallelism x pp, where attention uses tp x cp x dp x pp. ``etp``
    None is Megatron's default, the attention's tp (megatron/training/arguments.py: --expert-tensor-parallel-size
    unset follows --tensor-model-parallel-size). ep x etp must divide gpus / pp = tp x cp x dp, so ep may exceed dp."""

    gpus: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    sequence_parallel: bool = False
    zero: int = 0
    offload: str = "none"
    virtual_stages: int = 1
    #: expert tensor parallelism (Megatron-Core --expert-tensor-parallel-size); None: the attention's tp
    etp: int | None = None

    def __post_init__(self) -> None:
        for name in ("gpus", "tp", "pp", "cp", "ep", "virtual_stages", "etp"):
            value = getattr(self, name)
            if name == "etp" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise LayoutError(f"--{name.replace('_', '-')} must be a whole number >= 1, got {value!r}")
        model_parallel = self.tp * self.pp * self.cp
        if self.gpus % model_parallel:
            raise LayoutError(
                f"gpus({self.gpus}) is not divisible by tp({self.tp}) * pp({self.pp}) * cp({self.cp}) = "
                f"{model_parallel}; "
                f"data parallelism dp = gpus / (tp * pp * cp) must be whole"
            )
        per_stage = self.gpus // self.pp  # = tp x cp x dp: the GPUs of one pipeline stage
        if per_stage % (self.ep * self.expert_tp):
            etp = f"etp({self.expert_tp})" if self.etp is not None else f"etp({self.expert_tp}, by default tp)"
            if per_stage % self.ep == 0:
                room = per_stage // self.ep
                fix = "set --etp 1" if room == 1 else f"set --etp to a divisor of {room} (--etp 1 always fits)"
            else:
                fix = f"choose an --ep that divides {per_stage}"
            raise LayoutError(
                f"ep({self.ep}) * {etp} = {self.ep * self.expert_tp} must divide gpus({self.gpus}) "
                f"/ pp({self.pp}) = tp({self.tp}) * cp({self.cp}) * dp({self.dp}) = {per_stage}: expert layers "
                f"split the same GPUs as etp x ep x expert-dp (Megatron-Core MoE parallel folding); {fix}"
            )
        if self.zero not in (0, 1, 2, 3):
            raise LayoutError(f"--zero must be 0, 1, 2 or 3, got {self.zero}")
        if self.offload not in OFFLOAD:
            raise LayoutError(f"--offload must be one of {', '.join(OFFLOAD)}, got {self.offload!r}")
        if self.offload == "params" and self.zero != 3:
            raise LayoutError(
                "--offload params needs --zero 3 (parameters are only partitioned, and so only "
                "offloadable, in ZeRO-3/FSDP)"
            )
        if self.offload == "optimizer" and self.zero == 0:
            raise LayoutError(
                "--offload optimizer needs --zero 1, 2 or 3 (ZeRO-Offload moves the partitioned "
                "optimizer states to the CPU)"
            )
        if self.sequence_parallel and self.tp == 1:
            raise LayoutError(
                "--sequence-parallel splits activations along the tensor-parallel group: it needs --tp > 1"
            )
        if self.virtual_stages > 1 and self.pp == 1:
            raise LayoutError(
                f"--virtual-stages {self.virtual_stages} interleaves pipeline stages: it needs --pp > 1 (or drop it)"
            )

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def expert_tp(self) -> int:
        """Expert tensor parallelism: ``etp``, or the attention's tp where unset (Megatron-Core's default)."""
        return self.tp if self.etp is None else self.etp

    @property
    def expert_dp(self) -> int:
        """Expert data parallelism: the replicas of one expert shard, gpus / (pp x ep x etp) (Megatron-Core
        parallel_state.py: expert_data_parallel_size = world_size // (etp x ep x pp)); the distributed optimizer
        and ZeRO shard expert states over it, and expert gradients are reduced over it."""
        return self.gpus // (self.pp * self.ep * self.expert_tp)

    def describe(self) -> str:
        parts = [f"dp={self.dp}", f"tp={self.tp}", f"pp={self.pp}"]
        if self.virtual_stages > 1:
            parts.append(f"vp={self.virtual_stages}")
        if self.cp > 1:
            parts.append(f"cp={self.cp}")
        if self.ep > 1:
            parts.append(f"ep={self.ep}")
        if self.etp is not None and self.etp != self.tp:
            parts.append(f"etp={self.etp}")
        if self.sequence_parallel:
            parts.append("sp")
        if self.zero:
            parts.append(f"zero-{self.zero}")
        if self.offload != "none":
            parts.append(f"offload {self.offload}")
        return " ".join(parts)


@dataclass(frozen=True)
class TrainingJob:
    """The per-step recipe of a training or fine-tuning job."""

    micro_batch: int = 1
    seq_len: int = 4096
    global_batch: int | None = None
    precision: str = "bf16-mixed"
    recipe: str = "auto"
    optimizer: str = "adamw"
    method: str = "full"
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    quant: str | None = None
    recompute: str = "none"
    flash_attention: bool = True
    dropout: bool = False
    fsdp: bool = False
    #: with ``recompute="partial"``: decoder layers per pipeline stage fully recomputed (Megatron-LM's
    #: --recompute-method block --recompute-num-layers N); the others keep every activation
    recompute_layers: int | None = None
    #: with ``recompute="selective"``: the modules re-run in backward (Megatron-Core --recompute-modules); None:
    #: the attention core alone, Megatron's default
    recompute_modules: tuple[str, ...] | None = None
    #: with ``--offload activations``: decoder layers per stage whose saved activations live in host memory
    offload_layers: int | None = None
    #: the software stack of the step time (``estimate/steptime.py`` STACKS; auto: from the recipe)
    stack: str = "auto"
    #: fp8 scaling recipe with ``precision="fp8-mixed"`` (auto: delayed on Megatron/TE and JAX, tensorwise
    #: elsewhere), or the 4-bit one with ``precision="fp4-mixed"`` (auto: nvfp4)
    fp8_recipe: str = "auto"
    #: torch.compile: element-wise kernels fused
    compile: bool = False
    #: overlap the data-parallel gradient reduction with backward (None: the stack's default)
    overlap_grad_reduce: bool | None = None
    #: overlap the all-gather of updated parameters (ZeRO-1/2, Megatron's distributed optimizer) with the next
    #: forward (Megatron-LM --overlap-param-gather, NeMo optim.overlap_param_sync); None: off
    overlap_param_gather: bool | None = None
    #: overlap tensor-parallel collectives with the neighbouring GEMMs (TE userbuffers, async TP)
    tp_comm_overlap: bool = False
    #: the loss over the logits in one fused kernel (Megatron-LM --cross-entropy-loss-fusion); None: the stack's
    #: default (off in Megatron-LM; compiled stacks fuse it)
    cross_entropy_fusion: bool | None = None
    #: dtype of the gradient buffer the data-parallel reduction works in (Megatron-LM's main grads: fp32 unless
    #: --grad-reduce-in-bf16; NeMo's optim.grad_sync_dtype); None: the recipe's
    main_grads: str | None = None
    #: fp8 parameters (Megatron-LM --fp8-param-gather, NeMo fp8_params): the model's weights are held in fp8
    fp8_params: bool = False
    #: dtype of the optimizer states and main params (Apex DistributedFusedAdam ``dtype``, as NeMo sets it;
    #: Megatron-Core --exp-avg-dtype/--exp-avg-sq-dtype/--main-params-dtype); None: the recipe's (fp32)
    optimizer_dtype: str | None = None
    #: MoE: run the expert-parallel all-to-all beside another micro-batch's compute (Megatron-Core
    #: --overlap-moe-expert-parallel-comm, DeepSeek-V3's DualPipe)
    ep_comm_overlap: bool = False
    #: MoE: dtype of the forward dispatch and the backward's gradient into the experts (fp8: DeepEP's, with one fp32
    #: scale per 128 channels; the combine stays 16-bit)
    moe_dispatch_dtype: str = "bf16"
    #: MoE: the token dispatcher (alltoall: a copy per routed expert; deepep: once per destination node and rank)
    moe_dispatcher: str = "alltoall"
    #: flash-attention kernel family (auto: the stack's; fa2: FlashAttention-2's mma.sync kernels; cudnn: cuDNN
    #: fused attention, FlashAttention-3 or Transformer Engine, written for Hopper/Blackwell)
    attention_kernel: str = "auto"

    def __post_init__(self) -> None:
        for name in ("micro_batch", "seq_len", "lora_rank"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise JobError(f"--{name.replace('_', '-')} must be a whole number >= 1, got {value!r}")
        if self.global_batch is not None and (not isinstance(self.global_batch, int) or self.global_batch < 1):
            raise JobError(f"--global-batch must be a whole number >= 1, got {self.global_batch!r}")
        for name, allowed in (
            ("precision", PRECISIONS),
            ("recipe", RECIPES),
            ("optimizer", OPTIMIZERS),
            ("method", METHODS),
            ("recompute", RECOMPUTE),
            ("stack", STACKS),
            ("fp8_recipe", FP8_RECIPES),
            ("attention_kernel", ATTENTION_KERNELS),
            ("moe_dispatcher", MOE_DISPATCHERS),
        ):
            if getattr(self, name) not in allowed:
                flag = name.replace("_", "-")
                raise JobError(f"--{flag} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        for name in ("recompute_layers", "offload_layers"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise JobError(f"--{name.replace('_', '-')} must be a whole number >= 0, got {value!r}")
        if self.recompute == "partial" and self.recompute_layers is None:
            raise JobError("--recompute partial needs --recompute-layers N (layers per stage fully recomputed)")
        if self.recompute != "partial" and self.recompute_layers is not None:
            raise JobError("--recompute-layers goes with --recompute partial")
        if self.recompute_modules is not None:
            mods = self.recompute_modules
            if isinstance(mods, str) or not isinstance(mods, tuple) or not mods:
                raise JobError(
                    f"--recompute-modules takes a comma list of {', '.join(RECOMPUTE_MODULES)}, got {mods!r}"
                )
            bad = [m for m in mods if m not in RECOMPUTE_MODULES]
            if bad:
                choices = ", ".join(RECOMPUTE_MODULES)
                raise JobError(f"unknown --recompute-modules {', '.join(map(str, bad))}; choose from {choices}")
            if len(set(mods)) != len(mods):
                raise JobError(f"--recompute-modules names a module twice: {','.join(mods)}")
            if self.recompute != "selective":
                raise JobError(
                    f"--recompute-modules says what --recompute selective re-runs, but --recompute is "
                    f"{self.recompute}: add --recompute selective or drop --recompute-modules"
                )
        if self.moe_dispatch_dtype not in MOE_DISPATCH_DTYPES:
            raise JobError(
                f"--moe-dispatch-dtype must be one of {', '.join(MOE_DISPATCH_DTYPES)}, got {self.moe_dispatch_dtype!r}"
            )
        if self.main_grads is not None and self.main_grads not in MAIN_GRADS:
            raise JobError(f"--main-grads must be one of {', '.join(MAIN_GRADS)}, got {self.main_grads!r}")
        if self.optimizer_dtype is not None and self.optimizer_dtype not in OPTIMIZER_DTYPES:
            raise JobError(
                f"--optimizer-dtype must be one of {', '.join(OPTIMIZER_DTYPES)}, got {self.optimizer_dtype!r}"
            )
        if self.attention_kernel != "auto" and not self.flash_attention:
            raise JobError(
                f"--attention-kernel {self.attention_kernel} picks a flash-attention kernel, and --no-flash-attention "
                "asks for materialized attention: drop one of them"
            )
        if self.fp8_params and self.precision != "fp8-mixed":
            raise JobError(f"--fp8-params needs --precision fp8-mixed (got {self.precision})")
        if self.fp8_recipe in FP4_RECIPES and self.precision != "fp4-mixed":
            raise JobError(f"--fp8-recipe {self.fp8_recipe} needs --precision fp4-mixed (got {self.precision})")
        if self.fp8_recipe not in ("auto", *FP4_RECIPES) and self.precision != "fp8-mixed":
            raise JobError(f"--fp8-recipe {self.fp8_recipe} needs --precision fp8-mixed (got {self.precision})")
        if self.precision == "fp4-mixed" and self.method != "full":
            raise JobError(
                f"--precision fp4-mixed models full training (the NVFP4 pretraining recipes); --method "
                f"{self.method} fine-tunes in bf16-mixed or fp8-mixed"
            )
        if self.quant is not None and self.quant not in QUANT:
            raise JobError(f"--quant must be one of {', '.join(QUANT)}, got {self.quant!r}")
        if self.method == "qlora" and self.quant is None:
            object.__setattr__(self, "quant", "nf4")
        if self.quant is not None and self.precision in ("fp8-mixed", "fp4-mixed"):
            raise JobError(
                "a quantized frozen base (--quant, --method qlora) computes in bf16 (bitsandbytes dequantizes to its "
                f"compute dtype): --precision {self.precision} does not apply; use bf16-mixed"
            )
        if self.method == "full" and self.quant is not None:
            raise JobError(
                "--quant quantizes the frozen base of --method lora/qlora; full training updates every "
                "weight and cannot keep them quantized"
            )
        bad = [t for t in self.lora_targets if t not in (*LORA_TARGETS, "all-linear")]
        if bad:
            raise JobError(
                f"unknown --lora-targets {', '.join(bad)}; choose from {', '.join(LORA_TARGETS)} or all-linear"
            )
        if not self.lora_targets:
            raise JobError("--lora-targets is empty; name at least one module (e.g. q_proj,v_proj) or all-linear")

    @property
    def selective_modules(self) -> tuple[str, ...]:
        """The modules ``--recompute selective`` re-runs (Megatron-Core's default: the attention core); empty for
        the other modes."""
        if self.recompute != "selective":
            return ()
        return self.recompute_modules if self.recompute_modules is not None else (RecomputeModule.CORE_ATTN.value,)

    def check_stack(self) -> None:
        """Refuse the settings that name a PyTorch library under ``--stack jax`` as the user gave it (each message
        says what to use): JAX has no torch.compile, FSDP2, DeepSpeed, AMP autocast cache or bitsandbytes to switch
        on. Not run by ``__post_init__``: where ``--stack auto`` becomes jax on a TPU (``estimate.memory.stack_job``)
        the planner's FSDP candidates and the user's other flags keep their meaning."""
        if self.stack != "jax":
            return
        if self.compile:
            raise JobError("--compile is torch.compile; --stack jax is compiled by XLA already: drop --compile")
        if self.fsdp:
            raise JobError(
                "--fsdp is PyTorch FSDP2; --stack jax shards parameters, gradients and states MaxText-style with "
                "--zero 3 (ici_fsdp_parallelism): use --zero 3"
            )
        if self.recipe not in ("auto", "fsdp", "zero"):
            raise JobError(
                f"--recipe {self.recipe} is a PyTorch framework's bookkeeping; --stack jax keeps MaxText's float32 "
                "weights, gradients and states (--recipe auto, which is fsdp) or the ZeRO paper's (--recipe zero)"
            )
        if self.bitsandbytes_flag is not None:
            raise JobError(
                f"{self.bitsandbytes_flag} runs bitsandbytes' CUDA kernels, which JAX lacks: drop it or change --stack"
            )

    @property
    def bitsandbytes_flag(self) -> str | None:
        """The flag that asks for bitsandbytes' CUDA kernels (8-bit Adam, an NF4/int8 base), else None."""
        if self.optimizer == "adamw-8bit":
            return "--optimizer adamw-8bit"
        return "--quant/--method qlora" if self.quant is not None else None

    def grad_accumulation(self, dp: int) -> int:
        """Micro-batches per step per data-parallel rank: global / (micro x dp); must be whole."""
        if self.global_batch is None:
            return 1
        per_step = self.micro_batch * dp
        self._check_whole_steps(per_step, dp)
        return self.global_batch // per_step

    def _check_whole_steps(self, per_step: int, dp: int) -> None:
        if self.global_batch is not None and self.global_batch % per_step:
            raise JobError(
                f"--global-batch {self.global_batch} is not divisible by micro-batch({self.micro_batch}) * "
                f"dp({dp}) = {per_step}; gradient accumulation steps must be whole"
            )

    @property
    def targets(self) -> tuple[str, ...]:
        return LORA_TARGETS if "all-linear" in self.lora_targets else self.lora_targets


# ------------------------------------------------------------------------------------------------ grids


@dataclass(frozen=True)
class ParallelismGrid(Parallelism):
    """Many layouts at once, for the planner (``plan/search.py``): ``gpus``, ``tp``, ``pp``, ``cp``, ``ep``, ``etp``,
    ``virtual_stages`` and ``sequence_parallel`` may be numpy arrays of one shape, which the estimate functions
    evaluate element by element (``estimate/xp.py``); ``etp`` None is expert TP = tp, as in Parallelism.
    Not checked here: the planner builds only layouts that pass Parallelism's checks, and counts the others as
    pruned."""

    def __post_init__(self) -> None:
        return None


@dataclass(frozen=True)
class TrainingJobGrid(TrainingJob):
    """Many jobs at once, for the planner: ``micro_batch`` and ``global_batch`` may be numpy arrays (the
    shape of the :class:`ParallelismGrid` they go with). Not checked here: the planner builds only whole
    gradient-accumulation steps and counts the others as pruned."""

    def __post_init__(self) -> None:
        return None

    def _check_whole_steps(self, per_step: int, dp: int) -> None:
        return None


#: ``plan train --precision any``: the mixed precisions a training run is launched with today, bf16 master-weight
#: training and fp8 GEMMs on top of it (Micikevicius et al. 2022, "FP8 Formats for Deep Learning"; Transformer
#: Engine's fp8 recipes); fp8-mixed only on GPUs with an fp8 peak.
PLAN_PRECISIONS_ANY = (Precision.BF16_MIXED.value, Precision.FP8_MIXED.value)


def stack_conflict(stack: str, *, fsdp: bool = False, offload: str = Offload.NONE) -> tuple[str, str] | None:
    """A ``--stack`` that cannot run the sharding or offload asked for: (the flag to blame, the message), else None.
    ``train`` and ``plan train --explain stack=...`` refuse the same pairs."""
    if fsdp and stack in (Stack.DEEPSPEED, Stack.DEEPSPEED_2021):
        return "--fsdp", f"--fsdp is PyTorch FSDP, not DeepSpeed; with --stack {stack} use --zero 3"
    if stack == Stack.JAX and offload in (Offload.OPTIMIZER, Offload.PARAMS):
        return (
            "--offload",
            f"--offload {offload} is DeepSpeed's ZeRO-Offload (CPU-Adam); --stack jax does not run it: drop --offload "
            "or use --stack deepspeed",
        )
    return None


def megatron_2021_conflict(
    stack: str,
    *,
    precision: str = Precision.BF16_MIXED,
    tp_comm_overlap: bool = False,
    fsdp: bool = False,
    zero: int = 0,
    cp: int = 1,
    ep: int = 1,
    compile: bool = False,
    cross_entropy_fusion: bool | None = None,
    ep_comm_overlap: bool = False,
    moe_dispatch_dtype: str = MoeDispatchDtype.BF16,
) -> str | None:
    """What ``--stack megatron-2021`` (Megatron-LM v2.x, as the 2021 paper ran it) cannot run: the message that
    says so, else None. ``train`` and ``plan train --explain stack=megatron-2021`` refuse the same pairs."""
    if stack != Stack.MEGATRON_2021:
        return None
    if tp_comm_overlap or precision in (Precision.FP8_MIXED, Precision.FP4_MIXED):
        # Megatron-LM of 2021 had neither Transformer Engine (fp8, userbuffers) nor any TP overlap
        flag = "--tp-comm-overlap" if tp_comm_overlap else f"--precision {precision}"
        return f"{flag} needs Transformer Engine, which Megatron-LM of 2021 did not have: use --stack megatron"
    later = [
        (fsdp, "--fsdp", "fully sharded data parallelism (PyTorch FSDP came in 2022)"),
        (zero >= 2, f"--zero {zero}", "ZeRO-2/3 sharding (the 2021 paper's ZeRO-3 baseline ran on DeepSpeed: "
         "--stack deepspeed-2021)"),
        (cp > 1, f"--cp {cp}", "context parallelism (Megatron-Core, 2023)"),
        (ep > 1, f"--ep {ep}", "expert parallelism (Megatron-Core's MoE, 2023)"),
        (compile, "--compile", "torch.compile (PyTorch 2.0, 2023)"),
        (cross_entropy_fusion is True, "--cross-entropy-fusion", "--cross-entropy-loss-fusion (2024)"),
        (ep_comm_overlap, "--ep-comm-overlap", "--overlap-moe-expert-parallel-comm (Megatron-Core, 2025)"),
        (moe_dispatch_dtype != MoeDispatchDtype.BF16, f"--moe-dispatch-dtype {moe_dispatch_dtype}",
         "DeepEP's fp8 dispatch (2025)"),
    ]  # fmt: skip
    for on, flag, what in later:
        if on:
            return f"{flag} asks for {what}, which Megatron-LM of 2021 did not have: use --stack megatron"
    return None


def parse_precisions(value: str | Iterable[str]) -> tuple[str, ...]:
    """``plan train --precision``: one precision, a comma list (``bf16-mixed,fp8-mixed``) or ``any``
    (:data:`PLAN_PRECISIONS_ANY`); each must be one ``train --precision`` takes, except fp4-mixed, which the
    vectorized search does not model (refused with the train command to use). Repeats are dropped, the order
    kept (it breaks ties between equal candidates)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [i.strip() for i in items if isinstance(i, str) and i.strip()]
    if not names or len(names) != len(items):
        raise JobError(f"--precision must be any or a comma list of {', '.join(PRECISIONS)}, got {value!r}")
    out: list[str] = []
    for name in names:
        expanded = PLAN_PRECISIONS_ANY if name == "any" else (name,)
        for p in expanded:
            if p not in PRECISIONS:
                raise JobError(f"--precision must be any or a comma list of {', '.join(PRECISIONS)}, got {name!r}")
            if p == Precision.FP4_MIXED.value:
                raise JobError(
                    "plan train does not search --precision fp4-mixed; price an NVFP4 layout with "
                    "gpuplan train --precision fp4-mixed"
                )
            if p not in out:
                out.append(p)
    return tuple(out)
