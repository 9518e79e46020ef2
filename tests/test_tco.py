"""Rent vs buy: the formulas by hand, the break-even point, and the CLI."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from gpuplan.errors import JobError
from gpuplan.estimate.tco import HOURS_PER_YEAR, Ownership, capital_recovery_factor, ownership_cost
from test_cli import one_line_error

CASE = dict(
    purchase_usd=27_500,
    server_usd=13_717,
    tdp_w=700,
    host_power_factor=1.82,
    pue=1.58,
    usd_per_kwh=0.13,
    hosting_usd_per_kw_month=184.06,
    staff_usd_per_year=0,
    years=5,
    cost_of_capital=0.061,
    utilization=0.7,
)


def test_capital_recovery_factor():
    assert capital_recovery_factor(0.0, 5) == pytest.approx(0.2)
    assert capital_recovery_factor(0.061, 5) == pytest.approx(0.061 / (1 - 1.061**-5))
    assert capital_recovery_factor(0.10, 10) == pytest.approx(0.16275, abs=1e-5)  # textbook annuity table value


def test_owned_cost_by_hand():
    c = ownership_cost(Ownership(**CASE))
    kw = 0.7 * 1.82
    assert c.capital_per_year == pytest.approx(41_217 * capital_recovery_factor(0.061, 5))
    assert c.hosting_per_year == pytest.approx(kw * 184.06 * 12)
    assert c.energy_per_used_hour == pytest.approx(kw * 1.58 * 0.13)
    assert c.per_used_hour == pytest.approx(
        (c.fixed_per_year + c.energy_per_used_hour * HOURS_PER_YEAR * 0.7) / (HOURS_PER_YEAR * 0.7)
    )


@given(st.floats(0.5, 50), st.floats(0.05, 1.0))
def test_break_even_is_where_owning_equals_renting(price, utilization):
    c = ownership_cost(Ownership(**{**CASE, "utilization": utilization}))
    u = c.break_even_utilization(price)
    if u is None:  # even fully used, owning costs more per hour than this rental
        assert ownership_cost(Ownership(**{**CASE, "utilization": 1.0})).per_used_hour >= price - 1e-9
    else:
        at = ownership_cost(Ownership(**{**CASE, "utilization": u}))
        assert at.per_used_hour == pytest.approx(price, rel=1e-9)


@pytest.mark.parametrize(
    "bad,fragment",
    [
        (dict(utilization=0), "--utilization"),
        (dict(utilization=1.5), "--utilization"),
        (dict(pue=0.9), "--pue"),
        (dict(years=0), "--years"),
        (dict(usd_per_kwh=-1), "usd-per-kwh"),
    ],
)
def test_bad_ownership_inputs(bad, fragment):
    with pytest.raises(JobError, match=fragment):
        Ownership(**{**CASE, **bad})


def test_tco_cli(run):
    code, out, err = run("tco", "--gpu", "h100", "--gpus", "64", "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["kind"] == "tco" and rec["rentals"]
    aws = next(r for r in rec["rentals"] if r["offer"] == "aws-p5.48xlarge-us-east-1-ondemand")
    own = rec["owned"]
    fixed = own["capital_usd_per_gpu_year"] + own["hosting_usd_per_gpu_year"] + own["staff_usd_per_gpu_year"]
    assert aws["break_even_utilization"] == pytest.approx(
        fixed / (HOURS_PER_YEAR * (aws["usd_per_gpu_hour"] - own["energy_usd_per_used_gpu_hour"]))
    )
    assert {"pue", "usd_per_kwh", "cost_of_capital"} <= set(rec["sources"])
    cheap = json.loads(run("tco", "--gpu", "h100", "--purchase-usd-per-gpu", "20000", "--json")[1])
    assert cheap["owned"]["usd_per_used_gpu_hour"] < own["usd_per_used_gpu_hour"]
    code, out, _ = run("tco", "--gpu", "h100")
    assert code == 0 and "break-even" in out


@pytest.mark.parametrize(
    "args,fragment",
    [
        (("--gpu", "a10"), "no purchase price on file for a10"),
        (("--gpu", "tpu-v5p", "--purchase-usd-per-gpu", "10000"), "no published TDP"),
        (("--gpu", "h100", "--utilization", "2"), "--utilization"),
        (("--gpu", "h100", "--gpus", "0"), "--gpus"),
        (("--gpu", "h100", "--purchase-usd-per-gpu", "cheap"), "--purchase-usd-per-gpu"),
        (("--gpu", "nope"), "unknown accelerator"),
    ],
)
def test_tco_bad_input(run, args, fragment):
    assert fragment in one_line_error(*run("tco", *args))


def test_tco_money_and_period(run):
    rec = json.loads(run("tco", "--gpu", "h100", "--purchase-usd-per-gpu", "$30k", "--years", "1", "--json")[1])
    assert rec["inputs"]["purchase_usd"] == 30000 and rec["period_years"] == 1 and rec["inputs"]["years"] == 5
    longer = json.loads(run("tco", "--gpu", "h100", "--purchase-usd-per-gpu", "$30k", "--json")[1])
    assert rec["owned"]["usd_per_used_gpu_hour"] == longer["owned"]["usd_per_used_gpu_hour"]  # same life, same rate
    assert rec["owned"]["total_usd"] == pytest.approx(longer["owned"]["total_usd"] / 5)
