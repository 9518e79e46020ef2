"""Rent or buy: the yearly cost of owning GPUs, the cost per used GPU-hour, and the utilization above
which owning beats each rental offer.

- Capital is spread over the useful life with interest: the capital recovery factor
  r / (1 - (1 + r)^-n) (the annuity formula of engineering economics) times the purchase price of the
  GPU and its share of the server.
- Energy is paid while busy: TDP x host-power factor (CPUs, NICs, fans) x PUE x $/kWh per used hour.
- Colocation is paid on capacity, busy or not: $ per kW of IT load per month.
- Staff is a yearly amount per GPU.
Owned cost per used hour = fixed per year / (8760 x utilization) + energy per hour, so owning beats a
rental at $p per GPU-hour from utilization u* = fixed / (8760 x (p - energy)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import JobError

HOURS_PER_YEAR = 8760.0


@dataclass(frozen=True)
class Ownership:
    """The inputs of one ownership case, per GPU (each from the data file or the user)."""

    purchase_usd: float
    server_usd: float
    tdp_w: float
    host_power_factor: float
    pue: float
    usd_per_kwh: float
    hosting_usd_per_kw_month: float
    staff_usd_per_year: float
    years: float
    cost_of_capital: float
    utilization: float

    def __post_init__(self) -> None:
        for name, value in self.__dict__.items():
            if not math.isfinite(value) or value < 0:
                raise JobError(f"{name.replace('_', '-')} must be a finite number >= 0, got {value}")
        if self.years <= 0:
            raise JobError("--years must be more than zero")
        if not 0 < self.utilization <= 1:
            raise JobError(f"--utilization must be in (0, 1], got {self.utilization}")
        if self.pue < 1:
            raise JobError(f"--pue must be at least 1 (facility power over IT power), got {self.pue}")


def capital_recovery_factor(rate: float, years: float) -> float:
    """Share of a capital sum to pay each year to repay it with interest over ``years``."""
    return 1 / years if rate == 0 else rate / (1 - (1 + rate) ** -years)


@dataclass(frozen=True)
class OwnershipCost:
    capital_per_year: float
    hosting_per_year: float
    staff_per_year: float
    energy_per_used_hour: float
    utilization: float

    @property
    def fixed_per_year(self) -> float:
        return self.capital_per_year + self.hosting_per_year + self.staff_per_year

    @property
    def per_year(self) -> float:
        return self.fixed_per_year + self.energy_per_used_hour * HOURS_PER_YEAR * self.utilization

    @property
    def per_used_hour(self) -> float:
        return self.per_year / (HOURS_PER_YEAR * self.utilization)

    def break_even_utilization(self, rental_usd_per_gpu_hour: float) -> float | None:
        """Utilization above which owning costs less than renting at this price (None: never)."""
        margin = rental_usd_per_gpu_hour - self.energy_per_used_hour
        if margin <= 0:
            return None
        u = self.fixed_per_year / (HOURS_PER_YEAR * margin)
        return u if u <= 1 else None


def ownership_cost(o: Ownership) -> OwnershipCost:
    it_kw = o.tdp_w / 1000 * o.host_power_factor
    return OwnershipCost(
        capital_per_year=(o.purchase_usd + o.server_usd) * capital_recovery_factor(o.cost_of_capital, o.years),
        hosting_per_year=it_kw * o.hosting_usd_per_kw_month * 12,
        staff_per_year=o.staff_usd_per_year,
        energy_per_used_hour=it_kw * o.pue * o.usd_per_kwh,
        utilization=o.utilization,
    )
