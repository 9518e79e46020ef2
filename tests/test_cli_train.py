"""`gpuplan train`: the --json contract, exit codes, and every error path."""

from __future__ import annotations

import json

import pytest

from test_cli import one_line_error

MEMORY_KEYS = {
    "weights_bytes",
    "gradients_bytes",
    "optimizer_bytes",
    "activations_bytes",
    "other_bytes",
    "total_bytes",
    "capacity_bytes",
    "fits",
    "reasons",
    "max_micro_batch",
}


def test_train_json_contract(run):
    code, out, err = run("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3", "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["schema_version"] == 1 and rec["kind"] == "train"
    mem = rec["memory"]
    assert set(mem) >= MEMORY_KEYS
    assert mem["total_bytes"] == sum(
        mem[f"{g}_bytes"] for g in ("weights", "gradients", "optimizer", "activations", "other")
    )
    assert mem["fits"] == (mem["total_bytes"] <= mem["capacity_bytes"])
    assert mem["capacity_bytes"] == 85_520_809_984  # what nvidia-smi reports for an H100 SXM
    assert {"formula", "total_bytes", "min_gpus", "per_gpu_bytes"} <= set(rec["rule_of_thumb"])
    assert rec["rule_of_thumb"]["total_bytes"] == pytest.approx(8_030_261_248 * 18 * 1.25)
    names = {a["name"] for a in rec["assumptions"]}
    assert "cuda_context_bytes" in names and all(a["source"] for a in rec["assumptions"])
    assert rec["recipe"]["name"] == "deepspeed"


def test_train_table(run):
    code, out, _ = run(
        "train",
        "llama-3.1-70b",
        "--gpu",
        "h100",
        "--gpus",
        "64",
        "--tp",
        "8",
        "--pp",
        "4",
        "--sequence-parallel",
        "--zero",
        "1",
        "--global-batch",
        "128",
        "--seq-len",
        "8192",
    )
    assert code == 0
    for frag in (
        "memory per GPU (the busiest, pipeline stage first)",
        "layer_activations",
        "fits:",
        "rule of thumb",
        "Megatron-LM",
        "largest micro-batch that fits",
    ):
        assert frag in out, frag


def test_not_fitting_is_exit_3_with_the_report(run):
    code, out, _ = run("train", "llama-3.1-70b", "--gpu", "h100", "--json")
    rec = json.loads(out)
    assert code == 3 and rec["memory"]["fits"] is False and rec["memory"]["reasons"]
    # --require-fit, from before exit 3 was the default, is still accepted and changes nothing
    code, out, _ = run("train", "llama-3.1-70b", "--gpu", "h100", "--require-fit")
    assert code == 3 and "does not fit" in out


def test_qlora_and_assume(run):
    rec = json.loads(
        run(
            "train",
            "llama-65b",
            "--gpu",
            "rtx-a6000",
            "--method",
            "qlora",
            "--lora-rank",
            "64",
            "--lora-targets",
            "all-linear",
            "--recompute",
            "full",
            "--seq-len",
            "512",
            "--json",
        )[1]
    )
    assert rec["memory"]["fits"] and rec["job"]["quant"] == "nf4"
    more = json.loads(
        run(
            "train",
            "llama-65b",
            "--gpu",
            "rtx-a6000",
            "--method",
            "qlora",
            "--lora-rank",
            "64",
            "--lora-targets",
            "all-linear",
            "--recompute",
            "full",
            "--seq-len",
            "512",
            "--assume",
            "cuda_context_bytes=2GiB",
            "--json",
        )[1]
    )
    assert more["memory"]["total_bytes"] - rec["memory"]["total_bytes"] == 2 * 2**30 - 500 * 2**20


@pytest.mark.parametrize(
    "args,fragment",
    [
        (("--gpus", "12", "--tp", "8"), "gpus(12) is not divisible by tp(8) * pp(1) * cp(1) = 8"),
        (("--gpus", "8", "--micro-batch", "3", "--global-batch", "16"), "not divisible by micro-batch(3) * dp(8)"),
        (("--micro-batch", "-1"), "--micro-batch must be a whole number >= 1"),
        (("--seq-len", "0"), "--seq-len"),
        (("--precision", "fp8-mixed", "--gpu", "a100-sxm-80gb"), "no fp8"),
        (("--method", "lora", "--lora-targets", "qkv"), "unknown --lora-targets qkv"),
        (("--quant", "nf4"), "cannot keep them quantized"),
        (("--offload", "params", "--zero", "2", "--gpus", "2"), "needs --zero 3"),
        (("--fsdp", "--zero", "2"), "--fsdp is ZeRO-3"),
        (("--fsdp", "--stack", "deepspeed"), "--fsdp is PyTorch FSDP"),
        (("--assume", "warp_factor=9"), "NAME=VALUE"),
        (("--assume", "cuda_context_bytes=lots"), "cuda_context_bytes"),
        (("--gpu", "h10"), "unknown accelerator 'h10'"),
        (("--zero", "4"), "--zero"),
    ],
)
def test_train_bad_input(run, args, fragment):
    base = ["train", "llama-3.1-8b", "--gpu", "h100"]
    line = one_line_error(*run(*base, *args))
    assert fragment in line, line


def test_train_bare_count_and_lora_needs_architecture(run):
    rec = json.loads(run("train", "7.5B", "--gpu", "h100", "--gpus", "8", "--zero", "3", "--json")[1])
    assert rec["memory"]["activations_bytes"] == 0 and any("activations" in n for n in rec["notes"])
    assert "needs the architecture" in one_line_error(*run("train", "7.5B", "--gpu", "h100", "--method", "lora"))


def test_assumptions_show_the_matmul_efficiency_used_not_the_auto_sentinel(run):
    rec = json.loads(run("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--tokens", "1T", "--json")[1])
    (mm,) = [a for a in rec["assumptions"] if a["name"] == "matmul_efficiency"]
    assert mm["value"] == rec["time"]["matmul_efficiency"] > 0.5  # MAMF 80 % x shape factor 0.85 on an H100
    assert "MAMF" in mm["source"]


def test_train_json_carries_every_step_setting(run):
    """Issue 13: every setting of the step model is in the JSON layout/job record, as asked (auto/null: the stack's
    default, resolved in the time block); without --global-batch the accumulation is the batch rule's, so null."""
    code, out, err = run(
        "train", "llama-3.1-70b", "--gpu", "h100", "--gpus", "64", "--tp", "8", "--pp", "4",
        "--virtual-stages", "2", "--precision", "fp8-mixed", "--fp8-recipe", "tensorwise", "--stack", "megatron",
        "--tp-comm-overlap", "--no-overlap-grad-reduce", "--tokens", "1B", "--json",
    )  # fmt: skip
    assert code == 0, err
    rec = json.loads(out)
    assert rec["layout"]["virtual_stages"] == 2
    job = rec["job"]
    assert (job["stack"], job["fp8_recipe"], job["compile"]) == ("megatron", "tensorwise", False)
    assert (job["tp_comm_overlap"], job["overlap_grad_reduce"], job["fsdp"]) == (True, False, False)
    assert job["global_batch"] is None and job["grad_accumulation"] is None
    assert rec["time"]["stack"] == "megatron" and rec["time"]["global_batch"] >= 64 // (8 * 4)
    bf16 = json.loads(run("train", "llama-3.1-8b", "--gpu", "h100", "--global-batch", "8", "--json")[1])
    assert bf16["job"]["fp8_recipe"] is None and bf16["job"]["grad_accumulation"] == 8
