"""Hardware facts are catalog data (issue #12): the MAMF fraction, the cuBLAS workspace, the default scale-out
bandwidth and the fp8 GEMM layouts come from accelerators.toml, each with its own source, not from id prefixes
or architecture names in code. Issue #15 moved two more: the measured flash-attention rate that caps training
attention (``attention_flops_per_s``, was keyed on the architecture name "CDNA 3") and the GeForce fp16-accumulate
tensor rate (``fp16_accumulate_factor``, was matched on "geforce" in the card's name).

PINNED holds what every built-in accelerator resolved to with the code before the move (the id-prefix MAMF
table, the architecture-name rules); the data must give exactly the same numbers. A row that changes on purpose
(a new measurement) changes here with its reason.
"""

from __future__ import annotations

import json

import pytest

from conftest import BUNDLED_ACCELERATORS
from gpuplan.catalog import load_accelerators
from gpuplan.catalog.accelerators import read_accelerator_file
from gpuplan.errors import CatalogError
from gpuplan.estimate.inference import gemm_peak_flops_per_s
from gpuplan.estimate.mamf import DEFAULT_MATMUL_EFFICIENCY, matmul_efficiency
from gpuplan.estimate.memory import (
    DEFAULT_CUBLAS_WORKSPACE_BYTES,
    cublas_workspace_bytes,
    fp8_weight_copies,
    training_memory,
)
from gpuplan.estimate.steptime import (
    DEFAULT_SCALE_OUT_BYTES_PER_S_PER_GPU,
    StepAssumptions,
    scale_out,
    scale_out_bytes_per_s_per_gpu,
    training_step,
)
from gpuplan.spec.model import ModelSpec
from gpuplan.spec.serving import ServingJob
from gpuplan.spec.training import Parallelism, TrainingJob

# id: (MAMF fraction, scale-out bytes/s per GPU, cuBLAS workspace bytes, fp8 weight bytes per param or None
# where the GPU has no fp8 peak), as resolved before issue #12
PINNED = {
    "a10": (0.75, 24e9, 8_519_680, None),
    "a100-pcie-40gb": (271.2 / 312, 24e9, 8_519_680, None),
    "a100-pcie-80gb": (271.2 / 312, 24e9, 8_519_680, None),
    "a100-sxm-40gb": (271.2 / 312, 24e9, 8_519_680, None),
    "a100-sxm-80gb": (271.2 / 312, 24e9, 8_519_680, None),
    "a10g": (0.75, 24e9, 8_519_680, None),
    "a40": (0.75, 24e9, 8_519_680, None),
    "a800-sxm-80gb": (0.75, 24e9, 8_519_680, None),
    "b200": (1745.0 / 2250, 48e9, 33_554_432, 1),
    "b300": (0.75, 48e9, 33_554_432, 1),
    "gaudi": (0.75, 24e9, 8_519_680, None),
    "gaudi2": (0.75, 24e9, 8_519_680, 2),
    "gaudi3": (0.75, 24e9, 8_519_680, 2),
    "gb200": (1822.0 / 2500, 48e9, 33_554_432, 1),  # MAMF from the bundled mamf-gb200 record (2026-11-27)
    "gb300": (0.75, 48e9, 33_554_432, 1),
    "gh200": (828.6 / 989, 48e9, 33_554_432, 2),
    "h100-nvl-94gb": (794.5 / 989, 48e9, 33_554_432, 2),
    "h100-pcie-80gb": (794.5 / 989, 48e9, 33_554_432, 2),
    "h100-sxm-80gb": (794.5 / 989, 48e9, 33_554_432, 2),
    "h20": (0.75, 48e9, 33_554_432, 2),  # fp8 derived from its INT8 rate (catalog source), TN-only as GH100
    "h200-nvl-141gb": (794.5 / 989, 48e9, 33_554_432, 2),
    "h200-sxm-141gb": (794.5 / 989, 48e9, 33_554_432, 2),
    "inferentia2": (0.75, 24e9, 8_519_680, 2),
    "k80": (0.75, 24e9, 8_519_680, None),
    "l20": (0.75, 24e9, 8_519_680, None),
    "l4": (0.75, 24e9, 8_519_680, 2),
    "l40": (0.75, 24e9, 8_519_680, 2),
    "l40s": (0.75, 24e9, 8_519_680, 2),
    "m60": (0.75, 24e9, 8_519_680, None),
    "mi250": (0.75, 24e9, 8_519_680, None),
    "mi250x": (147.0 / 191.5, 24e9, 8_519_680, None),
    "mi300x": (668.4 / 1300, 24e9, 8_519_680, 2),
    "mi325x": (784.9 / 1300, 24e9, 8_519_680, 2),
    "mi355x": (0.75, 24e9, 8_519_680, 2),
    "p100-pcie-16gb": (0.75, 24e9, 8_519_680, None),
    "p100-sxm2-16gb": (0.75, 24e9, 8_519_680, None),
    "rtx-3080": (0.75, 24e9, 8_519_680, None),
    "rtx-3090": (0.75, 24e9, 8_519_680, None),
    "rtx-4080": (0.75, 24e9, 8_519_680, 2),  # fp8 peak derived from the RTX 4090's ratio since; TN-only as Ada
    "rtx-4090": (0.75, 24e9, 8_519_680, 2),
    "rtx-5090": (0.75, 48e9, 33_554_432, 1),
    "rtx-6000-ada": (0.75, 24e9, 8_519_680, None),
    "rtx-a6000": (0.75, 24e9, 8_519_680, None),
    # fp8 peak added by issue #15 (derived from its FP4 figure); compute capability 12.0 keeps a TN-only copy
    "rtx-pro-6000-blackwell": (0.75, 48e9, 33_554_432, 2),
    "rx-7900-xtx": (0.75, 24e9, 8_519_680, None),
    "h800": (0.75, 48e9, 33_554_432, 2),
    "rtx-4070-ti": (0.75, 24e9, 8_519_680, 2),
    "rtx-3060-12gb": (0.75, 24e9, 8_519_680, None),
    "m2-ultra-192gb": (0.75, 24e9, 8_519_680, None),
    "m3-max-128gb": (0.75, 24e9, 8_519_680, None),
    "m4-max-128gb": (0.75, 24e9, 8_519_680, None),
    "t4": (0.75, 24e9, 8_519_680, None),
    "tpu-v4": (0.75, 24e9, 8_519_680, None),
    "tpu-v5e": (0.75, 24e9, 8_519_680, None),
    "tpu-v5p": (0.75, 24e9, 8_519_680, 2),
    "tpu-v6e": (0.75, 24e9, 8_519_680, None),
    "tpu-v7": (0.75, 24e9, 8_519_680, 2),
    "trainium2": (0.75, 24e9, 8_519_680, 2),
    "v100-pcie-32gb": (0.75, 24e9, 8_519_680, None),
    "v100-sxm2-16gb": (0.75, 24e9, 8_519_680, None),
    "v100-sxm2-32gb": (0.75, 24e9, 8_519_680, None),
}

NEW_FIGURES = (
    "matmul_efficiency",
    "cublas_workspace_bytes",
    "scale_out_bytes_per_s_per_gpu",
    "fp8_gemm_any_layout",
    "attention_flops_per_s",
    "fp16_accumulate_factor",
)


def tiny() -> ModelSpec:
    return ModelSpec(
        id="tiny",
        name="tiny",
        model_type="llama",
        vocab_size=32000,
        hidden_size=1024,
        layers=4,
        attention_heads=16,
        kv_heads=16,
        head_dim=64,
        ffn_size=4096,
        context_length=4096,
        tie_embeddings=False,
        mlp_gated=True,
        norm="rmsnorm",
    )


@pytest.mark.parametrize("gid", sorted(PINNED))
def test_every_builtin_resolves_the_pinned_figures(gid):
    gpu = BUNDLED_ACCELERATORS.get(gid)
    mamf, scale_out_bps, workspace, fp8 = PINNED[gid]
    assert matmul_efficiency(gpu)[0] == mamf  # exact: the same float, not a rounding of it
    assert scale_out_bytes_per_s_per_gpu(gpu, StepAssumptions()) == scale_out_bps
    assert cublas_workspace_bytes(gpu) == workspace
    if fp8 is not None:
        assert gpu.supports("fp8") and fp8_weight_copies(gpu)[0] == fp8
    else:
        assert not gpu.supports("fp8")
    # and through the estimates themselves
    layout, job = Parallelism(gpus=8, tp=2), TrainingJob(micro_batch=1, seq_len=1024, global_batch=64)
    mem = training_memory(tiny(), gpu, layout, job, find_max_batch=False)
    assert mem.parts["cublas_workspace"] == workspace
    if fp8 is not None:
        mem8 = training_memory(
            tiny(), gpu, layout, TrainingJob(micro_batch=1, seq_len=1024, precision="fp8-mixed"), find_max_batch=False
        )
        assert mem8.parts["fp8_weight_copies"] == mem8.trainable_params / 2 * fp8  # tp=2 shards the weights
    if gpu.peak("bf16"):  # (the H20 entry lists no bf16 peak)
        step = training_step(tiny(), gpu, layout, job)
        assert step.matmul_efficiency == mamf * StepAssumptions().model_shape_factor


def test_pinned_ids_are_all_in_the_catalog():
    ids = {a.id for a in BUNDLED_ACCELERATORS}
    assert set(PINNED) <= ids


#: Lines of estimate/inference.py that still read the name or architecture, each for a stated reason; any other
#: such line fails the test below.
KNOWN_NAME_OR_ARCHITECTURE_READS = (
    # vLLM's own rule: EngineArgs.get_batch_defaults reads the device name ("a100"), so the model of vLLM does too
    '"a100" not in gpu.name.lower()',
    # the tensor-core instruction's fewest rows by architecture (PTX ISA): not catalog data yet (left for later)
    "MMA_MIN_ROWS.get(gpu.architecture",
)


def test_no_code_keys_hardware_facts_on_ids_or_architecture_names():
    """The facts moved to data stay there: no prefix table, no architecture-name rule and no name matching in
    these modules (issue #15: the CDNA 3 attention table and the "geforce" name test are catalog figures now)."""
    from pathlib import Path

    import gpuplan.estimate.inference as inference
    import gpuplan.estimate.memory as memory
    import gpuplan.estimate.steptime as steptime

    for mod in (steptime, memory, inference):
        text = Path(mod.__file__).read_text()
        known = KNOWN_NAME_OR_ARCHITECTURE_READS if mod is inference else ()
        for line in text.splitlines():
            if any(k in line for k in known):
                continue
            assert "gpu.architecture" not in line, (mod.__name__, line)
            assert "gpu.name" not in line, (mod.__name__, line)
            assert "gpu.id.startswith" not in line, (mod.__name__, line)
            assert "gpu.id ==" not in line, (mod.__name__, line)
        assert "geforce" not in text.replace("GeForce", ""), mod.__name__  # no lower-cased name test either
    for mod, name in (
        (steptime, "MATMUL_EFFICIENCY"),
        (steptime, "MEASURED_FLASH_ATTENTION_FLOPS_PER_S"),
        (inference, "GEFORCE_FP16_ACCUMULATE_FACTOR"),
    ):
        assert not hasattr(mod, name), name
    # each known read is still there: the list names what exists, not what once did
    text = Path(inference.__file__).read_text()
    assert all(k in text for k in KNOWN_NAME_OR_ARCHITECTURE_READS)


LLAMACPP_FP16 = ServingJob(prompt_tokens=512, output_tokens=1, engine="llama.cpp", weights="fp16")
VLLM_FP16 = ServingJob(prompt_tokens=512, output_tokens=1, engine="vllm", weights="fp16")


def test_the_issue_15_figures_give_what_the_code_rules_gave():
    """Every built-in accelerator resolves what the removed rules gave it, exactly: the 232 TFLOP/s attention
    cap where the architecture was "CDNA 3" (MI300X, MI325X), and twice the fp16 peak for llama.cpp's fp16
    accumulate where the name held "GeForce" (GEFORCE_FP16_ACCUMULATE_FACTOR). The rules are restated here, in
    the test, only to pin the data to them (one test over the catalog: no catalog is read at import)."""
    for gpu in BUNDLED_ACCELERATORS:
        assert gpu.attention_flops_per_s == (232e12 if gpu.architecture == "CDNA 3" else None), gpu.id
        if gpu.supports("fp16"):
            old = gpu.peak_flops_per_s["fp16"] * (2.0 if "geforce" in gpu.name.lower() else 1.0)
            assert gemm_peak_flops_per_s(gpu, LLAMACPP_FP16) == old, gpu.id  # the same float
        geforce = "geforce" in gpu.name.lower()
        assert (gpu.fp16_accumulate_factor == 2.0) if geforce else (gpu.fp16_accumulate_factor is None), gpu.id


def test_the_attention_cap_cites_its_measurement_and_says_where_it_is_borrowed():
    """MI300X carries the ROCm/flash-attention#142 measurement; the MI325X (same CDNA 3 compute dies, no
    measurement of its own) carries it as an estimate, and says so."""
    mi300x, mi325x = BUNDLED_ACCELERATORS.get("mi300x"), BUNDLED_ACCELERATORS.get("mi325x")
    src = mi300x.source_for("attention_flops_per_s")
    assert "ROCm/flash-attention#142" in src.title and "223-232 TFLOP/s" in src.title and not src.estimated
    borrowed = mi325x.source_for("attention_flops_per_s")
    assert borrowed.estimated and borrowed.title.startswith("estimated, not measured (the MI300X measurement")
    assert mi325x.peak_flops_per_s["bf16"] == mi300x.peak_flops_per_s["bf16"]  # the premise of the estimate


def test_each_geforce_factor_cites_its_whitepaper_table():
    """The cards a whitepaper prints (RTX 3080/3090: GA102; RTX 4090: AD102; RTX 5090: GB202) cite their own
    row; the others (RTX 3060, 4070 Ti, 4080) cite a sibling's with a derivation, marked estimated."""
    printed = {
        "rtx-3080": ("GA102", "119/238"),
        "rtx-3090": ("GA102", "142/284"),
        "rtx-4090": ("Ada", "330.3/660.6"),
        "rtx-5090": ("Blackwell", "419/838"),
    }
    for gid, (paper, row) in printed.items():
        src = BUNDLED_ACCELERATORS.get(gid).source_for("fp16_accumulate_factor")
        assert paper in src.title and row in src.title and "with FP16 Accumulate" in src.title and not src.estimated
    for gid in ("rtx-3060-12gb", "rtx-4070-ti", "rtx-4080"):
        src = BUNDLED_ACCELERATORS.get(gid).source_for("fp16_accumulate_factor")
        assert src.estimated and "printed ratio" in (src.derivation or ""), gid


def test_neither_the_name_nor_the_architecture_picks_a_figure(tmp_path):
    """A user entry named GeForce on CDNA 3 without the figures gets neither; one that gives them gets them,
    whatever it is called."""
    base = USER.replace("fp8 = 1000e12\n", "fp8 = 1000e12\nfp16 = 500e12\n")
    lookalike = base.replace('name = "Acme X1"', 'name = "NVIDIA GeForce RTX 9090"').replace(
        'architecture = "Hopper"', 'architecture = "CDNA 3"'
    )
    gpu = load_accelerators([write(tmp_path, lookalike)]).get("acme-x1")
    assert gpu.attention_flops_per_s is None and gpu.fp16_accumulate_factor is None
    assert gemm_peak_flops_per_s(gpu, LLAMACPP_FP16) == 500e12
    layout, job = Parallelism(gpus=1), TrainingJob(seq_len=8192, global_batch=1)
    uncapped = training_step(tiny(), gpu, layout, job)
    given = base + (
        '[accelerator.sources."attention_flops_per_s"]\ntitle = "our fwd+bwd benchmark"\nurl = "https://example.com/a"\n'
        'date = "2026-03"\n[accelerator.sources."fp16_accumulate_factor"]\ntitle = "Acme X1 whitepaper"\n'
        'url = "https://example.com/w"\ndate = "2026-03"\n'
    )
    mine = load_accelerators(
        [write(tmp_path, given, "attention_flops_per_s = 50e12\nfp16_accumulate_factor = 2.0")]
    ).get("acme-x1")
    assert gemm_peak_flops_per_s(mine, LLAMACPP_FP16) == 1000e12
    assert gemm_peak_flops_per_s(mine, VLLM_FP16) == gemm_peak_flops_per_s(gpu, VLLM_FP16)  # vLLM: fp32 accumulate
    capped = training_step(tiny(), mine, layout, job)
    # 0.55 x 500 TFLOP/s = 275 against the 50 given: the attention part grows by 275 / 50 = 5.5
    assert capped.parts["attention"] == pytest.approx(uncapped.parts["attention"] * 275 / 50, rel=1e-9)
    assert capped.parts["matmul"] == uncapped.parts["matmul"]


@pytest.mark.parametrize("gid", sorted(PINNED))
def test_every_figure_in_the_data_has_its_own_source(gid):
    gpu = BUNDLED_ACCELERATORS.get(gid)
    for key, _ in gpu.figures():
        if key.split(".")[0] in NEW_FIGURES:
            assert gpu.source_for(key) is not gpu.sources["default"], (gid, key)


def test_a_gpu_without_a_measurement_says_so():
    gpu = BUNDLED_ACCELERATORS.get("a10")
    assert not gpu.matmul_efficiency
    value, source = matmul_efficiency(gpu)
    assert value == DEFAULT_MATMUL_EFFICIENCY == 0.75
    assert "no MAMF measurement for this GPU (a10)" in source and "default 75 %" in source
    step = training_step(tiny(), gpu, Parallelism(gpus=1), TrainingJob(seq_len=1024))
    assert "no MAMF measurement for this GPU" in step.matmul_efficiency_source
    assert "default 75 %" in step.matmul_efficiency_source
    nic, nic_source = scale_out(gpu, StepAssumptions())
    assert nic == DEFAULT_SCALE_OUT_BYTES_PER_S_PER_GPU and "no scale-out figure" in nic_source


def test_a_measured_gpu_cites_its_row():
    value, source = matmul_efficiency(BUNDLED_ACCELERATORS.get("h100-sxm-80gb"))
    assert value == 794.5 / 989
    assert "794.5 of 989" in source and "2025-07-08" in source
    # fp8 training uses the FP8 row of the same table (1402.6 of 1979 TFLOP/s)
    value8, source8 = matmul_efficiency(BUNDLED_ACCELERATORS.get("h100-sxm-80gb"), "fp8")
    assert value8 == 1402.6 / 1979 and "1402.6 of 1979" in source8
    # a GPU with only a bf16 row falls back to it, and says so
    _, source_a = matmul_efficiency(BUNDLED_ACCELERATORS.get("a100-sxm-80gb"), "fp8")
    assert "no fp8 measurement in the catalog: the bf16 one" in source_a


def test_a_set_scale_out_wins_over_the_catalog():
    gpu = BUNDLED_ACCELERATORS.get("h100-sxm-80gb")
    assert scale_out(gpu, StepAssumptions(scale_out_bytes_per_s_per_gpu=12.5e9))[0] == 12.5e9
    assert scale_out(gpu, StepAssumptions())[0] == 48e9


# ------------------------------------------------------------------------------------- user catalog entries

USER = """
schema_version = 1
[[accelerator]]
id = "acme-x1"
name = "Acme X1"
vendor = "other"
architecture = "Hopper"
form_factor = "PCIe"
year = 2026
memory_bytes = 64_000_000_000
memory_type = "HBM3"
memory_bandwidth_bytes_per_s = 2.0e12
tdp_w = 500
EXTRA
[accelerator.peak_flops_per_s]
bf16 = 500e12
fp8 = 1000e12
[accelerator.matmul_efficiency]
bf16 = 0.62
fp8 = 0.55
[accelerator.sources.default]
title = "Acme X1 datasheet"
url = "https://example.com/x1.pdf"
date = "2026-01"
[accelerator.sources."matmul_efficiency"]
title = "mamf-finder.py on our Acme X1"
url = "https://example.com/x1-mamf.txt"
date = "2026-03"
"""


def write(tmp_path, text, extra=""):
    f = tmp_path / "mine.toml"
    f.write_text(text.replace("EXTRA", extra))
    return f


def test_a_user_entry_with_its_own_matmul_efficiency_is_used(tmp_path):
    f = write(tmp_path, USER)
    gpu = load_accelerators([f]).get("acme-x1")
    assert matmul_efficiency(gpu) == (0.62, matmul_efficiency(gpu)[1])
    assert "mamf-finder.py on our Acme X1 (2026-03)" in matmul_efficiency(gpu)[1]
    assert matmul_efficiency(gpu, "fp8")[0] == 0.55  # its own fp8 figure for fp8 training
    a = StepAssumptions()
    bf16 = training_step(tiny(), gpu, Parallelism(gpus=1), TrainingJob(seq_len=1024))
    fp8 = training_step(tiny(), gpu, Parallelism(gpus=1), TrainingJob(seq_len=1024, precision="fp8-mixed"))
    assert bf16.matmul_efficiency == 0.62 * a.model_shape_factor
    assert fp8.matmul_efficiency == 0.55 * a.model_shape_factor
    assert "mamf-finder.py on our Acme X1" in bf16.matmul_efficiency_source


def test_a_user_entry_without_the_figures_gets_the_documented_defaults(tmp_path):
    """The architecture name no longer picks a figure: "Hopper" without data is a GPU without data."""
    text = USER.replace("[accelerator.matmul_efficiency]\nbf16 = 0.62\nfp8 = 0.55\n", "")
    gpu = load_accelerators([write(tmp_path, text)]).get("acme-x1")
    assert matmul_efficiency(gpu)[0] == DEFAULT_MATMUL_EFFICIENCY
    assert cublas_workspace_bytes(gpu) == DEFAULT_CUBLAS_WORKSPACE_BYTES == 8_519_680
    assert scale_out_bytes_per_s_per_gpu(gpu, StepAssumptions()) == DEFAULT_SCALE_OUT_BYTES_PER_S_PER_GPU
    copies, why = fp8_weight_copies(gpu)
    assert copies == 2 and "no fp8 GEMM layout figure" in why


def test_a_user_entry_overriding_a_builtin_takes_its_own_figures(tmp_path):
    extra = "scale_out_bytes_per_s_per_gpu = 100e9\ncublas_workspace_bytes = 1_048_576\nfp8_gemm_any_layout = true\n"
    text = (
        USER.replace('id = "acme-x1"', 'id = "h100-sxm-80gb"')
        + """
[accelerator.sources."scale_out_bytes_per_s_per_gpu"]
title = "our cluster: one 800 Gb/s NIC per GPU"
url = "https://example.com/net"
date = "2026-02"
[accelerator.sources."cublas_workspace_bytes"]
title = "CUBLAS_WORKSPACE_CONFIG=:1024:1 in our launcher"
url = "https://example.com/env"
date = "2026-02"
[accelerator.sources."fp8_gemm_any_layout"]
title = "vendor note"
url = "https://example.com/fp8"
date = "2026-02"
"""
    )
    gpu = load_accelerators([write(tmp_path, text, extra)]).get("h100-sxm-80gb")
    assert gpu.name == "Acme X1"
    assert matmul_efficiency(gpu)[0] == 0.62
    assert scale_out(gpu, StepAssumptions()) == (100e9, "our cluster: one 800 Gb/s NIC per GPU (2026-02)")
    assert cublas_workspace_bytes(gpu) == 1_048_576
    assert fp8_weight_copies(gpu)[0] == 1
    rec = gpu.to_dict()
    assert rec["matmul_efficiency"] == {"bf16": 0.62, "fp8": 0.55}
    assert rec["scale_out_bytes_per_s_per_gpu"] == 100e9 and rec["cublas_workspace_bytes"] == 1_048_576
    assert rec["sources"]["matmul_efficiency.fp8"]["title"] == "mamf-finder.py on our Acme X1"
    json.dumps(rec)


@pytest.mark.parametrize(
    "old,new,fragments",
    [
        (
            "bf16 = 0.62",
            "bf16 = 1.2",
            ["accelerator 'acme-x1'", "matmul_efficiency", "bf16 = 1.2 is not a fraction", "at most 1"],
        ),
        ("bf16 = 0.62", "bf16 = 0.0", ["matmul_efficiency", "bf16 = 0.0 is not a fraction", "more than 0"]),
        ("fp8 = 0.55", "fp8 = -0.5", ["matmul_efficiency", "fp8 = -0.5 is not a fraction"]),
        ("fp8 = 0.55", "fp8 = 80.0", ["fp8 = 80.0 is not a fraction"]),  # a percentage, not a fraction
    ],
)
def test_schema_rejects_an_out_of_range_fraction(tmp_path, old, new, fragments):
    with pytest.raises(CatalogError) as err:
        read_accelerator_file(write(tmp_path, USER.replace(old, new)))
    for frag in fragments:
        assert frag in str(err.value), (frag, str(err.value))


@pytest.mark.parametrize(
    "mutate,fragments",
    [
        # a fraction of a peak the entry does not have
        (lambda s: s.replace("fp8 = 1000e12\n", ""), ["matmul_efficiency gives fp8", "no fp8 peak"]),
        # a measured figure needs its own source, not the datasheet's
        (
            lambda s: s.replace('[accelerator.sources."matmul_efficiency"]', '[accelerator.sources."other"]'),
            ["matmul_efficiency is a measurement", 'sources."matmul_efficiency"'],
        ),
        (
            lambda s: s.replace("EXTRA", "scale_out_bytes_per_s_per_gpu = 50e9"),
            ["scale_out_bytes_per_s_per_gpu is a measurement", "own source"],
        ),
        (lambda s: s.replace("EXTRA", "cublas_workspace_bytes = -1"), ["cublas_workspace_bytes", "greater than 0"]),
        (lambda s: s.replace("EXTRA", "fp8_gemm_any_layout = 1"), ["fp8_gemm_any_layout", "boolean"]),
        (
            lambda s: s.replace("EXTRA", "attention_flops_per_s = 232e12"),
            ["attention_flops_per_s is a measurement", 'sources."attention_flops_per_s"'],
        ),
        (lambda s: s.replace("EXTRA", "attention_flops_per_s = 0"), ["attention_flops_per_s", "greater than 0"]),
        # a multiple of the fp16 peak: needs one, at least 1, and the table it was read from
        (
            lambda s: s.replace("EXTRA", "fp16_accumulate_factor = 2.0"),
            ["fp16_accumulate_factor is a multiple of the fp16 peak", "no fp16 peak"],
        ),
        (
            lambda s: s.replace("EXTRA", "fp16_accumulate_factor = 2.0").replace(
                "fp8 = 1000e12", "fp8 = 1000e12\nfp16 = 500e12"
            ),
            ["fp16_accumulate_factor needs its own source", 'sources."fp16_accumulate_factor"'],
        ),
        (
            lambda s: s.replace("EXTRA", "fp16_accumulate_factor = 0.5"),
            ["fp16_accumulate_factor", "greater than or equal to 1"],
        ),
        (
            lambda s: s.replace("[accelerator.matmul_efficiency]\nbf16", "[accelerator.matmul_efficiency]\nbf17"),
            ["matmul_efficiency"],
        ),
    ],
)
def test_schema_rejects_bad_hardware_facts(tmp_path, mutate, fragments):
    f = tmp_path / "mine.toml"
    f.write_text(mutate(USER).replace("EXTRA", ""))
    with pytest.raises(CatalogError) as err:
        read_accelerator_file(f)
    for frag in fragments:
        assert frag in str(err.value), (frag, str(err.value))


def test_gpus_show_lists_the_hardware_facts(run, monkeypatch):
    """The table shows the measured ceilings, the NIC, the workspace and the fp8 layout rule with their
    sources, and says when a ceiling is not measured (the default stands in)."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run("gpus", "show", "h100")
    assert code == 0
    for text in (
        "bf16 matmul ceiling (MAMF)",
        "80.3% of the bf16 peak",
        "fp8 matmul ceiling (MAMF)",
        "48 GB/s per direction",
        "32 MiB",
        "TN only",
    ):
        assert text in out, text
    code, out, _ = run("gpus", "show", "mi300x")
    assert code == 0 and "flash attention fwd + bwd" in out and "232 TFLOP/s (caps training attention)" in out
    code, out, _ = run("gpus", "show", "rtx-4090")
    assert code == 0 and "fp16 tensor, FP16 accumulate" in out and "2x the fp16 peak (330.4 TFLOP/s)" in out
    code, out, _ = run("gpus", "show", "a10")
    assert code == 0 and "not measured: estimates assume 75 % of the peak" in out


def test_gpus_compare_shows_measured_ceilings_beside_the_peaks(run, monkeypatch):
    """Each matrix dtype's dense peak is followed by the matmul ceiling the estimates use: the measured MAMF
    (H100 bf16 794.5 of 989.5 -> 80.3 %; fp8 1402.6 of 1979 -> 70.9 %) as is, anything else marked estimated."""
    monkeypatch.setenv("COLUMNS", "250")
    code, out, _ = run("gpus", "compare", "h100", "a10", "--json")
    assert code == 0
    h100, a10 = json.loads(out)["accelerators"]
    bf16 = h100["matmul_ceilings"]["bf16"]
    assert bf16["measured"] and bf16["fraction"] == 794.5 / 989
    assert bf16["flops_per_s"] == pytest.approx(989.5e12 * 794.5 / 989, rel=1e-12)
    fp8 = h100["matmul_ceilings"]["fp8"]
    assert fp8["measured"] and fp8["fraction"] == 1402.6 / 1979
    assert not h100["matmul_ceilings"]["int8"]["measured"]  # the bf16 fraction stands in: said so
    assert h100["matmul_ceilings"]["int8"]["source"].startswith("estimated, not measured")
    a10_bf16 = a10["matmul_ceilings"]["bf16"]
    assert not a10_bf16["measured"] and a10_bf16["fraction"] == DEFAULT_MATMUL_EFFICIENCY
    assert a10_bf16["source"].startswith("estimated, not measured")
    code, out, _ = run("gpus", "compare", "h100", "a10")
    assert code == 0
    lines = out.splitlines()
    peak = next(i for i, line in enumerate(lines) if "bf16 dense peak" in line)
    ceiling = lines[peak + 1]
    assert "bf16 matmul ceiling" in ceiling and "794.9 (80.3%)" in ceiling and "est. " in ceiling  # a10's
    assert "794.9 (80.3%)" in ceiling.split("est.")[0]  # the measured H100 figure is not marked
