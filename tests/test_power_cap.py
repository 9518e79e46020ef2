"""Power caps (``--assume power_limit_w``): the vendor's rating of the same GPU at a lower power where the catalog
has one (B200 rated as HGX B100 at 700 W), the cube-root rule elsewhere."""

from __future__ import annotations

import pytest

from gpuplan.catalog import load_accelerators
from gpuplan.estimate.steptime import StepAssumptions, power_clock_factor


@pytest.fixture(scope="module")
def accs():
    return load_accelerators()


def test_b200_rating_interpolated(accs):
    b200 = accs.get("b200")
    assert b200.low_power_rating == pytest.approx((700.0, 1.75 / 2.25))
    low = 1.75 / 2.25
    # between the two ratings: linear in watts
    assert power_clock_factor(b200, StepAssumptions(power_limit_w=750)) == pytest.approx(
        low + (1 - low) * 50 / 300, rel=1e-12
    )
    assert power_clock_factor(b200, StepAssumptions(power_limit_w=700)) == pytest.approx(low, rel=1e-12)
    assert power_clock_factor(b200, StepAssumptions(power_limit_w=1000)) == 1.0
    assert power_clock_factor(b200, StepAssumptions(power_limit_w=1500)) == 1.0  # a cap above the TDP changes nothing
    # below the lower rating: the cube-root rule from it
    assert power_clock_factor(b200, StepAssumptions(power_limit_w=500)) == pytest.approx(
        low * (500 / 700) ** (1 / 3), rel=1e-12
    )
    # monotone in the cap
    caps = [400, 600, 700, 800, 900, 1000]
    rates = [power_clock_factor(b200, StepAssumptions(power_limit_w=c)) for c in caps]
    assert rates == sorted(rates)


def test_no_rating_cube_root(accs):
    h100 = accs.get("h100-sxm-80gb")
    assert h100.low_power_rating is None
    assert power_clock_factor(h100, StepAssumptions(power_limit_w=500)) == pytest.approx((500 / 700) ** (1 / 3))
    assert power_clock_factor(h100, StepAssumptions()) == 1.0
