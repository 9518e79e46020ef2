"""LoRA/QLoRA plans: only layouts their launchers run (data parallel, tp = pp = 1), and QLoRA never at fp8 (its 4-bit
base computes in bf16), in plan train and train alike."""

from __future__ import annotations

import pytest

from gpuplan import api

pytest.importorskip("numpy")


def test_lora_options_are_data_parallel_with_a_launcher():
    record = api.plan_train("llama-3.1-8b", tokens="10B", gpu="h100", method="lora", top=30).to_dict()
    assert record["options"] and record["grid"]["tp"] == [1]
    for o in record["options"]:
        assert (o["layout"]["tp"], o["layout"]["pp"]) == (1, 1), o["layout"]
        assert o["launch"].get("peft"), o["launch"]


def test_qlora_at_fp8_is_not_supported():
    record = api.plan_train("llama-3.1-8b", tokens="10B", gpu="h100", method="qlora", precision="any", top=30).to_dict()
    assert record["options"] and record["pruned"]["not_supported"] > 0
    assert {o["precision"] for o in record["options"]} == {"bf16-mixed"}


def test_train_refuses_qlora_at_fp8(run):
    code, _, err = run("train", "llama-3.1-8b", "--gpu", "h100", "--method", "qlora", "--precision", "fp8-mixed")
    assert code == 2 and err.count("\n") == 1 and "bf16-mixed" in err
