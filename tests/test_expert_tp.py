"""MoE parallel folding (issue #13 item 5): expert tensor parallelism (--etp) apart from tp, and ep folded over
tp x cp x dp as Megatron-Core lays its expert grid (parallel_state.py: world / (etp x ep x pp) expert-DP ranks)."""

from __future__ import annotations

import json

import pytest

from conftest import BUNDLED_ACCELERATORS, BUNDLED_MODELS
from gpuplan.errors import JobError, LayoutError
from gpuplan.estimate.memory import resolve_recipe, training_memory
from gpuplan.estimate.params import count_params
from gpuplan.estimate.steptime import StepAssumptions, training_step
from gpuplan.spec.training import Parallelism, TrainingJob

MIXTRAL = "mixtral-8x7b"  # 8 experts, top-2, 32 heads, expert width 14336
QWEN = "qwen3-30b-a3b"  # 128 experts, top-8, 32 heads, expert width 768
NO_LATENCY = StepAssumptions(collective_latency_s=0.0)  # collectives as pure volume over bandwidth


def _step(gpus: int, seq_len: int = 4096, **layout):
    """The step's parts per micro-batch (the layouts differ in dp, so in micro-batches per step)."""
    lay = Parallelism(gpus=gpus, zero=1, sequence_parallel=layout.get("tp", 1) > 1, **layout)
    job = TrainingJob(seq_len=seq_len, global_batch=64, recipe="megatron")
    model, gpu = BUNDLED_MODELS.get(MIXTRAL), BUNDLED_ACCELERATORS.get("h100-sxm-80gb")
    step = training_step(model, gpu, lay, job, NO_LATENCY)
    return {k: float(v) / step.micro_batches for k, v in step.parts.items()}


def _memory(gpus: int, zero: int, **layout):
    lay = Parallelism(gpus=gpus, zero=zero, sequence_parallel=layout.get("tp", 1) > 1, **layout)
    job = TrainingJob(seq_len=2048, recipe="megatron")
    model, gpu = BUNDLED_MODELS.get(QWEN), BUNDLED_ACCELERATORS.get("h100-sxm-80gb")
    return training_memory(model, gpu, lay, job, find_max_batch=False), lay, job


# ---------------------------------------------------------------------------------------------- the rule


def test_ep_larger_than_dp_folds_over_tp():
    """ep 16 on 16 GPUs with tp 2 (dp 8): Megatron-Core accepts it with etp 1 (16 x 1 divides 16)."""
    lay = Parallelism(gpus=16, tp=2, ep=16, etp=1)
    assert (lay.dp, lay.expert_tp, lay.expert_dp) == (8, 1, 1)
    assert "etp=1" in lay.describe()
    # etp unset follows tp, as Megatron-Core's --expert-tensor-parallel-size does: 16 x 2 does not divide 16
    with pytest.raises(LayoutError, match=r"ep\(16\) \* etp\(2, by default tp\) = 32 must divide .* set --etp 1"):
        Parallelism(gpus=16, tp=2, ep=16)
    assert Parallelism(gpus=16, tp=2, ep=4).expert_tp == 2


@pytest.mark.parametrize(
    ("layout", "fragment"),
    [
        (dict(gpus=16, tp=2, ep=3, etp=1), "choose an --ep that divides 16"),
        (dict(gpus=16, tp=2, pp=2, ep=4, etp=4), "ep(4) * etp(4) = 16 must divide gpus(16) / pp(2)"),
        (dict(gpus=8, tp=2, ep=2, etp=0), "--etp must be a whole number >= 1"),
    ],
)
def test_bad_fold_refused(layout, fragment):
    with pytest.raises(LayoutError) as e:
        Parallelism(**layout)
    assert fragment in str(e.value)


def test_etp_needs_experts_it_can_split():
    gpu = BUNDLED_ACCELERATORS.get("h100-sxm-80gb")
    job = TrainingJob(seq_len=2048)
    with pytest.raises(JobError, match="dense model; drop --etp"):
        training_memory(BUNDLED_MODELS.get("llama-3.1-8b"), gpu, Parallelism(gpus=8, tp=2, etp=1), job)
    with pytest.raises(JobError, match=r"etp\(5\) must divide"):  # 768 is not a multiple of 5
        training_memory(BUNDLED_MODELS.get(QWEN), gpu, Parallelism(gpus=10, tp=2, etp=5), job)


def test_cli_refuses_a_bad_fold_with_one_line(run):
    code, out, err = run("train", QWEN, "--gpu", "h100", "--gpus", "16", "--tp", "2", "--ep", "16")
    lines = err.strip().splitlines()
    assert code == 2 and out == ""
    assert len(lines) == 1 and lines[0].startswith("gpuplan: error: ") and "--etp" in lines[0], err


def test_json_layout_carries_etp(run):
    code, out, _ = run(
        "train", QWEN, "--gpu", "h100", "--gpus", "16", "--tp", "2", "--ep", "16", "--etp", "1", "--json"
    )
    assert code in (0, 3)
    lay = json.loads(out)["layout"]
    assert (lay["ep"], lay["etp"], lay["dp"], lay["tp"]) == (16, 1, 8, 2)
    code, out, _ = run("train", QWEN, "--gpu", "h100", "--gpus", "16", "--tp", "2", "--ep", "4", "--json")
    record = json.loads(out)
    assert record["layout"]["etp"] == 2  # defaulted to tp, and said so
    assert any("--etp" in n and "Megatron-Core's default" in n for n in record["notes"])


# ---------------------------------------------------------------------------------------------- memory


def test_expert_weights_per_gpu_split_over_ep_times_etp():
    """Without ZeRO each GPU holds experts / (ep x etp) of the routed experts; the dense part is the same."""
    w = {(ep, etp): _memory(16, 0, tp=2, ep=ep, etp=etp)[0].parts["weights"] for ep, etp in [(4, 1), (8, 1), (8, 2)]}
    w[(16, 1)], lay, job = _memory(16, 0, tp=2, ep=16, etp=1)
    w[(16, 1)] = w[(16, 1)].parts["weights"]
    bytes_per_param = resolve_recipe(job, lay)[0].weights
    experts = count_params(BUNDLED_MODELS.get(QWEN)).parts["experts"]
    assert w[(8, 2)] == pytest.approx(w[(16, 1)], rel=1e-12)  # both hold 1/16 of the experts
    assert w[(4, 1)] - w[(8, 1)] == pytest.approx(experts * (1 / 4 - 1 / 8) * bytes_per_param, rel=1e-9)
    assert w[(8, 1)] - w[(16, 1)] == pytest.approx(experts * (1 / 8 - 1 / 16) * bytes_per_param, rel=1e-9)


def test_distributed_optimizer_shards_experts_over_expert_dp():
    """ZeRO-1 shards expert states over expert-DP = gpus / (pp x ep x etp): experts / gpus per GPU whatever the
    fold, while the unsharded expert gradients follow ep x etp."""
    runs = {(ep, etp): _memory(16, 1, tp=2, ep=ep, etp=etp)[0] for ep, etp in [(4, 1), (8, 1), (8, 2), (16, 1)]}
    states = [r.parts["optimizer_states"] for r in runs.values()]
    assert states == pytest.approx([states[0]] * len(states), rel=1e-12)
    assert runs[(8, 2)].parts["gradients"] == pytest.approx(runs[(16, 1)].parts["gradients"], rel=1e-12)
    assert runs[(8, 1)].parts["gradients"] > runs[(8, 2)].parts["gradients"]


# ---------------------------------------------------------------------------------------------- step time


def test_expert_gemms_split_by_etp():
    """The FLOPs per GPU do not depend on the fold (compute-bound: same time); with few tokens per expert the GEMMs
    are memory-bound and a rank that reads 1/etp of its experts' weights is faster."""
    long_1, long_2 = _step(8, tp=1, ep=4, etp=1), _step(8, tp=1, ep=4, etp=2)
    assert long_2["matmul"] == pytest.approx(long_1["matmul"], rel=1e-9)
    short_1, short_2 = _step(8, seq_len=128, tp=1, ep=4, etp=1), _step(8, seq_len=128, tp=1, ep=4, etp=2)
    assert short_2["matmul"] < 0.8 * short_1["matmul"]


def test_expert_tp_collectives_sized_by_etp():
    """Without tp, only the experts' all-gather / reduce-scatter over etp remains: etp x k tokens' hidden states
    gathered, a ring's 2 (n - 1) / n of them. etp 4 against etp 2: 4 x 1.5 / (2 x 1) = 3 times the time."""
    assert "tp_comm" not in _step(8, tp=1, ep=4, etp=1)
    two, four = _step(8, tp=1, ep=4, etp=2)["tp_comm"], _step(8, tp=1, ep=2, etp=4)["tp_comm"]
    assert four / two == pytest.approx(3.0, rel=1e-9)


def test_all_to_all_volume():
    """A rank dispatches its own 1/tp of the tokens (the sequence-parallel shard) whatever etp is; the volume
    follows (ep - 1) / ep; an EP group strided by etp spreads over more nodes."""
    tp1, tp2 = _step(8, tp=1, ep=4, etp=1), _step(8, tp=2, ep=4, etp=1)
    assert tp2["moe_all_to_all"] == pytest.approx(tp1["moe_all_to_all"] / 2, rel=1e-9)
    assert _step(8, tp=1, ep=4, etp=2)["moe_all_to_all"] == pytest.approx(tp1["moe_all_to_all"], rel=1e-12)
    ep8 = _step(8, tp=1, ep=8, etp=1)["moe_all_to_all"]
    assert ep8 / tp1["moe_all_to_all"] == pytest.approx((7 / 8) / (3 / 4), rel=1e-9)
    # 16 GPUs, 8 per node: etp 1 keeps the 8 EP ranks on one node, etp 2 puts 4 of them on each of two nodes
    inside, across = _step(16, tp=1, ep=8, etp=1), _step(16, tp=1, ep=8, etp=2)
    assert across["moe_all_to_all"] > inside["moe_all_to_all"]


def test_table_shows_etp_only_where_it_differs_from_tp(run):
    base = ("train", QWEN, "--gpu", "h100", "--gpus", "16", "--tp", "2", "--sequence-parallel")
    code, out, _ = run(*base, "--ep", "16", "--etp", "1")
    assert code in (0, 3) and "ep=16 etp=1 +sp" in out
    code, out, _ = run(*base, "--ep", "4")
    assert code in (0, 3) and "ep=4 +sp" in out and "etp=" not in out


def test_unset_gpu_count_and_deadline_fit_the_fold(run):
    """Without --gpus the count is the fewest GPUs the fold divides; --deadline grows dp in whole folds."""
    code, out, _ = run("train", QWEN, "--gpu", "h100", "--tp", "2", "--ep", "8", "--etp", "1", "--json")
    assert code in (0, 3)
    assert {k: json.loads(out)["layout"][k] for k in ("gpus", "dp", "ep", "etp")} == dict(gpus=8, dp=4, ep=8, etp=1)
    code, out, _ = run("train", QWEN, "--gpu", "h100", "--ep", "8", "--tokens", "1e11", "--deadline", "2d", "--json")
    assert code in (0, 3)
    lay = json.loads(out)["layout"]
    assert lay["ep"] == 8 and lay["gpus"] > 8 and lay["gpus"] % 8 == 0


def test_plan_launch_lines_carry_the_chosen_etp():
    """``plan train`` searches expert TP and folded EP; each MoE option's launch lines carry its etp: Megatron-LM's
    --expert-tensor-parallel-size exactly where etp differs from tp (unset, it follows tp), torchtitan's
    expert_tensor_parallel_degree on every option with tp and ep > 1 (it defaults to 1), and no torchtitan line
    where torchtitan's mesh refuses the fold (etp neither 1 nor tp, or expert TP apart from tp without EP)."""
    import gpuplan
    from gpuplan.catalog.session import Catalogs

    found = gpuplan.plan_train(
        "mixtral-8x22b", tokens="1T", gpu="h100", max_gpus=512, objective="time", top=400, catalog=Catalogs(())
    ).search.options
    seen = set()
    for o in found:
        c = o.candidate
        etp = c.layout().expert_tp
        seen.add((etp == c.tp, etp == 1))
        if c.etp is None:
            assert "--expert-tensor-parallel-size" not in o.launch["megatron"] and etp == c.tp
        else:
            assert f"--expert-tensor-parallel-size {c.etp} " in o.launch["megatron"] and c.etp != c.tp
        titan = o.launch["torchtitan"]
        if etp not in (1, c.tp) or (c.ep == 1 and etp != c.tp):
            assert titan is None, o.launch
        elif titan is not None and c.ep > 1 and c.tp > 1:
            assert f"--parallelism.expert_tensor_parallel_degree {etp} " in titan
    # options with etp = tp > 1, etp = 1 < tp and 1 < etp < tp
    assert {(True, False), (False, True), (False, False)} <= seen


def test_web_api_takes_etp():
    pytest.importorskip("fastapi")
    from gpuplan import api
    from gpuplan.web import app

    train = next(e for e in app.ENDPOINTS if e.fn is api.train)
    query = {"model": QWEN, "gpu": "h100", "gpus": "16", "tp": "2", "ep": "16"}
    ok = app.call(train, {**query, "etp": "1"})
    assert ok.status_code == 200 and json.loads(ok.body)["layout"]["etp"] == 1
    bad = app.call(train, query)
    assert bad.status_code == 400 and "set --etp 1" in json.loads(bad.body)["error"]


def test_a_rank_reads_only_its_local_experts():
    """Expert parallelism leaves the FLOPs per GPU alone (compute-bound: same time) but a rank's grouped GEMM reads
    only its experts / ep experts' weights, each with the tokens of the ep ranks: memory-bound GEMMs get faster."""
    assert _step(8, tp=1, ep=4, etp=1)["matmul"] == pytest.approx(_step(8, tp=1, ep=1)["matmul"], rel=1e-9)
    assert _step(8, seq_len=128, tp=1, ep=4, etp=1)["matmul"] < 0.8 * _step(8, seq_len=128, tp=1, ep=1)["matmul"]
