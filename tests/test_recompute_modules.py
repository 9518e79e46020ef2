"""``train --recompute selective --recompute-modules``: Megatron-Core's module-level recomputation (its
TransformerConfig.recompute_modules), what each module takes out of the saved activations, what it adds to the
step, and the refusals."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gpuplan import api
from gpuplan.errors import GpuplanError
from gpuplan.estimate.memory import MemoryAssumptions, activation_bytes_per_layer
from gpuplan.spec.training import Parallelism, TrainingJob

CAT = api._catalogs(())


def _terms(model: str, **job) -> dict[str, float]:
    spec = CAT.models().get(model)
    base = dict(micro_batch=2, seq_len=8192, global_batch=16, precision="bf16-mixed", recipe="megatron")
    jb = TrainingJob(**{**base, **job})
    return activation_bytes_per_layer(spec, jb, Parallelism(gpus=8, tp=1, pp=1), MemoryAssumptions())


def test_each_module_drops_its_own_tensors():
    """Against plain selective (core_attn, which with flash attention keeps everything): mlp drops a dense layer's
    hidden tensors; layernorm changes nothing on a Llama, whose norms Transformer Engine fuses into the linears
    after them (Megatron-Core recomputes only norms that are not an IdentityOp); the other terms are untouched, to
    the byte."""
    sel = _terms("llama-3.1-8b", recompute="selective")
    ln = _terms("llama-3.1-8b", recompute="selective", recompute_modules=("layernorm",))
    mlp = _terms("llama-3.1-8b", recompute="selective", recompute_modules=("mlp",))
    assert ln == sel
    assert set(sel) - set(mlp) == {"mlp_hidden"}
    for k in set(mlp) & set(sel):
        assert mlp[k] == sel[k]
    assert sel == _terms("llama-3.1-8b", recompute="none")  # core_attn: flash attention saves no s x s tensors


def test_layernorm_drops_the_norms_kept_apart_in_any_precision():
    """An MoE layer's pre-MLP norm and MLA's input norm stand apart from a linear: layernorm drops the router's and
    experts' input (Mixtral) and the Q/K/V down projections' input (DeepSeek-V3), in bf16 and in fp8 alike (Megatron
    sets the consuming linears to save that original tensor, which is then discarded)."""
    for precision in ("bf16-mixed", "fp8-mixed"):
        sel = _terms("mixtral-8x7b", recompute="selective", precision=precision)
        ln = _terms("mixtral-8x7b", recompute="selective", precision=precision, recompute_modules=("layernorm",))
        assert set(sel) - set(ln) == {"mlp_input"}
    sel = _terms("deepseek-v3", recompute="selective")
    ln = _terms("deepseek-v3", recompute="selective", recompute_modules=("layernorm",))
    assert "qkv_input" in sel and "qkv_input" not in ln
    assert ln["mlp_input"] < sel["mlp_input"]  # its 58 MoE layers' pre-MLP norms go, the 3 dense layers' stay


def test_moe_modules():
    """Mixtral: moe_act discards one of the experts' three saved hidden tensors (fused SwiGLU on the megatron
    recipe: 2/3 stay), moe every expert term but the layer's input."""
    sel = _terms("mixtral-8x7b", recompute="selective")
    act = _terms("mixtral-8x7b", recompute="selective", recompute_modules=("moe_act",))
    moe = _terms("mixtral-8x7b", recompute="selective", recompute_modules=("moe",))
    assert act["expert_hidden"] == pytest.approx(sel["expert_hidden"] * 2 / 3, rel=1e-12)
    assert {"router_logits", "expert_dispatch", "expert_hidden"} <= set(sel) and not (
        {"router_logits", "expert_dispatch", "expert_hidden"} & set(moe)
    )
    assert moe["mlp_input"] == sel["mlp_input"]


def test_mla_up_proj_keeps_the_latents():
    sel = _terms("deepseek-v3", recompute="selective")
    up = _terms("deepseek-v3", recompute="selective", recompute_modules=("mla_up_proj",))
    assert "q_k_v" in sel and "q_k_v" not in up
    assert up["mla_latents"] == sel["mla_latents"]


def _step(**kw):
    base = dict(model="llama-3.1-8b", gpu="h100", gpus=8, fsdp=True, micro_batch=2, global_batch=16, seq_len=8192)
    return api.train(**{**base, **kw}, tokens=1e9, offline=True)


def test_step_time_adds_what_re_runs():
    """The recompute part is the attention core's time plus each named module's forward: the MLP's GEMMs make
    (core_attn, mlp) cost more than core_attn and less than full recomputation; layernorm, a no-op on a Llama, adds
    nothing; memory falls in the same order, with the one layer being rebuilt counted."""
    plans = {
        name: _step(recompute=rc, recompute_modules=mods)
        for name, rc, mods in (
            ("core", "selective", None),
            ("ln", "selective", "core_attn,layernorm"),
            ("mlp", "selective", "core_attn,mlp"),
            ("full", "full", None),
        )
    }
    rec = {k: p.plan.step.parts["recompute"] for k, p in plans.items()}
    mem = {k: p.memory.total_bytes for k, p in plans.items()}
    assert rec["ln"] == rec["core"] and mem["ln"] == mem["core"]
    assert rec["core"] < rec["mlp"] < rec["full"]
    assert mem["full"] < mem["mlp"] < mem["core"]
    assert "layernorm" in " ".join(plans["ln"].to_dict()["notes"])  # says why it changed nothing


def test_array_evaluation_equals_scalar():
    """The planner evaluates layouts as numpy arrays: the per-module GEMM times, the recompute part and the step
    match one-by-one scalar calls exactly (DeepSeek-V3 with every module and DeepEP; Mixtral's moe)."""
    from dataclasses import fields

    import numpy as np

    from gpuplan.estimate.steptime import training_step
    from gpuplan.spec.training import ParallelismGrid, TrainingJobGrid

    for model, gpu, mods, layouts in (
        (
            "deepseek-v3",
            "b200",
            ("core_attn", "layernorm", "mlp", "moe", "mla_up_proj"),
            [(512, 1, 16, 32), (512, 1, 8, 16)],
        ),
        ("mixtral-8x7b", "h100-sxm-80gb", ("moe", "layernorm"), [(64, 1, 4, 8), (64, 2, 4, 4), (64, 1, 1, 2)]),
    ):
        spec, acc = CAT.models().get(model), CAT.accelerators().get(gpu)
        job = TrainingJob(
            micro_batch=1, seq_len=4096, global_batch=1024, precision="bf16-mixed", recipe="megatron",
            recompute="selective", recompute_modules=mods, moe_dispatcher="deepep",
        )  # fmt: skip
        scalar = [
            training_step(spec, acc, Parallelism(gpus=g, tp=t, pp=p, ep=e, sequence_parallel=t > 1), job)
            for g, t, p, e in layouts
        ]
        col = [np.array([x[i] for x in layouts]) for i in range(4)]
        n = len(layouts)
        grid = ParallelismGrid(
            gpus=col[0], tp=col[1], pp=col[2], cp=np.ones(n, int), ep=col[3], etp=None,
            virtual_stages=np.ones(n, int), sequence_parallel=col[1] > 1,
        )  # fmt: skip
        arr = training_step(spec, acc, grid, TrainingJobGrid(**{f.name: getattr(job, f.name) for f in fields(job)}))
        assert np.allclose(arr.parts["recompute"], [s.parts["recompute"] for s in scalar], rtol=1e-12)
        assert np.allclose(arr.iteration_s, [s.iteration_s for s in scalar], rtol=1e-12)


def test_flag_end_to_end(run):
    """CLI and JSON: the modules as given (Megatron's core_attn where none are); null without selective; the text
    report names them; a bad combination is one line and exit 2."""
    args = ["train", "mixtral-8x7b", "--gpu", "h100", "--gpus", "8", "--ep", "8", "--zero", "1", "--recipe", "megatron"]
    code, out, _ = run(*args, "--recompute", "selective", "--recompute-modules", "moe_act,layernorm", "--json")
    assert code in (0, 3)
    assert json.loads(out)["job"]["recompute_modules"] == ["moe_act", "layernorm"]
    code, out, _ = run(*args, "--recompute", "selective", "--json")
    assert json.loads(out)["job"]["recompute_modules"] == ["core_attn"]
    code, out, _ = run(*args, "--json")
    assert json.loads(out)["job"]["recompute_modules"] is None
    code, out, _ = run(*args, "--recompute", "selective", "--recompute-modules", "moe_act")
    assert "recompute selective (moe_act)" in " ".join(out.split())
    for bad, says in (
        (["--recompute", "full", "--recompute-modules", "moe"], "--recompute is full"),
        (["--recompute", "selective", "--recompute-modules", "mla_up_proj"], "does not have"),
        (["--recompute", "selective", "--recompute-modules", "attn"], "unknown --recompute-modules attn"),
        (["--recompute", "selective", "--recompute-modules", "moe,moe"], "twice"),
    ):
        code, out, err = run(*args, *bad)
        assert code == 2 and says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_api_refuses_with_one_error():
    with pytest.raises(GpuplanError, match=r"does not have"):
        _step(recompute="selective", recompute_modules=["moe"])
    with pytest.raises(GpuplanError, match="comma list"):
        replace(TrainingJob(recompute="selective"), recompute_modules=())
