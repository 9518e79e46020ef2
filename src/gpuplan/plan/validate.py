"""``gpuplan validate``: every bundled published figure, run through the code path a user gets, scored; and
the leave-one-source-out (LOSO) harness that measures fitted constants out of sample.

The figures are ``data/validation/*.json`` (read with :func:`gpuplan.catalog.validation.load_validation`;
``data/validation/README.md`` and ``inference_modern.md`` describe the fields). Each record is turned into
the keywords of one :func:`gpuplan.api.train` or :func:`gpuplan.api.serve` call (the same keywords as the
CLI's flags) and the value gpuplan reports is compared with the published one. A record that cannot be
mapped yet (a GPU the catalog lacks, an architecture the record does not give, a metric gpuplan does not
predict, a layout the source does not state) is listed as skipped with its reason, never dropped.

The error of one value is signed and relative: ``predicted / published - 1`` (+ means gpuplan predicts more
throughput, more memory or a longer latency than measured). A summary gives, per group, the count, the mean
absolute error (MAE), the median signed error and how many of the runs gpuplan says "does not fit" although
the source ran them.

Fitted constants (LOSO). A *fitted constant* is an assumption whose value is (or can be) fitted on these
records: :class:`FittedConstant` names the assumption (an ``--assume`` name), the category it is fitted on
and a fit function. For each *source* (:func:`source_key`: the publishing repository or web page) the
constants are refitted on the other sources and that source is scored with the refitted values; the LOSO
MAE is reported beside the in-sample MAE (fitted on everything) and the MAE at today's defaults. The tool's
defaults are never changed here: the report says what the fit would give.

This module reads no files itself (the catalog layer does) and prints nothing; :func:`gpuplan.api.validate`
passes the callables that run ``api.train`` / ``api.serve`` (this layer cannot import the API).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import GpuplanError
from . import bands, records

# ------------------------------------------------------------------------------------------- the files

#: What each bundled file is scored as. Training files also give "memory" cases (their measured peaks).
FILES: Mapping[str, str] = {
    "training_modern": "training",
    "training_compute": "training",
    "training_memory": "memory",
    "inference": "inference",
    "inference_modern": "inference",
    "measured_gpu": "mixed",
}

#: The category of a file whose records are of several kinds (``measured_gpu``: our own training and decoding
#: runs, each record naming its kind in ``record_type``); every category reads it.
MIXED = "mixed"

#: Bundled files validate does not score, and why (named in every report, so nothing is dropped silently).
NOT_SCORED: Mapping[str, str] = {
    "accelerators": "datasheet figures: inputs of the accelerator catalog, not predictions "
    "(tests/test_accelerators*.py compare the catalog with them)",
}

CATEGORIES = ("training", "inference", "memory")

#: Prefix of the catalog ids of the models validate builds from a record's architecture.
MODEL_ID_PREFIX = "validation:"

#: Training runs are planned for this many steps (the tokens only scale time and cost, not the rates).
PLANNED_STEPS = 1000


# ------------------------------------------------------------------------------------------- the values


@dataclass(frozen=True)
class Case:
    """One published value and the gpuplan call that predicts it.

    ``quantity`` names what is read from the report (``tokens_per_s_per_gpu``, ``peak_bytes_per_gpu``, ...)
    and ``published`` is in that quantity's unit (``unit``). ``call`` is ``"train"`` or ``"serve"`` and
    ``kwargs`` the API keywords (model, gpu, layout, precision, batch, ...), exactly what a user would pass.
    """

    id: str
    record: str
    file: str
    category: str
    metric: str
    quantity: str
    unit: str
    published: float
    call: str
    kwargs: Mapping[str, Any]
    source: str
    gpu_generation: str
    precision: str
    stack: str
    architecture: str
    confidence: str = ""
    notes: tuple[str, ...] = ()
    #: a measured run on its stated hardware (False: a paper's analytic table, or a speed-up predicted on a part or GPU
    #: count the source leaves unstated): only these count as false "does not fit"
    measured: bool = True
    #: for a speed-up (``quantity`` ``speedup_vs_bf16``): the keywords of the baseline run it is measured against;
    #: the predicted value is the run's tokens/s over the baseline's
    baseline: Mapping[str, Any] | None = None

    @property
    def run_key(self) -> str:
        """Cases of one run (throughput and memory of the same training step) share one API call."""
        return self.call + repr(sorted(self.kwargs.items()))

    @property
    def baseline_key(self) -> str | None:
        """The baseline run's key (a speed-up's), else None."""
        return None if self.baseline is None else self.call + repr(sorted(self.baseline.items()))


@dataclass(frozen=True)
class Skip:
    """A record (or one of its values) that is not scored, with the reason."""

    record: str
    file: str
    category: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"record": self.record, "file": self.file, "category": self.category, "reason": self.reason}


@dataclass(frozen=True)
class Row:
    """A scored case: gpuplan's value beside the published one, and whether gpuplan says the run fits."""

    case: Case
    predicted: float
    fits: bool
    #: the error-band class of the run, read from its report (:func:`gpuplan.plan.bands.class_of`)
    band_class: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def run(self) -> tuple[str, str, str]:
        """The measured run this value comes from: its record and configuration (a record's throughput and
        peak memory are one run; Korthikanti's two recomputation schemes are two)."""
        return self.case.file, self.case.record, self.case.run_key

    @property
    def error(self) -> float:
        """Signed relative error: predicted / published - 1."""
        return self.predicted / self.case.published - 1

    def to_dict(self) -> dict[str, Any]:
        c = self.case
        return {
            "id": c.id,
            "record": c.record,
            "file": c.file,
            "category": c.category,
            "metric": c.metric,
            "quantity": c.quantity,
            "unit": c.unit,
            "published": c.published,
            "predicted": self.predicted,
            "error": self.error,
            "fits": self.fits,
            "band_class": bands.class_key(self.band_class) if self.band_class else None,
            "source": c.source,
            "gpu_generation": c.gpu_generation,
            "precision": c.precision,
            "stack": c.stack,
            "architecture": c.architecture,
            "confidence": c.confidence,
            "measured": c.measured,
            "call": c.call,
            "arguments": dict(c.kwargs),
            "baseline_arguments": dict(c.baseline) if c.baseline is not None else None,
            "notes": list(c.notes),
        }


@dataclass
class Mapped:
    """What the mapping of the bundled files gives: the cases, the skipped records and the models built
    from records' architectures (to be registered in the call's catalog)."""

    cases: list[Case] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    models: dict[str, Any] = field(default_factory=dict)  # id -> ModelSpec
    records_read: dict[str, int] = field(default_factory=dict)  # file -> records


# -------------------------------------------------------------------------------------------- sources


def source_key(record: Mapping[str, Any]) -> str:
    """The LOSO grouping of a record: who published the measurement.

    - a GitHub URL (or ``source.repo``): ``github:owner/repo``: every table of one repository is one source
      (torchtitan's benchmark pages, the Megatron-LM README and its examples);
    - an arXiv URL: ``arxiv:ID`` (one paper);
    - any other URL: its host and path, without query or fragment (``pytorch.org/blog/maximizing-training``:
      one blog post is one measurement campaign);
    - gpuplan's own recordings (``source.campaign``): the campaign, one lease's recordings on one GPU
      (``measured_gpu.json``: "gpuplan H200 recordings 2026-11-27"), whatever raw file a record came from;
    - no URL: the source title.
    """
    src = record.get("source") or {}
    campaign = str(src.get("campaign") or "").strip()
    if campaign:
        return campaign
    url = str(src.get("url") or "").strip()
    repo = str(src.get("repo") or "").strip()
    m = re.match(r"https?://(?:www\.)?github\.com/([^/#?]+)/([^/#?]+)", url)
    if m:
        return f"github:{m.group(1).lower()}/{m.group(2).lower()}"
    if repo:
        return f"github:{repo.lower()}"
    m = re.match(r"https?://(?:www\.)?arxiv\.org/(?:abs|pdf)/([0-9.]+?)(?:v\d+)?(?:\.pdf)?(?:[#?].*)?$", url)
    if m:
        return f"arxiv:{m.group(1)}"
    m = re.match(r"https?://(?:www\.)?([^/#?]+)([^#?]*)", url)
    if m:
        return (m.group(1) + m.group(2).rstrip("/")).lower()
    return str(src.get("title") or "unknown source").strip()


# ---------------------------------------------------------------------------------------- GPU mapping

#: How the records spell GPUs (lower-cased), in order, to catalog ids: the first id the catalog holds is
#: used; a note says when the part is approximated. A pattern mapped to ``None`` is skipped with the note.
_GPUS: tuple[tuple[str, tuple[str, ...] | None, str], ...] = (
    (r"h100 or h200", None, "the source does not say whether the GPU is an H100 or an H200"),
    (r"blackwell sm100", None, "the source does not name the Blackwell part (SKU)"),
    (r"apple|m[123] (max|ultra|pro)", None, "Apple silicon is not in the accelerator catalog"),
    (r"h800", None, "the H800 is not in the accelerator catalog"),
    (r"tpu v3", None, "TPU v3 is not in the accelerator catalog"),
    (r"generic device", None, "a generic device, not a GPU"),
    (
        r"h100.*(96\s*gb|95/96|hbm2e)",
        ("h100-sxm-96gb", "h100-sxm-80gb"),
        "H100 96 GB HBM2e (500 W) run as the catalog's 700 W 80 GB H100 SXM: less memory, higher power",
    ),
    (r"h100.*pcie", ("h100-pcie-80gb",), ""),
    (r"h100.*nvl", ("h100-nvl-94gb",), ""),
    (r"h100", ("h100-sxm-80gb",), ""),
    (r"h200.*nvl", ("h200-nvl-141gb",), ""),
    (r"h200", ("h200-sxm-141gb",), ""),
    (r"\bh20\b", ("h20",), ""),
    (r"gb300", ("gb300",), ""),
    (r"gb200", ("gb200",), ""),
    (r"b300", ("b300",), ""),
    (r"b200", ("b200",), ""),
    (r"a100.*40\s*gb", ("a100-sxm-40gb",), ""),
    (r"a100.*pcie", ("a100-pcie-80gb",), ""),
    (r"a100", ("a100-sxm-80gb",), ""),
    (r"a800", ("a800-sxm-80gb",), ""),
    (r"v100.*16\s*gb", ("v100-sxm2-16gb",), ""),
    (r"v100", ("v100-sxm2-32gb",), ""),
    (r"mi325x", ("mi325x",), ""),
    (r"mi300x", ("mi300x",), ""),
    (r"mi355x", ("mi355x",), ""),
    (r"l40s", ("l40s",), ""),
    (r"\bl4\b", ("l4",), ""),
    (r"\ba10g\b", ("a10g",), ""),
    (r"\ba10\b", ("a10",), ""),
    (r"4090", ("rtx-4090",), ""),
    (r"3090", ("rtx-3090",), ""),
    (r"tpu v4", ("tpu-v4",), ""),
)

#: Spellings that say the exact part was not stated (the mapping then notes the part it assumed).
_UNSTATED = re.compile(r"not stated|not named|implied|sku|class|\bor\b")


_POWER_CAP = re.compile(
    r"(?:power[- ]limited to|limited to|power limit of)\s*(\d+(?:\.\d+)?)\s*w\b|(\d+(?:\.\d+)?)\s*w\s+power\s+limit"
)


def _power_limit_w(text: Any) -> float | None:
    """The power cap a record's GPU text states ("power-limited to 750 W", "500 W power limit"), in watts."""
    if not isinstance(text, str):
        return None
    m = _POWER_CAP.search(text.lower())
    return float(m.group(1) or m.group(2)) if m else None


_NETWORK = re.compile(
    r"(?:(\d+)\s*x\s*)?(\d+(?:\.\d+)?)\s*(g|t)b(?:ps|/s)\b[^;]*?\b(inter-node|per node|per gpu)", re.IGNORECASE
)
#: NCCL bus bandwidth per unit of NIC line rate: 46-49 GB/s on an NDR 400 Gb/s (50 GB/s) NIC (nccl-tests#290), the
#: ratio the catalog's scale_out_bytes_per_s_per_gpu figures carry (48e9 for 400 Gb/s)
NIC_BUSBW_PER_LINE_RATE = 0.96


def _network_bytes_per_s_per_gpu(text: Any, gpus_per_node: int) -> float | None:
    """Inter-node bandwidth per GPU in bytes/s that a record's ``hardware.interconnect`` states ("800 Gbps
    inter-node", "8x400 Gb/s InfiniBand per node", "400 Gb/s per GPU"), at the catalog's bus-bandwidth share of
    the line rate; None where it states none."""
    if not isinstance(text, str):
        return None
    m = _NETWORK.search(text)
    if m is None:
        return None
    count = float(m.group(1)) if m.group(1) else 1.0
    bits = count * float(m.group(2)) * (1e12 if m.group(3).lower() == "t" else 1e9)
    per_gpu = bits / 8 if m.group(4).lower() == "per gpu" else bits / 8 / max(1, gpus_per_node)
    return per_gpu * NIC_BUSBW_PER_LINE_RATE


def map_gpu(text: Any, accelerators: Any) -> tuple[Any, tuple[str, ...]] | str:
    """(accelerator, notes) for a record's ``hardware.gpu`` text, or the reason it can't be mapped."""
    if not isinstance(text, str) or not text.strip():
        return "no GPU named"
    low = text.lower()
    for pattern, ids, note in _GPUS:
        if re.search(pattern, low):
            if ids is None:
                return note
            for gid in ids:
                if accelerators.matches(gid):
                    acc = accelerators.get(gid)
                    notes = []
                    if note and gid == ids[-1] and len(ids) > 1:
                        notes.append(note)
                    if _UNSTATED.search(low) and "hbm2e" not in low:
                        notes.append(f"GPU '{text}' run as {acc.id}")
                    return acc, tuple(notes)
            return f"no catalog entry for '{text}' (tried {', '.join(ids)})"
    return f"GPU '{text}' is not in the accelerator catalog"


# -------------------------------------------------------------------------------------- model mapping

_QUANT_SUFFIX = re.compile(r"-(fp8-kv|fp8|fp4|nvfp4|awq|gptq|int4|int8)$", re.IGNORECASE)


def _catalog_model(models: Any, names: Iterable[Any]) -> Any:
    """The catalog model one of ``names`` names (an id, alias or Hub id; a quantized repo's base; the same
    repository name under another owner), or None."""
    repos: dict[str, Any] | None = None
    for name in names:
        if not isinstance(name, str) or not name.strip():
            continue
        name = name.strip()
        base = _QUANT_SUFFIX.sub("", name)
        for n in dict.fromkeys((name, base)):
            found = models.matches(n)
            if len(found) == 1:
                return found[0]
        if "/" in base:
            if repos is None:
                repos = {}
                for m in models:
                    for alias in (m.hf_id, *m.aliases):
                        if alias and "/" in alias:
                            repos.setdefault(alias.split("/", 1)[1].lower(), m)
            found_repo = repos.get(base.split("/", 1)[1].lower())
            if found_repo is not None:
                return found_repo
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _config_from_architecture(m: Mapping[str, Any], seq_len: int) -> tuple[dict[str, Any], str] | str:
    """A Hugging Face style config for a record's ``model`` block (layers, hidden, heads, ...), and the family
    it was read as; or the reason it can't be built. Gated MLPs (ffn != 4 x hidden, SwiGLU) read as Llama;
    4 x hidden MLPs as GPT (GELU; ``gpt2`` with learned positions, or ``gpt_neox`` for grouped-query
    attention); MoE without shared experts or MLA as Mixtral."""
    layers, hidden, heads = _int(m.get("layers")), _int(m.get("hidden")), _int(m.get("heads"))
    vocab = _int(m.get("vocab"))
    if not (layers and hidden and heads):
        return "the record gives no architecture (layers, hidden, heads) and the model is not in the catalog"
    if not vocab:
        return "the record gives no vocabulary size and the model is not in the catalog"
    kv = _int(m.get("kv_heads")) or heads
    ffn = _int(m.get("ffn")) or 4 * hidden
    context = max(seq_len, 2048)
    moe = m.get("moe")
    if isinstance(moe, Mapping):
        experts, top_k, expert_ffn = (_int(moe.get(k)) for k in ("routed_experts", "top_k", "expert_ffn"))
        if moe.get("shared_experts") or m.get("mla"):
            return "MoE with shared experts or MLA that the catalog lacks: no config family fits the record"
        if not (experts and top_k and expert_ffn):
            return "MoE block incomplete in the record (routed experts, top-k and expert FFN width needed)"
        cfg = {
            "model_type": "mixtral",
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": kv,
            "intermediate_size": expert_ffn,
            "num_local_experts": experts,
            "num_experts_per_tok": top_k,
            "vocab_size": vocab,
            "max_position_embeddings": context,
            "tie_word_embeddings": False,
        }
        if _int(m.get("head_dim")):
            cfg["head_dim"] = _int(m.get("head_dim"))
        return cfg, "mixtral (MoE, gated experts)"
    if ffn != 4 * hidden:
        cfg = {
            "model_type": "llama",
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": kv,
            "intermediate_size": ffn,
            "vocab_size": vocab,
            "max_position_embeddings": context,
            "tie_word_embeddings": False,
        }
        if _int(m.get("head_dim")):
            cfg["head_dim"] = _int(m.get("head_dim"))
        return cfg, "llama (gated MLP)"
    if kv != heads:
        return {
            "model_type": "gpt_neox",
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": kv,
            "intermediate_size": ffn,
            "vocab_size": vocab,
            "max_position_embeddings": context,
            "use_parallel_residual": False,
            "rotary_pct": 1.0,
            "tie_word_embeddings": False,
        }, "gpt_neox (4h MLP, grouped-query attention)"
    # tied or untied embeddings: whichever parameter count is nearer the one the record states (Megatron-LM's
    # 2021 Table 1 counts the embedding once, Megatron-Core's 2024 weak-scaling table twice: 12Lh^2 + 2Vh)
    blocks = 12 * layers * hidden * hidden + 13 * layers * hidden
    stated = m.get("params")
    tied = True
    if isinstance(stated, (int, float)) and stated > 0:
        tied = abs(blocks + vocab * hidden - stated) <= abs(blocks + 2 * vocab * hidden - stated)
    return {
        "model_type": "gpt2",
        "n_embd": hidden,
        "n_layer": layers,
        "n_head": heads,
        "n_inner": ffn,
        "vocab_size": vocab,
        "n_positions": context,
        "tie_word_embeddings": tied,
    }, f"gpt2 (4h GELU MLP, learned positions, {'tied' if tied else 'untied'} embeddings)"


def map_model(
    rec: Mapping[str, Any], models: Any, built: dict[str, Any], seq_len: int, prefer_architecture: bool = False
) -> tuple[str, Any, tuple[str, ...]] | str:
    """(model argument for the API, its ModelSpec, notes) for a record, or the reason it can't be mapped.

    The catalog model the record's ``hf_id`` (or name) names comes first; else a model is built from the
    record's architecture and registered as ``validation:<record id>`` (``built`` collects them).
    ``prefer_architecture``: build from the architecture even where a catalog name matches (for records
    whose architecture is the point, e.g. a paper's GPT sizes)."""
    from ..catalog.hf_config import spec_from_hf_config
    from ..errors import ModelConfigError

    m = rec.get("model") or {}
    if not prefer_architecture:
        spec = _catalog_model(models, (m.get("hf_id"), str(m.get("name") or "").lower().replace(" ", "-")))
        if spec is not None:
            return spec.id, spec, ()
    made = _config_from_architecture(m, seq_len)
    if isinstance(made, str):
        return made
    cfg, family = made
    mid = MODEL_ID_PREFIX + str(rec["id"])
    try:
        spec = spec_from_hf_config(
            cfg, id=mid, name=str(m.get("name") or rec["id"]), where=f"record {rec['id']}", origin="validation record"
        )
    except ModelConfigError as e:
        return f"architecture in the record is not readable: {e}"
    built[mid] = spec
    notes = [f"model built from the record's architecture as {family}"]
    published = m.get("params")
    if isinstance(published, (int, float)) and published > 0:
        from ..estimate.params import count_params

        counted = count_params(spec).total
        if abs(counted / published - 1) > 0.05:
            notes.append(f"built model has {counted / 1e9:.2f}B parameters, the record says {published / 1e9:.2f}B")
    return mid, spec, tuple(notes)


# ------------------------------------------------------------------------------------ training records

#: Settings the Megatron-LM paper's Table 1 records do not carry, from the authors' launch script
#: (NVIDIA/Megatron-LM examples/sc21/run_table_1.sh): micro-batch and interleaved stages per row.
MEGATRON_TABLE1 = {
    "megatron-t1-1p7b": (16, 1),
    "megatron-t1-3p6b": (16, 1),
    "megatron-t1-7p5b": (16, 1),
    "megatron-t1-18p4b": (8, 1),
    "megatron-t1-39p1b": (4, 1),
    "megatron-t1-76p1b": (2, 3),
    "megatron-t1-145p6b": (2, 2),
    "megatron-t1-310p1b": (1, 2),
    "megatron-t1-529p6b": (1, 3),
    "megatron-t1-1008p0b": (1, 1),
}

#: Interleaved pipeline chunks of Korthikanti et al. 2022 Table 5 (their Table 3 / the scripts' settings).
KORTHIKANTI_STAGES = {
    "korthikanti-t5-22b": 1,
    "korthikanti-t5-175b": 3,
    "korthikanti-t5-530b": 3,
    "korthikanti-t5-1t": 1,
}

#: Sources whose training runs predate FlashAttention and used dropout (GPT-3-style pre-training, fp16):
#: Narayanan et al. 2021, Korthikanti et al. 2022, Smith et al. 2022 (MT-NLG).
_EAGER_ATTENTION_SOURCES = ("arxiv:2104.04473", "arxiv:2205.05198", "arxiv:2201.11990")


def _stack(rec: Mapping[str, Any], source: str) -> str:
    """The software stack (framework) of a training record, normalized for grouping."""
    fw = rec.get("framework")
    name = (fw.get("name") if isinstance(fw, Mapping) else str(fw or "")) or ""
    low = name.lower()
    for key, stack in (
        ("automodel", "nemo-automodel"),
        ("nemo", "nemo"),
        ("megascale", "megascale"),
        ("torchtitan", "torchtitan"),
        ("fms-fsdp", "pytorch-fsdp"),
        ("foundation-model-stack", "pytorch-fsdp"),
        ("megatron", "megatron"),
        ("deepspeed", "deepspeed"),
        ("mamf", "microbenchmark"),
        ("torch.matmul", "microbenchmark"),
    ):
        if key in low:
            return stack
    if source in ("arxiv:2104.04473", "arxiv:2205.05198"):
        return "megatron"
    if source == "arxiv:2201.11990" or "bigscience" in source:
        return "megatron-deepspeed"
    return "unstated"


#: NeMo AutoModel's benchmark configs for the models of its performance summary (NVIDIA-NeMo/Automodel, commit
#: 037e04a6, and the Llama 3.1 70B config dated as the row, 2026-04-10): (recomputation, expert-parallel degree,
#: config). The performance table states neither; ``activation_checkpointing`` runs every block as a checkpoint.
#: The MoE rows were added with the table (89e3a9fd, 2025-10-06) and never re-measured, so their configs are read
#: as of that date (79d0ccfd, 2025-10-02): gpt-oss-20b then had ``activation_checkpointing: true`` (turned off
#: later, 8df18da3 2025-11-10, with the row's 10.04 s step left unchanged); the others read the same at both.
#: The last field is the loss's ``fp32_upcast``: the MoE configs set ``loss_fn: MaskedCrossEntropy`` with
#: ``fp32_upcast: false`` (at 79d0ccfd and still at 36044ad3), the Llama config names MaskedCrossEntropy without it
#: (its default, True: ``logits.float()`` before ``F.cross_entropy``, components/loss/masked_ce.py).
_AUTOMODEL_CONFIGS: dict[str, tuple[str, int, str, bool]] = {
    "meta-llama/Llama-3.1-70B": (
        "full",
        1,
        "examples/llm_pretrain/llama3_1_70b_pretrain_benchmark_8nodes_tp1cp2pp1_0410.yaml",
        True,
    ),
    "deepseek-ai/DeepSeek-V3": ("full", 64, "examples/benchmark/configs/deepseek_v3_te_deepep.yaml", False),
    "Qwen/Qwen3-30B-A3B": ("full", 8, "examples/benchmark/configs/qwen3_moe_30b_te_deepep.yaml", False),
    "openai/gpt-oss-20b": ("full", 8, "examples/benchmark/configs/gptoss_20b_te_deepep.yaml", False),
    "openai/gpt-oss-120b": ("none", 64, "examples/benchmark/configs/gptoss_120b_te_deepep.yaml", False),
}


def same_dtype_loss_assumptions(logit_bytes: float = 2.0) -> dict[str, float]:
    """``--assume`` overrides for a loss computed on the logits in their own dtype (no fp32 upcast), derived term
    by term as the defaults are for transformers' upcast loss (MemoryAssumptions.logits_bytes_per_element_hf, 12 B;
    StepAssumptions.eager_loss_bytes_per_logit, 46 B), in bytes per token and vocabulary entry.

    Without ``logits.float()`` there is no fp32 copy and no cast back: ``F.cross_entropy`` is log_softmax +
    nll_loss in the logits' dtype (NeMo AutoModel's MaskedCrossEntropy with ``fp32_upcast: false``). Memory at the
    start of backward: the logits, log_softmax's saved output and the gradient log_softmax's backward writes, one
    element each (12 B = 2 + 4 + 4 + 2 with the upcast): 3 x 2 = 6 B for bf16. HBM traffic: forward writes the logits
    (1 element), log_softmax reads them twice and writes (3); backward writes the dense nll gradient (1) and
    log_softmax's backward reads the gradient twice and its output once and writes (4): 9 elements, 18 B for bf16
    (46 B with the upcast's extra read, fp32 write and cast back).
    """
    return {
        "logits_bytes_per_element_hf": 3 * logit_bytes,
        "eager_loss_bytes_per_logit": (1 + 3 + 1 + 4) * logit_bytes,
    }


#: NeMo 24.07's recipes for the models of its performance summary (NVIDIA/NeMo-Framework-Launcher, tag 24.07,
#: 8325688d: launcher_scripts/conf/training/<yaml>, ``activations_checkpoint_granularity``; the H100 fp8 examples,
#: examples/training/{gpt,llama}/h100/*_fp8*.sh, change batch and layout only): record -> (recomputation, yaml). The
#: table states neither; every recipe is null (none; the Llama 2 ones with ``activations_checkpoint_num_layers: 0``)
#: except Nemotron-4 340B's, ``selective`` (Megatron-Core's core-attention recomputation).
_NEMO_2407_RECOMPUTE: dict[str, tuple[str, str]] = {
    "nemo-2407-h100-gpt3-5b-64gpu-fp8": ("none", "gpt3/5b.yaml"),
    "nemo-2407-h100-gpt3-175b-512gpu-fp8": ("none", "gpt3/175b.yaml"),
    "nemo-2407-h100-llama2-7b-8gpu-fp8": ("none", "llama/llama2_7b.yaml"),
    "nemo-2407-h100-llama2-70b-64gpu-fp8": ("none", "llama/llama2_70b.yaml"),
    "nemo-2407-h100-llama3-8b-8gpu-fp8": ("none", "llama/llama3_8b.yaml"),
    "nemo-2407-h100-llama3-70b-64gpu-fp8": ("none", "llama/llama3_70b.yaml"),
    "nemo-2407-h100-nemotron4-340b-128gpu-fp8": ("selective", "nemotron/nemotron_340b.yaml"),
}


#: Tensor-parallel communication overlap (Transformer Engine userbuffers: TP collectives split behind the GEMMs beside
#: them) as the sources' launch settings have it, for records with tensor parallelism that do not state it:
#: record -> (on, where it is said).
_SOURCE_TP_OVERLAP: dict[str, tuple[bool, str]] = {
    "nemo-2407-h100-gpt3-175b-512gpu-fp8": (
        False,
        "NeMo-Framework-Launcher 24.07 conf/training/gpt3/175b.yaml: ub_tp_comm_overlap: False (the 175B fp8 example "
        "does not change it)",
    ),
    "nemo-2407-h100-llama2-70b-64gpu-fp8": (
        True,
        "NeMo-Framework-Launcher 24.07 conf/training/llama/llama2_70b.yaml: ub_tp_comm_overlap: true",
    ),
    "nemo-2407-h100-llama3-70b-64gpu-fp8": (
        True,
        "NeMo-Framework-Launcher 24.07 conf/training/llama/llama3_70b.yaml: ub_tp_comm_overlap: true",
    ),
    "nemo-2407-h100-nemotron4-340b-128gpu-fp8": (
        False,
        "NeMo-Framework-Launcher 24.07 conf/training/nemotron/nemotron_340b.yaml: ub_tp_comm_overlap: False",
    ),
    "megatron-examples-llama3-405b-1024gpu-fp8": (
        True,
        "NeMo scripts/performance/llm/pretrain_llama31_405b.py, which the table follows: MegatronCommOverlapCallback "
        "with tp_comm_overlap and userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192 on H100",
    ),
}


#: The loss fused into one kernel (Megatron-LM --cross-entropy-loss-fusion, off unless set) where the source's launch
#: settings turn it on: record -> where it is said. Megatron-stack records not listed run the unfused loss.
_SOURCE_CE_FUSION: dict[str, str] = {
    "megatron-examples-llama3-8b-8gpu-fp8": "Megatron-LM examples/llama/train_llama3_8b_h100_fp8.sh (bf6e9985): "
    "--cross-entropy-loss-fusion",
    "megatron-examples-llama3-405b-1024gpu-fp8": "NeMo scripts/performance, which the table follows: NeMo 2.0's "
    "GPTConfig cross_entropy_loss_fusion True",
    "nemo-2407-h100-llama3-8b-8gpu-fp8": "NeMo-Framework-Launcher 24.07 conf/training/llama/llama3_8b.yaml: "
    "cross_entropy_loss_fusion: true",
    "nemo-2407-h100-llama3-70b-64gpu-fp8": "NeMo-Framework-Launcher 24.07 conf/training/llama/llama3_70b.yaml: "
    "cross_entropy_loss_fusion: true",
}


#: Runs whose attention ran FlashAttention-2's kernels (or one priced as them) on Hopper, where ``--attention-kernel
#: auto`` now prices cuDNN's (PyTorch prefers cuDNN on sm90/sm100 since 2.9, pytorch/pytorch#162073; torchtitan sets
#: cuDNN first since 6a3a9da9, 2025-10-09): record-id prefix -> why the run had FlashAttention-2
_ATTENTION_FA2: dict[str, str] = {
    "torchtitan-2408-": "torchtitan 3faaa1a (2024-08) on a torch nightly of that time, whose SDPA tries "
    "FlashAttention-2 first",
    "torchtitan-2412-": "torchtitan 9dec370 on torch of 2024-12-23, whose SDPA tries FlashAttention-2 first (and ring "
    "attention allows only the flash and efficient backends)",
    "torchtitan-2506-": "torchtitan of June 2025 sets FlashAttention-2 first below sm100 (models/attention.py, "
    "3b85aa31 of 2025-05-14 to 6a3a9da9 of 2025-10-09)",
    "torchao-h100-": "torch 2.7 with torchtitan 0.0.2, whose SDPA tries FlashAttention-2 first",
    "ibm-": "PyTorch of 2023-24, whose SDPA tries FlashAttention-2 first",
    "automodel-h100-llama3-70b-": "NeMo AutoModel 2013a4dd runs context parallelism under "
    "sdpa_kernel([FLASH_ATTENTION, EFFICIENT_ATTENTION]) (components/distributed/cp_utils.py), which leaves cuDNN out",
    "automodel-h100-gpt-oss-": "NeMo AutoModel 89e3a9fd runs gpt-oss with FlexAttention (attn: flex; a compiled "
    "Triton kernel, which PyTorch's FlexAttention post of 2024-08 puts at ~90 % of FlashAttention-2 forward and "
    "85 % backward): priced as FlashAttention-2",
}


#: Memory settings the sources state and the record does not (read with the recomputation above): record -> (the
#: ``train`` arguments, where they are said): the gradient buffer's dtype (``--main-grads``), fp8 parameters
#: (``--fp8-params``, fp8 runs only) and the optimizer's dtype (``--optimizer-dtype``).
_SOURCE_MEMORY_SETTINGS: dict[str, tuple[dict[str, Any], str]] = {
    "megatron-examples-llama3-8b-8gpu-fp8": (
        {"main_grads": "bf16", "fp8_params": True},
        "Megatron-LM examples/llama/train_llama3_8b_h100_fp8.sh (bf6e9985): --grad-reduce-in-bf16, --fp8-param-gather",
    ),
    "megatron-examples-llama3-405b-1024gpu-fp8": (
        {"main_grads": "bf16", "fp8_params": True},
        "NeMo scripts/performance (30e6820d), which the table follows: bf16_with_fp8_mixed (fp8_param_gather=True), "
        "grad_reduce_in_fp32=False",
    ),
    "nemo-2407-h100-gpt3-175b-512gpu-fp8": (
        {"main_grads": "bf16"},
        "NeMo-Framework-Launcher 24.07 examples/training/gpt/h100 175B fp8: optim.grad_sync_dtype=bf16",
    ),
    "nemo-2407-h100-llama3-8b-8gpu-fp8": (
        {"main_grads": "bf16"},
        "NeMo-Framework-Launcher 24.07 examples/training/llama/h100 llama3_8b_fp8: optim.grad_sync_dtype=bf16",
    ),
    "nemo-2407-h100-nemotron4-340b-128gpu-fp8": (
        {"main_grads": "bf16", "optimizer_dtype": "bf16"},
        "NeMo-Framework-Launcher 24.07 conf/training/nemotron/nemotron_340b.yaml: optim distributed_fused_adam, "
        "grad_sync_dtype: bf16, dtype: bf16",
    ),
}


def fake_gate_ranks_per_token(experts: int, experts_per_token: int, ep: int) -> float | None:
    """Distinct expert-parallel ranks a token is sent to under NeMo AutoModel's ``FakeBalancedGate``, averaged
    over tokens; None where the experts do not split evenly over the ranks.

    The gate (nemo_automodel/components/moe/layers.py, ``FakeBalancedGate.forward``: ``indices = arange(T * k)
    .view(-1, k) % n_experts``) gives token t the k consecutive experts from t * k (mod E), and expert parallelism
    places E / ep consecutive experts on each rank; DeepEP then sends the token once to each rank among them (its
    ``is_token_in_rank`` layout). DeepSeek-V3 at ep 64 (8 experts over ranks of 4): 2 ranks; Qwen3-30B-A3B at
    ep 8 (8 experts, ranks of 16): 1.
    """
    if experts < 1 or experts_per_token < 1 or ep < 1 or experts % ep:
        return None
    per_rank = experts // ep
    spans = [
        len({((t * experts_per_token + j) % experts) // per_rank for j in range(experts_per_token)})
        for t in range(experts)
    ]
    return sum(spans) / len(spans)


def _recompute(value: Any) -> tuple[str, tuple[str, ...]]:
    text = str(value or "").lower()
    if not text or "not stated" in text or "tuned" in text:
        return "none", ("recomputation not stated: none assumed",)
    if "full" in text or "every block" in text:
        return "full", ()
    if "per-op" in text or "sac" in text:
        # torchtitan's selective_ac_option = "op": saves every other matmul output and the attention output
        return "per-op", ()
    if "n-th" in text:
        # IBM fms-fsdp: selective_checkpointing is the fraction of blocks checkpointed, default 1 (every block;
        # fms-fsdp config/training.py); a run that does not state it ran the default
        return "full", ("'checkpoint every n-th block' without n: fms-fsdp's default, every block (full)",)
    if "selective" in text:
        return "selective", ()
    if "none" in text or text == "false":
        return "none", ()
    if "checkpoint" in text or "remat" in text:
        return "full", (f"recomputation '{value}' run as full",)
    return "none", (f"recomputation '{value}' not understood: none assumed",)


_TRAIN_PRECISION = {"bf16": "bf16-mixed", "fp8": "fp8-mixed", "mxfp8": "fp8-mixed", "fp16": "fp16-mixed"}


def _training_precision(rec: Mapping[str, Any], eager: bool) -> tuple[str, str, tuple[str, ...]] | str:
    """(gpuplan --precision, the precision class for grouping, notes) or the reason."""
    cls = str(rec.get("precision_class") or "").lower().strip()
    text = str(rec.get("precision") or "").lower()
    if cls:
        if cls in ("mxfp4", "fp4"):
            return f"{cls} training is not modeled (gpuplan's precisions: fp32, fp16/bf16 mixed, fp8 mixed, fp4 mixed)"
        if cls == "nvfp4":
            return "fp4-mixed", cls, ()
        if cls not in _TRAIN_PRECISION:
            return f"precision '{cls}' is not one run (a comparison of several) or not modeled"
        notes = ("MXFP8 run as fp8-mixed (the same dense fp8 peak)",) if cls == "mxfp8" else ()
        return _TRAIN_PRECISION[cls], cls, notes
    if "fp8" in text:
        return "fp8-mixed", "fp8", ()
    if eager or "fp16" in text:
        return "fp16-mixed", "fp16", ()
    if "bf16" in text:
        return "bf16-mixed", "bf16", ()
    if "mixed" in text:
        return "fp16-mixed", "fp16", ("'mixed precision' run as fp16-mixed",)
    return "bf16-mixed", "bf16", ("precision not stated: bf16-mixed assumed",)


def _value(rec: Mapping[str, Any], metric: str) -> Any:
    for v in rec.get("values") or ():
        if v.get("metric") == metric:
            return v
    return None


def _number(v: Any) -> float | None:
    if v is None:
        return None
    x = v.get("value")
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
        return None
    return float(x)


def _eq3_flops_per_token(m: Mapping[str, Any], seq_len: int) -> float | None:
    """Narayanan et al. 2021, Eq. 3 per token: 96 l h^2 (1 + s / 6h + V / 16 l h) (counts recomputation)."""
    layers, hidden, vocab = _int(m.get("layers")), _int(m.get("hidden")), _int(m.get("vocab"))
    if not (layers and hidden and vocab):
        return None
    return 96 * layers * hidden**2 * (1 + seq_len / (6 * hidden) + vocab / (16 * layers * hidden))


#: Sources that publish TFLOP/s per GPU under NeMo 2.0's model-FLOPs formulas, which count every query-key pair
#: (no causal halving) until NeMo 6251117f ("Discount FLOPs in dot-product att", 2025-08-09): record-id prefix ->
#: where the convention is read. Their TFLOP/s turn back into tokens/s with :func:`_nemo2_llama_flops_per_token`.
_NEMO2_FULL_ATTENTION_FLOPS: dict[str, str] = {
    "nemo-2504-": "NeMo 2.0's llama3 formula of the 25.04 container (nemo/utils/flops_formulas.py at 811bd0e6, "
    "2025-04-15: full S^2 attention; the causal discount came with 6251117f, 2025-08-09)",
}


def _nemo2_llama_flops_per_token(m: Mapping[str, Any], seq_len: int) -> float | None:
    """NeMo 2.0's llama model FLOPs per token (nemo/utils/flops_formulas.py ``llama3``, 2025-04 to 2025-08):
    l h^2 (12 + 12 g / a + 18 f / h + 12 s / h) + 6 V h for l layers, hidden h, a heads, g key-value groups, FFN
    width f, sequence s and vocabulary V: forward and backward (3x the forward), the attention scores over all s^2
    pairs, the LM head included, recomputation not counted."""
    layers, hidden, vocab = _int(m.get("layers")), _int(m.get("hidden")), _int(m.get("vocab"))
    heads, ffn = _int(m.get("heads")), _int(m.get("ffn"))
    groups = _int(m.get("kv_heads")) or heads
    if not (layers and hidden and vocab and heads and ffn and groups):
        return None
    per_layer = 12 + 12 * groups / heads + 18 * ffn / hidden + 12 * seq_len / hidden
    return layers * hidden**2 * per_layer + 6 * vocab * hidden


def _throughput_values(
    rec: Mapping[str, Any], gpus: int, global_tokens: float | None, seq_len: int, source: str
) -> list[tuple[str, str, float, tuple[str, ...], dict[str, Any]]]:
    """The published training throughputs of a record as tokens/s per GPU: (variant, metric, value, notes,
    job changes). One per distinct configuration (Korthikanti's two recomputation schemes are two)."""
    out: list[tuple[str, str, float, tuple[str, ...], dict[str, Any]]] = []
    if rec["id"] in KORTHIKANTI_STAGES:
        for metric, changes in (
            ("iteration_time_full_recompute", {"recompute": "full", "sequence_parallel": False}),
            ("iteration_time_sp_plus_selective", {"recompute": "selective", "sequence_parallel": True}),
        ):
            t = _number(_value(rec, metric))
            if t and global_tokens:
                out.append((metric.removeprefix("iteration_time_"), metric, global_tokens / t / gpus, (), changes))
        return out
    for metric, note in (
        ("tokens_per_second_per_gpu", ""),
        ("tokens_per_second_per_gpu_vanilla_tp", "async TP not modeled: the vanilla-TP figure"),
        ("tokens_per_second_per_gpu_compile", "the torch.compile figure (derived from its MFU)"),
        ("throughput", ""),
    ):
        v = _value(rec, metric)
        x = _number(v)
        if x and (metric != "throughput" or "gpu" in str(v.get("unit", "")).lower()):
            return [("", metric, x, (note,) if note else (), {})]
    for metric in ("step_time_s", "iteration_time"):
        t = _number(_value(rec, metric))
        if t and global_tokens:
            return [
                (
                    "",
                    metric,
                    global_tokens / t / gpus,
                    (f"{metric} as tokens/s per GPU (global batch tokens / step / GPUs)",),
                    {},
                )
            ]
    # TFLOP/s per GPU under a source's own FLOP count, turned back into tokens/s per GPU with that count
    model = rec.get("model") or {}
    convention = next(
        (why for prefix, why in _NEMO2_FULL_ATTENTION_FLOPS.items() if rec["id"].startswith(prefix)), None
    )
    for metric, per_token, how in (
        (
            "achieved_tflops_per_gpu",
            _eq3_flops_per_token(model, seq_len) if source == "arxiv:2104.04473" else None,
            "the paper's Eq. 3",
        ),
        ("tflops_per_gpu_with_cp", _nemo2_llama_flops_per_token(model, seq_len) if convention else None, convention),
    ):
        tflops = _number(_value(rec, metric))
        if tflops and per_token:
            note = f"TFLOP/s per GPU turned into tokens/s per GPU with {how}"
            return [("", metric, tflops * 1e12 / per_token, (note,), {})]
    return out


def _throughput_skip_reason(rec: Mapping[str, Any]) -> str:
    metrics = {v.get("metric") for v in rec.get("values") or ()}
    if metrics & {
        "tflops_per_gpu_with_cp",
        "model_tflops_per_gpu",
        "achieved_tflops_per_gpu",
        "tflops_per_gpu",
        "per_gpu_tflops",
        "average_tflops_per_gpu",
    }:
        return (
            "throughput published only as TFLOP/s per GPU under the source's FLOP convention, without "
            "tokens/s or a step time"
        )
    if metrics & {"implied_tokens_per_second_per_gpu", "gpu_hours", "training_time"}:
        return "only a whole-run average (GPU-hours or days, restarts included), not a step throughput"
    if metrics & {"mfu_pct", "mfu", "model_flops_utilization", "implied_mfu_6N", "mfu_pct_at_96_gpus"}:
        return "throughput published only as an MFU (conventions differ by source), without tokens/s or a step time"
    return "no throughput metric gpuplan predicts (tokens/s per GPU or step time)"


def metric_is_compile(rec: Mapping[str, Any]) -> bool:
    """Whether the figure scored is a torch.compile one (``tokens_per_second_per_gpu_compile``)."""
    return (
        _value(rec, "tokens_per_second_per_gpu") is None
        and _value(rec, "tokens_per_second_per_gpu_compile") is not None
    )


#: Sources whose tables leave the GPU's part unstated but whose own logs of the same benchmark show it: source ->
#: (GPU text pattern, the part's spelling for :func:`map_gpu`, why).
_SOURCE_SKUS: dict[str, tuple[str, str, str]] = {
    "github:pytorch/ao": (
        r"h100.*not stated",
        "NVIDIA H100 96GB HBM2e",
        "the H100 part is not stated in the table, but the same benchmark's torchtitan logs by the same team show "
        "95.0 GiB of device memory (pytorch/ao#1802: 'memory: 47.79GiB(50.30%)'; pytorch/torchtitan#808, bf16 + "
        "compile: '47.65GiB(50.16%)', the table's 47.65 GB): the 96 GB HBM2e H100 of Meta's Grand Teton hosts "
        "(500 W, torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md), not the 80 GB SXM",
    ),
}


def _unstated_sku(source: str, text: Any) -> tuple[str, str] | None:
    """(GPU text to map, note) where the record leaves its part unstated and its source's logs show it."""
    rule = _SOURCE_SKUS.get(source)
    if rule is None or not isinstance(text, str) or not re.search(rule[0], text.lower()):
        return None
    return rule[1], rule[2]


@dataclass(frozen=True)
class _Speedup:
    """A published low-precision speed-up over bf16 whose two throughputs come from one table: the ratio does not
    hang on what the record leaves unstated (the GPU part, the GPU count), so it is scored where the throughput
    itself is not. ``gpu``, ``layout`` and ``job`` are the API keywords of the run, the same for both precisions
    but ``precision`` and ``fp8_recipe``; ``why`` says where each setting comes from."""

    metric: str
    precision: str
    fp8_recipe: str
    gpu: str
    layout: Mapping[str, Any]
    job: Mapping[str, Any]
    why: tuple[str, ...]


_SPEEDUPS: Mapping[str, _Speedup] = {
    "torchtitan-blackwell-llama3-8b-4gpu-fsdp4-nvfp4": _Speedup(
        "nvfp4_speedup_vs_bf16",
        "fp4-mixed",
        "nvfp4",
        "gb200",
        {"gpus": 4, "fsdp": True},
        {"micro_batch": 32, "global_batch": 128, "seq_len": 2048, "compile": True, "stack": "fsdp2"},
        (
            "speed-up NVFP4 / bf16 from the same table (30,040 / 21,919 tokens/s/GPU); the part is unnamed, so the "
            "ratio is predicted on the GB200: 4 GPUs per node and 110.95 GiB = 60.2 % of a ~184 GiB device fit the "
            "GB200 (the B200 holds 179 GiB; Blackwell Ultra parts have a 1.5x fp4 rate and 288 GB); the fp4:bf16 "
            "peak ratio is 4 on B200 and GB200 alike",
            "recomputation not stated: the recipe's llama3_8b config (torchtitan models/llama3/config_registry.py, "
            "b5bcd76c), SelectiveAC per-op",
            "the recipe (llama3_8b_first_85_pct_layers_nvfp4): layers 0-26 NVFP4, 27-31 and the LM head bf16 "
            "(fp4_bf16_tail_fraction 0.15, torchtitan's _NVFP4_BF16_TAIL_FRACTION), torch.compile",
        ),
    ),
    "torchtitan-gb200-llama4-scout-moe-mxfp8": _Speedup(
        "speedup_vs_bf16",
        "fp8-mixed",
        "mxfp8",
        "gb200",
        {"gpus": 256, "fsdp": True, "ep": 16},
        {"micro_batch": 10, "global_batch": 2560, "seq_len": 8192, "compile": True, "stack": "fsdp2"},
        (
            "speed-up MXFP8 / bf16 from the same table (7401 / 6169 tokens/s/GPU, printed 1.20x); 256 GPUs (torchtitan "
            "mxfp8.md: 64 nodes x 4; the TorchAO table says 512), FSDP over all of them with expert parallelism 16",
            "MXFP8 on every linear and routed-expert GEMM (the run left the output, router gate, wk and wv in bf16)",
        ),
    ),
}


def _map_speedup(stem: str, rec: Mapping[str, Any], cat: Any, out: Mapped) -> None:
    """The speed-up case of a record in :data:`_SPEEDUPS`: the low-precision run over its bf16 baseline."""
    rid = str(rec["id"])
    rule = _SPEEDUPS[rid]
    published = _number(_value(rec, rule.metric))
    seq = int(rule.job["seq_len"])
    mapped = map_model(rec, cat.models(), out.models, seq)
    if published is None or isinstance(mapped, str):
        out.skipped.append(Skip(rid, stem, "training", mapped if isinstance(mapped, str) else "no speed-up value"))
        return
    model_arg, spec, notes_m = mapped
    acc = cat.accelerators().get(rule.gpu)
    base = dict(
        model=model_arg,
        gpu=rule.gpu,
        **rule.layout,
        **rule.job,
        recompute=_recompute(rec.get("parallelism", {}).get("recompute"))[0],
        precision="bf16-mixed",
        tokens=float(int(rule.job["global_batch"]) * seq * PLANNED_STEPS),
    )
    if "not stated" in str(rec.get("parallelism", {}).get("recompute")):
        base["recompute"] = "per-op"
    out.cases.append(
        Case(
            id=f"{rid}#speedup",
            record=rid,
            file=stem,
            category="training",
            metric=rule.metric,
            quantity="speedup_vs_bf16",
            unit="x",
            published=published,
            call="train",
            kwargs={**base, "precision": rule.precision, "fp8_recipe": rule.fp8_recipe},
            baseline=base,
            source=source_key(rec),
            gpu_generation=acc.architecture,
            precision=str(rec.get("precision_class") or rule.fp8_recipe),
            stack="torchtitan",
            architecture="moe" if spec.moe is not None else "dense",
            confidence=str(rec.get("confidence") or ""),
            notes=(
                *rule.why,
                *notes_m,
                "the fit is shown, not counted: it is judged on the mapping's part or GPU count, not the source's",
            ),
            measured=False,
        )
    )


def _map_training(stem: str, rec: Mapping[str, Any], cat: Any, out: Mapped) -> None:
    """A training record: a throughput case (category training) and, where published, a peak-memory case
    (category memory), both from one ``api.train`` call; a record of :data:`_SPEEDUPS` also a speed-up case."""
    rid = str(rec["id"])

    def skip(reason: str) -> None:
        out.skipped.append(Skip(rid, stem, "training", reason))

    if rid in _SPEEDUPS:
        _map_speedup(stem, rec, cat, out)

    if rec.get("record_type") == "kernel_microbenchmark":
        return skip("kernel microbenchmark (MAMF): an input of the catalog (matmul_efficiency), not a prediction")
    hw = rec.get("hardware") or {}
    if not hw:
        return skip("no hardware: a compute-budget record (FLOPs, tokens), not a run")
    source = source_key(rec)
    gpu_text = hw.get("gpu")
    sku_note = _unstated_sku(source, gpu_text)
    if sku_note is not None:
        gpu_text, sku_note_text = sku_note
    gpu = map_gpu(gpu_text, cat.accelerators())
    if isinstance(gpu, str):
        return skip(gpu)
    acc, notes_gpu = gpu
    if sku_note is not None:
        notes_gpu = (*notes_gpu, sku_note_text)
    power_cap = _power_limit_w(hw.get("gpu"))
    gpus = _int(hw.get("count"))
    if not gpus:
        count = hw.get("count")
        return skip("GPU count not stated" if count is None else f"GPU count not a single number ({count!r})")
    par = rec.get("parallelism")
    if not isinstance(par, Mapping):
        return skip("parallel layout not stated")
    degrees: dict[str, int] = {}
    for k in ("tp", "pp", "cp", "ep"):
        v = par.get(k, 1)
        d = _int(v) if v is not None else 1
        if d is None:
            return skip(f"parallel layout not stated as numbers ({k}={v!r})")
        degrees[k] = d
    if "tp" not in par and "pp" not in par and "fsdp" not in par and "dp" not in par:
        return skip("parallel layout not stated (no tp/pp/dp/fsdp)")
    if isinstance(par.get("fsdp"), str) or isinstance(par.get("dp"), str) or isinstance(par.get("zero_stage"), str):
        return skip("parallel layout not stated as numbers (data-parallel degree as text)")
    tp, pp, cp, ep = degrees["tp"], degrees["pp"], degrees["cp"], degrees["ep"]
    # expert tensor parallelism where the record states it (Megatron-Core --expert-tensor-parallel-size; the
    # schema's parallelism.etp); unstated, gpuplan's default (the tp, as Megatron-Core's)
    etp = _int(par["etp"]) if par.get("etp") is not None else None
    if par.get("etp") is not None and etp is None:
        return skip(f"parallel layout not stated as numbers (etp={par['etp']!r})")
    if gpus % (tp * pp * cp):
        return skip(f"{gpus} GPUs are not a multiple of tp x pp x cp = {tp * pp * cp}")
    dp = gpus // (tp * pp * cp)
    notes: list[str] = list(notes_gpu)
    if _int(par.get("dp")) and _int(par.get("dp")) != dp and not par.get("fsdp"):
        notes.append(f"record's dp {par.get('dp')} differs from GPUs / (tp x pp x cp) = {dp}")
    m = rec.get("model") or {}
    batch: Mapping[str, Any] = rec.get("batch") or {} if isinstance(rec.get("batch"), Mapping) else {}
    seq = _int(m.get("seq_len")) or _int(batch.get("seq_len"))
    gseqs = _int(batch.get("global_batch_seqs"))
    gtokens = batch.get("global_batch_tokens")
    if not seq and gseqs and isinstance(gtokens, (int, float)):
        seq = int(gtokens // gseqs)
    if not seq:
        return skip("sequence length not stated")
    eager = source in _EAGER_ATTENTION_SOURCES
    precision = _training_precision(rec, eager)
    if isinstance(precision, str):
        return skip(precision)
    gpuplan_precision, precision_class, notes_p = precision
    notes += notes_p
    micro = _int(batch.get("micro_batch_seqs"))
    local = _int(batch.get("local_batch_seqs"))
    virtual = _int(par.get("vp")) or _int(par.get("interleaved_stages")) or 1
    if rid in MEGATRON_TABLE1:
        micro, virtual = MEGATRON_TABLE1[rid]
        notes.append("micro-batch and interleaving from the authors' run_table_1.sh")
    if rid in KORTHIKANTI_STAGES:
        virtual = KORTHIKANTI_STAGES[rid]
    if not gseqs and local:
        gseqs = local * dp
    if not gseqs:
        return skip("global batch not stated")
    if micro is None:
        if local and pp == 1 and not _int(batch.get("grad_accum")):
            micro = local
        elif local and pp > 1:
            micro = max(1, local // pp)
            notes.append(
                f"micro-batch not stated: the local batch {local} split into {pp} micro-batches "
                "(one per stage, torchtitan's default)"
            )
        else:
            micro = 1
            notes.append("micro-batch not stated: 1 assumed")
    if gseqs % (micro * dp):
        return skip(f"global batch {gseqs} is not a multiple of micro-batch {micro} x dp {dp}")
    sp = par.get("sequence_parallel")
    sequence_parallel = tp > 1 and (sp is True or (isinstance(sp, str) and "not stated" in sp.lower()))
    if tp > 1 and isinstance(sp, str) and "not stated" in sp.lower():
        notes.append("sequence parallelism not stated: on (Megatron's default with TP > 1)")
    recompute, notes_r = _recompute(par.get("recompute"))
    if source == "arxiv:2104.04473" and notes_r and "not stated" in notes_r[0]:
        recompute, notes_r = "full", ("recomputation not stated: full, as the paper's Eq. 3 FLOP count assumes",)
    notes += notes_r
    stack = _stack(rec, source)
    assume_extra: dict[str, Any] = {}
    fake_gate_config: str | None = None
    automodel = _AUTOMODEL_CONFIGS.get(str(m.get("hf_id") or "")) if stack == "nemo-automodel" else None
    if rid in _NEMO_2407_RECOMPUTE and notes_r and "not stated" in notes_r[0]:
        notes.remove(notes_r[0])
        recompute, yaml = _NEMO_2407_RECOMPUTE[rid]
        notes.append(f"recomputation not stated: NeMo 24.07's recipe (launcher conf/training/{yaml}), {recompute}")
    if automodel is not None:
        ac, cfg_ep, path, loss_upcast = automodel
        if notes_r and "not stated" in notes_r[0]:
            notes.remove(notes_r[0])
            recompute = ac
            notes.append(f"recomputation not stated: the benchmark config's ({path}), {ac}")
        if ep == 1 and cfg_ep > 1:
            ep = cfg_ep
            notes.append(f"expert parallelism not stated: the benchmark config's ({path}), ep {cfg_ep}")
        if cfg_ep > 1 and gpuplan_precision == "bf16-mixed":
            # the MoE benchmark configs build the model in bf16 and step it with a plain torch.optim.Adam, with no
            # mixed-precision policy: weights, gradients and Adam states are all bf16 (gpuplan --precision bf16)
            gpuplan_precision = "bf16"
            notes.append(f"pure bf16 (bf16 weights and torch.optim.Adam states): the benchmark config's ({path})")
        if cfg_ep > 1:
            fake_gate_config = path
        if not loss_upcast:
            # MaskedCrossEntropy(fp32_upcast=False): the loss runs on the bf16 logits as they are
            lossy = same_dtype_loss_assumptions()
            assume_extra.update(lossy)
            notes.append(
                f"loss on the bf16 logits, no fp32 upcast (the benchmark config's ({path}), fp32_upcast: false): "
                + ", ".join(f"--assume {k}={v:g}" for k, v in lossy.items())
            )
    if stack == "torchtitan" and virtual == 1 and "interleaved" in str(par.get("schedule") or "").lower():
        # torchtitan (9dec370, parallelisms/pipelining_utils.py generate_split_points): a multi-stage schedule
        # without split points gets 2 stages per rank
        virtual = 2
        notes.append("interleaved stages per rank not stated: torchtitan's default for multi-stage schedules, 2")
    fsdp = par.get("fsdp") is not None and not isinstance(par.get("fsdp"), str)
    zero = _int(par.get("zero_stage")) or 0
    if par.get("distributed_optimizer") and not zero and not fsdp:
        zero = 1
        notes.append("Megatron distributed optimizer run as ZeRO-1")
    nemo_recipe = stack == "nemo" or "nemo's performance scripts" in str(rec.get("caveats") or "").lower()
    if nemo_recipe and not zero and not fsdp and gpus // (tp * pp) > 1 and "distributed_optimizer" not in par:
        # NeMo's performance recipes train with its distributed optimizer: the launcher configs' optim
        # distributed_fused_adam (NeMo 1.x) and llm.recipes' distributed_fused_adam_with_cosine_annealing,
        # OptimizerConfig(use_distributed_optimizer=True) (NeMo 2.x); optimizer states sharded over dp x cp
        zero = 1
        notes.append("distributed optimizer not stated: NeMo's performance-recipe default, run as ZeRO-1")
    recipe = "auto"
    if stack in ("megatron", "nemo", "megatron-deepspeed") and not fsdp:
        recipe = "megatron" if zero in (0, 1) else "deepspeed"
    # the software stack of the step time, fp8 recipe, torch.compile and overlap, as the record states them
    step_stack = {
        "megatron": "megatron",
        "nemo": "megatron",
        "megatron-deepspeed": "deepspeed" if zero >= 2 else "megatron",
        "torchtitan": "fsdp2",
        "pytorch-fsdp": "fsdp2",
        "nemo-automodel": "fsdp2",
    }.get(stack, "auto")
    if stack == "megatron" and zero >= 2:
        step_stack = "deepspeed-2021"  # Megatron Table 2's ZeRO-3 baseline ran on DeepSpeed of early 2021
    elif step_stack == "megatron" and source == "arxiv:2104.04473":
        # the paper's runs predate Megatron-LM's asynchronous backward TP all-reduce (September 2021)
        step_stack = "megatron-2021"
        notes.append("Megatron-LM of early 2021 (--stack megatron-2021): backward TP all-reduces run in turn")
    compile_ = par.get("torch_compile") is True or metric_is_compile(rec)
    overlap_text = str(par.get("overlap") or "").lower()
    tp_overlap = par.get("async_tp") is True or "--tp-comm-overlap" in overlap_text
    if not tp_overlap and rid in _SOURCE_TP_OVERLAP and _SOURCE_TP_OVERLAP[rid][0]:
        tp_overlap = True
        notes.append(
            f"TP communication overlap not stated: on, as the source's launch settings say "
            f"({_SOURCE_TP_OVERLAP[rid][1]})"
        )
    overlap_grad = True if "--overlap-grad-reduce" in overlap_text else None
    if overlap_grad is None and stack == "nemo":
        # NeMo's recipes train with distributed_fused_adam and optim.overlap_grad_sync: True (NeMo-Framework-Launcher
        # conf/training gpt3/175b.yaml, llama/llama2_70b.yaml)
        overlap_grad = True
        notes.append("gradient reduction overlap not stated: NeMo's recipe default (overlap_grad_sync), on")
    overlap_gather = True if "--overlap-param-gather" in overlap_text else None
    if overlap_gather is None and stack == "nemo":
        # distributed_fused_adam's overlap_param_sync: True in the same recipes
        overlap_gather = True
        notes.append("parameter all-gather overlap not stated: NeMo's recipe default (overlap_param_sync), on")
    fp8_recipe = "auto"
    if gpuplan_precision == "fp8-mixed":
        ptext = str(rec.get("precision") or "").lower()
        for key, name in (
            ("mxfp8", "mxfp8"),
            ("rowwise", "rowwise"),
            ("blockwise", "blockwise"),
            ("tensorwise", "tensorwise"),
            ("delayed", "delayed"),
        ):
            if key in ptext or key == precision_class:
                fp8_recipe = name
                break
    mapped = map_model(rec, cat.models(), out.models, seq, prefer_architecture=eager)
    if isinstance(mapped, str):
        return skip(mapped)
    model_arg, spec, notes_m = mapped
    if fake_gate_config is not None and ep > 1 and spec.moe is not None:
        # the MoE benchmark configs route with FakeBalancedGate and dispatch with DeepEP (backend
        # fake_balanced_gate: true, enable_deepep: true): a token goes once to each rank holding one of its
        # k consecutive experts, not once per expert
        ranks = fake_gate_ranks_per_token(spec.moe.experts, spec.moe.experts_per_token, ep)
        if ranks is not None:
            assume_extra["moe_dispatch_ranks_per_token"] = ranks
            notes.append(
                f"DeepEP dispatch with the fake balanced gate: {ranks:g} expert ranks per token, not "
                f"{spec.moe.experts_per_token} copies (the benchmark config's ({fake_gate_config}); "
                "--assume moe_dispatch_ranks_per_token)"
            )
    notes += notes_m
    if zero == 3 and fsdp:
        zero = 0  # --fsdp sets it
    kwargs: dict[str, Any] = dict(
        model=model_arg,
        gpu=acc.id,
        gpus=gpus,
        tp=tp,
        pp=pp,
        cp=cp,
        ep=ep,
        etp=etp,
        sequence_parallel=sequence_parallel,
        zero=zero,
        fsdp=fsdp,
        micro_batch=micro,
        global_batch=gseqs,
        seq_len=seq,
        recompute=recompute,
        flash_attention=not eager,
        dropout=eager,
        precision=gpuplan_precision,
        recipe=recipe,
        stack=step_stack,
        fp8_recipe=fp8_recipe,
        compile=compile_,
        overlap_grad_reduce=overlap_grad,
        overlap_param_gather=overlap_gather,
        tp_comm_overlap=tp_overlap,
        virtual_stages=virtual,
        tokens=float(gseqs * seq * PLANNED_STEPS),
    )
    if rid in _SOURCE_MEMORY_SETTINGS and recipe in ("auto", "megatron"):
        settings, said = _SOURCE_MEMORY_SETTINGS[rid]
        settings = {k: v for k, v in settings.items() if k != "fp8_params" or gpuplan_precision == "fp8-mixed"}
        kwargs.update(settings, recipe="megatron")
        flags = " ".join(f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}") for k, v in settings.items())
        notes.append(f"memory settings not stated: {flags}, as the source's launch settings say ({said})")
    if power_cap is not None:
        # the record's power cap: the step time scales the SM clock by (cap / TDP)^(1/3) (steptime.power_clock_factor)
        kwargs["assume"] = {"power_limit_w": power_cap}
        notes.append(f"power-limited to {power_cap:g} W (--assume power_limit_w={power_cap:g})")
    fw = rec.get("framework")
    if kwargs.get("fsdp") and isinstance(fw, dict) and "fms-fsdp" in str(fw.get("name", "")).lower():
        # IBM's fms-fsdp trains under its bfSixteen policy: reduce_dtype bfloat16 (fms_fsdp/policies/mixed_precision.py)
        kwargs["main_grads"] = "bf16"
        notes.append("fms-fsdp's bfSixteen policy reduces gradients in bf16 (--main-grads bf16)")
    era = next((why for prefix, why in _ATTENTION_FA2.items() if rid.startswith(prefix)), None)
    if era is not None and kwargs["flash_attention"] and acc.vendor == "nvidia":
        kwargs["attention_kernel"] = "fa2"
        notes.append(f"FlashAttention-2 (--attention-kernel fa2): {era}")
    if rid in _SOURCE_CE_FUSION:
        kwargs["cross_entropy_fusion"] = True
        notes.append(f"loss fusion not stated: on, as the source's launch settings say ({_SOURCE_CE_FUSION[rid]})")
    per_node = _int(hw.get("gpus_per_node")) or 8
    network = _network_bytes_per_s_per_gpu(hw.get("interconnect"), per_node)
    if network is not None and gpus > per_node:
        # the cluster's own network, where the record states it (IBM's 800 Gb/s per 8-GPU node is a quarter of the
        # catalog's one 400 Gb/s NIC per H100)
        kwargs["assume"] = {**kwargs.get("assume", {}), "scale_out_bytes_per_s_per_gpu": network}
        notes.append(
            f"network as stated ('{hw.get('interconnect')}'): {network / 1e9:.3g} GB/s per GPU "
            f"(--assume scale_out_bytes_per_s_per_gpu={network:.3g})"
        )
    if assume_extra:
        kwargs["assume"] = {**kwargs.get("assume", {}), **assume_extra}
    dims = dict(
        source=source,
        gpu_generation=acc.architecture,
        precision=precision_class,
        stack=stack,
        architecture="moe" if spec.moe is not None else "dense",
        confidence=str(rec.get("confidence") or ""),
    )
    values = _throughput_values(rec, gpus, gseqs * seq, seq, source)
    if not values:
        skip(_throughput_skip_reason(rec))
    for variant, metric, published, vnotes, changes in values:
        kw = {**kwargs, **changes}
        if kw["sequence_parallel"] and kw["tp"] == 1:
            kw["sequence_parallel"] = False
        out.cases.append(
            Case(
                id=f"{rid}#{variant}" if variant else rid,
                record=rid,
                file=stem,
                category="training",
                metric=metric,
                quantity="tokens_per_s_per_gpu",
                unit="tokens/s/GPU",
                published=published,
                call="train",
                kwargs=kw,
                notes=tuple(notes) + vnotes,
                **dims,
            )
        )
    for metric, scale, unit in (("peak_memory_gib", 2**30, "GiB"), ("peak_memory_gb", 1e9, "GB")):
        x = _number(_value(rec, metric))
        if x:
            out.cases.append(
                Case(
                    id=f"{rid}#memory",
                    record=rid,
                    file=stem,
                    category="memory",
                    metric=metric,
                    quantity="peak_bytes_per_gpu",
                    unit="bytes",
                    published=x * scale,
                    call="train",
                    kwargs=kwargs,
                    notes=tuple(notes)
                    + (f"published in {unit} (max over ranks of the allocator's reserved or peak memory)",),
                    **dims,
                )
            )


# -------------------------------------------------------------------------------------- memory records

_ZERO_METRICS = {
    "model_state_bytes_per_device_Pos (ZeRO-1)": 1,
    "model_state_bytes_per_device_Pos+g (ZeRO-2)": 2,
    "model_state_bytes_per_device_Pos+g+p (ZeRO-3)": 3,
}


def _map_memory(stem: str, rec: Mapping[str, Any], cat: Any, out: Mapped) -> None:
    """``training_memory``: ZeRO's model states per device (Rajbhandari et al. 2020, Table 1) are scored
    against the weights + gradients + optimizer groups of ``api.train`` (a bare parameter count, fp16 mixed
    precision, Adam); the other records (formulas, the largest trainable model, activation tables, measured
    fine-tuning peaks without a full setup) are listed as skipped."""
    rid = str(rec["id"])
    values = [v for v in rec.get("values") or () if v.get("metric") in _ZERO_METRICS]
    m = rec.get("model") or {}
    params = m.get("params")
    hw = rec.get("hardware") or {}
    gpus = _int(hw.get("count"))
    if not values or not isinstance(params, (int, float)) or not gpus:
        metrics = [str(v.get("metric")) for v in rec.get("values") or ()]
        if any(k.startswith(("per_gpu_", "case1_", "per_cpu")) for k in metrics):
            reason = (
                "DeepSpeed memory-estimator output (model states with its offload cases) for a model the "
                "catalog lacks: not scored yet"
            )
        elif any(k.startswith(("max_", "formula", "trillion", "two_trillion", "gpus_needed")) for k in metrics):
            reason = "largest-model or formula record: an inverse question validate does not score yet"
        elif any(k.startswith("per_layer_activation") or k == "no_parallelism" for k in metrics):
            reason = "activation-memory formulas or a per-layer table: not a whole-run figure gpuplan reports"
        elif any(k.startswith("activations_") for k in metrics):
            reason = (
                "memory breakdown by part from a paper's text (rounded; activations for an unstated layout): "
                "not scored yet"
            )
        else:
            reason = "measured memory without the full setup gpuplan needs (architecture, batch, sequence length)"
        out.skipped.append(Skip(rid, stem, "memory", reason))
        return
    gpu = map_gpu(hw.get("gpu"), cat.accelerators())
    if isinstance(gpu, str):
        out.skipped.append(Skip(rid, stem, "memory", gpu))
        return
    acc, notes = gpu
    count = f"{params / 1e9:g}B"
    for v in values:
        x = _number(v)
        if not x:
            continue
        zero = _ZERO_METRICS[v["metric"]]
        out.cases.append(
            Case(
                id=f"{rid}#zero{zero}",
                record=rid,
                file=stem,
                category="memory",
                metric=v["metric"],
                quantity="model_state_bytes_per_gpu",
                unit="bytes",
                published=x * 1e9,
                call="train",
                kwargs=dict(model=count, gpu=acc.id, gpus=gpus, zero=zero, precision="fp16-mixed", recipe="zero"),
                source=source_key(rec),
                gpu_generation=acc.architecture,
                precision="fp16",
                stack="deepspeed",
                architecture="dense",
                confidence=str(v.get("confidence") or ""),
                measured=False,
                notes=notes + ("model states only: weights + gradients + optimizer groups; a bare parameter count",),
            )
        )


# ------------------------------------------------------------------------------------ inference records

_WEIGHTS = {
    "bf16": "bf16",
    "fp16": "fp16",
    "f16": "fp16",
    "16-bit": "fp16",
    "fp8": "fp8",
    "int8": "int8",
    "int4-awq": "int4-awq",
    "int4-gptq": "int4-gptq",
    "q4_k_m": "gguf-q4_k_m",
    "q8_0": "gguf-q8_0",
    "int4": "int4-g32",
    "nvfp4": "nvfp4",
    "mxfp4": "mxfp4",
}

#: The engine profile (``serve --engine``) of each stack a record names; NIM 1.x serves TensorRT-LLM engines
#: (inference_modern.md caveats); stacks without a profile (Databricks' 2023 server, LMDeploy) run as vLLM.
_ENGINE_PROFILE = {
    "vllm": "vllm",
    "sglang": "sglang",
    "trtllm": "trtllm",
    "nim": "trtllm",
    "tgi": "tgi",
    "llama.cpp": "llama.cpp",
    "gpt-fast": "compiled",
    "exllamav2": "compiled",
}

_SINGLE_STREAM_ENGINES = ("llama.cpp", "exllamav2", "gpt-fast")

#: Stacks that serve NVIDIA ModelOpt checkpoints through TensorRT-LLM: an fp8 checkpoint carries an fp8 KV cache
#: unless the record says otherwise (ModelOpt examples/llm_ptq/hf_ptq.py: --kv_cache_qformat default "fp8").
_MODELOPT_FP8_KV_STACKS = ("nim", "trtllm")

#: Inference metrics gpuplan predicts: metric -> (quantity read from the serve report, unit, scale of the
#: published value to that unit).
_INFERENCE_METRICS: Mapping[str, tuple[str, str, float]] = {
    "decode_tokens_per_s_per_user": ("decode_tokens_per_s_per_user", "tokens/s", 1.0),
    "decode_tokens_per_second": ("decode_tokens_per_s_per_user", "tokens/s", 1.0),
    "tpot_ms_mean": ("tpot_s", "s", 1e-3),
    "itl_ms_mean": ("tpot_s", "s", 1e-3),
    "time_per_output_token": ("tpot_s", "s", 1e-3),
    "ttft_ms_mean": ("ttft_s", "s", 1e-3),
    "time_to_first_token": ("ttft_s", "s", 1e-3),
    "output_tokens_per_s_total": ("output_tokens_per_s_total", "tokens/s", 1.0),
    "output_tokens_per_s_per_gpu": ("output_tokens_per_s_per_gpu", "tokens/s/GPU", 1.0),
    "prompt_tokens_per_s": ("prompt_tokens_per_s", "tokens/s", 1.0),
    "e2e_latency_s": ("request_latency_s", "s", 1.0),
    "requests_per_s": ("requests_per_s_total", "req/s", 1.0),
    "total_tokens_per_s_e2e_batch1": ("total_tokens_per_s_e2e", "tokens/s", 1.0),
    "total_tokens_per_s": ("total_tokens_per_s_total", "tokens/s", 1.0),
}


def _inference_weights(text: Any) -> tuple[str, str, tuple[str, ...]] | str:
    low = str(text or "").lower().strip()
    if low in ("", "unstated", "none"):
        return "bf16", "bf16", ("weights not stated: bf16 assumed",)
    for key in sorted(_WEIGHTS, key=len, reverse=True):
        if key in low:
            return _WEIGHTS[key], _WEIGHTS[key], ()
    if "base" in low:
        return "bf16", "bf16", ()
    return f"weight format '{text}' is not modeled"


def _speculative(rid: str, other: str) -> bool:
    """Whether a serving record used speculative decoding: its id (``mtp3``, ``eagle3``) or its setup notes say
    so ("no MTP", "no speculative decoding" and "whether MTP ... is not stated" do not count)."""
    text = re.sub(r"\bno (mtp|speculative decoding)\b|whether mtp[^;]*", "", other.lower())
    return bool(re.search(r"\bmtp\b|eagle|speculative|draft model", text) or re.search(r"mtp\d|simmtp|eagle", rid))


def _map_inference(stem: str, rec: Mapping[str, Any], cat: Any, out: Mapped) -> None:
    """A serving record: each published latency or throughput that gpuplan predicts for a stated request
    shape (prompt and output tokens) and batch (static) or concurrency (continuous), through ``api.serve``."""
    rid = str(rec["id"])

    def skip(reason: str) -> None:
        out.skipped.append(Skip(rid, stem, "inference", reason))

    modern = stem == "inference_modern"
    hw = rec.get("hardware") or {}
    if not hw:
        return skip("no hardware: a formula record (KV-cache size, MBU definition), not a run")
    setup: Mapping[str, Any] = rec.get("setup") or {}
    if not modern:  # the older file: parallelism / batch / precision blocks
        par = rec.get("parallelism") or {}
        b = rec.get("batch") or {}
        setup = {
            "weights": rec.get("precision"),
            "tp": par.get("tp"),
            "batch": b.get("batch_size"),
            "input_tokens": b.get("input_tokens") or b.get("prompt_tokens"),
            "output_tokens": b.get("output_tokens"),
        }
    if _speculative(rid, str(setup.get("other") or "")):
        return skip("speculative decoding (MTP, Eagle, draft models) is not modeled")
    predictable = [
        str(v.get("metric"))
        for v in rec.get("values") or ()
        if str(v.get("metric")) in _INFERENCE_METRICS
        or re.match(r"(requests_per_second|output_tokens_per_second)_batch_\d+$", str(v.get("metric")))
    ]
    if not predictable:
        names = ", ".join(dict.fromkeys(str(v.get("metric")) for v in rec.get("values") or ()))
        return skip(f"no metric gpuplan predicts ({names})")
    regime = str(rec.get("regime") or "")
    if regime in ("pd-phase-saturated", "production-average", "prefill-only"):
        return skip(f"regime '{regime}' (disaggregated phases, production mixes) is not modeled")
    if any((_int(setup.get(k)) or 1) > 1 for k in ("ep", "dp")):
        return skip("expert- or data-parallel serving layout is not modeled (gpuplan serves tp x pp replicas)")
    gpu = map_gpu(hw.get("gpu"), cat.accelerators())
    if isinstance(gpu, str):
        return skip(gpu)
    acc, notes_gpu = gpu
    notes = list(notes_gpu)
    weights = _inference_weights(setup.get("weights"))
    if isinstance(weights, str):
        return skip(weights)
    weights_arg, weights_class, notes_w = weights
    notes += notes_w
    engine_name = str((rec.get("engine") or {}).get("name") or ("gpt-fast" if "gptfast" in rid else "")).lower()
    if not modern and "databricks" in rid:
        engine_name = "databricks"
    single = engine_name in _SINGLE_STREAM_ENGINES
    count = _int(hw.get("count")) or 1
    tp, pp = _int(setup.get("tp")), _int(setup.get("pp")) or 1
    if tp is None:
        tp = 1 if single and count > 1 else count
        if single and count > 1:
            pp = count
            notes.append(f"{engine_name} splits layers over {count} GPUs: run as pp={count}")
    if count % (tp * pp):
        return skip(f"{count} GPUs are not a multiple of tp x pp = {tp * pp}")
    replicas = count // (tp * pp)
    prompt, output = _int(setup.get("input_tokens")), _int(setup.get("output_tokens"))
    if not prompt:
        return skip("prompt length not stated as a number (a dataset's distribution)")
    if not output:
        if engine_name == "gpt-fast":
            output = 200
            notes.append("output length not stated: gpt-fast's default 200 tokens")
        else:
            output = None
    batch, conc = _int(setup.get("batch")), _int(setup.get("concurrency"))
    m = rec.get("model") or {}
    mapped = map_model(rec, cat.models(), out.models, (prompt or 0) + (output or 0))
    if isinstance(mapped, str):
        return skip(mapped)
    model_arg, spec, notes_m = mapped
    notes += notes_m
    kv = str(setup.get("kv_cache_dtype") or "").lower()
    kv_arg = kv if kv in ("bf16", "fp16", "fp8", "int8") else ("fp16" if weights_arg == "fp16" else "bf16")
    if kv_arg != kv and engine_name in _MODELOPT_FP8_KV_STACKS and weights_arg == "fp8":
        kv_arg = "fp8"
        notes.append(
            "KV cache dtype not stated: fp8, as in the fp8 checkpoints TensorRT-LLM serves (NVIDIA ModelOpt's "
            "hf_ptq.py quantizes the KV cache to fp8 unless told: --kv_cache_qformat defaults to fp8)"
        )
    dims = dict(
        source=source_key(rec),
        gpu_generation=acc.architecture,
        precision=weights_class,
        stack=engine_name or "unstated",
        architecture="moe" if (spec.moe is not None or m.get("moe") is True) else "dense",
        confidence="",
    )
    base = dict(
        model=model_arg,
        gpu=acc.id,
        tp=tp,
        pp=pp,
        replicas=replicas,
        weights=weights_arg,
        kv_cache=kv_arg,
        prompt_tokens=prompt,
        engine=_ENGINE_PROFILE.get(engine_name, "compiled" if single else "vllm"),
    )
    scored = 0
    unscored: list[str] = []
    for v in rec.get("values") or ():
        metric = str(v.get("metric"))
        x = _number(v)
        stat_batch = None
        mm = re.match(r"(requests_per_second|output_tokens_per_second)_batch_(\d+)$", metric)
        if mm:
            stat_batch = int(mm.group(2))
            metric = {"requests_per_second": "requests_per_s", "output_tokens_per_second": "output_tokens_per_s_total"}[
                mm.group(1)
            ]
        spec_m = _INFERENCE_METRICS.get(metric)
        if spec_m is None or x is None:
            unscored.append(metric)
            continue
        if isinstance(v.get("unit"), str) and ("over" in v["unit"].lower() or ">" in v["unit"]):
            unscored.append(metric)  # a lower bound
            continue
        quantity, unit, scale = spec_m
        kw = dict(base)
        b_here = stat_batch or batch
        if b_here:
            kw["batch"] = b_here
        elif conc:
            kw["concurrency"] = conc
        elif regime == "batch-1" or single:
            kw["batch"] = 1
        elif regime == "offline-max-throughput" and not single:
            pass  # all requests at once: the engine runs as many as its batch cap and the KV cache allow
        else:
            unscored.append(metric)
            continue
        out_tokens = output
        if out_tokens is None:
            if quantity in ("ttft_s", "prompt_tokens_per_s"):
                out_tokens = 1
            else:
                unscored.append(metric)
                continue
        kw["output_tokens"] = out_tokens
        if quantity == "tpot_s" and "incl. prefill" in str(v.get("unit", "")):
            quantity = "request_latency_per_output_token_s"
        cnotes = tuple(notes)
        if stat_batch:
            cnotes += (f"static batch {stat_batch} (from the metric name)",)
        out.cases.append(
            Case(
                id=f"{rid}#{v['metric']}",
                record=rid,
                file=stem,
                category="inference",
                metric=str(v["metric"]),
                quantity=quantity,
                unit=unit,
                published=x * scale,
                call="serve",
                kwargs=kw,
                notes=cnotes,
                **{**dims, "confidence": str(v.get("confidence") or "")},
            )
        )
        scored += 1
    if not scored:
        if not batch and not conc and regime != "batch-1" and not single:
            return skip("saturating or rate-driven load without a stated batch or concurrency")
        if output is None:
            return skip("output length not stated")
        return skip(f"no metric gpuplan predicts ({', '.join(dict.fromkeys(unscored)) or 'none'})")


# ------------------------------------------------------------------------- gpuplan's own recordings

#: Memory that a gpuplan report counts but PyTorch's caching allocator does not hand out: the CUDA context and
#: NCCL's buffers live outside the allocator, and ``allocator_reserve`` is the allocator's own slack (reserved,
#: not allocated). ``max_memory_allocated`` is compared with the report's total less these parts.
OUTSIDE_ALLOCATED = ("cuda_context", "nccl_buffers", "allocator_reserve")

#: The engine labels of the decoding recordings (scripts/measure_inference.py) whose decode step no engine
#: profile describes: their TPOT is skipped with this reason; their TTFT and memory are scored (the prefill is the
#: same eager transformers forward in every row, and the memory peak is that prefill's).
_NO_DECODE_PROFILE = (
    "decode replayed from a CUDA graph of transformers' eager kernels (or run eagerly): no engine profile "
    "describes it (--engine hf is torch.compile, compiled is gpt-fast's fused kernels); TTFT and memory scored"
)

#: The TPOT metric of a decoding recording that its ``serve --engine`` profile predicts.
_MEASURED_TPOT = {"hf": "tpot_compiled_s"}


def _measured_dims(rec: Mapping[str, Any], acc: Any, stack: str) -> dict[str, Any]:
    return dict(
        source=source_key(rec),
        gpu_generation=acc.architecture,
        precision="bf16",
        stack=stack,
        architecture="dense",
    )


_BNB_STEP = (
    "step time with bitsandbytes (8-bit Adam or QLoRA's NF4 layers): their per-call cost is not modelled; the "
    "memory of the run is scored"
)


def _map_measured(stem: str, rec: Mapping[str, Any], cat: Any, out: Mapped) -> None:
    """A record of gpuplan's own recordings (``measured_gpu.json``, distilled from docs/measurements/ by
    scripts/distill_measurements.py). Its ``gpuplan`` block gives the catalog ids and the job exactly, so the
    case is the ``api.train`` / ``api.serve`` call tests/test_measurements*.py make:

    - a training run (one GPU, global batch = micro-batch): the median step time as tokens/s per GPU (category
      training), and ``max_memory_allocated`` against the report's total less :data:`OUTSIDE_ALLOCATED`
      (category memory);
    - a decoding run: TTFT and, where the engine has a profile, TPOT (category inference), and
      ``max_memory_allocated`` the same way (category memory)."""
    rid = str(rec["id"])
    kind = str(rec.get("record_type") or "")
    category = "inference" if kind == "inference_run" else "training"
    g = rec.get("gpuplan")
    if not isinstance(g, Mapping) or not isinstance(g.get("job"), Mapping):
        out.skipped.append(Skip(rid, stem, category, "no gpuplan block (model, GPU and job) in the record"))
        return
    if not cat.accelerators().matches(str(g.get("gpu"))):
        out.skipped.append(Skip(rid, stem, category, f"GPU '{g.get('gpu')}' is not in the accelerator catalog"))
        return
    acc = cat.accelerators().get(str(g["gpu"]))
    model = str(g.get("model") or "")
    if len(cat.models().matches(model)) != 1:
        out.skipped.append(Skip(rid, stem, category, f"model '{model}' is not in the model catalog"))
        return
    job: Mapping[str, Any] = g["job"]
    confidence = {str(v.get("metric")): str(v.get("confidence") or "") for v in rec.get("values") or ()}
    measured = {str(v.get("metric")): _number(v) for v in rec.get("values") or ()}
    allocated = measured.get("max_memory_allocated_bytes")
    memory_note = (
        "max_memory_allocated against gpuplan's total less the CUDA context, NCCL buffers and the allocator's "
        "slack (memory the caching allocator does not hand out)"
    )
    if kind == "training_run":
        micro, seq = _int(job.get("micro_batch")), _int(job.get("seq_len"))
        if not (micro and seq):
            out.skipped.append(Skip(rid, stem, "training", "micro-batch or sequence length missing from the job"))
            return
        targets = job.get("lora_targets")
        kwargs: dict[str, Any] = dict(
            model=model,
            gpu=acc.id,
            gpus=1,
            micro_batch=micro,
            global_batch=micro,
            seq_len=seq,
            tokens=float(micro * seq * PLANNED_STEPS),
        )
        for k in ("precision", "recompute", "optimizer", "method", "quant", "lora_rank", "flash_attention"):
            if k in job:
                kwargs[k] = job[k]
        for k in ("recipe", "stack"):
            if job.get(k) not in (None, "auto"):
                kwargs[k] = job[k]
        if isinstance(targets, (list, tuple)):
            kwargs["lora_targets"] = ",".join(str(t) for t in targets)
        dims = _measured_dims(rec, acc, "hf")
        step = measured.get("median_step_s")
        bnb = job.get("optimizer") == "adamw-8bit" or job.get("method") == "qlora"
        if step and bnb:
            # bitsandbytes' 8-bit Adam and NF4 layers spend host and kernel time per call far above the memory
            # traffic the step model charges (docs/measurements/README.md): scored, they would only pull the
            # fitted model_shape_factor of every other run
            out.skipped.append(Skip(rid, stem, "training", _BNB_STEP))
        elif step:
            notes: tuple[str, ...] = ("median step time as tokens/s per GPU (micro-batch x sequence / step)",)
            out.cases.append(
                Case(
                    id=rid,
                    record=rid,
                    file=stem,
                    category="training",
                    metric="median_step_s",
                    quantity="tokens_per_s_per_gpu",
                    unit="tokens/s/GPU",
                    published=micro * seq / step,
                    call="train",
                    kwargs=kwargs,
                    confidence=confidence.get("median_step_s", ""),
                    notes=notes,
                    **dims,
                )
            )
        else:
            out.skipped.append(Skip(rid, stem, "training", "no step time recorded"))
        if allocated:
            out.cases.append(
                Case(
                    id=f"{rid}#memory",
                    record=rid,
                    file=stem,
                    category="memory",
                    metric="max_memory_allocated_bytes",
                    quantity="allocated_bytes_per_gpu",
                    unit="bytes",
                    published=allocated,
                    call="train",
                    kwargs=kwargs,
                    confidence=confidence.get("max_memory_allocated_bytes", ""),
                    notes=(memory_note,),
                    **dims,
                )
            )
        return
    if kind != "inference_run":
        out.skipped.append(Skip(rid, stem, "training", f"record type '{kind}' is not scored"))
        return
    engine = job.get("engine")
    batch, prompt, output = (_int(job.get(k)) for k in ("batch", "prompt_tokens", "output_tokens"))
    if not (batch and prompt and output):
        out.skipped.append(Skip(rid, stem, "inference", "batch, prompt or output length missing from the job"))
        return
    # the decode step of an engine with no profile is not scored, but the prefill and memory are the same
    # eager forward: they are planned with the hf profile (torch.compile decode, eager prefill)
    kw = dict(
        model=model,
        gpu=acc.id,
        tp=1,
        pp=1,
        replicas=1,
        weights=str(job.get("weights") or "bf16"),
        kv_cache=str(job.get("kv_cache") or "bf16"),
        prompt_tokens=prompt,
        output_tokens=output,
        batch=batch,
        engine=str(engine or "hf"),
    )
    notes = (
        f"output_tokens {output}: the recording's StaticCache length less the prompt (prompt + 3 x decode "
        "steps + 16), attended in full",
    )
    dims = _measured_dims(rec, acc, "hf" if engine else str((rec.get("engine") or {}).get("name") or "unstated"))
    # the eager prefill's host floor is the hf profile's (inference.HF_EAGER_HOST_S_PER_LAYER): every TTFT is scored
    wanted: list[tuple[str, str, str, str, tuple[str, ...]]] = [("ttft_s", "ttft_s", "s", "inference", ())]
    tpot_metric = _MEASURED_TPOT.get(str(engine)) if engine else None
    if tpot_metric:
        wanted.append((tpot_metric, "tpot_s", "s", "inference", ()))
    else:
        out.skipped.append(Skip(rid, stem, "inference", _NO_DECODE_PROFILE))
    wanted.append(("max_memory_allocated_bytes", "allocated_bytes_per_gpu", "bytes", "memory", (memory_note,)))
    for metric, quantity, unit, cat_name, extra in wanted:
        x = measured.get(metric)
        if not x:
            continue
        out.cases.append(
            Case(
                id=f"{rid}#{metric}",
                record=rid,
                file=stem,
                category=cat_name,
                metric=metric,
                quantity=quantity,
                unit=unit,
                published=x,
                call="serve",
                kwargs=kw,
                confidence=confidence.get(metric, ""),
                notes=notes + extra,
                **dims,
            )
        )


# ---------------------------------------------------------------------------------------------- mapping

_MAPPERS: Mapping[str, Callable[[str, Mapping[str, Any], Any, Mapped], None]] = {
    "training_modern": _map_training,
    "training_compute": _map_training,
    "training_memory": _map_memory,
    "inference": _map_inference,
    "inference_modern": _map_inference,
    "measured_gpu": _map_measured,
}


def map_records(cat: Any, files: Mapping[str, Mapping[str, Any]]) -> Mapped:
    """Every record of ``files`` (stem -> the loaded file) mapped to cases, or skipped with a reason."""
    out = Mapped()
    for stem, data in files.items():
        recs = data.get("records") or []
        out.records_read[stem] = len(recs)
        for rec in recs:
            try:
                _MAPPERS[stem](stem, rec, cat, out)
            except GpuplanError as e:  # a catalog lookup that failed: say so, never drop the record
                category = FILES[stem]
                if category == MIXED:
                    category = "inference" if rec.get("record_type") == "inference_run" else "training"
                out.skipped.append(Skip(str(rec.get("id")), stem, category, f"gpuplan error while mapping: {e}"))
    return out


def load_files() -> dict[str, dict[str, Any]]:
    """The bundled validation files validate scores (through the catalog layer's reader)."""
    from ..catalog.validation import load_validation

    return {stem: load_validation(stem) for stem in FILES}


# ---------------------------------------------------------------------------------------------- scoring

#: Runs one mapped call: (call "train"/"serve", keywords, extra assumptions) -> the API's report.
Runner = Callable[[str, Mapping[str, Any], Mapping[str, Any]], Any]


def _read(case: Case, report: Any) -> tuple[float, bool]:
    """The predicted value of ``case.quantity`` from the API's report, and whether the run fits."""
    q = case.quantity
    if q == "allocated_bytes_per_gpu":
        # what the caching allocator hands out: the total less the parts outside it and its slack
        mem = report.memory if case.call == "train" else report.serving
        outside = sum(float(mem.parts.get(k, 0.0)) for k in OUTSIDE_ALLOCATED)
        return float(mem.total_bytes) - outside, bool(mem.fits if case.call == "serve" else report.fits)
    if case.call == "train":
        fits = bool(report.fits)
        if q == "tokens_per_s_per_gpu":
            step = report.plan.step
            return step.tokens_per_s / report.layout.gpus, fits
        if q == "peak_bytes_per_gpu":
            return float(report.memory.total_bytes), fits
        if q == "model_state_bytes_per_gpu":
            mem = report.memory
            return float(sum(mem.group_bytes(g) for g in ("weights", "gradients", "optimizer"))), fits
        raise KeyError(q)
    s = report.serving
    fits = bool(s.fits)
    layout = report.layout
    gpus_per_replica = layout.tp * layout.pp
    values = {
        "tpot_s": s.tpot_s,
        # a closed-loop benchmark (--concurrency N: GenAI-Perf, vllm bench serve --max-concurrency) times TTFT from
        # the request's send, so beyond the engine's slots it includes the wait for one: ttft_s + queue_wait_s
        # (serving_plan keeps the wait beside TTFT; under --qps ttft_s already holds the queue's wait). Inside
        # the slots the wait for the prompts ahead to be prefilled is part of ttft_s itself (prefill_wait_s)
        "ttft_s": s.ttft_s + (s.queue_wait_s if s.load is None else 0.0),
        "request_latency_s": s.request_latency_s,
        "request_latency_per_output_token_s": s.request_latency_s / max(1, report.job.output_tokens),
        "decode_tokens_per_s_per_user": 1 / s.tpot_s,
        "output_tokens_per_s_total": s.tokens_per_s * layout.replicas,
        "total_tokens_per_s_total": s.requests_per_s
        * layout.replicas
        * (report.job.prompt_tokens + report.job.output_tokens),
        "output_tokens_per_s_per_gpu": s.tokens_per_s / gpus_per_replica,
        "requests_per_s_total": s.requests_per_s * layout.replicas,
        "prompt_tokens_per_s": report.job.prompt_tokens / s.ttft_s,
        "total_tokens_per_s_e2e": (report.job.prompt_tokens + report.job.output_tokens) / s.request_latency_s,
    }
    return float(values[q]), fits


def score(
    cases: Sequence[Case], run: Runner, assume: Mapping[str, Any] | None = None, cache: dict[str, Any] | None = None
) -> tuple[list[Row], list[Skip]]:
    """Run each case's call (once per distinct call) and compare; a call gpuplan refuses (bad input for
    this configuration) becomes a skip with gpuplan's message."""
    rows: list[Row] = []
    failed: list[Skip] = []
    reports: dict[str, Any] = {} if cache is None else cache
    extra = repr(sorted((assume or {}).items()))

    def once(key: str, call: str, kwargs: Mapping[str, Any]) -> Any:
        """The report of one distinct call (or gpuplan's refusal of it), run at most once."""
        if key not in reports:
            try:
                reports[key] = run(call, kwargs, assume or {})
            except GpuplanError as e:
                reports[key] = e
        return reports[key]

    for case in cases:
        report = once(case.run_key + extra, case.call, case.kwargs)
        if isinstance(report, GpuplanError):
            failed.append(Skip(case.record, case.file, case.category, f"gpuplan refused the mapped run: {report}"))
            continue
        if case.baseline is not None and case.baseline_key is not None:
            # a speed-up: this run's throughput over its baseline's, predicted the same way on the same layout
            base = once(case.baseline_key + extra, case.call, case.baseline)
            if isinstance(base, GpuplanError):
                failed.append(Skip(case.record, case.file, case.category, f"gpuplan refused the baseline run: {base}"))
                continue
            speed = report.plan.step.tokens_per_s / base.plan.step.tokens_per_s
            rows.append(Row(case, float(speed), bool(report.fits and base.fits), bands.class_of(case.call, report)))
            continue
        predicted, fits = _read(case, report)
        rows.append(Row(case, predicted, fits, bands.class_of(case.call, report)))
    return rows, failed


# ------------------------------------------------------------------------------------------ statistics

DIMENSIONS = ("category", "quantity", "gpu_generation", "precision", "stack", "architecture")


def stats(rows: Sequence[Row]) -> dict[str, Any]:
    """Count, MAE, median signed error, and the runs gpuplan says do not fit (each run counted once)."""
    errors = [r.error for r in rows]
    runs = {r.run: r.fits for r in rows if r.case.measured}
    return {
        "count": len(rows),
        "mae": statistics.fmean(abs(e) for e in errors) if errors else None,
        "median_signed_error": statistics.median(errors) if errors else None,
        "measured_runs": len(runs),
        "does_not_fit": sum(1 for fits in runs.values() if not fits),
    }


def summarize(rows: Sequence[Row]) -> dict[str, Any]:
    """``stats`` per category and, within each category, per quantity (what is compared: tokens/s per GPU,
    peak bytes, TPOT, ...), GPU generation, precision, stack and dense/MoE."""
    out: dict[str, Any] = {}
    for category in CATEGORIES:
        sub = [r for r in rows if r.case.category == category]
        if not sub:
            continue
        block: dict[str, Any] = {"all": stats(sub)}
        for dim in DIMENSIONS[1:]:
            groups: dict[str, list[Row]] = {}
            for r in sub:
                groups.setdefault(str(getattr(r.case, dim)), []).append(r)
            block[dim] = {k: stats(v) for k, v in sorted(groups.items())}
        out[category] = block
    return out


# ------------------------------------------------------------------------------- fitted constants, LOSO

#: Re-scores cases with the given assumptions (through the same runner): value -> rows.
Evaluate = Callable[[Sequence[Case], Mapping[str, Any]], list[Row]]


@dataclass(frozen=True)
class FittedConstant:
    """An assumption whose value is fitted on validation records.

    ``name`` is the ``--assume`` name; ``default`` the value the tool uses today (never changed here);
    ``category`` and ``quantity`` select the cases it is fitted on and scored with; ``fit(rows_at, start)``
    returns the fitted value, where ``rows_at(value)`` scores the fitting cases with the constant at
    ``value`` (the real code path, ``--assume name=value``)."""

    name: str
    default: float
    category: str
    quantity: str
    fit: Callable[[Callable[[float], list[Row]], float], float]
    description: str


FITTED_CONSTANTS: list[FittedConstant] = []


def register_fitted_constant(constant: FittedConstant) -> FittedConstant:
    """Add a constant to the LOSO harness (once per name)."""
    FITTED_CONSTANTS[:] = [c for c in FITTED_CONSTANTS if c.name != constant.name] + [constant]
    return constant


def ratio_fit(
    lo: float, hi: float, iterations: int = 3, inverse: bool = False
) -> Callable[[Callable[[float], list[Row]], float], float]:
    """A fit for a constant that throughput is (close to) proportional to: from ``start``, multiply by the
    median of published / predicted, ``iterations`` times (a fixed point; each pass re-runs the cases with
    the new value, since the rest of the step does not scale), clamped to [lo, hi]. ``inverse``: the
    quantity is a time, inversely proportional to the constant (median of predicted / published)."""

    def fit(rows_at: Callable[[float], list[Row]], start: float) -> float:
        value = start
        for _ in range(iterations):
            rows = rows_at(value)
            if not rows:
                return value
            ratios = (r.predicted / r.case.published if inverse else r.case.published / r.predicted for r in rows)
            new = min(hi, max(lo, value * statistics.median(ratios)))
            if abs(new / value - 1) < 1e-3:
                return new
            value = new
        return value

    return fit


def _model_shape_factor_default() -> float:
    from ..estimate.steptime import StepAssumptions

    return StepAssumptions().model_shape_factor


MODEL_SHAPE_FACTOR = register_fitted_constant(
    FittedConstant(
        name="model_shape_factor",
        default=_model_shape_factor_default(),
        category="training",
        quantity="tokens_per_s_per_gpu",
        fit=ratio_fit(0.05, 1.0),
        description="x best-shape MAMF for a model's GEMMs (estimate/steptime.py StepAssumptions); its default "
        "0.77 is this fit as of 2026-11-27 (0.769); later mapping fixes move the fit shown here. Fit: the median of "
        "published / predicted tokens/s per GPU over the training throughput records, three fixed-point passes.",
    )
)


def _inference_default(name: str) -> float:
    from ..estimate.inference import InferenceAssumptions

    return float(getattr(InferenceAssumptions(), name))


PREFILL_COMPUTE_EFFICIENCY = register_fitted_constant(
    FittedConstant(
        name="compute_efficiency",
        default=_inference_default("compute_efficiency"),
        category="inference",
        quantity="ttft_s",
        fit=ratio_fit(0.05, 1.0, inverse=True),
        description="fraction of the dense peak that prefill (and the packed prompt tokens of a mixed step) "
        "reaches (estimate/inference.py InferenceAssumptions); today a hand calibration on Databricks' TTFT "
        "rows. Fit: the median of predicted / published TTFT over the inference TTFT records, three "
        "fixed-point passes.",
    )
)

MEMORY_BANDWIDTH_EFFICIENCY = register_fitted_constant(
    FittedConstant(
        name="memory_bandwidth_efficiency",
        default=_inference_default("memory_bandwidth_efficiency"),
        category="inference",
        quantity="tpot_s",
        fit=ratio_fit(0.05, 1.0, inverse=True),
        description="fraction of datasheet bandwidth a decode step reaches (estimate/inference.py); today "
        "gpt-fast's ~1700 GB/s on A100. Fit: the median of predicted / published TPOT over the inference "
        "TPOT/ITL records, three fixed-point passes.",
    )
)


def _evaluate_by_category(
    constants: Sequence[FittedConstant], cases: Sequence[Case], evaluate: Evaluate, values: Mapping[str, float]
) -> list[Row]:
    """Score ``cases`` with ``values``, each category with only its own constants (a training run does not
    take an inference assumption, and the other way round)."""
    rows: list[Row] = []
    for category in sorted({c.category for c in cases}):
        mine = {c.name for c in constants if c.category == category}
        subset = [c for c in cases if c.category == category]
        rows += evaluate(subset, {k: v for k, v in values.items() if k in mine})
    return rows


def _fit_all(constants: Sequence[FittedConstant], cases: Sequence[Case], evaluate: Evaluate) -> dict[str, float]:
    """Each constant fitted on ``cases`` (the others at their defaults)."""
    out: dict[str, float] = {}
    for c in constants:
        fitting = [x for x in cases if x.category == c.category and x.quantity == c.quantity]

        def rows_at(value: float, fitting: Sequence[Case] = fitting, c: FittedConstant = c) -> list[Row]:
            return evaluate(fitting, {c.name: value})

        out[c.name] = c.fit(rows_at, c.default)
    return out


def loso(
    cases: Sequence[Case],
    default_rows: Sequence[Row],
    evaluate: Evaluate,
    constants: Sequence[FittedConstant] | None = None,
) -> dict[str, Any]:
    """Leave one source out: for each source, fit the constants on the other sources' cases and score the
    held-out source with the refitted values; beside it the in-sample fit (all sources) and today's
    defaults. Only the categories a constant is fitted for are affected; the others score the same."""
    constants = list(FITTED_CONSTANTS if constants is None else constants)
    scored_ids = {r.case.id for r in default_rows}
    cases = [c for c in cases if c.id in scored_ids]
    out: dict[str, Any] = {"constants": [], "folds": [], "categories": {}}
    if not constants:
        return out
    relevant = {(c.category, c.quantity) for c in constants}
    fitted_cases = [c for c in cases if (c.category, c.quantity) in relevant]
    in_sample = _fit_all(constants, fitted_cases, evaluate)
    in_rows = _evaluate_by_category(constants, fitted_cases, evaluate, in_sample)
    loso_rows: list[Row] = []
    for source in sorted({c.source for c in fitted_cases}):
        held = [c for c in fitted_cases if c.source == source]
        rest = [c for c in fitted_cases if c.source != source]
        values = _fit_all(constants, rest, evaluate) if rest else {c.name: c.default for c in constants}
        rows = _evaluate_by_category(constants, held, evaluate, values)
        loso_rows += rows
        out["folds"].append(
            {
                "source": source,
                "held_out": len(held),
                "fitted_on": len(rest),
                "constants": values,
                "held_out_mae": stats(rows)["mae"],
            }
        )
    for c in constants:
        out["constants"].append(
            {
                "name": c.name,
                "default": c.default,
                "category": c.category,
                "quantity": c.quantity,
                "fitted_in_sample": in_sample[c.name],
                "description": c.description,
            }
        )
    for category in sorted({c.category for c in constants}):
        d = [r for r in default_rows if r.case.category == category and (category, r.case.quantity) in relevant]
        i = [r for r in in_rows if r.case.category == category]
        lo_ = [r for r in loso_rows if r.case.category == category]
        out["categories"][category] = {"default": stats(d), "in_sample": stats(i), "loso": stats(lo_)}
    return out


# ------------------------------------------------------------------------------------------ error bands


def band_coverage(rows: Sequence[Row]) -> dict[str, Any]:
    """The error bands' calibration on these rows (:mod:`gpuplan.plan.bands`): per category (training,
    inference) the share of values inside their own P10-P90 band, in sample and leave-one-source-out (the
    band of a value built from the other sources' residuals), against the 75-85 % target."""
    return {
        "method": bands.METHOD,
        "target": "75-85 % of values inside their own P10-P90 band, leave-one-source-out",
        "coverage": bands.coverage(bands.residuals(rows)),
    }


# ---------------------------------------------------------------------------------------------- report


@dataclass(frozen=True)
class ValidateReport:
    """``gpuplan validate``: the scored rows, the skipped records with reasons, the summary by category,
    GPU generation, precision, stack and dense/MoE, and the LOSO harness's figures. ``to_dict()`` is the
    ``--json`` record; ``exit_code`` is 0 (validate reports accuracy, it does not judge it)."""

    kind: ClassVar[str] = "validate"
    category: str | None
    rows: tuple[Row, ...]
    skipped: tuple[Skip, ...]
    records_read: Mapping[str, int]
    loso: Mapping[str, Any]
    #: error-band coverage (:mod:`gpuplan.plan.bands`): per category, in sample and leave-one-source-out
    bands: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def fits(self) -> bool:
        return True

    @property
    def exit_code(self) -> int:
        return 0

    def summary(self) -> dict[str, Any]:
        return summarize(self.rows)

    def to_dict(self) -> dict[str, Any]:
        by_reason: dict[str, int] = {}
        for s in self.skipped:
            by_reason[s.reason] = by_reason.get(s.reason, 0) + 1
        scored = {(r.case.file, r.case.record) for r in self.rows}
        return records.envelope(
            "validate",
            category=self.category,
            files={stem: {"records": n, "category": FILES[stem]} for stem, n in self.records_read.items()},
            not_scored_files=dict(NOT_SCORED),
            error_definition="signed relative error = predicted / published - 1; MAE = mean |error|",
            counts={
                "values_scored": len(self.rows),
                "records_scored": len(scored),
                "records_skipped": len({(s.file, s.record) for s in self.skipped} - scored),
                "skip_entries": len(self.skipped),
                "measured_runs": len({r.run for r in self.rows if r.case.measured}),
                "measured_runs_does_not_fit": len({r.run for r in self.rows if r.case.measured and not r.fits}),
            },
            summary=summarize(self.rows),
            loso=dict(self.loso),
            bands=dict(self.bands),
            rows=[r.to_dict() for r in self.rows],
            skipped=[s.to_dict() for s in self.skipped],
            skipped_by_reason=dict(sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))),
        )


def validate(
    cat: Any,
    run: Runner,
    *,
    category: str | None = None,
    files: Mapping[str, Mapping[str, Any]] | None = None,
    constants: Sequence[FittedConstant] | None = None,
) -> ValidateReport:
    """Map every bundled record (``files``: stem -> loaded file, default the bundled ones), register the
    models built from records' architectures in ``cat``'s model registry, score through ``run`` (the API's
    train / serve), and run the LOSO harness."""
    mapped = map_records(cat, files if files is not None else load_files())
    registry = cat.models()
    for spec in mapped.models.values():
        registry.add(spec)
    cases = [c for c in mapped.cases if category is None or c.category == category]
    skipped = [s for s in mapped.skipped if category is None or s.category == category]
    cache: dict[str, Any] = {}
    rows, failed = score(cases, run, cache=cache)
    skipped += failed

    def evaluate(subset: Sequence[Case], assume: Mapping[str, Any]) -> list[Row]:
        got, _ = score(subset, run, assume=assume, cache=cache)
        return got

    wanted = [
        c for c in (FITTED_CONSTANTS if constants is None else constants) if category is None or c.category == category
    ]
    harness = loso(cases, rows, evaluate, wanted)
    read = {
        stem: n
        for stem, n in mapped.records_read.items()
        if category is None or FILES[stem] in (category, MIXED) or (category == "memory" and FILES[stem] == "training")
    }
    return ValidateReport(
        category=category,
        rows=tuple(rows),
        skipped=tuple(skipped),
        records_read=read,
        loso=harness,
        bands=band_coverage(rows),
        warnings=tuple(getattr(cat, "warnings", ())),
    )
