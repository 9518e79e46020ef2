"""FLOPs per token against published figures (src/gpuplan/data/validation/training_compute.json)."""

from __future__ import annotations

import pytest

from gpuplan.catalog import load_models
from gpuplan.estimate.flops import flops_per_token, matmul_params
from gpuplan.estimate.params import count_params
from gpuplan.spec.model import ModelSpec, ParamsOnlyModel


def _record(validation, rid):
    return next(r for r in validation("training_compute")["records"] if r["id"] == rid)


def _value(record, metric):
    return next(v["value"] for v in record["values"] if v["metric"] == metric)


def palm_540b() -> ModelSpec:
    """PaLM 540B from its paper (Table 1, section 2): MQA, SwiGLU, parallel layers, no biases, tied embeddings."""
    return ModelSpec(
        id="palm-540b",
        name="PaLM 540B",
        model_type="palm",
        vocab_size=256_000,
        hidden_size=18_432,
        layers=118,
        attention_heads=48,
        kv_heads=1,
        head_dim=256,
        ffn_size=73_728,
        context_length=2048,
        tie_embeddings=True,
        mlp_gated=True,
        norm="layernorm-nobias",
        norms_per_layer=1,
        parallel_attention=True,
    )


def test_palm_params_and_flops_per_token(validation):
    rec = _record(validation, "palm-540b")
    spec = palm_540b()
    assert count_params(spec).total == pytest.approx(rec["model"]["params"], rel=1e-4)
    f = flops_per_token(spec, 2048)
    assert f.training_flops == pytest.approx(_value(rec, "flops_per_token_6N_plus_attention"), rel=0.005)


def test_palm_mfu_arithmetic(validation):
    """MFU = tokens/s x FLOPs/token / (chips x peak): 46.2 % with attention, 45.7 % without (to 0.5 %)."""
    rec = _record(validation, "palm-540b")
    f = flops_per_token(palm_540b(), 2048)
    peak = 6144 * 275e12
    tokens_per_s = _value(rec, "training_throughput")
    assert 100 * tokens_per_s * f.training_flops / peak == pytest.approx(
        _value(rec, "model_flops_utilization"), rel=0.005
    )
    six_n = 3 * f.forward_matmul_flops
    assert 100 * tokens_per_s * six_n / peak == pytest.approx(_value(rec, "mfu_without_self_attention"), rel=0.005)


def test_gpt3_total_compute(validation):
    """GPT-3 175B: 3.14e23 FLOPs for 300B tokens (Brown et al. Table D.1, 6ND), to 1 %."""
    rec = _record(validation, "gpt3-175b-total-compute")
    spec = load_models().get("gpt3-175b")
    total = 3 * flops_per_token(spec, 2048).forward_matmul_flops * rec["tokens"]
    assert total == pytest.approx(_value(rec, "total_training_compute"), rel=0.01)


@pytest.mark.parametrize(
    "rid", ["megatron-t1-1p7b", "megatron-t1-7p5b", "megatron-t1-39p1b", "megatron-t1-145p6b", "megatron-t1-1008p0b"]
)
def test_megatron_eq3_is_training_flops_plus_recompute(validation, rid):
    """Narayanan et al. Eq. 3 = our training FLOPs + one recompute forward of the transformer layers
    (full recomputation re-runs the layers, not the logit layer: its vocab term is 6BshV, not 8BshV)."""
    rec = _record(validation, rid)
    m = rec["model"]
    spec = ModelSpec(
        id=rid,
        name=rid,
        model_type="gpt2",
        vocab_size=m["vocab"],
        hidden_size=m["hidden"],
        layers=m["layers"],
        attention_heads=m["heads"],
        kv_heads=m["heads"],
        head_dim=m["hidden"] // m["heads"],
        ffn_size=4 * m["hidden"],
        context_length=m["seq_len"],
        tie_embeddings=True,
        mlp_gated=False,
        norm="layernorm",
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
    )
    tokens = rec["batch"]["global_batch_tokens"]
    f = flops_per_token(spec, m["seq_len"])
    recompute_forward = f.forward_flops - 2 * spec.vocab_size * spec.hidden_size
    ours = (f.training_flops + recompute_forward) * tokens
    assert ours == pytest.approx(_value(rec, "flops_per_iteration_eq3"), rel=0.01)


@pytest.mark.parametrize("rid", ["chinchilla-t3-400m", "chinchilla-t3-10000m", "chinchilla-t3-175000m"])
def test_chinchilla_6nd_for_a_bare_count(validation, rid):
    rec = _record(validation, rid)
    model = ParamsOnlyModel(int(rec["model"]["params"]))
    total = flops_per_token(model, 2048).training_flops * rec["tokens"]
    assert total == pytest.approx(_value(rec, "optimal_training_flops"), rel=0.02)


def test_attention_term_palm_form():
    """Training attention FLOPs = 12 L H Q T for MHA/GQA; the windowed layers attend to the window only."""
    models = load_models()
    llama = models.get("llama-3.1-8b")
    f = flops_per_token(llama, 8192)
    assert 3 * f.forward_attention_flops == 12 * 32 * 32 * 128 * 8192
    mistral = models.get("mistral-7b-v0.1")  # 4096-token window on every layer
    assert (
        flops_per_token(mistral, 16384).forward_attention_flops
        == flops_per_token(mistral, 4096).forward_attention_flops
    )


def test_mla_uses_its_own_head_widths():
    v3 = load_models().get("deepseek-v3")
    f = flops_per_token(v3, 4096)
    assert f.forward_attention_flops == 2 * 4096 * 128 * (192 + 128) * 61


def test_matmul_params_convention():
    """N excludes embedding lookups and includes the LM head, tied or not (hand-derived values)."""
    models = load_models()
    # untied: total less the 128256 x 4096 input table
    assert matmul_params(models.get("llama-3.1-8b")) == 8_030_261_248 - 128_256 * 4096
    # tied: the shared matrix is a lookup on the way in and a matmul on the way out -> counted once
    assert matmul_params(models.get("llama-3.2-1b")) == 1_235_814_400
    # GPT-2: tied, plus a 1024 x 768 learned position table that is only looked up
    assert matmul_params(models.get("gpt2")) == 124_439_808 - 1024 * 768
