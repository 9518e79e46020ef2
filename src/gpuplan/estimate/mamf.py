"""The GPU's measured matmul ceiling (MAMF): the fraction of its dense peak the best GEMM shape reaches, as the
catalog holds it. Read by the training step time and the serving model alike; pure, and light to import (the
serving path does not load the training modules for it)."""

from __future__ import annotations

from ..spec.accelerator import Accelerator

#: Fraction of the dense peak assumed for a GPU whose catalog entry has no ``matmul_efficiency`` (MAMF)
#: figure: a round value inside the range Bekman's MAMF table spans (51 % MI300X to 87 % A100 SXM, BF16,
#: stas00/ml-engineering compute/accelerator, 2025-07).
DEFAULT_MATMUL_EFFICIENCY = 0.75


def matmul_efficiency(gpu: Accelerator, dtype: str = "bf16") -> tuple[float, str]:
    """The fraction of the dense ``dtype`` peak this GPU reaches on the best GEMM shape (MAMF), and where it
    comes from: the catalog's figure for ``dtype``, else its bf16 figure (the one the built-in catalog holds),
    else :data:`DEFAULT_MATMUL_EFFICIENCY`, said so in the source."""
    for d in dict.fromkeys((dtype, "bf16")):
        value = gpu.matmul_efficiency.get(d)
        if value is not None:
            src = gpu.source_for(f"matmul_efficiency.{d}")
            stand_in = "" if d == dtype else f" (no {dtype} measurement in the catalog: the {d} one)"
            return value, (
                f"MAMF {value:.1%} of the dense {d} peak on the best GEMM shape{stand_in}: {src.title} ({src.date})"
            )
    return DEFAULT_MATMUL_EFFICIENCY, (
        f"no MAMF measurement for this GPU ({gpu.id}) in the catalog: default "
        f"{DEFAULT_MATMUL_EFFICIENCY * 100:g} % (Bekman's table ranges 51-87 %)"
    )
