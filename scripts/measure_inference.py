"""Measure real greedy-decoding latency and memory on a GPU and record them beside gpuplan's estimates.

Llama-architecture models with random weights (llama-3.2-1b and llama-3.1-8b configs from gpuplan's
catalog), bf16, a static KV cache, batch 1, 8 and 64, two prompt lengths. Prefill is timed as one forward
over the prompt (TTFT); decode as the mean of single-token steps (TPOT); peak memory with
torch.cuda.max_memory_allocated. Each decode step is timed eager and replayed from a CUDA graph (what
torch.compile's mode="reduce-overhead" does, without its compile time); the graph figure is compared with
gpuplan's --engine compiled.

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


def build(config: dict, device: str):
    """The model with random weights, initialised on the device (an 8B model's host init takes minutes)."""
    import torch
    import transformers

    cfg = dict(config)
    hf = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(hf, dtype=torch.bfloat16)
    return hf, model.eval()


def measure(hf, model, device: str, batch: int, prompt: int, steps: int, graphs: bool, compiled: bool = False) -> dict:
    """TTFT: one prefill forward over the prompt (last position's logits only, as serving engines do), timed
    after one warm-up prefill. TPOT: median single-token step, eager and, with ``graphs``, replayed from a
    CUDA graph captured over static input buffers (what torch.compile's reduce-overhead mode does, without
    its kernel fusion); with ``compiled``, also torch.compile(mode="reduce-overhead") of the decode step (fused
    kernels in a CUDA graph: gpt-fast's recipe, gpuplan's --engine compiled), its compile time recorded."""
    import torch
    import transformers

    max_len = prompt + 3 * steps + 16
    ids = torch.randint(0, hf.vocab_size, (batch, prompt), device=device)
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()

    def forward(cache, tokens, position, keep=0):
        # both spellings of the write position: cache_position (transformers <= 5.1x) and position_ids (later
        # releases, where the static cache keeps its own fill count on the device)
        return model(
            input_ids=tokens,
            past_key_values=cache,
            cache_position=position,
            position_ids=position.unsqueeze(0),
            use_cache=True,
            logits_to_keep=keep,
        ).logits

    out: dict = {"decode_steps": steps}
    with torch.inference_mode():
        positions = torch.arange(prompt, device=device)
        forward(transformers.StaticCache(config=hf, max_cache_len=max_len), ids, positions, 1)  # warm-up
        cache = transformers.StaticCache(config=hf, max_cache_len=max_len)
        _sync(device)
        t0 = time.perf_counter()
        logits = forward(cache, ids, positions, 1)
        _sync(device)
        out["ttft_s"] = time.perf_counter() - t0
        token = logits[:, -1:].argmax(-1)
        eager = []
        for i in range(steps):
            pos = torch.tensor([prompt + i], device=device)
            _sync(device)
            t0 = time.perf_counter()
            token = forward(cache, token, pos)[:, -1:].argmax(-1)
            _sync(device)
            eager.append(time.perf_counter() - t0)
        out["tpot_eager_s"] = statistics.median(eager[2:] or eager)
        if graphs and device == "cuda":
            try:
                static_tok = token.clone()
                static_pos = torch.tensor([prompt + steps], device=device)
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for i in range(2):  # warm-up steps write positions prompt+steps and prompt+steps+1
                        static_pos.fill_(prompt + steps + i)
                        forward(cache, static_tok, static_pos)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):  # capture runs nothing: the cache's fill count stays put
                    static_logits = forward(cache, static_tok, static_pos)
                replay = []
                for i in range(steps):
                    static_pos.fill_(prompt + steps + 2 + i)
                    _sync(device)
                    t0 = time.perf_counter()
                    graph.replay()
                    static_tok.copy_(static_logits[:, -1:].argmax(-1))
                    _sync(device)
                    replay.append(time.perf_counter() - t0)
                out["tpot_graph_s"] = statistics.median(replay[2:] or replay)
                del graph
            except Exception as exc:  # a capture the model's code does not allow: the eager figure stands
                out["graph_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        if compiled and device == "cuda":
            try:
                step_fn = torch.compile(forward, mode="reduce-overhead", fullgraph=True)
                start = prompt + steps + (steps + 2 if "tpot_graph_s" in out else 0)  # positions written so far
                t_compile = time.perf_counter()
                timed = []
                for i in range(steps + 3):  # the first calls compile and record the graph
                    pos = torch.tensor([start + i], device=device)
                    _sync(device)
                    t0 = time.perf_counter()
                    token = step_fn(cache, token, pos)[:, -1:].argmax(-1)
                    _sync(device)
                    if i == 2:
                        out["compile_s"] = time.perf_counter() - t_compile
                    if i >= 3:
                        timed.append(time.perf_counter() - t0)
                out["tpot_compiled_s"] = statistics.median(timed)
            except Exception as exc:
                out["compile_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    out["tpot_s"] = out.get("tpot_compiled_s", out.get("tpot_graph_s", out["tpot_eager_s"]))
    if device == "cuda":
        out["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        out["max_memory_reserved_bytes"] = torch.cuda.max_memory_reserved()
    del cache
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
    ap.add_argument("--no-compile", action="store_true", help="eager decode only (no CUDA graph)")
    ap.add_argument("--torch-compile", action="store_true", help="also time torch.compile(mode='reduce-overhead')")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import torch
    import transformers

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: no CUDA GPU here: run this on a GPU machine (or --device cpu --model tiny for a smoke test)")

    models = args.model or ["llama-3.2-1b", "llama-3.1-8b"]
    raw = bundled_configs()
    gpu_name = torch.cuda.get_device_name(0) if args.device == "cuda" else platform.processor() or "cpu"
    gpu_id = args.gpu_id or (torch_gpu_catalog_id(load_accelerators()) if args.device == "cuda" else None)
    compile_decode = not args.no_compile and args.device == "cuda"
    rows = []
    for mid in models:
        config = TINY if mid == "tiny" else {k: v for k, v in raw[mid].items() if k != "architectures"}
        hf, model = build(config, args.device)
        for batch in map(int, args.batches.split(",")):
            for prompt in map(int, args.prompts.split(",")):
                if args.device == "cpu":
                    batch, prompt = min(batch, 2), min(prompt, 16)
                row = {
                    "model": mid,
                    "batch": batch,
                    "prompt_tokens": prompt,
                    "output_tokens": args.steps,
                }
                try:
                    row["measured"] = measure(
                        hf, model, args.device, batch, prompt, args.steps, compile_decode, args.torch_compile
                    )
                except Exception as exc:  # out of memory, a library gap: recorded, the sweep goes on
                    row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    continue
                m = row["measured"]
                graph = "hf-cuda-graph" if "tpot_graph_s" in m else "hf-eager"
                row["engine"] = "torch-compile" if "tpot_compiled_s" in m else graph
                if "graph_error" in row["measured"]:
                    compile_decode = False  # a failed capture can leave the context unusable for another
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
                if args.out:
                    _write(args.out, rows, gpu_name, gpu_id, torch, transformers)
        del model
        if args.device == "cuda":
            torch.cuda.empty_cache()
    if args.out:
        _write(args.out, rows, gpu_name, gpu_id, torch, transformers)


def _write(out: Path, rows: list, gpu_name: str, gpu_id: str | None, torch, transformers) -> None:
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
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
