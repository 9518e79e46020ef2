"""Four small GPU jobs with a known bottleneck each, to record ``gpuplan local watch`` traces on a real GPU
(issue #20) that ``gpuplan local diagnose`` is then tested on (tests/fixtures/watch/).

    gpuplan local watch --interval 500ms --out healthy.jsonl \\
        --log-regex 'step (?P<step>\\d+) (?P<step_ms>[\\d.]+) ms' -- python scripts/watch_workloads.py healthy

Each prints ``step N T ms`` per step, as a training loop logs, and runs for ``--seconds``:

- ``healthy``: back-to-back large bf16 matrix products (compute-bound, the GPU never waits);
- ``input-bound``: each step first builds its batch on the CPU (NumPy work, as a slow data loader does), then
  runs a short GPU step, so the GPU idles most of the time while one CPU core is busy;
- ``launch-bound``: each step is thousands of tiny element-wise kernels launched from Python, so the GPU is
  "busy" by NVML's utilisation while its multiprocessors are nearly empty (CPU launch overhead);
- ``memory-bound``: large device-to-device copies and element-wise passes, bound by HBM bandwidth.
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=["healthy", "input-bound", "launch-bound", "memory-bound"])
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    import numpy as np
    import torch

    dev = args.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    big = 8192 if dev == "cuda" else 256
    a = torch.randn(big, big, device=dev, dtype=torch.bfloat16)
    b = torch.randn(big, big, device=dev, dtype=torch.bfloat16)
    elems = (1 << 30) if dev == "cuda" else (1 << 20)  # 2 GiB of bf16 per buffer on the GPU
    small = torch.randn(1024, device=dev)
    if args.kind == "memory-bound":
        x = torch.empty(elems, device=dev, dtype=torch.bfloat16).normal_()
        y = torch.empty_like(x)
    rng = np.random.default_rng(0)
    end = time.perf_counter() + args.seconds
    step = 0
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        if args.kind == "healthy":
            for _ in range(20):
                a = (a @ b) * (1.0 / big)  # scaled, so the values stay finite over the run
        elif args.kind == "input-bound":
            batch = rng.standard_normal((4096, 1024)).astype(np.float32)
            for _ in range(6):  # the "augmentation": CPU work several times the GPU step
                batch = np.sort(batch, axis=1)
            t = torch.from_numpy(batch).to(dev)
            for _ in range(2):
                a = (a @ b) * (1.0 / big)
            t.sum()
        elif args.kind == "launch-bound":
            for _ in range(3000):
                small = small * 1.0001 + 0.0001
        else:  # memory-bound
            for _ in range(10):
                y.copy_(x)
                x.mul_(1.0)
        sync()
        step += 1
        print(f"step {step} {1e3 * (time.perf_counter() - t0):.2f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
