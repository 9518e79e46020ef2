"""Measure real greedy-decoding latency and memory on a GPU and record them beside gpuplan's estimates.

Llama-architecture models with random weights (llama-3.2-1b and llama-3.1-8b configs from gpuplan's
catalog), bf16, a static KV cache, batch 1, 8 and 64, two prompt lengths. Prefill is timed as one forward
over the prompt (TTFT); decode as the mean of single-token steps (TPOT); peak memory with
torch.cuda.max_memory_allocated. The decode step is compiled with CUDA graphs (torch.compile
mode="reduce-overhead"), so the estimate it is compared with is gpuplan's --engine compiled.

    python scripts/measure_inference.py --out docs/measurements/inference_h100.json
    python scripts/measure_inference.py --device cpu --model tiny --steps 2      # smoke test, no numbers
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from gpuplan.catalog import load_accelerators, load_models  # noqa: E402
from gpuplan.catalog.models import bundled_configs  # noqa: E402
from gpuplan.estimate.inference import serving_plan  # noqa: E402
from gpuplan.local.detect import torch_gpu_catalog_id  # noqa: E402
from gpuplan.spec.serving import ServingJob, ServingLayout  # noqa: E402

TINY = {
    "model_type": "llama",
    "vocab_size": 512,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "max_position_embeddings": 4096,
}


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def measure(config: dict, device: str, batch: int, prompt: int, steps: int, compile_decode: bool) -> dict:
    import torch
    import transformers

    cfg = dict(config)
    hf = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(hf, dtype=torch.bfloat16).to(device).eval()
    max_len = prompt + steps + 1
    cache = transformers.StaticCache(
        config=hf, max_batch_size=batch, max_cache_len=max_len, device=device, dtype=torch.bfloat16
    )
    ids = torch.randint(0, hf.vocab_size, (batch, prompt), device=device)
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()

    def step(tokens, position):
        return model(input_ids=tokens, past_key_values=cache, cache_position=position, use_cache=True).logits

    decode = torch.compile(step, mode="reduce-overhead", fullgraph=True) if compile_decode else step
    with torch.inference_mode():
        _sync(device)
        t0 = time.perf_counter()
        logits = step(ids, torch.arange(prompt, device=device))
        _sync(device)
        ttft = time.perf_counter() - t0
        token = logits[:, -1:].argmax(-1)
        times = []
        for i in range(steps):
            pos = torch.tensor([prompt + i], device=device)
            _sync(device)
            t0 = time.perf_counter()
            token = decode(token, pos)[:, -1:].argmax(-1)
            _sync(device)
            times.append(time.perf_counter() - t0)
    warm = times[min(3, len(times) - 1) :]  # the first compiled steps capture graphs
    out = {"ttft_s": ttft, "tpot_s": statistics.median(warm), "decode_steps": steps}
    if device == "cuda":
        out["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        out["max_memory_reserved_bytes"] = torch.cuda.max_memory_reserved()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append", help="gpuplan model id (repeatable) or 'tiny'")
    ap.add_argument("--device", default="cuda")
    ap.add_argument(
        "--gpu-id", help="gpuplan accelerator id of this GPU (default: detected, matched by PCI id and memory)"
    )
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--prompts", default="128,2048")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import torch
    import transformers

    models = args.model or ["llama-3.2-1b", "llama-3.1-8b"]
    raw = bundled_configs()
    gpu_name = torch.cuda.get_device_name(0) if args.device == "cuda" else platform.processor() or "cpu"
    gpu_id = args.gpu_id or (torch_gpu_catalog_id(load_accelerators()) if args.device == "cuda" else None)
    compile_decode = not args.no_compile and args.device == "cuda"
    rows = []
    for mid in models:
        config = TINY if mid == "tiny" else {k: v for k, v in raw[mid].items() if k != "architectures"}
        for batch in map(int, args.batches.split(",")):
            for prompt in map(int, args.prompts.split(",")):
                if args.device == "cpu":
                    batch, prompt = min(batch, 2), min(prompt, 16)
                row = {
                    "model": mid,
                    "batch": batch,
                    "prompt_tokens": prompt,
                    "output_tokens": args.steps,
                    "engine": "compiled" if compile_decode else "eager",
                    "measured": measure(config, args.device, batch, prompt, args.steps, compile_decode),
                }
                if gpu_id and mid != "tiny":
                    r = serving_plan(
                        load_models().get(mid),
                        load_accelerators().get(gpu_id),
                        ServingLayout(),
                        ServingJob(prompt_tokens=prompt, output_tokens=args.steps, batch=batch, engine="compiled"),
                    )
                    row["estimate"] = {"ttft_s": r.ttft_s, "tpot_s": r.tpot_s, "total_bytes": r.total_bytes}
                rows.append(row)
                print(json.dumps(row), flush=True)
    record = {
        "schema_version": 1,
        "kind": "measurement.inference",
        "command": " ".join(sys.argv),
        "gpu": gpu_name,
        "gpu_id": gpu_id,
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__},
        "date": time.strftime("%Y-%m-%d"),
        "rows": rows,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
