"""A decoder-only transformer described by the sizes that determine its parameters and FLOPs.

The fields are family-agnostic: the config reader (``gpuplan.catalog.hf_config``) maps each Hugging
Face architecture (GPT-2, NeoX, OPT, BLOOM, Falcon, MPT, Llama, Mistral/Mixtral, Qwen, Gemma, Phi,
OLMo, DeepSeek...) onto them, and ``gpuplan.estimate.params`` counts from them alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .accelerator import Source

#: How much a normalization layer of width w holds: RMSNorm / bias-free LayerNorm w, LayerNorm 2w,
#: OLMo's non-parametric LayerNorm nothing.
NORM_KINDS = ("rmsnorm", "layernorm", "layernorm-nobias", "nonparametric")


@dataclass(frozen=True)
class MoE:
    """Mixture-of-experts feed-forward layers.

    ``layers`` is how many decoder layers use the MoE block (the others use the dense MLP of width
    ``ModelSpec.ffn_size``); ``shared_ffn_size`` is the summed width of always-on shared experts
    (DeepSeek, Qwen2-MoE), 0 when there are none.
    """

    experts: int
    experts_per_token: int
    expert_ffn_size: int
    layers: int
    shared_ffn_size: int = 0
    shared_expert_gate: bool = False
    router_bias: bool = False
    #: gpt-oss: every routed expert's projections carry biases (gate/up 2 x expert_ffn_size, down hidden).
    expert_bias: bool = False
    #: ERNIE 4.5: the shared experts' projections carry biases.
    shared_expert_bias: bool = False
    #: ERNIE 4.5: a learned per-expert score-correction bias in the router (``experts`` values per layer).
    router_score_bias: bool = False


@dataclass(frozen=True)
class MLA:
    """DeepSeek multi-head latent attention (DeepSeek-V2 paper, section 2.1).

    Queries go through a low-rank bottleneck of ``q_lora_rank`` (None: a plain projection); keys and
    values are compressed into a ``kv_lora_rank`` latent plus a shared ``qk_rope_head_dim`` rotary key.
    """

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only language model's architecture, as far as size and compute are concerned."""

    id: str
    name: str
    model_type: str
    vocab_size: int
    hidden_size: int
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    ffn_size: int
    context_length: int
    tie_embeddings: bool
    mlp_gated: bool
    norm: str
    norms_per_layer: int = 2
    final_norm: bool = True
    embedding_norm: bool = False
    learned_positions: int = 0
    embedding_dim: int | None = None
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    lm_head_bias: bool = False
    qk_norm: str = "none"  # "none" | "head" (per head, width head_dim) | "full" (over all heads)
    parallel_attention: bool = False
    rotary_fraction: float = 1.0
    sliding_window: int | None = None
    sliding_window_layers: int = 0
    #: Llama 4 chunked attention: ``chunked_layers`` layers attend only within blocks of ``attention_chunk``
    #: tokens (a KV cache of at most that many tokens each); the other layers attend to the whole context.
    attention_chunk: int | None = None
    chunked_layers: int = 0
    #: gpt-oss attention sinks: one learned logit per query head per layer (a column of the softmax that
    #: holds no KV cache entry).
    attention_sinks: bool = False
    #: Parameters outside the language model that the checkpoint holds: a vision-language model's vision
    #: tower and projector (held in memory, not run for text tokens).
    vision_params: int = 0
    moe: MoE | None = None
    mla: MLA | None = None
    family: str = ""
    hf_id: str | None = None
    aliases: tuple[str, ...] = ()
    source: Source | None = None
    published_params: int | None = None
    published_active_params: int | None = None
    published_params_rounded: bool = False
    notes: tuple[str, ...] = field(default=(), compare=False)
    origin: str = field(default="built-in", compare=False)

    @property
    def token_embedding_dim(self) -> int:
        """Width of the token embedding (OPT-350m embeds at 512 and projects to the hidden size)."""
        return self.embedding_dim or self.hidden_size

    @property
    def full_attention_layers(self) -> int:
        """Layers that attend to the whole context (neither windowed nor chunked)."""
        windowed = self.sliding_window_layers if self.sliding_window else 0
        chunked = self.chunked_layers if self.attention_chunk else 0
        return self.layers - windowed - chunked

    @property
    def dense_layers(self) -> int:
        """Decoder layers with a dense MLP (all of them without MoE)."""
        return self.layers - (self.moe.layers if self.moe else 0)

    @property
    def qk_head_dim(self) -> int:
        """Width of one head's query/key dot product."""
        return self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim if self.mla else self.head_dim

    @property
    def v_head_dim(self) -> int:
        """Width of one head's value vector."""
        return self.mla.v_head_dim if self.mla else self.head_dim


@dataclass(frozen=True)
class ParamsOnlyModel:
    """A model known only by its parameter count (``--model 7.5B``).

    Estimates that need only N (6N training FLOPs per token, weight bytes) accept it; those that need
    the architecture (attention FLOPs, activations, KV cache) raise ``NeedsArchitectureError``.
    """

    params: int

    @property
    def id(self) -> str:
        from ..units import format_count

        return f"{format_count(self.params)}-params"

    @property
    def name(self) -> str:
        from ..units import format_count

        return f"{format_count(self.params)} parameters (no architecture)"
