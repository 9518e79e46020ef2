"""Start-up wall time of plain ``gpuplan`` commands: the median of N fresh processes per command.

Issue #12 sets the targets (on a 2-core machine): ``gpuplan serve llama-2-7b --gpu h100 --json`` within
0.12 s and ``gpuplan --help`` within 0.08 s. Each command runs once to warm the OS file cache and
gpuplan's catalog cache, then N times, each in a new process; the median wall time is printed. Nothing
is asserted (timings are noisy on shared machines): compare the numbers across changes.

    python scripts/bench_startup.py            # 10 runs per command, a table
    python scripts/bench_startup.py -n 20 --json
    python scripts/bench_startup.py --no-cache # GPUPLAN_NO_CACHE=1: every run validates the catalogs
    python scripts/bench_startup.py --isolated # an empty config folder and a fresh cache folder
    python scripts/bench_startup.py --source   # keep PYTHONDONTWRITEBYTECODE: compile gpuplan every run

Commands run through the ``gpuplan`` script beside this Python (a virtual environment's bin folder),
else through ``python -m gpuplan``; a command exiting other than 0 or 3 (3: "does not fit") is an error.

Bytecode: an installed wheel ships (or writes on first use) ``.pyc`` files, so by default the runs get a
private bytecode folder (``PYTHONPYCACHEPREFIX``, a temporary folder filled by the warm-up run, removed
afterwards; nothing is written into the source tree) and ``PYTHONDONTWRITEBYTECODE`` is dropped. With
``--source`` the environment is left as it is: where it sets ``PYTHONDONTWRITEBYTECODE=1`` and the tree
has no ``__pycache__``, every run compiles gpuplan's modules from source (the worst case).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The commands timed; the first two carry the targets of issue #12 (seconds).
COMMANDS: list[tuple[str, ...]] = [
    ("--help",),
    ("serve", "llama-2-7b", "--gpu", "h100", "--json"),
    ("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3", "--json"),
    ("gpus", "list", "--json"),
    ("serve", "llama-3.1-70b", "--gpu", "all", "--rank", "--json"),
    ("serve", "llama-2-7b", "--gpu", "h100"),
    ("gpus", "list"),
]
TARGETS = {("--help",): 0.08, ("serve", "llama-2-7b", "--gpu", "h100", "--json"): 0.12}


def launcher() -> list[str]:
    """How to start gpuplan: the console script installed beside this interpreter, else ``-m gpuplan``."""
    script = Path(sys.executable).parent / ("gpuplan.exe" if os.name == "nt" else "gpuplan")
    if script.is_file():
        return [sys.executable, str(script)]
    return [sys.executable, "-m", "gpuplan"]


def time_command(cmd: list[str], runs: int, env: dict[str, str]) -> list[float]:
    """Wall seconds of ``runs`` fresh runs of ``cmd`` (after one untimed warm-up run)."""
    times = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        elapsed = time.perf_counter() - t0
        if done.returncode not in (0, 3):
            err = done.stderr.decode(errors="replace").strip().splitlines()
            raise SystemExit(f"{' '.join(cmd)}: exit code {done.returncode}: {err[-1] if err else ''}")
        if i:
            times.append(elapsed)
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--runs", type=int, default=10, help="timed runs per command (default 10)")
    ap.add_argument("--json", action="store_true", help="print a JSON object instead of the table")
    ap.add_argument("--no-cache", action="store_true", help="set GPUPLAN_NO_CACHE=1 for every run")
    ap.add_argument(
        "--source",
        action="store_true",
        help="no private bytecode folder: the environment's PYTHONDONTWRITEBYTECODE applies",
    )
    ap.add_argument(
        "--isolated",
        action="store_true",
        help="run with an empty GPUPLAN_CONFIG_DIR and a fresh XDG_CACHE_HOME (removed afterwards)",
    )
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    env = dict(os.environ)
    if args.no_cache:
        env["GPUPLAN_NO_CACHE"] = "1"
    tmp = tempfile.mkdtemp(prefix="gpuplan-bench-")
    if not args.source:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
    if args.isolated:
        os.mkdir(os.path.join(tmp, "config"))
        env["GPUPLAN_CONFIG_DIR"] = os.path.join(tmp, "config")
        env["XDG_CACHE_HOME"] = os.path.join(tmp, "cache")
    base = launcher()
    rows = []
    try:
        python_s = statistics.median(time_command([sys.executable, "-c", "pass"], args.runs, env))
        for command in COMMANDS:
            times = time_command(base + list(command), args.runs, env)
            rows.append(
                {
                    "command": "gpuplan " + " ".join(command),
                    "median_s": statistics.median(times),
                    "min_s": min(times),
                    "max_s": max(times),
                    "target_s": TARGETS.get(command),
                }
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    if args.json:
        print(
            json.dumps(
                {
                    "runs": args.runs,
                    "python": sys.version.split()[0],
                    "cpus": os.cpu_count(),
                    "no_cache": args.no_cache,
                    "isolated": args.isolated,
                    "bytecode": "from source" if args.source else "cached",
                    "bare_python_s": python_s,
                    "commands": rows,
                },
                indent=2,
            )
        )
        return 0
    mode = ", gpuplan compiled from source" if args.source and env.get("PYTHONDONTWRITEBYTECODE") else ""
    print(
        f"{args.runs} runs each, median wall time (python itself: {python_s * 1000:.0f} ms, {os.cpu_count()} CPUs"
        f"{mode}{', GPUPLAN_NO_CACHE=1' if args.no_cache else ''}{', isolated' if args.isolated else ''})"
    )
    print(f"{'median':>8} {'min':>7} {'max':>7} {'target':>7}  command")
    for r in rows:
        target = f"{r['target_s'] * 1000:5.0f}ms" if r["target_s"] else ""
        flag = " !" if r["target_s"] and r["median_s"] > r["target_s"] else ""
        print(
            f"{r['median_s'] * 1000:6.0f}ms {r['min_s'] * 1000:5.0f}ms {r['max_s'] * 1000:5.0f}ms {target:>7}  "
            f"{r['command']}{flag}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
