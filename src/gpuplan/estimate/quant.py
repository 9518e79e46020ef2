"""Weight formats for inference: bits each parameter takes in memory, scales and zero points included.

A format quantizes the linear layers of the decoder; ``head_16bit`` says whether the embedding and LM
head stay in 16-bit (AWQ, GPTQ and fp8 checkpoints keep them; GGUF quantizes them too); ``experts_only``
that only the MoE experts take it (gpt-oss's MXFP4 checkpoints).

FP4 (OCP Microscaling spec v1.0, 2023; NVIDIA Blackwell NVFP4): each element is e2m1 (4 bits) and a block of
elements shares one scale. NVFP4: one fp8 e4m3 scale per 16 elements plus one fp32 scale per tensor, i.e.
4 + 8/16 = 4.5 bits (the per-tensor scale is 32 bits over millions of elements: below 1e-5 bit per
element, left out). MXFP4: one e8m0 (8-bit power of two) scale per 32 elements, 4 + 8/32 = 4.25 bits.
Blackwell tensor cores multiply both natively (the catalog's fp4 peak); elsewhere engines dequantize them
in weight-only kernels (Marlin-style, like int4) and multiply in 16-bit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class WeightFormat:
    """A serving weight format: bits per parameter (scales included), and whether the head stays 16-bit."""

    name: str
    bits_per_param: float
    head_16bit: bool
    source: str
    kernel: str  # which kernel family reads it (selects the decode bandwidth factor)
    experts_only: bool = False  # only the MoE experts take the format; other linear layers stay 16-bit


WEIGHT_FORMATS: Mapping[str, WeightFormat] = MappingProxyType(
    {
        f.name: f
        for f in (
            WeightFormat("bf16", 16, True, "bfloat16: 2 bytes", "16bit"),
            WeightFormat("fp16", 16, True, "IEEE half: 2 bytes", "16bit"),
            WeightFormat(
                "fp8",
                8,
                True,
                "fp8 e4m3 with one scale per tensor or output channel; lm_head left in 16-bit "
                "(vLLM fp8 docs; llm-compressor FP8_DYNAMIC recipes ignore lm_head)",
                "fp8",
            ),
            WeightFormat(
                "int8",
                8 + 16 / 4096,
                True,
                "weight-only int8 with a bf16 scale per output channel: 8 + 16/d_in "
                "bits (gpt-fast quantize.py WeightOnlyInt8Linear; d_in = 4096 shown)",
                "int8",
            ),
            WeightFormat(
                "int4-g32",
                4 + 32 / 32,
                True,
                "gpt-fast int4, groups of 32 with bf16 scale and zero "
                "(quantize.py WeightOnlyInt4Linear scales_and_zeros): 4 + 32/32 bits",
                "int4",
            ),
            WeightFormat(
                "int4-awq",
                4 + (16 + 4) / 128,
                True,
                "AWQ 4-bit, group 128: fp16 scale + packed int4 zero per "
                "group (AutoAWQ WQLinear_GEMM); embeddings and lm_head stay fp16",
                "int4",
            ),
            WeightFormat(
                "int4-gptq",
                4 + (16 + 4) / 128 + 32 / 4096,
                True,
                "GPTQ 4-bit, group 128: fp16 scale + packed "
                "int4 zero per group and an int32 g_idx per input channel (AutoGPTQ QuantLinear); lm_head fp16",
                "int4",
            ),
            WeightFormat(
                "gguf-q8_0",
                8.5008,
                False,
                "llama.cpp tools/quantize/README.md, Llama-3.1-8B: Q8_0 8.5008 bits "
                "per weight over the whole model (block_q8_0: 34 bytes per 32)",
                "gguf",
            ),
            WeightFormat(
                "gguf-q6_k", 6.5633, False, "llama.cpp tools/quantize/README.md, Llama-3.1-8B: Q6_K 6.5633 bpw", "gguf"
            ),
            WeightFormat(
                "gguf-q5_k_m",
                5.7036,
                False,
                "llama.cpp tools/quantize/README.md, Llama-3.1-8B: Q5_K_M 5.7036 bpw",
                "gguf",
            ),
            WeightFormat(
                "gguf-q4_k_m",
                4.8944,
                False,
                "llama.cpp tools/quantize/README.md, Llama-3.1-8B: Q4_K_M 4.8944 bpw "
                "(Q4_K at 4.5 bpw, Q6_K for attn_v/ffn_down on half the layers and for the output)",
                "gguf",
            ),
            WeightFormat(
                "gguf-q4_0",
                4.6358,
                False,
                "llama.cpp block_q4_0 (18 bytes per 32) with the output tensor in Q6_K "
                "(llama-quant.cpp); 4.6358 bpw derived for Llama-3-8B (quantize.cpp lists 4.34 GB)",
                "gguf",
            ),
            WeightFormat(
                "nvfp4",
                4 + 8 / 16,
                True,
                "NVFP4: e2m1 elements, one fp8 e4m3 scale per 16 and one fp32 scale per tensor: 4 + 8/16 "
                "bits (NVIDIA 'Introducing NVFP4' 2025; TensorRT Model Optimizer NVFP4 checkpoints keep "
                "lm_head and embeddings in 16-bit, e.g. nvidia/DeepSeek-R1-FP4)",
                "fp4",
            ),
            WeightFormat(
                "mxfp4",
                4 + 8 / 32,
                True,
                "MXFP4: e2m1 elements, one e8m0 scale per 32: 4 + 8/32 = 4.25 bits (OCP Microscaling "
                "Formats spec v1.0). As gpt-oss ships it, only the MoE experts are MXFP4; attention, "
                "router, embeddings and head stay bf16 (gpt-oss model card, 2025: 4.25 bits per "
                "parameter on the MoE weights)",
                "fp4",
                experts_only=True,
            ),
        )
    }
)


def bytes_per_param(fmt: str) -> float:
    return WEIGHT_FORMATS[fmt].bits_per_param / 8


#: Formats whose elements are fp4 (e2m1): multiplied natively where the accelerator has an fp4 peak.
FP4_FORMATS = frozenset(f.name for f in WEIGHT_FORMATS.values() if f.kernel == "fp4")
