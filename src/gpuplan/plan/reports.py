"""Typed reports: what one gpuplan call answers, as objects for notebooks and as the ``--json`` record.

Every report keeps the itemized parts as attributes (``report.memory.parts``, ``report.plan.time.seconds``,
``report.machine.figures``) and ``to_dict()`` gives exactly the record the CLI prints under ``--json`` (built
by :mod:`gpuplan.plan.records`). ``exit_code`` is the CLI's: 0, or 3 when the plan does not fit (a ranking:
when nothing fits). Volatile things (the catalog warnings met while loading) stay outside the record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from . import records

EXIT_OK = 0
EXIT_DOES_NOT_FIT = 3


@dataclass(frozen=True)
class Report:
    """Base of every report: ``to_dict()``, ``fits`` and ``exit_code``; ``warnings`` are the catalog
    warnings met while answering (never part of the record)."""

    kind: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def fits(self) -> bool:
        return True

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.fits else EXIT_DOES_NOT_FIT


# ----------------------------------------------------------------------------------------------- catalogs


@dataclass(frozen=True)
class GpusReport(Report):
    """``gpus list`` (or ``gpus compare`` with ``compare=True``): the accelerators, in order."""

    accelerators: tuple[Any, ...]
    compare: bool = False
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "gpus.compare" if self.compare else "gpus.list"

    def to_dict(self) -> dict[str, Any]:
        if self.compare:
            return records.accelerator_compare(self.accelerators)
        return records.accelerator_list(self.accelerators)


@dataclass(frozen=True)
class GpuReport(Report):
    """``gpus show``: one accelerator with the source and date of each figure."""

    kind: ClassVar[str] = "gpus.show"
    accelerator: Any
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        return records.accelerator_show(self.accelerator)


@dataclass(frozen=True)
class OffersReport(Report):
    """``offers list``: the offers, in order."""

    kind: ClassVar[str] = "offers.list"
    offers: tuple[Any, ...]
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        return records.offer_list(self.offers)


@dataclass(frozen=True)
class ModelsReport(Report):
    """``model list``: the models, in catalog order."""

    kind: ClassVar[str] = "model.list"
    models: tuple[Any, ...]
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        return records.model_list(self.models)


@dataclass(frozen=True)
class ModelReport(Report):
    """``model show``: parameter count, breakdown, architecture and FLOPs per token of one model."""

    kind: ClassVar[str] = "model.show"
    model: Any
    seq_len: int | None = None
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        return records.model_show(self.model, self.seq_len)


# ------------------------------------------------------------------------------------------------- train


@dataclass(frozen=True)
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
    warnings: tuple[str, ...] = field(default=(), compare=False)

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


@dataclass(frozen=True)
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
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def fits(self) -> bool:
        return any(r.fits for r in self.ranked)

    def to_dict(self) -> dict[str, Any]:
        return records.offer_ranking(self.model, self.layout, self.job, self.tokens, self.epochs, self.ranked)


# ------------------------------------------------------------------------------------------------- serve


@dataclass(frozen=True)
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
    warnings: tuple[str, ...] = field(default=(), compare=False)

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


@dataclass(frozen=True)
class ServeRankReport(Report):
    """``serve --rank``: options that fit (``options``, best $ per million output tokens first) and the
    GPU x format pairs that cannot run, with the reason (``skipped``)."""

    kind: ClassVar[str] = "serve.rank"
    model: Any
    job: Any
    options: tuple[Any, ...]
    skipped: tuple[tuple[str, str, str], ...]
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def fits(self) -> bool:
        return bool(self.options)

    def to_dict(self) -> dict[str, Any]:
        return records.serving_rank(self.model, self.job, self.options, self.skipped)


# --------------------------------------------------------------------------------------------------- tco


@dataclass(frozen=True)
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
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        return records.tco_record(
            self.gpu, self.gpus, self.case, self.cost, self.offers, self.purchase_row, self.data, self.period_years
        )


# -------------------------------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class PlanTrainReport(Report):
    """``plan train``: the searched grid, the pruned counts by reason and the top options (``search``, a
    ``plan.search.TrainSearch``); exit code 3 when no candidate meets the constraints."""

    kind: ClassVar[str] = "plan.train"
    model: Any
    tokens: float
    objective: str
    constraints: dict[str, Any]
    search: Any
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def fits(self) -> bool:
        return bool(self.search.options)

    def to_dict(self) -> dict[str, Any]:
        from .search import train_record

        return records.envelope(
            self.kind, **train_record(self.model, self.tokens, self.objective, self.constraints, self.search)
        )


@dataclass(frozen=True)
class PlanServeReport(Report):
    """``plan serve``: the searched grid, the pruned counts and the options by $ per million output tokens."""

    kind: ClassVar[str] = "plan.serve"
    model: Any
    job: Any
    qps: float
    search: Any
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def fits(self) -> bool:
        return bool(self.search.options)

    def to_dict(self) -> dict[str, Any]:
        from .search import serve_record

        return records.envelope(self.kind, **serve_record(self.model, self.job, self.qps, self.search))
