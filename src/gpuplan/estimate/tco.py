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
from ..units import MAX_USD

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
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise JobError(f"{name.replace('_', '-')} must be a finite number >= 0, got {value}")
        if self.years <= 0:
            raise JobError("--years must be more than zero")
        if not 0 < self.utilization <= 1:
            raise JobError(f"--utilization must be in (0, 1], got {self.utilization}")
        if self.pue < 1:
            raise JobError(f"--pue must be at least 1 (facility power over IT power), got {self.pue}")
        for name, (low, high, why) in OWNERSHIP_RANGES.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise JobError(
                    f"{_FLAGS.get(name, name.replace('_', '-'))} must be between {low:g} and {high:g} "
                    f"({why}), got {value:g}"
                )


#: The ranges an ownership case is planned within: (low, high, why). Utilization below 0.1 % (9 hours a
#: year) spreads a year's fixed cost over so few hours that the cost per used hour is meaningless.
OWNERSHIP_RANGES = {
    "purchase_usd": (0.0, MAX_USD, "dollars per GPU"),
    "server_usd": (0.0, MAX_USD, "dollars per GPU"),
    "tdp_w": (1.0, 1e5, "watts"),
    "host_power_factor": (1.0, 10.0, "server power over GPU power"),
    "pue": (1.0, 10.0, "facility power over IT power; 1.1-1.6 in practice"),
    "usd_per_kwh": (0.0, 100.0, "dollars per kWh"),
    "hosting_usd_per_kw_month": (0.0, 1e6, "dollars per kW per month"),
    "staff_usd_per_year": (0.0, MAX_USD, "dollars per GPU per year"),
    "years": (0.01, 100.0, "years of useful life"),
    "cost_of_capital": (0.0, 1.0, "an annual rate: 0.08 is 8 %"),
    "utilization": (0.001, 1.0, "a fraction of the hours; below 0.1 % the cost per used hour is meaningless"),
}
_FLAGS = {
    "purchase_usd": "--purchase-usd-per-gpu",
    "server_usd": "--server-usd-per-gpu",
    "staff_usd_per_year": "--staff-usd-per-gpu-year",
    "years": "--life-years",
    "utilization": "--utilization",
    "cost_of_capital": "--cost-of-capital",
    "pue": "--pue",
    "usd_per_kwh": "--usd-per-kwh",
    "hosting_usd_per_kw_month": "--hosting-usd-per-kw-month",
}


def capital_recovery_factor(rate: float, years: float) -> float:
    """Share of a capital sum to pay each year to repay it with interest over ``years``.

    The annuity formula r / (1 - (1 + r)^-n) of engineering economics (e.g. Newnan, Engineering Economic
    Analysis, ch. 4), written r / -expm1(-n log1p(r)) so that it stays exact for tiny rates; when r x n is
    below 1e-9 its limit series 1/n + r (n + 1) / (2n) is used (at r = 0 exactly 1/n, straight-line)."""
    if not (math.isfinite(rate) and math.isfinite(years)) or rate < 0 or years <= 0:
        raise JobError(f"the capital recovery factor needs a rate >= 0 and years > 0, got {rate!r} and {years!r}")
    if rate * years < 1e-9:
        return 1 / years + rate * (years + 1) / (2 * years)
    return rate / -math.expm1(-years * math.log1p(rate))


@dataclass(frozen=True)
class OwnershipCost:
    """The cost of owning one GPU in US dollars: the fixed parts per year, energy per used hour, utilization."""

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
