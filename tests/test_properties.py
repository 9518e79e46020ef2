"""Property tests (Hypothesis): invariants over random architectures.

The strongest one is a fuzz of the exactness claim: any config the reader accepts, for any supported
model_type, counts what transformers builds on the meta device.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gpuplan.catalog.hf_config import spec_from_hf_config
from gpuplan.estimate.flops import flops_per_token
from gpuplan.estimate.params import count_params

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()


@st.composite
def llama_family_configs(draw):
    model_type = draw(
        st.sampled_from(
            [
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
                "mixtral",
                "qwen2_moe",
                "qwen3_moe",
                "deepseek_v2",
                "deepseek_v3",
            ]
        )
    )
    kv = draw(st.sampled_from([1, 2, 4]))
    heads = kv * draw(st.integers(1, 3))
    head_dim = draw(st.sampled_from([4, 8, 16]))
    cfg = {
        "model_type": model_type,
        "vocab_size": draw(st.integers(16, 300)),
        "hidden_size": heads * head_dim * draw(st.sampled_from([1, 2])),
        "num_hidden_layers": draw(st.integers(1, 4)),
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": head_dim,
        "intermediate_size": draw(st.integers(4, 64)),
        "max_position_embeddings": 256,
        "tie_word_embeddings": draw(st.booleans()),
        "pad_token_id": 0,
    }
    if model_type in ("llama", "qwen3", "olmo", "olmo2", "deepseek_v2", "deepseek_v3"):
        cfg["attention_bias"] = draw(st.booleans())
    if model_type == "mixtral":
        cfg["num_local_experts"] = draw(st.integers(2, 5))
        cfg["num_experts_per_tok"] = draw(st.integers(1, 2))
    if model_type in ("qwen2_moe", "qwen3_moe"):
        cfg["num_experts"] = draw(st.integers(2, 6))
        cfg["num_experts_per_tok"] = draw(st.integers(1, 2))
        cfg["moe_intermediate_size"] = draw(st.integers(4, 32))
        cfg["decoder_sparse_step"] = draw(st.integers(1, 2))
        cfg["mlp_only_layers"] = draw(st.lists(st.integers(0, 3), max_size=2, unique=True))
        if model_type == "qwen2_moe":
            cfg["shared_expert_intermediate_size"] = draw(st.integers(4, 32))
    if model_type.startswith("deepseek"):
        cfg["num_key_value_heads"] = heads
        cfg.update(
            kv_lora_rank=draw(st.integers(2, 16)),
            qk_nope_head_dim=draw(st.sampled_from([4, 8])),
            qk_rope_head_dim=draw(st.sampled_from([2, 4])),
            v_head_dim=draw(st.sampled_from([4, 8])),
            q_lora_rank=draw(st.one_of(st.none(), st.integers(2, 16))),
            n_routed_experts=draw(st.integers(2, 6)),
            n_shared_experts=draw(st.integers(0, 2)),
            moe_intermediate_size=draw(st.integers(4, 16)),
            num_experts_per_tok=1,
            first_k_dense_replace=draw(st.integers(0, 2)),
            n_group=1,
            topk_group=1,
        )
        cfg.pop("head_dim")
    return cfg


def transformers_count(config: dict) -> int:
    cfg = dict(config)
    hf_config = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config)
    return sum(p.numel() for p in model.parameters())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(llama_family_configs())
def test_random_configs_count_exactly(cfg):
    assert count_params(spec_from_hf_config(cfg, id="fuzz")).total == transformers_count(cfg)


@settings(max_examples=100, deadline=None)
@given(llama_family_configs(), st.integers(1, 4096), st.integers(1, 4096))
def test_flops_grow_with_sequence_and_training_is_three_forwards(cfg, t1, t2):
    spec = spec_from_hf_config(cfg, id="p")
    a, b = flops_per_token(spec, min(t1, t2)), flops_per_token(spec, max(t1, t2))
    assert a.training_flops <= b.training_flops
    assert a.training_flops == pytest.approx(3 * a.inference_flops)
    parts = count_params(spec)
    assert 0 < parts.active <= parts.total
    assert (parts.active == parts.total) == (
        spec.moe is None or spec.moe.experts == spec.moe.experts_per_token or spec.moe.layers == 0
    )


@settings(max_examples=100, deadline=None)
@given(llama_family_configs(), st.integers(1, 3))
def test_more_layers_more_params(cfg, extra):
    if cfg["model_type"] in ("qwen2_moe", "qwen3_moe"):  # sparse-step patterns make added layers dense or MoE
        cfg["decoder_sparse_step"], cfg["mlp_only_layers"] = 1, []
    deeper = dict(cfg, num_hidden_layers=cfg["num_hidden_layers"] + extra)
    small, big = (count_params(spec_from_hf_config(c, id="p")) for c in (cfg, deeper))
    assert big.total > small.total and big.active > small.active
