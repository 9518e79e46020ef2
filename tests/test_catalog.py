"""Catalog loading, lookup and the Hub seam, at the library level."""

from __future__ import annotations

import pytest

from gpuplan.catalog import load_models, resolve_model
from gpuplan.catalog.hf_config import SUPPORTED_MODEL_TYPES, spec_from_hf_config
from gpuplan.errors import AmbiguousIdError, HubError, ModelConfigError, UnknownIdError
from gpuplan.spec.model import ParamsOnlyModel


def test_resolve_model_kinds():
    models = load_models()
    assert resolve_model("LLAMA-3.1-8B", models).id == "llama-3.1-8b"  # case-insensitive
    assert isinstance(resolve_model("70B", models), ParamsOnlyModel)
    with pytest.raises(UnknownIdError) as e:
        resolve_model("mistral-7b", models, fetch=None)
    assert "mistral-7b-v0.1" in str(e.value)


def test_hub_seam_reads_the_config_it_is_given():
    calls = []

    def fake_fetch(repo_id):
        calls.append(repo_id)
        return {
            "model_type": "qwen2",
            "vocab_size": 1000,
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "intermediate_size": 128,
            "max_position_embeddings": 4096,
        }

    spec = resolve_model("acme/tiny-qwen", load_models(), fetch=fake_fetch)
    assert calls == ["acme/tiny-qwen"] and spec.hf_id == "acme/tiny-qwen" and spec.qkv_bias


def test_hub_errors_propagate_as_one_line():
    def failing(repo_id):
        raise HubError(f"can't reach the Hugging Face Hub to read '{repo_id}' (offline?)")

    with pytest.raises(HubError):
        resolve_model("acme/x", load_models(), fetch=failing)


def test_multimodal_config_reads_text_model_with_a_note():
    cfg = {
        "model_type": "llava",
        "text_config": {
            "model_type": "llama",
            "vocab_size": 100,
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 128,
            "max_position_embeddings": 512,
        },
    }
    spec = spec_from_hf_config(cfg, id="mm")
    assert spec.model_type == "llama" and any("vision" in n for n in spec.notes)


@pytest.mark.parametrize(
    "cfg,fragment",
    [
        ([], "JSON object"),
        ({"hidden_size": 64}, "no 'model_type'"),
        (
            {
                "model_type": "llama",
                "vocab_size": 10,
                "hidden_size": 64,
                "num_hidden_layers": "two",
                "num_attention_heads": 4,
                "intermediate_size": 8,
                "max_position_embeddings": 8,
            },
            "must be an integer",
        ),
        (
            {
                "model_type": "llama",
                "vocab_size": 10,
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 3,
                "intermediate_size": 8,
                "max_position_embeddings": 8,
            },
            "not divisible",
        ),
        (
            {
                "model_type": "llama",
                "vocab_size": 10,
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 3,
                "intermediate_size": 8,
                "max_position_embeddings": 8,
            },
            "multiple of",
        ),
        (
            {
                "model_type": "llama",
                "vocab_size": 10,
                "hidden_size": 64,
                "num_hidden_layers": 0,
                "num_attention_heads": 4,
                "intermediate_size": 8,
                "max_position_embeddings": 8,
            },
            ">= 1",
        ),
        (
            {"model_type": "mpt", "d_model": 64, "n_heads": 4, "n_layers": 2, "vocab_size": 10, "no_bias": False},
            "no_bias",
        ),
    ],
)
def test_bad_configs(cfg, fragment):
    with pytest.raises(ModelConfigError) as e:
        spec_from_hf_config(cfg, id="x")
    assert fragment in str(e.value)


def test_supported_types_are_listed():
    assert {"llama", "deepseek_v3", "falcon", "gpt2"} <= set(SUPPORTED_MODEL_TYPES)


def test_ambiguous_alias_error_lists_choices():
    from types import SimpleNamespace as NS

    from gpuplan.catalog.registry import Registry

    reg = Registry("thing", "hint", [NS(id="a-1", aliases=("a",)), NS(id="a-2", aliases=("a",))])
    with pytest.raises(AmbiguousIdError) as e:
        reg.get("a")
    assert e.value.choices == ("a-1", "a-2")
