"""--main-grads and --fp8-params (issue #13 item 3): the Megatron recipes' gradient buffer in bf16 (Megatron-LM
--grad-reduce-in-bf16, NeMo grad_sync_dtype) and fp8 parameters (--fp8-param-gather), in memory, in the step's
data-parallel traffic and in the JSON job record; refused where the recipe has no such buffer."""

from __future__ import annotations

import json

import pytest

from gpuplan import api
from gpuplan.errors import GpuplanError

BASE = dict(gpu="h100", gpus=8, tp=2, precision="fp8-mixed", micro_batch=1, seq_len=8192)


def _parts(**kw):
    return api.train("llama-3.1-8b", **{**BASE, **kw}).to_dict()["memory"]


def _bytes(mem, part):
    for p in mem["parts"]:
        if p["name"] == part:
            return p["bytes"]
    return 0


def test_bf16_main_grads_halve_the_gradient_buffer():
    fp32, bf16 = _parts(), _parts(main_grads="bf16")
    assert _bytes(bf16, "gradients") == pytest.approx(_bytes(fp32, "gradients") / 2, rel=1e-12)
    assert _bytes(bf16, "weights") == _bytes(fp32, "weights")
    assert _parts(main_grads="fp32")["total_bytes"] == fp32["total_bytes"]


def test_fp8_params_hold_the_weights_in_one_byte_and_drop_one_fp8_copy():
    plain, fp8 = _parts(), _parts(fp8_params=True)
    assert _bytes(fp8, "weights") == pytest.approx(_bytes(plain, "weights") / 2, rel=1e-12)
    # Hopper keeps an fp8 copy and its transpose (2 B); the fp8 parameter is the first of them
    assert _bytes(fp8, "fp8_weight_copies") == pytest.approx(_bytes(plain, "fp8_weight_copies") / 2, rel=1e-12)


def test_bf16_main_grads_halve_the_data_parallel_reduction():
    kw = dict(tokens="1T", tp=1, precision="bf16-mixed", recipe="megatron", overlap_grad_reduce=False)
    fp32 = api.train("llama-3.1-8b", **{**BASE, **kw}).to_dict()["time"]
    bf16 = api.train("llama-3.1-8b", **{**BASE, **kw, "main_grads": "bf16"}).to_dict()["time"]
    assert bf16["step_s"] < fp32["step_s"]


@pytest.mark.parametrize(
    "kw, says",
    [
        (dict(main_grads="bf16", tp=1, precision="bf16-mixed"), "--main-grads applies to the Megatron recipes"),
        (dict(fp8_params=True, precision="bf16-mixed"), "--fp8-params needs --precision fp8-mixed"),
        (dict(main_grads="fp16"), "--main-grads must be one of fp32, bf16"),
    ],
)
def test_refusals_say_what_to_change(kw, says):
    with pytest.raises(GpuplanError, match=says):
        api.train("llama-3.1-8b", **{**BASE, **kw})


def test_cli_flags_reach_the_json_job(run):
    code, out, err = run(
        "train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--tp", "2", "--precision", "fp8-mixed",
        "--main-grads", "bf16", "--fp8-params", "--json",
    )  # fmt: skip
    assert code == 0, err
    job = json.loads(out)["job"]
    assert job["main_grads"] == "bf16" and job["fp8_params"] is True
    code, out, err = run("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--main-grads", "bf16")
    assert code == 2 and "--recipe megatron" in (out + err) and "Traceback" not in err


@pytest.mark.parametrize(
    "kw, says",
    [
        (dict(method="lora", recipe="megatron", main_grads="bf16"), "applies to full training"),
        (dict(precision="fp16-mixed", recipe="megatron", main_grads="bf16"), "--main-grads bf16 goes with bf16"),
        (dict(model="llama-3.1-70b", pp=2, recompute="partial", recompute_layers=41), "more than the 40 layers"),
        (dict(model="llama-3.1-70b", pp=2, offload="activations", offload_layers=41), "more than the 40 layers"),
    ],
)
def test_settings_that_cannot_apply_are_refused(kw, says):
    """Review of 2026-11-27: these were accepted and silently did nothing (or were clamped)."""
    model = kw.pop("model", "llama-3.1-8b")
    with pytest.raises(GpuplanError, match=says):
        api.train(model, **{**BASE, "gpus": 16, **kw})


def test_lora_on_nf4_is_qlora_for_memory():
    """--method lora --quant nf4 is the bitsandbytes + PEFT setup that --method qlora names: the same bytes."""
    one = dict(gpu="h100", gpus=1, micro_batch=4, seq_len=2048, global_batch=4)
    lora = api.train("llama-3.1-8b", method="lora", quant="nf4", **one).to_dict()["memory"]["total_bytes"]
    qlora = api.train("llama-3.1-8b", method="qlora", **one).to_dict()["memory"]["total_bytes"]
    assert lora == pytest.approx(qlora, rel=0.01)  # QLoRA's adapters are bf16, LoRA's fp32: the only difference


def test_default_global_batch_keeps_the_gradients():
    """Without --global-batch the batch rule accumulates micro-batches, so the gradients persist through the step;
    with one micro-batch a step (--global-batch = micro-batch) backward frees activations as it makes them."""
    one = dict(gpu="a100-sxm-80gb", gpus=1, recipe="amp", recompute="full", micro_batch=1, seq_len=4096)
    default = api.train("llama-2-7b", **one).to_dict()["memory"]
    single = api.train("llama-2-7b", global_batch=1, **one).to_dict()["memory"]
    assert _bytes(single, "gradients") < _bytes(default, "gradients")
    assert _bytes(default, "gradients") == pytest.approx(_bytes(default, "weights"), rel=1e-9)  # fp32 grads


def test_bf16_optimizer_dtype_halves_states_and_main_params():
    """--optimizer-dtype bf16 (Apex DistributedFusedAdam dtype, as NeMo's recipes set it): states and the main
    parameter copy at 2 bytes instead of 4."""
    fp32, bf16 = _parts(), _parts(optimizer_dtype="bf16")
    for part in ("optimizer_states", "master_weights"):
        assert _bytes(bf16, part) == pytest.approx(_bytes(fp32, part) / 2, rel=1e-12)
    with pytest.raises(GpuplanError, match="--optimizer-dtype applies to the Megatron recipes"):
        api.train("llama-3.1-8b", **{**BASE, "tp": 1, "precision": "bf16-mixed", "optimizer_dtype": "bf16"})


def test_megatron_names_for_zero_1_and_the_schedule():
    """--distributed-optimizer is --zero 1; --pipeline-schedule names what --virtual-stages says and refuses a
    mismatch (issue #13's flag list)."""
    kw = dict(gpu="h100", gpus=64, tp=8, pp=2, tokens="1T")
    d = api.train("llama-3.1-70b", distributed_optimizer=True, **kw).to_dict()
    assert d["layout"]["zero"] == 1
    same = api.train("llama-3.1-70b", zero=1, **kw).to_dict()
    assert d["time"]["step_s"] == same["time"]["step_s"]
    with pytest.raises(GpuplanError, match="--distributed-optimizer is --zero 1"):
        api.train("llama-3.1-70b", distributed_optimizer=True, zero=3, **kw)
    with pytest.raises(GpuplanError, match="interleaved needs --virtual-stages"):
        api.train("llama-3.1-70b", pipeline_schedule="interleaved", zero=1, **kw)
    with pytest.raises(GpuplanError, match="1f1b runs one chunk"):
        api.train("llama-3.1-70b", pipeline_schedule="1f1b", virtual_stages=2, zero=1, **kw)
    inter = api.train("llama-3.1-70b", pipeline_schedule="interleaved", virtual_stages=2, zero=1, **kw).to_dict()
    plain = api.train("llama-3.1-70b", virtual_stages=2, zero=1, **kw).to_dict()
    assert inter["time"]["step_s"] == plain["time"]["step_s"]
