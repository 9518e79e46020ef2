"""``train --moe-dispatcher deepep``: a token crosses the network once per other node holding one of its experts
and NVLink once per rank (DeepSeek-V3 section 3.2.2, DeepEP's dispatch layout), against the all-to-all's copy per
routed expert."""

from __future__ import annotations

import json
from math import comb

import numpy as np
import pytest

from gpuplan import api
from gpuplan.errors import GpuplanError
from gpuplan.estimate.steptime import expected_groups_hit


@pytest.mark.parametrize(("experts", "k", "groups"), [(256, 8, 32), (256, 8, 4), (128, 8, 8), (64, 6, 16), (8, 2, 8)])
def test_expected_groups_hit_is_the_hypergeometric_mean(experts, k, groups):
    """groups x (1 - C(E - E/g, k) / C(E, k)), exactly; and on an array of group counts alike."""
    exact = groups * (1 - comb(experts - experts // groups, k) / comb(experts, k))
    assert expected_groups_hit(experts, k, groups) == pytest.approx(exact, rel=1e-12)
    arr = expected_groups_hit(experts, k, np.array([float(groups), 1.0]))
    assert arr[0] == pytest.approx(exact, rel=1e-12) and arr[1] == pytest.approx(1.0)


def _a2a(dispatcher: str, **kw) -> float:
    base = dict(model="deepseek-v3", gpu="b200", gpus=256, pp=8, ep=32, micro_batch=1, global_batch=4096)
    base.update(seq_len=4096, precision="fp8-mixed", recipe="megatron", zero=1, recompute="full")
    # without the per-collective latency, the exchange is its bytes over the link that bounds it
    assume = {"collective_latency_s": 0.0}
    r = api.train(**{**base, **kw}, moe_dispatcher=dispatcher, tokens=1e9, offline=True, assume=assume)
    return r.plan.step.parts["moe_all_to_all"]


def test_deepep_sends_a_token_once_per_node_over_the_network():
    """DeepSeek-V3, ep 32 over four 8-GPU nodes: the all-to-all sends 31/32 of its 8 copies to peers, 24 of the 31
    off the node (6 copies over the network); DeepEP, one per other node its experts land on, 2.71 of 3: 2.2x less,
    and its NVLink share (7.27 ranks at 900 GB/s) is not the bound there."""
    plain, deepep = _a2a("alltoall"), _a2a("deepep")
    remote = 3 * (1 - comb(256 - 64, 8) / comb(256, 8))
    assert plain / deepep == pytest.approx(8 * (31 / 32) * (24 / 31) / remote, rel=1e-9)


def test_flag_end_to_end(run):
    args = ["train", "deepseek-v3", "--gpu", "b200", "--gpus", "256", "--pp", "8", "--ep", "32", "--zero", "1"]
    code, out, _ = run(*args, "--recompute", "full", "--moe-dispatcher", "deepep", "--json")
    assert code in (0, 3) and json.loads(out)["job"]["moe_dispatcher"] == "deepep"
    code, out, _ = run("train", "llama-3.1-8b", "--gpu", "h100", "--json")
    assert json.loads(out)["job"]["moe_dispatcher"] is None  # a dense model has no dispatcher
    for bad, says in (
        (["train", "llama-3.1-8b", "--gpu", "h100", "--moe-dispatcher", "deepep"], "dense model"),
        (["train", "mixtral-8x7b", "--gpu", "h100", "--gpus", "8", "--moe-dispatcher", "deepep"], "--ep 1"),
        (["train", "mixtral-8x7b", "--gpu", "h100", "--moe-dispatcher", "nccl"], "nccl"),
    ):
        code, _, err = run(*bad)
        assert code == 2 and says in err and "Traceback" not in err


def test_api_refuses_with_one_error():
    with pytest.raises(GpuplanError, match="dense model"):
        api.train(model="llama-3.1-8b", gpu="h100", moe_dispatcher="deepep", offline=True)
