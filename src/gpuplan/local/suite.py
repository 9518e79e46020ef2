"""``local detect`` and ``local bench`` as library calls: detect this machine, run the chosen benchmarks
and return the calibration profile (the record ``--json`` prints and ``--save`` writes).

Progress is reported through an optional ``progress(label)`` context manager that yields an
``advance(done, total)`` callback; the CLI draws it with rich, the library stays silent.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import GpuplanError, InputError

Progress = Callable[[str], AbstractContextManager[Callable[[int, int], None]]]


@contextmanager
def _silent(label: str) -> Iterator[Callable[[int, int], None]]:
    yield lambda done, total: None


@dataclass(frozen=True)
class DetectReport:
    """``local detect``: GPUs (NVML), links, topology, driver; CPU, RAM, NUMA and disks."""

    detection: Any
    record: dict[str, Any]
    kind = "local.detect"
    exit_code = 0
    fits = True

    def to_dict(self) -> dict[str, Any]:
        return self.record


@dataclass(frozen=True)
class BenchReport:
    """``local bench``: the calibration profile (kind ``calibration``), the record ``--save`` writes."""

    profile: dict[str, Any]
    kind = "calibration"
    exit_code = 0
    fits = True

    def to_dict(self) -> dict[str, Any]:
        return self.profile


def detect_report(accelerators: Any) -> DetectReport:
    from ..plan.records import envelope
    from .detect import detect, detection_dict

    d = detect(accelerators)
    return DetectReport(d, envelope("local.detect", **detection_dict(d)))


def model_shapes(model: Any) -> list[tuple[int, int, int, int]]:
    """The GEMM shapes of one model's linear layers at 4096 tokens: (m, n, k, count)."""
    from ..estimate.params import linear_shapes

    counts: dict[tuple[int, int, int], int] = {}
    for din, dout, count in linear_shapes(model).values():
        counts[(4096, dout, din)] = counts.get((4096, dout, din), 0) + count
    return sorted((m, n, k, c) for (m, n, k), c in counts.items())


def run_bench(
    accelerators: Any,
    which: str,
    *,
    quick: bool = True,
    dtypes: Sequence[str] = (),
    disk_path: Path = Path("."),
    writers: int = 4,
    file_bytes: int | None = None,
    payload_bytes: Sequence[int] | None = None,
    model: Any = None,
    progress: Progress | None = None,
) -> BenchReport | None:
    """Run the benchmarks of ``which`` (one suite or ``all``) and return the profile; None on a torchrun rank
    other than 0 (rank 0 reports). A suite that cannot run here is skipped with the reason under ``all``,
    an error when asked for alone."""
    from .. import __version__
    from ..spec.accelerator import pcie_bytes_per_s
    from . import bench
    from .calibration import make_profile
    from .detect import detect, detection_dict, torch_gpu, uuid_key
    from .sampler import Sampler

    progress = progress or _silent
    world = int(os.environ.get("WORLD_SIZE", 1))
    if world > 1 and which not in ("allreduce", "all"):
        raise InputError(
            "WHICH",
            f"under torchrun only the collectives run (every rank would share the {which} "
            "benchmark); run it once without torchrun",
        )
    # the copy and PCIe runs go before the matmul runs: on an H200 the copy read 3.81 TB/s right after the fp8 matmul
    # search had held the GPU at its power cap, and 4.25 TB/s on its own or after the bf16 runs alone
    # (docs/measurements/copy_bandwidth_h200_rerun.json)
    todo = (
        (["allreduce"] if world > 1 else ["memory", "pcie", "matmul", "allreduce", "disk"])
        if which == "all"
        else [which]
    )
    if file_bytes is not None and file_bytes <= 0:
        raise InputError("--file-size", "must be more than zero")
    if "disk" in todo:  # a folder, and room for the files: refused now, not after the GPU benchmarks
        bench.check_disk(disk_path, writers, file_bytes, quick)
    if payload_bytes and min(payload_bytes) < 4:
        raise InputError("--payload", "must be at least 4 bytes (one fp32 element)")
    shapes = model_shapes(model) if model is not None else None
    model_id = model.id if model is not None else None
    det = detect(accelerators)
    gpu_benches = any(n in todo for n in ("matmul", "memory", "pcie", "allreduce"))
    gpu0 = torch_gpu(det) if gpu_benches else None
    acc = accelerators.get(gpu0.catalog_id) if gpu0 and gpu0.catalog_id else None
    links = {
        uuid_key(g.reading.uuid): pcie_bytes_per_s(gen, g.reading.pcie_width)
        for g in det.gpus
        if (gen := g.reading.pcie_gen_max) is not None and 1 <= gen <= 6 and g.reading.pcie_width
    }
    results: list[Any] = []
    skipped: list[str] = []
    started = time.perf_counter()
    for name in todo:
        jobs: list[tuple[str, str]] = (
            [("matmul " + d, d) for d in (dtypes or bench.MATMUL_DTYPES)] if name == "matmul" else [(name, "")]
        )
        for label, dtype in jobs:
            with progress(label) as advance:
                try:
                    with Sampler(index=gpu0.reading.index if gpu0 else 0) as sampler:
                        if name == "matmul":
                            new = [
                                bench.bench_matmul(
                                    dtype,
                                    quick,
                                    acc.peak(dtype) if acc else None,
                                    shapes=shapes,
                                    model=model_id,
                                    progress=advance,
                                )
                            ]
                        elif name == "memory":
                            new = [bench.bench_memory(quick, acc.memory_bandwidth_bytes_per_s if acc else None)]
                        elif name == "pcie":
                            new = bench.bench_pcie(quick, links)
                        elif name == "allreduce":
                            new = bench.bench_collectives(
                                quick,
                                payload_bytes,
                                link_bytes_per_s=acc.scale_up_bytes_per_s if acc else None,
                                progress=advance,
                            )
                        else:
                            new = bench.bench_disk(disk_path, writers, file_bytes, quick, progress=advance)
                    clocks = sampler.summary()
                    results += [replace(r, detail={**r.detail, "clocks": clocks}) if clocks else r for r in new]
                except bench.BenchUnavailable as e:
                    if which != "all" and not (name == "matmul" and not dtypes):
                        raise
                    skipped.append(f"{label}: {e}")
                except (RuntimeError, AssertionError) as e:  # CUDA failures: no kernel image, out of memory, busy GPU
                    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                    if which != "all":
                        raise GpuplanError(f"{label} benchmark failed: {first}") from None
                    skipped.append(f"{label}: failed: {first}")
    if int(os.environ.get("RANK", 0)) != 0:
        return None  # under torchrun: rank 0 reports and saves
    if not results:
        raise GpuplanError("no benchmark could run here: " + "; ".join(skipped))
    versions = {"gpuplan": __version__}
    try:
        import torch as _t

        versions.update({"torch": _t.__version__, "cuda": _t.version.cuda})
    except ImportError:
        pass
    gpu_info = None
    if gpu0:
        r = gpu0.reading
        gpu_info = {
            "name": r.name,
            "catalog_id": gpu0.catalog_id,
            "pci_device_id": r.pci_device_id,
            "memory_total_bytes": r.memory_total_bytes,
            "uuid": r.uuid,
            "compute_capability": list(r.compute_capability) if r.compute_capability else None,
            "driver": det.driver_version,
            "cuda": det.cuda_version,
            "count": len(det.gpus),
        }
    profile = make_profile([r.to_dict() for r in results], gpu_info, detection_dict(det)["host"], versions)
    profile.update(mode="quick" if quick else "full", skipped=skipped, seconds=time.perf_counter() - started)
    return BenchReport(profile)
