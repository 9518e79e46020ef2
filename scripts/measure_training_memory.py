"""Measure real peak training memory and step time on a GPU and record them beside gpuplan's estimate.

Trains Llama-architecture models with random weights (the llama-3.2-1b and llama-3.1-8b configs from
gpuplan's catalog) for a few steps under several configurations, and records torch.cuda.max_memory_allocated
and max_memory_reserved, and the time of each step after the warm-up ones (tokens/s), with gpuplan's
memory estimate for the same job, into docs/measurements/. The model is eager Hugging Face transformers
(SDPA attention, fused AdamW), one GPU.

    python scripts/measure_training_memory.py --out docs/measurements/training_memory_h100.json
    python scripts/measure_training_memory.py --device cpu --model tiny --steps 1   # smoke test, no numbers

Needs torch and transformers (pip install -e ".[test]"); peft and bitsandbytes enable the LoRA, QLoRA
and 8-bit-Adam rows (skipped, with the reason recorded, when missing). The estimate compared is what
the PyTorch allocator sees: gpuplan's total less the CUDA context and NCCL buffers, which live outside it.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from gpuplan.catalog import load_accelerators, load_models  # noqa: E402
from gpuplan.catalog.models import bundled_configs  # noqa: E402
from gpuplan.estimate.memory import training_memory  # noqa: E402
from gpuplan.local.detect import torch_gpu_catalog_id  # noqa: E402
from gpuplan.spec.training import Parallelism, TrainingJob  # noqa: E402
from measure_inference import TINY  # noqa: E402  (scripts/ is on the path of a script run from it)

OUTSIDE_ALLOCATOR = ("cuda_context", "nccl_buffers")


@dataclass
class Case:
    name: str
    micro_batch: int
    seq_len: int
    precision: str = "bf16-mixed"  # bf16-mixed: fp32 weights + autocast (PyTorch AMP); bf16: pure bf16
    optimizer: str = "adamw"
    method: str = "full"
    recompute: str = "none"
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    lora_rank: int = 16
    needs: tuple[str, ...] = field(default=())
    #: gpuplan model id; None: the --model given
    model: str | None = None

    def job(self) -> TrainingJob:
        return TrainingJob(
            micro_batch=self.micro_batch,
            seq_len=self.seq_len,
            global_batch=self.micro_batch,  # run_case steps the optimizer after every micro-batch
            precision=self.precision,
            optimizer=self.optimizer,
            method=self.method,
            recompute=self.recompute,
            lora_targets=self.lora_targets,
            lora_rank=self.lora_rank,
            recipe="auto",
        )


CASES = [
    Case("amp-b1-s2048", 1, 2048),
    Case("amp-b4-s2048", 4, 2048),
    Case("amp-b1-s8192", 1, 8192),
    Case("amp-b8-s2048-recompute", 8, 2048, recompute="full"),
    Case("bf16-b2-s2048", 2, 2048, precision="bf16"),
    Case("bf16-b4-s4096-recompute", 4, 4096, precision="bf16", recompute="full"),
    Case("amp-adamw8bit-b2-s2048", 2, 2048, optimizer="adamw-8bit", needs=("bitsandbytes",)),
    Case("lora-b4-s2048", 4, 2048, precision="bf16-mixed", method="lora", needs=("peft",)),
    Case("qlora-b4-s2048", 4, 2048, precision="bf16-mixed", method="qlora", needs=("peft", "bitsandbytes")),
    Case("8b-bf16-b1-s4096-recompute", 1, 4096, precision="bf16", recompute="full", model="llama-3.1-8b"),
    Case("8b-bf16-b2-s4096", 2, 4096, precision="bf16", model="llama-3.1-8b"),
    Case("8b-lora-b4-s2048", 4, 2048, precision="bf16-mixed", method="lora", needs=("peft",), model="llama-3.1-8b"),
]


def _missing(modules: tuple[str, ...]) -> list[str]:
    import importlib.util

    return [m for m in modules if importlib.util.find_spec(m) is None]


def build_model(config: dict, case: Case, device: str):
    import torch
    import transformers

    cfg = dict(config)
    hf_config = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    hf_config._attn_implementation = "sdpa"
    kwargs = {}
    if case.method == "qlora":
        kwargs["quantization_config"] = transformers.BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16,
        )
    dtype = torch.float32 if case.precision in ("bf16-mixed", "fp32") and case.method == "full" else torch.bfloat16
    torch.manual_seed(0)
    if kwargs:  # quantized: save random weights once, reload through bitsandbytes
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            with torch.device(device):
                random_model = transformers.AutoModelForCausalLM.from_config(hf_config, dtype=torch.bfloat16)
            random_model.save_pretrained(d)
            del random_model
            model = transformers.AutoModelForCausalLM.from_pretrained(d, device_map={"": device}, **kwargs)
    else:  # initialised where it runs: an 8B model's random init on the host takes minutes
        with torch.device(device):
            model = transformers.AutoModelForCausalLM.from_config(hf_config, dtype=dtype)
    if case.recompute == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if case.method in ("lora", "qlora"):
        import peft

        if case.method == "qlora":
            model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=case.recompute == "full")
        model = peft.get_peft_model(
            model,
            peft.LoraConfig(r=case.lora_rank, target_modules=list(case.lora_targets), lora_alpha=16, lora_dropout=0.0),
        )
    return model


def make_optimizer(model, case: Case):
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    if case.optimizer == "adamw-8bit":
        import bitsandbytes as bnb

        return bnb.optim.AdamW8bit(params, lr=1e-5)
    return torch.optim.AdamW(params, lr=1e-5, fused=torch.cuda.is_available())


def run_case(config: dict, case: Case, device: str, steps: int, warmup: int) -> dict:
    """Peak memory over warm-up and timed steps; the step time of each timed step (synchronised)."""
    import statistics

    import torch

    model = build_model(config, case, device)
    opt = make_optimizer(model, case)
    vocab = config["vocab_size"]
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    autocast = case.precision == "bf16-mixed"
    step_s = []
    for i in range(warmup + steps):
        ids = torch.randint(0, vocab, (case.micro_batch, case.seq_len), device=device)
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            step_s.append(time.perf_counter() - t0)
    tokens = case.micro_batch * case.seq_len
    median = statistics.median(step_s)
    out = {
        "warmup_steps": warmup,
        "steps": steps,
        "step_s": step_s,
        "median_step_s": median,
        "tokens_per_s": tokens / median,
    }
    if device == "cuda":
        torch.cuda.synchronize()
        out["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        out["max_memory_reserved_bytes"] = torch.cuda.max_memory_reserved()
    del model, opt
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def estimate(model_id: str, gpu_id: str, case: Case) -> dict:
    spec, gpu = load_models().get(model_id), load_accelerators().get(gpu_id)
    r = training_memory(spec, gpu, Parallelism(), case.job(), find_max_batch=False)
    inside = r.total_bytes - sum(int(r.parts.get(k, 0)) for k in OUTSIDE_ALLOCATOR)
    return {
        "total_bytes": r.total_bytes,
        "allocator_bytes": inside,
        "parts": {k: int(v) for k, v in r.parts.items()},
        "recipe": r.recipe.name,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="llama-3.2-1b", help="gpuplan model id (random weights), or 'tiny'")
    ap.add_argument(
        "--gpu-id", help="gpuplan accelerator id of this GPU (default: detected, matched by PCI id and memory)"
    )
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=3, help="timed steps, after the warm-up ones")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import torch
    import transformers

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: no CUDA GPU here: run this on a GPU machine (or --device cpu --model tiny for a smoke test)")

    raw = bundled_configs()
    if args.model == "tiny":
        model_id = "tiny"
        config = {**TINY, "max_position_embeddings": 8192, "tie_word_embeddings": True}
    else:
        model_id = args.model
        config = {k: v for k, v in raw[model_id].items() if k != "architectures"}
    gpu_name = torch.cuda.get_device_name(0) if args.device == "cuda" else platform.processor() or "cpu"
    gpu_id = args.gpu_id or (torch_gpu_catalog_id(load_accelerators()) if args.device == "cuda" else None)
    cases = [c for c in CASES if not args.only or c.name in args.only.split(",")]
    if args.device == "cpu":
        # bnb/peft paths need CUDA; the CPU smoke test runs the tiny model only
        cases = [c for c in cases if c.method == "full" and c.optimizer == "adamw" and c.model is None]
    rows = []
    for case in cases:
        case_model = case.model or model_id
        case_config = config
        if case.model is not None:
            case_config = {k: v for k, v in raw[case.model].items() if k != "architectures"}
        row = {
            "case": case.name,
            "model": case_model,
            "job": case.job().__dict__ | {"lora_targets": list(case.lora_targets)},
        }
        missing = _missing(case.needs)
        if missing:
            row["skipped"] = f"not installed: {', '.join(missing)}"
        else:
            if args.device == "cpu":
                case = Case(case.name, 1, 64, case.precision, case.optimizer, case.method, case.recompute)
            try:
                row["measured"] = run_case(case_config, case, args.device, args.steps, args.warmup)
            except Exception as exc:  # an out-of-memory or a library gap is a finding: record it, go on
                row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                gc.collect()
                if args.device == "cuda":
                    torch.cuda.empty_cache()
            if gpu_id and case_model != "tiny":
                try:
                    row["estimate"] = estimate(case_model, gpu_id, case)
                except Exception as exc:
                    row["estimate_error"] = f"{type(exc).__name__}: {exc}"
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.out:  # written after each case, so a run cut short keeps what it measured
            _write(args.out, rows, model_id, gpu_name, gpu_id, torch, transformers)
    if args.out:
        _write(args.out, rows, model_id, gpu_name, gpu_id, torch, transformers)


def _write(out: Path, rows: list, model_id: str, gpu_name: str, gpu_id: str | None, torch, transformers) -> None:
    record = {
        "schema_version": 1,
        "kind": "measurement.training_memory",
        "command": " ".join(sys.argv),
        "model": model_id,
        "gpu": gpu_name,
        "gpu_id": gpu_id,
        "versions": {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "transformers": transformers.__version__,
            "python": platform.python_version(),
        },
        "date": time.strftime("%Y-%m-%d"),
        "rows": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
