"""Golden --json records for reference commands: the contract scripts rely on must not drift silently.

Regenerate after an intended change with: GPUPLAN_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py
and review the diff. gpus_show_h100-sxm-80gb was retaken when issue #15 added the accelerator keys
attention_flops_per_s and fp16_accumulate_factor (null on the H100): the diff was those two lines only; and again
when tensor_flops_per_clock_per_sm, exp2_per_clock_per_sm and host_link_bytes_per_s came (null on the H100, which
has Hopper's defaults and a PCIe host link): those three lines only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
CASES = {
    "model_show_llama-3.1-8b": ["model", "show", "llama-3.1-8b", "--json"],
    "model_show_deepseek-v3": ["model", "show", "deepseek-v3", "--json"],
    "model_show_7.5B": ["model", "show", "7.5B", "--json"],
    "gpus_show_h100-sxm-80gb": ["gpus", "show", "h100-sxm-80gb", "--json"],
}


@pytest.mark.parametrize("name", CASES)
def test_golden_json(run, name):
    code, out, err = run(*CASES[name])
    assert code == 0, err
    got = json.loads(out)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("GPUPLAN_UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=2) + "\n")
    assert got == json.loads(path.read_text())
