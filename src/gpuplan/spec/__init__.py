"""Frozen value types shared by every layer: accelerators, models, sources."""

from .accelerator import DTYPES, Accelerator, Interconnect, Source
from .model import ModelSpec, ParamsOnlyModel

__all__ = ["DTYPES", "Accelerator", "Interconnect", "Source", "ModelSpec", "ParamsOnlyModel"]
