"""plan train's precision and method axes (issue 16): ``--precision any`` (or a comma list) searches bf16-mixed and
fp8-mixed, fp8 only where the GPU has an fp8 peak; ``--method lora|qlora`` plans a fine-tune. Each option equals
``train`` on its layout, offer, precision and method to a relative 1e-12, as the full-training options do."""

from __future__ import annotations

import json
import random

import pytest

import gpuplan
from gpuplan.catalog.session import Catalogs
from gpuplan.spec.training import parse_precisions
from test_plan_search import _agrees_with_train

CAT = Catalogs(())


def test_parse_precisions():
    assert parse_precisions("any") == ("bf16-mixed", "fp8-mixed")
    assert parse_precisions("fp8-mixed, bf16-mixed,fp8-mixed") == ("fp8-mixed", "bf16-mixed")
    assert parse_precisions("bf16-mixed") == ("bf16-mixed",)
    for bad in ("fp9", "", "bf16-mixed,,", "any,int4"):
        with pytest.raises(gpuplan.GpuplanError):
            parse_precisions(bad)


def test_precision_any_equals_train_and_searches_both():
    """Random searches with --precision any: the options hold both precisions, each equal to train at its own
    precision; the grid counts both (searched is the sum of the two single-precision searches)."""
    rng = random.Random(1616)
    seen = set()
    for model, gpu_ids, seq in (
        ("llama-3.1-8b", "h100-sxm-80gb,a100-sxm-80gb,l40s", 2048),
        ("qwen3-30b-a3b", "h200-sxm-141gb,b200,a10g", 4096),
    ):
        kwargs = dict(gpu=gpu_ids, seq_len=seq, max_gpus=256, top=200, objective="time", catalog=CAT)
        both = gpuplan.plan_train(model, tokens="100B", precision="any", **kwargs).search
        one = [gpuplan.plan_train(model, tokens="100B", precision=p, **kwargs).search for p in both.grid["precision"]]
        assert both.grid["precision"] == ["bf16-mixed", "fp8-mixed"]
        assert both.searched == sum(s.searched for s in one)
        assert both.feasible == sum(s.feasible for s in one)
        found = {o.candidate.precision for o in both.options}
        seen |= found
        for opt in rng.sample(both.options, min(6, len(both.options))):
            _agrees_with_train(opt, model, 100e9, seq, None)
            if opt.candidate.precision == "fp8-mixed":
                assert "--fp8-format" in opt.launch["megatron"]
                # torchtitan's line is null only where its layer SAC cannot recompute the partial N layers, where
                # activations are offloaded, or where its device mesh cannot fold the expert layout
                titan = opt.launch["torchtitan"]
                c = opt.candidate
                folds = c.ep == 1 and (c.etp is None or c.etp == c.tp)  # else only some expert layouts fold
                why_null = c.recompute == "partial" or c.offload == "activations" or not folds
                assert "float8" in titan if titan is not None else why_null
    assert seen == {"bf16-mixed", "fp8-mixed"}


def test_gpu_without_fp8_is_not_supported(run):
    """A100 has no fp8 peak: under --precision any its fp8 half is counted not_supported, its bf16 half searched."""
    base = dict(gpu="a100-sxm-80gb", max_gpus=64, seq_len=2048, catalog=CAT)
    bf16 = gpuplan.plan_train("llama-3.1-8b", tokens="50B", **base).search
    both = gpuplan.plan_train("llama-3.1-8b", tokens="50B", precision="any", **base).search
    fp8 = gpuplan.plan_train("llama-3.1-8b", tokens="50B", precision="fp8-mixed", **base).search
    assert fp8.feasible == 0 and fp8.pruned["not_supported"] == fp8.searched > 0
    assert both.pruned["not_supported"] == bf16.pruned["not_supported"] + fp8.searched
    assert both.feasible == bf16.feasible and {o.candidate.precision for o in both.options} == {"bf16-mixed"}
    code, out, _ = run("plan", "train", "llama-3.1-8b", "--tokens", "50B", "--gpu", "a100-sxm-80gb", "--max-gpus", "8",
                       "--precision", "fp8-mixed", "--json")  # fmt: skip
    assert code == 3 and json.loads(out)["pruned"]["not_supported"] > 0


@pytest.mark.parametrize(
    ("model", "method"),
    [
        ("llama-3.1-70b", dict(method="lora", lora_rank=32, lora_targets="all-linear")),
        ("llama-3.1-70b", dict(method="qlora")),
        ("qwen3-30b-a3b", dict(method="lora", lora_rank=8, lora_targets="q_proj,v_proj")),
    ],
)
def test_finetune_equals_train(model, method):
    """LoRA / QLoRA searches: options equal train with the same --method and --lora-* on their layout; the record
    and the launch hints carry the method (no pretraining launcher, a PEFT config)."""
    rng = random.Random(hash(model) % 1000)
    plan = gpuplan.plan_train(
        model, tokens="2B", gpu="h100-sxm-80gb,l40s", max_gpus=64, seq_len=2048, top=80, catalog=CAT, **method
    )
    s = plan.search
    assert s.options and s.grid["method"] == method["method"]
    for opt in rng.sample(s.options, 6):
        _agrees_with_train(opt, model, 2e9, 2048, "bf16-mixed", **method)
        assert opt.launch["megatron"] is None and opt.launch["torchtitan"] is None
        assert opt.launch["peft"].startswith(f"LoraConfig(r={method.get('lora_rank', 16)}")
        assert ("load_in_4bit=True" in opt.launch["peft"]) == (method["method"] == "qlora")
    record = plan.to_dict()
    assert {o["method"] for o in record["options"]} == {method["method"]}


def test_finetune_is_cheaper_than_full_training():
    """The mechanism, not a constant: LoRA keeps no gradients or optimizer states for the frozen base, so its
    lightest plan needs fewer GPUs than full training of the same model; QLoRA's 4-bit base fewer still or equal."""
    kw = dict(tokens="1B", gpu="h100-sxm-80gb", max_gpus=64, seq_len=2048, objective="gpus", top=1, catalog=CAT)
    fewest = {m: gpuplan.plan_train("llama-3.1-70b", method=m, **kw).search.options[0].candidate.gpus
              for m in ("full", "lora", "qlora")}  # fmt: skip
    assert fewest["qlora"] <= fewest["lora"] < fewest["full"]


@pytest.mark.parametrize(
    "args",
    [
        ("--precision", "fp9"),
        ("--precision", "bf16-mixed,,"),
        ("--precision", "any,int4"),
        ("--method", "dora"),
        ("--method", "lora", "--lora-rank", "0"),
        ("--method", "lora", "--lora-targets", "nosuch_proj"),
        ("--quant", "nf4"),
    ],
)
def test_bad_values_exit_2_with_one_line(run, args):
    code, out, err = run("plan", "train", "llama-3.1-8b", "--tokens", "1B", "--gpu", "h100", "--max-gpus", "8", *args)
    assert code == 2 and out == "" and err.startswith("gpuplan: error:") and err.count("\n") == 1, err


def test_finetune_default_batch_is_the_recipe_rule_in_plan_and_train():
    """LoRA without --global-batch: the search and train both take the fine-tuning rule (16 sequences, rounded to
    whole micro-batch x dp groups), not the pretraining tokens-per-step rule, and agree to 1e-12 on it."""
    from gpuplan.estimate.steptime import FINETUNE_GLOBAL_BATCH_SEQUENCES, default_global_batch_tokens
    from gpuplan.plan.search import BATCH_RULE_SLACK

    rule = FINETUNE_GLOBAL_BATCH_SEQUENCES
    kw = dict(tokens="1B", gpu="h100-sxm-80gb", max_gpus=64, seq_len=2048, method="lora", top=300, catalog=CAT)
    s = gpuplan.plan_train("llama-3.1-8b", **kw).search
    assert s.options and s.pruned["batch_above_rule"] > 0
    for o in s.options:
        c = o.candidate
        unit = c.micro_batch * c.dp
        assert unit <= BATCH_RULE_SLACK * rule and c.global_batch == max(1, round(rule / unit)) * unit, c
    # the pretraining rule would run ~244 sequences of 2048 tokens per step for an 8B model
    assert default_global_batch_tokens(8e9) / 2048 > 10 * rule
    flat = [o for o in s.options if o.candidate.pp == 1]
    for opt in random.Random(16).sample(flat, min(5, len(flat))):
        c = opt.candidate
        args = {k: v for k, v in c.train_kwargs().items() if k != "global_batch"}
        t = gpuplan.train("llama-3.1-8b", tokens=1e9, seq_len=2048, method="lora", catalog=CAT, **args).plan
        assert t.step.global_batch == c.global_batch
        assert t.step.global_batch_source.startswith(f"default: {rule} sequences per step for a lora fine-tune")
        for got, want in ((c.time_s, t.time.seconds), (c.step_s, t.step.iteration_s), (c.cost_usd, t.usd)):
            assert abs(got - want) <= 1e-12 * abs(want), (c, got, want)


def test_global_batch_wins_over_the_finetune_rule():
    kw = dict(tokens="1B", gpu="h100-sxm-80gb", max_gpus=32, seq_len=2048, method="qlora", global_batch=96, top=50)
    s = gpuplan.plan_train("llama-3.1-8b", catalog=CAT, **kw).search
    assert s.options and {o.candidate.global_batch for o in s.options} == {96}
    assert s.grid["global_batch"] == 96 and s.pruned["batch_above_rule"] == 0
    t = gpuplan.train("llama-3.1-8b", tokens=1e9, seq_len=2048, method="qlora", gpu="h100", gpus=8, global_batch=96,
                      catalog=CAT)  # fmt: skip
    assert t.plan.step.global_batch == 96 and t.plan.step.global_batch_source == "--global-batch"
    # full training keeps the pretraining rule (the tool cannot tell a full fine-tune from pretraining)
    full = gpuplan.train("llama-3.1-8b", tokens=1e9, seq_len=2048, gpu="h100", gpus=8, catalog=CAT).plan.step
    assert full.global_batch >= 200 and "tokens per step" in full.global_batch_source
