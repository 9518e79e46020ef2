"""MoE step-time terms of issue 13 item 5 beyond the all-to-all's volume: the token permutation around the experts,
load imbalance, fp8 dispatch and the all-to-all run beside another micro-batch's compute (--ep-comm-overlap)."""

from __future__ import annotations

import json

import pytest

import gpuplan
from gpuplan.estimate.steptime import FP8_DISPATCH_BYTES_PER_ELEMENT, StepAssumptions, moe_permute_bytes
from test_cli import one_line_error

BASE = dict(gpu="h100", gpus=8, ep=8, micro_batch=1, global_batch=64, seq_len=4096, tokens="1B", zero=1)


def _report(model="qwen3-30b-a3b", **kw):
    return gpuplan.train(model, **{**BASE, **kw}, offline=True)


def test_permute_bytes_alltoall_dispatcher():
    r = _report()
    model, layout = r.model, r.layout
    moe = model.moe
    k, h = moe.experts_per_token, model.hidden_size
    tokens = 4096.0
    got = moe_permute_bytes(model, layout, tokens, 2.0, StepAssumptions())
    # fused permute + unpermute: (2 + 2k) h bytes per token; more than one local expert: the received k copies
    # regrouped before and after the experts, 4 h bytes each
    assert moe.experts // 8 > 1
    assert got == pytest.approx(tokens * (2 + 2 * k) * h * 2 + 4 * tokens * k * h * 2, rel=1e-12)
    # a deduplicating dispatcher (DeepEP): read m copies, write k rows, and back
    dedup = moe_permute_bytes(model, layout, tokens, 2.0, StepAssumptions(moe_dispatch_ranks_per_token=2.0))
    assert dedup == pytest.approx(tokens * 2 * (2 + k) * h * 2, rel=1e-12)


def test_fp8_dispatch_halves_two_of_four_exchanges():
    quiet = {"collective_latency_s": 0.0}
    bf16 = _report(assume=quiet).plan.step.parts["moe_all_to_all"]
    fp8 = _report(assume=quiet, moe_dispatch_dtype="fp8").plan.step.parts["moe_all_to_all"]
    # forward dispatch and the backward's gradient into the experts in fp8 + fp32 scale per 128; the other two 16-bit
    r = FP8_DISPATCH_BYTES_PER_ELEMENT / 2
    assert fp8 / bf16 == pytest.approx((1 + r) / 2, rel=1e-9)
    assert 0.75 < fp8 / bf16 < 0.76


def test_load_imbalance_scales_exchange_and_expert_work():
    quiet = {"collective_latency_s": 0.0}
    even = _report(assume=quiet).plan.step.parts
    skew = _report(assume={**quiet, "moe_load_imbalance": 2.0}).plan.step.parts
    assert skew["moe_all_to_all"] == pytest.approx(2 * even["moe_all_to_all"], rel=1e-9)
    assert skew["matmul"] > even["matmul"]  # the busiest rank's grouped GEMMs
    assert skew["moe_permute"] > even["moe_permute"]
    for k in ("attention", "elementwise"):
        assert skew[k] == pytest.approx(even[k], rel=1e-12)


def test_ep_comm_overlap_hides_paired_micro_batches():
    # one node, ep 8 over NVLink: each layer's compute outlasts its exchange, so every micro-batch with a partner
    # hides its exchange; of m = 8 micro-batches the first has none (pp = 1): 1/8 of the exchange stays
    plain = _report(recompute="selective").plan.step
    over = _report(recompute="selective", ep_comm_overlap=True).plan.step
    m = 64 // 8
    assert over.parts["moe_all_to_all"] == pytest.approx(plain.parts["moe_all_to_all"] / m, rel=1e-9)
    hidden = plain.parts["moe_all_to_all"] * (1 - 1 / m)
    extra = over.parts["comm_sm_contention"] - plain.parts.get("comm_sm_contention", 0.0)
    assert extra == pytest.approx(hidden * 20 / 132, rel=1e-9)
    # one micro-batch per step: nothing to pair with
    one = _report(recompute="selective", global_batch=8).plan.step
    one_over = _report(recompute="selective", global_batch=8, ep_comm_overlap=True).plan.step
    assert one_over.parts["moe_all_to_all"] == pytest.approx(one.parts["moe_all_to_all"], rel=1e-9)


@pytest.mark.parametrize(
    "args, words",
    [
        (("llama-3.1-8b", "--gpu", "h100", "--ep-comm-overlap"), "dense model"),
        (("llama-3.1-8b", "--gpu", "h100", "--moe-dispatch-dtype", "fp8"), "dense model"),
        (("qwen3-30b-a3b", "--gpu", "h100", "--gpus", "8", "--ep-comm-overlap"), "--ep > 1"),
        (("qwen3-30b-a3b", "--gpu", "h100", "--gpus", "8", "--ep", "8", "--ep-comm-overlap", "--recompute", "full"),
         "--recompute selective"),
        (("qwen3-30b-a3b", "--gpu", "h100", "--gpus", "8", "--ep", "8", "--assume", "moe_load_imbalance=0.5"),
         "moe_load_imbalance"),
    ],
)  # fmt: skip
def test_refused(run, args, words):
    assert words in one_line_error(*run("train", *args))


def test_json_job_carries_moe_settings(run):
    code, out, err = run("train", "qwen3-30b-a3b", "--gpu", "h100", "--gpus", "8", "--ep", "8", "--recompute",
                         "selective", "--ep-comm-overlap", "--moe-dispatch-dtype", "fp8", "--json")  # fmt: skip
    assert code in (0, 3), err  # 3: a valid plan that does not fit; the record is printed all the same
    job = json.loads(out)["job"]
    assert job["ep_comm_overlap"] is True and job["moe_dispatch_dtype"] == "fp8"
    code, out, err = run("train", "llama-3.2-1b", "--gpu", "h100", "--json")
    assert code == 0, err
    job = json.loads(out)["job"]
    assert job["ep_comm_overlap"] is None and job["moe_dispatch_dtype"] is None


def test_lora_expert_adapters_run_on_the_busiest_rank_too():
    """The adapters of the routed experts see the rows the experts' GEMMs see: with moe_load_imbalance the busiest
    rank's adapter branches (their GEMMs and their element-wise sum into the base output) grow with its tokens, as the
    base expert GEMMs do; nothing element-wise of full training depends on the imbalance."""
    quiet = {"collective_latency_s": 0.0}
    lora = dict(method="lora", lora_targets="all-linear", recompute="selective")

    def parts(imbalance, **kw):
        return _report(assume={**quiet, "moe_load_imbalance": imbalance}, **kw).plan.step.parts

    assert parts(2.0, **lora)["elementwise"] > parts(1.0, **lora)["elementwise"]
    assert parts(2.0, recompute="selective")["elementwise"] == pytest.approx(
        parts(1.0, recompute="selective")["elementwise"], rel=1e-12
    )
