"""Step-time model against Megatron-LM and Korthikanti et al. (src/gpuplan/data/validation/training_compute.json).

Issue #4's bar: Megatron-LM Table 1 (all 10 rows) within 15 % each, mean absolute error below 10 %, no
per-row tuning. One global factor (model_shape_factor) is calibrated on Table 1; Megatron Table 2 and
Korthikanti Table 5 are predictions. Row settings (micro-batch, interleaving, DDP) come from the
authors' own scripts (NVIDIA/Megatron-LM examples/sc21/run_table_1.sh): every Table 1 run used full
recomputation, fp16, seq 2048, and no flash attention (2021).
"""

from __future__ import annotations

import pytest

from conftest import BUNDLED_ACCELERATORS
from gpuplan.catalog import load_accelerators, load_models
from gpuplan.estimate.steptime import training_step
from gpuplan.estimate.time import gpus_for_deadline, seed_rule_constant, seed_rule_gpus, time_to_train, training_compute
from gpuplan.spec.model import ModelSpec, ParamsOnlyModel
from gpuplan.spec.training import Parallelism, TrainingJob


def _a100():
    return BUNDLED_ACCELERATORS.get("a100-sxm-80gb")


def gpt(m) -> ModelSpec:
    h = m["hidden"]
    return ModelSpec(
        id="gpt",
        name="gpt",
        model_type="gpt2",
        vocab_size=m.get("vocab", 51200),
        hidden_size=h,
        layers=m["layers"],
        attention_heads=m["heads"],
        kv_heads=m["heads"],
        head_dim=h // m["heads"],
        ffn_size=4 * h,
        context_length=2048,
        tie_embeddings=True,
        mlp_gated=False,
        norm="layernorm",
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
    )


def eq3_flops(batch, m, s=2048):
    n, h, v = m["layers"], m["hidden"], m.get("vocab", 51200)  # the paper's l (layers)
    return 96 * batch * s * n * h * h * (1 + s / (6 * h) + v / (16 * n * h))


def value(rec, metric):
    return next(v["value"] for v in rec["values"] if v["metric"] == metric)


# (record, micro-batch, virtual stages, torch DDP overlaps gradients) from run_table_1.sh
TABLE1 = [
    ("megatron-t1-1p7b", 16, 1, True),
    ("megatron-t1-3p6b", 16, 1, True),
    ("megatron-t1-7p5b", 16, 1, True),
    ("megatron-t1-18p4b", 8, 1, True),
    ("megatron-t1-39p1b", 4, 1, False),
    ("megatron-t1-76p1b", 2, 3, False),
    ("megatron-t1-145p6b", 2, 2, False),
    ("megatron-t1-310p1b", 1, 2, False),
    ("megatron-t1-529p6b", 1, 3, False),
    ("megatron-t1-1008p0b", 1, 1, False),
]


def _achieved_tflops(rec, micro, vstages, overlap):
    m, p = rec["model"], rec["parallelism"]
    gpus, batch = rec["hardware"]["count"], rec["batch"]["global_batch_seqs"]
    job = TrainingJob(
        micro_batch=micro,
        seq_len=2048,
        global_batch=batch,
        recompute="full",
        flash_attention=False,
        dropout=True,
        precision="fp16-mixed",
        recipe="megatron",
    )
    step = training_step(
        gpt(m), _a100(), Parallelism(gpus=gpus, tp=p["tp"], pp=p["pp"]), job, virtual_stages=vstages, overlap_dp=overlap
    )
    return eq3_flops(batch, m) / (step.iteration_s * gpus) / 1e12


def test_megatron_table1(validation):
    records = {r["id"]: r for r in validation("training_compute")["records"]}
    errors = []
    for rid, micro, v, overlap in TABLE1:
        got = _achieved_tflops(records[rid], micro, v, overlap)
        published = value(records[rid], "achieved_tflops_per_gpu")
        assert got == pytest.approx(published, rel=0.15), rid
        errors.append(abs(got / published - 1))
    assert sum(errors) / len(errors) < 0.10


@pytest.mark.parametrize(
    "rid",
    [
        "megatron-t2-ptd-174b-384gpu",
        "megatron-t2-ptd-174b-768gpu",
        "megatron-t2-ptd-174b-1536gpu",
        "megatron-t2-ptd-529b-560gpu",
        "megatron-t2-ptd-529b-1120gpu",
        "megatron-t2-ptd-529b-2240gpu",
    ],
)
def test_megatron_table2_ptd_predicted(validation, rid):
    """Out of sample: PTD-P at micro-batch 1, 384 to 2240 GPUs; within 15 % (it lands within 5 %)."""
    rec = next(r for r in validation("training_compute")["records"] if r["id"] == rid)
    assert _achieved_tflops(rec, 1, 1, False) == pytest.approx(value(rec, "achieved_tflops_per_gpu"), rel=0.15)


@pytest.mark.parametrize(
    "rid,vstages",
    [("korthikanti-t5-22b", 1), ("korthikanti-t5-175b", 3), ("korthikanti-t5-530b", 3), ("korthikanti-t5-1t", 1)],
)
def test_korthikanti_table5_mfu_predicted(validation, rid, vstages):
    """Out of sample: sequence parallelism + selective recomputation; MFU within 15 %."""
    rec = next(r for r in validation("training_compute")["records"] if r["id"] == rid)
    m, p = rec["model"], rec["parallelism"]
    job = TrainingJob(
        micro_batch=rec["batch"]["micro_batch_seqs"],
        seq_len=2048,
        global_batch=rec["batch"]["global_batch_seqs"],
        recompute="selective",
        flash_attention=False,
        dropout=True,
        precision="fp16-mixed",
        recipe="megatron",
    )
    step = training_step(
        gpt(m),
        _a100(),
        Parallelism(gpus=rec["hardware"]["count"], tp=p["tp"], pp=p["pp"], sequence_parallel=True),
        job,
        virtual_stages=vstages,
    )
    assert 100 * step.mfu == pytest.approx(value(rec, "mfu_recomputed_from_eq7"), rel=0.15)


def test_step_parts_add_up_and_layout_does_not_change_flops():
    spec = load_models().get("llama-3.1-8b")
    job = TrainingJob(micro_batch=1, seq_len=4096, global_batch=64)
    a = training_step(spec, load_accelerators().get("h100"), Parallelism(gpus=8), job)
    b = training_step(spec, load_accelerators().get("h100"), Parallelism(gpus=8, tp=2, pp=2), job)
    assert a.iteration_s == pytest.approx(sum(a.parts.values()))
    assert a.model_flops_per_iteration == b.model_flops_per_iteration  # FLOPs do not depend on the layout
    assert 0.2 < a.mfu < 0.7 and 0.2 < b.mfu < 0.7


# ----------------------------------------------------------------------- time, GPU-hours, seed rule


def test_seed_rule_constant_is_derived():
    """GPUs = tokens x epochs x params x 13.3 / hours (billions, _a100()): 6N D at 40 % MFU of 312 TFLOP/s."""
    assert seed_rule_constant(312e12, 0.40) == pytest.approx(13.35, abs=0.01)
    assert seed_rule_gpus(7e9, 1e12, 1, 24 * 30, 312e12, 0.4) == pytest.approx(7 * 1000 * 13.35 / 720, rel=1e-3)


@pytest.mark.parametrize("rid,tokens_per_s", [("llama1-65b", 380.0)])
def test_llama_gpu_hours_from_published_throughput(validation, rid, tokens_per_s):
    """LLaMA 65B: 1.4T tokens at 380 tokens/s/GPU (the paper's figure) -> 1,022,362 GPU-hours within 10 %."""
    rec = next(r for r in validation("training_compute")["records"] if r["id"] == rid)
    spec = load_models().get("llama-65b")
    compute = training_compute(spec, 2048, 1.4e12)
    mfu = tokens_per_s * compute.flops_per_token / 312e12
    t = time_to_train(compute.total_flops, 2048, 312e12, mfu)
    assert t.gpu_hours == pytest.approx(value(rec, "gpu_hours"), rel=0.10)


@pytest.mark.parametrize("rid,mid,seq", [("llama2-7b", "llama-2-7b", 4096), ("llama2-70b", "llama-2-70b", 4096)])
def test_llama2_gpu_hours_at_a_stated_mfu(validation, rid, mid, seq):
    """Llama 2: 2T tokens; at the MFU their GPU-hours imply (6N convention, from the record) the time is
    reproduced within 10 % once the attention term's share is accounted for the same way."""
    rec = next(r for r in validation("training_compute")["records"] if r["id"] == rid)
    implied = value(rec, "implied_mfu_6N") / 100
    model = ParamsOnlyModel(int(rec["model"]["params"]))  # 6N convention, as the record states
    t = time_to_train(training_compute(model, seq, 2e12).total_flops, 1000, 312e12, implied)
    assert t.gpu_hours == pytest.approx(value(rec, "gpu_hours"), rel=0.10)


def test_gpus_for_deadline_rounds_to_the_group():
    flops = 6 * 70e9 * 2e12
    n = gpus_for_deadline(flops, 30 * 86400, 989.5e12, 0.4, granularity=8)
    assert n % 8 == 0 and time_to_train(flops, n, 989.5e12, 0.4).seconds <= 30 * 86400
    assert time_to_train(flops, n - 8, 989.5e12, 0.4).seconds > 30 * 86400


@pytest.mark.parametrize(
    "rid,vstages",
    [("korthikanti-t5-22b", 1), ("korthikanti-t5-175b", 3), ("korthikanti-t5-530b", 3), ("korthikanti-t5-1t", 1)],
)
def test_korthikanti_iteration_times_predicted(validation, rid, vstages):
    """Iteration time with full recomputation, and with sequence parallelism + selective recomputation, within
    20 % each. Since model_shape_factor is fitted on all nine training sources (0.77, it was 0.85 from Megatron-LM
    Table 1 alone), these 2022 A100 rows read slow by up to 17 % (the 1T model with full recomputation); the model
    also overstates the gain of the second over the first: 1.38-1.51x predicted against 1.29-1.32x measured."""
    rec = next(r for r in validation("training_compute")["records"] if r["id"] == rid)
    m, p = rec["model"], rec["parameters"] if "parameters" in rec else rec["parallelism"]
    for recompute, sp, metric in (
        ("full", False, "iteration_time_full_recompute"),
        ("selective", True, "iteration_time_sp_plus_selective"),
    ):
        job = TrainingJob(
            micro_batch=rec["batch"]["micro_batch_seqs"],
            seq_len=2048,
            global_batch=rec["batch"]["global_batch_seqs"],
            recompute=recompute,
            flash_attention=False,
            dropout=True,
            precision="fp16-mixed",
            recipe="megatron",
        )
        step = training_step(
            gpt(m),
            _a100(),
            Parallelism(gpus=rec["hardware"]["count"], tp=p["tp"], pp=p["pp"], sequence_parallel=sp),
            job,
            virtual_stages=vstages,
        )
        assert step.iteration_s == pytest.approx(value(rec, metric), rel=0.20), metric
