"""``--stack jax`` (issue #13): XLA-compiled JAX, MaxText-style FSDP under SPMD. Each mechanism against the formula's
own terms or against the stack it differs from, so a change in one shows here; the PyTorch-only settings it refuses
go through the CLI (exit 2, one line)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import BUNDLED_ACCELERATORS, BUNDLED_MODELS
from gpuplan.estimate.memory import resolve_recipe, stack_job, training_memory
from gpuplan.estimate.steptime import STACKS, StepAssumptions, resolve_stack, training_step
from gpuplan.spec.training import Parallelism, TrainingJob
from test_cli import one_line_error

A = StepAssumptions()
H100_ZERO3 = ("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3")
ONE = Parallelism(gpus=1)


def _gpu(gid="h200-sxm-141gb"):
    return BUNDLED_ACCELERATORS.get(gid)


def _model(mid="llama-3.2-1b"):
    return BUNDLED_MODELS.get(mid)


def test_jax_profile_is_compiled_and_overlapped():
    jax = STACKS["jax"]
    assert jax.fused_elementwise and jax.overlap_grad_reduce and jax.prefetch_gathers
    assert not jax.gather_per_tensor and not jax.expands_gqa_kv
    assert jax.hopper_attention and jax.sharding_copy_bytes_per_param == 0.0
    assert "base.yml" in jax.source


def test_no_host_floor_and_fused_elementwise_bytes():
    """The small step that the eager host's dispatch sets the pace of under hf has no such floor under jax, no eager
    loss passes, and its element-wise work is the fused 46 bytes per token and hidden unit, forward, twice that
    backward, per layer and micro-batch."""
    model, gpu = _model(), _gpu()
    job = TrainingJob(micro_batch=1, seq_len=256, global_batch=1, precision="bf16", stack="hf")
    hf = training_step(model, gpu, ONE, job)
    jax = training_step(model, gpu, ONE, replace(job, stack="jax"))
    assert "host_dispatch_wait" in hf.parts and "loss" in hf.parts
    assert "host_dispatch_wait" not in jax.parts and jax.parts["loss"] < hf.parts["loss"] / 4  # fused: 10 B per logit
    assert jax.iteration_s < 0.5 * hf.iteration_s
    bw = gpu.memory_bandwidth_bytes_per_s * A.hbm_efficiency
    per_layer = 256 * model.hidden_size * A.elementwise_bytes_per_token_hidden / bw
    assert jax.parts["elementwise"] == pytest.approx(3 * per_layer * model.layers, rel=1e-12)
    assert hf.parts["elementwise"] == pytest.approx(
        jax.parts["elementwise"] * A.eager_elementwise_bytes_per_token_hidden / A.elementwise_bytes_per_token_hidden,
        rel=1e-12,
    )


def test_fsdp_against_fsdp2_on_hopper():
    """The same ZeRO-3 layout on H100s: jax has no FSDP2 copy-out/copy-in and runs Hopper attention kernels (cuDNN)
    where FSDP2 with --attention-kernel fa2 runs FlashAttention-2 at fa2_on_hopper_efficiency."""
    model, gpu = _model("llama-3.1-8b"), _gpu("h100-sxm-80gb")
    lay = Parallelism(gpus=8, zero=3)
    job = TrainingJob(micro_batch=1, seq_len=8192, global_batch=8, fsdp=True, stack="fsdp2", attention_kernel="fa2")
    fsdp2 = training_step(model, gpu, lay, job)
    jax = training_step(model, gpu, lay, replace(job, fsdp=False, stack="jax", attention_kernel="auto"))
    assert fsdp2.parts["sharding_copies"] > 0 and "sharding_copies" not in jax.parts
    assert jax.parts["attention"] == pytest.approx(
        fsdp2.parts["attention"] * A.fa2_on_hopper_efficiency / A.flash_attention_efficiency, rel=1e-9
    )
    assert jax.tokens_per_s > fsdp2.tokens_per_s


def test_gradient_reduction_overlaps_by_default():
    """Plain data parallelism across nodes: jax hides the reduction behind backward as XLA schedules it; Megatron's
    default (--overlap-grad-reduce off) waits for all of it."""
    model, gpu = _model("llama-3.1-8b"), _gpu("h100-sxm-80gb")
    lay = Parallelism(gpus=16)
    job = TrainingJob(micro_batch=1, seq_len=4096, global_batch=16, recipe="zero", stack="megatron")
    mega = training_step(model, gpu, lay, job)
    jax = training_step(model, gpu, lay, replace(job, stack="jax"))
    assert jax.parts.get("dp_comm", 0.0) < mega.parts["dp_comm"]


def test_tpu_auto_picks_jax_and_maxtext_bookkeeping():
    """On a Google TPU --stack auto is jax, with MaxText's float32 weights, gradients and AdamW states (the fsdp
    recipe, 16 B per parameter); on an NVIDIA GPU auto still follows the recipe."""
    model = _model("llama-3.1-8b")
    lay = Parallelism(gpus=64, zero=3)
    job = TrainingJob(micro_batch=1, seq_len=4096, global_batch=64)
    tpu, h100 = _gpu("tpu-v5p"), _gpu("h100-sxm-80gb")
    stack, why = resolve_stack(job, lay, tpu)
    assert stack.name == "jax" and why.startswith("auto (Google TPU")
    assert resolve_stack(job, lay, h100)[0].name == "deepspeed"
    assert training_step(model, tpu, lay, job).stack == "jax"
    assert training_step(model, h100, lay, job).stack == "deepspeed"
    assert stack_job(job, h100) is job
    recipe, _ = resolve_recipe(stack_job(job, tpu), lay)
    assert recipe.name == "fsdp" and (recipe.weights, recipe.grads, recipe.master, recipe.state) == (4, 4, 0, 4)
    assert training_memory(model, tpu, lay, job, find_max_batch=False).recipe.name == "fsdp"
    assert training_memory(model, tpu, lay, replace(job, stack="jax"), find_max_batch=False).total_bytes == (
        training_memory(model, tpu, lay, job, find_max_batch=False).total_bytes
    )
    # on a TPU the eager stack would add the host floor: auto no longer does
    small = TrainingJob(micro_batch=1, seq_len=256, global_batch=1)
    assert "host_dispatch_wait" not in training_step(_model(), tpu, ONE, small).parts
    assert "host_dispatch_wait" in training_step(_model(), tpu, ONE, replace(small, stack="hf")).parts


def test_fp8_auto_is_delayed_scaling():
    model, gpu = _model("llama-3.1-8b"), _gpu("h100-sxm-80gb")
    job = TrainingJob(micro_batch=1, seq_len=4096, global_batch=8, precision="fp8-mixed", stack="jax")
    assert training_step(model, gpu, Parallelism(gpus=8, zero=3), job).fp8_recipe == "delayed"


def test_train_json_shows_the_stack(run):
    code, out, err = run("train", "llama-3.1-8b", "--gpu", "tpu-v5p", "--gpus", "64", "--zero", "3", "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["job"]["stack"] == "jax" and "Google TPU" in rec["job"]["stack_why"]
    assert rec["recipe"]["name"] == "fsdp" and "--stack jax" in rec["recipe"]["why"]
    code, out, err = run(*H100_ZERO3, "--stack", "jax", "--json")
    assert code == 0, err
    assert json.loads(out)["job"]["stack_why"] == "--stack jax"


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--compile",), "drop --compile"),
        (("--fsdp",), "use --zero 3"),
        (("--recipe", "megatron"), "--recipe auto"),
        (("--optimizer", "adamw-8bit"), "bitsandbytes"),
        (("--method", "qlora"), "bitsandbytes"),
        (("--zero", "3", "--offload", "optimizer"), "ZeRO-Offload"),
    ],
)
def test_pytorch_only_settings_refused(run, flags, says):
    code, out, err = run("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--stack", "jax", *flags)
    assert says in one_line_error(code, out, err)


def test_plan_train_on_tpus_runs_jax_and_equals_train():
    """The search resolves --stack auto per GPU as train does: every TPU option is jax with MaxText's bookkeeping,
    and each sampled one equals ``gpuplan.train`` on its layout (tests/test_plan_search.py's 1e-12)."""
    import random

    import gpuplan
    from test_plan_search import CAT, _agrees_with_train

    r = gpuplan.plan_train(
        "llama-3.2-1b", tokens="100B", gpu="tpu-v5p,tpu-v6e", objective="time", max_gpus=256, top=60, catalog=CAT
    )
    opts = r.search.options
    assert opts and {o.stack for o in opts} == {"jax"} and {o.recipe for o in opts} == {"fsdp"}
    for opt in random.Random(13).sample(opts, min(5, len(opts))):
        _agrees_with_train(opt, "llama-3.2-1b", 100e9, r.search.grid["seq_len"])
    # the bundled TPU offers are single chips: an 8B model's states (16 B/param) fit one only with ZeRO-Offload's
    # CPU-Adam, which runs beside a GPU, not a TPU, so nothing is proposed (train refuses it too)
    big = gpuplan.plan_train("llama-3.1-8b", tokens="100B", gpu="tpu-v5p", max_gpus=256, top=5, catalog=CAT)
    assert not big.search.options or all(o.candidate.offload in ("none", "activations") for o in big.search.options)


def test_compile_under_auto_on_a_tpu_is_noted_not_refused(run):
    """--compile with --stack auto on a TPU changes nothing (jax is compiled): a note, and the same numbers."""
    base = ("train", "llama-3.1-8b", "--gpu", "tpu-v5p", "--gpus", "8", "--zero", "3", "--tokens", "1B", "--json")
    code, out, err = run(*base, "--compile")
    assert code == 0, err
    compiled = json.loads(out)
    assert any(n.startswith("--compile ignored") for n in compiled["notes"])
    code, out, err = run(*base)
    plain = json.loads(out)
    assert not any(n.startswith("--compile ignored") for n in plain["notes"])
    assert compiled["time"]["step_s"] == plain["time"]["step_s"]
