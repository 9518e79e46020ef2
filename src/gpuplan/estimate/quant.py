"""Weight formats for inference: bits each parameter takes in memory, scales and zero points included.

A format quantizes the linear layers of the decoder; ``head_16bit`` says whether the embedding and LM
head stay in 16-bit (AWQ, GPTQ and fp8 checkpoints keep them; GGUF quantizes them too).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class WeightFormat:
    name: str
    bits_per_param: float
    head_16bit: bool
    source: str
    kernel: str  # which kernel family reads it (selects the decode bandwidth factor)


WEIGHT_FORMATS: Mapping[str, WeightFormat] = MappingProxyType({f.name: f for f in (
    WeightFormat("bf16", 16, True, "bfloat16: 2 bytes", "16bit"),
    WeightFormat("fp16", 16, True, "IEEE half: 2 bytes", "16bit"),
    WeightFormat("fp8", 8, True, "fp8 e4m3 weights with a per-channel fp32 scale (negligible); vLLM fp8", "fp8"),
    WeightFormat("int8", 8 + 32 / 4096, True, "weight-only int8 with one scale per output channel "
                 "(gpt-fast quantize.py WeightOnlyInt8Linear; bf16 scale per row, ~0 bits/param)", "int8"),
    WeightFormat("int4-g32", 4 + 32 / 32, True, "gpt-fast int4: groups of 32 with a bf16 scale and a bf16 zero "
                 "(quantize.py, groupsize 32): 4 + 32/32 bits", "int4"),
    WeightFormat("int4-awq", 4 + (16 + 4) / 128, True, "AWQ 4-bit, group 128: fp16 scale + packed int4 zero per "
                 "group (AutoAWQ WQLinear_GEMM qzeros/scales)", "int4"),
    WeightFormat("int4-gptq", 4 + (16 + 4) / 128, True, "GPTQ 4-bit, group 128: fp16 scale + packed int4 zero per "
                 "group (AutoGPTQ QuantLinear); desc_act adds an int32 g_idx per input row, not counted", "int4"),
    WeightFormat("gguf-q8_0", 8.5, False, "llama.cpp block_q8_0: 32 int8 + one fp16 scale = 34 bytes per 32", "gguf"),
    WeightFormat("gguf-q6_k", 6.5625, False, "llama.cpp block_q6_K: 210 bytes per 256 weights", "gguf"),
    WeightFormat("gguf-q5_k_m", 5.69, False, "llama.cpp quantize: Q5_K_M ~5.69 bits/weight average on LLaMA-7B", "gguf"),
    WeightFormat("gguf-q4_k_m", 4.85, False, "llama.cpp quantize: Q4_K_M ~4.85 bits/weight average on LLaMA-7B "
                 "(Q4_K, 4.5 bpw, with Q6_K for half of attn_v and ffn_down)", "gguf"),
    WeightFormat("gguf-q4_0", 4.5, False, "llama.cpp block_q4_0: 16 bytes of nibbles + fp16 scale per 32", "gguf"),
)})


def bytes_per_param(fmt: str) -> float:
    return WEIGHT_FORMATS[fmt].bits_per_param / 8
