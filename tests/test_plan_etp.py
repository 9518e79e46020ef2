"""``plan train`` over MoE parallel folding: expert tensor parallelism (etp: tp and its divisors) and EP folded over
tp x cp x dp (ep x etp divides gpus / pp, so ep may exceed dp). The folded candidates equal ``gpuplan.train`` on
their layout, the formulas on arrays equal plain numbers with etp and ep > dp, a dense model's grid keeps its
layouts, and ``--explain`` takes etp."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

import gpuplan
from gpuplan.catalog import resolve_model
from gpuplan.catalog.session import Catalogs
from gpuplan.spec.training import Parallelism, TrainingJob
from test_plan_search import assert_option_matches_train

CAT = Catalogs(())
#: the search (numpy arrays) and one layout (plain numbers) run the same IEEE-754 operations (test_plan_search.py)
REL = 1e-12


def _close(a: float, b: float, rel: float = REL) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b))


def _model(name: str):
    return resolve_model(name, CAT.models())


@pytest.fixture(scope="module")
def folded():
    """Searches whose options use every kind of fold: etp = 1 < tp, 1 < etp < tp, ep > dp, and with context
    parallelism (32k tokens) ep folded over cp."""
    return {
        "mixtral-8x22b": gpuplan.plan_train(
            "mixtral-8x22b", tokens="1T", gpu="h100", max_gpus=512, objective="time", top=400, catalog=CAT
        ),
        "qwen3-30b-a3b": gpuplan.plan_train(
            "qwen3-30b-a3b", tokens="1T", gpu="h100", seq_len=32768, max_gpus=256, top=400, catalog=CAT
        ),
        "deepseek-v2-lite": gpuplan.plan_train(
            "deepseek-v2-lite", tokens="200B", gpu="h100,b200", max_gpus=256, objective="time", top=300, catalog=CAT
        ),
    }


def test_expert_axes_of_the_grid(folded):
    """etp: tp first (Megatron-Core's default), then its divisors down to 1; ep: the powers of two up to 64 that
    divide the experts; a dense model keeps etp = tp and ep = 1, so its layouts are the ones searched before."""
    from gpuplan.estimate.memory import MemoryAssumptions
    from gpuplan.estimate.steptime import StepAssumptions
    from gpuplan.plan.search import _TrainGrid, cp_choices, etp_choices, pp_choices, virtual_stage_choices

    qwen, dense = _model("qwen3-30b-a3b"), _model("llama-3.1-70b")
    assert [etp_choices(qwen, tp) for tp in (1, 2, 4, 8)] == [[1], [2, 1], [4, 2, 1], [8, 4, 2, 1]]
    assert etp_choices(dense, 8) == [8]
    grid = folded["qwen3-30b-a3b"].search.grid
    assert grid["ep"] == [1, 2, 4, 8, 16, 32, 64]  # 128 experts
    assert grid["etp"] == {"1": [1], "2": [2, 1], "4": [4, 2, 1], "8": [8, 4, 2, 1]}
    assert folded["mixtral-8x22b"].search.grid["ep"] == [1, 2, 4, 8]  # 8 experts
    job = TrainingJob(seq_len=8192)
    g = _TrainGrid(dense, job, 1e12, None, 1024, None, None, MemoryAssumptions(), StepAssumptions())
    assert (g.etp == g.tp).all() and (g.ep == 1).all()
    per_tp = sum(len(virtual_stage_choices(dense.layers, pp)) for pp in pp_choices(dense.layers))
    assert len(g.tp) == len(g.tps) * per_tp * len(cp_choices(8192, True))
    record = gpuplan.plan_train("llama-3.1-8b", tokens="1B", gpu="h100", gpus=8, catalog=CAT).to_dict()
    assert record["grid"]["etp"] is None and record["grid"]["ep"] == [1]
    assert {o["layout"]["etp"] for o in record["options"]} == {None}


def test_folded_options_follow_the_rule_and_equal_train(folded):
    """Every option obeys the fold (ep divides the experts, ep x etp divides gpus / pp) and the sample of each kind
    of fold equals gpuplan.train on its layout, offer and etp: time, cost, MFU, step time and peak memory to 1e-12."""
    rng = random.Random(2504)
    kinds: dict[str, list] = {"etp 1 < tp": [], "1 < etp < tp": [], "ep > dp": [], "ep > dp, cp > 1": []}
    for model, report in folded.items():
        spec = _model(model)
        seq_len = report.search.grid["seq_len"]
        for opt in report.search.options:
            c = opt.candidate
            lay = c.layout()  # Parallelism checks the fold itself
            etp = lay.expert_tp
            assert spec.moe.experts % c.ep == 0 and (c.gpus // c.pp) % (c.ep * etp) == 0
            assert (c.etp is None) == (etp == c.tp)  # etp = tp is left unset, as train takes it without --etp
            if etp == 1 < c.tp:
                kinds["etp 1 < tp"].append((model, seq_len, opt))
            if 1 < etp < c.tp:
                kinds["1 < etp < tp"].append((model, seq_len, opt))
            if c.ep > lay.dp:
                kinds["ep > dp, cp > 1" if c.cp > 1 else "ep > dp"].append((model, seq_len, opt))
    assert all(kinds.values()), {k: len(v) for k, v in kinds.items()}
    for picked in kinds.values():
        for model, seq_len, opt in rng.sample(picked, min(5, len(picked))):
            c = opt.candidate
            t = gpuplan.train(model, tokens=opt_tokens(model), seq_len=seq_len, catalog=CAT, **c.train_kwargs())
            assert t.memory.fits and t.to_dict()["layout"]["etp"] == c.layout().expert_tp
            assert_option_matches_train(opt, t)


def opt_tokens(model: str) -> float:
    return 200e9 if model == "deepseek-v2-lite" else 1e12


def test_formulas_on_arrays_equal_plain_numbers_with_expert_tp_and_folded_ep():
    """Memory and step time on arrays of layouts with their own etp and ep (ep > dp included) equal each layout
    alone: 24 groups of 8 random folded layouts of the MoE models, a group sharing what the formulas branch on."""
    import numpy as np

    from gpuplan.estimate.memory import MemoryAssumptions, busiest_total_bytes, training_memory
    from gpuplan.estimate.steptime import StepAssumptions, training_step
    from gpuplan.plan.search import etp_choices
    from gpuplan.spec.training import ParallelismGrid, TrainingJobGrid

    rng = random.Random(13)
    gpu = CAT.accelerators().get("h100")
    seen = set()
    for _ in range(24):
        spec = _model(rng.choice(("mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v2-lite", "gpt-oss-20b")))
        zero, fsdp = rng.choice(((1, False), (3, True), (0, False)))
        pp = rng.choice((1, 2))
        recompute = rng.choice(("none", "selective", "full"))
        job = TrainingJob(seq_len=rng.choice((2048, 4096)), recompute=recompute, fsdp=fsdp)
        group = []
        while len(group) < 8:
            tp = rng.choice([t for t in (2, 4, 8) if spec.attention_heads % t == 0])
            etp = rng.choice(etp_choices(spec, tp))
            dp = rng.choice((1, 2, 4, 8))
            room = tp * dp  # ep x etp divides gpus / pp = tp x dp (cp 1)
            eps = [e for e in (1, 2, 4, 8, 16, 32, 64) if spec.moe.experts % e == 0 and room % (e * etp) == 0]
            ep = rng.choice(eps)
            layout = Parallelism(gpus=tp * pp * dp, tp=tp, pp=pp, ep=ep, etp=etp, sequence_parallel=True, zero=zero)
            mb = rng.choice((1, 2))
            group.append((layout, replace(job, micro_batch=mb, global_batch=mb * dp * rng.choice((4, 16)))))
            seen.add((etp == tp, etp == 1, ep > dp))
        lay = ParallelismGrid(
            **{k: np.array([getattr(m[0], k) for m in group]) for k in ("gpus", "tp", "pp", "ep", "etp")},
            sequence_parallel=True,
            zero=zero,
        )
        values = {f: getattr(job, f) for f in job.__dataclass_fields__}
        values.update(
            micro_batch=np.array([m[1].micro_batch for m in group]),
            global_batch=np.array([m[1].global_batch for m in group]),
        )
        jobs = TrainingJobGrid(**values)
        memory = busiest_total_bytes(spec, gpu, lay, jobs, MemoryAssumptions())
        step = training_step(spec, gpu, lay, jobs, StepAssumptions())
        for i, (layout, one) in enumerate(group):
            single = training_step(spec, gpu, layout, one, StepAssumptions())
            assert _close(memory[i], training_memory(spec, gpu, layout, one, find_max_batch=False).total_bytes)
            assert _close(step.iteration_s[i], single.iteration_s), (layout, one)
            assert _close(step.mfu[i], single.mfu), (layout, one)
    assert {(True, False, False), (False, True, True), (False, False, False), (False, True, False)} <= seen


def test_explain_takes_etp(folded):
    """``--explain`` with etp: a shown option with its own etp ranks at its place; an etp the grid lacks is outside
    it; ep x etp that does not divide a stage's GPUs is layout_does_not_divide; a dense model's layout reads etp
    null."""
    report = folded["mixtral-8x22b"]
    record = report.to_dict()
    i, o = next((i, o) for i, o in enumerate(record["options"], 1) if o["layout"]["etp"] != o["layout"]["tp"])
    lay = o["layout"]
    keys = ("tp", "pp", "dp", "cp", "virtual_stages", "ep", "etp", "zero", "fsdp", "micro_batch", "recompute")
    text = ",".join(f"{k}={str(lay[k]).lower()}" for k in keys) + f",gpu={o['gpu']}"
    if lay["recompute_layers"] is not None:
        text += f",recompute_layers={lay['recompute_layers']}"
    kwargs = dict(tokens="1T", gpu="h100", max_gpus=512, objective="time", top=400, catalog=CAT)
    e = gpuplan.plan_train("mixtral-8x22b", explain=text, **kwargs).to_dict()["explain"]
    assert e["status"] == "option" and e["in_grid"] and 1 <= e["rank"] <= i, e
    assert e["layout"]["etp"] == lay["etp"]
    e = gpuplan.plan_train("mixtral-8x22b", explain="tp=4,pp=8,dp=4,ep=8,etp=8", **kwargs).to_dict()["explain"]
    assert any(w.startswith("etp=8 is not searched with tp=4") for w in e["outside_grid"]), e
    # 32 GPUs, pp 2: a stage has 16; ep 8 x etp 4 = 32 does not divide it
    e = gpuplan.plan_train("mixtral-8x22b", explain="tp=4,pp=2,dp=4,ep=8,etp=4", **kwargs).to_dict()["explain"]
    assert e["pruned"] == "layout_does_not_divide" and "ep x etp" in e["pruned_why"], e
    dense = gpuplan.plan_train("llama-3.1-8b", tokens="1B", gpu="h100", gpus=8, explain="tp=2,dp=4", catalog=CAT)
    assert dense.to_dict()["explain"]["layout"]["etp"] is None
