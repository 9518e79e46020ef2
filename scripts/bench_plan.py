"""Time ``gpuplan plan``: candidates per second and wall times of the planner's reference searches.

    python scripts/bench_plan.py [--repeat 3]

Prints, for each search, the best wall time of --repeat runs (in process, catalogs loaded once and warm),
the candidates searched and evaluated, and candidates/s (searched / wall). Timings stay out of the records.
"""

from __future__ import annotations

import argparse
import platform
import time

import gpuplan
from gpuplan.catalog.session import Catalogs

CASES = (
    ("plan train llama-3.1-70b --tokens 2T --deadline 30d (all GPUs)", gpuplan.plan_train,
     dict(model="llama-3.1-70b", tokens="2T", deadline="30d")),
    ("plan train llama-3.1-405b --tokens 15.6T --gpus 16384 --gpu h100", gpuplan.plan_train,
     dict(model="llama-3.1-405b", tokens="15.6T", gpus=16384, gpu="h100", seq_len=8192, objective="time")),
    ("plan serve llama-3.1-70b --qps 20 (all GPUs)", gpuplan.plan_serve, dict(model="llama-3.1-70b", qps=20)),
)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cat = Catalogs(())
    cat.accelerators(), cat.offers(), cat.models()
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, one core")
    for title, fn, kwargs in CASES:
        best = float("inf")
        report = None
        for _ in range(max(1, args.repeat)):
            t = time.perf_counter()
            report = fn(catalog=cat, **kwargs)
            best = min(best, time.perf_counter() - t)
        s = report.search
        print(
            f"{title}\n  wall {best:.3f} s   searched {s.searched:,}   evaluated {s.evaluated:,}   "
            f"feasible {s.feasible:,}   {s.searched / best:,.0f} candidates/s   "
            f"{s.evaluated / best:,.0f} evaluations/s"
        )


if __name__ == "__main__":
    main()
