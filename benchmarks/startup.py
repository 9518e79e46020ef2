"""Wall time of plain CLI commands (median of N runs, each a fresh process).

Run: python benchmarks/startup.py [N]. Prints one line per command; nothing is asserted (timed tests are
flaky); compare the numbers across changes.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

COMMANDS = [
    ["--help"],
    ["gpus", "list"],
    ["gpus", "show", "h100-sxm-80gb"],
    ["gpus", "list", "--json"],
    ["model", "show", "llama-3.1-70b"],
    ["model", "list", "--json"],
    ["train", "llama-3.1-70b", "--gpu", "h100", "--gpus", "64", "--tp", "8", "--pp", "4", "--global-batch", "512"],
    ["serve", "llama-3.1-70b", "--gpu", "h100", "--tp", "4", "--max-tpot", "40ms"],
    ["serve", "llama-3.1-70b", "--gpu", "all", "--rank"],
]


def main(n: int) -> None:
    for args in COMMANDS:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "gpuplan", *args], stdout=subprocess.DEVNULL, check=True)
            times.append(time.perf_counter() - t0)
        print(f"{statistics.median(times) * 1000:7.0f} ms  gpuplan {' '.join(args)}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
