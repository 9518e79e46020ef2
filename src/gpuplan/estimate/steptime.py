"""Training step time from the layout: a predicted MFU instead of a guessed one.

One iteration on the busiest GPU, by part:
- matmuls at the fraction of dense peak the GPU reaches on large GEMMs: the accelerator's catalog figure
  ``matmul_efficiency`` (Bekman's "maximum achievable matmul FLOPS" table, stas00/ml-engineering
  compute/accelerator), else :data:`DEFAULT_MATMUL_EFFICIENCY`;
- attention: flash attention at its own efficiency on the causal half of the score and context matmuls
  (the FLOPs FlashAttention's causal kernels execute, and the count ``flops.py`` uses with ``causal=True``
  for the MFU numerator, so both sides count attention the same way and MFU stays at most 1), or the
  materialized s x s scores of eager/Megatron-2021 attention (all of them computed, then masked), whose
  softmax and dropout are memory-bound traffic;
- element-wise kernels (norms, residual adds, activation, dropout) as HBM traffic per token;
- tensor-parallel collectives: two all-reduces per layer forward and two backward (Megatron-LM, Shoeybi
  et al. 2019, section 3), at NCCL bus bandwidth (nccl-tests PERFORMANCE.md: t = S x 2(n-1)/n / busbw);
- the pipeline bubble: (p - 1) / v micro-batch times for p stages and v interleaved chunks (Narayanan et
  al. 2021, section 2.2), plus point-to-point sends between stages;
- data-parallel gradient reduction over the scale-out network (one NIC per GPU: the accelerator's catalog
  figure ``scale_out_bytes_per_s_per_gpu``, else :data:`DEFAULT_SCALE_OUT_BYTES_PER_S_PER_GPU`), exposed
  unless the framework overlaps it with backward;
- the optimizer step, memory-bound (about 30 bytes read and written per locally held parameter);
- recomputation re-runs the forward (full) or the attention core (selective).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..spec.accelerator import Accelerator
from ..spec.model import ModelSpec
from ..spec.training import Parallelism, TrainingJob
from .assumptions import AssumptionSet, check_assumptions
from .flops import attention_flops_forward, flops_per_token
from .memory import micro_batches_per_step, resolve_recipe, stage_layers
from .params import count_params, linear_shapes
from .time import peak_for, training_dtype

#: Fraction of the dense peak assumed for a GPU whose catalog entry has no ``matmul_efficiency`` (MAMF)
#: figure: a round value inside the range Bekman's MAMF table spans (51 % MI300X to 87 % A100 SXM, BF16,
#: stas00/ml-engineering compute/accelerator, 2025-07).
DEFAULT_MATMUL_EFFICIENCY = 0.75

#: Inter-node bandwidth per GPU and direction, in bytes/s, assumed for a GPU whose catalog entry has no
#: ``scale_out_bytes_per_s_per_gpu``: one 200 Gb/s HDR InfiniBand NIC per GPU, ~24 GB/s of NCCL bus bandwidth
#: (NVIDIA/nccl#412, 2023-04).
DEFAULT_SCALE_OUT_BYTES_PER_S_PER_GPU = 24e9


def matmul_efficiency(gpu: Accelerator, dtype: str = "bf16") -> tuple[float, str]:
    """The fraction of the dense ``dtype`` peak this GPU reaches on the best GEMM shape (MAMF), and where it
    comes from: the catalog's figure for ``dtype``, else its bf16 figure (the one the built-in catalog holds),
    else :data:`DEFAULT_MATMUL_EFFICIENCY`, said so in the source."""
    for d in dict.fromkeys((dtype, "bf16")):
        value = gpu.matmul_efficiency.get(d)
        if value is not None:
            src = gpu.source_for(f"matmul_efficiency.{d}")
            stand_in = "" if d == dtype else f" (no {dtype} measurement in the catalog: the {d} one)"
            return value, (
                f"MAMF {value:.1%} of the dense {d} peak on the best GEMM shape{stand_in}: {src.title} ({src.date})"
            )
    return DEFAULT_MATMUL_EFFICIENCY, (
        f"no MAMF measurement for this GPU ({gpu.id}) in the catalog: default "
        f"{DEFAULT_MATMUL_EFFICIENCY * 100:g} % (Bekman's table ranges 51-87 %)"
    )


@dataclass(frozen=True)
class StepAssumptions(AssumptionSet):
    """Efficiencies and traffic constants of the step-time model; each overridable, each with a source."""

    matmul_efficiency: float | None = None  # None: the GPU's MAMF fraction (catalog, else 0.75) x model_shape_factor
    model_shape_factor: float = 0.85
    flash_attention_efficiency: float = 0.55
    hbm_efficiency: float = 0.85
    elementwise_bytes_per_token_hidden: float = 46.0
    score_bytes_per_element: float = 9.0
    link_efficiency: float = 0.77
    scale_out_bytes_per_s_per_gpu: float | None = None  # None: the GPU's catalog figure, else 24 GB/s (one HDR NIC)
    gpus_per_node: int = 8
    collective_latency_s: float = 10e-6
    optimizer_bytes_per_param: float = 30.0

    SOURCES = MappingProxyType(
        {
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
                "quantization, Anthony et al. 2024; older cuBLAS): one global factor, calibrated on "
                "Megatron-LM Table 1 (10 rows, MAE 4 %); Megatron Table 2 and Korthikanti Table 5 are "
                "the out-of-sample check",
            ),
            "flash_attention_efficiency": (
                "fraction of dense peak",
                "FlashAttention-2 (Dao 2023) reaches 50-73 % of "
                "A100 peak forward and less backward; 0.55 for forward + backward",
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
            "collective_latency_s": (
                "seconds",
                "small-message NCCL collective latency, ~6-10 us (nccl issues #583, #1259)",
            ),
            "optimizer_bytes_per_param": (
                "bytes",
                "fused Adam reads fp32 master, grad, m, v (16 B) and writes master, m, v and the 16-bit copy (14 B)",
            ),
        }
    )

    def __post_init__(self) -> None:
        check_assumptions(
            self,
            fractions=(
                "matmul_efficiency",
                "flash_attention_efficiency",
                "hbm_efficiency",
                "link_efficiency",
                "model_shape_factor",
            ),
            ranges={"gpus_per_node": (1, 1024)},
            positive=(
                "flash_attention_efficiency",
                "hbm_efficiency",
                "link_efficiency",
                "model_shape_factor",
                "elementwise_bytes_per_token_hidden",
                "matmul_efficiency",
                "scale_out_bytes_per_s_per_gpu",
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

    @property
    def mfu(self) -> float:
        """Model FLOPs (PaLM appendix B with causal attention, ``flops.py``; no recompute) / (time x GPUs x
        dense peak)."""
        return self.model_flops_per_iteration / (self.iteration_s * self.gpus * self.peak_flops_per_s)


def _allreduce_s(message: float, n: int, busbw: float, latency: float) -> float:
    """Ring all-reduce: S x 2(n-1)/n / bus bandwidth (nccl-tests PERFORMANCE.md) plus latency."""
    return 0.0 if n <= 1 else latency + message * 2 * (n - 1) / n / busbw


def _data_parallel_busbw(
    gpu: Accelerator, layout: Parallelism, a: StepAssumptions, link: float, scale_out: float
) -> float:
    """Bus bandwidth of the data-parallel reduction.

    Inside one node (or a TPU slice, whose chips reach each other over ICI) it is the scale-up link.
    Across nodes each GPU has its own NIC and NCCL runs a ring per NIC, so the k members of a
    data-parallel group that share a node move their data over k NICs at once: ~192 GB/s measured across
    DGX A100 nodes with 8 HDR NICs (NVIDIA/nccl#812), one NIC's ~24 GB/s when tensor x pipeline
    parallelism fills the node and each group has one GPU per node.
    """
    if gpu.vendor == "google" or layout.gpus <= a.gpus_per_node:
        return link
    per_node = max(1, a.gpus_per_node // (layout.tp * layout.pp))
    return min(link, per_node * scale_out)


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


def training_step(
    model: ModelSpec,
    gpu: Accelerator,
    layout: Parallelism,
    job: TrainingJob,
    a: StepAssumptions = StepAssumptions(),
    virtual_stages: int = 1,
    overlap_dp: bool | None = None,
) -> StepTime:
    """Predict one training iteration of ``job`` on ``layout`` (see the module docstring for the parts)."""
    peak = peak_for(gpu, job.precision)
    if a.matmul_efficiency is not None:
        # a set value cites its own source where the set carries one (a calibration profile overrides SOURCES)
        cited = a.SOURCES["matmul_efficiency"][1]
        eta_mm = a.matmul_efficiency
        eta_src = cited if cited != StepAssumptions.SOURCES["matmul_efficiency"][1] else "--assume matmul_efficiency"
    else:
        best, eta_src = matmul_efficiency(gpu, training_dtype(job.precision))
        eta_mm, eta_src = best * a.model_shape_factor, f"{eta_src}, x {a.model_shape_factor:g} for a model's shapes"
    bw = gpu.memory_bandwidth_bytes_per_s * a.hbm_efficiency
    tp, pp, cp, dp = layout.tp, layout.pp, layout.cp, layout.dp
    link = gpu.scale_up_bytes_per_s * a.link_efficiency
    scale_out = scale_out_bytes_per_s_per_gpu(gpu, a)
    recipe, _ = resolve_recipe(job, layout)
    bytes_e = 4 if job.precision == "fp32" else 2

    micro = job.micro_batch
    m = micro_batches_per_step(job, layout)
    tokens_mb = micro * job.seq_len / cp  # tokens per micro-batch on one rank
    h, L = model.hidden_size, model.layers
    layers_here = stage_layers(L, pp, "first")

    # ---- per layer, per micro-batch, forward, on one TP rank
    shapes = linear_shapes(model)
    layer_linear = (
        sum(
            din * dout * n
            for k, (din, dout, n) in shapes.items()
            if k not in ("lm_head",) and not k.startswith("expert_")
        )
        / L
    )
    if model.moe is not None:  # the experts each token visits
        per_expert = sum(din * dout for k, (din, dout, n) in shapes.items() if k.startswith("expert_"))
        layer_linear += per_expert * model.moe.experts_per_token * model.moe.layers / L
    mm_f = 2 * tokens_mb * layer_linear / tp / (eta_mm * peak)
    score_flops = 2 * tokens_mb * model.attention_heads * (model.qk_head_dim + model.v_head_dim) * job.seq_len / tp
    if job.flash_attention:
        # the causal spans of flops.py (half the scores; sliding windows), per layer on average: the kernel
        # skips masked blocks, and the MFU numerator counts exactly these FLOPs
        causal_flops = tokens_mb * attention_flops_forward(model, job.seq_len, causal=True) / L / tp
        attn_f = causal_flops / (a.flash_attention_efficiency * peak)
        score_traffic = 0.0
    else:
        attn_f = score_flops / (eta_mm * peak)
        per_element = a.score_bytes_per_element if job.dropout else 4.0
        score_traffic = micro * model.attention_heads / tp * (job.seq_len / cp) * job.seq_len * per_element / bw
    sp = tp if layout.sequence_parallel else 1
    ew_f = tokens_mb * h * a.elementwise_bytes_per_token_hidden * (bytes_e / 2) / sp / bw + score_traffic
    comm = 2 * _allreduce_s(tokens_mb * h * bytes_e, tp, link, a.collective_latency_s)
    fwd = {"matmul": mm_f, "attention": attn_f, "elementwise": ew_f, "tp_comm": comm}
    bwd = {k: 2 * v if k != "tp_comm" else v for k, v in fwd.items()}
    if job.recompute == "full":
        recompute = sum(fwd.values())
    elif job.recompute == "selective":
        recompute = attn_f + score_traffic
    else:
        recompute = 0.0

    # ---- the stage's work per micro-batch, and the head on the last stage
    per_mb = {k: (fwd[k] + bwd[k]) * layers_here for k in fwd}
    per_mb["recompute"] = recompute * layers_here
    head_flops = 2 * tokens_mb * model.vocab_size * model.token_embedding_dim / tp
    per_mb["matmul"] += 3 * head_flops / (eta_mm * peak)
    t_mb = sum(per_mb.values())

    parts = {k: v * m for k, v in per_mb.items()}
    # ---- pipeline: bubble and point-to-point
    if pp > 1:
        parts["pp_bubble"] = (pp - 1) / virtual_stages * t_mb
        send = tokens_mb * h * bytes_e / tp  # scatter-gather: each TP rank sends its slice
        p2p_bw = scale_out if tp * pp > a.gpus_per_node else link
        parts["pp_p2p"] = 2 * virtual_stages * m * (a.collective_latency_s + send / p2p_bw)
    # ---- data parallel: gradient reduction of the parameters this GPU holds
    b = count_params(model)
    local_params = (b.total - b.parts.get("experts", 0)) / (tp * pp) + b.parts.get("experts", 0) / (tp * pp * layout.ep)
    dp_group = dp * cp
    if dp_group > 1 and job.method == "full":
        dp_bw = _data_parallel_busbw(gpu, layout, a, link, scale_out)
        grad_bytes = local_params * recipe.grads
        t_dp = _allreduce_s(grad_bytes, dp_group, dp_bw, a.collective_latency_s)
        # torch DDP buckets, DeepSpeed overlap_comm (set by Hugging Face's ZeRO configs) and FSDP overlap the
        # reduction with backward; Megatron's default (overlap_grad_reduce=False) does not
        overlap = recipe.name in ("amp", "deepspeed", "fsdp") if overlap_dp is None else overlap_dp
        hidden = min(t_dp, sum(bwd.values()) * layers_here) if overlap else 0.0  # the last micro-batch's backward
        parts["dp_comm"] = t_dp - hidden
        if layout.zero >= 3:
            # ZeRO-3/FSDP gather each layer's 16-bit parameters before its forward and again before its
            # backward, every micro-batch (Rajbhandari et al. 2020, section 7: 1.5x the traffic of plain data
            # parallelism); prefetching hides a gather behind the compute of the same pass
            gather = local_params * 2 * (dp_group - 1) / dp_group / dp_bw + a.collective_latency_s * layers_here
            fwd_compute = sum(fwd.values()) * layers_here
            bwd_compute = sum(bwd.values()) * layers_here
            exposed = max(0.0, gather - fwd_compute) + max(0.0, gather - bwd_compute)
            parts["zero3_gather"] = exposed * m
    # ---- optimizer step
    opt_params = local_params / (dp_group if layout.zero >= 1 else 1)
    parts["optimizer"] = opt_params * a.optimizer_bytes_per_param / bw

    tokens_iter = m * micro * job.seq_len * dp
    per_token = flops_per_token(model, job.seq_len, causal=True)
    model_flops = per_token.training_flops * tokens_iter
    return StepTime(
        parts=MappingProxyType({k: v for k, v in parts.items() if v}),
        tokens_per_iteration=tokens_iter,
        gpus=layout.gpus,
        model_flops_per_iteration=model_flops,
        peak_flops_per_s=peak,
        matmul_efficiency=eta_mm,
        matmul_efficiency_source=eta_src,
        micro_batches=m,
        attention_flops_share=per_token.forward_attention_flops / per_token.forward_flops,
    )
