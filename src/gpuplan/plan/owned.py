"""Owned hardware as a price: ``gpuplan tco``'s ownership case (``estimate.tco``) turned into a cost per used GPU-hour,
so that ``plan train --pricing owned`` ranks layouts on hardware one buys instead of rents.

The case is built once, here, for both commands: the purchase price of the GPU and its server share from
``data/ownership.toml`` (each row with its source), the facility defaults of the same file (PUE, $/kWh, host power
factor, colocation $/kW-month, useful life, cost of capital; each with its source under ``defaults_sources``) and the
GPU's TDP from the accelerator catalog. ``estimate.tco.ownership_cost`` spreads the capital with the capital recovery
factor, charges colocation on capacity and energy while busy; the price of one used GPU-hour is its
``per_used_hour`` at the utilization given (the share of the owned GPUs' hours that do paid work, as ``tco
--utilization``).

An owned GPU becomes one synthetic offer per server size: the planner treats it as a hardware class (instance size,
no published scale-out network, so the step-time model's default NIC bandwidth applies). Pure: the ownership file
comes in as an argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..estimate.tco import Ownership, OwnershipCost, ownership_cost
from ..spec.accelerator import Accelerator, Source
from ..spec.offer import Offer

#: The pricing kind of the synthetic offers (``plan train --pricing owned``).
OWNED = "owned"
#: How the cost per used GPU-hour is made, for the records.
METHOD = (
    "gpuplan tco's ownership case per GPU: (GPU + server share) x capital recovery factor r/(1-(1+r)^-n) + colocation "
    "$/kW-month x TDP x host factor x 12, per year, over 8760 x utilization used hours, + energy TDP x host factor x "
    "PUE x $/kWh per used hour (estimate/tco.py, data/ownership.toml)"
)


def ownership_case(
    accelerator: Accelerator,
    data: Any,
    *,
    utilization: float,
    purchase_usd_per_gpu: float | None = None,
    server_usd_per_gpu: float | None = None,
    pue: float | None = None,
    usd_per_kwh: float | None = None,
    hosting_usd_per_kw_month: float | None = None,
    staff_usd_per_gpu_year: float = 0.0,
    life_years: float | None = None,
    cost_of_capital: float | None = None,
) -> tuple[Ownership, Any]:
    """The ownership case of one GPU (``None``: the data file's sourced default) and the purchase row used (None
    when the price was given). Raises InputError without a purchase price or a TDP."""
    d = data.defaults
    row = next((p for p in data.purchase if p.gpu == accelerator.id), None)
    if purchase_usd_per_gpu is None and row is None:
        raise InputError(
            "--purchase-usd-per-gpu", f"no purchase price on file for {accelerator.id}; give --purchase-usd-per-gpu"
        )
    if accelerator.tdp_w is None:
        raise InputError("--gpu", f"{accelerator.id} has no published TDP; its power cost cannot be estimated")
    price = purchase_usd_per_gpu if purchase_usd_per_gpu is not None else row.usd_per_gpu  # type: ignore[union-attr]
    if server_usd_per_gpu is not None:
        server_usd = server_usd_per_gpu
    elif row is not None and row.server_usd_per_gpu and purchase_usd_per_gpu is None:
        server_usd = row.server_usd_per_gpu - row.usd_per_gpu  # the server price per GPU includes the GPU
    else:
        server_usd = price * d.server_overhead_fraction
    case = Ownership(
        purchase_usd=price,
        server_usd=max(0.0, server_usd),
        tdp_w=accelerator.tdp_w,
        host_power_factor=d.host_power_factor,
        pue=pue if pue is not None else d.pue,
        usd_per_kwh=usd_per_kwh if usd_per_kwh is not None else d.usd_per_kwh,
        hosting_usd_per_kw_month=hosting_usd_per_kw_month
        if hosting_usd_per_kw_month is not None
        else d.hosting_usd_per_kw_month,
        staff_usd_per_year=staff_usd_per_gpu_year,
        years=life_years if life_years is not None else d.depreciation_years,
        cost_of_capital=cost_of_capital if cost_of_capital is not None else d.cost_of_capital,
        utilization=utilization,
    )
    return case, row


@dataclass(frozen=True)
class OwnedPrice:
    """One GPU's owned cost: the case, its yearly parts and the price of a used GPU-hour, with sources."""

    gpu: str
    case: Ownership
    cost: OwnershipCost
    purchase_row: Any

    @property
    def usd_per_gpu_hour(self) -> float:
        return self.cost.per_used_hour

    def to_dict(self, data: Any) -> dict[str, Any]:
        row = self.purchase_row
        return {
            "usd_per_used_gpu_hour": self.cost.per_used_hour,
            "capital_usd_per_gpu_year": self.cost.capital_per_year,
            "hosting_usd_per_gpu_year": self.cost.hosting_per_year,
            # no sourced default exists for staff (data/ownership.toml): unknown, not zero, unless one was given
            "staff_usd_per_gpu_year": self.cost.staff_per_year if self.case.staff_usd_per_year else None,
            "energy_usd_per_used_gpu_hour": self.cost.energy_per_used_hour,
            "utilization": self.case.utilization,
            "purchase_usd_per_gpu": self.case.purchase_usd,
            "server_overhead_usd_per_gpu": self.case.server_usd,  # the server's share beyond the GPU itself
            "life_years": self.case.years,
            "purchase_source": row.model_dump() if row is not None else {"kind": "given"},
            "sources": {k: v.model_dump() for k, v in data.defaults_sources.items()},
            "method": METHOD,
        }


def owned_prices(gpus: list[Accelerator], data: Any, utilization: float) -> tuple[dict[str, OwnedPrice], list[str]]:
    """gpu id -> its owned price, for the GPUs with a purchase price and a TDP on file; a note for each without."""
    prices: dict[str, OwnedPrice] = {}
    notes: list[str] = []
    for g in gpus:
        try:
            case, row = ownership_case(g, data, utilization=utilization)
        except InputError:
            notes.append(f"{g.id}: no purchase price or TDP on file (data/ownership.toml), not searched as owned")
            continue
        prices[g.id] = OwnedPrice(g.id, case, ownership_cost(case), row)
    return prices, notes


def owned_offers(gpus: list[Accelerator], prices: dict[str, OwnedPrice], node_gpus: int) -> list[Offer]:
    """Synthetic offers of owned GPUs: a single GPU, and a server of ``node_gpus`` where the GPU has a scale-up link
    (the 8-GPU HGX/DGX board the server prices of data/ownership.toml are for)."""
    out: list[Offer] = []
    for g in gpus:
        p = prices.get(g.id)
        if p is None:
            continue
        row = p.purchase_row
        src = row.source if row is not None else None
        source = Source(
            title=f"owned: {src.title}" if src is not None else "owned: purchase price given",
            url=src.url if src is not None else "",
            date=src.date if src is not None else "n.d.",
        )
        sizes = [1] + ([node_gpus] if g.interconnect is not None and node_gpus > 1 else [])
        for n in sizes:
            out.append(
                Offer(
                    id=f"owned:{g.id}:{n}",
                    provider=OWNED,
                    instance=f"owned {n}-GPU server",
                    region="-",
                    gpu=g.id,
                    gpu_count=n,
                    usd_per_hour=p.usd_per_gpu_hour * n,
                    pricing=OWNED,
                    price_date=row.date if row is not None else "n.d.",
                    source=source,
                    origin=OWNED,
                )
            )
    return out
