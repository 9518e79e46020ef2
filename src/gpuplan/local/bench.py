"""What this machine really achieves: matmul TFLOP/s, memory and PCIe bandwidth, collectives, disk.

Each benchmark returns ``BenchResult`` rows: the best and the median of the timed runs, the datasheet
figure they compare to (when the GPU is in the catalog) and the fraction achieved, and how long the run
took. Timing follows the usual GPU-benchmark discipline (Bekman's mamf-finder, nvbandwidth, nccl-tests):
warm-up calls, CUDA events around each timed call after a synchronize, an L2 flush between calls (a write
of a buffer larger than any L2), the best and the median of the runs. Everything also runs on the CPU
(torch CPU, perf_counter), which is how the harness is tested where no GPU is lent; CPU figures are
labelled "(cpu)" and never compared with a GPU datasheet.

The arithmetic (FLOPs per GEMM, bytes per copy, bus-bandwidth factors, the shape search) is in small pure
functions so that it is tested exactly; the timing loops call them.

torch is an optional extra (``pip install "gpuplan[bench]"``); the disk benchmark needs only the
standard library.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypedDict

from ..errors import GpuplanError
from ..units import format_bytes
from .detect import uuid_key


class BenchUnavailable(GpuplanError):
    """A benchmark that cannot run here (no torch, no GPU for a GPU-only test)."""


@dataclass(frozen=True)
class BenchResult:
    """One measured figure. ``value`` is the best run and ``median`` the median run, both in ``unit``;
    ``datasheet`` is the catalog figure in the same unit (None where there is none to compare with)."""

    name: str
    value: float
    unit: str
    datasheet: float | None
    detail: dict = field(default_factory=dict)
    seconds: float = 0.0
    median: float | None = None

    @property
    def fraction(self) -> float | None:
        """Best measured / datasheet (a fraction of the theoretical figure, as mamf-finder reports it)."""
        return self.value / self.datasheet if self.datasheet else None

    def to_dict(self) -> dict:
        return {**asdict(self), "fraction_of_datasheet": self.fraction}


# ------------------------------------------------------------------------------------------ arithmetic


def gemm_flops(m: int, n: int, k: int) -> int:
    """FLOPs of one (m x k) @ (k x n) GEMM: 2mnk, a multiply and an add per term (the count mamf-finder
    and NVIDIA's cuBLAS figures use)."""
    return 2 * m * n * k


def copy_bytes(size_bytes: int) -> int:
    """Bytes moved by a device-to-device copy of ``size_bytes``: read once and written once, 2 x size.
    This is how device copy bandwidth is compared with the HBM datasheet figure (as nvbandwidth's
    device-local copy and the STREAM 'copy' kernel count it)."""
    return 2 * size_bytes


def rates(work: float, times_s: Sequence[float]) -> tuple[float, float]:
    """``work`` per second for the fastest run and for the median run."""
    if not times_s or min(times_s) <= 0:
        raise ValueError("timings must be positive")
    return work / min(times_s), work / statistics.median(times_s)


#: Bus-bandwidth factor by collective for n ranks (nccl-tests doc/PERFORMANCE.md): busbw = algbw x factor,
#: where algbw = payload bytes / time and the payload is the full buffer (all-gather's output,
#: reduce-scatter's input). The factor makes busbw comparable with the per-direction link bandwidth.
BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
}


def bus_bandwidth(op: str, payload_bytes: int, seconds: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in bytes/s for one collective of ``payload_bytes`` over ``ranks`` ranks."""
    algbw = payload_bytes / seconds
    return algbw, algbw * BUS_FACTORS[op](ranks)


def guided_search(
    rate: Callable[[tuple[int, int, int]], float],
    grid: Sequence[tuple[int, int, int]],
    step: int,
    min_step: int,
    max_evals: int,
    max_dim: int,
    deadline_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    seeds: int = 3,
) -> tuple[tuple[int, int, int], dict[tuple[int, int, int], float]]:
    """The (m, n, k) with the highest ``rate`` found within ``max_evals`` shapes (or ``deadline_s`` seconds),
    every dimension a multiple of ``min_step`` in [min_step, max_dim]. Returns the best shape and every
    shape tried with its rate.

    1. the coarse ``grid``;
    2. coordinate ascent from its best ``seeds`` points: along each axis it moves while the rate improves,
       doubling the stride each time; when no move helps, the step halves from ``step`` to ``min_step``;
    3. with budget left, restarts from random jumps of 2-8 x ``min_step`` around the best shape (a fixed
       seed, so a run is repeatable), climbing again from there.

    An exhaustive sweep (mamf-finder's) measures every shape of a lattice; GEMM throughput rises with size
    and is cut by tile and wave quantization (a saw-tooth in each dimension; NVIDIA, 'Matrix Multiplication
    Background User's Guide'), so climbing from the best coarse points finds the top of the surface at a few
    percent of the cost. tests/test_local_bench.py measures how close it gets against exhaustive sweeps of
    such surfaces; on a GPU, scripts/measure_matmul_search.py compares it with a sweep and Bekman's maxima.
    """
    import random

    seen: dict[tuple[int, int, int], float] = {}
    end = clock() + deadline_s if deadline_s is not None else None

    def spent() -> bool:
        return len(seen) >= max_evals or (end is not None and clock() >= end)

    def measure(shape: tuple[int, int, int]) -> float:
        if shape not in seen:
            seen[shape] = rate(shape)
        return seen[shape]

    def climb(best: tuple[int, int, int], s: int) -> None:
        while s >= min_step and not spent():
            improved = False
            for axis in range(3):
                for sign in (1, -1):
                    reach = s
                    while not spent():  # keep going while it pays, twice as far each time
                        cand = list(best)
                        cand[axis] += sign * reach
                        if not min_step <= cand[axis] <= max_dim or measure(tuple(cand)) <= seen[best]:  # type: ignore[arg-type]
                            break
                        best, improved, reach = tuple(cand), True, reach * 2  # type: ignore[assignment]
            if not improved:
                s //= 2

    for shape in grid:
        if spent():
            break
        measure(shape)
    for start in sorted(seen, key=seen.__getitem__, reverse=True)[:seeds]:
        climb(start, step)
    jumps = random.Random(0)
    stale = 0

    def jump(x: int) -> int:
        return (
            min(max_dim, max(min_step, x + jumps.choice((-1, 1)) * jumps.randint(1, 4) * min_step * 2))
            // min_step
            * min_step
        )

    while not spent() and stale < 20:
        best = max(seen, key=seen.__getitem__)
        start = (jump(best[0]), jump(best[1]), jump(best[2]))  # in this order: the jumps are seeded
        if start in seen:
            stale += 1
            continue
        measure(start)
        climb(start, 2 * min_step)
    return max(seen, key=seen.__getitem__), seen


# ------------------------------------------------------------------------------------------ harness


def _torch():
    try:
        import torch
    except ImportError:
        raise BenchUnavailable(
            'benchmarks need torch: pip install "gpuplan[bench]" (or a CUDA build of torch)'
        ) from None
    return torch


def device_for(torch) -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def time_fn(
    fn: Callable[[], object], device: str, warmup: int = 3, iters: int = 10, flush: Callable[[], object] | None = None
) -> list[float]:
    """Seconds per call of ``fn``, one per timed call: CUDA events on a GPU (after a synchronize, so
    only ``fn``'s kernels are timed), perf_counter on the CPU; ``flush`` runs untimed before each call."""
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


MATMUL_DTYPES = ("bf16", "fp16", "fp8", "tf32")


def matmul_support(torch, device: str) -> dict[str, str | None]:
    """For each matmul dtype: None where this device runs it on its matrix units, else why not.

    NVIDIA: fp16 tensor cores from sm 7.0 (Volta), bf16 and TF32 from sm 8.0 (Ampere), fp8 from sm 8.9
    (Ada, Hopper) (CUDA C++ Programming Guide, 'Warp matrix functions' and the architecture whitepapers).
    fp8 also needs torch's ``_scaled_mm`` (torch >= 2.1). ROCm's fp8 formats differ and are not measured.
    On the CPU every dtype runs, to test the harness (TF32 does not exist there: it runs as fp32).
    """
    if device != "cuda":
        return dict.fromkeys(MATMUL_DTYPES)
    cc = torch.cuda.get_device_capability()
    fp8 = hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm")
    rocm = bool(getattr(torch.version, "hip", None))
    return {
        "bf16": None if rocm or cc >= (8, 0) else f"bf16 needs sm 8.0+, this GPU is sm {cc[0]}.{cc[1]}",
        "fp16": None if rocm or cc >= (7, 0) else f"fp16 tensor cores need sm 7.0+ (sm {cc[0]}.{cc[1]})",
        "fp8": (
            "fp8 on ROCm is not measured"
            if rocm
            else None
            if cc >= (8, 9) and fp8
            else f"fp8 needs sm 8.9+ (sm {cc[0]}.{cc[1]})"
            if cc < (8, 9)
            else "fp8 needs torch >= 2.1"
        ),
        "tf32": None if rocm or cc >= (8, 0) else f"TF32 needs sm 8.0+ (sm {cc[0]}.{cc[1]})",
    }


def _gemm(torch, device: str, dtype: str, m: int, n: int, k: int) -> Callable[[], object]:
    """A closure that runs one (m x k) @ (k x n) GEMM in ``dtype`` (fp8: e4m3 inputs through
    ``torch._scaled_mm`` with unit scales, a bf16 output, fast accumulation and the column-major B that
    cuBLASLt takes)."""
    if dtype == "fp8":
        a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=device)
        # fast accumulation: the path training frameworks use for forward GEMMs and the one that reaches
        # Hopper's fp8 peak (the precise path re-accumulates in fp32 and runs slower)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)
    td = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}[dtype]
    a = torch.randn(m, k, device=device, dtype=td)
    b = torch.randn(k, n, device=device, dtype=td)
    return lambda: a @ b


def matmul_times(torch, device: str, dtype: str, m: int, n: int, k: int, iters: int, flush) -> list[float]:
    """Seconds per call of one GEMM shape; TF32 is enabled only for ``tf32`` (fp32 must not silently run as
    TF32) and restored afterwards."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        return time_fn(_gemm(torch, device, dtype, m, n, k), device, warmup=2, iters=iters, flush=flush)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


#: The search settings: coarse grid sizes, first and last step, largest dimension, shape and time budget
#: (seconds per dtype). The grid and budget were chosen on the saw-tooth surfaces of the tests (48 coarse
#: points, 120 shapes: >= 97 % of the exhaustive best on realistic ones); the GPU quick budget keeps one dtype
#: under two minutes on an H100 (a 20480^3 bf16 GEMM is ~22 ms; 120 shapes x 7 calls, plus set-up).
class SearchSettings(TypedDict):
    sizes: tuple[int, ...]
    k: tuple[int, ...]
    step: int
    min_step: int
    max_dim: int
    evals: int
    deadline_s: float
    iters: int


SEARCH: dict[tuple[str, bool], SearchSettings] = {
    ("cuda", True): {
        "sizes": (1024, 4096, 10240, 18432),
        "k": (2048, 8192, 18432),
        "step": 1024,
        "min_step": 256,
        "max_dim": 20480,
        "evals": 120,
        "deadline_s": 100.0,
        "iters": 5,
    },
    ("cuda", False): {
        "sizes": (1024, 4096, 10240, 18432),
        "k": (2048, 8192, 18432),
        "step": 1024,
        "min_step": 128,
        "max_dim": 32768,
        "evals": 400,
        "deadline_s": 900.0,
        "iters": 20,
    },
    ("cpu", True): {
        "sizes": (128, 256),
        "k": (128, 256),
        "step": 64,
        "min_step": 32,
        "max_dim": 512,
        "evals": 10,
        "deadline_s": 10.0,
        "iters": 3,
    },
    ("cpu", False): {
        "sizes": (128, 256, 512),
        "k": (128, 256, 512),
        "step": 128,
        "min_step": 32,
        "max_dim": 1024,
        "evals": 40,
        "deadline_s": 60.0,
        "iters": 5,
    },
}


def bench_matmul(
    dtype: str = "bf16",
    quick: bool = True,
    datasheet_flops: float | None = None,
    shapes: list[tuple[int, int, int, int]] | None = None,
    model: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BenchResult:
    """Achievable matmul TFLOP/s in ``dtype``: the best shape a guided search finds (``guided_search``), or,
    with ``shapes`` (m, n, k, count) from a model, the FLOP-weighted rate over that model's own GEMMs
    (each shape's time weighted by how many such GEMMs the model has). ``progress(done, total)`` is called
    after each shape."""
    torch = _torch()
    device = device_for(torch)
    if dtype not in MATMUL_DTYPES + ("fp32",):
        raise GpuplanError(f"unknown matmul dtype {dtype!r}; choose from {', '.join(MATMUL_DTYPES)}, fp32")
    why_not = matmul_support(torch, device).get(dtype)
    if why_not:
        raise BenchUnavailable(why_not)
    run_as = "fp32" if device == "cpu" and dtype == "tf32" else dtype
    if dtype == "fp8" and device == "cuda":
        try:  # a 16 x 16 probe: a build without fp8 kernels for this GPU (old CUDA, sm 8.9) says so here
            _gemm(torch, device, "fp8", 16, 16, 16)()
        except RuntimeError as e:
            raise BenchUnavailable(
                f"fp8 GEMMs do not run here: {str(e).strip().splitlines()[0] if str(e).strip() else e}"
            ) from None
    cfg = SEARCH[(device, quick)]
    t0 = time.perf_counter()
    flush = _l2_flusher(torch, device)
    median_of: dict[tuple[int, int, int], float] = {}
    # the CPU harness runs a model's shapes 16x smaller (64x for fp8, which a CPU emulates very slowly);
    # fp8 GEMMs need every dimension a multiple of 16 (cuBLASLt), so fp8 shapes are rounded up to one
    scale = (64 if dtype == "fp8" else 16) if device == "cpu" else 1
    align = 16 if dtype == "fp8" else 1

    def fit(x: int) -> int:
        return max(16, -(-(x // scale) // align) * align)

    def tflops(shape: tuple[int, int, int]) -> float:
        best, med = rates(gemm_flops(*shape), matmul_times(torch, device, run_as, *shape, cfg["iters"], flush))
        median_of[shape] = med / 1e12
        if progress:
            progress(len(median_of), total)
        return best / 1e12

    label = f"matmul {dtype}" + (" (cpu)" if device == "cpu" else "")
    ds = datasheet_flops / 1e12 if datasheet_flops and device == "cuda" else None
    base = {
        "device": device,
        "dtype": dtype,
        "dtype_run": run_as,
        **({"fp8_fast_accum": True} if dtype == "fp8" else {}),
    }
    if shapes:
        run = [(fit(m), fit(n), fit(k), c) for m, n, k, c in shapes]
        total = len(run)
        work = [gemm_flops(m, n, k) * c for m, n, k, c in run]
        best = [tflops((m, n, k)) for m, n, k, _ in run]
        med = [median_of[(m, n, k)] for m, n, k, _ in run]
        weighted = [sum(work) / sum(w / r for w, r in zip(work, rs, strict=True)) for rs in (best, med)]
        return BenchResult(
            label,
            weighted[0],
            "TFLOP/s",
            ds,
            {
                **base,
                "model": model,
                "model_shapes": [list(s) for s in run],
                "shapes_tried": len(run),
                "median_tflops": weighted[1],
            },
            time.perf_counter() - t0,
            weighted[1],
        )
    div = 4 if device == "cpu" and dtype == "fp8" else 1  # CPU fp8: 32-64 instead of 128-256
    grid = [(m // div, n // div, k // div) for m in cfg["sizes"] for n in cfg["sizes"] for k in cfg["k"]]
    total = cfg["evals"]
    best_shape, seen = guided_search(
        tflops,
        grid,
        max(16, cfg["step"] // div),
        max(16, cfg["min_step"] // div),
        cfg["evals"],
        cfg["max_dim"] // div,
        cfg["deadline_s"],
    )
    return BenchResult(
        label,
        seen[best_shape],
        "TFLOP/s",
        ds,
        {**base, "best_shape_mnk": list(best_shape), "shapes_tried": len(seen), "median_tflops": median_of[best_shape]},
        time.perf_counter() - t0,
        median_of[best_shape],
    )


def bench_memory(quick: bool = True, datasheet_bytes_per_s: float | None = None) -> BenchResult:
    """Device copy bandwidth in GB/s counted as bytes read + bytes written (``copy_bytes``), so it compares
    with the datasheet HBM bandwidth. The buffers are sized from free memory (at most a quarter of it each)."""
    torch = _torch()
    device = device_for(torch)
    t0 = time.perf_counter()
    if device == "cuda":
        torch.cuda.empty_cache()  # what earlier benchmarks left in torch's cache is free for this one
        free_bytes, _ = torch.cuda.mem_get_info()
        size = min((2 if quick else 8) * 2**30, free_bytes // 4)
    else:
        size = 256 * 2**20
    src = torch.empty(size, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    best, med = rates(copy_bytes(size), time_fn(lambda: dst.copy_(src), device, warmup=2, iters=5 if quick else 20))
    return BenchResult(
        "memory copy" + (" (cpu)" if device == "cpu" else ""),
        best / 1e9,
        "GB/s (read + write)",
        datasheet_bytes_per_s / 1e9 if datasheet_bytes_per_s and device == "cuda" else None,
        {"device": device, "bytes": size, "median_gbps": med / 1e9},
        time.perf_counter() - t0,
        med / 1e9,
    )


def bench_pcie(quick: bool = True, link_bytes_per_s: dict[str, float] | None = None) -> list[BenchResult]:
    """Host-to-device and device-to-host bandwidth, pinned and pageable host memory, on every GPU torch
    sees. ``link_bytes_per_s`` maps a GPU's UUID (``detect.uuid_key``) to its link's theoretical one-direction
    rate (from detect: ``pcie_bytes_per_s`` of its generation and width) for the datasheet column."""
    torch = _torch()
    if not torch.cuda.is_available():
        raise BenchUnavailable("the PCIe benchmark needs a GPU")
    out = []
    size = (1 if quick else 4) * 2**30
    count = torch.cuda.device_count()
    for index in range(count):
        link = (link_bytes_per_s or {}).get(uuid_key(getattr(torch.cuda.get_device_properties(index), "uuid", "")))
        with torch.cuda.device(index):
            dev = torch.empty(size, dtype=torch.uint8, device="cuda")
            for pinned in (True, False):
                host = torch.empty(size, dtype=torch.uint8, pin_memory=pinned)
                host.fill_(1)  # touch every page: untouched pageable memory reads from the shared zero page
                # the closures run at once, inside this iteration; closing over the variables (not binding
                # them as defaults) lets the `del`s below free the buffers
                for direction, fn in (
                    ("host-to-device", lambda: dev.copy_(host, non_blocking=pinned)),  # noqa: B023, F821
                    ("device-to-host", lambda: host.copy_(dev, non_blocking=pinned)),  # noqa: B023, F821
                ):
                    t0 = time.perf_counter()
                    best, med = rates(size, time_fn(fn, "cuda", warmup=1, iters=3 if quick else 10))
                    name = f"pcie {direction} {'pinned' if pinned else 'pageable'}" + (
                        f" gpu{index}" if count > 1 else ""
                    )
                    out.append(
                        BenchResult(
                            name,
                            best / 1e9,
                            "GB/s",
                            link / 1e9 if link else None,
                            {"gpu": index, "bytes": size, "pinned": pinned},
                            time.perf_counter() - t0,
                            med / 1e9,
                        )
                    )
                del host
            del dev
    return out


def bench_collectives(
    quick: bool = True,
    sizes: Sequence[int] | None = None,
    ops: Sequence[str] = tuple(BUS_FACTORS),
    link_bytes_per_s: float | None = None,
    allow_single: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> list[BenchResult]:
    """Bus bandwidth of all-reduce, all-gather and reduce-scatter vs payload (``bus_bandwidth``), over every
    rank of a torchrun launch (NCCL on GPUs, gloo on CPUs):

        torchrun --nproc-per-node 8 -m gpuplan local bench allreduce                       (one node)
        srun --ntasks-per-node 1 torchrun --nnodes $SLURM_NNODES --nproc-per-node 8 \\
             --rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500 -m gpuplan local bench allreduce

    ``link_bytes_per_s`` (the catalog's per-direction scale-up bandwidth) is the datasheet figure, used on
    one node only: across nodes the network sets the pace. Alone it refuses (a one-rank bus bandwidth is 0);
    ``allow_single`` runs the one-process path that the CPU tests use.
    """
    torch = _torch()
    import datetime

    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", 1))
    if world < 2 and not allow_single:
        raise BenchUnavailable(
            "collectives need 2 or more ranks: torchrun --nproc-per-node 8 -m gpuplan local bench allreduce"
        )
    own_group = not dist.is_initialized()
    if own_group:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        try:
            if world > 1:  # under torchrun: its MASTER_ADDR/PORT rendezvous
                if "MASTER_ADDR" not in os.environ:
                    raise GpuplanError("WORLD_SIZE is set but MASTER_ADDR is not: launch with torchrun (it sets both)")
                dist.init_process_group(
                    backend,
                    rank=int(os.environ.get("RANK", 0)),
                    world_size=world,
                    timeout=datetime.timedelta(seconds=120),
                )
            else:  # one process (the CPU-tested path): an in-memory store, no port to collide on
                dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
        except (ValueError, RuntimeError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise GpuplanError(f"could not join the torchrun group: {first}") from None
    try:
        n = dist.get_world_size()
        nodes = max(1, n // int(os.environ.get("LOCAL_WORLD_SIZE", n)))
        device = "cuda" if torch.cuda.is_available() else "cpu"
        local = int(os.environ.get("LOCAL_RANK", 0))
        if device == "cuda":
            torch.cuda.set_device(local)  # before the first collective, so NCCL sets up on this rank's GPU

        def barrier() -> None:
            dist.barrier(device_ids=[local]) if device == "cuda" else dist.barrier()

        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        sizes = sizes or ([2**20, 2**24, 2**28] if quick else [2**p for p in range(16, 31, 2)])
        datasheet = link_bytes_per_s / 1e9 if link_bytes_per_s and nodes == 1 and n > 1 and device == "cuda" else None
        out = []
        for op in ops:
            for size in sizes:
                elems = max(n, size // 4 // n * n)  # fp32 elements, divisible by the rank count
                payload = elems * 4
                full = torch.ones(elems, dtype=torch.float32, device=device)
                part = torch.empty(elems // n, dtype=torch.float32, device=device)
                # the closures (here and in time_fn below) run at once, inside this iteration
                one = {
                    "all_reduce": lambda: dist.all_reduce(full),  # noqa: B023
                    "all_gather": lambda: gather(full, part),  # noqa: B023
                    "reduce_scatter": lambda: scatter(part, full),  # noqa: B023
                }[op]
                # as nccl-tests does: line the ranks up before each timed batch (a rank that starts late would
                # be timed as the collective's cost), and time several calls back to back so launch skew
                # and event overhead vanish at small payloads
                reps = max(1, min(20, 2**26 // payload))
                t0 = time.perf_counter()
                times = [
                    t / reps
                    for t in time_fn(
                        lambda: [one() for _ in range(reps)],  # noqa: B023
                        device,
                        warmup=1,
                        iters=5 if quick else 20,
                        flush=barrier,
                    )
                ]
                (algbw, busbw), (_, med_busbw) = (
                    bus_bandwidth(op, payload, min(times), n),
                    bus_bandwidth(op, payload, statistics.median(times), n),
                )
                out.append(
                    BenchResult(
                        f"{op} {format_bytes(payload, binary=True)}",
                        busbw / 1e9,
                        "GB/s bus bandwidth",
                        datasheet,
                        {
                            "op": op,
                            "ranks": n,
                            "nodes": nodes,
                            "bytes": payload,
                            "device": device,
                            "algbw_bytes_per_s": algbw,
                            "busbw_bytes_per_s": busbw,
                            "calls_per_timing": reps,
                        },
                        time.perf_counter() - t0,
                        med_busbw / 1e9,
                    )
                )
                if progress:
                    progress(len(out), len(ops) * len(sizes))
        return out
    finally:
        if own_group:
            dist.destroy_process_group()


# ------------------------------------------------------------------------------------------ disk

_O_DIRECT_ALIGN = 4096  # logical block size that O_DIRECT buffers and offsets must be aligned to
_DISK_CHUNK = 8 * 2**20  # one write or read call: a checkpoint shard is written in large blocks
#: the disk test refuses to run when its files would leave less than this fraction of the filesystem free
DISK_MIN_FREE = 0.10
#: the private folder the disk test makes under --path is this prefix plus mkdtemp's random suffix
DISK_DIR_PREFIX = ".gpuplan-bench-"


class DiskBenchError(BenchUnavailable):
    """The disk benchmark cannot write where it was pointed: a read-only or full filesystem, no permission,
    an I/O error. Alone (``local bench disk``) it is one error line; under ``local bench all`` it is listed
    among the skipped benchmarks."""


class BenchInterrupted(GpuplanError):
    """SIGINT, SIGTERM or SIGHUP stopped the disk benchmark; its files and folder were removed first."""


class _StopFlag:
    """Tells the disk workers to stop: set by the signal handler or by a worker that failed, read by every
    worker between two blocks. A plain attribute, not a ``threading.Event``: ``Event.set`` takes a lock, and a
    signal handler that runs while the main thread is inside ``set`` would wait for that lock forever."""

    def __init__(self) -> None:
        self.stopped = False
        self.signum: int | None = None

    def set(self, signum: int | None = None) -> None:
        if signum is not None and self.signum is None:
            self.signum = signum
        self.stopped = True

    def is_set(self) -> bool:
        return self.stopped


_STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


class _StopOnSignals:
    """For the duration of a ``with``: SIGINT, SIGTERM and SIGHUP set ``stop`` instead of killing the process
    (the workers then stop within one block and the caller removes its files); the previous handlers come
    back on exit. Python runs handlers in the main thread only, so elsewhere (a library caller's thread)
    nothing is installed. A signal that is ignored (SIG_IGN: nohup, a background job) stays ignored."""

    def __init__(self, stop: _StopFlag):
        self.stop = stop
        self.previous: dict = {}

    def _handler(self, signum, frame) -> None:
        self.stop.set(signum)

    def __enter__(self) -> _StopOnSignals:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return self
        try:
            for name in _STOP_SIGNALS:
                sig = getattr(signal, name, None)
                if sig is None:
                    continue
                old = signal.getsignal(sig)
                if old is signal.SIG_IGN or old is None:  # None: a handler set outside Python, which we can't put back
                    continue
                signal.signal(sig, self._handler)
                self.previous[sig] = old
        except BaseException:
            self._restore()
            raise
        return self

    def _restore(self) -> None:
        import signal

        while self.previous:
            sig, old = self.previous.popitem()
            signal.signal(sig, old)

    def __exit__(self, *exc) -> None:
        self._restore()


def _signal_name(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _disk_error(path: Path, e: OSError, doing: str) -> DiskBenchError:
    """One line for an OSError of the disk benchmark: what happened, where, and what to do about it."""
    import errno

    code = e.errno
    if code == errno.EROFS:
        return DiskBenchError(f"{path}: read-only filesystem, can't {doing}; give --path a writable folder")
    if code in (errno.EACCES, errno.EPERM):
        return DiskBenchError(f"{path}: permission denied, can't {doing}; give --path a folder you can write to")
    if code in (errno.ENOSPC, errno.EDQUOT):
        what = "the filesystem is full" if code == errno.ENOSPC else "the disk quota is used up"
        return DiskBenchError(
            f"{path}: {what} (while the disk test was trying to {doing}); "
            "lower --file-size or --writers, or free some space"
        )
    if code == errno.EIO:
        return DiskBenchError(
            f"{path}: I/O error while the disk test was trying to {doing}; check the disk (dmesg) before trusting it"
        )
    name = errno.errorcode.get(code, "") if code else ""
    return DiskBenchError(f"{path}: disk test failed to {doing}: {e.strerror or e}" + (f" ({name})" if name else ""))


def check_disk(path: Path, writers: int = 4, file_bytes: int | None = None, quick: bool = True) -> int:
    """Check a disk benchmark before it writes anything; returns the bytes each writer will write.

    ``path`` must be an existing directory (a symlink to one is fine: everything is then written inside a
    private folder made in it). The files must leave at least ``DISK_MIN_FREE`` of the filesystem free
    (``os.statvfs``: blocks available to an unprivileged user); the refusal gives the numbers and the flag
    to lower. Raises ``GpuplanError`` (bad input) or ``DiskBenchError`` (the filesystem cannot be read)."""
    import stat

    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise GpuplanError(
            f"--path {path}: not a directory (nothing is there); give a folder on the disk to test"
        ) from None
    except OSError as e:
        raise GpuplanError(
            f"--path {path}: not a directory I can use ({e.strerror or e}); give a folder on the disk to test"
        ) from None
    if not stat.S_ISDIR(st.st_mode):
        kind = (
            "a file"
            if stat.S_ISREG(st.st_mode)
            else "a FIFO"
            if stat.S_ISFIFO(st.st_mode)
            else "a socket"
            if stat.S_ISSOCK(st.st_mode)
            else "a device"
            if stat.S_ISBLK(st.st_mode) or stat.S_ISCHR(st.st_mode)
            else "not a folder"
        )
        raise GpuplanError(f"--path {path}: not a directory ({kind}); give a folder on the disk to test")
    if writers < 1:
        raise GpuplanError(f"--writers must be at least 1, got {writers}")
    per_file = file_bytes if file_bytes is not None else (256 if quick else 2048) * 2**20
    if per_file <= 0:
        raise GpuplanError(f"the disk file size must be positive, got {per_file} bytes")
    per_file = -(-per_file // _O_DIRECT_ALIGN) * _O_DIRECT_ALIGN
    try:
        fs = os.statvfs(path)
    except OSError as e:
        raise _disk_error(path, e, "read how much space is free") from None
    size, free = fs.f_blocks * fs.f_frsize, fs.f_bavail * fs.f_frsize
    needed = per_file * writers
    if size > 0 and free - needed < DISK_MIN_FREE * size:  # size 0: a filesystem that reports none (some FUSE)
        fmt = lambda b: format_bytes(b, binary=True)  # noqa: E731
        fits = max(0, int(free - DISK_MIN_FREE * size)) // writers  # the largest file that would still fit
        fits_str = f"{fits // 2**30}GiB" if fits >= 2**30 else f"{fits // 2**20}MiB"  # rounded down, as typed
        hint = (
            f"lower --file-size (to {fits_str} or less with {writers} writer{'s' if writers > 1 else ''}) or --writers"
            if fits >= 2**20
            else "lower --file-size or --writers, free some space, or test another folder"
        )
        raise GpuplanError(
            f"--path {path}: the disk test needs {fmt(needed)} ({writers} x {fmt(per_file)}) but the "
            f"filesystem has {fmt(free)} free of {fmt(size)}; that would leave less than "
            f"{DISK_MIN_FREE:.0%} free: {hint}"
        )
    return per_file


class _PrivateDir:
    """A fresh folder made by ``tempfile.mkdtemp`` (mode 0700) under ``parent``, worked on through a file
    descriptor: files are created in it with O_CREAT | O_EXCL | O_NOFOLLOW (a name that exists, a symlink
    included, is an error, never followed or overwritten) and opened for reading with O_NOFOLLOW. On exit
    every file it created is unlinked and the folder removed, whatever happened in between."""

    _CLOEXEC = getattr(os, "O_CLOEXEC", 0)

    def __init__(self, parent: Path):
        self.parent = parent
        self.created: list[str] = []
        self.fd = self.parent_fd = -1
        self.path: Path | None = None

    def __enter__(self) -> _PrivateDir:
        import tempfile

        try:
            self.parent_fd = os.open(self.parent, os.O_RDONLY | os.O_DIRECTORY | self._CLOEXEC)
            made = tempfile.mkdtemp(prefix=DISK_DIR_PREFIX, dir=self.parent)
        except OSError as e:
            self._close()
            raise _disk_error(self.parent, e, "create its folder") from None
        self.path = Path(made)
        self.name = os.path.basename(made)
        try:
            # the folder mkdtemp made, looked up once through the parent's descriptor; from here on every file
            # operation goes through this descriptor, so a rename or a symlink put in place of the folder
            # cannot redirect them
            self.fd = os.open(
                self.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | self._CLOEXEC, dir_fd=self.parent_fd
            )
            st = os.fstat(self.fd)
            self.ident = (st.st_dev, st.st_ino)
        except OSError as e:
            self._close()
            raise DiskBenchError(
                f"{made}: the folder just made could not be opened ({e.strerror or e}); "
                "is something else changing " + str(self.parent) + "?"
            ) from None
        return self

    def create(self, name: str) -> int:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | self._CLOEXEC, 0o600, dir_fd=self.fd)
        self.created.append(name)
        return fd

    def open_read(self, name: str, extra: int = 0) -> int:
        return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | self._CLOEXEC | extra, dir_fd=self.fd)

    def _close(self) -> None:
        for attr in ("fd", "parent_fd"):
            fd = getattr(self, attr)
            if fd >= 0:
                os.close(fd)
                setattr(self, attr, -1)

    def __exit__(self, exc_type, exc, tb) -> None:
        left: list[str] = []
        try:
            for name in self.created:
                try:
                    os.unlink(name, dir_fd=self.fd)
                except FileNotFoundError:
                    pass
                except OSError as e:
                    left.append(f"{name}: {e.strerror or e}")
            try:  # remove the folder only if it is still the one made (rmdir never removes a non-empty one)
                st = os.stat(self.name, dir_fd=self.parent_fd, follow_symlinks=False)
                if (st.st_dev, st.st_ino) == self.ident:
                    os.rmdir(self.name, dir_fd=self.parent_fd)
                else:
                    left.append("the folder was replaced by something else")
            except FileNotFoundError:
                pass
            except OSError as e:
                left.append(e.strerror or str(e))
        finally:
            self._close()
        if left and exc_type is None:
            raise DiskBenchError(
                f"{self.path}: the disk test could not remove its files ({'; '.join(left)}); remove the folder by hand"
            )


def _read_direct(box: _PrivateDir, name: str, chunk: int, stop: _StopFlag) -> str:
    """Read ``name`` in ``box`` bypassing the page cache: O_DIRECT into a page-aligned buffer where the
    filesystem allows it, else after posix_fadvise(DONTNEED) (Linux drops the file's clean cached pages).
    Returns the mode; stops early (the result is then thrown away) once ``stop`` is set."""
    import errno
    import mmap

    if hasattr(os, "O_DIRECT"):
        try:
            fd = box.open_read(name, os.O_DIRECT)
        except OSError as e:
            if e.errno == errno.ELOOP:  # a symlink where our file was: never read through it
                raise
            fd = -1  # tmpfs and some FUSE mounts refuse O_DIRECT
        if fd >= 0:
            buf = mmap.mmap(-1, chunk)  # anonymous maps are page-aligned
            try:
                offset = 0
                while not stop.is_set():
                    got = os.preadv(fd, [buf], offset)
                    offset += got
                    if got < chunk:
                        return "O_DIRECT"
                return "O_DIRECT"
            except OSError:
                pass  # the filesystem took the flag but not the read: read it the other way
            finally:
                buf.close()
                os.close(fd)
    fd = box.open_read(name)
    try:
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        while not stop.is_set() and os.read(fd, chunk):
            pass
        return "fadvise-dontneed" if hasattr(os, "posix_fadvise") else "cached"
    finally:
        os.close(fd)


def _block_stop_signals() -> None:
    """Worker threads block the stop signals, so the kernel hands them to the main thread, where Python runs
    the handler."""
    import signal

    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {getattr(signal, n) for n in _STOP_SIGNALS if hasattr(signal, n)})


def _run_all(pool, fn: Callable[[int], object], count: int, stop: _StopFlag) -> float:
    """Run ``fn(0..count-1)`` on the pool at once; the wall time in seconds. The main thread waits in short
    slices, so that a signal handler runs promptly; the first failure stops the other workers, and is raised
    once they have all returned."""
    import concurrent.futures as cf

    t0 = time.perf_counter()
    futures = [pool.submit(fn, i) for i in range(count)]
    pending = set(futures)
    while pending:
        done, pending = cf.wait(pending, timeout=0.1, return_when=cf.FIRST_EXCEPTION)
        if any(f.exception() is not None for f in done):
            stop.set()
    seconds = time.perf_counter() - t0
    for f in futures:
        if f.exception() is not None:
            raise f.exception()
    return seconds


def bench_disk(
    path: Path,
    writers: int = 4,
    file_bytes: int | None = None,
    quick: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> list[BenchResult]:
    """Checkpoint-shaped writes (``writers`` files written at once in 8 MiB blocks, each fsync'ed) and
    data-loader-shaped reads of them that bypass the page cache (``_read_direct``), on ``path``. Bandwidth is
    total bytes / wall time of the whole phase (GB/s, 1e9 bytes). File size: ``file_bytes`` per writer, else
    256 MiB (quick) or 2 GiB (full).

    Safe in a shared folder: ``check_disk`` first (a directory, enough free space); every file lives in a
    private folder made for this run (``_PrivateDir``: mkdtemp, O_EXCL | O_NOFOLLOW), which is removed with
    everything in it on any exit. SIGINT, SIGTERM and SIGHUP stop the workers within one block; the files
    are removed and ``BenchInterrupted`` raised. OSErrors (read-only, full, I/O error) become
    ``DiskBenchError``.
    """
    import concurrent.futures as cf

    if os.name != "posix":
        raise BenchUnavailable("the disk benchmark needs a POSIX system (O_NOFOLLOW, descriptor-relative files)")
    path = Path(path)
    per_file = check_disk(path, writers, file_bytes, quick)
    chunk = _DISK_CHUNK
    # random data, so compressing filesystems cannot shrink it; each block starts at a different byte offset
    # of the pool, so its 4 KiB pages differ from every other block's (for the first 4096 blocks, 32 GiB)
    # and deduplicating filesystems cannot skip it
    data = memoryview(os.urandom(chunk + _O_DIRECT_ALIGN))
    blocks = -(-per_file // chunk)
    names = [f"data-{i}" for i in range(writers)]
    done = [0]
    modes: list[str] = []
    stop = _StopFlag()

    def tick() -> None:
        done[0] += 1
        if progress:
            progress(done[0], 2 * writers)

    def write(i: int) -> None:
        try:
            fd = box.create(names[i])
            try:
                written, b = 0, 0
                while written < per_file:
                    if stop.is_set():
                        return
                    r = (i * blocks + b) % _O_DIRECT_ALIGN
                    n = os.write(fd, data[r : r + min(chunk, per_file - written)])
                    if n <= 0:  # a regular file never takes nothing without an error; don't spin on it
                        import errno

                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    written += n
                    b += 1
                if stop.is_set():
                    return
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            stop.set()
            raise
        tick()

    def read(i: int) -> None:
        try:
            modes.append(_read_direct(box, names[i], chunk, stop))
        except BaseException:
            stop.set()
            raise
        tick()

    def interrupted() -> BenchInterrupted:
        return BenchInterrupted(
            f"disk benchmark stopped by {_signal_name(stop.signum or 0)}; its files under {path} were removed"
        )

    with _StopOnSignals(stop):
        doing = "create its folder"
        try:
            with _PrivateDir(path) as box:
                if stop.signum is not None:
                    raise interrupted()
                with cf.ThreadPoolExecutor(writers, initializer=_block_stop_signals) as pool:
                    doing = "write its files"
                    t_write = _run_all(pool, write, writers, stop)
                    if stop.signum is not None:
                        raise interrupted()
                    doing = "read its files back"
                    t_read = _run_all(pool, read, writers, stop)
                    if stop.signum is not None:
                        raise interrupted()
                doing = "remove its files"
        except OSError as e:
            raise _disk_error(path, e, doing) from None
        if stop.signum is not None:  # a signal during the clean-up: the files are gone, honour it now
            raise interrupted()
    total = per_file * writers
    fstype = _fstype(path)
    mode = "O_DIRECT" if set(modes) == {"O_DIRECT"} else next((m for m in modes if m != "O_DIRECT"), "cached")
    # memory-backed filesystems are RAM whatever the flags; ZFS keeps its own cache (ARC) that fadvise misses
    cached = mode == "cached" or fstype in ("tmpfs", "ramfs") or (mode == "fadvise-dontneed" and fstype == "zfs")
    where = {"path": str(path), "fstype": fstype, "bytes": total}
    return [
        BenchResult("disk write (fsync)", total / t_write / 1e9, "GB/s", None, {**where, "writers": writers}, t_write),
        BenchResult(
            "disk read (cached: this filesystem keeps files in memory)" if cached else "disk read (uncached)",
            total / t_read / 1e9,
            "GB/s",
            None,
            {**where, "readers": writers, "read_mode": mode},
            t_read,
        ),
    ]


def _fstype(path: Path) -> str | None:
    """The filesystem type of the mount holding ``path`` (the longest mount point it lies under)."""
    try:
        import psutil

        real = path.resolve()
        mounts = [p for p in psutil.disk_partitions(all=True) if real.is_relative_to(p.mountpoint)]
        return max(mounts, key=lambda p: len(p.mountpoint)).fstype if mounts else None
    except Exception:
        return None
