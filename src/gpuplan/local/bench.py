"""What this machine really achieves: matmul TFLOP/s, memory and PCIe bandwidth, all-reduce, disk.

Each benchmark returns a ``BenchResult`` with the measured figure, the datasheet figure it compares to
(when the GPU is in the catalog) and the fraction achieved, and how long the run took. Timing follows
the usual GPU-benchmark discipline (Bekman's mamf-finder, nvbandwidth): warm-up iterations, CUDA events
around each timed call, an L2 flush between calls (a write of a buffer larger than L2), the median and
the best of the runs. Everything also runs on the CPU (torch CPU), which is how the harness is tested
where no GPU is lent.

torch is an optional extra (``pip install "gpuplan[bench]"``); the disk benchmark needs only the
standard library.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import GpuplanError


class BenchUnavailable(GpuplanError):
    """A benchmark that cannot run here (no torch, no GPU for a GPU-only test)."""


@dataclass(frozen=True)
class BenchResult:
    name: str
    value: float
    unit: str
    datasheet: float | None
    detail: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def fraction(self) -> float | None:
        return self.value / self.datasheet if self.datasheet else None

    def to_dict(self) -> dict:
        return {**asdict(self), "fraction_of_datasheet": self.fraction}


def _torch():
    try:
        import torch
    except ImportError:
        raise BenchUnavailable('benchmarks need torch: pip install "gpuplan[bench]" (or a CUDA build of torch)') from None
    return torch


def device_for(torch) -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def time_fn(fn: Callable[[], object], device: str, warmup: int = 3, iters: int = 10,
            flush: Callable[[], object] | None = None) -> list[float]:
    """Seconds per call: CUDA events on a GPU (after a synchronize), perf_counter on the CPU."""
    torch = _torch()
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        if flush is not None:
            flush()
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return times


def _l2_flusher(torch, device: str):
    if device != "cuda":
        return None
    size = 256 * 2**20  # larger than any current L2 (H100 50 MB, B200 126 MB)
    buf = torch.empty(size, dtype=torch.uint8, device=device)
    return lambda: buf.zero_()


DTYPES = {"bf16": "bfloat16", "fp16": "float16", "tf32": "float32", "fp32": "float32"}


def matmul_tflops(torch, device: str, dtype: str, m: int, n: int, k: int, iters: int, flush) -> float:
    """Best-of-runs TFLOP/s of one (m x k) @ (k x n) GEMM: 2mnk FLOPs per call."""
    td = getattr(torch, DTYPES[dtype])
    a = torch.randn(m, k, device=device, dtype=td)
    b = torch.randn(k, n, device=device, dtype=td)
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"  # fp32 must not silently run as TF32
    try:
        times = time_fn(lambda: a @ b, device, warmup=2, iters=iters, flush=flush)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    return 2 * m * n * k / min(times) / 1e12


def bench_matmul(dtype: str = "bf16", quick: bool = True, datasheet: float | None = None,
                 shapes: list[tuple[int, int, int]] | None = None, progress=None) -> BenchResult:
    """Achievable matmul TFLOP/s with a guided shape search: a coarse grid of multiples of 1024, then
    hill-climbing in steps of 256 around the best (a large share of an exhaustive sweep's best at a small
    share of its cost; Bekman's MAMF finder sweeps exhaustively)."""
    torch = _torch()
    device = device_for(torch)
    if device == "cpu" and dtype in ("bf16", "fp16"):
        dtype_run = "fp32"  # CPU half-precision GEMMs are not representative; the harness still runs
    else:
        dtype_run = dtype
    t0 = time.perf_counter()
    flush = _l2_flusher(torch, device)
    iters = 5 if quick else 20
    if device == "cpu":  # the harness on a CPU: small shapes (a model's shapes are scaled down 16x)
        grid = [(max(16, m // 16), max(16, n // 16), max(16, k // 16)) for m, n, k in shapes] if shapes else \
            [(256, 256, 256), (512, 512, 512)]
    else:
        sizes = [2048, 4096, 8192] if quick else [2048, 4096, 8192, 12288, 16384]
        grid = shapes or [(m, n, k) for m in sizes for n in sizes for k in sizes]
    seen: dict[tuple[int, int, int], float] = {}

    def run(shape):
        if shape not in seen:
            seen[shape] = matmul_tflops(torch, device, dtype_run, *shape, iters, flush)
            if progress:
                progress()
        return seen[shape]

    if shapes:
        # a model's own GEMMs: report its FLOP-weighted rate over them, not the best shape nearby
        flops = [2 * m * n * k for m, n, k in grid]
        rate = sum(flops) / sum(f / (run(sh) * 1e12) for f, sh in zip(flops, grid)) / 1e12
        return BenchResult(f"matmul {dtype_run}" + (" (cpu)" if device == "cpu" else ""), rate, "TFLOP/s",
                           datasheet / 1e12 if datasheet and dtype_run == dtype and device == "cuda" else None,
                           {"device": device, "dtype_run": dtype_run, "model_shapes": [list(sh) for sh in grid],
                            "shapes_tried": len(seen)}, time.perf_counter() - t0)
    best = max(grid, key=run)
    step = 256 if device == "cuda" else 64
    improved = True
    while improved and len(seen) < (40 if quick else 200):
        improved = False
        for axis in range(3):
            for delta in (-step, step):
                cand = list(best)
                cand[axis] += delta
                if cand[axis] <= 0:
                    continue
                cand_t = tuple(cand)
                if run(cand_t) > run(best):
                    best, improved = cand_t, True
    return BenchResult(f"matmul {dtype_run}" + (" (cpu)" if device == "cpu" else ""), run(best), "TFLOP/s",
                       datasheet / 1e12 if datasheet and dtype_run == dtype and device == "cuda" else None,
                       {"device": device, "dtype_run": dtype_run, "best_shape_mnk": list(best),
                        "shapes_tried": len(seen)}, time.perf_counter() - t0)


def bench_memory(quick: bool = True, datasheet: float | None = None) -> BenchResult:
    """Device copy bandwidth: (bytes read + bytes written) / time, i.e. 2 x size per copy."""
    torch = _torch()
    device = device_for(torch)
    t0 = time.perf_counter()
    size = (2 if quick else 8) * 2**30 if device == "cuda" else 256 * 2**20
    src = torch.empty(size, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    times = time_fn(lambda: dst.copy_(src), device, warmup=2, iters=5 if quick else 20)
    gbps = 2 * size / min(times) / 1e9
    return BenchResult("memory copy" + (" (cpu)" if device == "cpu" else ""), gbps, "GB/s (read + write)",
                       datasheet / 1e9 if datasheet and device == "cuda" else None,
                       {"device": device, "bytes": size, "median_gbps": 2 * size / statistics.median(times) / 1e9},
                       time.perf_counter() - t0)


def bench_pcie(quick: bool = True) -> list[BenchResult]:
    """Host-to-device and device-to-host bandwidth, pinned and pageable memory (GPU only)."""
    torch = _torch()
    if not torch.cuda.is_available():
        raise BenchUnavailable("the PCIe benchmark needs a GPU")
    out = []
    size = (1 if quick else 4) * 2**30
    dev = torch.empty(size, dtype=torch.uint8, device="cuda")
    for pinned in (True, False):
        host = torch.empty(size, dtype=torch.uint8, pin_memory=pinned)
        for direction, fn in (("host-to-device", lambda: dev.copy_(host, non_blocking=pinned)),
                              ("device-to-host", lambda: host.copy_(dev, non_blocking=pinned))):
            t0 = time.perf_counter()
            times = time_fn(fn, "cuda", warmup=1, iters=3 if quick else 10)
            out.append(BenchResult(f"pcie {direction} {'pinned' if pinned else 'pageable'}", size / min(times) / 1e9,
                                   "GB/s", None, {"bytes": size}, time.perf_counter() - t0))
    return out


def bench_allreduce(quick: bool = True, sizes: list[int] | None = None, allow_single: bool = False) -> list[BenchResult]:
    """all-reduce bus bandwidth vs payload: busbw = size / time x 2(n-1)/n (nccl-tests PERFORMANCE.md).

    Under torchrun it uses every rank (NCCL on GPUs, gloo on CPUs):
        torchrun --nproc-per-node 8 -m gpuplan local bench allreduce        (one node)
        srun --ntasks-per-node 8 torchrun ... (across nodes, with MASTER_ADDR set)
    Alone it refuses (a one-rank bus bandwidth is 0); ``allow_single`` runs the one-process path that the
    CPU tests use.
    """
    torch = _torch()
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", 1))
    if world < 2 and not allow_single:
        raise BenchUnavailable("all-reduce needs 2 or more ranks: torchrun --nproc-per-node 8 -m gpuplan local bench "
                               "allreduce")
    own_group = not dist.is_initialized()
    if own_group:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if world > 1:  # under torchrun: its MASTER_ADDR/PORT rendezvous
            dist.init_process_group(backend, rank=int(os.environ.get("RANK", 0)), world_size=world)
        else:  # one process (the CPU-tested path): an in-memory store, no port to collide on
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    try:
        n = dist.get_world_size()
        device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        out = []
        for size in sizes or ([2**20, 2**24, 2**28] if quick else [2**p for p in range(16, 31, 2)]):
            x = torch.ones(size // 4, dtype=torch.float32, device=device)
            t0 = time.perf_counter()
            times = time_fn(lambda: dist.all_reduce(x), device, warmup=2, iters=5 if quick else 20)
            busbw = size / min(times) * 2 * (n - 1) / n / 1e9
            out.append(BenchResult(f"allreduce {size // 2**20} MiB", busbw, "GB/s bus bandwidth", None,
                                   {"ranks": n, "bytes": size, "algbw_gbps": size / min(times) / 1e9},
                                   time.perf_counter() - t0))
        return out
    finally:
        if own_group:
            dist.destroy_process_group()


def bench_disk(path: Path, writers: int = 4, file_bytes: int = 1 << 30, quick: bool = True) -> list[BenchResult]:
    """Checkpoint-shaped writes (``writers`` files written at once, each fsync'ed) and data-loader-shaped
    reads of them after dropping them from the page cache (posix_fadvise DONTNEED), on ``path``."""
    import concurrent.futures as cf

    path = Path(path)
    if not path.is_dir():
        raise GpuplanError(f"{path}: not a directory; give --path a folder on the disk to test")
    chunks = [os.urandom(8 * 2**20) for _ in range(4)]  # varied data, so deduplicating filesystems cannot cheat
    files = [path / f".gpuplan-bench-{os.getpid()}-{i}" for i in range(writers)]
    per_file = file_bytes if not quick else min(file_bytes, 256 * 2**20)

    def write(p: Path) -> None:
        with open(p, "wb", buffering=0) as f:
            left, i = per_file, 0
            while left > 0:
                chunk = chunks[i % len(chunks)]
                left -= f.write(chunk[:min(len(chunk), left)])
                i += 1
            os.fsync(f.fileno())

    def read(p: Path) -> None:
        with open(p, "rb", buffering=0) as f:
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            while f.read(8 * 2**20):
                pass

    try:
        with cf.ThreadPoolExecutor(writers) as pool:
            t0 = time.perf_counter()
            list(pool.map(write, files))
            t_write = time.perf_counter() - t0
            t0 = time.perf_counter()
            list(pool.map(read, files))
            t_read = time.perf_counter() - t0
    except OSError as e:
        raise GpuplanError(f"{path}: disk benchmark failed: {e.strerror or e}") from None
    finally:
        for p in files:
            p.unlink(missing_ok=True)
    total = per_file * writers
    fstype = _fstype(path)
    cached = fstype in ("tmpfs", "ramfs", "zfs", "overlay")  # these ignore (or sit above) page-cache drops
    return [BenchResult("disk write (fsync)", total / t_write / 1e9, "GB/s", None,
                        {"path": str(path), "fstype": fstype, "writers": writers, "bytes": total}, t_write),
            BenchResult("disk read (cached: the filesystem ignores cache drops)" if cached else "disk read (uncached)",
                        total / t_read / 1e9, "GB/s", None,
                        {"path": str(path), "fstype": fstype, "readers": writers, "bytes": total}, t_read)]


def _fstype(path: Path) -> str | None:
    """The filesystem type of the mount holding ``path`` (longest matching mount point)."""
    try:
        import psutil

        real = str(path.resolve())
        mounts = [p for p in psutil.disk_partitions(all=True) if real.startswith(p.mountpoint)]
        return max(mounts, key=lambda p: len(p.mountpoint)).fstype if mounts else None
    except Exception:
        return None
