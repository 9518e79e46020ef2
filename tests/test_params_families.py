"""Issue 15: the families added to the config reader count exactly what transformers builds.

Each family is checked two ways: with a config written the way transformers 5 writes it (the config
class's own ``to_dict()``, current key spellings), and with hand-written configs in the spellings the Hub's
older files use. MoE active counts are checked against the total less the unused routed experts, taken
from the model transformers builds. Families with no transformers class (Grok-1, InternLM2) are checked
against their published counts.
"""

from __future__ import annotations

import copy

import pytest

from gpuplan.catalog.hf_config import spec_from_hf_config
from gpuplan.errors import ModelConfigError
from gpuplan.estimate.flops import attention_flops_forward
from gpuplan.estimate.params import count_params

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

VISION_LANGUAGE = ("qwen2_vl", "qwen2_5_vl", "llava", "llama4")


def _build(config: dict):
    cfg = copy.deepcopy(config)
    model_type = cfg.pop("model_type")
    cfg.pop("architectures", None)
    hf_config = transformers.AutoConfig.for_model(model_type, **cfg)
    auto = (
        transformers.AutoModelForImageTextToText if model_type in VISION_LANGUAGE else transformers.AutoModelForCausalLM
    )
    with torch.device("meta"):
        return auto.from_config(hf_config)


def _numel(model) -> int:
    return sum(p.numel() for p in model.parameters())


SMALL = dict(
    hidden_size=64,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=128,
    pad_token_id=0,
    max_position_embeddings=256,
)

#: (model_type, keyword arguments to its config class): written back with to_dict() as transformers 5 does.
WRITTEN_BY_TRANSFORMERS = {
    "gpt_oss": dict(SMALL, head_dim=16, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2),
    "llama4_text": dict(
        SMALL,
        head_dim=16,
        intermediate_size=32,
        intermediate_size_mlp=48,
        num_local_experts=4,
        interleave_moe_layer_step=2,
        attention_chunk_size=64,
        max_position_embeddings=256,
    ),
    "granite": dict(SMALL, intermediate_size=96, attention_bias=True, mlp_bias=True),
    "granitemoe": dict(SMALL, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2),
    "granitemoeshared": dict(SMALL, intermediate_size=32, num_local_experts=4, shared_intermediate_size=48),
    "starcoder2": dict(SMALL, intermediate_size=96, sliding_window=32, max_position_embeddings=256),
    "gpt_bigcode": dict(n_embd=64, n_layer=3, n_head=4, vocab_size=128, n_positions=64),
    "cohere": dict(SMALL, intermediate_size=96, use_qk_norm=True),
    "cohere2": dict(SMALL, intermediate_size=96, head_dim=16, sliding_window=16, max_position_embeddings=256),
    "dbrx": dict(
        d_model=64,
        n_layers=3,
        n_heads=4,
        vocab_size=128,
        max_seq_len=256,
        attn_config=dict(kv_n_heads=2, rope_theta=10000.0),
        ffn_config=dict(ffn_hidden_size=32, moe_num_experts=4, moe_top_k=2),
    ),
    "phimoe": dict(SMALL, intermediate_size=32, num_local_experts=4, attention_bias=True, lm_head_bias=True),
    "gptj": dict(n_embd=64, n_layer=3, n_head=4, vocab_size=128, rotary_dim=8, n_positions=64),
    "glm": dict(SMALL, intermediate_size=96, head_dim=16),
    "glm4": dict(SMALL, intermediate_size=96, head_dim=16),
    "glm4_moe": dict(
        SMALL,
        intermediate_size=96,
        head_dim=16,
        moe_intermediate_size=16,
        n_routed_experts=8,
        num_experts_per_tok=2,
        n_shared_experts=2,
        first_k_dense_replace=1,
        use_qk_norm=True,
        attention_bias=True,
    ),
    "exaone4": dict(SMALL, intermediate_size=96, sliding_window=16, max_position_embeddings=256),
    "ernie4_5": dict(SMALL, intermediate_size=96, head_dim=16, use_bias=True),
    "ernie4_5_moe": dict(
        SMALL,
        intermediate_size=96,
        moe_intermediate_size=16,
        moe_num_experts=8,
        moe_k=2,
        moe_num_shared_experts=1,
        moe_layer_start_index=1,
        moe_layer_end_index=2,
        use_bias=True,
    ),
    "qwen3_moe": dict(SMALL, intermediate_size=96, moe_intermediate_size=16, num_experts=8, num_experts_per_tok=2),
    "qwen2_vl": dict(
        text_config=dict(SMALL, intermediate_size=96, model_type="qwen2_vl_text"),
        vision_config=dict(depth=2, embed_dim=32, num_heads=4, hidden_size=64),
    ),
    "qwen2_5_vl": dict(
        text_config=dict(SMALL, intermediate_size=96, model_type="qwen2_5_vl_text"),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=48, num_heads=4, out_hidden_size=64),
    ),
}


def _written(model_type: str) -> dict:
    d = transformers.AutoConfig.for_model(model_type, **WRITTEN_BY_TRANSFORMERS[model_type]).to_dict()
    d["model_type"] = model_type
    return d


@pytest.mark.parametrize("model_type", list(WRITTEN_BY_TRANSFORMERS))
def test_config_written_by_transformers_counts_exactly(model_type):
    config = _written(model_type)
    model = _build(config)
    b = count_params(spec_from_hf_config(config, id=model_type))
    assert b.total == _numel(model)
    experts = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n and "shared" not in n)
    spec = spec_from_hf_config(config, id=model_type)
    if spec.moe is not None:  # active = total - the routed experts a token is not sent to
        moe = spec.moe
        assert b.active == b.total - experts * (moe.experts - moe.experts_per_token) // moe.experts
    else:
        assert b.active == b.total - b.parts.get("vision", 0)


def test_qwen3_moe_num_local_experts_spelling():
    """transformers 5 writes Qwen3-MoE's expert count as num_local_experts (num_experts is an alias)."""
    config = _written("qwen3_moe")
    assert "num_local_experts" in config and config.get("num_experts") is None
    assert spec_from_hf_config(config, id="q").moe.experts == 8
    old = dict(
        SMALL,
        model_type="qwen3_moe",
        intermediate_size=96,
        moe_intermediate_size=16,
        num_experts=8,
        num_experts_per_tok=2,
    )
    assert count_params(spec_from_hf_config(old, id="q")).total == _numel(_build(old))


#: Hand-written configs in the Hub's (older) spellings.
HUB_SPELLINGS = {
    # gpt-oss as first published: experts_per_token beside num_experts_per_tok, rope_scaling, no layer_types
    "gpt_oss-no-layer-types": dict(
        SMALL,
        model_type="gpt_oss",
        head_dim=16,
        intermediate_size=32,
        num_local_experts=4,
        experts_per_token=2,
        num_experts_per_tok=2,
        sliding_window=8,
        max_position_embeddings=256,
        rope_scaling=dict(
            rope_type="yarn", factor=32.0, original_max_position_embeddings=64, beta_fast=32.0, beta_slow=1.0
        ),
        rope_theta=150000,
    ),
    "llama4_text-moe-layers": dict(
        SMALL,
        model_type="llama4_text",
        head_dim=16,
        intermediate_size=32,
        intermediate_size_mlp=48,
        num_local_experts=4,
        moe_layers=[0, 3],
        no_rope_layers=[1, 1, 0, 1],
        rope_theta=500000.0,
    ),
    "cohere2-pattern": dict(
        SMALL,
        model_type="cohere2",
        intermediate_size=96,
        head_dim=16,
        sliding_window=16,
        sliding_window_pattern=4,
        max_position_embeddings=256,
        rope_theta=50000,
    ),
    "exaone4-lllg": dict(
        SMALL,
        model_type="exaone4",
        intermediate_size=96,
        sliding_window=16,
        sliding_window_pattern="LLLG",
        layer_types=["sliding_attention"] * 3 + ["full_attention"],
        max_position_embeddings=256,
    ),
    "gpt_bigcode-mha": dict(
        model_type="gpt_bigcode", n_embd=64, n_layer=2, n_head=4, vocab_size=128, multi_query=False
    ),
    "glm4-top-level-rotary": dict(
        SMALL, model_type="glm4", intermediate_size=96, head_dim=16, partial_rotary_factor=0.5, attention_bias=True
    ),
    "starcoder2-untied-nobias": dict(
        SMALL, model_type="starcoder2", intermediate_size=96, use_bias=False, tie_word_embeddings=False
    ),
    "phimoe-no-lm-head-bias": dict(SMALL, model_type="phimoe", intermediate_size=32, num_local_experts=4),
    "llava-clip": dict(
        model_type="llava",
        text_config=dict(SMALL, model_type="llama", intermediate_size=96),
        vision_config=dict(
            model_type="clip_vision_model",
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=4,
            image_size=56,
            patch_size=14,
        ),
        vision_feature_layer=[-2, -1],
    ),
    "qwen2_vl-flat": dict(
        SMALL,
        model_type="qwen2_vl",
        intermediate_size=96,
        tie_word_embeddings=True,
        vision_config=dict(depth=2, embed_dim=32, num_heads=4, hidden_size=64, in_chans=3),
    ),
    "llama4-vision": dict(
        model_type="llama4",
        text_config=dict(SMALL, head_dim=16, intermediate_size=32, intermediate_size_mlp=48, num_local_experts=4),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=4,
            image_size=56,
            patch_size=14,
            projector_input_dim=64,
            projector_output_dim=64,
            vision_output_dim=64,
        ),
    ),
}


@pytest.mark.parametrize("name", list(HUB_SPELLINGS))
def test_hub_spelling_counts_exactly(name):
    config = HUB_SPELLINGS[name]
    assert count_params(spec_from_hf_config(config, id=name)).total == _numel(_build(config))


def test_window_and_chunk_layers():
    gpt_oss = spec_from_hf_config(HUB_SPELLINGS["gpt_oss-no-layer-types"], id="g")
    assert (gpt_oss.sliding_window, gpt_oss.sliding_window_layers, gpt_oss.attention_sinks) == (8, 2, True)
    llama4 = spec_from_hf_config(dict(HUB_SPELLINGS["llama4_text-moe-layers"], max_position_embeddings=65536), id="l")
    assert llama4.moe.layers == 2 and llama4.moe.shared_ffn_size == 32
    assert (llama4.attention_chunk, llama4.chunked_layers, llama4.full_attention_layers) == (8192, 3, 1)
    assert spec_from_hf_config(HUB_SPELLINGS["exaone4-lllg"], id="e").sliding_window_layers == 3
    small = dict(HUB_SPELLINGS["llama4_text-moe-layers"], attention_chunk_size=64, max_position_embeddings=4096)
    spec = spec_from_hf_config(small, id="c")
    per_layer = 2.0 * spec.attention_heads * 2 * spec.head_dim
    assert attention_flops_forward(spec, 1024) == per_layer * (1 * 1024 + 3 * 64)
    assert attention_flops_forward(spec, 1024, causal=True) == per_layer * (1 * 512 + 3 * 32)


def test_grok1_published_count():
    """Grok-1 (hpcai-tech/grok-1's config.json; no transformers class): xAI publishes 314B parameters."""
    config = {
        "architectures": ["Grok1ModelForCausalLM"],
        "model_type": "grok-1",
        "vocab_size": 131072,
        "hidden_size": 6144,
        "intermediate_size": 32768,
        "num_hidden_layers": 64,
        "num_attention_heads": 48,
        "num_key_value_heads": 8,
        "max_position_embeddings": 8192,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "tie_word_embeddings": True,
    }
    b = count_params(spec_from_hf_config(config, id="grok-1"))
    assert b.total == pytest.approx(314e9, rel=0.01)
    assert b.active == b.total - 64 * (8 - 2) * 3 * 6144 * 32768  # 2 of 8 experts per token


def test_internlm2_published_count():
    """InternLM2.5-7B (remote code, no transformers class): the Hub's safetensors total, 7.74B."""
    config = {
        "architectures": ["InternLM2ForCausalLM"],
        "model_type": "internlm2",
        "bias": False,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "vocab_size": 92544,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-05,
        "tie_word_embeddings": False,
    }
    assert count_params(spec_from_hf_config(config, id="internlm2.5-7b")).total == 7_737_708_544


@pytest.mark.parametrize("model_type", ["mamba", "mamba2", "jamba", "falcon_h1", "zamba2", "mllama"])
def test_state_space_and_unmodeled_are_refused_with_the_reason(model_type):
    with pytest.raises(ModelConfigError) as e:
        spec_from_hf_config(dict(SMALL, model_type=model_type), id="m")
    message = str(e.value)
    assert "\n" not in message and "not supported" in message and "not modeled" in message


def test_like_reads_an_unknown_llama_style_config_and_says_so():
    config = dict(SMALL, model_type="my_llama", intermediate_size=96)
    with pytest.raises(ModelConfigError, match="--like llama"):
        spec_from_hf_config(config, id="m")
    spec = spec_from_hf_config(config, id="m", like="llama")
    as_llama = dict(config, model_type="llama")
    assert count_params(spec).total == _numel(_build(as_llama))
    assert any("--like llama" in n for n in spec.notes)
    with pytest.raises(ModelConfigError, match="--like 'nope'"):
        spec_from_hf_config(config, id="m", like="nope")


def test_model_list_shows_the_new_families(run):
    code, out, _err = run("model", "list")
    assert code == 0
    for model_id in (
        "gpt-oss-120b",
        "llama-4-scout-17b-16e",
        "granite-3.1-8b",
        "starcoder2-15b",
        "command-r-plus",
        "dbrx",
        "phi-3.5-moe",
        "gpt-j-6b",
        "glm-4.5-air",
        "qwen2.5-vl-7b",
        "llava-1.5-7b",
    ):
        assert model_id in out, model_id
