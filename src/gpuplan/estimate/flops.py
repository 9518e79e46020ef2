"""FLOPs per token of a decoder-only transformer.

Source: Chowdhery et al. 2022, "PaLM", appendix B: a token costs 6N matmul FLOPs in training
(2N forward, 4N backward) plus 12·L·H·Q·T for self-attention (T the sequence length, H heads of
width Q), counted without causal halving and without recomputation (so these are *model* FLOPs:
the MFU numerator, not hardware FLOPs).

Conventions used here, stated once:
- N is the *matmul* parameter count per token: active parameters minus the token and position
  embedding tables (a lookup costs no FLOPs), plus the LM head as a matmul even when it is tied
  to the embedding. Norm weights and biases are counted in N (negligible, and they are touched).
- Attention per layer and forward pass is 2·T·H·(d_qk + d_v): QKᵀ and the weighted sum of V.
  With d_qk = d_v = Q this is PaLM's 4·L·H·Q·T forward, 12·L·H·Q·T in training. MLA uses its
  own widths (DeepSeek-V3: d_qk = 192, d_v = 128). Layers with a sliding window attend to
  min(T, window) tokens; Llama 4's chunked layers attend within blocks of c tokens, min(T, c).
- Inference per token at context T is the forward pass only: 2N + attention at T.

Causal attention, two conventions (``causal`` argument):
- ``causal=False`` (the default, PaLM appendix B, and the convention of most published MFU figures:
  Narayanan et al. 2021 eq. 3, Korthikanti et al. 2022 eq. 7, NeMo): every token of a sequence of T is
  charged the full T-wide QKᵀ and PV products. This is what ``model show`` prints and what the
  published figures are checked against. It is also the exact cost of one decode token at context T.
- ``causal=True``: a token attends on average to the tokens before it, so the score and context matmuls
  of a sequence cost T²/2 instead of T² (the FLOP count of FlashAttention's benchmarks, Dao et al. 2022
  and Dao 2023: ``4·T²·H·Q / 2`` forward for a causal mask). With a sliding window w the mean span is
  T/2 for T <= w and w - w²/(2T) beyond (the integral of min(t, w) over t in [0, T], divided by T).
  With chunked attention (blocks of c, Llama 4) a token attends to the tokens before it in its block:
  min(T, c)/2 on average over whole blocks.
  Training plans count model FLOPs this way, and the step-time model (``steptime.py``) charges the
  kernels the same spans, so the MFU the plans report is at most the attention kernel's efficiency and
  never above 1, even at long context where attention dominates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import NeedsArchitectureError
from ..spec.model import ModelSpec, ParamsOnlyModel
from .params import count_params


@dataclass(frozen=True)
class FlopsPerToken:
    """FLOPs for one token: forward matmuls, forward attention, and the training multiple of both."""

    seq_len: int
    matmul_params: int
    forward_matmul_flops: float
    forward_attention_flops: float
    causal: bool = False

    @property
    def forward_flops(self) -> float:
        return self.forward_matmul_flops + self.forward_attention_flops

    @property
    def training_flops(self) -> float:
        """Forward + backward (backward = 2x forward), PaLM appendix B, no recompute."""
        return 3.0 * self.forward_flops

    def step_flops(self, method: str = "full") -> float:
        """Model FLOPs of a training step per token: ``training_flops``; under LoRA/QLoRA the forward and the input
        gradients only, 2x the forward, since the frozen weights get no gradient (Hu et al. 2021; the adapters'
        FLOPs are under 1 % at the usual ranks and not counted)."""
        return self.training_flops if method == "full" else 2.0 * self.forward_flops

    @property
    def inference_flops(self) -> float:
        """One forward pass for a token that attends to ``seq_len`` tokens."""
        return self.forward_flops

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq_len": self.seq_len,
            "matmul_params": self.matmul_params,
            "training": self.training_flops,
            "inference": self.inference_flops,
            "training_matmul": 3.0 * self.forward_matmul_flops,
            "training_attention": 3.0 * self.forward_attention_flops,
            "convention": CAUSAL_CONVENTION if self.causal else NONCAUSAL_CONVENTION,
        }


NONCAUSAL_CONVENTION = (
    "PaLM appendix B: 6N + 12*L*H*Q*T per training token; model FLOPs (no causal halving, "
    "no recompute); N excludes embedding lookups, includes the LM head"
)
CAUSAL_CONVENTION = (
    "model FLOPs with causal attention: 6N + 6*L*H*Q*T per training token (PaLM appendix B's "
    "attention term halved for the causal mask, as FlashAttention counts it), no recompute; "
    "N excludes embedding lookups, includes the LM head"
)


def matmul_params(spec: ModelSpec) -> int:
    """N of the 6N rule: active parameters less embedding lookups, plus the (possibly tied) LM head."""
    b = count_params(spec)
    lookups = spec.vocab_size * spec.token_embedding_dim + spec.learned_positions * spec.hidden_size
    head = spec.vocab_size * spec.token_embedding_dim if spec.tie_embeddings else 0
    return b.active - lookups + head


def attended_span(seq_len: float, window: int | None = None, causal: bool = False) -> float:
    """Tokens one query attends to, on average over a sequence of ``seq_len``.

    Non-causal (PaLM appendix B): T, or min(T, w) under a sliding window w. Causal (FlashAttention's
    count): T/2, and with a window w < T the mean of min(t, w) over t in [0, T], w - w²/(2T).
    """
    if not causal:
        return float(min(seq_len, window)) if window else float(seq_len)
    if window and seq_len > window:
        return window - window * window / (2.0 * seq_len)
    return seq_len / 2.0


def attention_flops_forward(spec: ModelSpec, seq_len: int, causal: bool = False) -> float:
    """Forward attention FLOPs per token: sum over layers of 2·S_l·H·(d_qk + d_v) (PaLM appendix B form).

    S_l is the attended span of :func:`attended_span`: ``seq_len`` (or the sliding window, for the layers
    that use one) without ``causal``; half of it, on average over the sequence, with ``causal``.
    """
    per_context_token = 2.0 * spec.attention_heads * (spec.qk_head_dim + spec.v_head_dim)
    windowed = spec.sliding_window_layers if spec.sliding_window else 0
    chunked = spec.chunked_layers if spec.attention_chunk else 0
    span_full = attended_span(seq_len, None, causal)
    span_windowed = attended_span(seq_len, spec.sliding_window, causal) if windowed else 0.0
    span_chunked = chunked_span(seq_len, spec.attention_chunk, causal) if chunked else 0.0
    return per_context_token * (
        spec.full_attention_layers * span_full + windowed * span_windowed + chunked * span_chunked
    )


def chunked_span(seq_len: float, chunk: int | None, causal: bool = False) -> float:
    """Tokens one query attends to under chunked attention (blocks of ``chunk``): min(T, c) without
    ``causal``; with it the mean over whole blocks, min(T, c)/2."""
    span = float(min(seq_len, chunk)) if chunk else float(seq_len)
    return span / 2.0 if causal else span


def flops_per_token(model: ModelSpec | ParamsOnlyModel, seq_len: int, causal: bool = False) -> FlopsPerToken:
    """FLOPs per token at sequence length ``seq_len``; a parameter-only model gets 2N / 6N without attention.

    ``causal``: count the attention of a causal mask (half the scores, see the module docstring)."""
    if seq_len <= 0:
        raise ValueError("seq_len must be positive")
    if isinstance(model, ParamsOnlyModel):
        return FlopsPerToken(
            seq_len=seq_len,
            matmul_params=model.params,
            forward_matmul_flops=2.0 * model.params,
            forward_attention_flops=0.0,
            causal=causal,
        )
    n = matmul_params(model)
    return FlopsPerToken(
        seq_len=seq_len,
        matmul_params=n,
        forward_matmul_flops=2.0 * n,
        forward_attention_flops=attention_flops_forward(model, seq_len, causal),
        causal=causal,
    )


def require_architecture(model: ModelSpec | ParamsOnlyModel, what: str) -> ModelSpec:
    """Return the spec, or raise when only a parameter count is known and ``what`` needs more."""
    if isinstance(model, ParamsOnlyModel):
        raise NeedsArchitectureError(
            f"{what} needs the architecture (layers, hidden size, heads); give a built-in model id or a config.json "
            f"instead of a bare parameter count ('gpuplan model list' shows the built-in ones)"
        )
    return model
