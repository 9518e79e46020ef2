"""Read a Hugging Face ``config.json`` (a dict) into a :class:`~gpuplan.spec.ModelSpec`.

Each supported ``model_type`` maps its field names and the defaults of its transformers config class
onto the family-agnostic spec. The mapping is checked in the test suite: for every built-in model
and every fixture config, the parameter count derived from the spec equals what transformers builds
for causal LM on the meta device. This module never imports transformers and never runs remote code.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import ModelConfigError
from ..spec.model import MLA, ModelSpec, MoE

Config = dict[str, Any]


class _Reader:
    """Typed access to one config dict, with errors that name the field."""

    def __init__(self, cfg: Config, where: str):
        self.cfg = cfg
        self.where = where

    def has(self, *keys: str) -> bool:
        return any(self.cfg.get(k) is not None for k in keys)

    def raw(self, *keys: str, default: Any = None) -> Any:
        for k in keys:
            if self.cfg.get(k) is not None:
                return self.cfg[k]
        return default

    def int(self, *keys: str, default: int | None = None, minimum: int = 1) -> int:
        value = self.raw(*keys)
        if value is None:
            if default is None:
                raise ModelConfigError(f"{self.where}: missing field '{keys[0]}' (an integer)")
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
            raise ModelConfigError(f"{self.where}: field '{keys[0]}' must be an integer, got {value!r}")
        if value < minimum:
            raise ModelConfigError(f"{self.where}: field '{keys[0]}' must be >= {minimum}, got {value}")
        return int(value)

    def bool(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ModelConfigError(f"{self.where}: field '{key}' must be true or false, got {value!r}")
        return value

    def float(self, key: str, default: float) -> float:
        value = self.cfg.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ModelConfigError(f"{self.where}: field '{key}' must be a number, got {value!r}")
        return float(value)


#: Families whose config class has a fixed head_dim default instead of hidden_size / heads.
_HEAD_DIM_DEFAULT = {"gemma": 256, "gemma2": 256, "gemma3_text": 256, "qwen3": 128, "qwen3_moe": 128}


def _heads(r: _Reader, hidden: int, heads_key: str = "num_attention_heads",
           head_dim_default: int | None = None) -> tuple[int, int, int]:
    heads = r.int(heads_key)
    kv = r.int("num_key_value_heads", default=heads)
    if r.has("head_dim"):
        head_dim = r.int("head_dim")
    else:
        head_dim = head_dim_default or hidden // heads
    if not r.has("head_dim") and head_dim_default is None and hidden % heads:
        raise ModelConfigError(f"{r.where}: hidden_size {hidden} is not divisible by {heads_key} {heads}")
    if heads % kv:
        raise ModelConfigError(f"{r.where}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}")
    return heads, kv, head_dim


def _sliding(r: _Reader, layers: int, context: int, pattern: Callable[[int], bool] | None = None,
             enabled: bool = True) -> tuple[int | None, int]:
    """(window, number of layers that use it); (None, 0) where no layer is windowed below the context."""
    window = r.raw("sliding_window")
    if not enabled or not isinstance(window, int) or isinstance(window, bool) or window <= 0 or window >= context:
        return None, 0
    types = r.raw("layer_types")
    if isinstance(types, list) and len(types) == layers:
        n = sum(1 for t in types if t == "sliding_attention")
    elif pattern is not None:
        n = sum(1 for i in range(layers) if pattern(i))
    else:
        n = layers
    return (window, n) if n else (None, 0)


def _common(r: _Reader, model_type: str, tie_default: bool, context_keys=("max_position_embeddings",),
            context_default: int | None = None) -> dict:
    hidden = r.int("hidden_size")
    heads, kv, head_dim = _heads(r, hidden, head_dim_default=_HEAD_DIM_DEFAULT.get(model_type))
    return dict(
        model_type=model_type,
        vocab_size=r.int("vocab_size"),
        hidden_size=hidden,
        layers=r.int("num_hidden_layers"),
        attention_heads=heads,
        kv_heads=kv,
        head_dim=head_dim,
        context_length=r.int(*context_keys, default=context_default),
        tie_embeddings=r.bool("tie_word_embeddings", tie_default),
    )


#: Families whose transformers config class ties input and output embeddings unless told otherwise.
_TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3_text")


def _llama_like(r: _Reader, model_type: str) -> dict:
    """Llama and the families that copy its layout: RMSNorm, gated MLP, rotary, optional GQA."""
    d = _common(r, model_type, tie_default=model_type in _TIED_BY_DEFAULT)
    d.update(ffn_size=r.int("intermediate_size"), mlp_gated=True, norm="rmsnorm")
    bias = r.bool("attention_bias", False)
    d.update(qkv_bias=bias, o_bias=bias, mlp_bias=r.bool("mlp_bias", False))
    if model_type in ("qwen2", "qwen2_moe"):
        d.update(qkv_bias=r.bool("qkv_bias", True) if "qkv_bias" in r.cfg else True, o_bias=False)
    if model_type in ("qwen3", "qwen3_moe", "gemma3_text"):
        d["qk_norm"] = "head"
    if model_type in ("gemma2", "gemma3_text"):
        d["norms_per_layer"] = 4
    if model_type == "olmo":
        d["norm"] = "nonparametric"
    if model_type == "olmo2":
        d["qk_norm"] = "full"
    if model_type == "phi3":
        d["rotary_fraction"] = r.float("partial_rotary_factor", 1.0)
    layers, ctx = d["layers"], d["context_length"]
    if model_type == "gemma2":
        d["sliding_window"], d["sliding_window_layers"] = _sliding(r, layers, ctx, lambda i: i % 2 == 0)
    elif model_type == "gemma3_text":
        period = r.int("sliding_window_pattern", default=6)
        d["sliding_window"], d["sliding_window_layers"] = _sliding(r, layers, ctx, lambda i: (i + 1) % period != 0)
    elif model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        start = r.int("max_window_layers", default=layers, minimum=0)
        d["sliding_window"], d["sliding_window_layers"] = _sliding(
            r, layers, ctx, lambda i: i >= start, enabled=r.bool("use_sliding_window", False))
    else:
        d["sliding_window"], d["sliding_window_layers"] = _sliding(r, layers, ctx)
    return d


def _moe_layer_count(r: _Reader, layers: int, experts: int) -> int:
    """Qwen-MoE layer rule: MoE where not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0."""
    step = r.int("decoder_sparse_step", default=1)
    only_mlp = set(r.raw("mlp_only_layers", default=[]) or [])
    return sum(1 for i in range(layers) if i not in only_mlp and experts > 0 and (i + 1) % step == 0)


def _read_mixtral(r: _Reader) -> dict:
    d = _llama_like(r, "mixtral")
    experts = r.int("num_local_experts")
    d["moe"] = MoE(experts=experts, experts_per_token=r.int("num_experts_per_tok"),
                   expert_ffn_size=d["ffn_size"], layers=d["layers"])
    return d


def _read_qwen_moe(r: _Reader, model_type: str) -> dict:
    d = _llama_like(r, model_type)
    experts = r.int("num_experts")
    shared = r.int("shared_expert_intermediate_size", default=0, minimum=0) if model_type == "qwen2_moe" else 0
    d["moe"] = MoE(experts=experts, experts_per_token=r.int("num_experts_per_tok"),
                   expert_ffn_size=r.int("moe_intermediate_size"), layers=_moe_layer_count(r, d["layers"], experts),
                   shared_ffn_size=shared, shared_expert_gate=shared > 0)
    return d


def _read_deepseek(r: _Reader, model_type: str) -> dict:
    d = _llama_like(r, model_type)
    layers = d["layers"]
    experts = r.int("n_routed_experts", default=0, minimum=0)
    first_dense = r.int("first_k_dense_replace", default=0, minimum=0)
    freq = r.int("moe_layer_freq", default=1)
    moe_layers = sum(1 for i in range(layers) if experts and i >= first_dense and i % freq == 0)
    if moe_layers:
        expert_ffn = r.int("moe_intermediate_size")
        d["moe"] = MoE(experts=experts, experts_per_token=r.int("num_experts_per_tok"), expert_ffn_size=expert_ffn,
                       layers=moe_layers, shared_ffn_size=expert_ffn * r.int("n_shared_experts", default=0, minimum=0))
    q_lora = r.raw("q_lora_rank")
    d["mla"] = MLA(q_lora_rank=int(q_lora) if q_lora else None, kv_lora_rank=r.int("kv_lora_rank"),
                   qk_nope_head_dim=r.int("qk_nope_head_dim"), qk_rope_head_dim=r.int("qk_rope_head_dim"),
                   v_head_dim=r.int("v_head_dim"))
    d["kv_heads"] = d["attention_heads"]  # MLA: every head has its own (decompressed) keys and values
    d["head_dim"] = d["mla"].qk_nope_head_dim + d["mla"].qk_rope_head_dim
    return d


def _read_gpt2(r: _Reader) -> dict:
    hidden = r.int("n_embd", "hidden_size")
    heads = r.int("n_head", "num_attention_heads")
    if hidden % heads:
        raise ModelConfigError(f"{r.where}: n_embd {hidden} is not divisible by n_head {heads}")
    positions = r.int("n_positions", "max_position_embeddings", default=1024)
    return dict(model_type="gpt2", vocab_size=r.int("vocab_size"), hidden_size=hidden,
                layers=r.int("n_layer", "num_hidden_layers"), attention_heads=heads, kv_heads=heads,
                head_dim=hidden // heads, ffn_size=r.int("n_inner", default=4 * hidden),
                context_length=positions, learned_positions=positions,
                tie_embeddings=r.bool("tie_word_embeddings", True), mlp_gated=False, norm="layernorm",
                qkv_bias=True, o_bias=True, mlp_bias=True)


def _read_gpt_neox(r: _Reader) -> dict:
    d = _common(r, "gpt_neox", tie_default=False)
    bias = r.bool("attention_bias", True)
    d.update(ffn_size=r.int("intermediate_size"), mlp_gated=False, norm="layernorm", qkv_bias=bias, o_bias=bias,
             mlp_bias=True, parallel_attention=r.bool("use_parallel_residual", True),
             rotary_fraction=r.float("rotary_pct", 0.25))
    return d


def _read_opt(r: _Reader) -> dict:
    d = _common(r, "opt", tie_default=True)
    bias = r.bool("enable_bias", True)
    affine = r.bool("layer_norm_elementwise_affine", True)
    embed_dim = r.int("word_embed_proj_dim", default=d["hidden_size"])
    final = r.bool("do_layer_norm_before", True) and not r.bool("_remove_final_layer_norm", False)
    d.update(ffn_size=r.int("ffn_dim"), mlp_gated=False, norm="layernorm" if affine else "nonparametric",
             qkv_bias=bias, o_bias=bias, mlp_bias=bias, final_norm=final,
             learned_positions=d["context_length"] + 2,  # OPT offsets learned positions by 2
             embedding_dim=embed_dim if embed_dim != d["hidden_size"] else None)
    return d


def _read_bloom(r: _Reader) -> dict:
    hidden = r.int("hidden_size", "n_embed")
    heads = r.int("n_head", "num_attention_heads")
    if hidden % heads:
        raise ModelConfigError(f"{r.where}: hidden_size {hidden} is not divisible by n_head {heads}")
    return dict(model_type="bloom", vocab_size=r.int("vocab_size"), hidden_size=hidden,
                layers=r.int("n_layer", "num_hidden_layers"), attention_heads=heads, kv_heads=heads,
                head_dim=hidden // heads, ffn_size=4 * hidden, context_length=r.int("seq_length", default=2048),
                tie_embeddings=r.bool("tie_word_embeddings", True), mlp_gated=False, norm="layernorm",
                embedding_norm=True, qkv_bias=True, o_bias=True, mlp_bias=True)


def _read_falcon(r: _Reader) -> dict:
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads")
    new_arch = r.bool("new_decoder_architecture", False)
    if new_arch:
        kv = r.int("num_kv_heads", default=heads)
    elif r.bool("multi_query", True):
        kv = 1
    else:
        kv = heads
    parallel = r.bool("parallel_attn", True)
    n_ln = r.raw("num_ln_in_parallel_attn")
    if new_arch and (n_ln is None or n_ln == 2):
        norms = 2  # ln_attn and ln_mlp
    else:
        norms = 1 if parallel else 2
    bias = r.bool("bias", False)
    return dict(model_type="falcon", vocab_size=r.int("vocab_size"), hidden_size=hidden,
                layers=r.int("num_hidden_layers"), attention_heads=heads, kv_heads=kv, head_dim=hidden // heads,
                ffn_size=r.int("ffn_hidden_size", default=4 * hidden),
                context_length=r.int("max_position_embeddings", default=2048),
                tie_embeddings=r.bool("tie_word_embeddings", True), mlp_gated=False, norm="layernorm",
                norms_per_layer=norms, qkv_bias=bias, o_bias=bias, mlp_bias=bias, parallel_attention=parallel)


def _read_mpt(r: _Reader) -> dict:
    hidden = r.int("d_model", "hidden_size")
    heads = r.int("n_heads", "num_attention_heads")
    if hidden % heads:
        raise ModelConfigError(f"{r.where}: d_model {hidden} is not divisible by n_heads {heads}")
    # transformers' MPT (the one the Hub's MPT checkpoints load into) has no biases and a 4x MLP;
    # configs that ask for anything else describe weights it cannot hold.
    if not r.bool("no_bias", True) or r.int("expansion_ratio", default=4) != 4:
        raise ModelConfigError(f"{r.where}: MPT with no_bias=false or expansion_ratio != 4 is not supported "
                               "(transformers' MPT has neither); set no_bias true and expansion_ratio 4")
    return dict(model_type="mpt", vocab_size=r.int("vocab_size"), hidden_size=hidden,
                layers=r.int("n_layers", "num_hidden_layers"), attention_heads=heads, kv_heads=heads,
                head_dim=hidden // heads, ffn_size=4 * hidden, context_length=r.int("max_seq_len", default=2048),
                tie_embeddings=True, mlp_gated=False, norm="layernorm-nobias")


def _read_phi(r: _Reader) -> dict:
    d = _common(r, "phi", tie_default=False)
    d.update(ffn_size=r.int("intermediate_size"), mlp_gated=False, norm="layernorm", norms_per_layer=1,
             qkv_bias=True, o_bias=True, mlp_bias=True, lm_head_bias=True, parallel_attention=True,
             qk_norm="head" if r.bool("qk_layernorm", False) else "none",
             rotary_fraction=r.float("partial_rotary_factor", 0.5))
    return d


_READERS: dict[str, Callable[[_Reader], dict]] = {
    "gpt2": _read_gpt2,
    "gpt_neox": _read_gpt_neox,
    "opt": _read_opt,
    "bloom": _read_bloom,
    "falcon": _read_falcon,
    "mpt": _read_mpt,
    "phi": _read_phi,
    "mixtral": _read_mixtral,
    "qwen2_moe": lambda r: _read_qwen_moe(r, "qwen2_moe"),
    "qwen3_moe": lambda r: _read_qwen_moe(r, "qwen3_moe"),
    "deepseek_v2": lambda r: _read_deepseek(r, "deepseek_v2"),
    "deepseek_v3": lambda r: _read_deepseek(r, "deepseek_v3"),
}
for _mt in ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "olmo", "olmo2"):
    _READERS[_mt] = (lambda mt: (lambda r: _llama_like(r, mt)))(_mt)

#: model_type values the reader understands.
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_READERS))


def spec_from_hf_config(config: Config, *, id: str, name: str | None = None, where: str | None = None,
                        **extra: Any) -> ModelSpec:
    """Build a ModelSpec from a Hugging Face config dict.

    ``where`` names the config in error messages (a path or a catalog entry). Multimodal configs with a
    ``text_config`` are read through their text model, and a note says the rest was left out.
    """
    where = where or id
    if not isinstance(config, dict):
        raise ModelConfigError(f"{where}: a model config must be a JSON object, got {type(config).__name__}")
    notes = list(extra.pop("notes", ()))
    model_type = config.get("model_type")
    if isinstance(config.get("text_config"), dict) and model_type not in _READERS:
        text = dict(config["text_config"])
        text.setdefault("model_type", {"gemma3": "gemma3_text"}.get(model_type, model_type))
        notes.append(f"read the text model of a '{model_type}' config; its vision/audio parts are not counted")
        config, model_type = text, text.get("model_type")
    if model_type == "gemma3":
        model_type = "gemma3_text"
    if not model_type:
        raise ModelConfigError(f"{where}: no 'model_type' field; is this a Hugging Face config.json?")
    reader = _READERS.get(model_type)
    if reader is None:
        raise ModelConfigError(
            f"{where}: model_type '{model_type}' is not supported yet; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    fields = reader(_Reader(config, where))
    return ModelSpec(id=id, name=name or id, notes=tuple(notes), **fields, **extra)
