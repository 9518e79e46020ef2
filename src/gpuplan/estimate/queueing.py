"""Queueing under load: closed-form waits of a replica fed by Poisson arrivals, evaluated on floats or numpy arrays.

A replica is a G/G/c queue: ``c`` slots (the sequences its engine runs at once), each holding a request for
its service time. The mean wait for a slot is the Allen-Cunneen approximation (A. O. Allen, "Probability,
Statistics, and Queueing Theory", 2nd ed., 1990, section 6.4), written with Sakasegawa's closed form for
the M/M/c queue length (H. Sakasegawa, "An approximation formula L_q = alpha rho^beta / (1 - rho)", Annals
of the Institute of Statistical Mathematics 29 (1977) 67-75), as Hopp & Spearman give it ("Factory
Physics", 3rd ed., 2008, eq. 8.10):

    Wq = (ca^2 + cs^2) / 2 x rho^(sqrt(2 (c + 1)) - 1) / (c (1 - rho)) x S

with ``ca^2`` and ``cs^2`` the squared coefficients of variation of the inter-arrival and service times
(``ca^2`` = 1 for Poisson arrivals), ``rho`` the utilization and ``S`` the mean service time of one slot.
For c = 1 it is Kingman's formula for G/G/1 (J. F. C. Kingman, "The single server queue in heavy
traffic", Proc. Cambridge Phil. Soc. 57 (1961) 902-904), exact for M/G/1 (Pollaczek-Khinchine). The chance
of waiting at all is Sakasegawa's rho^(sqrt(2 (c + 1)) - 1) (the M/M/c Erlang C it approximates); the wait
of those who wait is taken as exponential (exact for M/M/c), which gives the percentiles.

A closed loop (a benchmark client with N requests always in flight, no think time) is the other regime:
with N above the slots, every slot is busy and Little's law (J. D. C. Little, Operations Research 9 (1961)
383-387) gives the cycle N / X with X = c / S, so each request waits N / X - S = S (N / c - 1) (the
asymptotic bound of a closed network, Lazowska et al., "Quantitative System Performance", 1984, ch. 5).

Every function is arithmetic on its arguments (plus log/sqrt/where, taken from numpy when an argument is an
array), so a search can evaluate a grid of rates at once.
"""

from __future__ import annotations

import math
from typing import Any

#: z-scores of the standard normal at the reported percentiles (q90, q99).
Z_SCORES = {"q90": 1.2815515655446004, "q99": 2.3263478740408408}


def _is_array(*xs: Any) -> bool:
    return any(hasattr(x, "shape") for x in xs)


def _where(cond: Any, a: Any, b: Any) -> Any:
    if _is_array(cond, a, b):
        import numpy as np

        return np.where(cond, a, b)
    return a if cond else b


def _log(x: Any) -> Any:
    if _is_array(x):
        import numpy as np

        return np.log(x)
    return math.log(x)


def _sqrt(x: Any) -> Any:
    return x**0.5


def _pos(x: Any) -> Any:
    """max(0, x), arithmetic only."""
    return (x + abs(x)) / 2


def _below_one(rho: Any) -> Any:
    """rho clipped into [0, 1) so the formulas stay finite where they are not used (the caller selects inf)."""
    r = _pos(rho)
    return _where(r < 1, r, 0.0)


def wait_probability(rho: Any, slots: Any) -> Any:
    """Chance an arriving request finds every slot busy: rho^(sqrt(2 (c + 1)) - 1) (Sakasegawa 1977's M/M/c
    fit; exactly rho for c = 1). 1 at or above saturation."""
    r = _below_one(rho)
    return _where(_pos(rho) < 1, r ** (_sqrt(2 * (slots + 1)) - 1), 1.0)


def mean_wait(rho: Any, slots: Any, service_s: Any, ca2: Any = 1.0, cs2: Any = 1.0) -> Any:
    """Mean wait for a slot, G/G/c Allen-Cunneen with Sakasegawa's M/M/c term (module docstring); inf at or
    above saturation (rho >= 1)."""
    r = _below_one(rho)
    w = (ca2 + cs2) / 2 * wait_probability(r, slots) / (slots * (1 - r)) * service_s
    return _where(_pos(rho) < 1, w, math.inf)


def wait_quantile(q: float, rho: Any, slots: Any, service_s: Any, ca2: Any = 1.0, cs2: Any = 1.0) -> Any:
    """The ``q`` quantile of the wait: P(W > t) = P(wait) exp(-t P(wait) / Wq) (the waits of those who wait are
    exponential with mean Wq / P(wait), exact for M/M/c), so t_q = Wq / P(wait) x ln(P(wait) / (1 - q)) where
    P(wait) > 1 - q, else 0 (at least a share q of the requests start at once)."""
    pw = wait_probability(rho, slots)
    w = mean_wait(rho, slots, service_s, ca2, cs2)
    safe_pw = _where(pw > 0, pw, 1.0)
    finite = _where(w < math.inf, w, 0.0)
    t = finite / safe_pw * _log(_where(pw > 1 - q, safe_pw / (1 - q), 1.0))
    return _where(_pos(rho) < 1, _pos(t), math.inf)


def poisson_quantile(mean: Any, q: str) -> Any:
    """Quantile of a Poisson count (the requests in service of an M/G/infinity system are Poisson with mean
    lambda x S whatever the service distribution: Takacs 1962, "Introduction to the Theory of Queues", ch. 3),
    by the normal approximation mean + z sqrt(mean)."""
    return mean + Z_SCORES[q] * _sqrt(_pos(mean))


def closed_loop_wait(users: Any, slots: Any, service_s: Any) -> Any:
    """Wait of each request in a closed loop of ``users`` requests always in flight over ``slots`` slots of
    mean service ``service_s``: S (N / c - 1) above the slots (Little's law on the saturated cycle), 0 at or
    below them (module docstring)."""
    return _pos(users / slots - 1) * service_s
