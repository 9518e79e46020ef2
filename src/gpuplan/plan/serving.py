"""Rank serving options: every accelerator x weight format, on the smallest tensor-parallel group that fits.

Pure: it takes the catalog's values and returns ranked rows; the CLI prints them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from ..errors import GpuplanError
from ..estimate.inference import InferenceAssumptions, ServingReport, serving_plan
from ..spec.accelerator import Accelerator
from ..spec.model import ModelSpec
from ..spec.serving import ServingJob, ServingLayout

RANK_FORMATS = ("bf16", "fp8", "int8", "int4-awq")
TP_CHOICES = (1, 2, 4, 8)


@dataclass(frozen=True)
class ServingOption:
    gpu: Accelerator
    weights: str
    tp: int
    report: ServingReport
    usd_per_gpu_hour: float | None = None
    offer_id: str | None = None

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.report.tokens_per_s / self.tp

    @property
    def usd_per_million_output_tokens_all_in(self) -> float | None:
        """GPU cost of a million output tokens, all in: the whole replica's time, prefill included
        (``serve --offer`` splits it between input and output tokens instead)."""
        if self.usd_per_gpu_hour is None:
            return None
        return self.usd_per_gpu_hour * self.tp / 3600 / self.report.tokens_per_s * 1e6


def rank_serving(
    model: ModelSpec,
    gpus: Iterable[Accelerator],
    job: ServingJob,
    formats: Iterable[str] = RANK_FORMATS,
    assumptions: InferenceAssumptions | None = None,
    prices: dict[str, tuple[float, str]] | None = None,
) -> tuple[list[ServingOption], list[tuple[str, str, str]]]:
    """(options that fit and meet the targets; (gpu, format, why not) for the rest).

    Ordered by $ per million output tokens where ``prices`` (gpu id -> ($/GPU-hour, offer id)) has the
    GPU, those without a price after, each group by tokens/s per GPU.

    Each option uses the smallest tp in 1, 2, 4, 8 (dividing the model's heads, within the device's
    scale-up link: tp > 1 needs one) at which the weights and one sequence fit.
    """
    options: list[ServingOption] = []
    skipped: list[tuple[str, str, str]] = []
    for gpu in gpus:
        for fmt in formats:
            if fmt == "fp8" and not gpu.supports("fp8"):
                skipped.append((gpu.id, fmt, "no fp8"))
                continue
            found = None
            why = "does not fit on 8"
            for tp in TP_CHOICES:
                if model.attention_heads % tp or (tp > 1 and gpu.interconnect is None):
                    continue
                try:
                    r = serving_plan(model, gpu, ServingLayout(tp=tp), replace(job, weights=fmt), assumptions)
                except GpuplanError as e:
                    why = str(e)
                    break
                if r.fits and not r.reasons and r.max_concurrent_sequences >= 1:
                    found = ServingOption(gpu, fmt, tp, r)
                    break
                why = r.reasons[0] if r.reasons else "no room for one sequence"
            if found:
                price = (prices or {}).get(gpu.id)
                if price:
                    found = ServingOption(gpu, fmt, found.tp, found.report, price[0], price[1])
                options.append(found)
            else:
                skipped.append((gpu.id, fmt, why))
    options.sort(
        key=lambda o: (
            o.usd_per_million_output_tokens_all_in is None,
            o.usd_per_million_output_tokens_all_in or 0.0,
            -o.tokens_per_s_per_gpu,
        )
    )
    return options, skipped


def cheapest_on_demand(offers) -> dict[str, tuple[float, str]]:
    """gpu id -> (lowest on-demand $ per GPU-hour, its offer id)."""
    out: dict[str, tuple[float, str]] = {}
    for o in offers:
        if o.pricing == "on-demand" and (o.gpu not in out or o.usd_per_gpu_hour < out[o.gpu][0]):
            out[o.gpu] = (o.usd_per_gpu_hour, o.id)
    return out
