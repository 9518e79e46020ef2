"""Time ``gpuplan plan``: candidates per second and wall times of the planner's reference searches.

    python scripts/bench_plan.py [--repeat 5]

Prints, for each search, the median and the best wall time of --repeat runs (in process, catalogs loaded once and
warm, after one untimed run that imports numpy), the candidates searched (counted, each under an option or a
pruning reason) and evaluated (timed by the step-time model), and candidates/s (searched / median wall).
Timings stay out of the records.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import gpuplan
from gpuplan.catalog.session import Catalogs

CASES = (
    ("plan train llama-3.1-70b --tokens 2T --deadline 30d (all GPUs)", gpuplan.plan_train,
     dict(model="llama-3.1-70b", tokens="2T", deadline="30d")),
    ("plan train llama-3.1-405b --tokens 15.6T --gpus 16384 --gpu h100", gpuplan.plan_train,
     dict(model="llama-3.1-405b", tokens="15.6T", gpus=16384, gpu="h100", seq_len=8192, objective="time")),
    ("plan train mixtral-8x7b --tokens 1T --deadline 30d (all GPUs; MoE: ep x etp folds)", gpuplan.plan_train,
     dict(model="mixtral-8x7b", tokens="1T", deadline="30d")),
    ("plan train qwen3-30b-a3b --tokens 1T --gpu h100,b200 --max-gpus 1024 (128 experts: ep up to 64)",
     gpuplan.plan_train, dict(model="qwen3-30b-a3b", tokens="1T", gpu="h100,b200", max_gpus=1024)),
    ("plan serve llama-3.1-70b --qps 20 (all GPUs)", gpuplan.plan_serve, dict(model="llama-3.1-70b", qps=20)),
)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cat = Catalogs(())
    cat.accelerators(), cat.offers(), cat.models()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"one process, load {load:.2f}"
    )
    for title, fn, kwargs in CASES:
        report = fn(catalog=cat, **kwargs)  # untimed: imports and first-call caches
        walls = []
        for _ in range(max(1, args.repeat)):
            t = time.perf_counter()
            report = fn(catalog=cat, **kwargs)
            walls.append(time.perf_counter() - t)
        wall = statistics.median(walls)
        s = report.search
        print(
            f"{title}\n  wall {wall:.3f} s median, {min(walls):.3f} s best of {len(walls)}   "
            f"searched {s.searched:,}   evaluated {s.evaluated:,}   feasible {s.feasible:,}   "
            f"{s.searched / wall:,.0f} candidates/s   {s.evaluated / wall:,.0f} evaluations/s"
        )


if __name__ == "__main__":
    main()
