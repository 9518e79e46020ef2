"""The pydantic models of the catalog files (accelerators, models, offers): what each entry is validated against.

Kept apart from ``schema.py`` (the file readers) so that pydantic, about 50 ms of start-up, is imported
only when a file is really validated: a catalog served from the catalog cache (``cache.py``) never needs
it. ``schema`` forwards these names, so ``from gpuplan.catalog.schema import AcceleratorEntry`` still works.
The formats are documented in docs/catalog-schema.md.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator, model_validator

from ..errors import CatalogError
from ..spec.accelerator import DTYPES
from ..spec.offer import HARDWARE_FIELDS, NIC_KINDS
from .offers import PRICING
from .schema import _DATE, _ID, MAX_BYTES, MAX_COUNT, MAX_RATE, _field_path

_M = TypeVar("_M", bound=BaseModel)
OFFER_SOURCE_KEYS = ("hardware", *HARDWARE_FIELDS)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


Count = Annotated[int, Field(gt=0, le=MAX_COUNT)]
Bytes = Annotated[int, Field(gt=0, le=MAX_BYTES)]
Rate = Annotated[float, Field(gt=0, le=MAX_RATE)]


class SourceEntry(_Strict):
    title: Annotated[str, Field(min_length=1)]
    url: Annotated[str, Field(min_length=1)]
    date: Annotated[str, Field(pattern=_DATE)]
    # where the figure is neither printed by the vendor nor measured: how it was derived (outputs then say
    # "estimated, not measured")
    derivation: Annotated[str, Field(min_length=1)] | None = None


class PowerRatingEntry(_Strict):
    """The same GPU rated at a lower power: its dense tensor peak there as a fraction of the catalog's."""

    power_w: Annotated[float, Field(gt=0, le=1e7)]
    peak_fraction: Annotated[float, Field(gt=0, le=1)]


class InterconnectEntry(_Strict):
    kind: Annotated[str, Field(min_length=1)]
    bandwidth_bytes_per_s: Rate
    links: Count | None = None


#: Figures that no datasheet prints (a measurement, a software default): an entry that gives one names its own
#: source for it (``sources."matmul_efficiency"`` or ``sources."matmul_efficiency.bf16"``), never the default.
OWN_SOURCE_FIELDS = (
    "matmul_efficiency",
    "cublas_workspace_bytes",
    "scale_out_bytes_per_s_per_gpu",
    "fp8_gemm_any_layout",
    "attention_flops_per_s",
    "low_power_rating",
    "tensor_flops_per_clock_per_sm",
    "exp2_per_clock_per_sm",
    "host_link_bytes_per_s",
)


class AcceleratorEntry(_Strict):
    id: Annotated[str, Field(pattern=_ID)]
    name: Annotated[str, Field(min_length=1)]
    vendor: Literal["nvidia", "amd", "intel", "google", "apple", "other"]
    architecture: Annotated[str, Field(min_length=1)]
    form_factor: Annotated[str, Field(min_length=1)]
    year: Annotated[int, Field(ge=1990, le=2100)]
    aliases: list[Annotated[str, Field(min_length=1)]] = []
    memory_bytes: Bytes
    memory_reported_bytes: Bytes | None = None
    memory_type: Annotated[str, Field(min_length=1)]
    memory_bandwidth_bytes_per_s: Rate
    tdp_w: Annotated[float, Field(gt=0, le=1e7)] | None = None  # Google publishes none for recent TPUs
    pcie_gen: Annotated[int, Field(ge=1, le=6)] | None = None  # the generations spec.accelerator knows
    pci_device_ids: list[Annotated[str, Field(pattern=r"^0x[0-9a-fA-F]{4}$")]] = []
    peak_flops_per_s: dict[Literal[DTYPES], Rate]  # type: ignore[valid-type]
    # MAMF: the fraction of each dtype's dense peak a matmul reaches on the best GEMM shape, in (0, 1]
    matmul_efficiency: dict[Literal[DTYPES], float] = {}  # type: ignore[valid-type]
    interconnect: InterconnectEntry | None = None
    scale_out_bytes_per_s_per_gpu: Rate | None = None  # inter-node network per GPU, per direction
    cublas_workspace_bytes: Bytes | None = None  # PyTorch's cuBLAS workspace per handle (CUBLAS_WORKSPACE_CONFIG unset)
    fp8_gemm_any_layout: StrictBool | None = None  # False: the fp8 GEMMs take only the TN layout
    attention_flops_per_s: Rate | None = None  # measured flash-attention forward + backward rate, a cap
    low_power_rating: PowerRatingEntry | None = None  # the same GPU's rated peak at a lower power (power caps)
    # dense 16-bit tensor FLOPs and special-function exponentials (MUFU.EX2) per SM and clock (attention's softmax)
    tensor_flops_per_clock_per_sm: Annotated[float, Field(gt=0, le=1e6)] | None = None
    exp2_per_clock_per_sm: Annotated[float, Field(gt=0, le=1e4)] | None = None
    host_link_bytes_per_s: Rate | None = None  # GPU <-> host CPU per GPU and direction where not PCIe (NVLink-C2C)
    # the dense fp16 tensor rate with FP16 accumulate over peak_flops_per_s.fp16 (FP32 accumulate): 2 on GeForce
    fp16_accumulate_factor: Annotated[float, Field(ge=1, le=8)] | None = None
    sm_count: Count | None = None  # streaming multiprocessors (NVIDIA) / compute units (AMD)
    scale_up_domain_gpus: Count | None = None  # devices on one scale-up (NVLink, ICI, ...) domain
    unified_memory: StrictBool | None = None  # True: memory_bytes is the host's RAM, shared with the OS
    sources: dict[str, SourceEntry]
    notes: str | None = None

    @field_validator("peak_flops_per_s")
    @classmethod
    def _some_peak(cls, v: dict[str, float]) -> dict[str, float]:
        if not v:
            raise ValueError("give at least one dtype's dense peak, e.g. bf16 = 989.5e12")
        return v

    @field_validator("matmul_efficiency")
    @classmethod
    def _fractions(cls, v: dict[str, float]) -> dict[str, float]:
        for dtype, x in v.items():
            if not 0 < x <= 1:
                raise ValueError(
                    f"{dtype} = {x!r} is not a fraction: give the share of the dense {dtype} peak a "
                    "matmul reaches on the best GEMM shape, more than 0 and at most 1 (e.g. 0.803 "
                    "for 794.5 of 989 TFLOP/s)"
                )
        return v

    @model_validator(mode="after")
    def _sources(self) -> AcceleratorEntry:
        if "default" not in self.sources:
            raise ValueError("sources needs a 'default' entry (title, url, date)")
        if self.unified_memory and self.memory_reported_bytes is None:
            raise ValueError(
                "unified_memory = true needs memory_reported_bytes: what the GPU may use of the shared memory "
                "by default (e.g. Metal's recommendedMaxWorkingSetSize), with its own source"
            )
        if self.scale_up_domain_gpus is not None and self.scale_up_domain_gpus > 1 and self.interconnect is None:
            raise ValueError(
                f"scale_up_domain_gpus = {self.scale_up_domain_gpus} but no interconnect: give the scale-up "
                "link (kind, bandwidth_bytes_per_s) its domain belongs to"
            )
        no_peak = [d for d in self.matmul_efficiency if d not in self.peak_flops_per_s]
        if no_peak:
            raise ValueError(
                f"matmul_efficiency gives {', '.join(no_peak)} but peak_flops_per_s has no "
                f"{' or '.join(no_peak)} peak to take a fraction of"
            )
        if self.low_power_rating is not None:
            # a lower-power rating is read against the TDP (steptime.power_clock_factor): one at or above it says
            # nothing about a cap, and without a TDP there is nothing to cap
            if self.tdp_w is None:
                raise ValueError(
                    "low_power_rating is the same GPU rated below its TDP, but the entry has no tdp_w: give tdp_w "
                    "(the power its peak_flops_per_s is rated at) or drop low_power_rating"
                )
            if self.low_power_rating.power_w >= self.tdp_w:
                raise ValueError(
                    f"low_power_rating.power_w = {self.low_power_rating.power_w:g} W is not below tdp_w = "
                    f"{self.tdp_w:g} W: give the lower power the vendor rates the GPU at (e.g. 700 for a 1000 W "
                    "B200 rated as HGX B100)"
                )
        if self.fp16_accumulate_factor is not None:
            if "fp16" not in self.peak_flops_per_s:
                raise ValueError(
                    "fp16_accumulate_factor is a multiple of the fp16 peak, but peak_flops_per_s has no fp16 peak"
                )
            if "fp16_accumulate_factor" not in self.sources:
                raise ValueError(
                    "fp16_accumulate_factor needs its own source: the table that prints the fp16 tensor rates with "
                    'FP16 and with FP32 accumulate, [accelerator.sources."fp16_accumulate_factor"] with title, url '
                    "and date"
                )
        for name in OWN_SOURCE_FIELDS:
            given = getattr(self, name)
            if given is None or given == {}:
                continue
            keys = [name, *(f"{name}.{d}" for d in given)] if isinstance(given, dict) else [name]
            if not any(k in self.sources for k in keys):
                raise ValueError(
                    f"{name} is a measurement or a software default, not a datasheet figure: give "
                    f'its own source, [accelerator.sources."{name}"] with title, url and date'
                )
        return self


class AcceleratorFile(_Strict):
    schema_version: Literal[1] = 1
    accelerator: list[dict[str, Any]]


class ModelEntry(_Strict):
    id: Annotated[str, Field(pattern=_ID)]
    name: Annotated[str, Field(min_length=1)]
    family: str = ""
    aliases: list[Annotated[str, Field(min_length=1)]] = []
    hf_id: str | None = None
    source: SourceEntry | None = None
    config_source: SourceEntry | None = None  # where `config` was copied from, when not `source`
    published_params: Bytes | None = None
    published_params_source: str | None = None
    published_params_rounded: bool = False
    published_active_params: Bytes | None = None
    published_active_params_rounded: bool = False
    published_active_params_source: str | None = None
    # parameters counted in published_params that the causal-LM model does not hold (a vision tower)
    published_params_excluded: dict[str, Annotated[int, Field(ge=0, le=MAX_BYTES)]] | None = None
    # the Hub's safetensors total when it differs from the model (stored tied copies, MTP modules)
    hub_safetensors_params: Bytes | None = None
    transformers_params: Bytes | None = None
    notes: str | list[str] | None = None
    config: dict[str, Any]


class ModelFile(_Strict):
    schema_version: Literal[1] = 1
    models: list[dict[str, Any]]


class OfferEntry(_Strict):
    id: Annotated[str, Field(pattern=_ID)]
    provider: Annotated[str, Field(min_length=1)]
    instance: Annotated[str, Field(min_length=1)]
    region: Annotated[str, Field(min_length=1)]
    gpu: Annotated[str, Field(min_length=1)]
    gpu_count: Count
    vcpus: Count | None = None
    host_memory_bytes: Bytes | None = None
    scale_up: str | None = None  # the NVLink / NVSwitch (or PCIe) link between the node's GPUs, in words
    scale_out_bytes_per_s: Rate | None = None  # the node's total scale-out bandwidth, all NICs
    local_nvme_bytes: Annotated[int, Field(ge=0, le=MAX_BYTES)] | None = None  # 0: no local instance store
    local_nvme_read_bytes_per_s: Rate | None = None
    local_nvme_write_bytes_per_s: Rate | None = None
    nic_kind: Literal[NIC_KINDS] | None = None  # type: ignore[valid-type]
    # the instance's GPU-to-GPU link where it differs from the accelerator's typical one: per GPU and direction,
    # and the GPUs that share it (1: none, PCIe only)
    scale_up_bytes_per_s_per_gpu: Rate | None = None
    scale_up_domain_gpus: Count | None = None
    usd_per_hour: Annotated[float, Field(gt=0, le=1e9)]
    pricing: Literal[PRICING]  # type: ignore[valid-type]
    price_date: Annotated[str, Field(pattern=_DATE)]
    source: SourceEntry
    # the source of a hardware figure, when it is not the price's: a field name, or "hardware" for all of them
    sources: dict[Literal[OFFER_SOURCE_KEYS], SourceEntry] = {}  # type: ignore[valid-type]
    notes: str | None = None

    @model_validator(mode="after")
    def _sourced_figures(self) -> OfferEntry:
        unused = [k for k in self.sources if k != "hardware" and getattr(self, k) is None]
        if unused:
            raise ValueError(f"sources names {', '.join(unused)}, which the offer does not give")
        if self.local_nvme_bytes == 0 and (self.local_nvme_read_bytes_per_s or self.local_nvme_write_bytes_per_s):
            raise ValueError("local_nvme_bytes = 0 (no local NVMe) but a local NVMe bandwidth is given")
        if self.scale_up_domain_gpus == 1 and self.scale_up_bytes_per_s_per_gpu is not None:
            raise ValueError(
                "scale_up_domain_gpus = 1 (no GPU-to-GPU link, PCIe only) but scale_up_bytes_per_s_per_gpu is given; "
                "leave it out, or give the domain the link spans"
            )
        return self


class OfferFile(_Strict):
    schema_version: Literal[1] = 1
    offer: list[dict[Any, Any]]


def explain(err: ValidationError, where: str) -> CatalogError:
    """One line for the first problem pydantic found (and how many more there are)."""
    errors = err.errors()
    first = errors[0]
    loc = _field_path(first["loc"])
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown field (check the spelling against docs/catalog-schema.md)"
    elif first["type"] == "missing":
        msg = "required field is missing"
    elif first["type"] == "value_error":
        msg = msg.removeprefix("Value error, ")  # pydantic's prefix before the validator's own sentence
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    field = f" field '{loc}':" if loc else ""
    return CatalogError(f"{where}:{field} {msg}{more}")


def validate(model: type[_M], data: Any, where: str) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise explain(e, where) from None
