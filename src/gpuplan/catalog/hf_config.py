"""Read a Hugging Face ``config.json`` (a dict) into a :class:`~gpuplan.spec.ModelSpec`.

Each supported ``model_type`` maps its field names and the defaults of its transformers config class
onto the family-agnostic spec. The mapping is checked in the test suite: for every built-in model
and every fixture config, the parameter count derived from the spec equals what transformers builds
for causal LM on the meta device. This module never imports transformers and never runs remote code.

A config is input, not trusted: every field the reader uses is checked before it becomes a number
(sizes are finite positive integers below a bound, flags are JSON booleans, a token is routed to no
more experts than exist, KV heads divide the query heads), and a field of an unexpected shape (a list
where a number belongs, a string for a dict...) is a :class:`~gpuplan.errors.ModelConfigError` that
names the config and the field, never a traceback and never a silently wrong count.
"""

from __future__ import annotations

import builtins
import json
import math
import reprlib
from collections.abc import Callable
from typing import Any

from ..errors import GpuplanError, ModelConfigError
from ..spec.model import MLA, ModelSpec, MoE

Config = dict[str, Any]

#: Largest model gpuplan plans, in parameters (a thousand times the largest published dense model);
#: a config or a bare count above it is a typo, and the arithmetic on it would be meaningless.
MAX_PARAMS = 10**15  # messages say 1e15; keep them in step

#: Largest value of any size field (hidden size, vocabulary, context...), and of the layer count
#: (the reader walks the layers one by one for sliding-window and MoE patterns).
_MAX_SIZE = 2**40
_MAX_LAYERS = 100_000

_show = reprlib.Repr()
_show.maxstring = _show.maxother = 40
_show.maxlist = _show.maxdict = 4
_show.maxlevel = 2


def _shown(value: Any) -> str:
    """A short, one-line rendering of a config value for an error message."""
    return _show.repr(value)


def _one_line(text: object, limit: int = 160) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _type_name(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    return names.get(type(value), type(value).__name__)


class _Reader:
    """Typed access to one config dict, with errors that name the field.

    ``key`` is the field read last, so an error the checks did not foresee can still name it.
    """

    def __init__(self, cfg: Config, where: str):
        self.cfg = cfg
        self.where = where
        self.key: str | None = None

    def _fail(self, key: str, what: str) -> ModelConfigError:
        return ModelConfigError(f"{self.where}: field '{key}' {what}")

    def _first(self, keys: tuple[str, ...]) -> tuple[str, Any]:
        """(the first of ``keys`` set to something other than null, its value); (keys[0], None) if none."""
        for k in keys:
            if self.cfg.get(k) is not None:
                self.key = k
                return k, self.cfg[k]
        self.key = keys[0]
        return keys[0], None

    def has(self, *keys: str) -> bool:
        return any(self.cfg.get(k) is not None for k in keys)

    def raw(self, *keys: str, default: Any = None) -> Any:
        _key, value = self._first(keys)
        return default if value is None else value

    def int(self, *keys: str, default: int | None = None, minimum: int = 1, maximum: int = _MAX_SIZE) -> int:
        key, value = self._first(keys)
        if value is None:
            if default is None:
                raise ModelConfigError(f"{self.where}: missing field '{keys[0]}' (an integer)")
            return default
        return self._check_int(key, value, minimum, maximum)

    # (below the method `int`, the type is spelled builtins.int)
    def opt_int(self, *keys: str, minimum: builtins.int = 1, maximum: builtins.int = _MAX_SIZE) -> builtins.int | None:
        """An integer field that may be absent or null (None then)."""
        key, value = self._first(keys)
        return None if value is None else self._check_int(key, value, minimum, maximum)

    def _check_int(self, key: str, value: Any, minimum: builtins.int, maximum: builtins.int) -> builtins.int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._fail(key, f"must be an integer, got {_type_name(value)} {_shown(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise self._fail(key, f"must be a finite integer, got {value}")
        if isinstance(value, float) and not value.is_integer():
            raise self._fail(key, f"must be an integer, got {value}")
        if value < minimum:
            raise self._fail(key, f"must be >= {minimum}, got {_shown(value)}")
        if value > maximum:
            raise self._fail(key, f"must be <= {maximum:,}, got {_shown(value)}")
        return int(value)

    def layers(self, *keys: str) -> builtins.int:
        return self.int(*keys, maximum=_MAX_LAYERS)

    def bool(self, key: str, default: bool) -> bool:
        self.key = key
        value = self.cfg.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._fail(key, f"must be true or false, got {_shown(value)}")
        return value

    def float(self, key: str, default: float, minimum: float = -math.inf, maximum: float = math.inf) -> float:
        self.key = key
        value = self.cfg.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._fail(key, f"must be a number, got {_type_name(value)} {_shown(value)}")
        if not math.isfinite(value):
            raise self._fail(key, f"must be a finite number, got {value}")
        if not minimum <= value <= maximum:
            raise self._fail(key, f"must be between {minimum:g} and {maximum:g}, got {value:g}")
        return float(value)

    def int_list(self, key: str, minimum: builtins.int = 0) -> list[builtins.int]:
        """A list of integers (layer indices); absent or null is an empty list."""
        self.key = key
        value = self.cfg.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._fail(key, f"must be a list of integers, got {_type_name(value)} {_shown(value)}")
        return [self._check_int(f"{key}[{i}]", v, minimum, _MAX_SIZE) for i, v in enumerate(value)]

    def str_list(self, key: str) -> list[str] | None:
        """A list of strings (per-layer kinds); None when absent or null."""
        self.key = key
        value = self.cfg.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._fail(key, f"must be a list of strings, got {_shown(value)}")
        return value


#: Families whose config class has a fixed head_dim default instead of hidden_size / heads.
_HEAD_DIM_DEFAULT = {
    "gemma": 256,
    "gemma2": 256,
    "gemma3_text": 256,
    "qwen3": 128,
    # (Qwen3-MoE's config class has no head_dim field in transformers 5: without one it is hidden / heads)
    "gpt_oss": 64,
    "llama4_text": 128,
    "glm": 128,
    "glm4": 128,
    "ernie4_5": 128,
}

#: Families whose config class defaults num_key_value_heads to a fixed number instead of the query heads.
_KV_HEADS_DEFAULT = {
    "gpt_oss": 8,
    "llama4_text": 8,
    "phimoe": 8,
    "starcoder2": 2,
    "glm": 2,
    "glm4": 2,
    "glm4_moe": 8,
    "ernie4_5": 2,
    "ernie4_5_moe": 4,
}


def _heads(
    r: _Reader,
    hidden: int,
    heads_key: str = "num_attention_heads",
    head_dim_default: int | None = None,
    kv_default: int | None = None,
) -> tuple[int, int, int]:
    heads = r.int(heads_key)
    kv = r.int("num_key_value_heads", default=kv_default or heads)
    if r.has("head_dim"):
        head_dim = r.int("head_dim")
    else:
        head_dim = head_dim_default or hidden // heads
    if not r.has("head_dim") and head_dim_default is None and hidden % heads:
        raise ModelConfigError(f"{r.where}: hidden_size {hidden} is not divisible by {heads_key} {heads}")
    _check_kv(r, heads, kv, heads_key, "num_key_value_heads")
    return heads, kv, head_dim


def _check_kv(r: _Reader, heads: int, kv: int, heads_key: str, kv_key: str) -> None:
    """Grouped-query attention shares each KV head among heads / kv query heads: kv must divide heads."""
    if heads % kv:
        raise ModelConfigError(f"{r.where}: {heads_key} {heads} is not a multiple of {kv_key} {kv}")


def _check_divisible(r: _Reader, hidden: int, heads: int, hidden_key: str, heads_key: str) -> None:
    """Families that derive the head width as hidden // heads need hidden to split evenly."""
    if hidden % heads:
        raise ModelConfigError(f"{r.where}: {hidden_key} {hidden} is not divisible by {heads_key} {heads}")


def _sliding(
    r: _Reader,
    layers: int,
    context: int,
    pattern: Callable[[int], bool] | None = None,
    enabled: bool = True,
    default: int | None = None,
) -> tuple[int | None, int]:
    """(window, number of layers that use it); (None, 0) where no layer is windowed below the context.

    ``default``: the config class's window when the field is absent (gpt-oss: 128); null or 0 is no window."""
    if not enabled:
        return None, 0
    if default is not None and "sliding_window" not in r.cfg:
        window: int | None = default
    else:
        window = r.opt_int("sliding_window", minimum=0)
    if not window or window >= context:
        return None, 0
    types = r.str_list("layer_types")
    if types is not None and len(types) == layers:
        n = sum(1 for t in types if t == "sliding_attention")
    elif pattern is not None:
        n = sum(1 for i in range(layers) if pattern(i))
    else:
        n = layers
    return (window, n) if n else (None, 0)


def _common(
    r: _Reader,
    model_type: str,
    tie_default: bool,
    context_keys: tuple[str, ...] = ("max_position_embeddings",),
    context_default: int | None = None,
) -> dict[str, Any]:
    hidden = r.int("hidden_size")
    heads, kv, head_dim = _heads(
        r, hidden, head_dim_default=_HEAD_DIM_DEFAULT.get(model_type), kv_default=_KV_HEADS_DEFAULT.get(model_type)
    )
    return dict(
        model_type=model_type,
        vocab_size=r.int("vocab_size"),
        hidden_size=hidden,
        layers=r.layers("num_hidden_layers"),
        attention_heads=heads,
        kv_heads=kv,
        head_dim=head_dim,
        context_length=r.int(*context_keys, default=context_default),
        tie_embeddings=r.bool("tie_word_embeddings", tie_default),
    )


#: Families whose transformers config class ties input and output embeddings unless told otherwise.
_TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3_text", "cohere", "cohere2", "starcoder2", "ernie4_5", "ernie4_5_moe")


def _llama_like(r: _Reader, model_type: str) -> dict[str, Any]:
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
        d["rotary_fraction"] = _rope_float(r, "partial_rotary_factor", 1.0)
    if model_type in ("glm", "glm4", "glm4_moe"):
        # q/k/v carry a bias with attention_bias (the output projection never does); half-width rotary
        d.update(qkv_bias=r.bool("attention_bias", model_type != "glm4_moe"), o_bias=False)
        d["rotary_fraction"] = _rope_float(r, "partial_rotary_factor", 0.5)
        if model_type == "glm4":
            d["norms_per_layer"] = 4  # input, post-attention, post-self-attention, post-MLP
        if model_type == "glm4_moe" and r.bool("use_qk_norm", False):
            d["qk_norm"] = "head"
    if model_type == "exaone4":
        d.update(norms_per_layer=2, qk_norm="head")  # post-attention and post-feedforward norms only
    if model_type in ("ernie4_5", "ernie4_5_moe"):
        bias = r.bool("use_bias", False)
        d.update(qkv_bias=bias, o_bias=bias, mlp_bias=bias, lm_head_bias=bias and model_type == "ernie4_5_moe")
    if model_type == "internlm2":
        bias = r.bool("bias", True)  # InternLM2Config's default; the published configs set it false
        d.update(qkv_bias=bias, o_bias=bias, mlp_bias=False)
    if model_type == "phimoe":
        d.update(norm="layernorm", lm_head_bias=r.bool("lm_head_bias", False))
    if model_type in ("cohere", "cohere2"):
        # one LayerNorm (weight only) feeds attention and MLP in parallel; Cohere's optional q/k norms are
        # per head and per head index (weights heads x head_dim)
        d.update(norm="layernorm-nobias", norms_per_layer=1, parallel_attention=True)
        if model_type == "cohere" and r.bool("use_qk_norm", False):
            d["qk_norm"] = "full"
    layers, ctx = d["layers"], d["context_length"]
    if model_type == "gemma2":
        d["sliding_window"], d["sliding_window_layers"] = _sliding(r, layers, ctx, lambda i: i % 2 == 0)
    elif model_type == "gemma3_text":
        period = r.int("sliding_window_pattern", default=6)
        d["sliding_window"], d["sliding_window_layers"] = _sliding(r, layers, ctx, lambda i: (i + 1) % period != 0)
    elif model_type in ("cohere2", "exaone4"):
        d["sliding_window"], d["sliding_window_layers"] = _sliding(r, layers, ctx, _window_pattern(r), default=4096)
    elif model_type in ("cohere", "glm", "glm4", "glm4_moe", "ernie4_5", "ernie4_5_moe", "internlm2", "granite"):
        d["sliding_window"], d["sliding_window_layers"] = None, 0  # full attention in every layer
    elif model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        start = r.int("max_window_layers", default=layers, minimum=0)
        d["sliding_window"], d["sliding_window_layers"] = _sliding(
            r, layers, ctx, lambda i: i >= start, enabled=r.bool("use_sliding_window", False)
        )
    else:
        d["sliding_window"], d["sliding_window_layers"] = _sliding(r, layers, ctx)
    return d


def _rope_float(r: _Reader, key: str, default: float) -> float:
    """A rotary setting written at the top level (older configs) or inside ``rope_parameters`` (transformers 5)."""
    if r.cfg.get(key) is not None:
        return r.float(key, default, 0.0, 1.0)
    rope = r.cfg.get("rope_parameters")
    if isinstance(rope, dict) and rope.get(key) is not None:
        return _Reader(rope, f"{r.where} rope_parameters").float(key, default, 0.0, 1.0)
    return default


def _window_pattern(r: _Reader) -> Callable[[int], bool]:
    """Which layers slide, from ``sliding_window_pattern`` (used when a config has no ``layer_types``): an
    integer n (every n-th layer full, the others windowed; 4 by default) or EXAONE 4's string of L (local)
    and G (global), repeated over the layers."""
    raw = r.cfg.get("sliding_window_pattern")
    if isinstance(raw, str):
        r.key = "sliding_window_pattern"
        if not raw or set(raw.upper()) - {"L", "G"}:
            raise r._fail("sliding_window_pattern", f"must be an integer or a string of L and G, got {_shown(raw)}")
        text = raw.upper()
        return lambda i: text[i % len(text)] == "L"
    period = r.int("sliding_window_pattern", default=4)
    return lambda i: (i + 1) % period != 0


def _moe_layer_count(r: _Reader, layers: int, experts: int) -> int:
    """Qwen-MoE layer rule: MoE where not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0."""
    step = r.int("decoder_sparse_step", default=1)
    only_mlp = set(r.int_list("mlp_only_layers"))
    return sum(1 for i in range(layers) if i not in only_mlp and experts > 0 and (i + 1) % step == 0)


def _experts(r: _Reader, *keys: str, minimum: int = 1) -> tuple[int, str]:
    """(routed experts per MoE layer, the key it was read from): the first of ``keys`` that is set.

    transformers 5 writes some families' expert count under a new name (Qwen3-MoE's ``num_experts``
    is an alias of ``num_local_experts``), so every reader accepts each spelling its config class does.
    """
    n = r.int(*keys, minimum=minimum) if minimum else r.int(*keys, default=0, minimum=0)
    return n, r.key or keys[0]


def _experts_per_token(
    r: _Reader,
    experts: int,
    experts_key: str,
    keys: tuple[str, ...] = ("num_experts_per_tok",),
    default: int | None = None,
) -> int:
    """num_experts_per_tok, which can't exceed the experts there are (the active count would go negative)."""
    k = r.int(*keys, default=default)
    key = r.key or keys[0]
    if k > experts:
        raise ModelConfigError(
            f"{r.where}: field '{key}' ({k}) is more than {experts_key} ({experts}); "
            "a token can't be routed to more experts than the layer has"
        )
    return k


def _read_mixtral(r: _Reader, model_type: str = "mixtral") -> dict[str, Any]:
    """Mixtral and the families with its every-layer MoE block: PhiMoE, GraniteMoE (+ shared MLP)."""
    d = _llama_like(r, model_type)
    experts, key = _experts(r, "num_local_experts", "num_experts")
    shared = r.int("shared_intermediate_size", default=0, minimum=0) if model_type == "granitemoeshared" else 0
    d["moe"] = MoE(
        experts=experts,
        experts_per_token=_experts_per_token(r, experts, key, default=2),
        expert_ffn_size=d["ffn_size"],
        layers=d["layers"],
        shared_ffn_size=shared,
    )
    return d


def _read_qwen_moe(r: _Reader, model_type: str) -> dict[str, Any]:
    d = _llama_like(r, model_type)
    # transformers 5 writes Qwen3-MoE's expert count as num_local_experts (num_experts is its alias)
    experts, key = _experts(r, "num_experts", "num_local_experts")
    shared = r.int("shared_expert_intermediate_size", default=0, minimum=0) if model_type == "qwen2_moe" else 0
    d["moe"] = MoE(
        experts=experts,
        experts_per_token=_experts_per_token(r, experts, key),
        expert_ffn_size=r.int("moe_intermediate_size"),
        layers=_moe_layer_count(r, d["layers"], experts),
        shared_ffn_size=shared,
        shared_expert_gate=shared > 0,
    )
    return d


def _read_deepseek(r: _Reader, model_type: str) -> dict[str, Any]:
    d = _llama_like(r, model_type)
    layers = d["layers"]
    experts, key = _experts(r, "n_routed_experts", "num_local_experts", "num_experts", minimum=0)
    first_dense = r.int("first_k_dense_replace", default=0, minimum=0)
    freq = r.int("moe_layer_freq", default=1)
    moe_layers = sum(1 for i in range(layers) if experts and i >= first_dense and i % freq == 0)
    if moe_layers:
        expert_ffn = r.int("moe_intermediate_size")
        d["moe"] = MoE(
            experts=experts,
            experts_per_token=_experts_per_token(r, experts, key),
            expert_ffn_size=expert_ffn,
            layers=moe_layers,
            shared_ffn_size=expert_ffn * r.int("n_shared_experts", default=0, minimum=0),
        )
    d["mla"] = MLA(
        q_lora_rank=r.opt_int("q_lora_rank"),
        kv_lora_rank=r.int("kv_lora_rank"),
        qk_nope_head_dim=r.int("qk_nope_head_dim"),
        qk_rope_head_dim=r.int("qk_rope_head_dim"),
        v_head_dim=r.int("v_head_dim"),
    )
    d["kv_heads"] = d["attention_heads"]  # MLA: every head has its own (decompressed) keys and values
    d["head_dim"] = d["mla"].qk_nope_head_dim + d["mla"].qk_rope_head_dim
    return d


def _read_gpt_oss(r: _Reader) -> dict[str, Any]:
    """gpt-oss: every layer MoE (biased router, biased experts), attention with biases and a learned sink
    logit per head, sliding-window (128) and full attention alternating (layer_types, else even layers)."""
    d = _common(r, "gpt_oss", tie_default=False, context_default=131072)
    bias = r.bool("attention_bias", True)
    experts, key = _experts(r, "num_local_experts", "num_experts")
    layers, ctx = d["layers"], d["context_length"]
    d.update(ffn_size=r.int("intermediate_size"), mlp_gated=True, norm="rmsnorm", qkv_bias=bias, o_bias=bias)
    d["attention_sinks"] = True
    d["sliding_window"], d["sliding_window_layers"] = _sliding(r, layers, ctx, lambda i: i % 2 == 0, default=128)
    d["moe"] = MoE(
        experts=experts,
        # the Hub's configs also carry the original name, experts_per_token
        experts_per_token=_experts_per_token(r, experts, key, ("num_experts_per_tok", "experts_per_token"), 4),
        expert_ffn_size=d["ffn_size"],
        layers=layers,
        router_bias=True,
        expert_bias=True,
    )
    return d


def _read_llama4_text(r: _Reader) -> dict[str, Any]:
    """Llama 4's language model: MoE layers (routed experts + one shared expert of the same width) every
    ``interleave_moe_layer_step``-th layer or as listed in ``moe_layers``, dense layers of width
    ``intermediate_size_mlp``; chunked attention (``attention_chunk_size``) in the RoPE layers, full
    attention (NoPE) every ``no_rope_layer_interval``-th layer. Its q/k norm is an L2 norm without weights."""
    d = _common(r, "llama4_text", tie_default=False, context_default=131072)
    layers, ctx = d["layers"], d["context_length"]
    expert_ffn = r.int("intermediate_size")
    d.update(ffn_size=r.int("intermediate_size_mlp", default=16384), mlp_gated=True, norm="rmsnorm")
    bias = r.bool("attention_bias", False)
    d.update(qkv_bias=bias, o_bias=bias)
    experts, key = _experts(r, "num_local_experts", "num_experts")
    if r.cfg.get("moe_layers") is not None:
        moe_layers = len({i for i in r.int_list("moe_layers") if i < layers})
    else:
        step = r.int("interleave_moe_layer_step", default=1)
        moe_layers = len(range(step - 1, layers, step))
    if moe_layers:
        d["moe"] = MoE(
            experts=experts,
            experts_per_token=_experts_per_token(r, experts, key, default=1),
            expert_ffn_size=expert_ffn,
            layers=moe_layers,
            shared_ffn_size=expert_ffn,
        )
    chunk = r.opt_int("attention_chunk_size") if "attention_chunk_size" in r.cfg else 8192
    types = r.str_list("layer_types")
    if types is not None and len(types) == layers:
        chunked = sum(1 for t in types if t == "chunked_attention")
    elif r.cfg.get("no_rope_layers"):
        chunked = sum(1 for v in r.int_list("no_rope_layers") if v)  # 1: a RoPE layer, chunked
    else:
        interval = r.int("no_rope_layer_interval", default=4)
        chunked = sum(1 for i in range(layers) if (i + 1) % interval != 0)
    if chunk and chunk < ctx and chunked:
        d.update(attention_chunk=chunk, chunked_layers=min(chunked, layers))
    return d


def _read_glm4_moe(r: _Reader) -> dict[str, Any]:
    """GLM-4.5: dense MLP in the first ``first_k_dense_replace`` layers, then routed + shared experts."""
    d = _llama_like(r, "glm4_moe")
    layers = d["layers"]
    experts, key = _experts(r, "n_routed_experts", "num_local_experts")
    first_dense = min(r.int("first_k_dense_replace", default=1, minimum=0), layers)
    if layers - first_dense:
        expert_ffn = r.int("moe_intermediate_size")
        d["moe"] = MoE(
            experts=experts,
            experts_per_token=_experts_per_token(r, experts, key, default=8),
            expert_ffn_size=expert_ffn,
            layers=layers - first_dense,
            shared_ffn_size=expert_ffn * r.int("n_shared_experts", default=1, minimum=0),
        )
    return d


def _read_ernie_moe(r: _Reader) -> dict[str, Any]:
    """ERNIE 4.5 MoE: MoE where (i + 1) % moe_layer_interval == 0 and start <= i <= end; shared experts and
    (with use_bias) every dense projection biased; a learned score-correction bias per expert."""
    d = _llama_like(r, "ernie4_5_moe")
    layers = d["layers"]
    experts, key = _experts(r, "moe_num_experts", "num_experts")
    start = r.int("moe_layer_start_index", default=1, minimum=0)
    end = r.int("moe_layer_end_index", default=layers - 1, minimum=0)
    interval = r.int("moe_layer_interval", default=1)
    moe_layers = sum(1 for i in range(layers) if (i + 1) % interval == 0 and start <= i <= end)
    if moe_layers:
        expert_ffn = r.int("moe_intermediate_size")
        shared = expert_ffn * r.int("moe_num_shared_experts", default=0, minimum=0)
        d["moe"] = MoE(
            experts=experts,
            experts_per_token=_experts_per_token(r, experts, key, ("moe_k", "num_experts_per_tok")),
            expert_ffn_size=expert_ffn,
            layers=moe_layers,
            shared_ffn_size=shared,
            shared_expert_bias=d["mlp_bias"],
            router_score_bias=True,
        )
    return d


def _read_dbrx(r: _Reader) -> dict[str, Any]:
    """DBRX: fused Wqkv without biases, weight-only LayerNorms, every layer MoE (gated experts); the
    attention and FFN settings live in the nested ``attn_config`` and ``ffn_config``."""
    hidden = r.int("d_model", "hidden_size")
    heads = r.int("n_heads", "num_attention_heads")
    _check_divisible(r, hidden, heads, "d_model", "n_heads")
    attn, ffn = (_sub_reader(r, key) for key in ("attn_config", "ffn_config"))
    kv = attn.int("kv_n_heads", default=1)
    _check_kv(attn, heads, kv, "n_heads", "kv_n_heads")
    experts, key = _experts(ffn, "moe_num_experts")
    return dict(
        model_type="dbrx",
        vocab_size=r.int("vocab_size"),
        hidden_size=hidden,
        layers=r.layers("n_layers", "num_hidden_layers"),
        attention_heads=heads,
        kv_heads=kv,
        head_dim=hidden // heads,
        ffn_size=ffn.int("ffn_hidden_size", default=3584),
        context_length=r.int("max_seq_len", "max_position_embeddings", default=2048),
        tie_embeddings=r.bool("tie_word_embeddings", False),
        mlp_gated=True,
        norm="layernorm-nobias",
        moe=MoE(
            experts=experts,
            experts_per_token=_experts_per_token(ffn, experts, key, ("moe_top_k",), default=1),
            expert_ffn_size=ffn.int("ffn_hidden_size", default=3584),
            layers=r.layers("n_layers", "num_hidden_layers"),
        ),
    )


def _sub_reader(r: _Reader, key: str) -> _Reader:
    """A reader over a nested object (DBRX's attn_config); absent or null reads as empty (all defaults)."""
    value = r.cfg.get(key)
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise r._fail(key, f"must be an object, got {_type_name(value)} {_shown(value)}")
    return _Reader(value, f"{r.where} {key}")


def _read_gptj(r: _Reader) -> dict[str, Any]:
    """GPT-J: parallel attention and MLP after one LayerNorm, bias-free q/k/v/out, biased MLP and LM head."""
    hidden = r.int("n_embd", "hidden_size")
    heads = r.int("n_head", "num_attention_heads")
    _check_divisible(r, hidden, heads, "n_embd", "n_head")
    head_dim = hidden // heads
    rotary = r.opt_int("rotary_dim")
    return dict(
        model_type="gptj",
        vocab_size=r.int("vocab_size"),
        hidden_size=hidden,
        layers=r.layers("n_layer", "num_hidden_layers"),
        attention_heads=heads,
        kv_heads=heads,
        head_dim=head_dim,
        ffn_size=r.int("n_inner", default=4 * hidden),
        context_length=r.int("n_positions", "max_position_embeddings", default=2048),
        tie_embeddings=r.bool("tie_word_embeddings", False),
        mlp_gated=False,
        norm="layernorm",
        norms_per_layer=1,
        mlp_bias=True,
        lm_head_bias=True,
        parallel_attention=True,
        rotary_fraction=min(1.0, rotary / head_dim) if rotary else 1.0,
    )


def _read_gpt_bigcode(r: _Reader) -> dict[str, Any]:
    """GPT-BigCode (StarCoder, SantaCoder): GPT-2's layout with multi-query attention (one K/V head)."""
    d = _read_gpt2(r)
    d.update(model_type="gpt_bigcode", kv_heads=1 if r.bool("multi_query", True) else d["attention_heads"])
    return d


def _read_starcoder2(r: _Reader) -> dict[str, Any]:
    """StarCoder2: GQA with rotary, LayerNorm with bias, a plain (ungated) MLP, biases where use_bias."""
    d = _common(r, "starcoder2", tie_default=True, context_default=4096)
    bias = r.bool("use_bias", True)
    d.update(
        ffn_size=r.int("intermediate_size"),
        mlp_gated=False,
        norm="layernorm",
        qkv_bias=bias,
        o_bias=bias,
        mlp_bias=bias,
    )
    d["sliding_window"], d["sliding_window_layers"] = _sliding(r, d["layers"], d["context_length"])
    return d


def _read_grok1(r: _Reader) -> dict[str, Any]:
    """Grok-1 (xAI; no transformers class, read from the community Hugging Face port's config): GQA, every
    layer MoE with gated experts, RMSNorm before and after both attention and the MoE block, tied embedding."""
    d = _common(r, "grok-1", tie_default=True, context_default=8192)
    experts, key = _experts(r, "num_experts", "num_local_experts")
    d.update(ffn_size=r.int("intermediate_size"), mlp_gated=True, norm="rmsnorm", norms_per_layer=4)
    d["moe"] = MoE(
        experts=experts,
        experts_per_token=_experts_per_token(r, experts, key, default=2),
        expert_ffn_size=d["ffn_size"],
        layers=d["layers"],
    )
    return d


def _read_gpt2(r: _Reader) -> dict[str, Any]:
    hidden = r.int("n_embd", "hidden_size")
    heads = r.int("n_head", "num_attention_heads")
    _check_divisible(r, hidden, heads, "n_embd", "n_head")
    positions = r.int("n_positions", "max_position_embeddings", default=1024)
    return dict(
        model_type="gpt2",
        vocab_size=r.int("vocab_size"),
        hidden_size=hidden,
        layers=r.layers("n_layer", "num_hidden_layers"),
        attention_heads=heads,
        kv_heads=heads,
        head_dim=hidden // heads,
        ffn_size=r.int("n_inner", default=4 * hidden),
        context_length=positions,
        learned_positions=positions,
        tie_embeddings=r.bool("tie_word_embeddings", True),
        mlp_gated=False,
        norm="layernorm",
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
    )


def _read_gpt_neox(r: _Reader) -> dict[str, Any]:
    d = _common(r, "gpt_neox", tie_default=False)
    bias = r.bool("attention_bias", True)
    d.update(
        ffn_size=r.int("intermediate_size"),
        mlp_gated=False,
        norm="layernorm",
        qkv_bias=bias,
        o_bias=bias,
        mlp_bias=True,
        parallel_attention=r.bool("use_parallel_residual", True),
        rotary_fraction=r.float("rotary_pct", 0.25, 0.0, 1.0),
    )
    return d


def _read_opt(r: _Reader) -> dict[str, Any]:
    d = _common(r, "opt", tie_default=True)
    bias = r.bool("enable_bias", True)
    affine = r.bool("layer_norm_elementwise_affine", True)
    embed_dim = r.int("word_embed_proj_dim", default=d["hidden_size"])
    final = r.bool("do_layer_norm_before", True) and not r.bool("_remove_final_layer_norm", False)
    d.update(
        ffn_size=r.int("ffn_dim"),
        mlp_gated=False,
        norm="layernorm" if affine else "nonparametric",
        qkv_bias=bias,
        o_bias=bias,
        mlp_bias=bias,
        final_norm=final,
        learned_positions=d["context_length"] + 2,  # OPT offsets learned positions by 2
        embedding_dim=embed_dim if embed_dim != d["hidden_size"] else None,
    )
    return d


def _read_bloom(r: _Reader) -> dict[str, Any]:
    hidden = r.int("hidden_size", "n_embed")
    heads = r.int("n_head", "num_attention_heads")
    _check_divisible(r, hidden, heads, "hidden_size", "n_head")
    return dict(
        model_type="bloom",
        vocab_size=r.int("vocab_size"),
        hidden_size=hidden,
        layers=r.layers("n_layer", "num_hidden_layers"),
        attention_heads=heads,
        kv_heads=heads,
        head_dim=hidden // heads,
        ffn_size=4 * hidden,
        context_length=r.int("seq_length", default=2048),
        tie_embeddings=r.bool("tie_word_embeddings", True),
        mlp_gated=False,
        norm="layernorm",
        embedding_norm=True,
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
    )


def _read_falcon(r: _Reader) -> dict[str, Any]:
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads")
    _check_divisible(r, hidden, heads, "hidden_size", "num_attention_heads")
    new_arch = r.bool("new_decoder_architecture", False)
    if new_arch:
        kv = r.int("num_kv_heads", default=heads)
        _check_kv(r, heads, kv, "num_attention_heads", "num_kv_heads")
    elif r.bool("multi_query", True):
        kv = 1
    else:
        kv = heads
    parallel = r.bool("parallel_attn", True)
    n_ln = r.opt_int("num_ln_in_parallel_attn")
    if new_arch and (n_ln is None or n_ln == 2):
        norms = 2  # ln_attn and ln_mlp
    else:
        norms = 1 if parallel else 2
    bias = r.bool("bias", False)
    return dict(
        model_type="falcon",
        vocab_size=r.int("vocab_size"),
        hidden_size=hidden,
        layers=r.layers("num_hidden_layers"),
        attention_heads=heads,
        kv_heads=kv,
        head_dim=hidden // heads,
        ffn_size=r.int("ffn_hidden_size", default=4 * hidden),
        context_length=r.int("max_position_embeddings", default=2048),
        tie_embeddings=r.bool("tie_word_embeddings", True),
        mlp_gated=False,
        norm="layernorm",
        norms_per_layer=norms,
        qkv_bias=bias,
        o_bias=bias,
        mlp_bias=bias,
        parallel_attention=parallel,
    )


def _read_mpt(r: _Reader) -> dict[str, Any]:
    hidden = r.int("d_model", "hidden_size")
    heads = r.int("n_heads", "num_attention_heads")
    _check_divisible(r, hidden, heads, "d_model", "n_heads")
    # transformers' MPT (the one the Hub's MPT checkpoints load into) has no biases and a 4x MLP;
    # configs that ask for anything else describe weights it cannot hold.
    if not r.bool("no_bias", True) or r.int("expansion_ratio", default=4) != 4:
        raise ModelConfigError(
            f"{r.where}: MPT with no_bias=false or expansion_ratio != 4 is not supported "
            "(transformers' MPT has neither); set no_bias true and expansion_ratio 4"
        )
    return dict(
        model_type="mpt",
        vocab_size=r.int("vocab_size"),
        hidden_size=hidden,
        layers=r.layers("n_layers", "num_hidden_layers"),
        attention_heads=heads,
        kv_heads=heads,
        head_dim=hidden // heads,
        ffn_size=4 * hidden,
        context_length=r.int("max_seq_len", default=2048),
        tie_embeddings=True,
        mlp_gated=False,
        norm="layernorm-nobias",
    )


def _read_phi(r: _Reader) -> dict[str, Any]:
    d = _common(r, "phi", tie_default=False)
    d.update(
        ffn_size=r.int("intermediate_size"),
        mlp_gated=False,
        norm="layernorm",
        norms_per_layer=1,
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        lm_head_bias=True,
        parallel_attention=True,
        qk_norm="head" if r.bool("qk_layernorm", False) else "none",
        rotary_fraction=r.float("partial_rotary_factor", 0.5, 0.0, 1.0),
    )
    return d


def _vision_qwen2_vl(v: _Reader, text_hidden: int) -> int:
    """Qwen2-VL's ViT: a bias-free 3D patch convolution, ``depth`` pre-LayerNorm blocks (fused biased qkv, a
    biased output projection, a plain MLP of ``mlp_ratio`` x width), then the patch merger (LayerNorm, two
    linears over spatial_merge_size² merged patches, the last one out to ``hidden_size``)."""
    e, depth = v.int("embed_dim", default=1280), v.layers("depth", "num_hidden_layers")
    ffn = e * v.int("mlp_ratio", default=4)
    patch = (
        e
        * v.int("in_channels", "in_chans", default=3)
        * v.int("temporal_patch_size", default=2)
        * v.int("patch_size", default=14) ** 2
    )
    block = 2 * 2 * e + (3 * e * e + 3 * e) + (e * e + e) + (e * ffn + ffn) + (ffn * e + e)
    m = e * v.int("spatial_merge_size", default=2) ** 2
    out = v.int("hidden_size", default=text_hidden)
    return patch + depth * block + 2 * e + (m * m + m) + (m * out + out)


def _vision_qwen2_5_vl(v: _Reader, text_hidden: int) -> int:
    """Qwen2.5-VL's ViT: as Qwen2-VL's but with RMSNorm and a gated (SwiGLU) MLP with biases; the merger's
    output width is ``out_hidden_size``."""
    e, depth, ffn = v.int("hidden_size"), v.layers("depth", "num_hidden_layers"), v.int("intermediate_size")
    patch = (
        e
        * v.int("in_channels", "in_chans", default=3)
        * v.int("temporal_patch_size", default=2)
        * v.int("patch_size", default=14) ** 2
    )
    block = 2 * e + (3 * e * e + 3 * e) + (e * e + e) + 2 * (e * ffn + ffn) + (ffn * e + e)
    m = e * v.int("spatial_merge_size", default=2) ** 2
    out = v.int("out_hidden_size", default=text_hidden)
    return patch + depth * block + e + (m * m + m) + (m * out + out)


def _vision_clip(v: _Reader) -> int:
    """A CLIP vision transformer (LLaVA's tower): class token, bias-free patch convolution, learned positions
    for (image_size / patch_size)² + 1 tokens, LayerNorm before and after, biased attention and MLP."""
    e, ffn, layers = v.int("hidden_size"), v.int("intermediate_size"), v.layers("num_hidden_layers")
    patch, size = v.int("patch_size", default=32), v.int("image_size", default=224)
    positions = (size // patch) ** 2 + 1
    embeddings = e + e * v.int("num_channels", default=3) * patch * patch + positions * e
    block = 4 * (e * e + e) + (e * ffn + ffn) + (ffn * e + e) + 2 * 2 * e
    return embeddings + 2 * e + layers * block + 2 * e


def _vision_llava(r: _Reader, v: _Reader, text_hidden: int) -> int:
    """LLaVA: a CLIP vision tower plus the projector (two biased linears, the first over the concatenated
    ``vision_feature_layer`` outputs)."""
    kind = v.cfg.get("model_type", "clip_vision_model")
    if kind != "clip_vision_model":
        raise ModelConfigError(
            f"{r.where}: a LLaVA config with a '{kind}' vision tower is not supported yet (only CLIP towers are "
            "counted); give its text_config alone to plan the language model"
        )
    e = v.int("hidden_size")
    feature = r.cfg.get("vision_feature_layer")
    n_features = len(feature) if isinstance(feature, list) else 1
    bias = r.bool("multimodal_projector_bias", True)
    return _vision_clip(v) + _linear(e * n_features, text_hidden, bias) + _linear(text_hidden, text_hidden, bias)


def _vision_llama4(r: _Reader, v: _Reader, text_hidden: int) -> int:
    """Llama 4's vision encoder: class token, learned positions, a bias-free linear patch embedding, LayerNorm
    before and after, biased attention and MLP, the pixel-shuffle adapter (two bias-free linears), then the
    bias-free projector to the text width."""
    e, ffn, layers = v.int("hidden_size"), v.int("intermediate_size"), v.layers("num_hidden_layers")
    patch, size = v.int("patch_size"), v.int("image_size")
    channels = v.int("num_channels", default=3)
    positions = (size // patch) ** 2 + 1
    embeddings = e + positions * e + channels * patch * patch * e
    block = 4 * (e * e + e) + (e * ffn + ffn) + (ffn * e + e) + 2 * 2 * e
    p_in, p_out = v.int("projector_input_dim"), v.int("projector_output_dim")
    adapter = ffn * p_in + p_out * p_out
    projector = v.int("vision_output_dim") * text_hidden
    return embeddings + 2 * 2 * e + layers * block + adapter + projector


def _linear(d_in: int, d_out: int, bias: bool) -> int:
    return d_in * d_out + (d_out if bias else 0)


#: Vision-language configs whose text model is read and whose vision tower (and projector) is counted:
#: outer model_type -> (the text model's model_type when its config does not say, the vision counter).
_VISION_LANGUAGE: dict[str, tuple[str, Callable[[_Reader, _Reader, int], int]]] = {
    "qwen2_vl": ("qwen2", lambda r, v, h: _vision_qwen2_vl(v, h)),
    "qwen2_5_vl": ("qwen2", lambda r, v, h: _vision_qwen2_5_vl(v, h)),
    "llava": ("llama", _vision_llava),
    "llama4": ("llama4_text", _vision_llama4),
}

#: Text-model types transformers writes inside a vision-language config, read as the family they copy.
_TEXT_ALIASES = {"qwen2_vl_text": "qwen2", "qwen2_5_vl_text": "qwen2"}

#: Architectures gpuplan refuses, with what is missing: a count from the transformer formulas would be wrong.
_REFUSED = {
    "mamba": "Mamba is a state-space model: its selective-scan blocks (in/out projections, conv1d, x/dt "
    "projections, A and D) and the recurrent state that replaces the KV cache are not modeled",
    "mamba2": "Mamba-2 is a state-space model: its SSD blocks (in/out projections, conv1d, A, D, dt bias, "
    "gated norm) and the recurrent state that replaces the KV cache are not modeled",
    "jamba": "Jamba is a hybrid of Mamba and attention layers (with MoE): its Mamba layers' parameters and "
    "recurrent state are not modeled",
    "falcon_h1": "Falcon-H1 runs Mamba-2 heads beside attention in every layer: the Mamba-2 parameters and "
    "recurrent state are not modeled",
    "zamba2": "Zamba2 is a Mamba-2 backbone with shared attention blocks and LoRA adapters: the Mamba-2 "
    "layers, the shared-block reuse and the recurrent state are not modeled",
    "granitemoehybrid": "Granite 4.0 (granitemoehybrid) mixes Mamba-2 and attention layers: the Mamba-2 "
    "parameters and recurrent state are not modeled",
    "mllama": "Llama 3.2 Vision (mllama) interleaves gated cross-attention layers with its text layers and "
    "uses a two-stage vision encoder with tile embeddings: these are not modeled",
}


_READERS: dict[str, Callable[[_Reader], dict[str, Any]]] = {
    "gpt2": _read_gpt2,
    "gpt_neox": _read_gpt_neox,
    "opt": _read_opt,
    "bloom": _read_bloom,
    "falcon": _read_falcon,
    "mpt": _read_mpt,
    "phi": _read_phi,
    "mixtral": _read_mixtral,
    "phimoe": lambda r: _read_mixtral(r, "phimoe"),
    "granitemoe": lambda r: _read_mixtral(r, "granitemoe"),
    "granitemoeshared": lambda r: _read_mixtral(r, "granitemoeshared"),
    "gpt_oss": _read_gpt_oss,
    "llama4_text": _read_llama4_text,
    "glm4_moe": _read_glm4_moe,
    "ernie4_5_moe": _read_ernie_moe,
    "dbrx": _read_dbrx,
    "gptj": _read_gptj,
    "gpt_bigcode": _read_gpt_bigcode,
    "starcoder2": _read_starcoder2,
    "grok-1": _read_grok1,
    "qwen2_moe": lambda r: _read_qwen_moe(r, "qwen2_moe"),
    "qwen3_moe": lambda r: _read_qwen_moe(r, "qwen3_moe"),
    "deepseek_v2": lambda r: _read_deepseek(r, "deepseek_v2"),
    "deepseek_v3": lambda r: _read_deepseek(r, "deepseek_v3"),
}
for _mt in (
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi3",
    "olmo",
    "olmo2",
    "granite",
    "cohere",
    "cohere2",
    "glm",
    "glm4",
    "exaone4",
    "ernie4_5",
    "internlm2",
):
    _READERS[_mt] = (lambda mt: lambda r: _llama_like(r, mt))(_mt)

#: model_type values the reader understands.
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted({*_READERS, *_VISION_LANGUAGE}))


def spec_from_hf_config(
    config: Config,
    *,
    id: str,
    name: str | None = None,
    where: str | None = None,
    like: str | None = None,
    **extra: Any,
) -> ModelSpec:
    """Build a ModelSpec from a Hugging Face config dict.

    ``where`` names the config in error messages (a path or a catalog entry). Vision-language configs
    (Qwen2-VL, Qwen2.5-VL, LLaVA with a CLIP tower, Llama 4) are read through their text model with the
    vision tower and projector counted in ``vision_params``; other configs with a ``text_config`` (or those
    without a ``vision_config``) are read
    through their text model and a note says the rest was left out. ``like`` (``--like llama``) reads a
    ``model_type`` gpuplan does not know with the reader of a known one, and a note says so. State-space
    and hybrid models are refused with what is missing. Anything wrong with the config is a
    ModelConfigError naming ``where`` and the field.
    """
    where = where or id
    if not isinstance(config, dict):
        raise ModelConfigError(f"{where}: a model config must be a JSON object, got {_type_name(config)}")
    notes = list(extra.pop("notes", ()))
    if like is not None and like not in _READERS:
        raise ModelConfigError(
            f"--like '{like}' is not a model_type gpuplan reads; use one of: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    model_type = _model_type(config, where)
    if model_type in _REFUSED:
        raise ModelConfigError(f"{where}: model_type '{model_type}' is not supported: {_REFUSED[model_type]}")
    vision_params = 0
    text = config.get("text_config")
    if model_type in _VISION_LANGUAGE and config.get("vision_config") is not None:
        default_type, count_vision = _VISION_LANGUAGE[model_type]
        outer_reader = _Reader(config, where)
        if text is None:  # older Qwen2-VL configs keep the text model's fields at the top level
            text = {k: v for k, v in config.items() if k not in ("vision_config", "model_type")}
        elif not isinstance(text, dict):
            raise ModelConfigError(f"{where}: field 'text_config' must be an object, got {_type_name(text)}")
        text = dict(text)
        if "tie_word_embeddings" not in text and isinstance(config.get("tie_word_embeddings"), bool):
            text["tie_word_embeddings"] = config["tie_word_embeddings"]
        text_type = _TEXT_ALIASES.get(str(text.get("model_type")), text.get("model_type") or default_type)
        text["model_type"] = text_type
        text_reader = _Reader(text, f"{where} text_config")
        vision = _sub_reader(outer_reader, "vision_config")
        try:
            vision_params = count_vision(outer_reader, vision, text_reader.int("hidden_size"))
        except GpuplanError:
            raise
        except (TypeError, ValueError, OverflowError) as e:
            raise ModelConfigError(
                f"{where} vision_config: field '{vision.key}' can't be read ({type(e).__name__}: {_one_line(e)})"
            ) from e
        notes.append(
            f"read the text model of a '{model_type}' config; its vision tower and projector "
            f"({vision_params:,} parameters) are counted in the total, not in the active parameters"
        )
        where = f"{where} text_config"
        config, model_type = text, text_type
    elif text is not None and model_type not in _READERS:
        if not isinstance(text, dict):
            raise ModelConfigError(f"{where}: field 'text_config' must be an object, got {_type_name(text)}")
        outer, text = model_type, dict(text)
        if text.get("model_type") is None:
            text["model_type"] = "gemma3_text" if outer == "gemma3" else outer
        where = f"{where} text_config"
        notes.append(f"read the text model of a '{outer}' config; its vision/audio parts are not counted")
        config, model_type = text, _model_type(text, where)
        if model_type in _REFUSED:
            raise ModelConfigError(f"{where}: model_type '{model_type}' is not supported: {_REFUSED[model_type]}")
    if model_type == "gemma3":
        model_type = "gemma3_text"
    if not model_type:
        raise ModelConfigError(f"{where}: no 'model_type' field; is this a Hugging Face config.json?")
    reader = _READERS.get(model_type)
    if reader is None and like is not None:
        reader = _READERS[like]
        notes.append(
            f"model_type '{model_type}' is not one gpuplan knows; read as '{like}' (--like {like}): the counts "
            f"assume {like}'s layout, so check them against the checkpoint's size"
        )
    if reader is None:
        raise ModelConfigError(
            f"{where}: model_type '{model_type}' is not supported yet; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
            " (a config with Llama's keys can be read with --like llama)"
        )
    r = _Reader(config, where)
    try:
        fields = reader(r)
    except GpuplanError:
        raise
    except (TypeError, ValueError, OverflowError, RecursionError) as e:
        # A shape the checks above did not foresee; still the config's fault, and the field is known.
        raise ModelConfigError(
            f"{where}: field '{r.key}' can't be read ({type(e).__name__}: "
            f"{_one_line(e)}); check its type against a working config.json"
        ) from e
    if vision_params:
        fields["vision_params"] = vision_params
    spec = ModelSpec(id=id, name=name or id, notes=tuple(notes), **fields, **extra)
    _check_size(spec, where)
    return spec


def _model_type(config: Config, where: str) -> str | None:
    value = config.get("model_type")
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ModelConfigError(f"{where}: field 'model_type' must be a name like 'llama', got {_shown(value)}")
    return value


def _check_size(spec: ModelSpec, where: str) -> None:
    """Refuse a config whose sizes multiply out to more than MAX_PARAMS parameters (a typo, not a model).

    The count here is a rough upper bound from the main matrices (the catalog layer does not reach up to
    the estimators' exact count); it is within a small factor of the exact one, plenty for a sanity bound.
    """
    h, heads = spec.hidden_size, spec.attention_heads
    attention = h * spec.head_dim * 2 * (heads + spec.kv_heads)
    if spec.mla is not None:
        m = spec.mla
        q_rank = m.q_lora_rank or h
        attention = (
            h * q_rank
            + q_rank * heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
            + h * (m.kv_lora_rank + m.qk_rope_head_dim)
            + m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
            + heads * m.v_head_dim * h
        )
    total = 2 * spec.vocab_size * spec.token_embedding_dim + spec.layers * (attention + 3 * h * spec.ffn_size)
    if spec.moe is not None:
        total += spec.moe.layers * 3 * h * (spec.moe.experts * spec.moe.expert_ffn_size + spec.moe.shared_ffn_size)
    if total > MAX_PARAMS:
        raise ModelConfigError(
            f"{where}: the sizes describe about {total:.2g} parameters, more than the 1e15 "
            "gpuplan plans for; check hidden_size, num_hidden_layers, vocab_size and the FFN sizes"
        )


class _NonFinite:
    """Stands in for a NaN / Infinity token while parsing, so the walk afterwards can name its key."""

    def __init__(self, token: str):
        self.token = token


def _first_non_finite(value: Any) -> tuple[str, str] | None:
    """(dotted path, token) of the first NaN, Infinity or overflowing number in a parsed document."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, _NonFinite):
            return path, v.token
        if isinstance(v, float) and not math.isfinite(v):
            return path, "a number too large for a float"
        if isinstance(v, dict):
            stack.extend((f"{path}.{k}" if path else str(k), item) for k, item in reversed(list(v.items())))
        elif isinstance(v, list):
            stack.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(v))))
    return None


def load_config_json(data: str | bytes, where: str) -> Config:
    """Parse the text of a config.json strictly: standard JSON only (no NaN or Infinity, no number that
    overflows a float), an object at the top. Errors are ModelConfigError naming ``where`` and the key."""
    try:
        config = json.loads(data, parse_constant=_NonFinite)
    except RecursionError:
        raise ModelConfigError(f"{where}: not valid JSON: nested too deeply") from None
    except UnicodeDecodeError as e:
        raise ModelConfigError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except ValueError as e:  # JSONDecodeError, or an integer longer than Python converts
        why = "a number has thousands of digits" if "digits" in str(e) else _one_line(e)
        raise ModelConfigError(f"{where}: not valid JSON: {why}") from None
    bad = _first_non_finite(config)
    if bad is not None:
        key, token = bad
        raise ModelConfigError(f"{where}: field '{key}' is {token}; JSON numbers must be finite")
    if not isinstance(config, dict):
        raise ModelConfigError(f"{where}: a model config must be a JSON object, got {_type_name(config)}")
    return config
