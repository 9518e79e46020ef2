"""Pure formulas: they take frozen specs and return frozen breakdowns; no I/O, no printing."""

from .flops import FlopsPerToken, flops_per_token, matmul_params
from .params import ParamBreakdown, count_params

__all__ = ["FlopsPerToken", "flops_per_token", "matmul_params", "ParamBreakdown", "count_params"]
