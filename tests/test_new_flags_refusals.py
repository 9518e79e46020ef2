"""Bad and edge inputs on this session's flags (a review's findings, issue 13): each refused with one line and exit
2, or priced consistently across the memory and step-time estimates."""

from __future__ import annotations

import json

import pytest

from test_cli import one_line_error


@pytest.mark.parametrize(
    "args, words",
    [
        (("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--stack", "deepspeed-2021", "--fsdp"), "--zero 3"),
        (("train", "llama-3.1-8b", "--gpu", "tpu-v5p", "--gpus", "16", "--zero", "3", "--optimizer", "adamw-8bit"),
         "bitsandbytes"),
        (("train", "llama-3.1-8b", "--gpu", "tpu-v5p", "--gpus", "16", "--zero", "3", "--offload", "optimizer"),
         "ZeRO-Offload"),
        (("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3", "--virtual-stages", "2"), "--pp > 1"),
        (("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--tp", "8", "--stack", "megatron-2021",
          "--tp-comm-overlap"), "--stack megatron"),
        (("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--stack", "megatron-2021", "--precision",
          "fp8-mixed"), "Transformer Engine"),
        (("plan", "train", "llama-3.1-8b", "--tokens", "1B", "--gpu", "b200", "--explain", "gpus=8,stack=bogus"),
         "stack must be one of"),
        (("plan", "train", "llama-3.1-8b", "--tokens", "1B", "--gpu", "b200", "--explain",
          "gpus=8,precision=fp4-mixed"), "does not search fp4-mixed"),
    ],
)  # fmt: skip
def test_refused_with_one_line(run, args, words):
    assert words in one_line_error(*run(*args))


def test_fp4_tail_share_moves_memory_and_time_together(run):
    recs = {}
    for frac in ("0", "1"):
        code, out, err = run(
            "train", "llama-3.1-8b", "--gpu", "b200", "--gpus", "8", "--fsdp", "--precision", "fp4-mixed",
            "--tokens", "1B", "--assume", f"fp4_bf16_tail_fraction={frac}", "--json",
        )  # fmt: skip
        assert code == 0, err
        recs[frac] = json.loads(out)
    parts = {f: {p["name"]: p["bytes"] for p in r["memory"]["parts"]} for f, r in recs.items()}
    assert parts["0"]["fp4_weight_copies"] > 0 and "fp4_weight_copies" not in parts["1"]
    assert parts["1"]["layer_activations"] > parts["0"]["layer_activations"]  # bf16 inputs saved, not fp4 codes
    assert recs["1"]["time"]["step_s"] > recs["0"]["time"]["step_s"]
    assert any("the last 32 of 32" in n for n in recs["1"]["notes"])
    assert not any("the last 5 of 32" in n for n in recs["1"]["notes"])


def test_tp_wider_than_the_nvlink_domain_crosses_the_network(run):
    base = ("train", "llama-3.1-70b", "--gpu", "h100", "--gpus", "64", "--tp", "8", "--pp", "2", "--zero", "1",
            "--stack", "megatron", "--tokens", "1B", "--json")  # fmt: skip
    wide = json.loads(run(*base)[1])
    split = json.loads(run(*base, "--assume", "nvlink_domain_gpus=4")[1])
    assert split["time"]["step_parts_s"]["tp_comm"] > 2 * wide["time"]["step_parts_s"]["tp_comm"]
    assert wide["layout"]["etp"] is None  # a dense model has no experts to split
