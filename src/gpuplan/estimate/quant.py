"""Weight formats for inference: bits each parameter takes in memory, scales and zero points included.

A format quantizes the linear layers of the decoder; ``head_16bit`` says whether the embedding and LM
head stay in 16-bit (AWQ, GPTQ and fp8 checkpoints keep them; GGUF quantizes them too).
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
        )
    }
)


def bytes_per_param(fmt: str) -> float:
    return WEIGHT_FORMATS[fmt].bits_per_param / 8
