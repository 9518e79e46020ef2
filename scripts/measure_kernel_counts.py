"""Count the CUDA kernels and time the host's dispatch of one eager Hugging Face training step and one decode step
on a GPU (issue #20): how many kernels a Llama layer launches, how long the GPU is busy with them, and how long the
step takes on the wall clock, so that a step bound by the CPU's dispatch can be told from one bound by the GPU.

    python scripts/measure_kernel_counts.py --out docs/measurements/kernel_counts_h200.json
    python scripts/measure_kernel_counts.py --device cpu --model tiny        # smoke test: no CUDA kernels

torch.profiler records the kernels (device-side events) of the timed step; the wall time comes from a separate,
unprofiled run of the same steps (the profiler slows the host). Llama 3.2 1B with random weights.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from gpuplan.catalog.models import bundled_configs  # noqa: E402
from measure_inference import TINY  # noqa: E402  (scripts/ is on the path of a script run from it)


def _kernels(prof) -> tuple[int, float]:
    """(kernels, seconds of kernel time) among the profiler's device events."""
    n, busy = 0, 0.0
    for e in prof.events():
        if getattr(e, "device_type", None) is not None and str(e.device_type).endswith("CUDA"):
            n += 1
            busy += e.device_time_total / 1e6 if hasattr(e, "device_time_total") else e.cuda_time_total / 1e6
    return n, busy


def _train_step(torch, model, opt, ids, device: str, amp: bool) -> None:
    with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama-3.2-1b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import torch
    import transformers

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: no CUDA GPU here: run this on a GPU machine (or --device cpu --model tiny for a smoke test)")

    cfg = dict(TINY if args.model == "tiny" else bundled_configs()[args.model])
    cfg.pop("architectures", None)
    hf = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    hf._attn_implementation = "sdpa"
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    rows = []
    for precision, batch, seq in (("bf16-mixed", 1, 2048), ("bf16", 1, 2048), ("bf16", 4, 2048)):
        torch.manual_seed(0)
        with torch.device(args.device):
            model = transformers.AutoModelForCausalLM.from_config(
                hf, dtype=torch.float32 if precision == "bf16-mixed" else torch.bfloat16
            )
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=args.device == "cuda")
        ids = torch.randint(0, hf.vocab_size, (batch, seq), device=args.device)

        def step(model=model, opt=opt, ids=ids, amp=precision == "bf16-mixed"):
            _train_step(torch, model, opt, ids, args.device, amp)

        for _ in range(3):
            step()
        sync()
        walls = []
        for _ in range(5):
            t0 = time.perf_counter()
            step()
            sync()
            walls.append(time.perf_counter() - t0)
        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        ) as prof:
            step()
            sync()
        kernels, busy = _kernels(prof)
        cpu_ops = sum(
            1
            for e in prof.events()
            if str(getattr(e, "device_type", "")).endswith("CPU") and e.name.startswith("aten::")
        )
        rows.append(
            {
                "what": "training step (forward, backward, fused AdamW, zero_grad)",
                "precision": precision,
                "batch": batch,
                "seq_len": seq,
                "layers": hf.num_hidden_layers,
                "wall_s": statistics.median(walls),
                "kernels": kernels,
                "kernel_busy_s": busy,
                "aten_ops": cpu_ops,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        del model, opt
        if args.device == "cuda":
            torch.cuda.empty_cache()
    # one eager decode step at batch 1 (no cache object: a 1-token forward over a 1-token input)
    with torch.device(args.device):
        model = transformers.AutoModelForCausalLM.from_config(hf, dtype=torch.bfloat16).eval()
    tok = torch.randint(0, hf.vocab_size, (1, 1), device=args.device)
    with torch.inference_mode():
        for _ in range(3):
            model(input_ids=tok)
        sync()
        walls = []
        for _ in range(10):
            t0 = time.perf_counter()
            model(input_ids=tok)
            sync()
            walls.append(time.perf_counter() - t0)
        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        ) as prof:
            model(input_ids=tok)
            sync()
    kernels, busy = _kernels(prof)
    rows.append(
        {
            "what": "eager forward of one token (decode without a cache)",
            "precision": "bf16",
            "batch": 1,
            "seq_len": 1,
            "layers": hf.num_hidden_layers,
            "wall_s": statistics.median(walls),
            "kernels": kernels,
            "kernel_busy_s": busy,
        }
    )
    print(json.dumps(rows[-1]), flush=True)
    record = {
        "kind": "measurement.kernel_counts",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "model": args.model,
        "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__},
        "date": time.strftime("%Y-%m-%d"),
        "rows": rows,
    }
    if args.out:
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
