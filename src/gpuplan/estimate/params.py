"""Parameter counts of a decoder-only transformer, exactly, by component.

Source: the module layout of each architecture as Hugging Face transformers builds it (one weight
matrix ``d_in x d_out`` per linear layer, plus its bias where the config enables one; norms hold a
weight, LayerNorm also a bias). The test suite checks ``count_params`` against transformers'
meta-device count for every built-in model, so "exact" is a tested claim, not a hope.

Conventions:
- ``total`` counts every parameter once (a tied LM head shares the embedding matrix).
- ``active`` is what one token uses: everything except the routed experts it is not sent to
  (``experts - experts_per_token`` of them per MoE layer). Embeddings are included, as in the
  Mixtral and DeepSeek reports ("12.9B active", "37B activated").
- ``vision`` (vision-language checkpoints) is the vision tower and projector: part of ``total`` (the
  checkpoint holds it), not of ``active`` (a text token does not run it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..spec.model import ModelSpec

#: Components in display order.
COMPONENTS = ("embeddings", "attention", "mlp", "router", "experts", "shared_experts", "norms", "lm_head", "vision")


@dataclass(frozen=True)
class ParamBreakdown:
    """Parameters by component; ``total`` and ``active`` are derived from the parts."""

    parts: Mapping[str, int]
    inactive_experts: int = 0

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    @property
    def active(self) -> int:
        return self.total - self.inactive_experts - self.parts.get("vision", 0)

    def to_dict(self) -> dict[str, int]:
        return {k: self.parts[k] for k in COMPONENTS if self.parts.get(k)}


def norm_params(spec: ModelSpec, width: int) -> int:
    """Parameters of one normalization over ``width`` features (RMSNorm: a weight; LayerNorm: + bias)."""
    return {"rmsnorm": width, "layernorm": 2 * width, "layernorm-nobias": width, "nonparametric": 0}[spec.norm]


def linear_params(d_in: int, d_out: int, bias: bool) -> int:
    """A dense layer y = xW (+ b): ``d_in * d_out`` weights, ``d_out`` biases."""
    return d_in * d_out + (d_out if bias else 0)


def attention_params_per_layer(spec: ModelSpec) -> int:
    """Q, K, V and output projections of one layer, plus per-head or full q/k norms.

    GQA/MQA: K and V have ``kv_heads`` heads (Ainslie et al. 2023). MLA (DeepSeek-V2 paper eq. 9-11):
    q down/up projections with a norm on the q latent, a joint KV down projection that also emits the
    shared rotary key, a norm on the KV latent, the KV up projection, and the output projection.
    """
    h = spec.hidden_size
    if spec.mla is not None:
        m, heads = spec.mla, spec.attention_heads
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            q = linear_params(h, m.q_lora_rank, spec.qkv_bias) + norm_params(spec, m.q_lora_rank)
            q += linear_params(m.q_lora_rank, heads * qk, False)
        else:
            q = linear_params(h, heads * qk, False)
        kv = linear_params(h, m.kv_lora_rank + m.qk_rope_head_dim, spec.qkv_bias) + norm_params(spec, m.kv_lora_rank)
        kv += linear_params(m.kv_lora_rank, heads * (m.qk_nope_head_dim + m.v_head_dim), False)
        return q + kv + linear_params(heads * m.v_head_dim, h, spec.o_bias)
    q_width = spec.attention_heads * spec.head_dim
    kv_width = spec.kv_heads * spec.head_dim
    total = linear_params(h, q_width, spec.qkv_bias) + 2 * linear_params(h, kv_width, spec.qkv_bias)
    total += linear_params(q_width, h, spec.o_bias)
    if spec.attention_sinks:
        total += spec.attention_heads
    if spec.qk_norm == "head":
        total += 2 * norm_params(spec, spec.head_dim)
    elif spec.qk_norm == "full":
        total += norm_params(spec, q_width) + norm_params(spec, kv_width)
    return total


def mlp_params(spec: ModelSpec, ffn: int, bias: bool | None = None) -> int:
    """One feed-forward block of width ``ffn``: gated (SwiGLU/GeGLU: gate, up, down) or plain (up, down).

    Gated MLPs follow Shazeer 2020 "GLU Variants Improve Transformer"; biases where the config has them.
    """
    h = spec.hidden_size
    bias = spec.mlp_bias if bias is None else bias
    if spec.mlp_gated:
        return 2 * linear_params(h, ffn, bias) + linear_params(ffn, h, bias)
    return linear_params(h, ffn, bias) + linear_params(ffn, h, bias)


def count_params(spec: ModelSpec) -> ParamBreakdown:
    """Exact parameter count of ``spec`` by component (see the module docstring for conventions)."""
    h, L = spec.hidden_size, spec.layers
    e = spec.token_embedding_dim
    embeddings = spec.vocab_size * e + spec.learned_positions * h
    if spec.embedding_norm:
        embeddings += norm_params(spec, h)
    if e != h:  # OPT-350m: project_in and project_out, no bias
        embeddings += 2 * e * h
    norms = L * spec.norms_per_layer * norm_params(spec, h) + (norm_params(spec, h) if spec.final_norm else 0)
    parts = {
        "embeddings": embeddings,
        "attention": L * attention_params_per_layer(spec),
        "mlp": spec.dense_layers * mlp_params(spec, spec.ffn_size),
        "norms": norms,
        "lm_head": 0 if spec.tie_embeddings else spec.vocab_size * e + (spec.vocab_size if spec.lm_head_bias else 0),
    }
    if spec.tie_embeddings and spec.lm_head_bias:
        # a tied head shares the embedding matrix but keeps its own bias (ERNIE 4.5 with use_bias); it is
        # listed with the embedding so that "lm_head" stays 0 exactly when the head is tied
        parts["embeddings"] += spec.vocab_size
    if spec.vision_params:
        parts["vision"] = spec.vision_params
    inactive = 0
    if spec.moe is not None:
        moe = spec.moe
        one_expert = mlp_params(spec, moe.expert_ffn_size, bias=moe.expert_bias)
        router = linear_params(h, moe.experts, moe.router_bias) + (moe.experts if moe.router_score_bias else 0)
        parts["router"] = moe.layers * router
        parts["experts"] = moe.layers * moe.experts * one_expert
        shared = 0
        if moe.shared_ffn_size:
            shared = mlp_params(spec, moe.shared_ffn_size, bias=moe.shared_expert_bias)
            shared += linear_params(h, 1, False) if moe.shared_expert_gate else 0
        parts["shared_experts"] = moe.layers * shared
        inactive = moe.layers * (moe.experts - moe.experts_per_token) * one_expert
    return ParamBreakdown(parts=MappingProxyType(parts), inactive_experts=inactive)


def linear_shapes(spec: ModelSpec) -> dict[str, tuple[int, int, int]]:
    """Every weight matrix of one kind as name -> (d_in, d_out, how many in the model).

    Names follow PEFT's Llama-style module names (q_proj ... down_proj) so LoRA targets map onto them;
    fused projections of other families (GPT-2's c_attn, Falcon's query_key_value) are listed by their
    parts, which is what LoRA on those parts would adapt. Routed experts are ``expert_*``, shared experts
    ``shared_*``; MLA's low-rank projections have their own names.
    """
    h, L = spec.hidden_size, spec.layers
    out: dict[str, tuple[int, int, int]] = {}
    if spec.mla is not None:
        m, heads = spec.mla, spec.attention_heads
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            out["q_a_proj"] = (h, m.q_lora_rank, L)
            out["q_b_proj"] = (m.q_lora_rank, heads * qk, L)
        else:
            out["q_proj"] = (h, heads * qk, L)
        out["kv_a_proj"] = (h, m.kv_lora_rank + m.qk_rope_head_dim, L)
        out["kv_b_proj"] = (m.kv_lora_rank, heads * (m.qk_nope_head_dim + m.v_head_dim), L)
        out["o_proj"] = (heads * m.v_head_dim, h, L)
    else:
        out["q_proj"] = (h, spec.attention_heads * spec.head_dim, L)
        out["k_proj"] = (h, spec.kv_heads * spec.head_dim, L)
        out["v_proj"] = (h, spec.kv_heads * spec.head_dim, L)
        out["o_proj"] = (spec.attention_heads * spec.head_dim, h, L)
    if spec.dense_layers:
        n = spec.dense_layers
        if spec.mlp_gated:
            out["gate_proj"] = (h, spec.ffn_size, n)
        out["up_proj"] = (h, spec.ffn_size, n)
        out["down_proj"] = (spec.ffn_size, h, n)
    if spec.moe is not None:
        moe = spec.moe
        n = moe.layers * moe.experts
        if spec.mlp_gated:
            out["expert_gate_proj"] = (h, moe.expert_ffn_size, n)
        out["expert_up_proj"] = (h, moe.expert_ffn_size, n)
        out["expert_down_proj"] = (moe.expert_ffn_size, h, n)
        if moe.shared_ffn_size:
            if spec.mlp_gated:
                out["shared_gate_proj"] = (h, moe.shared_ffn_size, moe.layers)
            out["shared_up_proj"] = (h, moe.shared_ffn_size, moe.layers)
            out["shared_down_proj"] = (moe.shared_ffn_size, h, moe.layers)
        out["router"] = (h, moe.experts, moe.layers)
    out["lm_head"] = (spec.token_embedding_dim, spec.vocab_size, 1)
    return out


def largest_module_params(spec: ModelSpec) -> int:
    """Parameters of the largest single module (DeepSpeed's 'largest layer'): usually the embedding."""
    sizes = [spec.vocab_size * spec.token_embedding_dim]
    sizes += [din * dout for din, dout, _ in linear_shapes(spec).values()]
    return max(sizes)
