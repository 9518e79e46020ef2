"""Typed reports: what one gpuplan call answers, as objects for notebooks and as the ``--json`` record.

Every report keeps the itemized parts as attributes (``report.memory.parts``, ``report.plan.time.seconds``,
``report.machine.figures``) and ``to_dict()`` gives exactly the record the CLI prints under ``--json`` (built
by :mod:`gpuplan.plan.records`). ``exit_code`` is the CLI's: 0, or 3 when the plan does not fit (a ranking:
when nothing fits). Volatile things (the catalog warnings met while loading) stay outside the record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple, dataclass_transform

from . import records

EXIT_OK = 0
EXIT_DOES_NOT_FIT = 3


@dataclass_transform(frozen_default=True, kw_only_default=False)
class Report:
    """Base of every report: ``to_dict()``, ``fits`` and ``exit_code``; ``warnings`` are the catalog
    warnings met while answering (never part of the record, nor of equality).

    A report is a frozen record: the fields are the annotated names of the class (defaults as class
    attributes), set once by the generated ``__init__``. This base builds that ``__init__`` from the
    annotations instead of ``@dataclass``, whose code generation cost ~10 ms of every command's start-up for
    the dozen report classes (Python 3.11)."""

    kind: ClassVar[str] = ""
    _fields: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names: list[str] = list(cls._fields)
        # this class's own annotations only (the 3.11 way; inspect.get_annotations would import inspect)
        for name, note in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
            if not str(note).startswith("ClassVar") and name not in names:
                names.append(name)
        cls._fields = tuple(names)
        cls._defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__} | {
            n: v for n, v in cls._defaults.items() if n not in cls.__dict__
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(self._fields):
            raise TypeError(f"{type(self).__name__} takes {len(self._fields)} fields, got {len(args)}")
        values = dict(zip(self._fields, args, strict=False))
        for name, value in kwargs.items():
            if name not in self._fields or name in values:
                raise TypeError(f"{type(self).__name__}: unexpected or repeated field {name!r}")
            values[name] = value
        for name in self._fields:
            if name not in values:
                if name not in self._defaults:
                    raise TypeError(f"{type(self).__name__}: missing field {name!r}")
                values[name] = self._defaults[name]
            object.__setattr__(self, name, values[name])

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot delete {name!r}")

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields if n != "warnings")
        return f"{type(self).__name__}({shown})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._fields if n != "warnings")

    __hash__ = None  # type: ignore[assignment]  # reports hold dicts and lists: compared, never hashed

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def fits(self) -> bool:
        return True

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.fits else EXIT_DOES_NOT_FIT


# ----------------------------------------------------------------------------------------------- catalogs


class Listing(NamedTuple):
    """How a listing report's record is made, for the CLI's writer of long listings: the record lists
    ``[items()(entry) for entry in getattr(report, key)]`` under ``key``, for entries of the ``Catalogs``
    method ``catalog`` (their registry), and every other part of the record is what the report with no
    entries gives."""

    key: str
    items: Callable[[], Callable[[Any], dict[str, Any]]]
    catalog: str


class GpusReport(Report):
    """``gpus list`` (or ``gpus compare`` with ``compare=True``): the accelerators, in order."""

    accelerators: tuple[Any, ...]
    compare: bool = False
    warnings: tuple[str, ...] = ()

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "gpus.compare" if self.compare else "gpus.list"

    def to_dict(self) -> dict[str, Any]:
        if self.compare:
            return records.accelerator_compare(self.accelerators)
        return records.accelerator_list(self.accelerators)

    def listing(self) -> Listing | None:
        return None if self.compare else Listing("accelerators", records.accelerator_items, "accelerators")


class GpuReport(Report):
    """``gpus show``: one accelerator with the source and date of each figure."""

    kind: ClassVar[str] = "gpus.show"
    accelerator: Any
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return records.accelerator_show(self.accelerator)


class OffersReport(Report):
    """``offers list``: the offers, in order."""

    kind: ClassVar[str] = "offers.list"
    offers: tuple[Any, ...]
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return records.offer_list(self.offers)

    def listing(self) -> Listing:
        return Listing("offers", records.offer_items, "offers")


class ModelsReport(Report):
    """``model list``: the models, in catalog order."""

    kind: ClassVar[str] = "model.list"
    models: tuple[Any, ...]
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return records.model_list(self.models)

    def listing(self) -> Listing:
        return Listing("models", records.model_items, "models")


class ModelReport(Report):
    """``model show``: parameter count, breakdown, architecture and FLOPs per token of one model."""

    kind: ClassVar[str] = "model.show"
    model: Any
    seq_len: int | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return records.model_show(self.model, self.seq_len)


# ------------------------------------------------------------------------------------------------- train


class TrainReport(Report):
    """``train``: memory of the most loaded GPU (``memory``, a MemoryReport), and with tokens the compute,
    time and cost (``plan``, a TrainingPlan), the whole machine (``machine``), the calibration applied and,
    when it does not fit, the smallest change that makes it fit (``fit_advice``)."""

    kind: ClassVar[str] = "train"
    model: Any
    gpu: Any
    layout: Any
    job: Any
    memory: Any
    rule: Any
    machine: Any
    plan: Any = None
    step_assumptions: Any = None
    calibration: Any = None
    fit_advice: Any = None
    warnings: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return bool(self.memory.fits)

    def to_dict(self) -> dict[str, Any]:
        record = records.training_record(self.model, self.gpu, self.layout, self.job, self.memory, self.rule)
        if self.plan is not None:
            from .bands import training_band

            record = records.with_training_plan(record, self.plan, self.step_assumptions, self.gpu)
            band = training_band(self.gpu, self.job, self.plan, self.model)
            record = records.with_training_bands(
                record, band, mfu_given=not str(self.plan.mfu_source).startswith("predicted")
            )
            record = records.with_calibration(record, self.calibration)
        record = records.with_machine(record, self.machine)
        if not self.fits:
            record["fit_advice"] = self.fit_advice.to_dict() if self.fit_advice else None
        return record


class TrainRankReport(Report):
    """``train --rank``: every offer that can run the job (``ranked``, RankedOffer rows, cheapest first)
    and those that cannot, with the reason; the Pareto front of time and cost is marked."""

    kind: ClassVar[str] = "train.rank"
    model: Any
    layout: Any
    job: Any
    tokens: float
    epochs: float
    ranked: tuple[Any, ...]
    warnings: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return any(r.fits for r in self.ranked)

    def to_dict(self) -> dict[str, Any]:
        return records.offer_ranking(self.model, self.layout, self.job, self.tokens, self.epochs, self.ranked)


# ------------------------------------------------------------------------------------------------- serve


class ServeReport(Report):
    """``serve``: memory per GPU, latency, throughput (``serving``, a ServingReport), the fleet for a load,
    the cost per million tokens, the whole machine and, when it does not fit, the fit advice."""

    kind: ClassVar[str] = "serve"
    model: Any
    gpu: Any
    layout: Any
    job: Any
    serving: Any
    fleet: Any
    rule: Any
    machine: Any
    cost: dict[str, Any] | None = None
    qps: float | None = None
    calibration: Any = None
    fit_advice: Any = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        """Fits memory and meets every latency target (``serving.reasons`` says what failed)."""
        return not self.serving.reasons

    def to_dict(self) -> dict[str, Any]:
        record = records.serving_record(
            self.model, self.gpu, self.layout, self.job, self.serving, self.fleet, self.cost, self.rule, self.qps
        )
        record["notes"] = list(record["notes"]) + list(self.notes)
        from .bands import serving_bands

        record = records.with_serving_bands(record, serving_bands(self.gpu, self.job, self.serving, self.model))
        record = records.with_calibration(record, self.calibration)
        record = records.with_machine(record, self.machine)
        if not self.serving.fits:
            record["fit_advice"] = self.fit_advice.to_dict() if self.fit_advice else None
        return record


class ServeRankReport(Report):
    """``serve --rank``: each GPU's best option of the ``plan serve`` search (``search.best_per_gpu``, cheapest $
    per million output tokens first) and, for the GPUs without one, the pruned counts by reason."""

    kind: ClassVar[str] = "serve.rank"
    model: Any
    job: Any
    search: Any
    warnings: tuple[str, ...] = ()

    @property
    def options(self) -> tuple[Any, ...]:
        return tuple(self.search.best_per_gpu)

    @property
    def fits(self) -> bool:
        return bool(self.search.best_per_gpu)

    def to_dict(self) -> dict[str, Any]:
        return records.serving_rank(self.model, self.job, self.search)


# --------------------------------------------------------------------------------------------------- tco


class TcoReport(Report):
    """``tco``: owning ``gpus`` GPUs (``case``, ``cost``) against every rental ``offers`` over the period."""

    kind: ClassVar[str] = "tco"
    gpu: Any
    gpus: int
    case: Any
    cost: Any
    offers: tuple[Any, ...]
    purchase_row: Any
    data: Any
    period_years: float
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return records.tco_record(
            self.gpu, self.gpus, self.case, self.cost, self.offers, self.purchase_row, self.data, self.period_years
        )


# -------------------------------------------------------------------------------------------------- plan


class PlanTrainReport(Report):
    """``plan train``: the searched grid, the pruned counts by reason and the top options (``search``, a
    ``plan.search.TrainSearch``); exit code 3 when no candidate meets the constraints."""

    kind: ClassVar[str] = "plan.train"
    model: Any
    tokens: float
    objective: str
    constraints: dict[str, Any]
    search: Any
    warnings: tuple[str, ...] = ()
    #: ``--pricing owned``: gpu id -> its owned price block (plan/owned.py); None otherwise
    ownership: dict[str, Any] | None = None
    #: ``--explain``: the explained layout's record (plan/explain.py); None otherwise
    explain: dict[str, Any] | None = None

    @property
    def fits(self) -> bool:
        return bool(self.search.options)

    def to_dict(self) -> dict[str, Any]:
        from .search import train_record

        record = train_record(self.model, self.tokens, self.objective, self.constraints, self.search)
        if self.ownership is not None:
            record["ownership"] = self.ownership
        if self.explain is not None:
            record["explain"] = self.explain
        return records.envelope(self.kind, **record)


class PlanServeReport(Report):
    """``plan serve``: the searched grid, the pruned counts and the options by $ per million output tokens."""

    kind: ClassVar[str] = "plan.serve"
    model: Any
    job: Any
    qps: float
    search: Any
    warnings: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return bool(self.search.options)

    def to_dict(self) -> dict[str, Any]:
        from .search import serve_record

        return records.envelope(self.kind, **serve_record(self.model, self.job, self.qps, self.search))
