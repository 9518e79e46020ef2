"""CPU overhead of ``gpuplan local watch`` itself while it samples a job at 1 Hz (issue #19: at most 1 % of
one core).

Method: watch runs (``python -m gpuplan local watch --interval 1s``) over a job that only sleeps, once for
``--short`` seconds and once for ``--long`` seconds; the CPU time of the watch process (user + system, from
``os.wait4``: the process and the children it reaped; the sleeping job costs ~0) differs by the cost of the
extra samples, so start-up (imports, catalogs, NVML init) cancels out:

    overhead = (cpu_long - cpu_short) / (long - short)     (a fraction of one core)

The job is a realistic process tree: ``--procs`` worker processes (like DataLoader workers) with
``--threads`` threads each, since watch reads every process and thread of the tree each sample. Each
duration runs ``--repeat`` times; the medians are used. Nothing is asserted (timings are noisy on a shared
machine); the exit code is 0. GPU counters are sampled only where NVML works: the header's ``gpu_status``
is printed, so a figure measured without a GPU says so.

    python scripts/bench_watch.py                         # 8 workers x 16 threads, 5 s and 35 s, once each
    python scripts/bench_watch.py --repeat 3 --json
    python scripts/bench_watch.py --interval 0.1          # the cost at 10 Hz
    python scripts/bench_watch.py --live                  # with the --live table drawn on a pseudo-terminal
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

JOB = """
import multiprocessing as mp, sys, threading, time

def worker(threads, seconds):
    for _ in range(threads - 1):
        threading.Thread(target=time.sleep, args=(seconds,), daemon=True).start()
    time.sleep(seconds)

if __name__ == "__main__":
    procs, threads, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    ps = [mp.Process(target=worker, args=(threads, seconds)) for _ in range(procs)]
    for p in ps:
        p.start()
    worker(threads, seconds)
    for p in ps:
        p.join()
"""


def run_watch(seconds: float, args: argparse.Namespace, folder: Path) -> tuple[float, dict]:
    """CPU seconds of one watch over a job of ``seconds``, and the trace's header."""
    out = folder / f"bench-{seconds:g}.jsonl"
    cmd = [sys.executable, "-m", "gpuplan", "local", "watch", "--interval", f"{args.interval}s", "--out", str(out)]
    if args.live:
        cmd.append("--live")
    cmd += ["--", sys.executable, "-c", JOB, str(args.procs), str(args.threads), str(seconds)]
    drain = None
    if args.live:  # --live draws only on a terminal: give watch a pseudo-terminal and read (discard) what it draws
        import pty
        import threading

        master, slave = pty.openpty()
        p = subprocess.Popen(cmd, stdout=slave, stderr=subprocess.PIPE)
        os.close(slave)

        def read_all() -> None:
            with contextlib.suppress(OSError):
                while os.read(master, 1 << 16):
                    pass

        drain = threading.Thread(target=read_all, daemon=True)
        drain.start()
    else:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    if drain is not None:
        drain.join(timeout=5)
        os.close(master)
    p.returncode = os.waitstatus_to_exitcode(status)
    assert p.stderr is not None
    err = p.stderr.read().decode()
    if p.returncode != 0:
        raise SystemExit(f"watch failed ({p.returncode}): {err.strip()}")
    lines = out.read_text().splitlines()
    header, samples = json.loads(lines[0]), sum('"record": "sample"' in line for line in lines)
    header["_samples"] = samples
    # wait4 counts watch and the children it reaped: the job's own CPU (its start-up) is in both runs alike
    return usage.ru_utime + usage.ru_stime, header


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", type=float, default=5.0, help="seconds of the short run")
    ap.add_argument("--long", type=float, default=35.0, help="seconds of the long run")
    ap.add_argument("--interval", type=float, default=1.0, help="watch's --interval in seconds")
    ap.add_argument("--procs", type=int, default=8, help="worker processes in the watched job")
    ap.add_argument("--threads", type=int, default=16, help="threads per process")
    ap.add_argument("--repeat", type=int, default=1, help="runs per duration (medians are used)")
    ap.add_argument("--live", action="store_true", help="run watch with --live on a pseudo-terminal")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.long <= args.short:
        raise SystemExit("--long must be longer than --short")
    with tempfile.TemporaryDirectory() as tmp:
        short = [run_watch(args.short, args, Path(tmp)) for _ in range(args.repeat)]
        long = [run_watch(args.long, args, Path(tmp)) for _ in range(args.repeat)]
    cpu_short = statistics.median(c for c, _ in short)
    cpu_long = statistics.median(c for c, _ in long)
    header = long[0][1]
    extra_samples = statistics.median(h["_samples"] for _, h in long) - statistics.median(
        h["_samples"] for _, h in short
    )
    per_sample = (cpu_long - cpu_short) / extra_samples if extra_samples > 0 else float("nan")
    overhead = (cpu_long - cpu_short) / (args.long - args.short)
    result = {
        "interval_s": args.interval,
        "live": args.live,
        "job": {"procs": args.procs + 1, "threads_per_proc": args.threads},
        "cpu_s": {"short": round(cpu_short, 3), "long": round(cpu_long, 3)},
        "seconds": {"short": args.short, "long": args.long},
        "cpu_per_sample_ms": round(per_sample * 1000, 2),
        "overhead_fraction_of_one_core": round(overhead, 5),
        "goal_fraction_of_one_core": 0.01,
        "gpu_status": header.get("gpu_status"),
        "gpus": len(header.get("gpus") or []),
        "cpu_count_logical": (header.get("host") or {}).get("cpu_count_logical"),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    mode = "watch --live" if args.live else "watch"
    print(
        f"{mode} at {1 / args.interval:g} Hz over {args.procs + 1} processes x {args.threads} threads: "
        f"{overhead:.3%} of one core ({per_sample * 1000:.2f} ms CPU per sample; goal <= 1 %)\n"
        f"GPUs sampled: {result['gpus']} (NVML: {result['gpu_status']})"
    )


if __name__ == "__main__":
    main()
