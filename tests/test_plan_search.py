"""gpuplan plan train / plan serve (issue 16, version 1): the search agrees with the single-layout commands,
counts every candidate once, honours the constraints and its launch hints give back the layout."""

from __future__ import annotations

import json
import random
import shlex
from dataclasses import replace

import pytest

import gpuplan
from gpuplan.catalog.session import Catalogs
from gpuplan.cli.main import main
from gpuplan.estimate.memory import training_memory
from gpuplan.spec.choices import PlanPrune
from gpuplan.spec.training import Parallelism, TrainingJob

CAT = Catalogs(())


def _model70():
    from gpuplan.catalog import resolve_model

    return resolve_model("llama-3.1-70b", CAT.models())


@pytest.fixture(scope="module")
def plan70():
    return gpuplan.plan_train(
        "llama-3.1-70b", tokens="2T", deadline="60d", gpu="h100", max_gpus=1024, top=40, catalog=CAT
    )


@pytest.fixture(scope="module")
def plan405():
    return gpuplan.plan_train(
        "llama-3.1-405b", tokens="15.6T", gpus=16384, gpu="h100", seq_len=8192, objective="time", top=5, catalog=CAT
    )


#: The issue's tolerance between the search (numpy arrays) and one layout (plain numbers): the same formulas,
#: so the same IEEE-754 operations; 1e-12 leaves room for a summation order, nothing more.
REL = 1e-12


def _close(a: float, b: float, rel: float = REL) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b))


def _agrees_with_train(
    opt, model: str, tokens: float, seq_len: int, precision: str | None = "bf16-mixed", **method: object
) -> None:
    """``opt`` equals ``gpuplan.train`` on its layout, offer and precision (``precision``: the one the search was
    asked for; None where it searched several); ``method``: the search's --method/--lora-* keywords."""
    c = opt.candidate
    assert precision is None or c.precision == precision
    t = gpuplan.train(model, tokens=tokens, seq_len=seq_len, catalog=CAT, **method, **c.train_kwargs())
    assert t.memory.fits
    assert_option_matches_train(opt, t)


def assert_option_matches_train(opt, t) -> None:
    """A plan option's time, cost, MFU, step time and peak memory equal those of ``train`` on its layout (to REL)."""
    c = opt.candidate
    for got, want in (
        (c.time_s, t.plan.time.seconds),
        (c.cost_usd, t.plan.usd),
        (c.mfu, t.plan.time.mfu),
        (c.step_s, t.plan.step.iteration_s),
        (opt.peak_memory_bytes, t.memory.total_bytes),
    ):
        assert _close(got, want), (c, got, want)


def test_options_equal_train_on_their_layout(plan70, plan405):
    rng = random.Random(16)
    for opt in rng.sample(plan70.search.options, 6):
        _agrees_with_train(opt, "llama-3.1-70b", 2e12, plan70.search.grid["seq_len"])
    _agrees_with_train(plan405.search.options[0], "llama-3.1-405b", 15.6e12, 8192)


#: Models of every shape the formulas branch on: dense (gated and plain MLP, learned positions), GQA, sliding
#: windows, MoE (with shared experts and dense layers), MLA.
RANDOM_MODELS = (
    "llama-3.1-8b",
    "llama-3.1-70b",
    "gpt3-1.3b",
    "gemma-2-9b",
    "qwen2.5-7b",
    "mixtral-8x7b",
    "qwen3-30b-a3b",
    "deepseek-v2-lite",
)
RANDOM_GPUS = ("h100-sxm-80gb", "a100-sxm-80gb", "a100-sxm-40gb", "h200-sxm-141gb", "b200", "l4", "l40s", "a10g")


def test_search_equals_train_on_random_configurations():
    """Random searches (model, GPUs, precision, sequence length, global batch, objective, largest count); options
    picked at random from each, every one through gpuplan.train on its layout and offer: time, cost, MFU, step
    time and peak memory agree to a relative 1e-12 (10 configurations x 6 options). Where fp8-mixed is drawn
    the search is asked for --precision any (bf16-mixed and fp8-mixed on one grid; each option is checked at its own
    precision), and every third configuration fine-tunes with LoRA (--method lora, a drawn rank and targets)."""
    rng = random.Random(1612)
    tuning = random.Random(1613)  # the method's own draws: the layout draws above stay as they were
    checked = []
    methods = []
    for i in range(10):
        model = rng.choice(RANDOM_MODELS)
        precision = rng.choice(("bf16-mixed", "bf16-mixed", "fp8-mixed"))
        asked = "any" if precision == "fp8-mixed" else precision
        method = (
            dict(
                method="lora",
                lora_rank=tuning.choice((8, 64)),
                lora_targets=tuning.choice(("q_proj,v_proj", "all-linear")),
            )
            if i % 3 == 2
            else {}
        )
        seq_len = rng.choice((1024, 2048, 4096))
        kwargs = dict(
            gpu=",".join(rng.sample(RANDOM_GPUS, 3)),
            precision=asked,
            seq_len=seq_len,
            global_batch=rng.choice((None, None, 256, 1024)),
            objective=rng.choice(("cost", "time", "gpus")),
            max_gpus=rng.choice((64, 512, 2048)),
            top=60,
        )
        found = gpuplan.plan_train(model, tokens="200B", catalog=CAT, **kwargs, **method).search.options
        for opt in rng.sample(found, min(6, len(found))):
            _agrees_with_train(opt, model, 200e9, seq_len, None if asked == "any" else precision, **method)
            checked.append(opt.candidate)
            methods.append(method.get("method", "full"))
    assert len(checked) >= 40
    assert {c.precision for c in checked} == {"bf16-mixed", "fp8-mixed"} and set(methods) == {"full", "lora"}
    # the sample reaches the branches: pipelines, tensor parallelism, every kind of sharding, recomputation
    assert {c.pp > 1 for c in checked} == {True, False} and {c.tp > 1 for c in checked} == {True, False}
    assert len({c.sharding for c in checked}) >= 3 and len({c.recompute for c in checked}) >= 2
    assert {c.virtual_stages > 1 for c in checked} == {True, False}


def test_interleaving_and_context_parallelism_equal_train():
    """Long sequences: the search's options with context parallelism and interleaved stages agree with
    gpuplan.train on their layout (--cp, --virtual-stages), and the grid offers cp only where it divides the
    sequence and interleaving only where the busiest stage's layers split evenly."""
    from gpuplan.plan.search import CP_MIN_SEQ_LEN, cp_choices, virtual_stage_choices

    r = gpuplan.plan_train(
        "llama-3.1-8b", tokens="100B", gpu="h100,a100-sxm-80gb", seq_len=32768, max_gpus=256, top=400, catalog=CAT
    )
    s = r.search
    assert s.grid["cp"] == [1, 2, 4, 8, 16] and s.grid["virtual_stages"]["8"] == [1, 2, 4]  # 32 layers: 4 per stage
    rng = random.Random(32)
    picked = {}
    for opt in s.options:
        c = opt.candidate
        picked.setdefault((c.cp > 1, c.virtual_stages > 1), []).append(opt)
    assert set(picked) == {(False, False), (True, False), (False, True), (True, True)}
    for opts in picked.values():
        for opt in rng.sample(opts, min(3, len(opts))):
            c = opt.candidate
            assert 32768 % c.cp == 0 and c.gpus % (c.tp * c.pp * c.cp) == 0
            _agrees_with_train(opt, "llama-3.1-8b", 100e9, 32768)
            mg = _megatron_args(opt.launch["megatron"])
            assert int(mg.get("--context-parallel-size", 1)) == c.cp
            assert int(mg.get("--num-virtual-stages-per-pipeline-rank", 1)) == c.virtual_stages
    # the rules themselves
    assert cp_choices(CP_MIN_SEQ_LEN // 2, True) == [1] and cp_choices(CP_MIN_SEQ_LEN, False) == [1]
    assert cp_choices(3 * 8192, True) == [1, 2, 4, 8, 16] and cp_choices(16384 + 4, True) == [1, 2, 4]
    assert virtual_stage_choices(80, 1) == [1] and virtual_stage_choices(80, 8) == [1, 2]
    assert virtual_stage_choices(126, 16) == [1, 2, 4, 8]  # Llama 3 405B: 8 layers on the busiest stage


def test_interleaving_costs_activation_memory():
    """Under the interleaved schedule the first stage holds pp + (pp - 1) / v micro-batches of its layers'
    activations (Korthikanti et al. 2022, 4.2.3) instead of pp: more memory, capped by the micro-batches per step."""
    spec = _model70()
    gpu = CAT.accelerators().get("h100")
    job = TrainingJob(seq_len=4096, micro_batch=1, global_batch=64)
    lay = Parallelism(gpus=64, tp=8, pp=8, sequence_parallel=True, zero=1)
    act = {}
    for v in (1, 2, 5):
        mem = training_memory(spec, gpu, replace(lay, virtual_stages=v), job, find_max_batch=False)
        act[v] = mem.group_bytes("activations")
    per_mb = act[1] / 8  # 1F1B: pp = 8 micro-batches in flight (64 / dp 1 = 64 per step)
    assert act[2] == pytest.approx(per_mb * (8 + 7 / 2), rel=1e-9)
    assert act[5] == pytest.approx(per_mb * (8 + 7 / 5), rel=1e-9)
    few = replace(job, global_batch=4)  # 4 micro-batches per step: all of them, however many chunks
    assert training_memory(spec, gpu, replace(lay, virtual_stages=2), few, find_max_batch=False).group_bytes(
        "activations"
    ) == pytest.approx(per_mb * 4, rel=1e-9)


def test_searched_covers_the_documented_grid():
    """At one fixed count, ``searched`` is the documented grid, counted here from docs/plan.md's rules: tp 1-8; pp the
    divisors of the layers and powers of two up to 64; virtual stages 1, 2, 4, 8 splitting the busiest stage evenly;
    cp 1, 2, 4, 8, 16 dividing a sequence of 16k tokens or more; sharding (five for pure data parallelism, two
    otherwise) x its (offload, recompute) rungs x five micro-batches, once per hardware class at that count."""
    layers, seq, count = 32, 32768, 64
    r = gpuplan.plan_train("llama-3.1-8b", tokens="100B", gpu="h100", seq_len=seq, gpus=count, catalog=CAT)
    classes = {
        (o.gpu_count, o.scale_out_bytes_per_s, o.scale_up_domain_gpus, o.scale_up_bytes_per_s_per_gpu)
        for o in CAT.offers()
        if o.gpu == "h100-sxm-80gb" and o.pricing == "on-demand" and o.gpu_count > 1 and count % o.gpu_count == 0
    }
    assert classes
    pps = sorted({d for d in range(1, layers + 1) if layers % d == 0} | {2**k for k in range(7) if 2**k <= layers})
    # memory rungs by ZeRO stage: without offload, and with the optimizer (ZeRO >= 1) or parameters (ZeRO-3)
    # offloaded, six recomputes each (none, selective, partial at 1/4, 1/2 and 3/4 of the chunk's layers, full);
    # with activations offloaded (any stage), three layer counts (1/4, 1/2, 3/4) without recompute
    rungs = {0: 6 + 3, 1: 6 + 3 + 6, 2: 6 + 3 + 6, 3: 6 + 3 + 6 + 6}
    expected = 0
    for tp in (1, 2, 4, 8):
        for pp in pps:
            busiest = -(-layers // pp)
            for _vs in [v for v in (1, 2, 4, 8) if v == 1 or (pp > 1 and busiest % v == 0)]:
                for cp in (1, 2, 4, 8, 16):
                    if tp * pp * cp == 1:  # DDP, ZeRO-1, -2, -3 and FSDP2
                        per = rungs[0] + rungs[1] + rungs[2] + rungs[3] + rungs[3]
                    else:  # the distributed optimizer (ZeRO-1) and FSDP2
                        per = rungs[1] + rungs[3]
                    expected += per * 5 * len(classes)
    assert r.search.searched == expected
    assert r.search.searched == sum(r.search.pruned.values()) + r.search.feasible


def test_offload_only_where_nothing_fits_without_it():
    """70B on 8 H100 fits only with the optimizer states (or parameters) on the host: every option offloads, agrees
    with gpuplan.train --offload on its layout, and fits with no recompute without offload; on 16 H100 some layout
    fits without it, so no option offloads (offload's host work is not in the step-time model: OFFLOAD_ORDER)."""
    eight = gpuplan.plan_train("llama-3.1-70b", tokens="2T", gpus=8, gpu="h100", top=20, catalog=CAT).search
    seq_len = eight.grid["seq_len"]
    assert eight.options and all(o.candidate.offload in ("optimizer", "params") for o in eight.options)
    for opt in eight.options[:: max(1, len(eight.options) // 4)]:
        c = opt.candidate
        _agrees_with_train(opt, "llama-3.1-70b", 2e12, seq_len)
        job = c.job(TrainingJob(seq_len=seq_len))
        for recompute in ("none", "selective", "full"):
            kept = replace(job, recompute=recompute, recompute_layers=None)
            lay = replace(c.layout(), offload="none")
            assert not training_memory(_model70(), c.gpu, lay, kept, find_max_batch=False).fits
        if c.pp == 1 and c.cp == 1:
            assert json.loads(opt.launch["deepspeed"])["zero_optimization"]["offload_optimizer"] == {"device": "cpu"}
        assert "--optimizer-cpu-offload" in opt.launch["megatron"]
    sixteen = gpuplan.plan_train("llama-3.1-70b", tokens="2T", gpus=16, gpu="h100", top=20, catalog=CAT).search
    assert sixteen.options and all(o.candidate.offload == "none" for o in sixteen.options)
    assert sixteen.searched == eight.searched  # the same grid, offload counted as dominated where not searched


def test_offer_nvlink_domain_bounds_tp_and_sets_the_link():
    """An offer's NVLink domain (scale_up_domain_gpus, scale_up_bytes_per_s_per_gpu) is part of its hardware class:
    TP stays within the domain, and the step time uses the offer's link as plan_training(offer=...) does."""
    from gpuplan.estimate.memory import MemoryAssumptions
    from gpuplan.plan.search import search_train
    from gpuplan.plan.training import plan_training

    spec = _model70()
    gpu = CAT.accelerators().get("h100")
    base = next(o for o in CAT.offers() if o.gpu == gpu.id and o.gpu_count == 8 and o.pricing == "on-demand")
    pairs = replace(base, id="test-pairs", scale_up_domain_gpus=2, scale_up_bytes_per_s_per_gpu=50e9)
    fast = replace(base, id="test-fast", scale_up_bytes_per_s_per_gpu=900e9, usd_per_hour=base.usd_per_hour * 1.01)
    job = TrainingJob(seq_len=8192)
    s = search_train(spec, [gpu], [base, pairs, fast], 2e12, job, max_gpus=512, top=3000)
    assert s.grid["hardware_classes"] == 3
    by_offer = {}
    for opt in s.options:
        by_offer.setdefault(opt.candidate.offer.id, []).append(opt)
    assert set(by_offer) == {base.id, pairs.id, fast.id}
    assert max(o.candidate.tp for o in by_offer[pairs.id]) <= 2 < max(o.candidate.tp for o in by_offer[base.id])
    rng = random.Random(2)
    for opts in by_offer.values():
        for opt in rng.sample(opts, min(4, len(opts))):
            c = opt.candidate
            lay, one_job = c.layout(), c.job(job)
            plan = plan_training(spec, gpu, lay, one_job, 2e12, offer=c.offer, virtual_stages=c.virtual_stages)
            assert _close(c.step_s, plan.step.iteration_s) and _close(c.cost_usd, plan.usd), c
            mem = training_memory(spec, gpu, lay, one_job, MemoryAssumptions(), find_max_batch=False)
            assert _close(opt.peak_memory_bytes, mem.total_bytes)
    # the same layout is never faster over the pairs' slow link than over the fast one, and some are slower
    key = lambda o: (o.candidate.gpus, o.candidate.tp, o.candidate.pp, o.candidate.virtual_stages,  # noqa: E731
                     o.candidate.sharding, o.candidate.micro_batch, o.candidate.recompute)  # fmt: skip
    fast_steps = {key(o): o.candidate.step_s for o in by_offer[fast.id]}
    common = [(o.candidate.step_s, fast_steps[key(o)]) for o in by_offer[pairs.id] if key(o) in fast_steps]
    assert common and all(slow >= quick for slow, quick in common) and any(slow > quick for slow, quick in common)


def _random_group(rng: random.Random, spec) -> list[tuple[Parallelism, TrainingJob, float, int]]:
    """Ten random layouts that ``training_memory`` accepts and that share what the formulas branch on (the
    sharding, offload, the job but its batch sizes, whether tp x pp x cp > 1 and whether pp > 1), each with its own
    numbers: tp, pp, interleaved stages, cp, ep, dp, micro-batch, global batch, and the network (scale-out
    bandwidth, GPUs per node)."""
    zero, fsdp = rng.choice(((0, False), (1, False), (2, False), (3, False), (3, True)))
    offload = rng.choice(
        ("none", "none", "activations", "optimizer" if zero else "none", "params" if zero == 3 else "none")
    )
    pipeline = rng.random() < 0.5
    model_parallel = pipeline or rng.random() < 0.6
    recompute = rng.choice(("none", "selective", "full", "per-op", "partial"))
    # the search's new axes: each layout its own --recompute-layers (partial) and --offload-layers (activations)
    own_offload_layers = offload == "activations" and rng.random() < 0.7
    job = TrainingJob(
        seq_len=rng.choice([n for n in (1024, 2048, 16384) if n <= (spec.learned_positions or n)]),
        precision=rng.choice(("bf16-mixed", "fp8-mixed", "fp16-mixed")),
        recompute=recompute,
        recompute_layers=1 if recompute == "partial" else None,
        offload_layers=1 if own_offload_layers else None,
        fsdp=fsdp,
        flash_attention=rng.random() < 0.8,
        tp_comm_overlap=rng.random() < 0.3,
    )
    if pipeline:  # pp > 1, any tp
        tps, pps = [1, 2, 4], [p for p in (2, 3, 4, 8) if p <= spec.layers]
    elif model_parallel:  # tp > 1, pp = 1
        tps, pps = [2, 4, 8], [1]
    else:  # pure data parallelism
        tps, pps = [1], [1]
    tps = [t for t in tps if spec.attention_heads % t == 0]
    eps = [e for e in (1, 2, 4) if spec.moe is not None and spec.moe.experts % e == 0] or [1]
    # context parallelism (ring attention: flash attention) only where tp x pp > 1 already: the group shares the recipe
    cps = (1, 2, 4) if model_parallel and job.flash_attention else (1,)
    group = []
    for _ in range(10):
        tp, pp, ep, cp = rng.choice(tps), rng.choice(pps), rng.choice(eps), rng.choice(cps)
        vs = rng.choice((1, 2, 4)) if pp > 1 else 1
        dp = ep * rng.choice((1, 2, 3, 8, 64))
        mb = rng.choice((1, 2, 4))
        layout = Parallelism(
            gpus=tp * pp * cp * dp,
            tp=tp,
            pp=pp,
            cp=cp,
            ep=ep,
            sequence_parallel=tp > 1,
            zero=zero,
            offload=offload,
            virtual_stages=vs,
        )
        one = replace(
            job,
            micro_batch=mb,
            global_batch=mb * dp * rng.choice((1, 3, 16)),
            # at most the layers a stage holds (train refuses more: memory.validate_layout)
            recompute_layers=rng.randint(1, min(6, -(-spec.layers // pp))) if recompute == "partial" else None,
            offload_layers=rng.randint(1, min(6, -(-spec.layers // pp))) if own_offload_layers else None,
        )
        group.append((layout, one, rng.choice((12.5e9, 50e9)), rng.choice((4, 8))))
    return group


def test_formulas_on_arrays_equal_plain_numbers():
    """The one formula source: training memory and step time on a grid of layouts (numpy arrays) equal, element by
    element, the same functions on each layout alone (plain numbers), for random layouts of every model shape, each
    sharding, recompute, offload and precision, with interleaved stages and context parallelism: 40 groups of 10
    layouts, a group sharing the discrete choices. Partial recompute and activation offload pass their layer counts
    as arrays, one per layout, as the search passes them."""
    import numpy as np

    from gpuplan.catalog import resolve_model
    from gpuplan.estimate.memory import MemoryAssumptions, busiest_total_bytes
    from gpuplan.estimate.steptime import StepAssumptions, training_step
    from gpuplan.spec.training import ParallelismGrid, TrainingJobGrid

    rng = random.Random(12)
    gpu = CAT.accelerators().get("h100")
    compared = 0
    seen = set()
    for _ in range(40):
        spec = resolve_model(rng.choice(RANDOM_MODELS), CAT.models())
        group = _random_group(rng, spec)
        first_layout, first_job = group[0][0], group[0][1]
        lay = ParallelismGrid(
            **{
                k: np.array([getattr(m[0], k) for m in group])
                for k in ("gpus", "tp", "pp", "cp", "ep", "virtual_stages", "sequence_parallel")
            },
            zero=first_layout.zero,
            offload=first_layout.offload,
        )
        values = {f: getattr(first_job, f) for f in first_job.__dataclass_fields__}
        values.update(
            micro_batch=np.array([m[1].micro_batch for m in group]),
            global_batch=np.array([m[1].global_batch for m in group]),
        )
        if first_job.recompute == "partial":
            values["recompute_layers"] = np.array([m[1].recompute_layers for m in group])
            seen.add("partial")
        if first_job.offload_layers is not None:
            values["offload_layers"] = np.array([m[1].offload_layers for m in group])
            seen.add("offload_layers")
        jobs = TrainingJobGrid(**values)
        net = StepAssumptions().grid(
            scale_out_bytes_per_s_per_gpu=np.array([m[2] for m in group]), gpus_per_node=np.array([m[3] for m in group])
        )
        memory = busiest_total_bytes(spec, gpu, lay, jobs, MemoryAssumptions())
        step = training_step(spec, gpu, lay, jobs, net, lay.virtual_stages)
        for i, (layout, job, scale, per_node) in enumerate(group):
            one = training_memory(spec, gpu, layout, job, find_max_batch=False)
            a = StepAssumptions(scale_out_bytes_per_s_per_gpu=scale, gpus_per_node=per_node)
            single = training_step(spec, gpu, layout, job, a, layout.virtual_stages)
            seen.add((layout.cp > 1, layout.virtual_stages > 1))
            assert _close(memory[i], one.total_bytes), (layout, job)
            assert _close(step.iteration_s[i], single.iteration_s), (layout, job)
            assert _close(step.mfu[i], single.mfu), (layout, job)
            compared += 1
    assert compared == 400
    # the new dimensions are reached
    assert seen == {(False, False), (True, False), (False, True), (True, True), "partial", "offload_layers"}


def test_lightest_recompute_that_fits_is_chosen(plan70):
    """Memory is evaluated for every rung: an option's lighter rungs do not fit. No recompute is lighter than every
    rung; fewer partial layers are lighter than more; selective and every partial are lighter than full (selective
    beside a partial is timed, test_selective_and_partial_both_fit_the_faster_is_kept)."""
    from gpuplan.plan.search import PARTIAL_QUARTERS, Rung

    spec = _model70()
    for opt in plan70.search.options[:10]:
        c = opt.candidate
        job = c.job(TrainingJob(seq_len=plan70.search.grid["seq_len"]))
        chunk = -(-spec.layers // c.pp) // c.virtual_stages
        quarters = [n for q in PARTIAL_QUARTERS if (n := Rung("none", "partial", q).layers(chunk, c.virtual_stages))]
        lighter = {
            "none": [],
            "selective": [("none", None)],
            "partial": [("none", None), *[("partial", n) for n in quarters if n < (c.recompute_layers or 0)]],
            "full": [("none", None), ("selective", None), *[("partial", n) for n in quarters]],
        }[c.recompute]
        for rc, n in lighter:
            light = replace(job, recompute=rc, recompute_layers=n)
            assert not training_memory(spec, c.gpu, c.layout(), light, find_max_batch=False).fits, (c, rc, n)


def test_pareto_front_mask_equals_the_definition():
    import numpy as np

    from gpuplan.plan.search import _pareto_front_mask

    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(1, 200))
        pts = np.column_stack([rng.integers(0, 6, n), rng.integers(0, 6, n), rng.choice([8, 16, 64], n)]).astype(float)
        want = [not any((q <= p).all() and (q != p).any() for q in pts) for p in pts]
        assert list(_pareto_front_mask(pts[:, 0], pts[:, 1], pts[:, 2])) == want


def test_every_candidate_is_counted_once_with_fixed_reasons(plan70):
    s = plan70.search
    assert set(s.pruned) <= {r.value for r in PlanPrune}
    assert s.searched == sum(s.pruned.values()) + s.feasible
    assert s.feasible >= len(s.options) > 0
    record = plan70.to_dict()
    assert {"searched", "grid", "pruned", "options"} <= set(record)
    assert all(o["time_s"] <= 60 * 86400 for o in record["options"])
    costs = [o["cost_with_failures_usd"] for o in record["options"]]
    assert costs == sorted(costs)  # objective cost, with failures (issue 17)
    assert any(o["pareto"] for o in record["options"])


def test_mfu_ceiling_bounds_the_step_model(plan70):
    from gpuplan.estimate.steptime import StepAssumptions
    from gpuplan.plan.search import mfu_ceiling

    for o in plan70.search.options:
        c = o.candidate
        assert c.mfu <= mfu_ceiling(c.gpu, "bf16-mixed", StepAssumptions()) + 1e-12


def test_llama3_405b_meta_layout_ranks_top5(plan405):
    """Meta's layout (Llama 3 paper, section 3.3.2: TP8, PP16, DP128 on 16,384 H100, interleaved) under the default
    batch rule (4M tokens per step), and with Meta's own 16M-token batch (2,048 sequences of 8,192), where interleaved
    stages shrink its bubble; the model still prefers PP32 there (docs/plan.md): PP16 needs full recomputation. And
    the long-context stage's TP8 CP16 PP16 DP8 (Table 4) in the top 10 at its own sequence length and batch: it was
    third before partial recompute joined the grid, and is seventh since (with 4 of its 8 layers per stage
    recomputed), behind PP32 without recompute and PP8 layouts that recompute half their layers (docs/plan.md)."""
    layouts = [(o.candidate.tp, o.candidate.pp, o.candidate.gpus // 128) for o in plan405.search.options[:5]]
    assert (8, 16, 128) in layouts
    meta = gpuplan.plan_train(
        "llama-3.1-405b", tokens="15.6T", gpus=16384, gpu="h100", seq_len=8192, global_batch=2048, objective="time",
        top=5, catalog=CAT,
    )  # fmt: skip
    top5 = [(o.candidate.tp, o.candidate.pp, o.candidate.dp) for o in meta.search.options]
    assert (8, 16, 128) in top5
    assert all(o.candidate.virtual_stages > 1 for o in meta.search.options)
    # the long-context stage (Table 4): 131,072 tokens, 16M per step, TP8 CP16 PP16 DP8
    long = gpuplan.plan_train(
        "llama-3.1-405b", tokens="800B", gpus=16384, gpu="h100", seq_len=131072, global_batch=128, objective="time",
        top=10, catalog=CAT,
    )  # fmt: skip
    layouts = [(o.candidate.tp, o.candidate.pp, o.candidate.cp, o.candidate.dp) for o in long.search.options]
    assert (8, 16, 16, 8) in layouts


def _megatron_args(line: str) -> dict[str, str]:
    words = shlex.split(line)
    return {
        w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--") and not words[i + 1].startswith("--")
    }


def test_launch_hints_parse_back_to_the_layout(plan70, plan405):
    for opt in [*plan70.search.options[:10], *plan405.search.options]:
        c, hint = opt.candidate, opt.launch
        mg = _megatron_args(hint["megatron"])
        assert int(mg["--tensor-model-parallel-size"]) == c.tp
        assert int(mg["--pipeline-model-parallel-size"]) == c.pp
        assert int(mg["--micro-batch-size"]) == c.micro_batch
        assert int(mg["--global-batch-size"]) == c.global_batch
        tt = _megatron_args(hint["torchtitan"])
        assert int(tt["--parallelism.tensor_parallel_degree"]) == c.tp
        assert int(tt["--parallelism.pipeline_parallel_degree"]) == c.pp
        dp = c.gpus // (c.tp * c.pp)
        shard, rep = (
            int(tt["--parallelism.data_parallel_shard_degree"]),
            int(tt["--parallelism.data_parallel_replicate_degree"]),
        )
        assert shard * rep == dp
        assert tt["--activation_checkpoint.mode"] == c.recompute
        if c.pp == 1:
            ds = json.loads(hint["deepspeed"])
            assert ds["zero_optimization"]["stage"] == c.sharding.zero
            assert ds["train_micro_batch_size_per_gpu"] == c.micro_batch
            assert ds["gradient_accumulation_steps"] * c.micro_batch * dp == c.global_batch
        else:
            assert hint["deepspeed"] is None


@pytest.mark.parametrize("qps", [5, 300])
def test_serve_options_equal_serve(qps):
    """Each option is ``serve --qps`` on its settings: price, replicas and the latencies at the load."""
    r = gpuplan.plan_serve("llama-3.1-8b", qps=qps, gpu="h100,l4,a100-sxm-80gb", catalog=CAT)
    s = r.search
    assert s.options and s.searched == sum(s.pruned.values()) + s.feasible
    prices = [o.usd_per_million_output_tokens for o in s.options]
    assert prices == sorted(prices)
    for o in s.options[:4]:
        one = gpuplan.serve("llama-3.1-8b", qps=qps, catalog=CAT, **o.serve_kwargs())
        assert _close(one.cost["usd_per_million_output_tokens"], o.usd_per_million_output_tokens)
        assert one.fleet.replicas == o.replicas and o.report.load is not None
        assert _close(one.serving.ttft_s, o.report.ttft_s) and _close(one.serving.tpot_s, o.report.tpot_s)
    if qps == 300:  # the load needs more than one replica, sized within max_utilization
        assert all(o.report.load.utilization <= o.report.load.max_utilization + 1e-9 for o in s.options)
        assert any(o.replicas > 1 for o in s.options)
        assert f"--tensor-parallel-size {o.tp}" in o.launch["vllm"]
        assert f"--tp {o.tp}" in o.launch["sglang"] and f"--tp_size {o.tp}" in o.launch["trtllm"]


def _serve_counts_hold(s) -> None:
    g = s.grid
    grid = len(g["gpus"]) * len(g["weights"]) * len(g["kv_cache"]) * len(g["tp"]) * len(g["engine"])
    assert s.searched == grid  # the documented grid, each candidate once
    assert s.searched == sum(s.pruned.values()) + s.feasible
    assert s.searched >= s.evaluated >= s.feasible >= len(s.options)
    for counts in s.pruned_per_gpu.values():  # a GPU without an option: all its candidates pruned
        assert sum(counts.values()) == grid // len(g["gpus"])


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(model="llama-3.1-8b", qps=5, gpu="h100,l4,a100-sxm-80gb"),
        dict(model="llama-3.1-70b", qps=20, gpu="h100,h200,l40s,t4,b200"),
        dict(model="llama-3.1-70b", qps=200, max_tpot="25ms", max_ttft="300ms", gpu="all", engine="vllm,sglang"),
        dict(model="llama-3.1-405b", qps=1, gpu="t4,l4"),  # nothing fits: every candidate pruned
    ],
)
def test_serve_counts_add_up(kwargs):
    """searched covers the grid and equals the pruned counts plus the feasible ones; searched >= evaluated >=
    feasible >= options (the web page's "360 kept of 240 evaluated" read ``searched`` as the kept count)."""
    s = gpuplan.plan_serve(catalog=CAT, **kwargs).search
    _serve_counts_hold(s)
    assert s.feasible > 0 or not s.options


def test_serve_options_the_load_rules_out_are_pruned_once(monkeypatch):
    """An option that meets the targets at its full batch but not under the load (the second pass) moves from the
    feasible count to misses_slo, and the next option takes its place; here every b200 option misses under load."""
    from dataclasses import replace as dc_replace

    from gpuplan.estimate import inference

    plain = inference.serving_plan
    kwargs = dict(model="llama-3.1-70b", qps=20, gpu="b200,h100,h200", top=5, catalog=CAT)
    before = gpuplan.plan_serve(**kwargs).search
    assert before.options[0].gpu.id == "b200"

    def b200_misses_under_load(model, gpu, layout, job, assumptions=None, qps=None, replicas=None):
        r = plain(model, gpu, layout, job, assumptions, qps=qps, replicas=replicas)
        return dc_replace(r, reasons=("missed under load",)) if qps is not None and gpu.id == "b200" else r

    monkeypatch.setattr(inference, "serving_plan", b200_misses_under_load)
    after = gpuplan.plan_serve(**kwargs).search
    _serve_counts_hold(after)
    assert "b200" not in {o.gpu.id for o in after.options} and len(after.options) == 5
    walked = before.feasible - after.feasible  # the b200 candidates the second pass reached before five others
    assert walked >= 1 and after.pruned["misses_slo"] == before.pruned["misses_slo"] + walked
    assert after.searched == before.searched and after.evaluated == before.evaluated
    rank = gpuplan.serve("llama-3.1-70b", gpu="b200,h100", rank=True, qps=20, catalog=CAT)
    assert [o.gpu.id for o in rank.options] == ["h100-sxm-80gb"]
    assert rank.search.pruned_per_gpu["b200"]["misses_slo"] > 0  # every b200 candidate walked, none left
    assert rank.to_dict()["not_possible"][0] == {
        "gpu": "b200",
        "reason": "misses_slo",
        "pruned": rank.search.pruned_per_gpu["b200"],
    }


def test_cli_exit_codes(capsys):
    assert (
        main(["plan", "train", "llama-3.1-8b", "--tokens", "100B", "--gpu", "h100", "--max-gpus", "64", "--json"]) == 0
    )
    record = json.loads(capsys.readouterr().out)
    assert record["kind"] == "plan.train" and record["options"]
    # nothing meets a one-hour deadline on at most 8 GPUs: exit 3 with the counts
    assert (
        main(
            [
                "plan",
                "train",
                "llama-3.1-70b",
                "--tokens",
                "2T",
                "--deadline",
                "1h",
                "--gpu",
                "h100",
                "--max-gpus",
                "8",
                "--json",
            ]
        )
        == 3
    )
    record = json.loads(capsys.readouterr().out)
    assert not record["options"] and record["pruned"]["misses_deadline"] > 0
    assert main(["plan", "train", "llama-3.1-8b", "--tokens", "1T", "--objective", "speed"]) == 2
    assert main(["plan", "train", "llama-3.1-8b", "--tokens", "1T", "--gpus", "8", "--max-gpus", "64"]) == 2
    assert main(["plan", "serve", "llama-3.1-8b", "--qps", "2", "--gpu", "l4"]) == 0
    capsys.readouterr()


def test_unknown_provider_is_bad_input(run):
    code, _, err = run("plan", "train", "llama-3.1-8b", "--tokens", "1T", "--providers", "nosuch")
    assert code == 2 and "no offers from nosuch" in err and err.count("\n") == 1


def test_partial_recompute_options_equal_train_and_are_the_smallest_that_fit():
    """128k-token sequences on 8 H100: options recompute part of their layers (search.PARTIAL_QUARTERS of each chunk).
    Each equals gpuplan.train --recompute partial --recompute-layers N on its layout to 1e-12; no recompute does not
    fit; the next smaller quarter does not fit; where selective fits too, it is not faster (the search times both and
    keeps the faster); and the Megatron line recomputes N / virtual_stages layers per chunk with the block method."""
    from gpuplan.plan.search import PARTIAL_QUARTERS, Rung

    spec = resolve_model_id("llama-3.1-8b")
    seq = 131072
    s = gpuplan.plan_train("llama-3.1-8b", tokens="10B", gpus=8, gpu="h100", seq_len=seq, top=60, catalog=CAT).search
    partial = [o for o in s.options if o.candidate.recompute == "partial"]
    assert len(partial) >= 5 and s.grid["recompute"] == ["none", "selective", "partial", "full"]
    for opt in partial[:8]:
        c = opt.candidate
        _agrees_with_train(opt, "llama-3.1-8b", 10e9, seq)
        job, lay = c.job(TrainingJob(seq_len=seq)), c.layout()
        chunk = -(-spec.layers // c.pp) // c.virtual_stages
        quarters = [Rung("none", "partial", q).layers(chunk, c.virtual_stages) for q in PARTIAL_QUARTERS]
        assert c.recompute_layers in quarters and c.recompute_layers > 0
        smaller = [n for n in quarters if 0 < n < c.recompute_layers]
        for rc, n in [("none", None), *[("partial", n) for n in smaller]]:
            lighter = replace(job, recompute=rc, recompute_layers=n)
            assert not training_memory(spec, c.gpu, lay, lighter, find_max_batch=False).fits, (c, rc, n)
        selective = replace(job, recompute="selective", recompute_layers=None)
        if training_memory(spec, c.gpu, lay, selective, find_max_batch=False).fits:
            other = gpuplan.train(
                "llama-3.1-8b", tokens=10e9, seq_len=seq, catalog=CAT, **{**c.train_kwargs(), "recompute": "selective",
                "recompute_layers": None},
            )  # fmt: skip
            assert other.plan.step.iteration_s >= c.step_s * (1 - REL)
        mg = _megatron_args(opt.launch["megatron"])
        assert mg["--recompute-granularity"] == "full" and mg["--recompute-method"] == "block"
        assert int(mg["--recompute-num-layers"]) * c.virtual_stages == c.recompute_layers
        if opt.launch["torchtitan"] is not None:  # layer SAC: every p-th block of the stage
            tt = _megatron_args(opt.launch["torchtitan"])
            every = int(tt["--activation_checkpoint.selective_ac_option"])
            assert -(-spec.layers // c.pp) // every == c.recompute_layers
        assert opt.launch["deepspeed"] is None or c.pp == 1


def test_activation_offload_is_searched_where_nothing_fits_without_offload():
    """70B on 8 H100: nothing fits without offload, so activation offload is searched first (no host time in the
    step-time model, so the cheapest offload there), at 1/4, 1/2 and 3/4 of each chunk's layers. It cannot hold the
    model states, so the options offload the optimizer; explain of the same layout with its activations offloaded
    gives gpuplan.train's estimate and does_not_fit_memory. On 16 H100 (a layout fits without offload) the rungs are
    counted as dominated, never evaluated: the grid is the same size."""
    eight = gpuplan.plan_train("llama-3.1-70b", tokens="2T", gpus=8, gpu="h100", top=5, catalog=CAT)
    s = eight.search
    assert s.grid["offload"]["zero-0"] == ["none", "activations"] and s.options
    c = s.options[0].candidate
    assert c.offload in ("optimizer", "params")
    seq = s.grid["seq_len"]
    for n in (1, 10, 40):
        lay = replace(c.layout(), offload="activations")
        job = replace(c.job(TrainingJob(seq_len=seq)), offload_layers=n)
        t = gpuplan.train("llama-3.1-70b", tokens=2e12, seq_len=seq, catalog=CAT,
                          **{**c.train_kwargs(), "offload": "activations", "offload_layers": n})  # fmt: skip
        mem = training_memory(_model70(), c.gpu, lay, job, find_max_batch=False)
        assert not mem.fits and _close(t.memory.total_bytes, mem.total_bytes)
    text = (f"tp={c.tp},pp={c.pp},dp={c.dp},virtual_stages={c.virtual_stages},zero={c.sharding.zero},"
            f"fsdp={str(c.sharding.fsdp).lower()},micro_batch={c.micro_batch},offload=activations")  # fmt: skip
    e = gpuplan.plan_train("llama-3.1-70b", tokens="2T", gpus=8, gpu="h100", top=1, explain=text,
                           catalog=CAT).to_dict()["explain"]  # fmt: skip
    assert e["pruned"] == "does_not_fit_memory" and e["layout"]["offload_layers"] >= 1
    sixteen = gpuplan.plan_train("llama-3.1-70b", tokens="2T", gpus=16, gpu="h100", top=5, catalog=CAT).search
    assert all(o.candidate.offload == "none" for o in sixteen.options) and sixteen.searched == s.searched


def test_activation_offload_launch_hints():
    """Megatron-Core / Transformer Engine offload N layers per chunk (--cpu-offloading-num-layers) and refuse
    pipeline parallelism with it; torchtitan and DeepSpeed's config have no activation offload (null)."""
    from gpuplan.plan.search import SHARDINGS, TrainCandidate, train_launch

    plan = gpuplan.plan_train("llama-3.1-8b", tokens="10B", gpus=8, gpu="h100", top=1, catalog=CAT)
    c = plan.search.options[0].candidate
    job = TrainingJob(seq_len=4096, global_batch=c.global_batch)
    for pp, want in ((1, True), (2, False)):
        off = replace(c, tp=1, pp=pp, cp=1, virtual_stages=1, sharding=SHARDINGS[1], offload="activations",
                      offload_layers=8,
                      recompute="none", recompute_layers=None)  # fmt: skip
        assert isinstance(off, TrainCandidate)
        hint = train_launch(_model70(), off, job, 1)
        assert hint["torchtitan"] is None and hint["deepspeed"] is None
        if want:
            mg = _megatron_args(hint["megatron"])
            assert "--cpu-offloading" in hint["megatron"] and int(mg["--cpu-offloading-num-layers"]) == 8
        else:
            assert hint["megatron"] is None


def resolve_model_id(name: str):
    from gpuplan.catalog import resolve_model

    return resolve_model(name, CAT.models())


def test_selective_and_partial_both_fit_the_faster_is_kept():
    """Without flash attention selective recompute saves the attention scores, so it and a partial recompute can both
    fit: the search times both and keeps the faster for each layout and offer (never both), and where it kept a
    partial recompute, train with selective on the same layout fits and is not faster."""
    from gpuplan.catalog import resolve_model
    from gpuplan.plan.search import search_train

    spec = resolve_model("llama-3.1-8b", CAT.models())
    job = TrainingJob(seq_len=8192, flash_attention=False)
    s = search_train(spec, [CAT.accelerators().get("h100")], CAT.offers(), 1e10, job, max_gpus=16, top=5000)
    assert len(s.options) == s.feasible
    layouts = [(c.gpus, c.tp, c.pp, c.virtual_stages, c.sharding, c.micro_batch, c.offer.id)
               for c in (o.candidate for o in s.options)]  # fmt: skip
    assert len(layouts) == len(set(layouts))  # one recompute per layout and offer
    partial = [o.candidate for o in s.options if o.candidate.recompute == "partial"]
    assert partial and any(o.candidate.recompute == "selective" for o in s.options)
    checked = 0
    for c in partial[:: max(1, len(partial) // 5)]:
        t = gpuplan.train("llama-3.1-8b", tokens=1e10, seq_len=8192, flash_attention=False, catalog=CAT,
                          **{**c.train_kwargs(), "recompute": "selective", "recompute_layers": None})  # fmt: skip
        if t.memory.fits:
            assert t.plan.step.iteration_s >= c.step_s * (1 - REL)
            checked += 1
    assert checked >= 1
