"""``gpuplan validate`` and the leave-one-source-out harness (plan/validate.py).

No accuracy goal is asserted here: the step-time and memory models are to be recalibrated against these
figures (issue #13). What is checked: the records reach the same code path as a user (api.train /
api.serve), the bulk of training_modern.json is mapped, nothing is dropped without a reason, ``--json`` is
the API's record, and the LOSO refits differ between folds while the tool's default stays as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

import gpuplan
from gpuplan.errors import GpuplanError
from gpuplan.plan import validate as v


@pytest.fixture(scope="module")
def report():
    return gpuplan.validate()


@pytest.fixture(scope="module")
def record(report):
    return report.to_dict()


def test_bulk_of_training_modern_is_mapped(report, validation):
    """50 of the 66 training_modern records (61 are training runs, 5 MAMF microbenchmarks) are scored on
    tokens/s per GPU; 20 of them on peak memory too."""
    records = validation("training_modern")["records"]
    scored = {r.case.record for r in report.rows if r.case.file == "training_modern" and r.case.category == "training"}
    assert len(records) == 66
    assert len(scored) >= 50
    memory = {r.case.record for r in report.rows if r.case.file == "training_modern" and r.case.category == "memory"}
    assert len(memory) >= 20
    # tokens/s per GPU, but for the low-precision speed-ups of records whose throughput cannot be mapped
    assert all(
        r.case.quantity == "tokens_per_s_per_gpu"
        or (r.case.quantity == "speedup_vs_bf16" and r.case.record in v._SPEEDUPS)
        for r in report.rows
        if r.case.file == "training_modern" and r.case.category == "training"
    )


def test_every_record_is_scored_or_skipped_with_a_reason(report, validation):
    """Nothing silently dropped: each record of each scored file has a row or a skip entry, and every skip
    names a reason; the unscored file (accelerators) is named with its reason."""
    seen = {(r.case.file, r.case.record) for r in report.rows} | {(s.file, s.record) for s in report.skipped}
    for stem in v.FILES:
        for rec in validation(stem)["records"]:
            assert (stem, rec["id"]) in seen, f"{stem}: {rec['id']} neither scored nor skipped"
    assert all(s.reason.strip() for s in report.skipped)
    assert set(report.to_dict()["not_scored_files"]) == {"accelerators"}
    assert set(v.FILES) | set(v.NOT_SCORED) == set(
        __import__("gpuplan.catalog.validation", fromlist=["x"]).validation_stems()
    )


def test_skipped_records_carry_reasons(record):
    assert record["counts"]["records_skipped"] > 0
    kinds = " | ".join(record["skipped_by_reason"])
    for fragment in ("kernel microbenchmark", "not in the accelerator catalog", "speculative decoding"):
        assert fragment in kinds
    assert sum(record["skipped_by_reason"].values()) == len(record["skipped"])


def test_rows_go_through_the_api(report):
    """A row's arguments are API keywords: the same call gives the same prediction."""
    row = next(
        r
        for r in report.rows
        if r.case.record == "torchtitan-2412-llama31-8b-8gpu-fsdp-bf16" and r.case.category == "training"
    )
    again = gpuplan.train(**row.case.kwargs, offline=True)
    assert again.plan.step.tokens_per_s / again.layout.gpus == pytest.approx(row.predicted)
    assert row.fits == again.fits
    serve = next(r for r in report.rows if r.case.call == "serve" and r.case.quantity == "tpot_s")
    assert gpuplan.serve(**serve.case.kwargs, offline=True).serving.tpot_s == pytest.approx(serve.predicted)


def test_summary_groups_and_errors(record):
    for category in ("training", "inference", "memory"):
        block = record["summary"][category]
        assert block["all"]["count"] > 0 and block["all"]["mae"] >= 0
        for dim in ("quantity", "gpu_generation", "precision", "stack", "architecture"):
            assert sum(g["count"] for g in block[dim].values()) == block["all"]["count"]
    for r in record["rows"]:
        assert r["error"] == pytest.approx(r["predicted"] / r["published"] - 1)
    assert record["counts"]["measured_runs_does_not_fit"] <= record["counts"]["measured_runs"]


def test_loso_refits_differ_between_folds(record):
    loso = record["loso"]
    (constant,) = [c for c in loso["constants"] if c["name"] == "model_shape_factor"]
    assert constant["default"] == 0.77
    values = {round(f["constants"]["model_shape_factor"], 6) for f in loso["folds"]}
    assert len(loso["folds"]) >= 5 and len(values) >= 3, loso["folds"]
    assert all(0 < x <= 1 for x in values)
    training = loso["categories"]["training"]
    assert training["loso"]["count"] == training["default"]["count"] == training["in_sample"]["count"]
    # the fit moves the constant, and scoring a source with a constant fitted without it is not better than
    # scoring it with one fitted on everything (in-sample is the optimistic figure)
    assert constant["fitted_in_sample"] != constant["default"]
    assert training["loso"]["mae"] >= training["in_sample"]["mae"] - 1e-9


def test_the_tools_default_is_not_changed(report):
    from gpuplan.estimate.steptime import StepAssumptions

    assert StepAssumptions().model_shape_factor == 0.77
    assert v.MODEL_SHAPE_FACTOR.default == 0.77


def test_cli_json_is_the_api_record(run, record):
    code, out, err = run("validate", "--json")
    assert code == 0, err
    assert json.loads(out) == json.loads(json.dumps(record))


def test_cli_table_category_and_html(run, tmp_path):
    page = tmp_path / "validate.html"
    code, out, err = run("validate", "--category", "inference", "--html", str(page))
    assert code == 0, err
    assert "inference: predicted vs published" in out and "training: predicted" not in out
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>") and "Predicted vs published" in text and "<script" not in text
    code, out, err = run("validate", "--category", "nonsense")
    assert code == 2 and "--category" in err


def test_category_filter_and_bad_category():
    rep = gpuplan.validate(category="memory")
    assert rep.rows and {r.case.category for r in rep.rows} == {"memory"}
    assert {s.category for s in rep.skipped} <= {"memory"}
    assert rep.to_dict()["loso"]["constants"] == []  # no constant is fitted on memory yet
    with pytest.raises(GpuplanError, match="--category"):
        gpuplan.validate(category="speed")


@pytest.mark.parametrize(
    "src,key",
    [
        ({"url": "https://github.com/pytorch/torchtitan/blob/main/benchmarks/x.md"}, "github:pytorch/torchtitan"),
        ({"url": "https://arxiv.org/abs/2104.04473"}, "arxiv:2104.04473"),
        ({"url": "https://pytorch.org/blog/maximizing-training/"}, "pytorch.org/blog/maximizing-training"),
        (
            {"repo": "bigscience-workshop/bigscience", "path": "train/README.md"},
            "github:bigscience-workshop/bigscience",
        ),
        ({"title": "A talk"}, "A talk"),
    ],
)
def test_source_key(src, key):
    assert v.source_key({"source": src}) == key


# ----------------------------------------------------------------------- the harness, on its own


def _case(i: int, source: str, published: float) -> v.Case:
    return v.Case(
        id=f"c{i}",
        record=f"r{i}",
        file="training_modern",
        category="training",
        metric="m",
        quantity="tokens_per_s_per_gpu",
        unit="tokens/s/GPU",
        published=published,
        call="train",
        kwargs={"i": i},
        source=source,
        gpu_generation="g",
        precision="bf16",
        stack="s",
        architecture="dense",
    )


def test_harness_refits_per_fold_with_a_registered_constant():
    """A generic constant: the prediction is proportional to it; each source measures a different factor,
    so each fold's refit differs and the held-out source is scored with a value it did not influence."""
    truth = {"a": 2.0, "b": 3.0, "c": 5.0}
    cases = [_case(i, s, 100.0 * truth[s]) for i, s in enumerate(["a", "a", "b", "b", "c", "c"])]

    def evaluate(subset, assume: Mapping[str, Any]):
        k = assume.get("k", 1.0)
        return [v.Row(c, predicted=100.0 * k, fits=True) for c in subset]

    const = v.FittedConstant(
        name="k",
        default=1.0,
        category="training",
        quantity="tokens_per_s_per_gpu",
        fit=v.ratio_fit(0.01, 100.0),
        description="test constant",
    )
    rows = evaluate(cases, {})
    out = v.loso(cases, rows, evaluate, [const])
    folds = {f["source"]: f["constants"]["k"] for f in out["folds"]}
    assert folds == pytest.approx({"a": 4.0, "b": 3.5, "c": 2.5})  # medians of the other sources' ratios
    assert out["constants"][0]["fitted_in_sample"] == pytest.approx(3.0)
    cat = out["categories"]["training"]
    assert cat["loso"]["mae"] > cat["in_sample"]["mae"]


# ---------------------------------------------------------------- what the mapping reads from the records' sources


def _mapped_case(report, record_id: str, category: str = "training"):
    return next(r.case for r in report.rows if r.case.record == record_id and r.case.category == category)


@pytest.mark.parametrize(
    "text,watts",
    [
        ("NVIDIA B200 (power-limited to 750 W)", 750.0),
        (
            "NVIDIA H100 SXM 96GB HBM2e (Meta Grand Teton host, default 500 W power limit; not the 700 W 80GB SKU)",
            500.0,
        ),
        ("NVIDIA H100 SXM 80GB", None),
        (None, None),
    ],
)
def test_power_cap_is_read_from_the_gpu_text(text, watts):
    assert v._power_limit_w(text) == watts


def test_records_run_on_their_hardware_variant(report):
    """torchtitan's H100s are the 96 GB 500 W parts (catalog h100-sxm-96gb); TorchAO's B200s carry their 750 W
    cap into the step time as an assumption."""
    titan = _mapped_case(report, "torchtitan-2412-llama31-8b-8gpu-fsdp-bf16")
    assert titan.kwargs["gpu"] == "h100-sxm-96gb"
    b200 = _mapped_case(report, "torchao-b200-llama3-8b-8gpu-fsdp-bf16")
    assert b200.kwargs["gpu"] == "b200" and b200.kwargs["assume"] == {"power_limit_w": 750.0}


def test_torchtitan_interleaved_schedule_gets_its_default_two_stages_per_rank(report):
    inter = _mapped_case(report, "torchtitan-2412-llama31-405b-512gpu-3d-interleaved1f1b-fp8")
    plain = _mapped_case(report, "torchtitan-2412-llama31-405b-512gpu-3d-1f1b-fp8")
    assert inter.kwargs["virtual_stages"] == 2 and plain.kwargs["virtual_stages"] == 1
    # the bubble formula then reproduces the published 1F1B / interleaved ratio (100 vs 128 tokens/s) within 5 %
    rows = {r.case.record: r for r in report.rows if r.case.category == "training"}
    ratio = rows[inter.record].predicted / rows[plain.record].predicted
    assert ratio == pytest.approx(128 / 100, rel=0.05)


def test_unstated_settings_come_from_the_sources_configs(report):
    """NeMo recipes overlap the gradient reduction (overlap_grad_sync); AutoModel's benchmark configs give the
    recomputation and the expert-parallel degree its performance table leaves out."""
    nemo = _mapped_case(report, "nemo-2407-h100-llama2-70b-64gpu-fp8")
    assert nemo.kwargs["overlap_grad_reduce"] is True
    llama = _mapped_case(report, "automodel-h100-llama3-70b-64gpu-bf16")
    assert llama.kwargs["recompute"] == "full"
    oss = _mapped_case(report, "automodel-h100-gpt-oss-120b-64gpu-bf16")
    assert oss.kwargs["recompute"] == "none" and oss.kwargs["ep"] == 64
    assert any("benchmark config" in n for n in oss.notes)


def test_same_dtype_loss_is_derived_like_the_upcast_defaults():
    """Without the fp32 upcast the loss keeps three logits-sized tensors at the start of backward (logits,
    log_softmax output, its gradient) and moves nine over HBM, all in the logits' dtype: 6 B and 18 B for bf16,
    against the upcast defaults' 12 B and 46 B."""
    from gpuplan.estimate.memory import MemoryAssumptions
    from gpuplan.estimate.steptime import StepAssumptions

    bf16 = v.same_dtype_loss_assumptions()
    assert bf16 == {"logits_bytes_per_element_hf": 6.0, "eager_loss_bytes_per_logit": 18.0}
    assert bf16["logits_bytes_per_element_hf"] < MemoryAssumptions().logits_bytes_per_element_hf
    assert bf16["eager_loss_bytes_per_logit"] < StepAssumptions().eager_loss_bytes_per_logit
    # per element of the logits' dtype: fp32 logits double both
    fp32 = v.same_dtype_loss_assumptions(4.0)
    assert all(fp32[k] == pytest.approx(2 * bf16[k]) for k in bf16)


def test_automodel_loss_upcast_follows_the_benchmark_config(report):
    """The MoE benchmark configs run MaskedCrossEntropy with fp32_upcast: false; the Llama 3.1 70B config keeps
    the default upcast (no loss assumption passed)."""
    for rid in (
        "automodel-h100-gpt-oss-120b-64gpu-bf16",
        "automodel-h100-gpt-oss-20b-8gpu-bf16",
        "automodel-h100-qwen3-30b-a3b-8gpu-bf16",
        "automodel-h100-deepseek-v3-256gpu-bf16",
    ):
        case = _mapped_case(report, rid)
        assert case.kwargs["assume"]["logits_bytes_per_element_hf"] == 6.0, rid
        assert case.kwargs["assume"]["eager_loss_bytes_per_logit"] == 18.0, rid
        assert any("fp32_upcast: false" in n for n in case.notes), rid
    llama = _mapped_case(report, "automodel-h100-llama3-70b-64gpu-bf16")
    assert "logits_bytes_per_element_hf" not in llama.kwargs.get("assume", {})


def test_nemo_2407_recomputation_from_the_launcher_recipes(report):
    """NeMo 24.07's recipes: Nemotron-4 340B recomputes core attention (selective); the others recompute nothing,
    now said from the recipe rather than assumed."""
    nemotron = _mapped_case(report, "nemo-2407-h100-nemotron4-340b-128gpu-fp8")
    assert nemotron.kwargs["recompute"] == "selective"
    assert any("nemotron/nemotron_340b.yaml" in n for n in nemotron.notes)
    gpt = _mapped_case(report, "nemo-2407-h100-gpt3-175b-512gpu-fp8")
    assert gpt.kwargs["recompute"] == "none"
    assert any("gpt3/175b.yaml" in n for n in gpt.notes)
    assert not any("none assumed" in n for n in gpt.notes)


def test_tp_overlap_and_network_from_the_sources(report):
    """TP communication overlap where the source's recipe turns it on (NeMo 24.07 Llama 70B recipes, NeMo's 405B
    performance script) and off where it does not (GPT-3 175B); the cluster's network where the record states it
    (IBM's 800 Gb/s per node) and fms-fsdp's bf16 reduce."""
    for rid in (
        "nemo-2407-h100-llama2-70b-64gpu-fp8",
        "nemo-2407-h100-llama3-70b-64gpu-fp8",
        "megatron-examples-llama3-405b-1024gpu-fp8",
    ):
        case = _mapped_case(report, rid)
        assert case.kwargs["tp_comm_overlap"] is True and any("TP communication overlap" in n for n in case.notes)
    assert _mapped_case(report, "nemo-2407-h100-gpt3-175b-512gpu-fp8").kwargs["tp_comm_overlap"] is False
    ibm = _mapped_case(report, "ibm-fsdp-llama2-7b-96xh100-bf16")
    assert ibm.kwargs["assume"]["scale_out_bytes_per_s_per_gpu"] == pytest.approx(800e9 / 8 / 8 * 0.96)
    assert ibm.kwargs["main_grads"] == "bf16"
    # the loss fusion the launch settings turn on; Megatron-LM's default (off) elsewhere
    assert _mapped_case(report, "megatron-examples-llama3-8b-8gpu-fp8").kwargs["cross_entropy_fusion"] is True
    assert "cross_entropy_fusion" not in _mapped_case(report, "megatron-core-r080-weak-1p7b-48xh100").kwargs


def test_nemo_2504_tflops_turn_into_tokens_with_nemo_2_formula(report, validation):
    """NeMo 25.04's long-sequence table prints TFLOP/s per GPU under NeMo 2.0's llama3 formula (every query-key
    pair counted: nemo/utils/flops_formulas.py before 6251117f). For Llama 3.1 8B at 8k that is
    l h^2 (12 + 12 g/a + 18 f/h + 12 s/h) + 6 V h = 5.79e10 FLOPs per token, so 1,671 TFLOP/s is 28,854 tokens/s
    per GPU (0.1 %); the two B200 rows are scored, the 24.03 rows (an unverified NeMo 1.0 convention) stay
    skipped with the reason."""
    m = {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "vocab": 128256}
    per_token = v._nemo2_llama_flops_per_token(m, 8192)
    assert per_token == pytest.approx(32 * 4096**2 * (12 + 3 + 18 * 3.5 + 24) + 6 * 128256 * 4096, rel=1e-12)
    assert per_token == pytest.approx(5.79e10, rel=1e-3)
    rows = {r.case.record: r for r in report.rows if r.case.record.startswith("nemo-2504-")}
    assert set(rows) == {
        "nemo-2504-b200-llama3-8b-seq8k-2gpu-cp1-fp8",
        "nemo-2504-b200-llama3-8b-seq1024k-256gpu-cp16-fp8",
    }
    assert rows["nemo-2504-b200-llama3-8b-seq8k-2gpu-cp1-fp8"].case.published == pytest.approx(1671e12 / per_token)
    skipped = {s.record for s in report.skipped}
    assert {"nemo-2403-h100-llama2-7b-seq128k-128gpu-cp4-fp8"} <= skipped
